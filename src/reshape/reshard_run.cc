// RunReshard (reshard_run.h): the output, the pass, the delivery.
#include "tfrecordfs/reshape/reshard_run.h"

#include <memory>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/hash.h"
#include "tfrecordfs/repack/tfds_info.h"
#include "tfrecordfs/reshape/bucket_parts.h"
#include "tfrecordfs/source/block_cache.h"

namespace tfrecordfs::reshape {
namespace {

// The step a failure came from (FailedIn): "map" or "pass"; none for the
// other steps.
constexpr absl::string_view kStepPayload = "tfrecordfs/reshard-step";

absl::Status In(absl::string_view step, absl::Status status) {
  status.SetPayload(kStepPayload, absl::Cord(step));
  return status;
}

// The manifest of the job's part, its inputs the listed files it read.
PartManifest NewManifest(const ReshardJob& job) {
  absl::flat_hash_set<std::string> read;
  for (const scan::ScannedShard& s : *job.shards) read.insert(s.path);
  return NewPartManifest("reshard", job.plan, *job.options.part, job.listing,
                         [&](const std::string& path) { return read.contains(path); });
}

void PassBegins(const ReshardJob& job) {
  if (job.on_pass_begin) job.on_pass_begin();
}
void PassEnds(const ReshardJob& job) {
  if (job.on_pass_end) job.on_pass_end();
}

// A shuffle's first pass as a part: its pieces of the shards into sorted
// runs, published (and put into the bucket) for the reduce.
absl::StatusOr<ReshardResult> MapPass(const ReshardJob& job, const ReshardOutput& out,
                                      const ShuffleOptions& shuffle) {
  const PartSpec part = *job.options.part;
  source::BlockCache cache(32 << 20);
  std::vector<std::unique_ptr<source::ShardSource>> sources;
  std::vector<MapInput> inputs;
  for (const scan::ScannedShard& s : *job.shards) {
    auto src = scan::OpenShard(s, &cache);
    if (!src.ok()) return src.status();
    sources.push_back(std::move(*src));
    // The part's pieces of the shard: the records that begin in them.
    for (const Piece& piece : PiecesOf(job.plan, part.index, job.listing, s.path)) {
      const auto [first, last] = PieceRecords(*s.index, piece);
      inputs.push_back({s.index.get(), sources.back().get(), Fnv1a64(s.mount_path), first, last});
    }
  }
  Control control = job.control;
  control.output_done = nullptr;  // the map writes runs, not shards
  PassBegins(job);
  auto map = ShuffleMapPart(inputs, out.dir, NewManifest(job), shuffle, control);
  PassEnds(job);
  if (!map.ok()) return In("map", map.status());
  if (out.bucket != nullptr) {
    const std::string dir = PublishedPartDir(out.dir, job.plan.IdHex(), part.index, "map");
    if (auto s = out.bucket->UploadPart(dir); !s.ok()) return s;
  }
  ReshardResult result;
  result.pass = ReshardPass::kMap;
  result.map = *std::move(map);
  result.buckets = shuffle.buckets;
  return result;
}

// A shuffle's second pass as a part: the map passes' folders of every part
// (fetched from the bucket first), and the manifest's inputs they read;
// the sources' codec as the map passes found it (this pass scans none),
// unless the job says otherwise.
absl::StatusOr<std::vector<std::string>> FindMapRuns(const ReshardJob& job,
                                                     const ReshardOutput& out,
                                                     const ShuffleOptions& shuffle,
                                                     ReshardOptions* options,
                                                     PartManifest* manifest) {
  const std::string plan = job.plan.IdHex();
  const uint32_t parts = job.options.part->count;
  if (out.bucket != nullptr) {
    auto fetched = out.bucket->FetchMapParts(
        plan, parts, out.dir, [&](const std::vector<std::string>& totals) {
          return ReduceBuckets(totals, shuffle.buckets, *options);
        });
    if (!fetched.ok()) return fetched;
  }
  auto mapped = FindMapParts(out.dir, plan, parts);
  if (!mapped.ok()) return mapped.status();
  *manifest = NewManifest(job);
  manifest->inputs = std::move(mapped->inputs);
  if (job.codec_from_map) {
    options->codec = mapped->codec.value_or(source::Codec::kNone);
    if (options->codec == source::Codec::kArrayRecord) options->codec = source::Codec::kNone;
  }
  return std::move(mapped->dirs);
}

// The reshard proper over the job's shards (Reshard), or a shuffle's
// reduce pass over `map_dirs`.
absl::StatusOr<ReshardReport> Pass(const ReshardJob& job, const ReshardOptions& options,
                                   const ShuffleOptions& shuffle,
                                   const std::vector<std::string>* map_dirs) {
  // Compressed sources read at random positions keep recently inflated
  // blocks; the buffer option bounds that too.
  source::BlockCache cache(options.buffer_bytes);
  std::vector<std::unique_ptr<source::ShardSource>> sources;
  std::vector<Input> inputs;
  for (const scan::ScannedShard& s : *job.shards) {
    auto src = scan::OpenShard(s, &cache);
    if (!src.ok()) return src.status();
    sources.push_back(std::move(*src));
    inputs.push_back({s.index.get(), sources.back().get(), s.mount_path});
  }
  PassBegins(job);
  auto report = map_dirs != nullptr ? ShuffleReduce(*map_dirs, shuffle, options, job.control)
                                    : Reshard(inputs, options, job.control);
  PassEnds(job);
  return report;
}

// A part's shards: published whole from its work folder (and put into the
// bucket), the report's paths then naming them there.
absl::Status PublishPart(PartOutput* part_out, PartManifest manifest, const BucketParts* bucket,
                         ReshardReport* report) {
  for (OutputShard& s : report->shards) {
    s.path = Basename(s.path);
    manifest.outputs.push_back(
        {s.path, s.records, s.bytes, s.file_bytes, s.crc32c.value_or(0), s.crc32c.has_value()});
    s.path = JoinPath(part_out->published_dir(), s.path);
  }
  if (auto st = part_out->Publish(std::move(manifest)); !st.ok()) return st;
  if (bucket != nullptr) {
    if (auto st = bucket->UploadPart(part_out->published_dir()); !st.ok()) return st;
    for (OutputShard& s : report->shards) {
      s.path = bucket->ObjectName(
          JoinPath(JoinPath(kPartsDirName, Basename(part_out->published_dir())), Basename(s.path)));
    }
  }
  return absl::OkStatus();
}

// TFDS's metadata for the new shards of one local process
// (repack/tfds_info.h); never an error.
TfdsInfoOutcome WriteTfdsInfo(const std::vector<scan::ScannedShard>& shards,
                              const ReshardReport& report) {
  std::vector<std::string> sources;
  for (const scan::ScannedShard& s : shards) sources.push_back(s.index->path());
  std::vector<repack::TfdsOutput> outs;
  for (const OutputShard& s : report.shards) outs.push_back({s.path, s.records, s.bytes});
  TfdsInfoOutcome outcome;
  auto info =
      repack::WriteReshardedTfdsInfo(sources, outs, report.skipped.empty(), &outcome.why_not);
  if (!info.ok()) {
    outcome.error = info.status();
    outcome.why_not.clear();
  } else if (*info) {
    outcome.written = **info;
    outcome.why_not.clear();
  }
  return outcome;
}

}  // namespace

absl::StatusOr<ReshardOutput> OpenReshardOutput(const std::string& output) {
  ReshardOutput out;
  out.dir = output;
  if (IsBucketOutput(output)) {
    auto bucket = BucketParts::Open(output);
    if (!bucket.ok()) return bucket.status();
    out.bucket = *std::move(bucket);
    auto made = ScratchDir::Make("reshard");
    if (!made.ok()) return made.status();
    out.scratch.emplace(*std::move(made));
    out.dir = out.scratch->path();
  }
  return out;
}

absl::StatusOr<ReshardResult> RunReshard(const ReshardJob& job) {
  const ReshardOutput* out = job.output;
  if (auto made = MakeDirs(out->dir, 0755); !made.ok()) return made;
  ReshardOptions options = job.options;
  options.output_dir = out->dir;
  uint64_t input_bytes = 0;  // the plan's (every part's) measure of the SOURCEs
  for (const ManifestInput& f : job.listing) input_bytes += f.size;
  const ShuffleOptions shuffle{options.seed, ShuffleBuckets(input_bytes, options.memory),
                               options.memory, options.skip_damaged};
  if (job.pass == ReshardPass::kMap) return MapPass(job, *out, shuffle);

  std::optional<PartManifest> manifest;  // the reduce pass's, from the map passes
  std::vector<std::string> map_dirs;
  if (job.pass == ReshardPass::kReduce) {
    // The first pass of every part must be there; the inputs they read are
    // this part's inputs (--finalize checks them).
    auto runs = FindMapRuns(job, *out, shuffle, &options, &manifest.emplace());
    if (!runs.ok()) return runs.status();
    map_dirs = *std::move(runs);
  }
  // A part writes into a work folder of its own, published whole at the end.
  std::unique_ptr<PartOutput> part_out;
  if (options.part) {
    auto begun = PartOutput::Begin(out->dir, job.plan.IdHex(), options.part->index);
    if (!begun.ok()) return begun.status();
    part_out = *std::move(begun);
    options.output_dir = part_out->work_dir();
  }
  auto report = Pass(job, options, shuffle, job.pass == ReshardPass::kReduce ? &map_dirs : nullptr);
  if (!report.ok()) return In("pass", report.status());

  ReshardResult result;
  result.pass = job.pass;
  result.report = *std::move(report);
  if (part_out != nullptr) {
    // A part's shards are published (and put into the bucket).
    if (auto st = PublishPart(part_out.get(), manifest ? *std::move(manifest) : NewManifest(job),
                              out->bucket.get(), &result.report);
        !st.ok()) {
      return st;
    }
  } else if (out->bucket != nullptr) {
    // One process's are put into the bucket under their final names (never
    // over one).
    for (OutputShard& s : result.report.shards) {
      if (auto st = out->bucket->UploadNew(s.path, Basename(s.path)); !st.ok()) return st;
      s.path = out->bucket->ObjectName(Basename(s.path));
    }
  } else {
    result.tfds_info = WriteTfdsInfo(*job.shards, result.report);
  }
  return result;
}

ReshardStep FailedIn(const absl::Status& status) {
  const auto step = status.GetPayload(kStepPayload);
  if (!step) return ReshardStep::kOther;
  return *step == "map" ? ReshardStep::kMap : ReshardStep::kPass;
}

}  // namespace tfrecordfs::reshape
