// The daemon's life cycle through real mounts: installed as
// mount.fuse3's fuse.tfrecordfs type and from fstab, detaching only once the
// mount is ready, the mount record unmount waits for, relative paths after
// detaching, the log file unmount names.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "generated_dataset.h"
#include "gtest/gtest.h"
#include "mount_cli_util.h"
#include "mount_harness.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/writer.h"
#include "tfrecordfs/staging/layout.h"

namespace tfrecordfs::mount_test {
namespace {

// `meson install --destdir` puts the binary, its man page and the bash
// completion in the prefix, and mount(8) with type fuse.tfrecordfs runs that
// prefix's binary from PATH (through mount.fuse3).
TEST(InstallTest, InstalledBinaryMountsWithMountTypeFuseTfrecordfs) {
  TFRFS_SKIP_WITHOUT_FUSE();
  const char* build_root = std::getenv("TFRECORDFS_BUILD_ROOT");
  if (build_root == nullptr) GTEST_SKIP() << "TFRECORDFS_BUILD_ROOT is not set";
  if (RunCommand({"meson", "--version"}).exit_code != 0) {
    GTEST_SKIP() << "meson is not in PATH at test time: cannot test `meson install`";
  }
  if (::geteuid() != 0) GTEST_SKIP() << "mount -t fuse.tfrecordfs without fstab needs root";
  TempDir tmp;
  const std::string dest = tmp.path() + "/dest";
  CommandResult inst = RunCommand(
      {"meson", "install", "-C", build_root, "--no-rebuild", "--quiet", "--destdir", dest});
  ASSERT_EQ(inst.exit_code, 0) << inst.out << inst.err;
  CommandResult prefix = RunCommand(
      {"meson", "introspect", build_root, "--buildoptions"});  // JSON; find the prefix value
  std::string pre = "/usr/local";
  if (size_t at = prefix.out.find("\"name\": \"prefix\""); at != std::string::npos) {
    const size_t v = prefix.out.find("\"value\": \"", at);
    if (v != std::string::npos) {
      const size_t b = v + 10, e = prefix.out.find('"', b);
      pre = prefix.out.substr(b, e - b);
    }
  }
  const std::string bin = dest + pre + "/bin/tfrecordfs";
  ASSERT_EQ(::access(bin.c_str(), X_OK), 0) << bin;
  bool man = false, completion = false;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dest + pre)) {
    const std::string p = e.path().string();
    man |= p.ends_with("/man1/tfrecordfs.1");
    completion |= p.ends_with("/completions/tfrecordfs");
  }
  EXPECT_TRUE(man) << "no man1/tfrecordfs.1 under " << dest + pre << " (is scdoc installed?)";
  EXPECT_TRUE(completion) << "no bash completion under " << dest + pre;

  // mount(8) hands its helpers a fixed PATH (/usr/local/sbin:/usr/local/bin:
  // /usr/sbin:/usr/bin:/sbin:/bin), whatever ours is: the prefix's bin must
  // be on it, and the installed binary is made the one found there by
  // bind-mounting it over PREFIX/bin in a private mount namespace.
  ASSERT_TRUE(pre == "/usr/local" || pre == "/usr")
      << "prefix " << pre << ": mount -t fuse.tfrecordfs will not find " << pre
      << "/bin/tfrecordfs";
  if (RunCommand({"unshare", "--version"}).exit_code != 0) GTEST_SKIP() << "no unshare(1)";
  const std::string src = tmp.Subdir("src");
  const GenDataset ds = WriteDataset(src, 6);
  const std::string mnt = std::filesystem::canonical(tmp.Subdir("mnt")).string();
  const std::string script =
      "set -e; mount --bind " + ShellQuote(Dirname(bin)) + " " + pre + "/bin; " +
      "mount -t fuse.tfrecordfs -o ro," + ShellQuote(IsolationOptions(tmp)) + " " +
      ShellQuote(src) + " " + ShellQuote(mnt) + "; " + "cat " +
      ShellQuote(mnt + "/one.tfrecord/0/label") + "; " + "pid=$(pgrep -f -n -- " +
      ShellQuote("tfrecordfs .*" + mnt) + "); " + "echo exe=$(stat -L -c %d:%i /proc/$pid/exe); " +
      "umount " + ShellQuote(mnt) + "; " + "while kill -0 $pid 2>/dev/null; do sleep 0.05; done";
  CommandResult r = RunCommand({"unshare", "-m", "--propagation", "private", "sh", "-c", script});
  ASSERT_EQ(r.exit_code, 0) << "stdout: " << r.out << "\nstderr: " << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find("exe=")), ds.Expected().at("one.tfrecord/0/label").content);
  struct stat st;
  ASSERT_EQ(::stat(bin.c_str(), &st), 0);
  EXPECT_NE(r.out.find("exe=" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino)),
            std::string::npos)
      << "mount.fuse3 ran another tfrecordfs than the installed one: " << r.out;
}

