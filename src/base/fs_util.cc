#include "tfrecordfs/base/fs_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace tfrecordfs {

std::string JoinPath(absl::string_view dir, absl::string_view name) {
  return absl::StrCat(dir, !dir.empty() && dir.back() == '/' ? "" : "/", name);
}

std::string UserCacheDir(absl::string_view sub) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return absl::StrCat(xdg, "/tfrecordfs/", sub);
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] != '\0') return absl::StrCat(home, "/.cache/tfrecordfs/", sub);
  return "";
}

std::string ProcFdPath(int fd) { return absl::StrCat("/proc/self/fd/", fd); }

absl::StatusOr<std::string> RealPath(const std::string& path) {
  char* r = ::realpath(path.c_str(), nullptr);
  if (!r) return ErrnoError(errno, path);
  std::string out(r);
  std::free(r);
  return out;
}

absl::StatusOr<bool> Exists(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) return true;
  if (errno == ENOENT) return false;
  return ErrnoError(errno, path);
}

absl::StatusOr<bool> UnlinkIfExists(const std::string& path) {
  if (::unlink(path.c_str()) == 0) return true;
  const int err = errno;
  // A read-only file system says EROFS even for a name that is not there.
  struct stat st;
  if (err == ENOENT || (::lstat(path.c_str(), &st) != 0 && errno == ENOENT)) return false;
  return ErrnoError(err, absl::StrCat("unlink ", path));
}

absl::Status UnlinkDurably(const std::string& path) {
  auto r = UnlinkIfExists(path);
  if (!r.ok()) return r.status();
  return FsyncDir(Dirname(path));
}

absl::Status MakeDirs(const std::string& path, mode_t mode) {
  if (path.empty() || path == "/" || path == ".") return absl::OkStatus();
  // The leaf first: it usually exists already, or only it is missing.
  if (::mkdir(path.c_str(), mode) == 0) return absl::OkStatus();
  int err = errno;
  if (err == ENOENT) {
    if (auto s = MakeDirs(Dirname(path), mode); !s.ok()) return s;
    if (::mkdir(path.c_str(), mode) == 0) return absl::OkStatus();
    err = errno;
  }
  if (err == EEXIST) {
    // Made meanwhile, or there already; only a directory will do (stat: a
    // symlink to a directory counts, as for mkdir -p).
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return absl::OkStatus();
  }
  return ErrnoError(err, absl::StrCat("mkdir ", path));
}

absl::Status RemoveTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? absl::OkStatus() : ErrnoError(errno, path);
  }
  if (!S_ISDIR(st.st_mode)) {
    auto r = UnlinkIfExists(path);
    return r.ok() ? absl::OkStatus() : r.status();
  }
  // A record copied with `cp -r` from the read-only mount keeps its 0555
  // folders; the owner may always make them writable to empty them.
  if ((st.st_mode & S_IRWXU) != S_IRWXU) ::chmod(path.c_str(), (st.st_mode & 07777) | S_IRWXU);
  // All names first: unlinking while a stream is open may skip or repeat
  // entries. O_NOFOLLOW: a symlink put in the folder's place since the
  // lstat is refused (ELOOP), never listed through.
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, path);
  auto dir = ListDir::Adopt(UniqueFd(fd), path);
  if (!dir.ok()) return dir.status();
  std::vector<std::string> children;
  for (absl::string_view name; dir->Next(&name);) children.emplace_back(name);
  if (!dir->status().ok()) return dir->status();
  for (const std::string& c : children) {
    if (auto s = RemoveTree(JoinPath(path, c)); !s.ok()) return s;
  }
  if (::rmdir(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError(errno, absl::StrCat("rmdir ", path));
  }
  return absl::OkStatus();
}

absl::Status RenameNoReplace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) {
    return absl::OkStatus();
  }
  if (errno != EINVAL && errno != ENOSYS) {
    return ErrnoError(errno, absl::StrCat("rename ", from, " -> ", to));
  }
  auto exists = Exists(to);
  if (!exists.ok()) return exists.status();
  if (*exists) return ErrnoError(EEXIST, absl::StrCat("rename ", from, " -> ", to));
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return ErrnoError(errno, absl::StrCat("rename ", from, " -> ", to));
  }
  return absl::OkStatus();
}

// ---- ListDir ----

absl::StatusOr<ListDir> ListDir::Open(const std::string& path) {
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return ErrnoError(errno, path);
  return ListDir(d, path);
}

absl::StatusOr<ListDir> ListDir::Adopt(UniqueFd fd, std::string path) {
  DIR* d = ::fdopendir(fd.get());
  if (d == nullptr) return ErrnoError(errno, path);  // fd closes itself
  fd.release();                                      // the stream owns it now
  return ListDir(d, std::move(path));
}

ListDir::ListDir(ListDir&& o) noexcept
    : dir_(std::exchange(o.dir_, nullptr)),
      path_(std::move(o.path_)),
      status_(std::move(o.status_)) {}

ListDir& ListDir::operator=(ListDir&& o) noexcept {
  if (this != &o) {
    if (dir_ != nullptr) ::closedir(dir_);
    dir_ = std::exchange(o.dir_, nullptr);
    path_ = std::move(o.path_);
    status_ = std::move(o.status_);
  }
  return *this;
}

ListDir::~ListDir() {
  if (dir_ != nullptr) ::closedir(dir_);
}

int ListDir::fd() const { return ::dirfd(dir_); }

bool ListDir::Next(absl::string_view* name) {
  if (!status_.ok()) return false;
  for (;;) {
    errno = 0;
    const dirent* e = ::readdir(dir_);
    if (e == nullptr) {
      if (errno != 0) status_ = ErrnoError(errno, absl::StrCat("readdir ", path_));
      return false;
    }
    const absl::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    *name = n;
    return true;
  }
}

absl::StatusOr<std::vector<std::string>> ListNames(const std::string& path) {
  auto dir = ListDir::Open(path);
  if (!dir.ok()) return dir.status();
  std::vector<std::string> out;
  for (absl::string_view name; dir->Next(&name);) out.emplace_back(name);
  if (!dir->status().ok()) return dir->status();
  return out;
}

}  // namespace tfrecordfs
