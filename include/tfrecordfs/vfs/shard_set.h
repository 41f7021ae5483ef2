// The mounted shards and what they read through: the one place a shard's
// life under the mount is managed.
//
// A ShardSet opens scanned shards (scan::ScannedShard) for the mount: every
// shard at mount (Add), each shard a commit rewrote (Reopen), and an object
// as the store holds it now for a rebase (Open). They all read through the
// mount's caches: a bounded cache of open descriptors (source::FdCache,
// -o max_open: shards are opened on demand) and one block cache
// (source::BlockCache, -o inflate_cache_mb: decompressed blocks of GZIP/ZLIB
// shards and fetched object bytes), and through the readahead once the mount
// reads ahead (StartReadahead).
//
// It holds two generations of each shard s (shard ids count from 0 in scan
// order):
//   * current()[s]: the shard the views show, at generation 1 after Add,
//     one more after each Reopen;
//   * retired()[s]: the shard as it was before its last rewrite while
//     mounted (index null: none yet), whose records stay readable under the
//     other generation bit of their node ids (node_id.h, IsRetired) until
//     the next rewrite replaces it. A record that was edited before that
//     rewrite showed the edit store's files, not the old shard's bytes: its
//     old ids are stale (RetiredStale).
// The views keep references to the two vectors (their addresses do not
// change: a ShardSet is neither copied nor moved), so the views must be
// destroyed before the ShardSet (Filesystem declares it before them).
//
// Destruction order (members are destroyed in reverse of their order here):
// the readahead first (it joins the threads whose fetches read through the
// shards' sources), then the shards (their sources, which read through the
// caches), then the caches.
//
// Thread-safety: the caches and the readahead are thread-safe, and Open
// changes nothing else (any thread, but not during StartReadahead, which
// sets the readahead it reads through). The shards of both generations and
// the edited keys change only in Add, StartReadahead and Reopen, which the
// caller runs while nothing else reads them: Filesystem during Create, and
// in Commit(reopen) holding its serve_mu_ exclusively. Everything else (the
// const methods, the views' reads of current() and retired()) runs under
// serve_mu_ shared. The lock is the caller's, not the ShardSet's: the views
// read the vectors directly (mounted_shard.h).
#ifndef TFRECORDFS_VFS_SHARD_SET_H_
#define TFRECORDFS_VFS_SHARD_SET_H_

#include <time.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tfrecordfs/index/index_store.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/scan/scan.h"
#include "tfrecordfs/source/block_cache.h"
#include "tfrecordfs/source/readahead.h"
#include "tfrecordfs/source/shard_source.h"
#include "tfrecordfs/vfs/mounted_shard.h"

namespace tfrecordfs::vfs {

// Blocks read ahead at once for sequential readers on network storage.
inline constexpr int kReadaheadThreads = 8;

class ShardSet {
 public:
  // `max_open`: shard files open at once (FdCache; set_max_open may lower
  // it once the number of files is known). `block_cache_bytes`: the block
  // cache's budget. `index_store` (not owned, may be null, must outlive the
  // ShardSet): where Reopen indexes a rewritten shard it was given no index
  // for (scan::ScanOne).
  ShardSet(size_t max_open, size_t block_cache_bytes, index::IndexStore* index_store);
  ~ShardSet();
  ShardSet(const ShardSet&) = delete;
  ShardSet& operator=(const ShardSet&) = delete;

  // ==== What the shards read through ====

  // Open descriptors of shards and of the plain files the tree serves.
  source::FdCache& fd_cache() { return fd_cache_; }
  void set_max_open(size_t n) { fd_cache_.set_capacity(n); }
  // Decompressed blocks and object bytes (scan::ScanOptions::object_cache
  // points at it: the scan's object readers fill the same budget).
  source::BlockCache& block_cache() { return block_cache_; }
  // From now on, every shard opened reads ahead through a Readahead of
  // `budget_bytes` in `block`-sized blocks on kReadaheadThreads threads
  // (source/readahead.h), and so do the shards of current() already open
  // (their sources are wrapped). Its threads start at the first fetch: a
  // ShardSet made before the daemon forks may start it there, but must not
  // read through it before the fork (view=classes groups first, then
  // starts it). Once only (FailedPrecondition after).
  absl::Status StartReadahead(size_t budget_bytes, size_t block);
  bool reads_ahead() const { return readahead_ != nullptr; }

