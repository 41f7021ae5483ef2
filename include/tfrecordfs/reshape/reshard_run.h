// The run step of `tfrecordfs reshard` (the command is parse, run, report:
// src/cli/reshard_cmd.cc): from the scanned shards and the options to the
// new shards where they belong, one process or one part of many.
//
// RunReshard puts together what reshape.h, shuffle.h, parts.h and
// bucket_parts.h provide, in this order:
//   1. the output (OpenReshardOutput, which the caller calls first): a local
//      folder (created if need be), or a bucket prefix (IsBucketOutput),
//      whose work is then done in a local ScratchDir and its results put
//      into the bucket (BucketParts);
//   2. a shuffle's first pass as a part (ReshardPass::kMap): the part's
//      pieces of its shards into sorted runs, published as its map folder
//      (ShuffleMapPart) and put into the bucket; nothing else;
//   3. a shuffle's second pass as a part (kReduce): the map folders of every
//      part (fetched from the bucket first, only the byte ranges it reads),
//      their inputs the part's manifest's;
//   4. a part writes into a work folder of its own (PartOutput);
//   5. the pass: Reshard over the shards (in order, or shuffled in one
//      process), or ShuffleReduce over the map folders;
//   6. the delivery: a part's shards published with its manifest (and put
//      into the bucket, under PREFIX/.tfrecordfs-parts/), one process's put
//      into the bucket under their final names (never over one), or left in
//      the local folder with TFDS's dataset_info.json beside them
//      (repack::WriteReshardedTfdsInfo).
// The result's paths name the shards where they were delivered.
//
// Nothing here prints or knows the command line: progress and cancellation
// come through the job's Control, and what a command says about TFDS's
// metadata comes back in the result.
//
// Thread-safety: RunReshard keeps no state; the threads it starts end before
// it returns. The Control's callbacks are called as reshape.h says.
#ifndef TFRECORDFS_RESHAPE_RESHARD_RUN_H_
#define TFRECORDFS_RESHAPE_RESHARD_RUN_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tfrecordfs/reshape/bucket_parts.h"
#include "tfrecordfs/reshape/parts.h"
#include "tfrecordfs/reshape/plan.h"
#include "tfrecordfs/reshape/reshape.h"
#include "tfrecordfs/reshape/shuffle.h"
#include "tfrecordfs/scan/scan.h"

namespace tfrecordfs::reshape {

// Which run of a reshard this is.
enum class ReshardPass {
  kWhole,   // the whole reshard, or an in-order part of it
  kMap,     // a shuffle's first pass as a part
  kReduce,  // a shuffle's second pass as a part
};

// Where a reshard writes: `dir`, a local folder: --output's, or a scratch
// folder whose results go into `bucket`.
struct ReshardOutput {
  std::string dir;
  std::unique_ptr<BucketParts> bucket;  // null for a local output
  std::optional<ScratchDir> scratch;    // removed with the ReshardOutput
};
// `output`, a local folder (not created yet: RunReshard makes it; the
// caller has checked it is outside every SOURCE) or a bucket prefix
// (s3://BUCKET/PREFIX/, gs://...: reached as the environment says, its
// scratch folder made). Errors: BucketParts::Open's, ScratchDir::Make's.
absl::StatusOr<ReshardOutput> OpenReshardOutput(const std::string& output);

struct ReshardJob {
  // The shards to read, as the scan found them: every shard of the SOURCEs
  // (kWhole), the part's own (kMap), none (kReduce). Not null; they outlive
  // the call.
  const std::vector<scan::ScannedShard>* shards = nullptr;
  // Every regular file the SOURCEs listed, in listing order (the plan's
  // inputs): the shuffle's bucket count is computed from their sizes, and a
  // part's manifest names those of them it read.
  std::vector<ManifestInput> listing;
  // Where the new shards go (OpenReshardOutput's). Not null; it outlives
  // the call.
  const ReshardOutput* output = nullptr;
  // As reshape.h says; output_dir is set here (the output's folder, or a
  // part's work folder). options.part: this run is that part of `plan`.
  ReshardOptions options;
  ReshardPass pass = ReshardPass::kWhole;
  // With options.part: the plan of the parts (its id names the part's
  // folders and manifests, its pieces say which records a map part reads).
  PartPlan plan;
  // kReduce: the output's codec is the one the map parts' shards share
  // (plain when they differ or are ArrayRecord files), not options.codec:
  // neither the format nor the compression was given.
  bool codec_from_map = false;
  // Cancellation, progress (records and framed bytes as they are read;
  // output_done as each shard is written whole) and the test hook, for the
  // pass (step 5, or the map of step 2).
  Control control;
  // Called right before the pass begins (the shards opened) and right after
  // it ends (whether it succeeded or not; before the delivery): where a
  // progress bar starts and stops drawing.
  std::function<void()> on_pass_begin, on_pass_end;
};

// TFDS's dataset_info.json beside one local process's shards
// (repack::WriteReshardedTfdsInfo): where it was written, or why not.
struct TfdsInfoOutcome {
  std::optional<std::string> written;  // the path, when it was
  std::string why_not;                 // when not written and the sources had one: why not
  absl::Status error;                  // reading or writing it failed (the shards are fine)
};

struct ReshardResult {
  ReshardPass pass = ReshardPass::kWhole;
  // kWhole, kReduce: the shards written, at their delivered paths (a local
  // file, an object's URL, or a part's published file).
  ReshardReport report;
  // kMap: the part's runs and bucket totals, and the bucket count.
  MapReport map;
  uint32_t buckets = 0;
  // kWhole without a part into a local folder: TFDS's metadata.
  std::optional<TfdsInfoOutcome> tfds_info;
};

// Runs the job (above, from step 1's folder made). Errors: the failing
// step's (I/O, the store's,
// FailedPrecondition for a reduce whose map parts are not all there,
// AlreadyExists for an output name taken), with FailedIn saying which.
absl::StatusOr<ReshardResult> RunReshard(const ReshardJob& job);

// Where RunReshard failed:
enum class ReshardStep {
  // the map pass (kMap's ShuffleMapPart): nothing of it was published
  kMap,
  // the pass over the records (step 5, with opening the shards for it):
  // nothing was left under a final name
  kPass,
  // any other step: opening the output, finding the map parts, a part's
  // work folder, opening the shards for a map, publishing, putting into the
  // bucket
  kOther,
};
ReshardStep FailedIn(const absl::Status& status);

}  // namespace tfrecordfs::reshape

#endif  // TFRECORDFS_RESHAPE_RESHARD_RUN_H_
