// The class-grouping file: one shard's grouping behind -o view=classes
// (vfs/class_groups.h: which class folder each record goes to), kept beside
// the shard's cached index so that the next mount reads it instead of
// decoding every record again.
//
// The stored grouping (one side file per shard and class feature, in the
// index cache, keyed like the shard's index: index::IndexStore::CachePath
// with `.tfri` replaced by `.<16 hex digits of a hash of the feature>.tfrc`):
//
//   "TFRC" | u32 version (3) | u32 n | feature name (n bytes)
//   u32 n | the shard's real path (n bytes)
//   u64 file size | i64 mtime ns | i64 ctime ns | u64 inode
//   u64 index digest (a hash of the shard index's record offsets)
//   u32 folders | per folder: u32 n | name (n bytes) | u8 has value
//                             | u32 n | value (n bytes)
//   u64 records | per record: u32 folder (kNotGrouped: damaged)
//   u32 masked crc32c of everything before it
//   (integers little endian)
//
// It is used only while the shard is the same file with the same index:
// real path, size, mtime, ctime and inode as stat(2) gives them now, and
// the digest of the index the mount uses. A shard that changed gets a new
// index, so its grouping goes with it (invalidated with the index); a
// torn, corrupt or other-version file is decoded again and rewritten. A
// file that cannot be written costs nothing but the next mount's pass.
//
// Thread-safety: pure functions.
#ifndef TFRECORDFS_INDEX_CLASS_GROUPING_FILE_H_
#define TFRECORDFS_INDEX_CLASS_GROUPING_FILE_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/index/index_store.h"
#include "tfrecordfs/index/shard_index.h"

namespace tfrecordfs::index {

// A record in no class folder: damaged (it cannot be read), so it has no
// image to show.
inline constexpr uint32_t kNotGrouped = std::numeric_limits<uint32_t>::max();

// One shard's grouping, as stored.
struct ShardGrouping {
  std::string feature;
  std::string real_path;
  uint64_t file_size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  uint64_t inode = 0;
  uint64_t index_digest = 0;
  std::vector<std::string> folders;  // this shard's folder names
  // Per folder: the whole value it stands for (naming::ClassOf; a name cut
  // to 255 bytes keeps its value here), nullopt for `%none` / `%several`.
  std::vector<std::optional<std::string>> values;
  std::vector<uint32_t> folder_of;  // per record: an index of `folders`, or kNotGrouped
};
std::string EncodeGrouping(const ShardGrouping& g);
// DataLoss for a torn, corrupt or other-version file.
absl::StatusOr<ShardGrouping> DecodeGrouping(absl::string_view bytes);
// A hash of the index's record offsets (ShardGrouping::index_digest).
uint64_t IndexDigest(const ShardIndex& idx);
// Where the grouping of the shard at `real_path` by `feature` is kept, or
// "" when the store keeps no cache (-o noindexcache).
std::string GroupingPath(const IndexStore& store, const std::string& real_path,
                         absl::string_view feature);

}  // namespace tfrecordfs::index

#endif  // TFRECORDFS_INDEX_CLASS_GROUPING_FILE_H_