// The mount records `tfrecordfs unmount` reads ($XDG_RUNTIME_DIR/tfrecordfs,
// one file per mount point), as name -> contents.
std::map<std::string, std::string> MountRecords() {
  std::map<std::string, std::string> out;
  const std::string dir = std::string(std::getenv("XDG_RUNTIME_DIR")) + "/tfrecordfs";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".mount") out[e.path().string()] = ReadWholeFile(e.path().string());
  }
  return out;
}

// Without -f the command returns only once the mount serves requests and
// its record is written: a stat and `tfrecordfs unmount` right after it
// returns must succeed, with no polling in between.
// An unmount that waits long (a daemon releasing millions of cached files)
// says on a terminal what it waits for, and how long it took; a script's
// output stays as it was. The daemon is made slow to exit by a test hook.
TEST(DaemonTest, SlowUnmountSaysWhatItWaitsForOnATerminal) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (RunCommand({"sh", "-c", "command -v script"}).exit_code != 0) {
    GTEST_SKIP() << "no script(1) (util-linux) to give unmount a terminal";
  }
  TempDir tmp;
  const GenDataset ds = WriteDataset(tmp.Subdir("src"), 5);
  for (const bool terminal : {true, false}) {
    const std::string mnt =
        std::filesystem::canonical(tmp.Subdir(terminal ? "mnt-tty" : "mnt-pipe")).string();
    DetachedGuard guard(mnt);
    CommandResult r = RunCommand({"env", "TFRECORDFS_FAULT=slow_exit", Bin(), "-o",
                                  IsolationOptions(tmp) + ",ro", ds.root, mnt});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string unmount = ShellQuote(Bin()) + " unmount " + ShellQuote(mnt);
    CommandResult u = terminal ? RunCommand({"script", "-qec", unmount, "/dev/null"})
                               : RunCommand({"sh", "-c", unmount});
    ASSERT_EQ(u.exit_code, 0) << u.out << u.err;
    const std::string said = u.out + u.err;
    const bool waited = said.find("waiting for the daemon") != std::string::npos &&
                        said.find("to exit: done in") != std::string::npos;
    EXPECT_EQ(waited, terminal) << said;
    EXPECT_NE(said.find("nothing packed"), std::string::npos) << said;
    EXPECT_TRUE(DaemonGone(mnt));
  }
}

