#include "tfrecordfs/staging/store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <optional>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/log.h"

namespace tfrecordfs::staging {

mode_t StagedMode(mode_t requested, bool directory) {
  return (requested & 07777) | (directory ? S_IRWXU : S_IRUSR | S_IWUSR);
}

absl::Status CheckName(absl::string_view name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != absl::string_view::npos ||
      name.find('\0') != absl::string_view::npos) {
    return PosixError(EINVAL, absl::StrCat("invalid name '", name, "'"));
  }
  if (name.size() > 255) return PosixError(ENAMETOOLONG, "name too long");
  return absl::OkStatus();
}

namespace {

// Makes `path` a file of kJournalReserveBytes allocated blocks (see
// layout.h). posix_fallocate really allocates (and falls back to writing
// zeros where the file system cannot), unlike a sparse ftruncate.
void ReserveJournalSpace(const std::string& path) {
  auto fd = OpenFile(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  absl::Status s = fd.status();
  if (s.ok()) {
    const int err = ::posix_fallocate(fd->get(), 0, static_cast<off_t>(kJournalReserveBytes));
    if (err != 0) s = ErrnoError(err, path);
  }
  if (!s.ok()) {
    log::Warning("cannot set ", kJournalReserveBytes >> 20,
                 " MiB aside for the pack journal in the staging store: ", s.message(),
                 "; if its file system fills up, staged records may not be packed until space "
                 "is freed");
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& dir, OpenOptions options) {
  if (options.read_only) {
    struct stat st;
    if (::stat(RecordsDir(dir).c_str(), &st) != 0) {
      return SetMessage(ErrnoError(errno, RecordsDir(dir)),
                        absl::StrCat("no staging store at ", dir));
    }
  } else if (auto s = MakeDirs(RecordsDir(dir), 0700); !s.ok()) {
    return Annotate(s, "cannot create the staging store");
  }
  auto real = RealPath(dir);
  if (!real.ok()) return real.status();
  UniqueFd lock_fd;
  if (!options.read_only) {
    auto lock = OpenFile(LockFile(*real), O_RDWR | O_CREAT, 0600);
    if (!lock.ok()) return lock.status();
    if (::flock(lock->get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) {
        return PosixError(EBUSY, absl::StrCat("staging store ", *real,
                                              " is in use by another read-write tfrecordfs mount"
                                              " (a second mount can be read-only: -o ro)"));
      }
      return ErrnoError(errno, LockFile(*real));
    }
    lock_fd = std::move(*lock);
  }
  auto root = OpenFile(RecordsDir(*real), O_PATH | O_DIRECTORY | O_NOFOLLOW);
  if (!root.ok()) return root.status();
  struct stat st;
  if (::fstat(root->get(), &st) != 0) return ErrnoError(errno, RecordsDir(*real));
  size_t node_fds = options.node_fds;
  if (node_fds == 0) {
    struct rlimit rl;
    const size_t limit = ::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY
                             ? 1024 * 8
                             : static_cast<size_t>(rl.rlim_cur);
    node_fds = std::clamp<size_t>(limit / 8, 16, 1024);
  }
  if (!options.read_only && options.reserve_journal) {
    ReserveJournalSpace(JournalReserveFile(*real));
  }
  return std::unique_ptr<Store>(
      new Store(std::move(*real), std::move(lock_fd), std::move(*root), st, node_fds));
}

Store::Store(std::string dir, UniqueFd lock_fd, UniqueFd root_fd, const struct stat& root,
             size_t node_fds)
    : dir_(std::move(dir)),
      lock_fd_(std::move(lock_fd)),
      nodes_(std::move(root_fd), root, node_fds),
      checker_(nodes_, RecordsDir(dir_)) {}

Store::~Store() = default;

void Store::Forget(uint64_t node, uint64_t n, naming::FeatureTypes& types) {
  // The kernel is done with the file: the last moment to check it while its
  // path is known.
  if (nodes_.IsLastReference(node, n) && checker_.IsWritten(node)) {
    (void)checker_.CheckWritten(node, types);
  }
  nodes_.Forget(node, n);
}

absl::StatusOr<struct stat> Store::Lookup(uint64_t parent, absl::string_view name) {
  if (auto s = CheckName(name); !s.ok()) return s;
  auto pfd = nodes_.NodeFd(parent);
  if (!pfd.ok()) return pfd.status();
  return nodes_.Register(parent, (*pfd)->get(), name);
}

absl::StatusOr<struct stat> Store::GetAttr(uint64_t node) {
  auto fd = nodes_.NodeFd(node);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (::fstatat((*fd)->get(), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoError(errno, "staging");
  }
  return st;
}

absl::StatusOr<struct stat> Store::SetAttr(uint64_t node, int fd, const struct stat& to, int bits) {
  auto nfd = nodes_.NodeFd(node);
  if (!nfd.ok()) return nfd.status();
  const std::string proc = ProcFdPath((*nfd)->get());
  if (bits & kSetMode) {
    struct stat st;
    if (::fstatat((*nfd)->get(), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) {
      return ErrnoError(errno, "chmod");
    }
    if (::chmod(proc.c_str(), StagedMode(to.st_mode, S_ISDIR(st.st_mode))) != 0) {
      return ErrnoError(errno, "chmod");
    }
  }
  if (bits & kSetSize) {
    NodeTable::FdRef writable;
    if (fd < 0) writable = nodes_.CachedWritable(node);
    if (writable) fd = writable->get();
    const int r = fd >= 0 ? ::ftruncate(fd, to.st_size) : ::truncate(proc.c_str(), to.st_size);
    if (r != 0) return ErrnoError(errno, "truncate");
  }
  if (bits & (kSetAtime | kSetMtime | kSetAtimeNow | kSetMtimeNow)) {
    struct timespec ts[2];
    ts[0].tv_nsec = ts[1].tv_nsec = UTIME_OMIT;
    if (bits & kSetAtimeNow)
      ts[0].tv_nsec = UTIME_NOW;
    else if (bits & kSetAtime)
      ts[0] = to.st_atim;
    if (bits & kSetMtimeNow)
      ts[1].tv_nsec = UTIME_NOW;
    else if (bits & kSetMtime)
      ts[1] = to.st_mtim;
    if (::utimensat(AT_FDCWD, proc.c_str(), ts, 0) != 0) return ErrnoError(errno, "utimens");
  }
  return GetAttr(node);
}

namespace {

// Gives `name` in `dir_fd`, just made by the daemon (`fd`: a descriptor of
// it, or -1), to `owner` (see Owner): only a root daemon can, and only ids
// other than its own need it.
absl::Status GiveTo(int dir_fd, const std::string& name, int fd,
                    const std::optional<Owner>& owner) {
  if (!owner || ::geteuid() != 0) return absl::OkStatus();
  struct stat parent;
  if (::fstat(dir_fd, &parent) != 0) return ErrnoError(errno, name);
  const gid_t gid = (parent.st_mode & S_ISGID) ? static_cast<gid_t>(-1) : owner->gid;
  if (owner->uid == ::geteuid() && (gid == static_cast<gid_t>(-1) || gid == ::getegid())) {
    return absl::OkStatus();
  }
  const int r = fd >= 0 ? ::fchown(fd, owner->uid, gid)
                        : ::fchownat(dir_fd, name.c_str(), owner->uid, gid, AT_SYMLINK_NOFOLLOW);
  if (r != 0) return ErrnoError(errno, absl::StrCat(name, ": chown"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<struct stat> Store::Mkdir(uint64_t parent, absl::string_view name, mode_t mode,
                                         std::optional<Owner> owner) {
  if (auto s = CheckName(name); !s.ok()) return s;
  auto pfd = nodes_.NodeFd(parent);
  if (!pfd.ok()) return pfd.status();
  const std::string n(name);
  if (::mkdirat((*pfd)->get(), n.c_str(), StagedMode(mode, true)) != 0) return ErrnoError(errno, n);
  if (auto s = GiveTo((*pfd)->get(), n, -1, owner); !s.ok()) {
    ::unlinkat((*pfd)->get(), n.c_str(), AT_REMOVEDIR);
    return s;
  }
  return nodes_.Register(parent, (*pfd)->get(), name);
}

absl::StatusOr<std::pair<struct stat, int>> Store::Create(uint64_t parent, absl::string_view name,
                                                          mode_t mode, int flags,
                                                          std::optional<Owner> owner) {
  if (auto s = CheckName(name); !s.ok()) return s;
  if (!S_ISREG(mode) && (mode & S_IFMT) != 0) {
    return PosixError(EPERM, "only regular files and folders can be staged");
  }
  auto pfd = nodes_.NodeFd(parent);
  if (!pfd.ok()) return pfd.status();
  const std::string n(name);
  const int open_flags = (flags | O_NOFOLLOW | O_CLOEXEC) & ~O_DIRECT;
  // O_EXCL tells a file made here from one opened (which keeps its owner).
  int fd =
      ::openat((*pfd)->get(), n.c_str(), open_flags | O_CREAT | O_EXCL, StagedMode(mode, false));
  const bool made = fd >= 0;
  if (!made && errno == EEXIST && !(flags & O_EXCL)) {
    fd = ::openat((*pfd)->get(), n.c_str(), open_flags & ~O_CREAT);
  }
  if (fd < 0) return ErrnoError(errno, n);
  if (made) {
    if (auto s = GiveTo((*pfd)->get(), n, fd, owner); !s.ok()) {
      ::close(fd);
      ::unlinkat((*pfd)->get(), n.c_str(), 0);
      return s;
    }
  }
  auto st = nodes_.Register(parent, (*pfd)->get(), name);
  if (!st.ok()) {
    ::close(fd);
    return st.status();
  }
  if ((flags & O_ACCMODE) != O_RDONLY && !(flags & O_APPEND)) {
    // Kept for writes that come without a handle (WritableFd; pwrite on an
    // O_APPEND descriptor would ignore their offsets).
    UniqueFd dup(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
    if (dup.valid())
      nodes_.CacheWritable(st->st_ino, std::make_shared<const UniqueFd>(std::move(dup)));
  }
  return std::make_pair(*st, fd);
}

absl::Status Store::Remove(uint64_t parent, absl::string_view name, int flags) {
  if (auto s = CheckName(name); !s.ok()) return s;
  auto pfd = nodes_.NodeFd(parent);
  if (!pfd.ok()) return pfd.status();
  const std::string n(name);
  NodeTable::FdRef keep;
  const std::optional<uint64_t> known = nodes_.KnownNode(parent, n, &keep);
  if (::unlinkat((*pfd)->get(), n.c_str(), flags) != 0) return ErrnoError(errno, n);
  if (known) nodes_.Removed(*known, std::move(keep));
  return absl::OkStatus();
}

absl::Status Store::Unlink(uint64_t parent, absl::string_view name) {
  return Remove(parent, name, 0);
}

absl::Status Store::Rmdir(uint64_t parent, absl::string_view name) {
  return Remove(parent, name, AT_REMOVEDIR);
}

absl::Status Store::Rename(uint64_t parent, absl::string_view name, uint64_t new_parent,
                           absl::string_view new_name, unsigned flags,
                           naming::FeatureTypes& types) {
  if (auto s = CheckName(name); !s.ok()) return s;
  if (auto s = CheckName(new_name); !s.ok()) return s;
  auto pfd = nodes_.NodeFd(parent);
  if (!pfd.ok()) return pfd.status();
  auto npfd = nodes_.NodeFd(new_parent);
  if (!npfd.ok()) return npfd.status();
  const std::string a(name), b(new_name);
  // What a file becomes under its final name (a tool's temporary file
  // renamed over a feature file) is judged before the rename.
  auto rel_of = [&](uint64_t dir, const std::string& n) -> std::optional<std::string> {
    auto d = RelativePath(dir);
    if (!d.ok()) return std::nullopt;
    return d->empty() ? n : absl::StrCat(*d, "/", n);
  };
  if (auto to = rel_of(new_parent, b)) {
    if (auto s = checker_.CheckRenamed((*pfd)->get(), a, *to, types); !s.ok()) return s;
  }
  if (flags & RENAME_EXCHANGE) {
    if (auto to = rel_of(parent, a)) {
      if (auto s = checker_.CheckRenamed((*npfd)->get(), b, *to, types); !s.ok()) return s;
    }
  }
  std::optional<uint64_t> target;  // a known node the rename replaces
  NodeTable::FdRef keep;
  if (!(flags & RENAME_EXCHANGE)) target = nodes_.KnownNode(new_parent, b, &keep);
  if (::renameat2((*pfd)->get(), a.c_str(), (*npfd)->get(), b.c_str(), flags) != 0) {
    return ErrnoError(errno, absl::StrCat(a, " -> ", b));
  }
  nodes_.Moved(parent, a, new_parent, b, flags, target, std::move(keep));
  return absl::OkStatus();
}

absl::StatusOr<int> Store::OpenDir(uint64_t node) {
  auto nfd = nodes_.NodeFd(node);
  if (!nfd.ok()) return nfd.status();
  int fd = ::openat((*nfd)->get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "opendir");
  return fd;
}

void RemoveIfEmpty(const std::string& dir) {
  // The edit store inside it first (the same layout, layout.h).
  if (const std::string edits = EditsStoreDir(dir); edits != dir) {
    struct stat st;
    if (::stat(edits.c_str(), &st) == 0) RemoveIfEmpty(edits);
  }
  // rmdir fails on anything non-empty, so staged bytes are never lost.
  if (::rmdir(RecordsDir(dir).c_str()) != 0 && errno != ENOENT) return;
  struct stat st;
  if (::stat(PackJournalFile(dir).c_str(), &st) == 0) return;
  if (::stat(PackReportFile(dir).c_str(), &st) == 0) return;
  ::unlink(JournalReserveFile(dir).c_str());
  ::unlink(LockFile(dir).c_str());
  ::rmdir(dir.c_str());
}

}  // namespace tfrecordfs::staging
