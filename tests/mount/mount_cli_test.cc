// The command line and the daemon life cycle: exit codes, detaching only once
// the mount is ready, and `mount -t fuse.tfrecordfs` through mount.fuse3.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "generated_dataset.h"
#include "gtest/gtest.h"
#include "mount_harness.h"

namespace tfrecordfs::mount_test {
namespace {

// Keeps the staging store and pack output of a daemon the harness does not
// own inside `tmp` (see Mount::Start).
std::string IsolationOptions(const TempDir& tmp) {
  return "staging_dir=" + tmp.path() + "/store,output_dir=" + tmp.Subdir("out");
}

// Unmounts and kills whatever a detached daemon left behind when a test
// fails half-way.
class DetachedGuard {
 public:
  explicit DetachedGuard(std::string mnt) : mnt_(std::move(mnt)) {}
  ~DetachedGuard() {
    if (IsMounted(mnt_)) RunCommand({"fusermount3", "-u", "-z", mnt_});
    for (pid_t pid : FindDaemons(mnt_)) ::kill(pid, SIGKILL);
  }

 private:
  std::string mnt_;
};

// Waits for every tfrecordfs process serving `mnt` to exit and the mount to
// disappear.
bool DaemonGone(const std::string& mnt) {
  return WaitUntil([&] { return FindDaemons(mnt).empty() && !IsMounted(mnt); });
}

std::string Bin() { return BinaryPath(); }

TEST(CliTest, HelpAndVersionExitZero) {
  if (Bin().empty()) GTEST_SKIP() << "TFRECORDFS_BIN is not set";
  for (const char* flag : {"--help", "-h"}) {
    CommandResult r = RunCommand({Bin(), flag});
    EXPECT_EQ(r.exit_code, 0) << flag;
    EXPECT_NE(r.out.find("Usage: tfrecordfs"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("MOUNTPOINT"), std::string::npos);
  }
  for (const char* flag : {"--version", "-V"}) {
    CommandResult r = RunCommand({Bin(), flag});
    EXPECT_EQ(r.exit_code, 0) << flag;
    EXPECT_EQ(r.out.rfind("tfrecordfs ", 0), 0u) << r.out;
    EXPECT_GT(r.out.size(), std::string("tfrecordfs \n").size());
  }
}

TEST(CliTest, UsageErrorsExitTwo) {
  if (Bin().empty()) GTEST_SKIP() << "TFRECORDFS_BIN is not set";
  TempDir tmp;
  const std::string mnt = tmp.Subdir("mnt");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{Bin()}, {Bin(), mnt}, {Bin(), "-f"}, {Bin(), "-o"},
        {Bin(), "--no-such-option", tmp.path(), mnt}, {Bin(), "-o", "cache_records=0", tmp.path(), mnt},
        {Bin(), "-o", "index_threads=x", tmp.path(), mnt}, {Bin(), "-o", "cache_mb=0", tmp.path(), mnt},
        {Bin(), "-o", "cache_mb=lots", tmp.path(), mnt}}) {
    CommandResult r = RunCommand(args);
    std::string joined;
    for (size_t i = 1; i < args.size(); ++i) joined += " " + args[i];
    EXPECT_EQ(r.exit_code, 2) << "tfrecordfs" << joined << "\nstderr: " << r.err;
    EXPECT_NE(r.err.find("tfrecordfs"), std::string::npos) << r.err;
    EXPECT_FALSE(IsMounted(mnt));
  }
}

TEST(CliTest, MissingSourceExitsOneNamingIt) {
  if (Bin().empty()) GTEST_SKIP() << "TFRECORDFS_BIN is not set";
  TempDir tmp;
  const std::string mnt = tmp.Subdir("mnt");
  const std::string missing = tmp.path() + "/no-such-source.tfrecord";
  for (bool foreground : {true, false}) {
    std::vector<std::string> args = {Bin()};
    if (foreground) args.push_back("-f");
    args.insert(args.end(), {"-o", IsolationOptions(tmp), missing, mnt});
    CommandResult r = RunCommand(args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
    EXPECT_FALSE(IsMounted(mnt));
  }
  // One good source and one missing: still an error, nothing mounted.
  TempDir data;
  WriteDataset(data.path(), 1);
  CommandResult r = RunCommand({Bin(), "-f", "-o", IsolationOptions(tmp), data.path(), missing, mnt});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
  EXPECT_FALSE(IsMounted(mnt));
}

TEST(CliTest, MissingMountpointExitsOne) {
  if (Bin().empty()) GTEST_SKIP() << "TFRECORDFS_BIN is not set";
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  WriteDataset(tmp.Subdir("src"), 3);
  const std::string mnt = tmp.path() + "/no-such-mountpoint";
  CommandResult r = RunCommand({Bin(), "-f", "-o", IsolationOptions(tmp), tmp.path() + "/src", mnt});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(mnt), std::string::npos) << r.err;
}

// Without -f the command returns only once the mount serves requests: a
// stat right after it returns must succeed, with no polling in between.
TEST(DaemonTest, DetachesOnlyOnceTheMountIsReady) {
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  const GenDataset ds = WriteDataset(tmp.Subdir("src"), 5);
  const std::string mnt = std::filesystem::canonical(tmp.Subdir("mnt")).string();
  DetachedGuard guard(mnt);
  const std::string rel = "train-00001-of-00002/042/image/encoded.jpg";

  CommandResult r = RunCommand({Bin(), "-o", IsolationOptions(tmp), ds.root, mnt});
  ASSERT_EQ(r.exit_code, 0) << r.err;
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
  CommandResult r = Shell(in_tmp + ShellQuote(Bin()) +
                          " -o staging_dir=store,output_dir=out src mnt");
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
  EXPECT_FALSE(std::filesystem::exists(tmp.path() + "/store/records/r"));
  // Nothing was created relative to "/" by the daemon.
  EXPECT_FALSE(std::filesystem::exists("/store"));
  EXPECT_FALSE(std::filesystem::exists("/out"));
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
    const bool have_mount = ::access("/bin/mount", X_OK) == 0 || ::access("/usr/bin/mount", X_OK) == 0;
    if (!have_mount) GTEST_SKIP() << "mount(8) is not installed";
    if (::geteuid() != 0) GTEST_SKIP() << "mounting through mount.fuse3 without an fstab entry needs root";
    ds_ = WriteDataset(tmp_.Subdir("src"), 6);
    mnt_ = std::filesystem::canonical(tmp_.Subdir("mnt")).string();
    bindir_ = tmp_.Subdir("bin");
    ASSERT_EQ(::symlink(Bin().c_str(), (bindir_ + "/tfrecordfs").c_str()), 0) << std::strerror(errno);
    guard_ = std::make_unique<DetachedGuard>(mnt_);
  }

  // Checks a few files, then unmounts with umount(8) and waits for the
  // daemon to exit.
  void CheckAndUnmount() {
    ASSERT_TRUE(IsMounted(mnt_, "fuse.tfrecordfs"));
    const ExpectedTree expected = ds_.Expected();
    for (const std::string rel : {"one.tfrecord/0/label", "dataset_info.json",
                                  "train-00000-of-00002/03/record.bin"}) {
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
