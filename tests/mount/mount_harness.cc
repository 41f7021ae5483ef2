#include "mount_harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"

extern char** environ;

namespace tfrecordfs::mount_test {

namespace {

std::string Canonical(const std::string& p) {
  char buf[PATH_MAX];
  if (::realpath(p.c_str(), buf) == nullptr) return p;
  return buf;
}

bool InPath(const std::string& prog) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    if (::access((dir + "/" + prog).c_str(), X_OK) == 0) return true;
  }
  return false;
}

// Reaps `pid` if it has exited; returns true then and sets *status.
bool Reaped(pid_t pid, int* status) {
  pid_t r = ::waitpid(pid, status, WNOHANG);
  return r == pid || (r < 0 && errno == ECHILD);
}

int ExitCodeOf(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

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

std::string BinaryPath() {
  const char* b = std::getenv("TFRECORDFS_BIN");
  return b != nullptr ? b : "";
}

std::string FuseUnavailableReason() {
  const std::string bin = BinaryPath();
  if (bin.empty() || ::access(bin.c_str(), X_OK) != 0) {
    return "TFRECORDFS_BIN is not set to an executable tfrecordfs binary (run through meson test)";
  }
  int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    return std::string("real-mount tests skipped: /dev/fuse cannot be opened (") +
           std::strerror(errno) + "); run in a container with --device /dev/fuse";
  }
  ::close(fd);
  if (!InPath("fusermount3")) return "real-mount tests skipped: fusermount3 is not in PATH";
  return "";
}

// ---- processes ----

std::vector<pid_t> FindDaemons(const std::string& arg) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid == ::getpid()) continue;
    // The process may exit at any point of this: an error is "gone".
    std::string all;
    if (!ReadProcFile(e.path() / "cmdline", &all)) continue;
    std::vector<std::string> args;
    std::string cur;
    for (char c : all) {
      if (c == '\0') {
        args.push_back(cur);
        cur.clear();
      } else {
        cur.push_back(c);
      }
    }
    if (args.empty()) continue;  // kernel threads and zombies
    const std::string& a0 = args[0];
    const std::string suffix = "tfrecordfs";
    if (a0.size() < suffix.size() || a0.compare(a0.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    for (size_t i = 1; i < args.size(); ++i) {
      if (args[i] == arg) {
        out.push_back(pid);
        break;
      }
    }
  }
  return out;
}

CommandResult Run(const std::vector<std::string>& argv, const std::optional<std::string>& env_path) {
  CommandResult r;
  const std::string tmp = test::TempRoot();
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
  r.exit_code = ExitCodeOf(status);
  r.out = ReadFd(out_fd);
  r.err = ReadFd(err_fd);
  ::close(out_fd);
  ::close(err_fd);
  return r;
}

CommandResult Shell(const std::string& script) { return Run({"/bin/sh", "-c", script}); }

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out.push_back(c);
    }
  }
  return out + "'";
}

std::string ReadWholeFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    ADD_FAILURE() << "open " << path << ": " << std::strerror(errno);
    return "";
  }
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ADD_FAILURE() << "read " << path << ": " << std::strerror(errno);
      break;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

void WriteWholeFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  if (!out) ADD_FAILURE() << "write " << path;
}

// ---- Mount ----

Mount::Mount() = default;

Mount::~Mount() { ForceCleanup(); }