  // ==== Opening shards ====

  // `shard` opened for the mount, at generation 1: its source through the
  // caches (read ahead when reading ahead), its folder-name width, and
  // `mtime` for all its folders and files. Errors: scan::OpenShard's.
  absl::StatusOr<MountedShard> Open(const scan::ScannedShard& shard, struct timespec mtime);
  // Opens `shard` (Open) as the next shard id, size() before the call, shown
  // at `shard.mount_path` (mount_path()); its retired generation is empty.
  absl::Status Add(const scan::ScannedShard& shard, struct timespec mtime);

  // ==== The generations ====

  size_t size() const { return current_.size(); }
  std::vector<MountedShard>& current() { return current_; }
  const std::vector<MountedShard>& current() const { return current_; }
  std::vector<MountedShard>& retired() { return retired_; }
  const std::vector<MountedShard>& retired() const { return retired_; }
  // Where the mount shows shard `s` ("" for an id it does not have); all
  // of them, by shard id.
  const std::string& mount_path(uint64_t s) const;
  const std::vector<std::string>& mount_paths() const { return mount_paths_; }
  // Whether `ino` is a record-space id of a shard's retired generation (its
  // generation bit is not the current one's): served by a view over
  // retired(), read-only.
  bool IsRetired(uint64_t ino) const;
  // Whether retired id `ino` (IsRetired) names a record that was edited
  // before the rewrite retired it: stale, no view serves it.
  bool RetiredStale(uint64_t ino) const;

  // What Reopen replaced, for the caller to invalidate: the views' caches
  // of shard `shard` (both generations: the same ids name other records
  // now), and the kernel's names in its folder, which spelt the old
  // generation's records (`old_records` of them, padded to `old_width`)
  // and now spell the new one's (current()[shard]).
  struct Replaced {
    uint64_t shard = 0;
    uint64_t old_records = 0;
    int old_width = 1;
  };
  // After a commit rewrote shard `s` at `path`: opens the new file and
  // makes it the current generation (its generation one more), the old
  // current one the retired generation (dropping the one retired before:
  // a file kept open across two commits reads the newest), and
  // `edited_keys` (the RecordKeys of s that were edited before the rewrite)
  // the retired records that are stale. The new file is indexed by
  // `rewritten_index` when it is the file at `path` (made by the rewrite
  // from the offsets it wrote), else like a shard at mount through the
  // index store. On error (the file cannot be read or indexed) nothing
  // changes: the shard is committed on disk, but the mount goes on
  // showing the old file. Requires: no other thread reads the shards
  // (see the top).
  absl::StatusOr<Replaced> Reopen(uint64_t s, const std::string& path,
                                  std::shared_ptr<const index::ShardIndex> rewritten_index,
                                  const std::vector<uint64_t>& edited_keys);

 private:
  // Destroyed in reverse (see the top): readahead_, then the shards, then
  // the caches.
  source::FdCache fd_cache_;
  source::BlockCache block_cache_;
  std::vector<MountedShard> current_;
  std::vector<MountedShard> retired_;
  // RecordKeys of retired_ records that were edited (RetiredStale).
  absl::flat_hash_set<uint64_t> retired_edited_;
  std::vector<std::string> mount_paths_;  // mount_paths_[s]: where current_[s] is shown
  index::IndexStore* const index_store_;
  // Null until StartReadahead.
  std::unique_ptr<source::Readahead> readahead_;
};

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_SHARD_SET_H_
