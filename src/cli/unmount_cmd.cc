// `tfrecordfs unmount MOUNTPOINT`: unmount, wait for the repack, report.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/cli/commands.h"
#include "src/cli/reports.h"
#include "src/cli/runtime.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/staging/layout.h"

namespace tfrecordfs::cli {
namespace {

constexpr char kUsage[] = R"(Usage: tfrecordfs unmount MOUNTPOINT

Unmounts a tfrecordfs mount, waits until the daemon has packed the staged
records into new shards, and prints what was written and what stayed staged.

When the daemon logged a warning or an error while mounted (an EIO's reason,
a damaged shard), says so and names its log file (-o log).

Options:
)";
constexpr char kUsageEnd[] = R"(
Exit status: 0 when everything staged was packed (or nothing was staged),
1 when a record stayed staged, the pack failed or the unmount failed,
2 on a usage error.
)";

// Runs fusermount3 -u; falls back to umount2 for root. The error carries
// umount2's errno and names the mount point.
absl::Status Unmount(const std::string& mnt) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execlp("fusermount3", "fusermount3", "-u", mnt.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  if (pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
      WEXITSTATUS(status) == 0) {
    return absl::OkStatus();
  }
  if (::geteuid() == 0 && ::umount2(mnt.c_str(), 0) == 0) return absl::OkStatus();
  return ErrnoError(errno, absl::StrCat("cannot unmount ", mnt));
}

// Runs `wait` (which blocks until what it waits for is done). On a terminal,
// a wait still going after a second says what it waits for, and then how
// long it took, so a long unmount (a mount the kernel cached millions of
// files of releases them first) never looks hung; scripts see nothing.
template <typename F>
auto SayWhileWaiting(const std::string& what, F wait) {
  if (::isatty(STDERR_FILENO) != 1) return wait();
  Mutex mu;
  CondVar cv;
  bool done = false;  // guarded by mu
  const auto start = std::chrono::steady_clock::now();
  std::thread sayer([&] {
    MutexLock lock(&mu);
    const auto quiet_until = start + std::chrono::seconds(1);
    for (auto now = start; !done && now < quiet_until; now = std::chrono::steady_clock::now()) {
      cv.WaitFor(&mu, quiet_until - now);
    }
    if (done) return;
    std::fprintf(stderr, "tfrecordfs: %s...\n", what.c_str());
    while (!done) cv.Wait(&mu);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    std::fprintf(stderr, "tfrecordfs: %s: done in %.1f s\n", what.c_str(), took.count());
  });
  auto result = wait();
  {
    MutexLock lock(&mu);
    done = true;
  }
  cv.SignalAll();
  sayer.join();
  return result;
}

// Unmounts the mount at `real` (its record: `record`) and waits until the
// daemon is done: the pack report it left in the store (kResultOk and "read-only
// mount: nothing packed" for a read-only mount, which packs nothing).
// Errors name what failed; `*no_report` says the daemon left no pack
// report (its log may say why).
absl::StatusOr<std::string> UnmountAndWait(const std::string& real, const MountRecord& record,
                                           bool* no_report) {
  auto unmount = [&] {
    const absl::Status s = SayWhileWaiting("unmounting " + real, [&] { return Unmount(real); });
    return s.ok() ? s : SetMessage(s, absl::StrCat(s.message(), " (is a file still open there?)"));
  };
  if (record.read_only) {
    // Nothing is packed and the store is not ours to wait on: unmount, wait
    // for the daemon to go, and say only that.
    if (absl::Status s = unmount(); !s.ok()) return s;
    SayWhileWaiting(absl::StrCat("waiting for the daemon (pid ", record.pid, ") to exit"), [&] {
      for (int i = 0; i < 1000 && ProcessAlive(record.pid); ++i) {
        ::usleep(10000);  // up to 10 s; the daemon only has to exit
      }
      return 0;
    });
    return absl::StrCat(kResultOk, "\nread-only mount: nothing packed\n");
  }
  // Hold the store's lock file open before unmounting, so the wait below
  // cannot miss the daemon's exit.
  auto lock = OpenFile(staging::LockFile(record.store), O_RDONLY);
  if (!lock.ok()) return lock.status();
  if (absl::Status s = unmount(); !s.ok()) return s;
  if (::flock(lock->get(), LOCK_SH | LOCK_NB) != 0) {
    std::cerr << "tfrecordfs: unmounted " << real << "; waiting for the repack to finish...\n";
    while (::flock(lock->get(), LOCK_SH) != 0 && errno == EINTR) {
    }
  }
  auto report = ReadFileToString(staging::PackReportFile(record.store));
  if (!report.ok()) {
    *no_report = true;
    return absl::NotFoundError(
        absl::StrCat("the daemon left no pack report in ", record.store,
                     " (did it crash? the staged records are still there; mount again to retry)"));
  }
  return report;
}

}  // namespace

int UnmountMain(int argc, char** argv) {
  Tool tool({.name = "unmount",
             .usage = kUsage,
             .usage_end = kUsageEnd,
             .usage_column = 15,
             .json = false,
             .quiet = false});
  if (auto stop = tool.Parse(argc, argv)) return *stop;
  if (tool.operands().empty()) return tool.Usage("need a MOUNTPOINT");
  if (tool.operands().size() > 1) return tool.Usage("unexpected argument " + tool.operands()[1]);
  auto resolved = RealPath(tool.operands()[0]);
  if (!resolved.ok()) {
    std::cerr << "tfrecordfs unmount: " << resolved.status().message() << "\n";
    return kExitFailed;
  }
  const std::string& real = *resolved;
  auto record = AwaitMountRecord(real);
  if (!record.ok()) {
    std::cerr << "tfrecordfs unmount: " << real
              << " is not a tfrecordfs mount of this user (no record in " << RegistryPath(real)
              << ")\n";
    return kExitFailed;
  }
  bool no_report = false;
  auto report = UnmountAndWait(real, *record, &no_report);
  if (!report.ok()) {
    std::cerr << "tfrecordfs unmount: " << report.status().message() << "\n";
    // A daemon that left no report may have said why in its log.
    if (no_report) std::cerr << UnmountLogNote(*record);
    return kExitFailed;
  }
  const int code = tool.Finish(*report, UnmountPacked(*report));
  std::cerr << UnmountLogNote(*record);
  return code;
}

}  // namespace tfrecordfs::cli
