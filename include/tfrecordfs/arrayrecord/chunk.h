// Reading one riegeli chunk of an ArrayRecord file, and decoding simple
// chunks into records.
//
// Every check the format allows is made: the chunk header's hash, the hash
// and distances of each block header the chunk crosses, the data hash, the
// declared sizes against kMaxChunkData / kMaxChunkDecoded and the file, and
// each decompressed buffer's size against what the chunk declares (the
// buffer is allocated at the declared size, never grown by the
// decompressor). Errors are DataLoss naming the path and the byte offset
// of the chunk (and of the part that failed); a transposed chunk is
// Unimplemented (tfrecordfs does not decode riegeli's column-wise proto
// encoding), naming the chunk's offset.
//
// Pure functions over StoredBytes; thread-safe.
#ifndef TFRECORDFS_ARRAYRECORD_CHUNK_H_
#define TFRECORDFS_ARRAYRECORD_CHUNK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/arrayrecord/format.h"
#include "tfrecordfs/source/stored_bytes.h"

namespace tfrecordfs::arrayrecord {

// A chunk as stored: its header and data, block headers removed.
struct Chunk {
  uint64_t begin = 0;  // file offset where the chunk begins
  uint64_t end = 0;    // ChunkEnd: where the next chunk may begin
  ChunkHeader header;
  std::string data;
};

// Reads the chunk beginning at `begin` of the file `in` (`file_size`
// bytes, `path` for messages), checking the header hash, the block headers
// it crosses and the data hash.
absl::StatusOr<Chunk> ReadChunk(source::StoredBytes in, absl::string_view path, uint64_t file_size,
                                uint64_t begin);
// The same over bytes already in memory (`file` is the whole file): the
// fuzzed parser.
absl::StatusOr<Chunk> ReadChunkFrom(absl::string_view file, absl::string_view path, uint64_t begin);

// A simple chunk's records: values concatenated, and where each ends.
struct Records {
  std::string values;
  std::vector<uint64_t> limits;  // limits[i]: end of record i in values
  size_t size() const { return limits.size(); }
  absl::string_view at(size_t i) const {
    const uint64_t b = i == 0 ? 0 : limits[i - 1];
    return absl::string_view(values).substr(b, limits[i] - b);
  }
};

// Decodes a simple chunk's data (header from the chunk). `where` (path and
// offset) prefixes messages. Transposed chunks: Unimplemented.
absl::StatusOr<Records> DecodeChunk(const ChunkHeader& header, absl::string_view data,
                                    absl::string_view where);

// The error a transposed chunk gives (Unimplemented, marked so that
// IsRefusedFile tells it from other Unimplemented errors): the file is
// refused as a whole, like a shard with too many records
// (scan::RefusedShard: a mount shows it as a plain file).
absl::Status TransposedError(absl::string_view where);
bool IsRefusedFile(const absl::Status& status);

// Decompresses one buffer of a chunk: `stored` begins with the varint of its
// decompressed size (unless kNone), which must be at most `max_size` (and,
// when `exact` is set, equal to it). DataLoss prefixed with `where`.
absl::StatusOr<std::string> Decompress(Compression c, absl::string_view stored, uint64_t max_size,
                                       bool exact, absl::string_view where);

// Compresses `raw` as a chunk buffer (varint size prefix included unless
// kNone). `level` as the reference writer spells it (brotli 0-11, zstd
// -131072..22, snappy ignored).
absl::StatusOr<std::string> Compress(Compression c, int level, absl::string_view raw);

}  // namespace tfrecordfs::arrayrecord

#endif  // TFRECORDFS_ARRAYRECORD_CHUNK_H_
