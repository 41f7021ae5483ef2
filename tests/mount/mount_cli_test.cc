// The mount's command line: exit codes and what they name, bad mount points,
// failed mounts leaving nothing, the shared staging store of read-only
// mounts, /dev/fuse errors, the pack into a missing output folder and
// -o max_background. Its options' documentation: mount_cli_options_test.cc;
// the daemon's life cycle: mount_daemon_test.cc.
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
  for (const std::vector<std::string>& args : {std::vector<std::string>{Bin()},
                                               {Bin(), mnt},
                                               {Bin(), "-f"},
                                               {Bin(), "-o"},
                                               {Bin(), "--no-such-option", tmp.path(), mnt},
                                               {Bin(), "-o", "cache_records=0", tmp.path(), mnt},
                                               {Bin(), "-o", "index_threads=x", tmp.path(), mnt},
                                               {Bin(), "-o", "cache_mb=0", tmp.path(), mnt},
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
  CommandResult r =
      RunCommand({Bin(), "-f", "-o", IsolationOptions(tmp), data.path(), missing, mnt});
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
  CommandResult r =
      RunCommand({Bin(), "-f", "-o", IsolationOptions(tmp), tmp.path() + "/src", mnt});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(mnt), std::string::npos) << r.err;
}

// Typos are ours to report, naming the option, before any shard is read or
// anything is created (libfuse's wording and exit 1 came only after the
// whole index walk).
TEST(CliTest, UnknownOptionsAndBadValuesExitTwoNamingThem) {
  if (Bin().empty()) GTEST_SKIP() << "TFRECORDFS_BIN is not set";
  TempDir tmp;
  const std::string mnt = tmp.Subdir("mnt");
  const std::string store = tmp.path() + "/store";
  WriteDataset(tmp.Subdir("src"), 2);
  for (const auto& [opt, named] : std::vector<std::pair<std::string, std::string>>{
           {"cache_mbb=5", "cache_mbb"},
           {"readonly", "readonly"},
           {"max_read=x", "max_read"},
           {"cache_mb", "cache_mb"},
           {"staging_dir=", "staging_dir"},
           {"fsname", "fsname"},
           {"ro,allow_other,bogus", "bogus"},
           // Refused by libfuse 3.14 or the kernel, so not on our list
           // (they used to fail the mount after the index walk, exit 1).
           {"relatime", "relatime"},
           {"nolazytime", "nolazytime"},
           {"blksize=4096", "blksize"},
           {"max_read=131072", "max_read"}}) {
    CommandResult r = RunCommand(
        {Bin(), "-f", "-o", "staging_dir=" + store, "-o", opt, tmp.path() + "/src", mnt});
    EXPECT_EQ(r.exit_code, 2) << opt << "\nstderr: " << r.err;
    EXPECT_NE(r.err.find(named), std::string::npos) << opt << "\nstderr: " << r.err;
    EXPECT_EQ(r.err.find("fuse:"), std::string::npos) << "libfuse's wording: " << r.err;
    EXPECT_FALSE(std::filesystem::exists(store)) << opt << " created the staging store";
    EXPECT_FALSE(IsMounted(mnt));
  }
}

// A regular file, a dead or live mount of ours: refused before indexing,
// exit 1, and nothing created.
TEST(CliTest, BadMountpointsAreRefused) {
  if (Bin().empty()) GTEST_SKIP() << "TFRECORDFS_BIN is not set";
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  const std::string src = tmp.Subdir("src");
  WriteDataset(src, 2);
  const std::string store = tmp.path() + "/store";
  const std::string file = tmp.path() + "/file";
  WriteWholeFile(file, "x");
  CommandResult r = RunCommand({Bin(), "-f", "-o", "staging_dir=" + store, src, file});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("not a directory"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("indexed"), std::string::npos) << "indexed before checking: " << r.err;
  EXPECT_FALSE(std::filesystem::exists(store));
  EXPECT_FALSE(IsMounted(file));

  // Mounting again on a live mount of ours (same source, or another one).
  Mount m;
  ASSERT_EQ(m.Start({src}), absl::OkStatus());
  for (const std::string& source : {src, tmp.Subdir("other")}) {
    CommandResult again = RunCommand({Bin(), "-o", "ro", source, m.mountpoint()});
    EXPECT_EQ(again.exit_code, 1) << again.err;
    EXPECT_NE(again.err.find("already mounted"), std::string::npos) << again.err;
    EXPECT_EQ(FindDaemons(m.mountpoint()).size(), 1u) << "a second daemon stacked on the mount";
  }
  std::string err;
  EXPECT_EQ(m.Stop(&err), 0) << err;
}