std::string Mount::Start(const std::vector<std::string>& sources,
                         const std::vector<std::string>& extra_args) {
  if (dir_.path().empty()) return "no temp directory";
  mountpoint_ = Canonical(dir_.Subdir("mnt"));
  stderr_path_ = dir_.path() + "/daemon.stderr";
  const std::string stdout_path = dir_.path() + "/daemon.stdout";

  const std::string out_dir = dir_.Subdir("out");
  std::vector<std::string> args = {BinaryPath(), "-f", "-o",
                                   "staging_dir=" + dir_.path() + "/store,output_dir=" + out_dir};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  args.insert(args.end(), sources.begin(), sources.end());
  args.push_back(mountpoint_);
  std::vector<char*> cargv;
  for (auto& s : args) cargv.push_back(s.data());
  cargv.push_back(nullptr);

  // fork + exec rather than posix_spawn, for PR_SET_PDEATHSIG: if the test
  // process dies (a crash, a timeout kill), the daemon gets SIGTERM and
  // unmounts itself instead of leaving a mount behind. Only async-signal-safe
  // calls run between fork and exec.
  const int in_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int out_fd = ::open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err_fd = ::open(stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (in_fd < 0 || out_fd < 0 || err_fd < 0) {
    const int err = errno;
    for (int fd : {in_fd, out_fd, err_fd}) {
      if (fd >= 0) ::close(fd);
    }
    return std::string("cannot open the daemon's stdio files: ") + std::strerror(err);
  }
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(126);  // the test died before prctl
    ::dup2(in_fd, 0);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(in_fd);
  ::close(out_fd);
  ::close(err_fd);
  if (pid_ < 0) {
    pid_ = -1;
    return std::string("fork: ") + std::strerror(fork_errno);
  }
  int status = 0;
  bool exited = false;
  const bool ready = WaitUntil([&] {
    if (IsMounted(mountpoint_, "fuse.tfrecordfs")) return true;
    exited = Reaped(pid_, &status);
    return exited;
  });
  if (exited) {
    pid_ = -1;
    return "tfrecordfs exited before the mount was ready (" + DescribeStatus(status) +
           "); stderr:\n" + Stderr();
  }
  if (!ready) {
    return "mount not ready within " + std::to_string(kWaitLimit.count()) + " s; stderr:\n" +
           Stderr();
  }
  return "";
}

int Mount::Stop(std::string* error) {
  if (pid_ < 0) {
    *error = "daemon not running";
    return -1;
  }
  CommandResult u = Run({"fusermount3", "-u", mountpoint_});
  if (u.exit_code != 0) {
    *error = "fusermount3 -u failed (" + std::to_string(u.exit_code) + "): " + u.err;
    return -1;
  }
  int status = 0;
  if (!WaitUntil([&] { return Reaped(pid_, &status); })) {
    *error = "daemon still running " + std::to_string(kWaitLimit.count()) +
             " s after fusermount3 -u";
    return -1;
  }
  pid_ = -1;
  if (!WIFEXITED(status)) {
    *error = "daemon ended with " + DescribeStatus(status) + "; stderr:\n" + Stderr();
    return -1;
  }
  if (IsMounted(mountpoint_)) *error = "still mounted after the daemon exited";
  return WEXITSTATUS(status);
}

std::string Mount::Stderr() const {
  if (stderr_path_.empty()) return "";
  std::ifstream in(stderr_path_, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void Mount::ForceCleanup() {
  if (!mountpoint_.empty() && IsMounted(mountpoint_)) {
    Run({"fusermount3", "-u", "-z", mountpoint_});
  }
  if (pid_ > 0) {
    int status;
    ::kill(pid_, SIGTERM);
    if (!WaitUntil([&] { return Reaped(pid_, &status); }, std::chrono::seconds(10))) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }
}

// ---- WalkTree ----

namespace {

void ReadInto(const std::string& path, WalkedNode* node) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    node->error = errno;
    return;
  }
  char buf[131072];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      node->error = errno;
      break;
    }
    if (n == 0) break;
    node->content.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
}

void WalkInto(const std::string& abs, const std::string& rel, bool read_files,
              std::map<std::string, WalkedNode>* out, int* dir_error) {
  DIR* d = ::opendir(abs.c_str());
  if (d == nullptr) {
    *dir_error = errno;
    return;
  }
  std::vector<std::string> names;
  errno = 0;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
    errno = 0;
  }
  const int err = errno;
  ::closedir(d);
  if (err != 0) {
    *dir_error = err;
    return;
  }
  for (const std::string& n : names) {
    const std::string child_abs = abs + "/" + n;
    const std::string child_rel = rel.empty() ? n : rel + "/" + n;
    WalkedNode node;
    struct stat st;
    if (::lstat(child_abs.c_str(), &st) != 0) {
      node.error = errno;
      (*out)[child_rel] = node;
      continue;
    }
    node.mode = st.st_mode;
    node.size = static_cast<uint64_t>(st.st_size);
    node.ino = st.st_ino;
    node.nlink = st.st_nlink;
    if (S_ISREG(st.st_mode) && read_files) ReadInto(child_abs, &node);
    int child_error = 0;
    auto& slot = (*out)[child_rel];
    slot = std::move(node);
    if (S_ISDIR(st.st_mode)) {
      WalkInto(child_abs, child_rel, read_files, out, &child_error);
      if (child_error != 0) (*out)[child_rel].error = child_error;
    }
  }
}

}  // namespace

bool RemoveEmptyStaging(std::map<std::string, WalkedNode>* walked) {
  const std::string name = Mount::kStagingName;
  auto it = walked->find(name);
  if (it == walked->end()) return false;
  const bool ok = S_ISDIR(it->second.mode) && it->second.error == 0;
  it = walked->erase(it);
  bool empty = true;
  while (it != walked->end() && it->first.rfind(name + "/", 0) == 0) {
    empty = false;
    it = walked->erase(it);
  }
  return ok && empty;
}

std::map<std::string, WalkedNode> WalkTree(const std::string& root, bool read_files) {
  std::map<std::string, WalkedNode> out;
  int err = 0;
  WalkInto(root, "", read_files, &out, &err);
  if (err != 0) ADD_FAILURE() << "cannot list " << root << ": " << std::strerror(err);
  return out;
}

long RssKiB(pid_t pid) {
  std::string status;
  if (!ReadProcFile("/proc/" + std::to_string(pid) + "/status", &status)) return -1;
  std::istringstream in(status);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

bool ReadProcFile(const std::string& path, std::string* out) {
  out->clear();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return n == 0;
    }
    out->append(buf, static_cast<size_t>(n));
  }
}

namespace {

// Every test binary that links the harness runs with a private HOME and
// XDG directories (made before main(), removed at exit), so neither the
// daemons it starts nor `tfrecordfs index` ever write the real
// ~/.cache/tfrecordfs or ~/.local/state/tfrecordfs. A test that wants its
// own directories still sets them itself.
class PrivateHome {
 public:
  PrivateHome() {
    for (const char* var : {"HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME",
                            "XDG_DATA_HOME", "XDG_RUNTIME_DIR"}) {
      const std::string dir = dir_.path() + "/" + var;
      ::mkdir(dir.c_str(), 0700);
      ::setenv(var, dir.c_str(), 1);
    }
  }

 private:
  TempDir dir_;
};
const PrivateHome private_home;

}  // namespace

}  // namespace tfrecordfs::mount_test