TEST(DaemonTest, DetachesOnlyOnceTheMountIsReady) {
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  const GenDataset ds = WriteDataset(tmp.Subdir("src"), 5);
  const std::string mnt = std::filesystem::canonical(tmp.Subdir("mnt")).string();
  DetachedGuard guard(mnt);
  const std::string rel = "train-00001-of-00002/042/image/encoded.jpg";

  CommandResult r = RunCommand({Bin(), "-o", IsolationOptions(tmp), ds.root, mnt});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t records = 0;
  for (const auto& [path, text] : MountRecords()) {
    records += text.find("mountpoint=" + mnt + "\n") != std::string::npos;
  }
  EXPECT_EQ(records, 1u) << "the launching process returned before the mount's record was written";
  struct stat st;
  ASSERT_EQ(::stat((mnt + "/" + rel).c_str(), &st), 0) << std::strerror(errno);
  EXPECT_TRUE(IsMounted(mnt, "fuse.tfrecordfs"));
  const ExpectedTree expected = ds.Expected();
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), expected.at(rel).content.size());
  EXPECT_EQ(ReadWholeFile(mnt + "/" + rel), expected.at(rel).content);

  // One detached daemon serves the mount; the launching process is gone.
  const std::vector<pid_t> daemons = FindDaemons(mnt);
  EXPECT_EQ(daemons.size(), 1u);

  CommandResult u = RunCommand({"fusermount3", "-u", mnt});
  ASSERT_EQ(u.exit_code, 0) << u.err;
  EXPECT_TRUE(DaemonGone(mnt)) << "the daemon did not exit after fusermount3 -u";
  EXPECT_EQ(::stat((mnt + "/" + rel).c_str(), &st), -1);
}

// A foreground daemon (-f) writes its mount record just after the mount
// appears, so a script that waited for the mount point can ask for the
// unmount in between: `tfrecordfs unmount` then waits for the record while
// the path is a live tfrecordfs mount, instead of calling it no mount. The
// window is made wide here by taking the record away for 300 ms.
TEST(DaemonTest, UnmountWaitsForAForegroundMountsRecord) {
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  const GenDataset ds = WriteDataset(tmp.Subdir("src"), 6);
  const std::string mnt = std::filesystem::canonical(tmp.Subdir("mnt")).string();
  DetachedGuard guard(mnt);
  // Started from a shell that exits, so the daemon is no child of the test
  // (`unmount` waits for its pid to go, which a zombie never does).
  ASSERT_EQ(Shell(ShellQuote(Bin()) + " -f -o " + ShellQuote("ro," + IsolationOptions(tmp)) + " " +
                  ShellQuote(ds.root) + " " + ShellQuote(mnt) + " >" +
                  ShellQuote(tmp.path() + "/daemon.log") + " 2>&1 &")
                .exit_code,
            0);
  std::string record_path, record_text;
  ASSERT_TRUE(WaitUntil([&] {
    for (const auto& [path, text] : MountRecords()) {
      if (text.find("mountpoint=" + mnt + "\n") != std::string::npos) {
        record_path = path;
        record_text = text;
      }
    }
    return !record_path.empty();
  })) << "no mount record; daemon log:\n"
      << ReadWholeFile(tmp.path() + "/daemon.log");
  ASSERT_EQ(::unlink(record_path.c_str()), 0);
  std::thread restore([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    WriteWholeFile(record_path, record_text);
  });
  CommandResult u = RunCommand({Bin(), "unmount", mnt});
  restore.join();
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  EXPECT_EQ(u.out, "result: ok\nread-only mount: nothing packed\n");
  EXPECT_TRUE(DaemonGone(mnt));

  // A path that is no mount at all is still refused at once.
  u = RunCommand({Bin(), "unmount", mnt});
  EXPECT_EQ(u.exit_code, 1);
  EXPECT_NE(u.err.find("is not a tfrecordfs mount"), std::string::npos) << u.err;
}

