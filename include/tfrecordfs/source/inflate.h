// InflateSource: the decompressed bytes of a GZIP or ZLIB shard as a
// ShardSource, read through the shard's checkpoint table
// (source/checkpoints.h), one Inflater cursor (source/inflater.h) and the
// mount's BlockCache (source/block_cache.h).
//
// Reading: InflateSource serves a byte range by resuming at the last
// checkpoint at or before it (or from where its cursor stopped, when that is
// closer: sequential reads never restart), and keeps decompressed bytes in a
// BlockCache shared by every compressed shard of a mount, in aligned blocks
// of kBlockSize bytes, so that listing a record and then reading its files
// inflates that region once. A read that resumes at a checkpoint inflates
// only up to the end of the block holding its last byte.
//
// Untrusted checkpoints (CheckpointTable::trusted false: an index others may
// write) are checked against the stream, in order, before a read resumes at
// one (VerifyCheckpoints); from the first that fails on, reads resume at the
// last good one instead (slower, exact), with one error logged.
//
// Damage met at read time (a stream that stops inflating before the size
// it had when indexed) is DataLoss naming the shard and the offset.
#ifndef TFRECORDFS_SOURCE_INFLATE_H_
#define TFRECORDFS_SOURCE_INFLATE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/source/block_cache.h"
#include "tfrecordfs/source/block_source.h"
#include "tfrecordfs/source/checkpoints.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::source {

// The decompressed bytes of a GZIP or ZLIB shard, read through its
// checkpoint table. Thread-safe: reads that hit the cache run in parallel;
// inflating is serialised per source (mu_ guards the cursor).
class InflateSource final : public BlockSource {
 public:
  // `cache` is not owned and must outlive the source.
  InflateSource(ShardFile file, uint64_t file_size, std::shared_ptr<const CheckpointTable> table,
                BlockCache* cache)
      : BlockSource(std::move(file), file_size, std::move(table), cache) {}
  InflateSource(UniqueFd fd, std::string path, uint64_t file_size,
                std::shared_ptr<const CheckpointTable> table, BlockCache* cache)
      : InflateSource(ShardFile(std::move(fd), std::move(path)), file_size, std::move(table),
                      cache) {}
  ~InflateSource() override;

  Codec codec() const override { return table_->codec; }

  // Blocks inflated so far (cache misses), for tests and statistics.
  uint64_t blocks_inflated() const { return blocks_inflated_.load(std::memory_order_relaxed); }
  uint64_t restarts() const { return restarts_.load(std::memory_order_relaxed); }
  // True once ISA-L failed on this shard and zlib took over (for tests).
  bool fell_back_to_zlib() const {
    MutexLock lock(&mu_);
    return zlib_only_;
  }

 private:
  // The aligned kBlockSize block holding `offset`.
  absl::StatusOr<std::shared_ptr<const std::string>> BlockAt(uint64_t offset,
                                                             uint64_t* start) const override;
  // For an untrusted table: `cp`, once it and every checkpoint before it
  // are checked against the stream (VerifyCheckpoints), else the last one
  // that passed (logged once; later checkpoints are not used again).
  absl::StatusOr<const Checkpoint*> CheckedCheckpoint(const Checkpoint* cp,
                                                      const Lease& lease) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Inflates `block` with *cursor (made, or restarted at a checkpoint, as
  // needed; reset after an error).
  absl::StatusOr<std::shared_ptr<const std::string>> InflateBlock(
      uint64_t block, const Lease& lease, std::unique_ptr<Inflater>* cursor) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  // Untrusted tables: checkpoints [0, verified_] match the stream; none
  // after usable_ is used.
  mutable size_t verified_ ABSL_GUARDED_BY(mu_) = 0;
  mutable size_t usable_ ABSL_GUARDED_BY(mu_) = std::numeric_limits<size_t>::max();
  // Inflate with zlib only (ISA-L failed on this shard once).
  mutable bool zlib_only_ ABSL_GUARDED_BY(mu_) = false;
  mutable std::atomic<uint64_t> blocks_inflated_{0};
  mutable std::atomic<uint64_t> restarts_{0};
};

}  // namespace tfrecordfs::source

#endif  // TFRECORDFS_SOURCE_INFLATE_H_
