#include "tfrecordfs/staging/store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/tensor/npy.h"
#include "tfrecordfs/tensor/png.h"

namespace tfrecordfs::staging {

namespace {

std::string ProcPath(int fd) { return absl::StrCat("/proc/self/fd/", fd); }

// Bytes of a refusal reason kept in kErrorXattr (a reason is a line or two;
// the cap keeps every mark readable with one small buffer).
constexpr size_t kMaxMark = 1000;

// Up to `n` bytes at `offset` of the file open as `fd` (which may be
// write-only: read through a fresh read-only open of it).
absl::StatusOr<std::string> ReadAt(int fd, uint64_t offset, uint64_t n) {
  auto own = OpenFile(ProcPath(fd), O_RDONLY | O_CLOEXEC);
  if (!own.ok()) return own.status();
  std::string out(n, '\0');
  auto got = PreadUpTo(own->get(), out.data(), out.size(), offset, "staging");
  if (!got.ok()) return got.status();
  out.resize(*got);
  return out;
}

}  // namespace

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
      return absl::Status(ErrnoError(errno, RecordsDir(dir)).code(),
                          absl::StrCat("no staging store at ", dir));
    }
  } else if (auto s = MakeDirs(RecordsDir(dir), 0700); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("cannot create the staging store: ", s.message()));
  }
  auto real = RealPath(dir);
  if (!real.ok()) return real.status();
  std::unique_ptr<Store> store(new Store(std::move(*real)));
  if (!options.read_only) {
    auto lock = OpenFile(LockFile(store->dir_), O_RDWR | O_CREAT, 0600);
    if (!lock.ok()) return lock.status();
    if (::flock(lock->get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) {
        return PosixError(EBUSY, absl::StrCat("staging store ", store->dir_,
                                              " is in use by another read-write tfrecordfs mount"
                                              " (a second mount can be read-only: -o ro)"));
      }
      return ErrnoError(errno, LockFile(store->dir_));
    }
    store->lock_fd_ = std::move(*lock);
  }
  auto root = OpenFile(store->records_dir(), O_PATH | O_DIRECTORY | O_NOFOLLOW);
  if (!root.ok()) return root.status();
  struct stat st;
  if (::fstat(root->get(), &st) != 0) return ErrnoError(errno, store->records_dir());
  store->root_ino_ = st.st_ino;
  store->dev_ = st.st_dev;
  store->root_fd_ = std::move(*root);
  size_t node_fds = options.node_fds;
  if (node_fds == 0) {
    struct rlimit rl;
    const size_t limit = ::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY
                             ? 1024 * 8
                             : static_cast<size_t>(rl.rlim_cur);
    node_fds = std::clamp<size_t>(limit / 8, 16, 1024);
  }
  if (!options.read_only && options.reserve_journal) {
    ReserveJournalSpace(JournalReserveFile(store->dir_));
  }
  MutexLock lock_nodes(&store->mu_);
  store->fds_.set_limits({.max_count = node_fds});
  store->write_fds_.set_limits({.max_count = std::max<size_t>(node_fds / 2, 8)});
  store->nodes_[st.st_ino].nlookup = 1;
  return store;
}

Store::~Store() = default;

void Store::SetDisplay(std::function<std::string(absl::string_view rel)> display) {
  display_ = std::move(display);
}

std::string Store::Shown(absl::string_view rel) const {
  return display_ ? display_(rel) : absl::StrCat("staging/", rel);
}

size_t Store::cached_fds() {
  MutexLock lock(&mu_);
  return fds_.size();
}

uint64_t Store::reopens() {
  MutexLock lock(&mu_);
  return reopens_;
}

void Store::CacheFd(uint64_t node, NodeFdRef fd) {
  if (fds_.Get(node) != nullptr) return;  // the cached one stays, now the most recent
  fds_.Put(node, std::move(fd), 0);       // an evicted one closes once no call uses it
}

void Store::CacheWritable(uint64_t node, NodeFdRef fd) {
  write_fds_.Put(node, std::move(fd), 0);  // an evicted one closes once no write uses it
}

absl::StatusOr<std::shared_ptr<const UniqueFd>> Store::WritableFd(uint64_t node) {
  {
    MutexLock lock(&mu_);
    if (const NodeFdRef* cached = write_fds_.Get(node)) return *cached;
  }
  auto fd = Open(node, O_WRONLY);
  if (!fd.ok()) return fd.status();
  auto shared = std::make_shared<const UniqueFd>(*fd);
  MutexLock lock(&mu_);
  if (nodes_.contains(node)) CacheWritable(node, shared);
  return shared;
}

