// Daemon: one `tfrecordfs -f ... MNT` running as a child of the test, from
// spawn to a mounted file system and back: the process under the mount
// harness's Mount (tests/mount/mount_harness.h), which every mount test uses.
//
// Contract:
//   * Start() forks and execs spec.argv with stdin /dev/null and stdout and
//     stderr in the named files, the inherited environment with spec.env
//     applied, and PR_SET_PDEATHSIG(SIGTERM): if the test process dies, the
//     daemon unmounts itself instead of leaving a mount behind. It then polls
//     /proc/self/mountinfo until spec.mountpoint is a fuse.tfrecordfs mount
//     (bounded by kWaitLimit), and returns "" or why not, with the daemon's
//     stderr; when the daemon ended first, early_status() holds its wait
//     status;
//   * Unmount() is `fusermount3 -u MNT` and then a bounded wait for the
//     daemon to end; its waitpid status goes to *status;
//   * the destructor cleans up after a failed test: a lazy unmount when MNT
//     is still mounted, SIGTERM, then SIGKILL after 10 s.
//
// Thread-safety: none; use a Daemon from the thread that started it (the
// parent-death signal follows that thread).
#ifndef TFRECORDFS_TESTS_TESTING_DAEMON_H_
#define TFRECORDFS_TESTS_TESTING_DAEMON_H_

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "testing/process.h"

namespace tfrecordfs::test {

struct DaemonSpec {
  // The whole command line; argv[0] is a path (not looked up in PATH).
  std::vector<std::string> argv;
  // The mount point (the last argument, normally) Start() waits for.
  std::string mountpoint;
  // NAME=VALUE entries replacing any inherited NAME; a bare "NAME" (no '=')
  // removes NAME from the daemon's environment.
  std::vector<std::string> env;
  // Where the daemon's stdout and stderr go (created or truncated).
  std::string stdout_path;
  std::string stderr_path;
};

class Daemon {
 public:
  explicit Daemon(DaemonSpec spec);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // OK once the mount point is a fuse.tfrecordfs mount; else why not
  // (Aborted: the daemon ended first; DeadlineExceeded), with its stderr.
  absl::Status Start();
  // The wait status of a daemon that ended before its mount was ready.
  std::optional<int> early_status() const { return early_status_; }

  // Waits (bounded by `limit`) for the daemon to end; false on timeout or
  // when it is not running.
  bool WaitExit(int* status, std::chrono::milliseconds limit = kWaitLimit);
  // `fusermount3 -u MNT`, then WaitExit. False (and why in *error) when the
  // daemon is not running, the unmount fails or the daemon does not end.
  bool Unmount(int* status, std::string* error);
  // Sends `sig` and reaps the daemon (no time bound: for SIGKILL).
  void KillAndReap(int sig);
  // Lazy unmount if still mounted, SIGTERM, SIGKILL after 10 s.
  void ForceCleanup();

  pid_t pid() const { return pid_; }
  const std::string& mountpoint() const { return spec_.mountpoint; }
  // Everything the daemon wrote to stderr so far.
  std::string Stderr() const;

 private:
  DaemonSpec spec_;
  pid_t pid_ = -1;
  std::optional<int> early_status_;
};

}  // namespace tfrecordfs::test

#endif  // TFRECORDFS_TESTS_TESTING_DAEMON_H_
