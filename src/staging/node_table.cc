#include "tfrecordfs/staging/node_table.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/log.h"

namespace tfrecordfs::staging {

NodeTable::NodeTable(UniqueFd root_fd, const struct stat& root, size_t node_fds)
    : root_fd_(std::move(root_fd)),
      root_ino_(root.st_ino),
      dev_(root.st_dev),
      fds_({.max_count = node_fds}),
      write_fds_({.max_count = std::max<size_t>(node_fds / 2, 8)}) {
  MutexLock lock(&mu_);
  nodes_[root_ino_].nlookup = 1;
}

void NodeTable::SetDisplay(std::function<std::string(absl::string_view rel)> display) {
  display_ = std::move(display);
}

std::string NodeTable::Shown(absl::string_view rel) const {
  return display_ ? display_(rel) : absl::StrCat("staging/", rel);
}

size_t NodeTable::cached_fds() {
  MutexLock lock(&mu_);
  return fds_.size();
}

uint64_t NodeTable::reopens() {
  MutexLock lock(&mu_);
  return reopens_;
}

bool NodeTable::Contains(uint64_t node) {
  MutexLock lock(&mu_);
  return nodes_.contains(node);
}

void NodeTable::CacheFd(uint64_t node, FdRef fd) {
  if (fds_.Get(node) != nullptr) return;  // the cached one stays, now the most recent
  fds_.Put(node, std::move(fd), 0);       // an evicted one closes once no call uses it
}

void NodeTable::CacheWritable(uint64_t node, FdRef fd) {
  MutexLock lock(&mu_);
  write_fds_.Put(node, std::move(fd), 0);  // an evicted one closes once no write uses it
}

NodeTable::FdRef NodeTable::CachedWritable(uint64_t node) {
  MutexLock lock(&mu_);
  const FdRef* cached = write_fds_.Peek(node);
  return cached != nullptr ? *cached : FdRef();
}

absl::StatusOr<NodeTable::FdRef> NodeTable::WritableFd(uint64_t node) {
  {
    MutexLock lock(&mu_);
    if (const FdRef* cached = write_fds_.Get(node)) return *cached;
  }
  auto fd = Open(node, O_WRONLY);
  if (!fd.ok()) return fd.status();
  auto shared = std::make_shared<const UniqueFd>(*fd);
  MutexLock lock(&mu_);
  if (nodes_.contains(node)) write_fds_.Put(node, shared, 0);
  return shared;
}

absl::StatusOr<int> NodeTable::Open(uint64_t node, int flags) {
  auto nfd = NodeFd(node);
  if (!nfd.ok()) return nfd.status();
  // The node is resolved already (its O_PATH descriptor never follows a
  // symlink): the caller's O_NOFOLLOW (rsync opens its temporary file so)
  // would make the open of the /proc magic link itself fail with ELOOP.
  int fd = ::open(ProcFdPath((*nfd)->get()).c_str(),
                  (flags & ~(O_CREAT | O_EXCL | O_DIRECT | O_NOFOLLOW)) | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "open");
  return fd;
}

absl::StatusOr<NodeTable::FdRef> NodeTable::NodeFd(uint64_t node) {
  uint64_t parent = 0;
  std::string name;
  {
    MutexLock lock(&mu_);
    if (node == root_ino_) return FdRef(std::shared_ptr<void>(), &root_fd_);
    auto it = nodes_.find(node);
    if (it == nodes_.end()) return PosixError(ESTALE, "stale staging node");
    if (const FdRef* cached = fds_.Get(node)) return *cached;
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
  if (const FdRef* cached = fds_.Peek(node)) return *cached;  // another call's
  ++reopens_;
  if (nodes_.contains(node)) CacheFd(node, shared);
  return shared;
}

absl::StatusOr<struct stat> NodeTable::Register(uint64_t parent, int parent_fd,
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

void NodeTable::MaybeErase(uint64_t node) {
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

void NodeTable::Detach(uint64_t node, FdRef fd) {
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

bool NodeTable::IsLastReference(uint64_t node, uint64_t n) {
  MutexLock lock(&mu_);
  if (node == root_ino_) return false;
  auto it = nodes_.find(node);
  return it != nodes_.end() && it->second.nlookup <= n;
}

void NodeTable::Forget(uint64_t node, uint64_t n) {
  MutexLock lock(&mu_);
  if (node == root_ino_) return;
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  it->second.nlookup -= std::min(n, it->second.nlookup);
  MaybeErase(node);
}

std::optional<uint64_t> NodeTable::KnownNode(uint64_t parent, const std::string& name,
                                             FdRef* keep) {
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

void NodeTable::Removed(uint64_t node, FdRef keep) {
  MutexLock lock(&mu_);
  Detach(node, std::move(keep));
}

void NodeTable::Moved(uint64_t parent, const std::string& name, uint64_t new_parent,
                      const std::string& new_name, unsigned flags, std::optional<uint64_t> target,
                      FdRef keep) {
  MutexLock lock(&mu_);
  auto from = by_name_.find(Key(parent, name));
  std::optional<uint64_t> moved;
  if (from != by_name_.end()) moved = from->second;
  std::optional<uint64_t> other;  // RENAME_EXCHANGE: what was at the new name
  if (flags & RENAME_EXCHANGE) {
    if (auto it = by_name_.find(Key(new_parent, new_name)); it != by_name_.end()) {
      other = it->second;
    }
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
  place(moved, parent, name, new_parent, new_name);
  place(other, new_parent, new_name, parent, name);
  if (moved) by_name_[Key(new_parent, new_name)] = *moved;
  if (other) by_name_[Key(parent, name)] = *other;
  MaybeErase(parent);  // may have lost its last known child
}

absl::StatusOr<std::string> NodeTable::RelativePath(uint64_t node) {
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

}  // namespace tfrecordfs::staging
