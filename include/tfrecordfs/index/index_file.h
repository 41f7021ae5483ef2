// The on-disk form of one shard's index (a ".tfri" file): the result of the
// header walk, plus what is needed to tell whether it still describes the
// shard, and for a compressed shard the checkpoints that give random access
// (source/inflate.h). All integers are little-endian.
//
//   offset        size        field
//   0             8           magic "TFRINDEX"
//   8             4           version (kIndexVersion)
//   12            4           flags: bits 0-1 the codec (source::Codec: 0 none,
//                             1 gzip, 2 zlib); other bits must be 0
//   16            8           file_size: the shard file's size when walked
//   24            8           mtime_ns: its mtime, ns since the epoch (signed)
//   32            12          first_header: the first 12 bytes of the file
//                             (zeros when there is no record); plain shards:
//                             the first record's header
//   44            12          last_header: plain shards: the last record's
//                             header bytes (zeros when there is no record);
//                             compressed shards: the file's last 12 bytes
//                             (its GZIP trailer holds the CRC-32 and size of
//                             the data)
//   56            8           num_records N
//   64            4           num_problems P
//   68            4           path_length L
//   72            8           data_size: uncompressed bytes (file_size for a
//                             plain shard)
//   80            4           num_checkpoints C (0 for a plain shard)
//   84            4           reserved, 0
//   88            8           windows_size W
//   96            8           main_size M: bytes from 0 to the end of the crc
//   104           8           inode: the shard file's inode number
//   112           8           ctime_ns: its ctime, ns since the epoch (signed);
//                             with inode, tells a file replaced by another of
//                             the same size and mtime (touch -r) on the
//                             machine that wrote the index
//   120           8 * (N+1)   offsets: u64 start of each record, then the end
//                             of the last one (record::WalkResult::offsets),
//                             in uncompressed coordinates
//   ...           P entries   problems: u64 offset, u32 length K, K bytes of
//                             message (record::WalkProblem)
//   ...           L           path: the shard's real path when it was walked
//   ...           0-7         zero padding to a multiple of 8
//   ...           40 * C      checkpoints: u64 in, u64 out, u64 window_offset,
//                             u32 window_length, u32 window_crc (crc32c of
//                             the stored window), u8 bits, u8 flags (bit 0:
//                             stream start), 6 zero bytes
//   M - 4         4           crc32c (unmasked) of every byte before it
//   M             W           windows: each checkpoint's 32 KiB window, raw
//                             deflate, whole or sparse (the bytes the stream
//                             after it does not read are zero,
//                             source/window_use.h), at window_offset from M. Not covered by
//                             the crc (each has its own) and not read at load:
//                             the daemon reads one when a read needs it.
//
// The offsets start 8-byte aligned, so a reader may use them in place. The
// trailing CRC makes a torn or corrupted file (a crash while writing, a bad
// copy in a shared directory) a decode error, never a wrong index.
//
// Version history: 1 = no codec, checkpoints or windows (72-byte header);
// 2 = this layout with whole windows only; 3 = this layout, windows may be
// sparse (a version 2 reader would take them for damage when it checks an
// untrusted index), checkpoints denser. A reader rejects any other version
// (the index is then rebuilt), so a format change only needs a new number.
//
// Pure functions; thread-safe.
#ifndef TFRECORDFS_INDEX_INDEX_FILE_H_
#define TFRECORDFS_INDEX_INDEX_FILE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/source/inflate.h"

namespace tfrecordfs::index {

inline constexpr char kIndexMagic[8] = {'T', 'F', 'R', 'I', 'N', 'D', 'E', 'X'};
inline constexpr uint32_t kIndexVersion = 3;
inline constexpr size_t kIndexHeaderSize = 120;
inline constexpr size_t kCheckpointSize = 40;
static_assert(kCheckpointSize == source::kCheckpointEntryBytes);
inline constexpr size_t kIndexTrailerSize = 4;
inline constexpr char kIndexSuffix[] = ".tfri";

// The longest problem message an index file may hold. The walk's own are
// under 200 bytes; the bound lets a reader size a file from its header.
inline constexpr size_t kMaxProblemMessage = 4096;
// The longest stored shard path (PATH_MAX).
inline constexpr size_t kMaxIndexPath = 4096;

using HeaderBytes = std::array<char, record::kHeaderSize>;

// The decoded contents of an index file.
struct IndexFile {
  uint64_t file_size = 0;
  int64_t mtime_ns = 0;
  uint64_t inode = 0;
  int64_t ctime_ns = 0;
  HeaderBytes first_header{};  // zeros when walk.offsets has one element
  HeaderBytes last_header{};
  std::string path;
  record::WalkResult walk;  // offsets (never empty) and problems
  source::Codec codec = source::Codec::kNone;
  uint64_t data_size = 0;                       // == file_size for a plain shard
  std::vector<source::Checkpoint> checkpoints;  // empty for a plain shard
  // Encode: the windows blob written after the main part. Decode: left
  // empty; the blob is at [main_size, main_size + windows_size) of the file.
  std::string windows;
  uint64_t windows_size = 0;
  uint64_t main_size = 0;

