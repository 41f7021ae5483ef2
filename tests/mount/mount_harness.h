// Tier 3 harness: real mounts of the built tfrecordfs binary, for every
// mount test (the generated, real and hostile datasets, staging and pack,
// crashes, unmounting under load) and the toolbox tests' helpers.
//
// A Mount runs `tfrecordfs -f [-o OPTIONS] [ARGS...] SOURCE... MNT` as a
// child of the test (a test::Daemon, tests/testing/daemon.h; stdout and
// stderr go to files), waits for MNT to show up in /proc/self/mountinfo
// with fstype fuse.tfrecordfs (polling with a bounded deadline, never a
// fixed sleep), and ends it the way the test asks: `fusermount3 -u`
// (Stop, Unmount), `tfrecordfs unmount` (TfrUnmount, which waits for the
// pack), a hard kill (KillHard), or the daemon's own exit (WaitExit). The
// destructor cleans up after a failed test: lazy unmount, SIGTERM, then
// SIGKILL.
//
// The binary comes from $TFRECORDFS_BIN (set by tests/mount/meson.build).
//
// Thread-safety: none; use a Mount from the test's main thread. The file
// helpers are reentrant.
#ifndef TFRECORDFS_TESTS_MOUNT_MOUNT_HARNESS_H_
#define TFRECORDFS_TESTS_MOUNT_MOUNT_HARNESS_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "testing/daemon.h"
#include "testing/process.h"
#include "testing/temp_dir.h"

namespace tfrecordfs::mount_test {

// Bounded waits and commands (tests/testing/process.h): kWaitLimit bounds
// every wait in the harness (mount readiness, daemon exit).
using test::CommandResult;
using test::DescribeWait;
using test::ExitCodeOfWait;
using test::kWaitLimit;
using test::Run;
using test::SleepBriefly;
using test::WaitUntil;

// Sanitized builds (scripts/test --sanitizers) run a sanitized daemon, whose
// shadow memory and allocator bookkeeping multiply its RSS: memory bounds
// are looser there, and leaks are LeakSanitizer's to find.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

// Resident set size of a process in KiB (VmRSS), or -1 (also when it
// exited meanwhile).
long RssKiB(pid_t pid);

// Reads a whole /proc (or any) file with open/read into *out; false when it
// cannot be read, e.g. because the process exited between open and read.
// Never throws: a process that vanishes mid-read is simply gone.
bool ReadProcFile(const std::string& path, std::string* out);

// Every binary linking the harness runs with HOME and XDG_{CACHE,STATE,
// CONFIG,DATA,RUNTIME}_{HOME,DIR} set to a private temp directory before
// main() (mount_harness.cc), so no test touches the real home directory.

// Path of the tfrecordfs binary under test ($TFRECORDFS_BIN), or "".
std::string BinaryPath();

// The real TensorFlow-written files (their SOURCES.md says what each is):
// $TFRECORDFS_REAL_DATA, else $TFRECORDFS_SOURCE_ROOT/../shared/data/real,
// made canonical; "" when that directory holds no readable SOURCES.md.
std::string RealDataDir();
// Why RealDataDir() is "" (for GTEST_SKIP).
std::string RealDataMissing();

// Empty when real mounts can work here, else why not (for GTEST_SKIP).
std::string FuseUnavailableReason();

// Skips the current test (with the reason) when /dev/fuse cannot be used.
#define TFRFS_SKIP_WITHOUT_FUSE()                                                       \
  do {                                                                                  \
    const std::string tfrfs_reason = ::tfrecordfs::mount_test::FuseUnavailableReason(); \
    if (!tfrfs_reason.empty()) GTEST_SKIP() << tfrfs_reason;                            \
  } while (0)

// A test's scratch directory (tests/testing/temp_dir.h), named
// $TMPDIR/tfrfs-mount-XXXXXX: removed recursively on destruction unless
// something is still mounted below it (then it is left in place and the leak
// is reported on stderr, never traversed).
class TempDir : public test::TempDir {
 public:
  TempDir() : test::TempDir("tfrfs-mount") {}
};

// True when `path` is a mount point listed in /proc/self/mountinfo, with
// the given fstype if `fstype` is non-empty.
using test::IsMounted;

// Pids of live processes whose command line has an argument equal to `arg`
// and whose argv[0] ends in "tfrecordfs" (how we find a detached daemon).
std::vector<pid_t> FindDaemons(const std::string& arg);

// The same, under a name that gtest's Test::Run() does not hide inside a
// TEST body.
inline CommandResult RunCommand(const std::vector<std::string>& argv,
                                const std::optional<std::string>& env_path = std::nullopt) {
  return Run(argv, env_path);
}

// Runs `script` with /bin/sh -c.
CommandResult Shell(const std::string& script);

// Whole-file helpers; fail the current test (and return "") on error.
std::string ReadWholeFile(const std::string& path);
void WriteWholeFile(const std::string& path, const std::string& contents);

// Quotes for /bin/sh.
std::string ShellQuote(const std::string& s);

// What a Mount runs: `tfrecordfs -f [-o OPTIONS] [ARGS...] SOURCE... MNT`.
struct MountConfig {
  std::vector<std::string> sources;
  // MNT; "" = mnt/ in the Mount's own temp directory.
  std::string mountpoint;
  // Joined with ',' into one `-o` argument when not empty.
  std::vector<std::string> options;
  // More arguments before the sources (e.g. {"-o", "nosplice"}).
  std::vector<std::string> args;
  // TFRECORDFS_FAULT for the daemon only ("" = unset; never inherited from
  // the test).
  std::string fault;
  // More NAME=VALUE environment entries for the daemon (override ours).
  std::vector<std::string> env;
  // Directory for the daemon's stdout and stderr files (daemon-N.stdout,
  // daemon-N.stderr); "" = the Mount's own temp directory.
  std::string log_dir;
  // A command the daemon runs under (its argv before the daemon's, e.g.
  // strace with its options; argv[0] a path); empty = none.
  std::vector<std::string> wrapper;
};

// One tfrecordfs daemon running in the foreground, from spawn to a mounted
// file system and back.
class Mount {
 public:
  // Everything in a temp directory of the Mount's own: the mount point, the
  // logs, and -o staging_dir=...,output_dir=... (so a test never touches
  // $HOME or the sources).
  Mount();
  // Runs `config`; a temp directory of its own only for what it leaves "".
  explicit Mount(MountConfig config);
  ~Mount();
  Mount(const Mount&) = delete;
  Mount& operator=(const Mount&) = delete;

