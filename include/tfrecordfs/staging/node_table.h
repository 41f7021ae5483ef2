// The staging store's node table: the nodes of records/ the kernel knows,
// and a bounded set of O_PATH descriptors to reach them (Store's
// operations are *at() calls relative to these descriptors).
//
// Descriptors are bounded: passthrough_ll pins every node the kernel knows
// with a descriptor, so 16k staged files known to the kernel exhaust
// RLIMIT_NOFILE. Here a node the kernel knows is remembered as its parent
// node and name (kept current by Moved, dropped by Removed and Forget), and
// at most `node_fds` O_PATH descriptors are kept open, least recently used
// dropped first. A node whose descriptor was dropped is reopened from its
// parent's with openat(O_PATH | O_NOFOLLOW), and the inode it finds must be
// the node's: a name now naming another file (or a symlink, or nothing)
// gives ESTALE or ENOENT, never the other file. What stays open besides the
// budget: records/ itself; the descriptors a call is using; one per node
// removed while the kernel still knows it (an open file after rm, until its
// FORGET), so that its inode number is not reused while the kernel may
// still use it. Node ids are the files' inode numbers.
//
// Beside it, a cache of writable descriptors (WritableFd) for writes that
// come without a handle, at most max(node_fds / 2, 8), dropped with the node.
//
// Memory per known node: its name and two table entries.
//
// Thread-safety: thread-safe. One mutex, mu_, guards the table; it is never
// held across an openat or stat (only an evicted descriptor's close may run
// under it) and never while calling out of the class.
#ifndef TFRECORDFS_STAGING_NODE_TABLE_H_
#define TFRECORDFS_STAGING_NODE_TABLE_H_

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/lru.h"
#include "tfrecordfs/base/mutex.h"

namespace tfrecordfs::staging {

class NodeTable {
 public:
  // A descriptor in use: an evicted one closes once no call holds it.
  using FdRef = std::shared_ptr<const UniqueFd>;

  // `root_fd`: an O_PATH descriptor of records/, whose fstat is `root`.
  // `node_fds`: the O_PATH descriptor budget (> 0).
  NodeTable(UniqueFd root_fd, const struct stat& root, size_t node_fds);

  // The node of records/ (the staging root). Never forgotten.
  uint64_t root() const { return root_ino_; }

  // An open O_PATH descriptor of `node` (cached, or reopened and checked):
  // ESTALE for a node not known (or replaced on disk), ENOENT for a removed
  // one the kernel no longer holds open.
  absl::StatusOr<FdRef> NodeFd(uint64_t node);
  // Looks `name` up under `parent` (open as `parent_fd`) and registers it
  // with one more kernel reference: only regular files and folders (EPERM),
  // on the store's file system (EXDEV).
  absl::StatusOr<struct stat> Register(uint64_t parent, int parent_fd, absl::string_view name);
  // Drops `n` kernel references of `node`, and the node once neither the
  // kernel nor a known child needs it.
  void Forget(uint64_t node, uint64_t n);
  // Whether Forget(node, n) would drop the kernel's last reference.
  bool IsLastReference(uint64_t node, uint64_t n);
  // Whether `node` is known.
  bool Contains(uint64_t node);

  // The known node named `name` in `parent`, if any, with its descriptor in
  // *keep, taken before a removal or a rename over it: a node keeps a
  // descriptor while the kernel still knows it.
  std::optional<uint64_t> KnownNode(uint64_t parent, const std::string& name, FdRef* keep);
  // `node` was removed from its parent (unlink, rmdir, replaced by a
  // rename): `keep` stays open while the kernel still knows it.
  void Removed(uint64_t node, FdRef keep);
  // renameat2(parent/name -> new_parent/new_name, flags) was done: the known
  // nodes follow (with RENAME_EXCHANGE both ways); `target`, the known node
  // the rename replaced (KnownNode before it), is removed.
  void Moved(uint64_t parent, const std::string& name, uint64_t new_parent,
             const std::string& new_name, unsigned flags, std::optional<uint64_t> target,
             FdRef keep);

  // A new descriptor of `node` opened through /proc/self/fd with `flags`
  // (O_CREAT, O_EXCL, O_DIRECT and O_NOFOLLOW dropped; caller owns).
  absl::StatusOr<int> Open(uint64_t node, int flags);
  // A writable descriptor of `node`: the cached one, else Open(O_WRONLY),
  // then cached while the node is known.
  absl::StatusOr<FdRef> WritableFd(uint64_t node);
  // The cached writable descriptor of `node`, if any (not made recent).
  FdRef CachedWritable(uint64_t node);
  // Caches `fd` as `node`'s writable descriptor.
  void CacheWritable(uint64_t node, FdRef fd);

  // Path of a node relative to records/ ("" for the root), from the
  // remembered names; NotFound if it was removed, ESTALE if not known.
  absl::StatusOr<std::string> RelativePath(uint64_t node);

  // How errors and log lines name a path relative to records/ (default
  // "staging/<rel>"). Set before the table is used from other threads.
  void SetDisplay(std::function<std::string(absl::string_view rel)> display);
  std::string Shown(absl::string_view rel) const;

  // For tests: descriptors cached now, and reopens so far.
  size_t cached_fds();
  uint64_t reopens();

 private:
  struct Node {
    uint64_t parent = 0;  // 0: removed (or records/ itself)
    std::string name;
    uint64_t nlookup = 0;   // the kernel's references
    uint64_t children = 0;  // known nodes whose parent this is
    FdRef pinned;           // held while removed but still known
  };
  // Caches `fd` as `node`'s descriptor and drops the least recently used
  // ones over the budget.
  void CacheFd(uint64_t node, FdRef fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Unlinks `node` from its parent, keeping `fd` open while the kernel
  // still knows it.
  void Detach(uint64_t node, FdRef fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops `node` if neither the kernel nor a child needs it.
  void MaybeErase(uint64_t node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static std::pair<uint64_t, std::string> Key(uint64_t parent, absl::string_view name) {
    return {parent, std::string(name)};
  }

  const UniqueFd root_fd_;
  const uint64_t root_ino_;
  const dev_t dev_;
  std::function<std::string(absl::string_view rel)> display_;
  Mutex mu_;
  absl::flat_hash_map<uint64_t, Node> nodes_ ABSL_GUARDED_BY(mu_);
  // (parent, name) -> node, for the known nodes that are not removed.
  absl::flat_hash_map<std::pair<uint64_t, std::string>, uint64_t> by_name_ ABSL_GUARDED_BY(mu_);
  // node -> its O_PATH descriptor, at most node_fds of them.
  LruMap<uint64_t, FdRef> fds_ ABSL_GUARDED_BY(mu_);
  uint64_t reopens_ ABSL_GUARDED_BY(mu_) = 0;
  // WritableFd's cache: node -> writable descriptor.
  LruMap<uint64_t, FdRef> write_fds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tfrecordfs::staging

#endif  // TFRECORDFS_STAGING_NODE_TABLE_H_
