// TFDS's dataset_info.json for the output of a reshard finalized from parts
// (`reshard --finalize`, parts.h, bucket_parts.h).
//
// TFDS loads a split from the files `<dataset>-<split>.<format>-NNNNN-of-
// MMMMM` and trusts the split's "shardLengths" (one record count per shard,
// proto3 JSON int64: strings) and "numBytes" (the split's serialized
// examples' bytes) in the dataset_info.json beside them. A reshard whose
// output names are TFDS's (--prefix `<dataset>-<split>.tfrecord` or, for
// ArrayRecord, `<dataset>-<split>`: repack::ShardName) writes a matching
// dataset_info.json beside its output when --finalize names the shards, so
// that `tfds.builder_from_directory(OUTPUT)` loads the new shards. The JSON
// itself is repack::ReshardedTfdsInfoJson's (repack/tfds_info.h), the one
// builder the single-process reshard uses too.
//
// Thread-safety: functions without state.
#ifndef TFRECORDFS_RESHAPE_TFDS_SPLIT_H_
#define TFRECORDFS_RESHAPE_TFDS_SPLIT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tfrecordfs/reshape/bucket_parts.h"
#include "tfrecordfs/reshape/parts.h"

namespace tfrecordfs::reshape {

// After --finalize: reads the SOURCE's dataset_info.json (beside the input
// files, when they all lie in one folder or bucket prefix: a local file, or
// an s3:// / gs:// object) and the output's, and writes the one
// repack::ReshardedTfdsInfoJson gives into the output (`output` a local folder, or
// `bucket` when not null: an object put whole, replacing the earlier one
// only if it is unchanged). Returns where it wrote, nullopt when nothing.
// Errors: reading, parsing or writing.
absl::StatusOr<std::optional<std::string>> WriteTfdsInfoAfterFinalize(
    const std::vector<ManifestOutput>& outputs, const std::vector<std::string>& input_paths,
    const std::string& output, const BucketParts* bucket);

}  // namespace tfrecordfs::reshape

#endif  // TFRECORDFS_RESHAPE_TFDS_SPLIT_H_
