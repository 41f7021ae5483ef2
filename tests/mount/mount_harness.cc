#include "mount_harness.h"

#include <dirent.h>
#include <fcntl.h>
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

Mount::Mount() = default;

Mount::~Mount() = default;

std::string Mount::Start(const std::vector<std::string>& sources,
                         const std::vector<std::string>& extra_args) {
  if (dir_.path().empty()) return "no temp directory";
  const std::string mnt = dir_.Subdir("mnt");
  mountpoint_ = RealPath(mnt).value_or(mnt);
  const std::string out_dir = dir_.Subdir("out");
  test::DaemonSpec spec;
  spec.argv = {BinaryPath(), "-f", "-o",
               "staging_dir=" + dir_.path() + "/store,output_dir=" + out_dir};
  spec.argv.insert(spec.argv.end(), extra_args.begin(), extra_args.end());
  spec.argv.insert(spec.argv.end(), sources.begin(), sources.end());
  spec.argv.push_back(mountpoint_);
  spec.mountpoint = mountpoint_;
  spec.stdout_path = dir_.path() + "/daemon.stdout";
  spec.stderr_path = dir_.path() + "/daemon.stderr";
  daemon_.emplace(std::move(spec));
  return daemon_->Start();
}

int Mount::Stop(std::string* error) {
  if (!daemon_ || daemon_->pid() < 0) {
    *error = "daemon not running";
    return -1;
  }
  int status = 0;
  if (!daemon_->Unmount(&status, error)) return -1;
  if (!WIFEXITED(status)) {
    *error = "daemon ended with " + test::DescribeWait(status) + "; stderr:\n" + Stderr();
    return -1;
  }
  if (IsMounted(mountpoint_)) *error = "still mounted after the daemon exited";
  return WEXITSTATUS(status);
}

std::string Mount::Stderr() const { return daemon_ ? daemon_->Stderr() : ""; }

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
