// One mounted shard: everything the views know about it, in one place.
//
// Shard ids count from 0 in scan order; the record namespace's node ids
// carry them (node_id.h). MountedShards are opened and held by the mount's
// ShardSet (shard_set.h) and change only when Filesystem::Commit has it
// reopen a rewritten shard while mounted, with every other operation of the
// mount excluded (Filesystem's serve lock), so the views share the vectors
// without locks of their own.
#ifndef TFRECORDFS_VFS_MOUNTED_SHARD_H_
#define TFRECORDFS_VFS_MOUNTED_SHARD_H_

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <memory>

#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/source/shard_source.h"
#include "tfrecordfs/vfs/node_id.h"

namespace tfrecordfs::vfs {

struct MountedShard {
  std::shared_ptr<const index::ShardIndex> index;
  // Its bytes in uncompressed coordinates (scan::OpenShard), read ahead when
  // the sources are on network storage.
  std::unique_ptr<source::ShardSource> source;
  // The object it is when its path is a URL (its ETag as listed: a bucket
  // mount's edits are committed conditionally on it); null for a file.
  std::shared_ptr<const source::ObjectReader> object;
  int name_width = 1;          // digits of the largest record index: folder names' padding
  struct timespec mtime = {};  // of the shard file: every folder and file of it shows this
  // The node ids' generation (vfs::Attr::generation): one more after each
  // commit while mounted, when the same ids name the new shard's records.
  uint64_t generation = 1;

  // Records the mount shows (at most kMaxRecordsPerShard: the node id's
  // field); none without an index (a ShardSet's retired generation of a
  // shard that was not rewritten).
  uint64_t records_shown() const {
    return index == nullptr ? 0 : std::min<uint64_t>(index->num_records(), kMaxRecordsPerShard);
  }
};

// The digits of a shard's largest record index: how wide its record folder
// names are padded (MountedShard::name_width).
constexpr int NameWidth(uint64_t num_records) {
  int d = 1;
  for (uint64_t n = num_records == 0 ? 0 : num_records - 1; n >= 10; n /= 10) ++d;
  return d;
}
static_assert(NameWidth(0) == 1 && NameWidth(10) == 1 && NameWidth(11) == 2 &&
              NameWidth(1000001) == 7);

// One number per record of the mount (shard in the high bits), for the maps
// keyed by record: the record cache, the damage notes.
constexpr uint64_t RecordKey(uint64_t shard, uint64_t record) {
  return (shard << kRecordBits) | record;
}

// The shard and the record a RecordKey names (the inverse of RecordKey, as
// node_id.h's ShardOf/RecordOf are of RecordId).
constexpr uint64_t ShardOfKey(uint64_t key) { return key >> kRecordBits; }
constexpr uint64_t RecordOfKey(uint64_t key) { return key & (kMaxRecordsPerShard - 1); }

static_assert(ShardOfKey(RecordKey(kMaxShards - 1, kMaxRecordsPerShard - 1)) == kMaxShards - 1);
static_assert(RecordOfKey(RecordKey(kMaxShards - 1, kMaxRecordsPerShard - 1)) ==
              kMaxRecordsPerShard - 1);
static_assert(ShardOfKey(RecordKey(5, 0)) == 5 && RecordOfKey(RecordKey(5, 0)) == 0);

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_MOUNTED_SHARD_H_