// Issue 15, item 1: `cd dir && tfrecordfs src mnt` with every path relative.
// The detached daemon runs in "/", so a path kept relative would name
// nothing there: plain files (opened on read), the staging store and the
// pack output (used after unmount) must all have been made absolute.
TEST(DaemonTest, RelativePathsWorkAfterDetaching) {
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  const GenDataset ds = WriteDataset(tmp.Subdir("src"), 3);
  tmp.Subdir("mnt");
  tmp.Subdir("out");
  const std::string mnt = std::filesystem::canonical(tmp.path() + "/mnt").string();
  DetachedGuard guard(mnt);
  const std::string in_tmp = "cd " + ShellQuote(tmp.path()) + " && ";
  CommandResult r =
      Shell(in_tmp + ShellQuote(Bin()) + " -o staging_dir=store,output_dir=out src mnt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const ExpectedTree expected = ds.Expected();
  // A plain file is opened by its source path only when read.
  for (const std::string rel : {"dataset_info.json", "train-00000-of-00002/03/record.bin"}) {
    EXPECT_EQ(ReadWholeFile(mnt + "/" + rel), expected.at(rel).content) << rel;
  }
  // A staged record is packed after unmount, from the store into out/.
  CommandResult st = Shell(in_tmp + "mkdir mnt/staging/r && echo 7 > mnt/staging/r/label");
  ASSERT_EQ(st.exit_code, 0) << st.err;
  CommandResult u = Shell(in_tmp + ShellQuote(Bin()) + " unmount mnt");
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  EXPECT_TRUE(DaemonGone(mnt));
  size_t shards = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path() + "/out")) {
    shards += e.path().extension() == ".tfrecord";
  }
  EXPECT_EQ(shards, 1u) << "the staged record was not packed into out/: " << u.out << u.err;
  EXPECT_FALSE(std::filesystem::exists(staging::RecordsDir(tmp.path() + "/store") + "/r"));
  // Nothing was created relative to "/" by the daemon.
  EXPECT_FALSE(std::filesystem::exists("/store"));
  EXPECT_FALSE(std::filesystem::exists("/out"));
}

// A shard of `n` Examples (int64 `n`, text `name`); record `damaged`'s data
// has one bit flipped, so its data CRC fails. *offsets gets each record's
// byte offset.
std::string DamagedShard(int n, int damaged, std::vector<uint64_t>* offsets) {
  std::string bytes;
  std::vector<std::string> texts;
  for (int r = 0; r < n; ++r) texts.push_back("record " + std::to_string(r));
  for (int r = 0; r < n; ++r) {
    example::FeatureTable t;
    example::Feature name, num;
    name.name = "name";
    name.kind = example::Kind::kBytes;
    name.bytes.push_back(texts[r]);
    num.name = "n";
    num.kind = example::Kind::kInt64;
    num.int64s = {r};
    t.features = {num, name};  // sorted by name
    offsets->push_back(bytes.size());
    record::AppendFramed(&bytes, example::EncodeExample(t));
  }
  bytes[(*offsets)[damaged] + record::kHeaderSize + 2] ^= 0x10;
  return bytes;
}

std::string GetXattr(const std::string& path, const std::string& name) {
  char buf[4096];
  const ssize_t n = ::getxattr(path.c_str(), name.c_str(), buf, sizeof buf);
  if (n < 0) return std::string("errno ") + std::strerror(errno);
  return std::string(buf, static_cast<size_t>(n));
}

