// Child processes for tests: running a command to completion, waiting with a
// deadline instead of sleeping, and reading wait statuses.
//
// Contract:
//   * every wait is bounded (kWaitLimit unless a limit is given) and polls
//     in steps of a few milliseconds; nothing sleeps a fixed time;
//   * Run gives the child /dev/null as stdin and collects its stdout and
//     stderr in unlinked temp files (no pipe can fill up); a command still
//     running at the limit is killed and fails the current test.
//
// Thread-safety: Run, WaitUntil and the status helpers are reentrant.
#ifndef TFRECORDFS_TESTS_TESTING_PROCESS_H_
#define TFRECORDFS_TESTS_TESTING_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace tfrecordfs::test {

// Overall bound for every wait (mount readiness, daemon exit, a command).
inline constexpr std::chrono::seconds kWaitLimit{60};

void SleepBriefly();  // a polling step (a few milliseconds), not a readiness wait

// Polls until `done()` or the deadline; returns done()'s last value.
template <typename Fn>
bool WaitUntil(Fn done, std::chrono::milliseconds limit = kWaitLimit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return done();
    SleepBriefly();
  }
}

// Result of running a command.
struct CommandResult {
  int exit_code = -1;  // -1 when killed by a signal or not run
  std::string out;     // stdout
  std::string err;     // stderr
};

// Runs argv (argv[0] looked up in PATH unless it has a '/') with stdin from
// /dev/null; `env_path`, if set, replaces PATH for the child. Waits at most
// kWaitLimit, then kills it.
CommandResult Run(const std::vector<std::string>& argv,
                  const std::optional<std::string>& env_path = std::nullopt);

// Reaps child `pid` if it has ended (or is no child of ours any more); true
// then, with *status set when it was reaped here.
bool Reaped(pid_t pid, int* status);

// Human-readable waitpid status ("exit code 1", "signal Killed").
std::string DescribeWait(int status);
// The exit code, or -1 when the child was signalled.
int ExitCodeOfWait(int status);

}  // namespace tfrecordfs::test

#endif  // TFRECORDFS_TESTS_TESTING_PROCESS_H_
