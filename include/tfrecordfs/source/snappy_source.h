// SNAPPY shards: TensorFlow's third compression type
// (tf.io.TFRecordWriter(path, "SNAPPY"), tf.data snapshot and save).
//
// The file is a sequence of blocks, as tsl/lib/io/snappy/snappy_outputbuffer.cc
// writes them (its comment says little-endian; its code, which we follow,
// writes the most significant byte first, and snappy_inputbuffer.cc reads
// it that way):
//
//   +------------------------+----------------------------------------+
//   | uint32 L (BIG-endian)  | L bytes: one raw Snappy block           |
//   +------------------------+----------------------------------------+
//   | uint32 L' ...          | ...                                     |
//
// There is no other length prefix: the uncompressed size of a block is the
// varint at the start of the raw Snappy block (snappy::GetUncompressedLength).
// The blocks' concatenated output is an ordinary TFRecord stream; a record
// may span blocks.
//
// Random access: one pass (ScanSnappy) walks the block lengths, decompresses
// each block once (the header walk runs on the bytes) and records a
// checkpoint in a CheckpointTable (codec kSnappy; `in` = the offset of a
// block's length prefix, `out` = its first uncompressed byte; every point
// is a stream start needing no window) at the first block of each *group*:
// a block starts a new group once the group before it holds
// kSnappyGroupBytes of uncompressed or of compressed bytes. TensorFlow's
// blocks (256 KiB of input each) are then one group each; a file of tiny
// or empty blocks (which TensorFlow reads as well) costs one checkpoint
// per kSnappyGroupBytes of file, not one per block, so its index and the
// memory of its mount follow its records and size, not its block count. A
// SnappySource serves a read by decompressing the group that holds it
// (cached in the mount's BlockCache). Index files store the table as they
// store GZIP checkpoints; those of one point per block still load.
//
// Damage: a length running past the end of the file, a block that does not
// decompress, or one claiming more than kMaxSnappyBlock bytes ends the
// stream there (ScanResult::problem); the bytes before it are served.
//
// Thread-safety: SnappySource is safe to use from any number of threads
// (reads pread a shared descriptor; the cache locks); the functions keep no
// state.
#ifndef TFRECORDFS_SOURCE_SNAPPY_SOURCE_H_
#define TFRECORDFS_SOURCE_SNAPPY_SOURCE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/source/block_source.h"
#include "tfrecordfs/source/inflate.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::source {

inline constexpr size_t kSnappyLengthSize = 4;
// The largest block we decompress (TensorFlow writes 256 KiB by default):
// a larger claim is damage, not an allocation.
inline constexpr uint64_t kMaxSnappyBlock = uint64_t{64} << 20;
// The bytes after which a block starts a new checkpoint group (see above).
inline constexpr uint64_t kSnappyGroupBytes = uint64_t{256} << 10;

// The block that starts at the beginning of `bytes` (which must hold at
// least its length prefix and whole body): its compressed length (prefix
// excluded) and uncompressed size. DataLoss when the prefix or the Snappy
// header is invalid, the body is cut short, or the size exceeds
// kMaxSnappyBlock. Pure: the fuzzed parser.
struct SnappyBlock {
  uint32_t compressed = 0;
  uint64_t uncompressed = 0;
};
absl::StatusOr<SnappyBlock> ParseSnappyBlock(absl::string_view bytes);
// Decompresses the block body `body` (after the length prefix). DataLoss
// when it is not a valid Snappy block or exceeds kMaxSnappyBlock.
absl::StatusOr<std::string> DecodeSnappyBlock(absl::string_view body);

// Reads the file `fd` block by block from the start, calling `sink` with the
// decompressed bytes in order, and returns the block table (one checkpoint
// per block; windows empty) and where the stream stopped if damaged.
// `progress` gets compressed bytes consumed. Only I/O errors and the sink's
// errors are errors. `threads` threads read and decompress blocks ahead
// (at most two blocks each in memory); `sink` and `progress` are called on
// the calling thread, in order.
absl::StatusOr<ScanResult> ScanSnappy(StoredBytes fd, absl::string_view path, uint64_t file_size,
                                      const StreamSink& sink,
                                      const std::function<void(uint64_t)>& progress = nullptr,
                                      int threads = 2);

// True when the file starts with a valid SNAPPY block whose decompressed
// bytes begin with at least `min_bytes` bytes (the caller then checks that
// they form a record header: `*prefix` gets them). Used by the probe.
absl::StatusOr<bool> SnappyPrefix(StoredBytes fd, absl::string_view path, uint64_t file_size,
                                  size_t min_bytes, std::string* prefix);

class SnappySource final : public BlockSource {
 public:
  // `table` from ScanSnappy or an index file; `cache` is not owned and must
  // outlive the source.
  SnappySource(ShardFile file, uint64_t file_size, std::shared_ptr<const CheckpointTable> table,
               BlockCache* cache)
      : BlockSource(std::move(file), file_size, std::move(table), cache) {}

  Codec codec() const override { return Codec::kSnappy; }

 private:
  // The decompressed bytes of the table's group that holds `offset`.
  absl::StatusOr<std::shared_ptr<const std::string>> BlockAt(uint64_t offset,
                                                             uint64_t* start) const override;
};

}  // namespace tfrecordfs::source

#endif  // TFRECORDFS_SOURCE_SNAPPY_SOURCE_H_