  uint64_t num_records() const { return walk.offsets.empty() ? 0 : walk.offsets.size() - 1; }
};

// Serialises `file` in the layout above. `file.walk.offsets` must not be
// empty.
std::string EncodeIndexFile(const IndexFile& file);

// The same bytes in pieces, without a copy of the offsets table (on a
// little-endian machine it is the bytes of file.walk.offsets) or of the
// windows: written one after the other, pieces() are EncodeIndexFile(file).
// The views point into `file` and into this: valid while both live,
// unchanged.
struct EncodedIndexFile {
  std::string head;             // the header (kIndexHeaderSize bytes)
  absl::string_view offsets;    // the offsets table, when not encoded below
  std::string offsets_encoded;  // ... or here
  std::string rest;             // problems, path, padding, checkpoints, the CRC
  absl::string_view windows;    // file.windows

  absl::string_view offsets_piece() const {
    return offsets.empty() ? absl::string_view(offsets_encoded) : offsets;
  }
  std::array<absl::string_view, 4> pieces() const {
    return {head, offsets_piece(), rest, windows};  // in the file's order
  }
};
EncodedIndexFile EncodeIndexFilePieces(const IndexFile& file);

// The size EncodeIndexFile gives `file` without its windows (main_size).
uint64_t EncodedMainSize(const IndexFile& file);

// The main_size field of an index header (its first kIndexHeaderSize bytes);
// DataLoss when they are not an index header, FailedPrecondition for
// another version.
absl::StatusOr<uint64_t> IndexMainSize(absl::string_view header);

// Parses and checks an index file's main part (`bytes` holds at least
// main_size bytes; more is allowed and ignored): magic, version, flags,
// reserved and padding bytes zero (one index, one encoding), the header
// bounds of IndexFileSizeRange, sizes that add up exactly, the trailing
// CRC, checkpoints in order, inside the file and the data, with windows
// inside the windows area (stream starts: no window, offset and crc 0), and every
// invariant a header walk (record::WalkHeaders from offset 0) guarantees, so
// that a file whose CRC was recomputed over wrong offsets is still refused:
//   - offsets start at 0, unless a problem was recorded at byte 0;
//   - they strictly increase, and each record spans at least 16 bytes
//     unless a problem was recorded where it ends (a resynchronisation may
//     land as close as 12 bytes after the previous record's start);
//   - the last offset is data_size, unless a problem was recorded there
//     (the walk stopped at damage it could not step over);
//   - every problem lies inside the data (offset <= data_size: a
//     compressed stream that stops inflating is recorded at its end) and
//     its message is at most kMaxProblemMessage bytes.
// (Problems are not sorted: a resynchronisation may step back before the
// position where damage was found.) Errors are DataLoss (damaged,
// truncated, not an index) or FailedPrecondition (another version); either
// way the caller rebuilds.
absl::StatusOr<IndexFile> DecodeIndexFile(absl::string_view bytes);

// The sizes, in bytes, a valid index file's main part (main_size) can have
// given its first kIndexHeaderSize bytes (`header`), for a shard of at most
// `max_shard_size` bytes: min has every problem message empty, max every one
// kMaxProblemMessage long (and, for a compressed shard, as many checkpoints
// as the file could hold). Lets a reader refuse a file of any other size
// before allocating for it. Errors: DataLoss (bad magic, counts that cannot
// describe such a shard), FailedPrecondition (another version, or made for
// a longer shard: stale).
struct SizeRange {
  uint64_t min = 0;  // of the main part
  uint64_t max = 0;
  uint64_t windows = 0;  // the windows area after it (exact)
};
absl::StatusOr<SizeRange> IndexFileSizeRange(absl::string_view header, uint64_t max_shard_size);

}  // namespace tfrecordfs::index

#endif  // TFRECORDFS_INDEX_INDEX_FILE_H_
