// TFDS metadata beside rewritten shards (repack/rewrite.h).
//
// TensorFlow Datasets names shard files `<dataset>-<split>.<format>-<index>-
// of-<count>` (five digits each) and describes each split in the
// `dataset_info.json` of the shards' directory: "splits" is a list of
// objects with "name", "shardLengths" (one record count per shard, as
// strings: proto3's JSON for int64) and "numBytes" (the split's bytes).
// `tfds.load` trusts these counts, so a shard whose record count changed
// must change them too.
//
// Thread-safety: pure functions of the file system state.
#ifndef TFRECORDFS_REPACK_TFDS_INFO_H_
#define TFRECORDFS_REPACK_TFDS_INFO_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tfrecordfs::repack {

// The split, index and count a TFDS shard file name carries.
struct TfdsShardName {
  std::string split;
  std::string format;  // "tfrecord", "array_record": what follows the split's '.'
  uint64_t index = 0;
  uint64_t count = 0;
};
std::optional<TfdsShardName> ParseTfdsShardName(absl::string_view file_name);

// After the shard at `shard_path` was rewritten with `records` records: sets
// its entry of its split's "shardLengths" to `records` (idempotent: recovery
// may run it again) and, given `bytes_delta` (how many payload bytes the
// rewrite added, negative when it removed some; TFDS counts a split's bytes
// as the sum of its serialized examples), adds it to the split's
// "numBytes" (not idempotent: only the rewrite itself passes it). Every
// other key and their order are kept; the file is replaced atomically
// (WriteFileAtomically). Returns the file's path when it changed it,
// nullopt when there is nothing to update (not a TFDS name, no
// dataset_info.json, no such split, or "shardLengths" with another number of
// shards). Errors: the file cannot be read, parsed or written.
absl::StatusOr<std::optional<std::string>> UpdateTfdsInfo(const std::string& shard_path,
                                                          uint64_t records,
                                                          std::optional<int64_t> bytes_delta);

// What UpdateTfdsInfo writes, as text: `text` (a dataset_info.json, read
// from `where`) after the shard file named `shard_file` (a base name) was
// rewritten with `records` records and `bytes_delta` payload bytes more
// (nullopt: "numBytes" left). nullopt when there is nothing to update (as
// UpdateTfdsInfo's). The one builder of a commit's dataset_info.json, for
// local shards and for objects in a bucket (repack/bucket_rewrite.h).
// DataLoss naming `where` for text that is not JSON.
absl::StatusOr<std::optional<std::string>> CommittedTfdsInfoJson(absl::string_view text,
                                                                 absl::string_view shard_file,
                                                                 uint64_t records,
                                                                 std::optional<int64_t> bytes_delta,
                                                                 const std::string& where);

// The rewrite's two steps (repack/rewrite.h), so that a crash between the
// shard's rename and the metadata's update loses neither count:
// PrepareTfdsInfo, before the shard is renamed into place, writes what
// UpdateTfdsInfo would write (with `bytes_delta`: "numBytes" too) durably to
// PendingTfdsInfoPath(shard) (`.dataset_info.json.<shard name>.tmp` beside
// it) and returns whether there was anything to update; FinishTfdsInfo,
// after the rename (or recovery, finding the new shard in place), renames
// that file over dataset_info.json and fsyncs the folder, returning the
// file's path (nullopt: no pending file: nothing to do, or done already);
// DiscardTfdsInfo (a rewrite that did not happen) removes it and says
// whether there was one. Idempotent: the pending file holds the result, not
// a difference. Errors: as UpdateTfdsInfo, and the rename.
std::string PendingTfdsInfoPath(const std::string& shard_path);
absl::StatusOr<bool> PrepareTfdsInfo(const std::string& shard_path, uint64_t records,
                                     int64_t bytes_delta);
absl::StatusOr<std::optional<std::string>> FinishTfdsInfo(const std::string& shard_path);
bool DiscardTfdsInfo(const std::string& shard_path);

// One output shard of a reshard, for the split's dataset_info.json: its
// path (the base name a TFDS shard name), records and framed bytes (each
// record's payload plus TFRecord's 16 bytes of framing, whatever the file
// format: reshape.h OutputShard::bytes, parts.h ManifestOutput::bytes).
struct TfdsOutput {
  std::string path;
  uint64_t records = 0;
  uint64_t bytes = 0;
};

// The one builder of dataset_info.json after a reshard (single-process
// `reshard` through WriteReshardedTfdsInfo, `reshard --finalize` through
// reshape/tfds_split.h): the text for `outputs`, or nullopt when there is
// none to write: the names are not all TFDS names of one split S and one
// format F numbered 0..n-1 of n (n = outputs.size()), or there is no base,
// or no base holds the split. The base is `output_info` (the output's own
// dataset_info.json, from an earlier reshard of another split into it: its
// other splits kept) or else `source_info` (the SOURCE's: only the split
// kept, the only one the output holds). The split is taken from the base as
// `source_split` (default S; from `source_info` when `output_info` lacks
// it) and named S, with "shardLengths" (the records of each shard, spelt as
// the base spells them) and "numBytes" (framed bytes less 16 per record:
// the payloads written, spelt likewise); its "filepathTemplate" kept when
// it is TFDS's default (`{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}`,
// what the outputs follow), dropped otherwise. "fileFormat" is set to F.
// Every other key and the keys' order are kept. DataLoss naming `where` for
// a base that is not JSON.
absl::StatusOr<std::optional<std::string>> ReshardedTfdsInfoJson(
    const std::vector<TfdsOutput>& outputs, const std::optional<std::string>& output_info,
    const std::optional<std::string>& source_info, const std::optional<std::string>& source_split,
    const std::string& where);

// After a single-process `reshard` wrote `outputs` (in one local folder)
// from the shard files `sources`: when the sources are every shard of one
// split of a TFDS dataset whose dataset_info.json lies beside them (TFDS
// names, one folder, indexes 0 to N-1 of N) and the outputs are TFDS names
// of one split (what `--prefix <dataset>-<split>.tfrecord`, or for
// ArrayRecord `--prefix <dataset>-<split>`, writes: ShardName), writes
// ReshardedTfdsInfoJson's dataset_info.json beside the outputs (merged into
// the output folder's own when there is one). Returns the path written, or
// nullopt and why nothing was (`why`): the conditions above, or records
// skipped as damaged (`complete` false: the counts would not add up to the
// sources'); `why` is empty when the sources' folder has no
// dataset_info.json at all. Errors: a dataset_info.json unreadable or not
// JSON, the write.
absl::StatusOr<std::optional<std::string>> WriteReshardedTfdsInfo(
    const std::vector<std::string>& sources, const std::vector<TfdsOutput>& outputs, bool complete,
    std::string* why);

}  // namespace tfrecordfs::repack

#endif  // TFRECORDFS_REPACK_TFDS_INFO_H_
