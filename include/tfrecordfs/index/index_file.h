// The on-disk form of one shard's index (a ".tfri" file): the result of the
// header walk, plus what is needed to tell whether it still describes the
// shard. All integers are little-endian.
//
//   offset        size        field
//   0             8           magic "TFRINDEX"
//   8             4           version (kIndexVersion)
//   12            4           flags: must be 0 (readers reject other bits)
//   16            8           file_size: the shard's size when it was walked
//   24            8           mtime_ns: its mtime, ns since the epoch (signed)
//   32            12          first_header: the first record's 12 header
//                             bytes (zeros when there is no record)
//   44            12          last_header: the last record's 12 header bytes
//   56            8           num_records N
//   64            4           num_problems P
//   68            4           path_length L
//   72            8 * (N+1)   offsets: u64 start of each record, then the end
//                             of the last one (record::WalkResult::offsets)
//   ...           P entries   problems: u64 offset, u32 length M, M bytes of
//                             message (record::WalkProblem)
//   ...           L           path: the shard's real path when it was walked
//   end - 4       4           crc32c (unmasked) of every byte before it
//
// The offsets start 8-byte aligned, so a reader may use them in place. The
// trailing CRC makes a torn or corrupted file (a crash while writing, a bad
// copy in a shared directory) a decode error, never a wrong index.
//
// Version history: 1 = this layout. A reader rejects any other version (the
// index is then rebuilt), so a format change only needs a new number.
//
// Pure functions; thread-safe.
#ifndef TFRECORDFS_INDEX_INDEX_FILE_H_
#define TFRECORDFS_INDEX_INDEX_FILE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/reader.h"

namespace tfrecordfs::index {

inline constexpr char kIndexMagic[8] = {'T', 'F', 'R', 'I', 'N', 'D', 'E', 'X'};
inline constexpr uint32_t kIndexVersion = 1;
inline constexpr size_t kIndexHeaderSize = 72;
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
  HeaderBytes first_header{};  // zeros when walk.offsets has one element
  HeaderBytes last_header{};
  std::string path;
  record::WalkResult walk;  // offsets (never empty) and problems

  uint64_t num_records() const { return walk.offsets.empty() ? 0 : walk.offsets.size() - 1; }
};

// Serialises `file` in the layout above. `file.walk.offsets` must not be
// empty.
std::string EncodeIndexFile(const IndexFile& file);

// Parses and checks an index file: magic, version, flags, sizes that add up
// exactly, the trailing CRC, and every invariant a header walk
// (record::WalkHeaders from offset 0) guarantees, so that a file whose CRC
// was recomputed over wrong offsets is still refused:
//   - offsets start at 0, unless a problem was recorded at byte 0;
//   - they strictly increase, and each record spans at least 16 bytes
//     unless a problem was recorded where it ends (a resynchronisation may
//     land as close as 12 bytes after the previous record's start);
//   - the last offset is file_size, unless a problem was recorded there
//     (the walk stopped at damage it could not step over);
//   - every problem lies inside the shard (offset < file_size) and its
//     message is at most kMaxProblemMessage bytes.
// (Problems are not sorted: a resynchronisation may step back before the
// position where damage was found.) Errors are DataLoss (damaged,
// truncated, not an index) or FailedPrecondition (another version); either
// way the caller rebuilds.
absl::StatusOr<IndexFile> DecodeIndexFile(absl::string_view bytes);

// The sizes, in bytes, a valid index file can have given its first
// kIndexHeaderSize bytes (`header`), for a shard of at most `max_shard_size`
// bytes: min has every problem message empty, max every one
// kMaxProblemMessage long. Lets a reader refuse a file of any other size
// before allocating for it. Errors: DataLoss (bad magic, counts that cannot
// describe such a shard), FailedPrecondition (another version, or made for
// a longer shard: stale).
struct SizeRange {
  uint64_t min = 0;
  uint64_t max = 0;
};
absl::StatusOr<SizeRange> IndexFileSizeRange(absl::string_view header, uint64_t max_shard_size);

}  // namespace tfrecordfs::index

#endif  // TFRECORDFS_INDEX_INDEX_FILE_H_