// Issue 11: a detached daemon (no -f) logs to a file under the private
// $XDG_STATE_HOME: a damaged record read through the mount fails with EIO,
// its reason is in that file and in the record folder's xattrs, and
// `tfrecordfs unmount` names the file. Xattrs are read with getxattr(2) and,
// where installed (scripts/setup installs `attr`), with getfattr -d.
TEST(DaemonTest, DetachedDaemonLogsToAFileThatUnmountNames) {
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  std::vector<uint64_t> offsets;
  WriteWholeFile(tmp.Subdir("src") + "/bad.tfrecord", DamagedShard(4, 2, &offsets));
  const std::string mnt = std::filesystem::canonical(tmp.Subdir("mnt")).string();
  DetachedGuard guard(mnt);
  CommandResult r = RunCommand({Bin(), "-o", IsolationOptions(tmp), tmp.path() + "/src", mnt});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  // Xattrs of an intact record and its files.
  const std::string rec1 = mnt + "/bad.tfrecord/1";
  EXPECT_EQ(GetXattr(rec1, "user.tfrecordfs.record"), "1");
  EXPECT_EQ(GetXattr(rec1, "user.tfrecordfs.offset"), std::to_string(offsets[1]));
  EXPECT_EQ(GetXattr(rec1, "user.tfrecordfs.length"),
            std::to_string(offsets[2] - offsets[1] - record::kFramingOverhead));
  EXPECT_EQ(GetXattr(rec1, "user.tfrecordfs.shard"), tmp.path() + "/src/bad.tfrecord");
  EXPECT_EQ(GetXattr(rec1 + "/n", "user.tfrecordfs.kind"), "int64");
  EXPECT_EQ(GetXattr(rec1 + "/name.txt", "user.tfrecordfs.feature"), "name");
  EXPECT_EQ(GetXattr(rec1 + "/name.txt", "user.tfrecordfs.kind"), "text");
  EXPECT_EQ(GetXattr(rec1, "user.nothing"), std::string("errno ") + std::strerror(ENODATA));
  EXPECT_EQ(::setxattr(rec1.c_str(), "user.x", "1", 1, 0), -1);
  EXPECT_EQ(errno, EPERM);
  if (::access("/usr/bin/getfattr", X_OK) == 0) {
    CommandResult g = RunCommand({"getfattr", "-d", rec1 + "/name.txt"});
    EXPECT_EQ(g.exit_code, 0) << g.err;
    EXPECT_NE(g.out.find("user.tfrecordfs.feature=\"name\""), std::string::npos) << g.out;
    EXPECT_NE(g.out.find("user.tfrecordfs.kind=\"text\""), std::string::npos) << g.out;
  }

  // The damaged record: EIO, then its reason as an xattr.
  const std::string rec2 = mnt + "/bad.tfrecord/2";
  struct stat st;
  EXPECT_EQ(::stat((rec2 + "/n").c_str(), &st), -1);
  EXPECT_EQ(errno, EIO);
  const std::string reason = GetXattr(rec2, "user.tfrecordfs.error");
  EXPECT_NE(reason.find("record 2 at byte offset " + std::to_string(offsets[2])), std::string::npos)
      << reason;

  CommandResult u = RunCommand({Bin(), "unmount", mnt});
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  EXPECT_TRUE(DaemonGone(mnt));
  // The log file: the default place, named after the mount point, holding
  // the mount point and the EIO's reason; unmount's output names it.
  const char* state = std::getenv("XDG_STATE_HOME");
  ASSERT_NE(state, nullptr);
  std::string log_path;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(state) + "/tfrecordfs/log")) {
    if (ReadWholeFile(e.path()).find(" on " + mnt + " (pid") != std::string::npos)
      log_path = e.path();
  }
  ASSERT_FALSE(log_path.empty()) << "no log file names " << mnt;
  const std::string log = ReadWholeFile(log_path);
  EXPECT_NE(log.find("error: " + reason), std::string::npos) << log;
  EXPECT_NE(u.err.find(log_path), std::string::npos) << "unmount did not name the log: " << u.err;
  EXPECT_NE(u.err.find("1 error(s)"), std::string::npos) << u.err;
}

// -o log=PATH: the daemon logs there; an unmount after nothing went wrong (the
// damaged record is never read) says nothing about it.
TEST(DaemonTest, LogOptionNamesTheFile) {
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  std::vector<uint64_t> offsets;
  WriteWholeFile(tmp.Subdir("src") + "/bad.tfrecord", DamagedShard(3, 1, &offsets));
  const std::string mnt = std::filesystem::canonical(tmp.Subdir("mnt")).string();
  const std::string log_path = tmp.path() + "/logs/mount.log";
  DetachedGuard guard(mnt);
  CommandResult r = RunCommand(
      {Bin(), "-o", IsolationOptions(tmp) + ",log=" + log_path, tmp.path() + "/src", mnt});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadWholeFile(mnt + "/bad.tfrecord/0/n"), "0\n");
  CommandResult u = RunCommand({Bin(), "unmount", mnt});
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  EXPECT_EQ(u.err.find(log_path), std::string::npos)
      << "nothing went wrong, yet unmount pointed at the log: " << u.err;
  EXPECT_TRUE(DaemonGone(mnt));
  EXPECT_NE(ReadWholeFile(log_path).find(" on " + mnt + " (pid"), std::string::npos);
}