// A mount that fails leaves nothing behind: no default staging store under
// $XDG_STATE_HOME for a missing source.
TEST(CliTest, FailedMountCreatesNothing) {
  if (Bin().empty()) GTEST_SKIP() << "TFRECORDFS_BIN is not set";
  TempDir tmp;
  const std::string mnt = tmp.Subdir("mnt");
  const std::string state = tmp.Subdir("state");
  const char* old = std::getenv("XDG_STATE_HOME");
  const std::string saved = old ? old : "";
  ::setenv("XDG_STATE_HOME", state.c_str(), 1);
  CommandResult r = RunCommand({Bin(), "-f", tmp.path() + "/missing", mnt});
  ::setenv("XDG_STATE_HOME", saved.c_str(), 1);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(std::filesystem::is_empty(state)) << "a failed mount created its staging store";
}

// The test binaries never see the real home directory (mount_harness.cc).
TEST(CliTest, TestsRunWithAPrivateHome) {
  const char* home = std::getenv("HOME");
  ASSERT_NE(home, nullptr);
  for (const char* var : {"XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR"}) {
    const char* v = std::getenv(var);
    ASSERT_NE(v, nullptr) << var;
    EXPECT_EQ(std::string(v).rfind(std::filesystem::path(home).parent_path().string(), 0), 0u)
        << var << "=" << v << " is outside the private home " << home;
  }
  EXPECT_NE(std::string(home), "/root");
  EXPECT_NE(std::string(home).find("tfrfs-mount-"), std::string::npos) << home;
}

// Any number of -o ro mounts of one source beside one read-write mount; the
// read-only ones show what is staged, never lock or write the store, and
// their unmount says only what happened. Loose files in staging/ are named
// by the read-write unmount.
TEST(CliTest, ReadOnlyMountsShareTheStagingStore) {
  if (Bin().empty()) GTEST_SKIP() << "TFRECORDFS_BIN is not set";
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  const std::string src = tmp.Subdir("src");
  WriteDataset(src, 2);
  const std::string opts = IsolationOptions(tmp);
  const std::string rw = tmp.Subdir("rw"), ro1 = tmp.Subdir("ro1"), ro2 = tmp.Subdir("ro2");
  DetachedGuard g1(rw), g2(ro1), g3(ro2);

  // A read-only mount with no store yet: no staging folder, no store made.
  CommandResult r = RunCommand({Bin(), "-o", "ro," + opts, src, ro1});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(ro1 + "/staging"));
  EXPECT_FALSE(std::filesystem::exists(tmp.path() + "/store"));
  CommandResult u = RunCommand({Bin(), "unmount", ro1});
  EXPECT_EQ(u.exit_code, 0) << u.err;
  EXPECT_EQ(u.out, "result: ok\nread-only mount: nothing packed\n");
  EXPECT_EQ(u.err, "");
  EXPECT_TRUE(DaemonGone(ro1));

  r = RunCommand({Bin(), "-o", opts, src, rw});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(::mkdir((rw + "/staging/new").c_str(), 0755), 0);
  WriteWholeFile(rw + "/staging/new/label", "7\n");
  WriteWholeFile(rw + "/staging/loose", "1\n");
  for (const std::string& ro : {ro1, ro2}) {
    r = RunCommand({Bin(), "-o", "ro," + opts, src, ro});
    ASSERT_EQ(r.exit_code, 0) << ro << ": " << r.err;
    EXPECT_EQ(ReadWholeFile(ro + "/staging/new/label"), "7\n");
  }
  for (const std::string& ro : {ro1, ro2}) {
    u = RunCommand({Bin(), "unmount", ro});
    EXPECT_EQ(u.exit_code, 0) << u.err;
    EXPECT_EQ(u.out, "result: ok\nread-only mount: nothing packed\n");
    EXPECT_EQ(u.err, "") << "a read-only unmount waits for no repack";
    EXPECT_TRUE(DaemonGone(ro));
  }
  u = RunCommand({Bin(), "unmount", rw});
  EXPECT_EQ(u.exit_code, 1) << u.out << u.err;  // the loose file stayed
  EXPECT_NE(u.out.find("packed 1 record into 1 shard"), std::string::npos) << u.out;
  EXPECT_NE(u.out.find("loose: not in a record folder"), std::string::npos) << u.out;
  EXPECT_TRUE(DaemonGone(rw));
}

