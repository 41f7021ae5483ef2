#include "mount_harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
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
#include <utility>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tfrecordfs/base/fs_util.h"

namespace tfrecordfs::mount_test {

namespace {

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

}  // namespace

std::string BinaryPath() {
  const char* b = std::getenv("TFRECORDFS_BIN");
  return b != nullptr ? b : "";
}

namespace {

std::string RealDataCandidate() {
  if (const char* e = std::getenv("TFRECORDFS_REAL_DATA"); e != nullptr && *e != '\0') return e;
  if (const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT"); root != nullptr) {
    return std::string(root) + "/../shared/data/real";
  }
  return "";
}

}  // namespace

std::string RealDataDir() {
  const std::string dir = RealDataCandidate();
  if (dir.empty() || ::access((dir + "/SOURCES.md").c_str(), R_OK) != 0) return "";
  return RealPath(dir).value_or(dir);
}

std::string RealDataMissing() {
  return "real TFRecord data not found at '" + RealDataCandidate() +
         "' (set TFRECORDFS_REAL_DATA to the directory holding SOURCES.md)";
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
    if (a0.size() < suffix.size() ||
        a0.compare(a0.size() - suffix.size(), suffix.size(), suffix) != 0) {
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

Mount::Mount() : own_dir_(std::in_place) {
  const std::string mnt = own_dir_->Subdir("mnt");
  config_.mountpoint = RealPath(mnt).value_or(mnt);
  config_.options = {"staging_dir=" + own_dir_->path() + "/store",
                     "output_dir=" + own_dir_->Subdir("out")};
  config_.log_dir = own_dir_->path();
}

Mount::Mount(MountConfig config) : config_(std::move(config)) {
  if (!config_.mountpoint.empty() && !config_.log_dir.empty()) return;
  own_dir_.emplace();
  if (config_.mountpoint.empty()) {
    const std::string mnt = own_dir_->Subdir("mnt");
    config_.mountpoint = RealPath(mnt).value_or(mnt);
  }
  if (config_.log_dir.empty()) config_.log_dir = own_dir_->path();
}

Mount::~Mount() = default;

absl::Status Mount::Start(const std::vector<std::string>& sources,
                          const std::vector<std::string>& args) {
  config_.sources = sources;
  config_.args = args;
  return Start();
}

absl::Status Mount::Start() {
  if (own_dir_ && own_dir_->path().empty()) return absl::InternalError("no temp directory");
  static int serial = 0;  // several daemons may share a log directory
  const std::string stem = config_.log_dir + "/daemon-" + std::to_string(++serial);
  test::DaemonSpec spec;
  spec.argv = config_.wrapper;
  spec.argv.insert(spec.argv.end(), {BinaryPath(), "-f"});
  if (!config_.options.empty()) {
    spec.argv.push_back("-o");
    spec.argv.push_back(absl::StrJoin(config_.options, ","));
  }
  spec.argv.insert(spec.argv.end(), config_.args.begin(), config_.args.end());
  spec.argv.insert(spec.argv.end(), config_.sources.begin(), config_.sources.end());
  spec.argv.push_back(config_.mountpoint);
  spec.mountpoint = config_.mountpoint;
  // The fault hook is the daemon's only: never inherited from the test.
  spec.env.push_back(config_.fault.empty() ? "TFRECORDFS_FAULT"
                                           : "TFRECORDFS_FAULT=" + config_.fault);
  spec.env.insert(spec.env.end(), config_.env.begin(), config_.env.end());
  spec.stdout_path = stem + ".stdout";
  spec.stderr_path = stem + ".stderr";
  daemon_.emplace(std::move(spec));
  return daemon_->Start();
}

int Mount::RunExpectingFailure() {
  if (Start().ok()) return -1;  // it mounted
  const std::optional<int> early = daemon_->early_status();
  return early ? ExitCodeOfWait(*early) : -1;
}

bool Mount::Unmount(int* status, std::string* error) {
  if (!daemon_) {
    *error = "daemon not running";
    return false;
  }
  return daemon_->Unmount(status, error);
}

int Mount::Stop(std::string* error) {
  if (pid() < 0) {
    *error = "daemon not running";
    return -1;
  }
  int status = 0;
  if (!Unmount(&status, error)) return -1;
  if (!WIFEXITED(status)) {
    *error = "daemon ended with " + DescribeWait(status) + "; stderr:\n" + Stderr();
    return -1;
  }
  if (IsMounted(mountpoint())) *error = "still mounted after the daemon exited";
  return WEXITSTATUS(status);
}

CommandResult Mount::TfrUnmount(int* status) {
  CommandResult r = Run({BinaryPath(), "unmount", mountpoint()});
  if (!WaitExit(status)) {
    ADD_FAILURE() << "daemon did not end after `tfrecordfs unmount` (exit " << r.exit_code
                  << "): " << r.err;
  }
  return r;
}

bool Mount::WaitExit(int* status) { return daemon_ && daemon_->WaitExit(status); }

void Mount::KillHard() {
  if (daemon_) daemon_->KillAndReap(SIGKILL);
  CleanStaleMount(mountpoint());
}

std::string Mount::Stderr() const { return daemon_ ? daemon_->Stderr() : ""; }

bool KilledBySigkill(int status) { return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL; }

void CleanStaleMount(const std::string& mnt) {
  if (!IsMounted(mnt)) return;
  CommandResult r = Run({"fusermount3", "-u", "-z", mnt});
  EXPECT_EQ(r.exit_code, 0) << "fusermount3 -u -z " << mnt << ": " << r.err;
  EXPECT_TRUE(WaitUntil([&] { return !IsMounted(mnt); })) << mnt << " stays mounted";
}

DetachedGuard::~DetachedGuard() {
  if (IsMounted(mnt_)) Run({"fusermount3", "-u", "-z", mnt_});
  for (pid_t pid : FindDaemons(mnt_)) ::kill(pid, SIGKILL);
}

bool DaemonGone(const std::string& mnt) {
  return WaitUntil([&] { return FindDaemons(mnt).empty() && !IsMounted(mnt); });
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
