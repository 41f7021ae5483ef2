#include "testing/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"
#include "testing/temp_dir.h"

extern char** environ;

namespace tfrecordfs::test {
namespace {

int MakeTempFile(const std::string& dir, const std::string& stem) {
  std::string tmpl = dir + "/" + stem + "-XXXXXX";
  int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (fd >= 0) ::unlink(tmpl.c_str());
  return fd;
}

std::string ReadFd(int fd) {
  std::string out;
  char buf[65536];
  off_t off = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buf, sizeof buf, off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    off += n;
  }
  return out;
}

}  // namespace

void SleepBriefly() { std::this_thread::sleep_for(std::chrono::milliseconds(5)); }

bool Reaped(pid_t pid, int* status) {
  pid_t r = ::waitpid(pid, status, WNOHANG);
  return r == pid || (r < 0 && errno == ECHILD);
}

std::string DescribeWait(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  return "wait status " + std::to_string(status);
}

int ExitCodeOfWait(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

CommandResult Run(const std::vector<std::string>& argv,
                  const std::optional<std::string>& env_path) {
  CommandResult r;
  const std::string tmp = TempRoot();
  int out_fd = MakeTempFile(tmp, "tfrfs-out");
  int err_fd = MakeTempFile(tmp, "tfrfs-err");
  if (out_fd < 0 || err_fd < 0) {
    ADD_FAILURE() << "mkstemp: " << std::strerror(errno);
    if (out_fd >= 0) ::close(out_fd);
    if (err_fd >= 0) ::close(err_fd);
    return r;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, err_fd, 2);

  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) {
    if (env_path && std::strncmp(*e, "PATH=", 5) == 0) continue;
    env_store.emplace_back(*e);
  }
  if (env_path) env_store.push_back("PATH=" + *env_path);
  std::vector<char*> envp;
  for (auto& s : env_store) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_store = argv;
  std::vector<char*> cargv;
  for (auto& s : argv_store) cargv.push_back(s.data());
  cargv.push_back(nullptr);

  // posix_spawnp searches the parent's PATH; honour the replacement instead.
  std::string prog = argv.at(0);
  if (env_path && prog.find('/') == std::string::npos) {
    std::stringstream ss(*env_path);
    std::string dir;
    while (std::getline(ss, dir, ':')) {
      if (!dir.empty() && ::access((dir + "/" + prog).c_str(), X_OK) == 0) {
        prog = dir + "/" + prog;
        break;
      }
    }
  }
  pid_t pid;
  int rc = ::posix_spawnp(&pid, prog.c_str(), &fa, nullptr, cargv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    r.err = std::string("spawn ") + prog + ": " + std::strerror(rc);
    ::close(out_fd);
    ::close(err_fd);
    return r;
  }
  int status = 0;
  if (!WaitUntil([&] { return Reaped(pid, &status); })) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    ADD_FAILURE() << "command timed out: " << argv.at(0);
  }
  r.exit_code = ExitCodeOfWait(status);
  r.out = ReadFd(out_fd);
  r.err = ReadFd(err_fd);
  ::close(out_fd);
  ::close(err_fd);
  return r;
}

}  // namespace tfrecordfs::test
