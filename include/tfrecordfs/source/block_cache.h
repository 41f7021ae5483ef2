// BlockCache: what the GZIP/ZLIB sources of one mount keep between reads,
// within one budget: decompressed blocks, and the inflate cursors of
// sources not inflating right now.
//
// Blocks are aligned runs of kBlockSize uncompressed bytes, keyed by
// (source id, block number), so that listing a record and then reading its
// files inflates that region once. An idle cursor (an Inflater stopped
// where its last read ended, 0.1-1 MiB with its input buffer) lets the next
// read of its shard go on from there instead of restarting at a
// checkpoint; a source takes its cursor out while it inflates and puts it
// back after, so a mount of any number of compressed shards keeps at most
// kMaxIdleCursors of them, within the same byte budget as the blocks.
//
// Thread-safety: every method is safe to call concurrently (mu_ is a leaf
// lock; evicted values are destroyed after it is released).
#ifndef TFRECORDFS_SOURCE_BLOCK_CACHE_H_
#define TFRECORDFS_SOURCE_BLOCK_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "tfrecordfs/base/lru.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/source/inflater.h"

namespace tfrecordfs::source {

// BlockCache unit (uncompressed). Small, because a read that resumes at a
// checkpoint inflates to the end of its last block: a 64 KiB block costs
// about 0.1 ms of zlib past the bytes asked for.
inline constexpr size_t kBlockSize = 64 * 1024;

// Idle cursors kept at most, whatever the budget (a cursor costs about
// 130 KiB: zlib's and ISA-L's state and windows; and up to 64 KiB of input
// buffer when it goes idle, Inflater::Park).
inline constexpr size_t kMaxIdleCursors = 32;

class BlockCache {
 public:
  // `max_bytes` bounds the blocks and the idle cursors together; idle
  // cursors take at most half of it. The most recently put block and the
  // most recently put cursor are kept whatever the budget.
  explicit BlockCache(size_t max_bytes);
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  uint64_t NewSourceId() { return next_id_.fetch_add(1); }

  // Blocks: null on a miss. Get makes the block the most recently used.
  std::shared_ptr<const std::string> Get(uint64_t source, uint64_t block);
  // Whether the block is cached, leaving the order alone.
  bool Contains(uint64_t source, uint64_t block) const;
  // Makes the block the first to be evicted (a reader has passed it), if
  // cached.
  void Demote(uint64_t source, uint64_t block);
  void Put(uint64_t source, uint64_t block, std::shared_ptr<const std::string> bytes);
  // Evicts the least recently used blocks until `bytes` more fit in the
  // budget (the most recently put block stays): room for a block being
  // fetched, whose evicted neighbours' memory it may reuse.
  void MakeRoom(size_t bytes);

  // The idle cursor of `source` (null when there is none): the caller owns
  // it until it puts it back.
  std::unique_ptr<Inflater> TakeCursor(uint64_t source);
  // Keeps `cursor` (parked: Inflater::Park) as the idle cursor of `source`,
  // evicting the least recently used idle cursors, then blocks, beyond the
  // budgets.
  void PutCursor(uint64_t source, std::unique_ptr<Inflater> cursor);
  // Forgets the idle cursor of a source that goes away.
  void DropCursor(uint64_t source);

  // Bytes of the cached blocks; of the idle cursors; their number.
  size_t bytes() const;
  size_t cursor_bytes() const;
  size_t idle_cursors() const;
  size_t max_bytes() const { return max_bytes_; }

 private:
  struct Key {
    uint64_t source, block;
    bool operator==(const Key& o) const { return source == o.source && block == o.block; }
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.source, k.block);
    }
  };
  using Block = std::shared_ptr<const std::string>;
  // Evicts blocks (keeping the newest), then idle cursors (keeping the
  // newest), while the two together exceed max_bytes_.
  void TrimLocked(std::vector<Block>* blocks, std::vector<std::unique_ptr<Inflater>>* cursors)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_bytes_;
  std::atomic<uint64_t> next_id_{1};
  mutable Mutex mu_;
  LruMap<Key, Block> blocks_ ABSL_GUARDED_BY(mu_);
  LruMap<uint64_t, std::unique_ptr<Inflater>> cursors_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tfrecordfs::source

#endif  // TFRECORDFS_SOURCE_BLOCK_CACHE_H_
