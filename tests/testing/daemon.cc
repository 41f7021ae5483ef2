#include "testing/daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "testing/temp_dir.h"
#include "tfrecordfs/base/file.h"

extern char** environ;

namespace tfrecordfs::test {
namespace {

// The inherited environment with `changes` applied (see DaemonSpec::env).
std::vector<std::string> Environment(const std::vector<std::string>& changes) {
  auto name_of = [](const std::string& e) { return e.substr(0, e.find('=')); };
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    bool changed = false;
    for (const std::string& c : changes) changed |= name_of(c) == name_of(entry);
    if (!changed) env.push_back(entry);
  }
  for (const std::string& c : changes) {
    if (c.find('=') != std::string::npos) env.push_back(c);
  }
  return env;
}

}  // namespace

Daemon::Daemon(DaemonSpec spec) : spec_(std::move(spec)) {}

Daemon::~Daemon() { ForceCleanup(); }

absl::Status Daemon::Start() {
  early_status_.reset();
  if (spec_.argv.empty()) return absl::InvalidArgumentError("no command line");
  std::vector<std::string> args = spec_.argv;
  std::vector<char*> cargv;
  for (auto& s : args) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  std::vector<std::string> env = Environment(spec_.env);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  // fork + exec rather than posix_spawn, for PR_SET_PDEATHSIG: if the test
  // process dies (a crash, a timeout kill), the daemon gets SIGTERM and
  // unmounts itself instead of leaving a mount behind. Only async-signal-safe
  // calls run between fork and exec.
  const int in_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int out_fd =
      ::open(spec_.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err_fd =
      ::open(spec_.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (in_fd < 0 || out_fd < 0 || err_fd < 0) {
    const int err = errno;
    for (int fd : {in_fd, out_fd, err_fd}) {
      if (fd >= 0) ::close(fd);
    }
    return ErrnoError(err, "cannot open the daemon's stdio files");
  }
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(126);  // the test died before prctl
    ::dup2(in_fd, 0);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    ::execve(cargv[0], cargv.data(), envp.data());
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(in_fd);
  ::close(out_fd);
  ::close(err_fd);
  if (pid_ < 0) {
    pid_ = -1;
    return ErrnoError(fork_errno, "fork");
  }
  int status = 0;
  bool exited = false;
  const bool ready = WaitUntil([&] {
    if (IsMounted(spec_.mountpoint, "fuse.tfrecordfs")) return true;
    exited = Reaped(pid_, &status);
    return exited;
  });
  if (exited) {
    pid_ = -1;
    early_status_ = status;
    return absl::AbortedError("tfrecordfs exited before the mount was ready (" +
                              DescribeWait(status) + "); stderr:\n" + Stderr());
  }
  if (!ready) {
    return absl::DeadlineExceededError("mount not ready within " +
                                       std::to_string(kWaitLimit.count()) + " s; stderr:\n" +
                                       Stderr());
  }
  return absl::OkStatus();
}

bool Daemon::WaitExit(int* status, std::chrono::milliseconds limit) {
  if (pid_ < 0) return false;
  if (!WaitUntil([&] { return Reaped(pid_, status); }, limit)) return false;
  pid_ = -1;
  return true;
}

bool Daemon::Unmount(int* status, std::string* error) {
  if (pid_ < 0) {
    *error = "daemon not running";
    return false;
  }
  CommandResult u = Run({"fusermount3", "-u", spec_.mountpoint});
  if (u.exit_code != 0) {
    *error = "fusermount3 -u failed (" + std::to_string(u.exit_code) + "): " + u.err;
    return false;
  }
  if (!WaitExit(status)) {
    *error =
        "daemon still running " + std::to_string(kWaitLimit.count()) + " s after fusermount3 -u";
    return false;
  }
  return true;
}

void Daemon::KillAndReap(int sig) {
  if (pid_ <= 0) return;
  ::kill(pid_, sig);
  int status;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

void Daemon::ForceCleanup() {
  if (!spec_.mountpoint.empty() && IsMounted(spec_.mountpoint)) {
    Run({"fusermount3", "-u", "-z", spec_.mountpoint});
  }
  if (pid_ > 0) {
    int status;
    ::kill(pid_, SIGTERM);
    if (!WaitExit(&status, std::chrono::seconds(10))) KillAndReap(SIGKILL);
    pid_ = -1;
  }
}

std::string Daemon::Stderr() const {
  if (spec_.stderr_path.empty()) return "";
  std::ifstream in(spec_.stderr_path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace tfrecordfs::test