  // Starts the daemon and waits until MNT is a fuse.tfrecordfs mount.
  // OK on success, else why not, with the daemon's stderr (test::Daemon).
  absl::Status Start();
  // The same with these sources and arguments (replacing the config's).
  absl::Status Start(const std::vector<std::string>& sources,
                     const std::vector<std::string>& args = {});
  // Runs the daemon to its end without expecting a mount (for option
  // errors): returns its exit code, or -1 when it mounted or was signalled.
  int RunExpectingFailure();

  // `fusermount3 -u MNT`, then waits for the daemon to exit. Returns its
  // exit code (-1 on a signal or timeout, or when MNT stays mounted; the
  // message lands in *error).
  int Stop(std::string* error);
  // The same, giving the raw waitpid status: false (and why in *error) when
  // the unmount fails or the daemon does not end.
  bool Unmount(int* status, std::string* error);
  // `tfrecordfs unmount MNT` (which waits for the pack), then reaps the
  // daemon into *status; a daemon that does not end fails the test.
  CommandResult TfrUnmount(int* status);
  // Waits (bounded) for the daemon to end by itself; false on timeout.
  bool WaitExit(int* status);
  // kill -9 the daemon, reap it, and lazily unmount the dead mount.
  void KillHard();

  const std::string& mountpoint() const { return config_.mountpoint; }
  // The writable folder every mount shows at its root (README, "Staging").
  static constexpr char kStagingName[] = "staging";
  std::string path(const std::string& rel) const { return mountpoint() + "/" + rel; }
  // Everything the daemon wrote to stderr so far.
  std::string Stderr() const;
  pid_t pid() const { return daemon_ ? daemon_->pid() : -1; }

 private:
  std::optional<TempDir> own_dir_;  // outlives daemon_, which unmounts what lies in it
  MountConfig config_;
  std::optional<test::Daemon> daemon_;  // from Start() on
};

// True when a waitpid status says SIGKILL.
bool KilledBySigkill(int status);

// If MNT is still (or stale-ly) mounted, `fusermount3 -u -z` and wait until
// it is gone.
void CleanStaleMount(const std::string& mnt);

// ---- Daemons the harness does not start ----
// (`tfrecordfs SOURCE MNT` without -f detaches: its tests start it with a
// shell and find it by its mount point, FindDaemons.)

// Unmounts and kills whatever a detached daemon left behind when a test
// fails half-way.
class DetachedGuard {
 public:
  explicit DetachedGuard(std::string mnt) : mnt_(std::move(mnt)) {}
  ~DetachedGuard();
  DetachedGuard(const DetachedGuard&) = delete;
  DetachedGuard& operator=(const DetachedGuard&) = delete;

 private:
  std::string mnt_;
};

// Waits (bounded) for every tfrecordfs process serving `mnt` to exit and
// the mount to disappear.
bool DaemonGone(const std::string& mnt);

// ---- Walking a tree ----

struct WalkedNode {
  mode_t mode = 0;
  uint64_t size = 0;
  uint64_t ino = 0;
  uint64_t nlink = 0;
  std::string content;  // files only, read in full
  int error = 0;        // errno of the first failure (stat, readdir, read)
};

// Walks `root` recursively with opendir/readdir/lstat, reading every regular
// file in full when `read_files`. Keys are paths relative to root ("a/b");
// the root itself is not included. A directory that cannot be listed keeps
// its errno in `error` and has no children listed.
std::map<std::string, WalkedNode> WalkTree(const std::string& root, bool read_files = true);

// Removes the staging folder from a walk of a mount root. Returns true when
// it was there as an empty directory (nothing staged), false otherwise.
bool RemoveEmptyStaging(std::map<std::string, WalkedNode>* walked);

}  // namespace tfrecordfs::mount_test

#endif  // TFRECORDFS_TESTS_MOUNT_MOUNT_HARNESS_H_
