// ArrayRecord files: riegeli/records files with an ArrayRecord footer.
//
// The byte layout (google/riegeli doc/riegeli_records_file_format.md,
// google/array_record cpp/layout.proto), numbers little-endian:
//
//   offset 0        64 KiB        128 KiB           size - 64 KiB      size
//   +---------------+-------------+------------------+------------------+
//   |BH|sig|chunk|ch|BH|..chunk...|BH|..|footer chunk|BH|postscript|pad |
//   +---------------+-------------+------------------+------------------+
//
//   BH  block header (24 bytes) at every multiple of 64 KiB, interrupting
//       whatever chunk crosses it: header_hash (hash of the next 16 bytes),
//       previous_chunk (block start - start of the chunk it interrupts),
//       next_chunk (end of that chunk - block start).
//   chunk header (40 bytes): header_hash (hash of the next 32 bytes),
//       data_size, data_hash (hash of the data), chunk_type (low byte) |
//       num_records (high 56 bits), decoded_data_size; then data_size bytes
//       of data (block headers not counted), then padding up to ChunkEnd().
//   sig  the signature chunk ('s', all sizes 0): the first 64 bytes of every
//       file are kSignature.
//   simple chunk ('r'): compression_type byte, varint compressed_sizes_size,
//       compressed sizes (num_records varints), compressed values (the
//       records concatenated). A compressed buffer starts with the varint of
//       its decompressed size.
//   footer chunk: a simple chunk whose records are a RiegeliFooterMetadata
//       (field 1: ArrayRecordMetadata {1 version, 2 num_chunks,
//       3 num_records, 4 writer_options}) and one ArrayRecordFooter per
//       data chunk {1 chunk_offset, 2 decoded_data_size, 3 num_records}.
//   postscript: an uncompressed simple chunk beginning at size - 64 KiB
//       holding three copies of RiegeliPostscript {1 footer_offset,
//       2 magic = kArrayRecordMagic}; a padding chunk fills the block.
//
// Hashes are HighwayHash-64 with riegeli's key ("Riegeli/records\n" twice).
//
// Pure functions; thread-safe.
#ifndef TFRECORDFS_ARRAYRECORD_FORMAT_H_
#define TFRECORDFS_ARRAYRECORD_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tfrecordfs::arrayrecord {

inline constexpr uint64_t kBlockSize = uint64_t{1} << 16;
inline constexpr uint64_t kBlockHeaderSize = 24;
inline constexpr uint64_t kUsableBlockSize = kBlockSize - kBlockHeaderSize;
inline constexpr uint64_t kChunkHeaderSize = 40;
// The first 64 bytes of every riegeli/records file: a block header and the
// signature chunk's header.
inline constexpr size_t kSignatureSize = 64;
extern const unsigned char kSignature[kSignatureSize];
// RiegeliPostscript.magic.
inline constexpr uint64_t kArrayRecordMagic = 0x71930e704fdae05eULL;
inline constexpr uint32_t kArrayRecordVersion = 1;

// The largest chunk we decode: its decoded_data_size (the records), and its
// stored data. A larger claim is refused as damage instead of allocated
// (a decompression bomb or a forged header).
inline constexpr uint64_t kMaxChunkDecoded = uint64_t{256} << 20;
inline constexpr uint64_t kMaxChunkData = uint64_t{256} << 20;
// The most records one chunk may hold: each costs a limit (8 bytes) when
// decoded and 16 bytes of framing in the record view (arrayrecord/file.h).
inline constexpr uint64_t kMaxChunkRecords = uint64_t{1} << 22;

enum ChunkType : uint8_t {
  kSignatureChunk = 's',
  kMetadataChunk = 'm',
  kPaddingChunk = 'p',
  kSimpleChunk = 'r',
  kTransposedChunk = 't',
};

enum class Compression : uint8_t { kNone = 0, kBrotli = 'b', kZstd = 'z', kSnappy = 's' };
// "none", "brotli", "zstd", "snappy"; "unknown" for other bytes.
absl::string_view CompressionName(Compression c);

// HighwayHash-64 with riegeli's key.
uint64_t Hash(absl::string_view data);

// True when `first` (at least kSignatureSize bytes) starts a riegeli file.
bool HasSignature(absl::string_view first);

struct ChunkHeader {
  uint64_t data_size = 0;
  uint64_t data_hash = 0;
  uint8_t type = 0;
  uint64_t num_records = 0;  // < 2^56
  uint64_t decoded_data_size = 0;
};
// The 40 header bytes of `h`, with their hash.
std::string EncodeChunkHeader(const ChunkHeader& h);
// Parses 40 bytes; InvalidArgument when the header hash does not match.
absl::StatusOr<ChunkHeader> ParseChunkHeader(absl::string_view bytes);

struct BlockHeader {
  uint64_t previous_chunk = 0;
  uint64_t next_chunk = 0;
};
std::string EncodeBlockHeader(const BlockHeader& h);
// Parses 24 bytes; InvalidArgument when the hash does not match or the
// distances break the format's constraints.
absl::StatusOr<BlockHeader> ParseBlockHeader(absl::string_view bytes);

// Layout arithmetic (the specification's implementation notes).
constexpr uint64_t RemainingInBlock(uint64_t pos) { return (0 - pos) % kBlockSize; }
constexpr bool IsBlockBoundary(uint64_t pos) { return pos % kBlockSize == 0; }
constexpr bool IsPossibleChunkBoundary(uint64_t pos) {
  return RemainingInBlock(pos) < kUsableBlockSize;
}
constexpr uint64_t RoundUpToPossibleChunkBoundary(uint64_t pos) {
  const uint64_t r = RemainingInBlock(pos);
  return pos + (r > kUsableBlockSize - 1 ? r - (kUsableBlockSize - 1) : 0);
}
// For a chunk beginning at `chunk_begin` (a possible chunk boundary), the
// position `length` chunk bytes later, block headers added.
constexpr uint64_t AddWithOverhead(uint64_t chunk_begin, uint64_t length) {
  const uint64_t blocks =
      (length + (chunk_begin + kUsableBlockSize - 1) % kBlockSize) / kUsableBlockSize;
  return chunk_begin + length + blocks * kBlockHeaderSize;
}
// Chunk bytes between `chunk_begin` and `pos`, block headers subtracted.
constexpr uint64_t DistanceWithoutOverhead(uint64_t chunk_begin, uint64_t pos) {
  const uint64_t blocks = pos / kBlockSize - chunk_begin / kBlockSize;
  const auto min = [](uint64_t a, uint64_t b) { return a < b ? a : b; };
  return (pos - min(pos % kBlockSize, kBlockHeaderSize)) -
         (chunk_begin - min(chunk_begin % kBlockSize, kBlockHeaderSize)) -
         blocks * kBlockHeaderSize;
}
// Where the chunk beginning at `chunk_begin` ends (padding included).
// Callers bound data_size and num_records first (no overflow below 2^62).
constexpr uint64_t ChunkEnd(const ChunkHeader& h, uint64_t chunk_begin) {
  const uint64_t a = AddWithOverhead(chunk_begin, kChunkHeaderSize + h.data_size);
  const uint64_t b = RoundUpToPossibleChunkBoundary(chunk_begin + h.num_records);
  return a > b ? a : b;
}

}  // namespace tfrecordfs::arrayrecord

#endif  // TFRECORDFS_ARRAYRECORD_FORMAT_H_