absl::StatusOr<Store::NodeFdRef> Store::NodeFd(uint64_t node) {
  uint64_t parent = 0;
  std::string name;
  {
    MutexLock lock(&mu_);
    if (node == root_ino_) return NodeFdRef(std::shared_ptr<void>(), &root_fd_);
    auto it = nodes_.find(node);
    if (it == nodes_.end()) return PosixError(ESTALE, "stale staging node");
    if (const NodeFdRef* cached = fds_.Get(node)) return *cached;
    if (it->second.pinned) return it->second.pinned;
    if (it->second.parent == 0) return PosixError(ENOENT, "staged file was removed");
    parent = it->second.parent;
    name = it->second.name;
  }
  // Reopen from the parent (recursively: a path is a few folders deep).
  auto pfd = NodeFd(parent);
  if (!pfd.ok()) return pfd.status();
  UniqueFd fd(::openat((*pfd)->get(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError(errno, Shown(name));
  struct stat st;
  if (::fstatat(fd.get(), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoError(errno, name);
  }
  if (st.st_ino != node || st.st_dev != dev_ || (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))) {
    log::Warning("staging: ", name, " was replaced behind the mount (inode ", node, " is now ",
                 st.st_ino, "); the old node is stale");
    return PosixError(ESTALE, absl::StrCat(name, ": replaced behind the mount"));
  }
  auto shared = std::make_shared<const UniqueFd>(std::move(fd));
  MutexLock lock(&mu_);
  if (const NodeFdRef* cached = fds_.Peek(node)) return *cached;  // another call's
  ++reopens_;
  if (nodes_.contains(node)) CacheFd(node, shared);
  return shared;
}

absl::StatusOr<struct stat> Store::Register(uint64_t parent, int parent_fd,
                                            absl::string_view name) {
  const std::string n(name);
  UniqueFd fd(::openat(parent_fd, n.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError(errno, n);
  struct stat st;
  if (::fstatat(fd.get(), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoError(errno, n);
  }
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    log::Warning("staging: ", n, " is neither a file nor a folder (symlink?); not shown");
    return PosixError(EPERM, absl::StrCat(n, ": only files and folders can be staged"));
  }
  if (st.st_dev != dev_) return PosixError(EXDEV, absl::StrCat(n, ": outside the staging store"));
  if (st.st_ino == root_ino_) return PosixError(EPERM, absl::StrCat(n, ": the staging root"));
  MutexLock lock(&mu_);
  if (!nodes_.contains(parent)) return PosixError(ESTALE, "stale staging node");
  auto [it, inserted] = nodes_.try_emplace(st.st_ino);
  Node& node = it->second;
  if (node.parent != parent || node.name != n) {
    // New, or found under another name (moved behind the mount): the latest
    // lookup says where it is now.
    const uint64_t old_parent = node.parent;
    if (old_parent != 0) {
      by_name_.erase(Key(old_parent, node.name));
      --nodes_[old_parent].children;
    }
    // A removed node the kernel still knows cannot be found again under a
    // name (its inode number is pinned), so `pinned` is empty here unless the
    // file came back by a rename behind the mount.
    node.pinned.reset();
    if (auto old = by_name_.find(Key(parent, n));
        old != by_name_.end() && old->second != st.st_ino) {
      // The name's previous node was replaced behind the mount.
      const uint64_t prev = old->second;
      nodes_[prev].parent = 0;
      --nodes_[parent].children;
      by_name_.erase(old);
      MaybeErase(prev);
    }
    node.parent = parent;
    node.name = n;
    ++nodes_[parent].children;
    by_name_[Key(parent, n)] = st.st_ino;
    if (old_parent != 0) MaybeErase(old_parent);
  }
  ++node.nlookup;
  CacheFd(st.st_ino, std::make_shared<const UniqueFd>(std::move(fd)));
  return st;
}

void Store::MaybeErase(uint64_t node) {
  while (node != root_ino_) {
    auto it = nodes_.find(node);
    if (it == nodes_.end() || it->second.nlookup > 0 || it->second.children > 0) return;
    const uint64_t parent = it->second.parent;
    if (parent != 0) by_name_.erase(Key(parent, it->second.name));
    fds_.Erase(node);
    write_fds_.Erase(node);
    nodes_.erase(it);
    if (parent == 0) return;
    auto p = nodes_.find(parent);
    if (p == nodes_.end()) return;
    --p->second.children;
    node = parent;
  }
}

void Store::Detach(uint64_t node, NodeFdRef fd) {
  auto it = nodes_.find(node);
  if (it == nodes_.end() || it->second.parent == 0) return;
  by_name_.erase(Key(it->second.parent, it->second.name));
  const uint64_t parent = it->second.parent;
  it->second.parent = 0;
  it->second.pinned = std::move(fd);
  fds_.Erase(node);
  if (auto p = nodes_.find(parent); p != nodes_.end()) {
    --p->second.children;
    MaybeErase(parent);
  }
  MaybeErase(node);
}

void Store::Forget(uint64_t node, uint64_t n, naming::FeatureTypes& types) {
  bool check = false;
  {
    MutexLock lock(&mu_);
    if (node == root_ino_) return;
    auto it = nodes_.find(node);
    if (it == nodes_.end()) return;
    // The kernel is done with the file: the last moment to check it while
    // its path is known.
    check = it->second.nlookup <= n && written_.contains(node);
  }
  if (check) (void)CheckWritten(node, types);
  MutexLock lock(&mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  it->second.nlookup -= std::min(n, it->second.nlookup);
  MaybeErase(node);
}

void Store::NoteWritten(uint64_t node, naming::FeatureTypes& types, int fd) {
  {
    MutexLock lock(&mu_);
    written_.insert(node);
  }
  if (fd < 0) return;
  // A file that looks whole now is checked now, so that its kind is
  // remembered even if the daemon dies before the kernel forgets it.
  auto rel = RelativePath(node);
  if (!rel.ok()) return;
  if (ClassifyStagedFile(*rel, true).role == StagedFile::Role::kOther &&
      ClassifyStagedFile(*rel, false).role == StagedFile::Role::kOther) {
    return;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) return;
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const Placed placed = Place(*rel, types);
  bool whole = false;
  if (placed.file.role == StagedFile::Role::kNumeric) {
    auto tail = size == 0 ? absl::StatusOr<std::string>("\n") : ReadAt(fd, size - 1, 1);
    whole = size <= kMaxCheckedOnWrite && tail.ok() && *tail == "\n";
  } else if (placed.file.role == StagedFile::Role::kArray) {
    const uint64_t trailer = tensor::kPngTrailer.size();
    if (placed.file.extension == naming::kPngExtension && size >= trailer) {
      auto tail = ReadAt(fd, size - trailer, trailer);
      whole = tail.ok() && *tail == tensor::kPngTrailer;
    } else if (placed.file.extension == naming::kNpyExtension && size >= 12) {
      auto head = ReadAt(fd, 0, 12);  // up to the header length, then the header
      const uint64_t need = head.ok() ? tensor::NpyDataOffset(*head) : 0;
      if (need > 12) head = ReadAt(fd, 0, std::min<uint64_t>(need, kMaxCheckedOnWrite));
      if (head.ok()) {
        auto header = tensor::ParseNpyHeader(*head);
        whole = header.ok() && header->has_value() &&
                (*header)->data_offset + (*header)->data_bytes == size;
      }
    }
  }
  if (whole) (void)ValidateOnClose(node, fd, types);
}

absl::Status Store::CheckWritten(uint64_t node, naming::FeatureTypes& types) {
  {
    MutexLock lock(&mu_);
    if (written_.erase(node) == 0) return absl::OkStatus();
  }
  auto fd = Open(node, O_RDONLY);
  if (!fd.ok()) return absl::OkStatus();  // removed meanwhile: nothing to check
  UniqueFd own(*fd);
  return ValidateOnClose(node, own.get(), types);
}

void Store::CheckAllWritten(naming::FeatureTypes& types) {
  std::vector<uint64_t> nodes;
  {
    MutexLock lock(&mu_);
    nodes.assign(written_.begin(), written_.end());
  }
  for (uint64_t node : nodes) (void)CheckWritten(node, types);
}

absl::StatusOr<struct stat> Store::Lookup(uint64_t parent, absl::string_view name) {
  if (auto s = CheckName(name); !s.ok()) return s;
  auto pfd = NodeFd(parent);
  if (!pfd.ok()) return pfd.status();
  return Register(parent, (*pfd)->get(), name);
}

absl::StatusOr<struct stat> Store::GetAttr(uint64_t node) {
  auto fd = NodeFd(node);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (::fstatat((*fd)->get(), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoError(errno, "staging");
  }
  return st;
}

absl::StatusOr<struct stat> Store::SetAttr(uint64_t node, int fd, const struct stat& to, int bits) {
  auto nfd = NodeFd(node);
  if (!nfd.ok()) return nfd.status();
  const std::string proc = ProcPath((*nfd)->get());
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
    NodeFdRef writable;
    if (fd < 0) {
      MutexLock lock(&mu_);
      if (const NodeFdRef* cached = write_fds_.Peek(node)) writable = *cached;
    }
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
  auto pfd = NodeFd(parent);
  if (!pfd.ok()) return pfd.status();
  const std::string n(name);
  if (::mkdirat((*pfd)->get(), n.c_str(), StagedMode(mode, true)) != 0) return ErrnoError(errno, n);
  if (auto s = GiveTo((*pfd)->get(), n, -1, owner); !s.ok()) {
    ::unlinkat((*pfd)->get(), n.c_str(), AT_REMOVEDIR);
    return s;
  }
  return Register(parent, (*pfd)->get(), name);
}

absl::StatusOr<std::pair<struct stat, int>> Store::Create(uint64_t parent, absl::string_view name,
                                                          mode_t mode, int flags,
                                                          std::optional<Owner> owner) {
  if (auto s = CheckName(name); !s.ok()) return s;
  if (!S_ISREG(mode) && (mode & S_IFMT) != 0) {
    return PosixError(EPERM, "only regular files and folders can be staged");
  }
  auto pfd = NodeFd(parent);
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
  auto st = Register(parent, (*pfd)->get(), name);
  if (!st.ok()) {
    ::close(fd);
    return st.status();
  }
  if ((flags & O_ACCMODE) != O_RDONLY && !(flags & O_APPEND)) {
    // Kept for writes that come without a handle (WritableFd; pwrite on an
    // O_APPEND descriptor would ignore their offsets).
    UniqueFd dup(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
    if (dup.valid()) {
      MutexLock lock(&mu_);
      CacheWritable(st->st_ino, std::make_shared<const UniqueFd>(std::move(dup)));
    }
  }
  return std::make_pair(*st, fd);
}

absl::StatusOr<int> Store::Open(uint64_t node, int flags) {
  auto nfd = NodeFd(node);
  if (!nfd.ok()) return nfd.status();
  // The node is resolved already (its O_PATH descriptor never follows a
  // symlink): the caller's O_NOFOLLOW (rsync opens its temporary file so)
  // would make the open of the /proc magic link itself fail with ELOOP.
  int fd = ::open(ProcPath((*nfd)->get()).c_str(),
                  (flags & ~(O_CREAT | O_EXCL | O_DIRECT | O_NOFOLLOW)) | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "open");
  return fd;
}

std::optional<uint64_t> Store::KnownNode(uint64_t parent, const std::string& name,
                                         NodeFdRef* keep) {
  std::optional<uint64_t> known;
  {
    MutexLock lock(&mu_);
    if (auto it = by_name_.find(Key(parent, name)); it != by_name_.end()) known = it->second;
  }
  if (known) {
    auto fd = NodeFd(*known);
    if (fd.ok()) *keep = *fd;
  }
  return known;
}

absl::Status Store::Remove(uint64_t parent, absl::string_view name, int flags) {
  if (auto s = CheckName(name); !s.ok()) return s;
  auto pfd = NodeFd(parent);
  if (!pfd.ok()) return pfd.status();
  const std::string n(name);
  NodeFdRef keep;
  const std::optional<uint64_t> known = KnownNode(parent, n, &keep);
  if (::unlinkat((*pfd)->get(), n.c_str(), flags) != 0) return ErrnoError(errno, n);
  if (known) {
    MutexLock lock(&mu_);
    Detach(*known, std::move(keep));
  }
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
  auto pfd = NodeFd(parent);
  if (!pfd.ok()) return pfd.status();
  auto npfd = NodeFd(new_parent);
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
    if (auto s = CheckRenamed((*pfd)->get(), a, *to, types); !s.ok()) return s;
  }
  if (flags & RENAME_EXCHANGE) {
    if (auto to = rel_of(parent, a)) {
      if (auto s = CheckRenamed((*npfd)->get(), b, *to, types); !s.ok()) return s;
    }
  }
  std::optional<uint64_t> target;  // a known node the rename replaces
  NodeFdRef keep;
  if (!(flags & RENAME_EXCHANGE)) target = KnownNode(new_parent, b, &keep);
  if (::renameat2((*pfd)->get(), a.c_str(), (*npfd)->get(), b.c_str(), flags) != 0) {
    return ErrnoError(errno, absl::StrCat(a, " -> ", b));
  }
  MutexLock lock(&mu_);
  auto from = by_name_.find(Key(parent, a));
  std::optional<uint64_t> moved;
  if (from != by_name_.end()) moved = from->second;
  std::optional<uint64_t> other;  // RENAME_EXCHANGE: what was at the new name
  if (flags & RENAME_EXCHANGE) {
    if (auto it = by_name_.find(Key(new_parent, b)); it != by_name_.end()) other = it->second;
  } else if (target && target != moved) {
    Detach(*target, std::move(keep));
  }
  // (Called under the lock above; the analysis checks a lambda on its own.)
  auto place = [&](std::optional<uint64_t> node, uint64_t old_parent, const std::string& old_name,
                   uint64_t to_parent, const std::string& to_name)
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                     if (!node) return;
                     by_name_.erase(Key(old_parent, old_name));
                     Node& n = nodes_[*node];
                     n.parent = to_parent;
                     n.name = to_name;
                     --nodes_[old_parent].children;
                     ++nodes_[to_parent].children;
                   };
  place(moved, parent, a, new_parent, b);
  place(other, new_parent, b, parent, a);
  if (moved) by_name_[Key(new_parent, b)] = *moved;
  if (other) by_name_[Key(parent, a)] = *other;
  MaybeErase(parent);  // may have lost its last known child
  return absl::OkStatus();
}

absl::StatusOr<int> Store::OpenDir(uint64_t node) {
  auto nfd = NodeFd(node);
  if (!nfd.ok()) return nfd.status();
  int fd = ::openat((*nfd)->get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "opendir");
  return fd;
}

absl::StatusOr<std::string> Store::RelativePath(uint64_t node) {
  // From the remembered names, not /proc/self/fd: no descriptor is needed.
  MutexLock lock(&mu_);
  std::vector<const std::string*> names;
  for (uint64_t cur = node; cur != root_ino_;) {
    auto it = nodes_.find(cur);
    if (it == nodes_.end()) return PosixError(ESTALE, "stale staging node");
    if (it->second.parent == 0) return absl::NotFoundError("deleted");
    names.push_back(&it->second.name);
    cur = it->second.parent;
    if (names.size() > 4096) return absl::NotFoundError("outside the store");  // never a cycle
  }
  std::string path;
  for (auto n = names.rbegin(); n != names.rend(); ++n) {
    if (!path.empty()) path += '/';
    path += **n;
  }
  return path;
}

Store::Placed Store::Place(const std::string& rel, naming::FeatureTypes& types) {
  const std::string record = rel.substr(0, rel.find('/'));
  struct stat st;
  const bool sequence =
      ::stat(absl::StrCat(records_dir(), "/", record, "/", naming::kFeatureListsDir).c_str(),
             &st) == 0 &&
      S_ISDIR(st.st_mode);
  Placed p{ClassifyStagedFile(rel, sequence), {}};
  if (p.file.role == StagedFile::Role::kOther) return p;
  p.type = types.Lookup(p.file.feature);
  if (!sequence && p.type.kind == example::Kind::kNone &&
      absl::StartsWith(rel, absl::StrCat(record, "/", naming::kContextDir, "/"))) {
    Placed as_context{ClassifyStagedFile(rel, /*sequence=*/true), {}};
    if (as_context.file.role != StagedFile::Role::kOther) {
      as_context.type = types.Lookup(as_context.file.feature);
      if (as_context.type.kind != example::Kind::kNone) return as_context;
    }
  }
  return p;
}

absl::Status Store::ValidateOnWrite(uint64_t node, int fd, uint64_t offset, absl::string_view data,
                                    naming::FeatureTypes& types) {
  auto rel = RelativePath(node);
  if (!rel.ok()) return absl::OkStatus();  // deleted meanwhile: nothing to check
  // Cheap test first: most writes are to files no check applies to.
  if (ClassifyStagedFile(*rel, true).role == StagedFile::Role::kOther &&
      ClassifyStagedFile(*rel, false).role == StagedFile::Role::kOther) {
    return absl::OkStatus();
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) return absl::OkStatus();  // ValidateOnClose will say
  const uint64_t old_size = static_cast<uint64_t>(st.st_size);
  const uint64_t end = offset + data.size();
  const Placed placed = Place(*rel, types);
  auto refuse = [&](absl::string_view why) {
    // The bytes never land: mark the file so that its record stays staged
    // until it is written again (kErrorXattr), with a reason a user can read.
    std::string mark = absl::StrCat("write refused: ", why);
    if (mark.size() > kMaxMark) mark.resize(kMaxMark);
    if (::fsetxattr(fd, kErrorXattr, mark.data(), mark.size(), 0) != 0) {
      log::Warning(Shown(*rel), ": cannot mark the file as refused (", std::strerror(errno),
                   "); its record may be packed with what the file held before the write");
    }
    {
      MutexLock lock(&mu_);
      refused_.insert(node);
    }
    LogRefusal(absl::StrCat(Shown(*rel), ": write refused: ", why));
    return PosixError(EINVAL, absl::StrCat(Shown(*rel), ": ", why));
  };
  // The first `n` bytes of the file as they would be after this write.
  auto after_write = [&](uint64_t n) -> absl::StatusOr<std::string> {
    std::string after;
    if (old_size > 0) {
      auto content = ReadAt(fd, 0, std::min(n, old_size));
      if (!content.ok()) return content.status();
      after = std::move(*content);
    }
    if (offset < n) {
      if (after.size() < std::min(end, n)) after.resize(std::min(end, n), '\0');
      const size_t k = static_cast<size_t>(std::min<uint64_t>(data.size(), n - offset));
      after.replace(offset, k, data.data(), k);
    }
    return after;
  };
  if (placed.file.role == StagedFile::Role::kArray) {
    // The shards' types, else (a name they do not know) the file's tag: a
    // file checked as a tensor before. A new file under a temporary name
    // has neither and is judged at its rename.
    std::vector<tensor::TensorType> want = placed.type.tensors;
    if (placed.type.kind == example::Kind::kNone) {
      char buf[4096];
      const ssize_t n = ::fgetxattr(fd, kKindXattr, buf, sizeof buf);
      if (n > 0) want = ParseKindTag(absl::string_view(buf, static_cast<size_t>(n))).tensors;
    }
    if (want.empty()) return absl::OkStatus();
    if (placed.file.extension == naming::kPngExtension && offset >= tensor::kPngHeaderBytes) {
      return absl::OkStatus();
    }
    // Only a write that lands in the header (or before its end is known)
    // can change what is decided there.
    uint64_t header_end = 0;
    auto head = after_write(std::min<uint64_t>(std::max(old_size, end), 16));
    if (!head.ok()) return absl::OkStatus();  // ValidateOnClose will say
    (void)CheckTensorFilePrefix(placed.file.extension, *head, want, &header_end);
    uint64_t need = header_end;
    if (need == 0 && placed.file.extension == naming::kNpyExtension && head->size() >= 12) {
      need = tensor::NpyDataOffset(*head);  // the header's end, before the header is there
    }
    need = std::min(need != 0 ? need : kMaxCheckedOnWrite, kMaxCheckedOnWrite);
    if (offset >= need) return absl::OkStatus();
    auto prefix = after_write(need);
    if (!prefix.ok()) return absl::OkStatus();
    if (auto s = CheckTensorFilePrefix(placed.file.extension, *prefix, want, &header_end);
        !s.ok()) {
      return refuse(s.message());
    }
    return absl::OkStatus();
  }
  if (placed.file.role != StagedFile::Role::kNumeric) return absl::OkStatus();
  // A name the shards do not know may be a tool's temporary file (sed's
  // `sedXXXXXX` holding text): judged once its name is final.
  if (placed.type.kind == example::Kind::kNone) return absl::OkStatus();
  if (std::max(old_size, end) > kMaxCheckedOnWrite) return absl::OkStatus();
  auto content = after_write(std::max(old_size, end));
  if (!content.ok()) return absl::OkStatus();  // ValidateOnClose will say
  const std::string& after = *content;
  const size_t last_newline = after.rfind('\n');
  const size_t tail_start = last_newline == std::string::npos ? 0 : last_newline + 1;
  if (last_newline != std::string::npos) {
    const absl::string_view complete(after.data(), last_newline + 1);
    auto kind = ValidateNumeric(complete, placed.type.kind);
    if (!kind.ok()) return refuse(kind.status().message());
  }
  // The unterminated rest must still be able to become a value.
  if (auto s = CheckNumericPrefix(absl::string_view(after).substr(tail_start), placed.type.kind);
      !s.ok()) {
    return refuse(s.message());
  }
  return absl::OkStatus();
}

Store::Verdict Store::Judge(const Placed& placed, int fd, bool unknown_too) {
  Verdict v;
  const naming::FeatureType& type = placed.type;
  auto tag_kind = [&]() -> naming::FeatureType {
    char buf[4096];
    const ssize_t n = ::fgetxattr(fd, kKindXattr, buf, sizeof buf);
    return n > 0 ? ParseKindTag(absl::string_view(buf, static_cast<size_t>(n)))
                 : naming::FeatureType{};
  };
  switch (placed.file.role) {
    case StagedFile::Role::kOther:
      return v;
    case StagedFile::Role::kNumeric: {
      example::Kind kind = type.kind;
      if (kind == example::Kind::kNone) {
        // Only the pack's view (ErrorOf) judges a name the shards do not
        // know, with the kind the pack would take: the tag, else the content.
        v.tag = "";  // a rewrite under such a name: the content decides
        if (!unknown_too) return v;
        v.tag.reset();
        kind = tag_kind().kind;
      }
      v.judged = true;
      auto content = ReadFileToString(ProcPath(fd));
      if (!content.ok()) {
        v.status = content.status();
        return v;
      }
      auto parsed = ValidateNumeric(*content, kind);
      if (!parsed.ok()) {
        v.status = absl::InvalidArgumentError(parsed.status().message());
        return v;
      }
      // Remember the kind the mounted shards gave this feature, so that the
      // pack after a restart (when no shard record may be read again) keeps
      // it; with no such kind the content decides at pack time.
      if (type.kind == example::Kind::kInt64 || type.kind == example::Kind::kFloat) {
        v.tag = type.kind == example::Kind::kFloat ? "float" : "int64";
      } else if (type.kind != example::Kind::kNone) {
        v.tag = "";
      }
      return v;
    }
    case StagedFile::Role::kArray: {
      // As the pack decides (record_folder.h): the shards' type, else the
      // file's tag; neither makes the file exact bytes.
      std::vector<tensor::TensorType> want = type.tensors;
      if (type.kind == example::Kind::kNone) want = tag_kind().tensors;
      if (want.empty()) {
        if (type.kind != example::Kind::kNone) v.tag = "";
        return v;
      }
      v.judged = true;
      auto content = ReadFileToString(ProcPath(fd));
      if (!content.ok()) {
        v.status = content.status();
        return v;
      }
      auto matched = CheckTensorFile(placed.file.extension, *content, want);
      if (!matched.ok()) {
        v.status = absl::InvalidArgumentError(matched.status().message());
        return v;
      }
      // The type it matched: after a restart the file alone says what it is.
      v.tag = TensorTag(*matched);
      return v;
    }
  }
  return v;
}

namespace {

void SetTag(int fd, const std::optional<std::string>& tag) {
  if (!tag) return;
  if (tag->empty()) {
    ::fremovexattr(fd, kKindXattr);
  } else {
    ::fsetxattr(fd, kKindXattr, tag->data(), tag->size(), 0);  // best effort (tmpfs may refuse)
  }
}

// The refusal mark of the file open as `fd`, if any.
std::optional<std::string> MarkOf(int fd) {
  char buf[1024];
  const ssize_t n = ::fgetxattr(fd, kErrorXattr, buf, sizeof buf);
  if (n >= 0) return std::string(buf, static_cast<size_t>(n));
  if (errno == ERANGE) return std::string(buf, sizeof buf);
  return std::nullopt;
}

}  // namespace

void Store::LogRefusal(absl::string_view what) {
  if (refusals_.fetch_add(1, std::memory_order_relaxed) == 0) {
    // The first of the mount: on the terminal of a foreground mount, say
    // where the reasons can be read again (the shell said only EINVAL).
    log::Warning(what,
                 " (the first refusal of this mount; `getfattr -n user.tfrecordfs.error FILE`"
                 " gives a file's reason, `tfrecordfs status MOUNTPOINT` lists every staged"
                 " record and why it would stay staged)");
    return;
  }
  log::Warning(what);
}

void Store::NoteRewritten(uint64_t node) {
  MutexLock lock(&mu_);
  refused_.erase(node);
}

absl::Status Store::ValidateOnClose(uint64_t node, int fd, naming::FeatureTypes& types) {
  bool still_refused = false;
  {
    MutexLock lock(&mu_);
    written_.erase(node);  // checked now, whoever asked
    still_refused = refused_.contains(node);
  }
  auto rel = RelativePath(node);
  if (!rel.ok()) return absl::OkStatus();  // deleted meanwhile: nothing to check
  if (still_refused) {
    // Not written since a write was refused: the mark stands (and was
    // logged when the write was refused).
    if (auto mark = MarkOf(fd)) {
      return PosixError(EINVAL, absl::StrCat(Shown(*rel), ": ", *mark));
    }
  } else {
    ::fremovexattr(fd, kErrorXattr);  // written again: judged as it is now
  }
  const Verdict v = Judge(Place(*rel, types), fd, /*unknown_too=*/false);
  if (v.judged && !v.status.ok()) {
    if (!absl::IsInvalidArgument(v.status)) return v.status;
    LogRefusal(
        absl::StrCat(Shown(*rel), ": ", v.status.message(),
                     "; the record stays staged and will not be packed until this is fixed"));
    return PosixError(EINVAL, absl::StrCat(Shown(*rel), ": ", v.status.message()));
  }
  SetTag(fd, v.tag);
  return absl::OkStatus();
}

absl::Status Store::CheckRenamed(int parent_fd, const std::string& name, const std::string& to_rel,
                                 naming::FeatureTypes& types) {
  UniqueFd fd(::openat(parent_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  // Gone (renameat2 will say) or unreadable to the daemon: the pack judges.
  if (!fd.valid()) return absl::OkStatus();
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return absl::OkStatus();
  const Verdict v = Judge(Place(to_rel, types), fd.get(), /*unknown_too=*/false);
  if (!v.judged) return absl::OkStatus();
  if (!v.status.ok()) {
    if (!absl::IsInvalidArgument(v.status)) return v.status;
    LogRefusal(absl::StrCat(Shown(to_rel), ": rename of ", name, " refused: ", v.status.message()));
    return PosixError(EINVAL, absl::StrCat(Shown(to_rel), ": ", v.status.message()));
  }
  SetTag(fd.get(), v.tag);
  return absl::OkStatus();
}

bool Store::HasRefusalMark(uint64_t node) {
  auto nfd = NodeFd(node);
  if (!nfd.ok()) return false;
  UniqueFd fd(::open(ProcPath((*nfd)->get()).c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  return fd.valid() && MarkOf(fd.get()).has_value();
}

absl::StatusOr<std::string> Store::ErrorOf(uint64_t node, naming::FeatureTypes& types) {
  auto rel = RelativePath(node);
  if (!rel.ok()) return rel.status();
  auto none = [] { return absl::NotFoundError("nothing refused"); };
  if (rel->empty()) return none();
  auto nfd = NodeFd(node);
  if (!nfd.ok()) return nfd.status();
  struct stat st;
  if (::fstatat((*nfd)->get(), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoError(errno, Shown(*rel));
  }
  const bool top = rel->find('/') == std::string::npos;
  if (S_ISDIR(st.st_mode)) {
    if (!top || naming::IsIgnoredName(*rel)) return none();
    auto payload = PayloadFromFolder(absl::StrCat(records_dir(), "/", *rel), types);
    if (payload.ok()) return none();
    return std::string(payload.status().message());
  }
  if (!S_ISREG(st.st_mode)) return none();
  if (top) {
    if (naming::IsIgnoredName(*rel)) return none();
    return std::string(kLooseFileReason);
  }
  UniqueFd fd(::open(ProcPath((*nfd)->get()).c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError(errno, Shown(*rel));
  if (auto mark = MarkOf(fd.get())) return *mark;
  const Verdict v = Judge(Place(*rel, types), fd.get(), /*unknown_too=*/true);
  if (v.judged && !v.status.ok()) return std::string(v.status.message());
  return none();
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