// A shard of one record, {v: int64 [7]}, at `path`.
void WriteOneRecordShard(const std::string& path) {
  example::FeatureTable table;
  example::Feature f;
  f.name = "v";
  f.kind = example::Kind::kInt64;
  f.int64s = {7};
  table.features.push_back(f);
  std::string shard;
  record::AppendFramed(&shard, example::EncodeExample(table));
  WriteWholeFile(path, shard);
}

// Rough edge of issue 34: a user who may not open /dev/fuse got "cannot
// mount on MNT (is it an existing directory you may mount on?)", a guess;
// libfuse's reason went to the daemon's stderr only, never into its log
// file. Now the error itself names the cause, on the terminal and in the
// log. /dev/fuse is made unopenable for nobody in a private mount
// namespace of the test's own (a 0600 file bound over it), so nothing else
// on the machine sees it.
TEST(CliTest, MountFailingToOpenDevFuseSaysSo) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (::geteuid() != 0) GTEST_SKIP() << "acting as another user needs root";
  if (::access("/usr/bin/unshare", X_OK) != 0 || ::access("/usr/bin/setpriv", X_OK) != 0) {
    GTEST_SKIP() << "needs unshare(1) and setpriv(1)";
  }
  TempDir tmp;
  const std::string dir = tmp.path();
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  const std::string src = tmp.Subdir("src"), mnt = tmp.Subdir("mnt"), home = tmp.Subdir("home");
  ASSERT_EQ(::chown(mnt.c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chown(home.c_str(), 65534, 65534), 0);
  WriteOneRecordShard(src + "/data.tfrecord");
  ASSERT_EQ(::chmod((src + "/data.tfrecord").c_str(), 0644), 0);
  WriteWholeFile(dir + "/nofuse", "");
  ASSERT_EQ(::chmod((dir + "/nofuse").c_str(), 0600), 0);
  const std::string log = home + "/mount.log";
  const std::string script = absl::StrCat(
      "mount --bind ", ShellQuote(dir + "/nofuse"), " /dev/fuse || exit 99\n",
      "exec setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=", ShellQuote(home),
      " XDG_CACHE_HOME=", ShellQuote(home + "/cache"),
      " XDG_STATE_HOME=", ShellQuote(home + "/state"), " ", ShellQuote(BinaryPath()),
      " -o log=", ShellQuote(log), " ", ShellQuote(src), " ", ShellQuote(mnt), "\n");
  const CommandResult r =
      RunCommand({"/usr/bin/unshare", "-m", "--propagation", "private", "sh", "-c", script});
  ASSERT_NE(r.exit_code, 99) << "cannot bind over /dev/fuse: " << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::string want =
      "cannot mount on " + mnt + ": failed to open /dev/fuse: Permission denied";
  EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
  EXPECT_NE(ReadWholeFile(log).find(want), std::string::npos) << ReadWholeFile(log);
}