// fstab style: mount(8) -> mount.fuse3 -> `/bin/sh -c 'tfrecordfs' SOURCE MNT
// -o OPTS`. mount.fuse3 finds the program by the type's subtype name in PATH.
// util-linux mount(8) removes PATH from the helper's environment (the shell
// then searches its default system PATH), so a freshly built binary cannot be
// found through `mount -t fuse.tfrecordfs` without installing it. Hence two
// tests: mount.fuse3 itself with the build's binary first in PATH, and
// mount(8) with mount.fuse3's `PROGRAM#SOURCE` form naming the binary.
class FstabTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TFRFS_SKIP_WITHOUT_FUSE();
    for (const char* p : {"/sbin/mount.fuse3", "/usr/sbin/mount.fuse3", "/usr/bin/mount.fuse3"}) {
      if (::access(p, X_OK) == 0) helper_ = p;
    }
    if (helper_.empty()) GTEST_SKIP() << "mount.fuse3 is not installed (package fuse3)";
    const bool have_mount =
        ::access("/bin/mount", X_OK) == 0 || ::access("/usr/bin/mount", X_OK) == 0;
    if (!have_mount) GTEST_SKIP() << "mount(8) is not installed";
    if (::geteuid() != 0)
      GTEST_SKIP() << "mounting through mount.fuse3 without an fstab entry needs root";
    ds_ = WriteDataset(tmp_.Subdir("src"), 6);
    mnt_ = std::filesystem::canonical(tmp_.Subdir("mnt")).string();
    bindir_ = tmp_.Subdir("bin");
    ASSERT_EQ(::symlink(Bin().c_str(), (bindir_ + "/tfrecordfs").c_str()), 0)
        << std::strerror(errno);
    guard_ = std::make_unique<DetachedGuard>(mnt_);
  }

  // Checks a few files, then unmounts with umount(8) and waits for the
  // daemon to exit.
  void CheckAndUnmount() {
    ASSERT_TRUE(IsMounted(mnt_, "fuse.tfrecordfs"));
    const ExpectedTree expected = ds_.Expected();
    for (const std::string rel :
         {"one.tfrecord/0/label", "dataset_info.json", "train-00000-of-00002/03/record.bin"}) {
      EXPECT_EQ(ReadWholeFile(mnt_ + "/" + rel), expected.at(rel).content) << rel;
    }
    EXPECT_EQ(FindDaemons(mnt_).size(), 1u);
    CommandResult u = RunCommand({"umount", mnt_});
    ASSERT_EQ(u.exit_code, 0) << u.err;
    EXPECT_TRUE(DaemonGone(mnt_)) << "the daemon did not exit after umount";
  }

  TempDir tmp_;
  GenDataset ds_;
  std::string helper_, mnt_, bindir_;
  std::unique_ptr<DetachedGuard> guard_;
};

TEST_F(FstabTest, MountFuse3RunsTfrecordfsFoundInPath) {
  const char* path = std::getenv("PATH");
  const std::string new_path = bindir_ + ":" + (path ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
  // Exactly what mount(8) runs for `SOURCE MNT fuse.tfrecordfs OPTS` in fstab.
  CommandResult r = RunCommand({helper_, ds_.root, mnt_, "-t", "tfrecordfs", "-o",
                                "rw,nosuid,nodev," + IsolationOptions(tmp_)},
                               new_path);
  ASSERT_EQ(r.exit_code, 0) << "stdout: " << r.out << "\nstderr: " << r.err;
  CheckAndUnmount();
}

TEST_F(FstabTest, MountCommandWithTypeFuse) {
  CommandResult r = RunCommand({"mount", "-t", "fuse", "-o", IsolationOptions(tmp_),
                                bindir_ + "/tfrecordfs#" + ds_.root, mnt_});
  ASSERT_EQ(r.exit_code, 0) << "stdout: " << r.out << "\nstderr: " << r.err;
  CheckAndUnmount();
}

}  // namespace
}  // namespace tfrecordfs::mount_test
