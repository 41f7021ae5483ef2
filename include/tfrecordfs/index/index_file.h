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
// exactly, the trailing CRC, and offsets that never decrease and end at or
// before file_size. Errors are DataLoss (damaged, truncated, not an index) or
// FailedPrecondition (another version); either way the caller rebuilds.
absl::StatusOr<IndexFile> DecodeIndexFile(absl::string_view bytes);

}  // namespace tfrecordfs::index

#endif  // TFRECORDFS_INDEX_INDEX_FILE_H_
