// BlockSource: what the compressed sources (InflateSource for GZIP/ZLIB,
// SnappySource) share: a shard whose uncompressed bytes are decoded in
// blocks, found through its CheckpointTable (source/checkpoints.h) and kept
// in the mount's BlockCache (source/block_cache.h) under an id of the
// source's own. A subclass says how to produce the block holding a byte
// (BlockAt); BlockSource serves reads across blocks from it.
//
// Thread-safety: as safe as the subclass's BlockAt (both subclasses are safe
// to use from any number of threads); the members here are set once.
#ifndef TFRECORDFS_SOURCE_BLOCK_SOURCE_H_
#define TFRECORDFS_SOURCE_BLOCK_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tfrecordfs/source/block_cache.h"
#include "tfrecordfs/source/checkpoints.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::source {

class BlockSource : public ShardSource {
 public:
  const std::string& path() const final { return file_.path(); }
  uint64_t size() const final { return table_->data_size; }
  // Copies from the blocks that hold [offset, offset + n). DataLoss naming
  // the path and offset when a block is shorter than the table says.
  absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const final;
  // Decoded bytes are in no file: never spliced.
  absl::StatusOr<std::optional<FileRange>> Spliceable(uint64_t) const final {
    return std::optional<FileRange>();
  }
  absl::Status CheckUnchanged() const final { return file_.CheckUnchanged(); }

 protected:
  // `table` describes the shard `file` of `file_size` bytes; `cache` is not
  // owned and must outlive the source.
  BlockSource(ShardFile file, uint64_t file_size, std::shared_ptr<const CheckpointTable> table,
              BlockCache* cache);

  // The decoded block holding uncompressed byte `offset` (< size()), from
  // the cache or decoded (and then cached); *start gets the offset of its
  // first byte.
  virtual absl::StatusOr<std::shared_ptr<const std::string>> BlockAt(uint64_t offset,
                                                                     uint64_t* start) const = 0;
  // What ReadAt asks for: the block holding `offset`, of which only the
  // bytes up to `end` (or the block's end, whichever is first) are needed;
  // the block returned may hold just a prefix of the whole block that
  // covers them. Default: BlockAt (the whole block).
  virtual absl::StatusOr<std::shared_ptr<const std::string>> BlockFor(uint64_t offset,
                                                                      uint64_t /*end*/,
                                                                      uint64_t* start) const {
    return BlockAt(offset, start);
  }

  const ShardFile file_;
  const uint64_t file_size_;
  const std::shared_ptr<const CheckpointTable> table_;
  BlockCache* const cache_;
  const uint64_t id_;  // this source's blocks (and idle cursor) in cache_
};

}  // namespace tfrecordfs::source

#endif  // TFRECORDFS_SOURCE_BLOCK_SOURCE_H_
