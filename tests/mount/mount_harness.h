// Tier 3 harness: real mounts of the built tfrecordfs binary.
//
// A Mount starts `tfrecordfs -f SOURCE... MNT` as a child process (stderr and
// stdout go to files in the test's temp directory), waits for the mount to
// show up in /proc/self/mountinfo with fstype fuse.tfrecordfs (polling, with a
// bounded deadline, never a fixed sleep), and on Stop() unmounts with
// `fusermount3 -u` and reaps the daemon. The destructor cleans up after a
// failed test: lazy unmount, SIGTERM, then SIGKILL.
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
#include <vector>

#include "testing/daemon.h"
#include "testing/process.h"
#include "testing/temp_dir.h"

namespace tfrecordfs::mount_test {

// Bounded waits and commands (tests/testing/process.h): kWaitLimit bounds
// every wait in the harness (mount readiness, daemon exit).
using test::CommandResult;
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

// One mounted tfrecordfs daemon running in the foreground (a test::Daemon,
// tests/testing/daemon.h, in a temp directory of its own).
class Mount {
 public:
  Mount();
  ~Mount();
  Mount(const Mount&) = delete;
  Mount& operator=(const Mount&) = delete;

  // Starts the daemon on a fresh mountpoint and waits until it is mounted.
  // `extra_args` go before the sources (e.g. {"-o", "nosplice"}). The
  // staging store and the pack output directory are kept inside this
  // Mount's temp directory (-o staging_dir=...,output_dir=...), so a test
  // never touches $HOME or the sources. Returns "" on success, else a
  // message with the daemon's stderr.
  std::string Start(const std::vector<std::string>& sources,
                    const std::vector<std::string>& extra_args = {});

  // `fusermount3 -u`, then waits for the daemon to exit. Returns its exit
  // code (-1 on a signal or timeout; the message lands in *error).
  int Stop(std::string* error);

  const std::string& mountpoint() const { return mountpoint_; }
  // The writable folder every mount shows at its root (README, "Staging").
  static constexpr char kStagingName[] = "staging";
  std::string path(const std::string& rel) const { return mountpoint_ + "/" + rel; }
  // Everything the daemon wrote to stderr so far.
  std::string Stderr() const;
  pid_t pid() const { return daemon_ ? daemon_->pid() : -1; }

 private:
  TempDir dir_;  // outlives daemon_, which unmounts what lies in it
  std::string mountpoint_;
  std::optional<test::Daemon> daemon_;
};

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
