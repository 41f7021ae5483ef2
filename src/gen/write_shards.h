// Writing generated records into shards with the project's own ShardWriter
// (private to src/gen): the sample, synthetic, tensors and sequence datasets.
//
// Thread-safety: WriteShards calls `make_payload` on the calling thread, in
// record order; it shares nothing between calls.
#ifndef TFRECORDFS_SRC_GEN_WRITE_SHARDS_H_
#define TFRECORDFS_SRC_GEN_WRITE_SHARDS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::gen {

// How shards are stored (--compression, --members).
struct Storage {
  source::Codec codec = source::Codec::kNone;
  // GZIP: members per shard (records split evenly, as `cat a.gz b.gz`
  // would join them). Must be 1 for the other codecs.
  uint64_t members = 1;
};

// Writes `records` payloads, make_payload(0) .. make_payload(records - 1),
// across `shards` shards named as the pack names them
// (repack::ShardName(prefix, s, shards, codec): the suffix says the codec),
// in `dir` (created if missing); the first records % shards shards get one
// record more. Replaces files of the same names. Errors name the path.
absl::Status WriteShards(const std::string& dir, const std::string& prefix, uint64_t records,
                         uint64_t shards, const Storage& storage,
                         const std::function<std::string(uint64_t)>& make_payload);

}  // namespace tfrecordfs::gen

#endif  // TFRECORDFS_SRC_GEN_WRITE_SHARDS_H_
