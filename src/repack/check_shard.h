// The check of a shard just written (pack.cc), shared with the rewrite of
// shards with deleted records (rewrite.cc). Internal to repack.
#ifndef TFRECORDFS_SRC_REPACK_CHECK_SHARD_H_
#define TFRECORDFS_SRC_REPACK_CHECK_SHARD_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::repack {

// OK when `path` holds exactly `records` records in clean framing of
// `bytes` uncompressed bytes, in one stream of `codec` when compressed, every
// record reading back with both CRCs. DataLoss naming the file otherwise.
// `walked`, when given and the shard is GZIP or ZLIB: on OK, what the
// check's one inflate of the file found, as index::WalkShard makes it at
// source::kDefaultSpan (its record offsets, checkpoints and their windows),
// so that the file's index needs no second inflate (rewrite.cc hands it to
// index::FollowRewrite); left as it was otherwise.
absl::Status CheckWrittenShard(const std::string& path, uint64_t bytes, uint64_t records,
                               source::Codec codec, index::WalkedShard* walked = nullptr);

}  // namespace tfrecordfs::repack

#endif  // TFRECORDFS_SRC_REPACK_CHECK_SHARD_H_