// Rough edge of issue 34, one rule for output directories: `pack`,
// `repair` and `reshard` create a missing one, and so does the unmount's
// pack for -o output_dir (it failed: "output directory ...: No such file or
// directory", the staged record kept). Staged with bash, read back by the
// independent reader (tests/cli/tfrecord_check.py).
TEST(CliTest, UnmountPacksIntoAMissingOutputDir) {
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  const std::string src = tmp.Subdir("src");
  WriteOneRecordShard(src + "/data.tfrecord");
  const std::string out = tmp.path() + "/new/out";
  MountConfig config;
  config.sources = {src};
  config.options = {"staging_dir=" + tmp.path() + "/store", "output_dir=" + out, "prefix=p"};
  Mount m(config);
  ASSERT_EQ(m.Start(), absl::OkStatus());
  const CommandResult staged = Shell("mkdir " + ShellQuote(m.path("staging/r1")) + " && echo 5 > " +
                                     ShellQuote(m.path("staging/r1/v")));
  ASSERT_EQ(staged.exit_code, 0) << staged.err;
  int status = 0;
  const CommandResult un = m.TfrUnmount(&status);
  EXPECT_EQ(un.exit_code, 0) << un.out << un.err;
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  ASSERT_NE(root, nullptr);
  const CommandResult read = RunCommand(
      {"/usr/bin/python3", "-c",
       absl::StrCat("import sys; sys.path.insert(0, '", root,
                    "/tests/cli'); import tfrecord_check as t\n"
                    "for p in t.read_records(sys.argv[1]): print(t.describe_example(p))\n"),
       out + "/p-00000-of-00001.tfrecord"});
  EXPECT_EQ(read.exit_code, 0) << read.err;
  EXPECT_EQ(read.out, "v:int64:5\n");
}

}  // namespace
// Issue 36: -o max_background=N reaches the kernel's connection (read
// back from /sys/fs/fuse/connections/<device minor>/), with the congestion
// threshold at three quarters of it; without it the kernel's default
// stays. Before the option existed, the mount refused it (exit 2). The
// fusectl file system is mounted there when it is not yet (as root).
TEST(CliTest, MaxBackgroundReachesTheKernel) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (::access("/sys/fs/fuse/connections", R_OK) != 0) {
    GTEST_SKIP() << "no /sys/fs/fuse/connections";
  }
  TempDir tmp;
  const std::string src = tmp.Subdir("src");
  WriteOneRecordShard(src + "/data.tfrecord");
  for (const char* n : {"", "64", "128"}) {
    SCOPED_TRACE(absl::StrCat("max_background=", n));
    MountConfig config;
    config.sources = {src};
    config.options = {"ro"};
    if (*n != '\0') config.options.push_back(absl::StrCat("max_background=", n));
    Mount m(config);
    ASSERT_EQ(m.Start(), absl::OkStatus());
    struct stat st;
    ASSERT_EQ(::stat(m.path("").c_str(), &st), 0);
    const std::string conn = absl::StrCat("/sys/fs/fuse/connections/", minor(st.st_dev), "/");
    if (::access(conn.c_str(), R_OK) != 0 && ::geteuid() == 0) {
      Shell("mount -t fusectl fusectl /sys/fs/fuse/connections");
    }
    if (::access(conn.c_str(), R_OK) != 0) GTEST_SKIP() << "fusectl is not mounted";
    const std::string background = ReadWholeFile(conn + "max_background");
    const std::string congestion = ReadWholeFile(conn + "congestion_threshold");
    if (*n == '\0') {
      EXPECT_EQ(background, "12\n");
      EXPECT_EQ(congestion, "9\n");
    } else {
      EXPECT_EQ(background, absl::StrCat(n, "\n"));
      EXPECT_EQ(congestion, absl::StrCat(std::stoi(n) * 3 / 4, "\n"));
    }
  }
}

}  // namespace tfrecordfs::mount_test
