// `tfrecordfs reshard SOURCE... --output DIR`: every record of the SOURCEs
// into N new shards, in source order or shuffled (reshape::Reshard).
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/cli/commands.h"
#include "src/cli/progress.h"
#include "src/cli/reports.h"
#include "src/cli/reshape_cli.h"
#include "src/cli/reshard_flags.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/hash.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/base/utf8.h"
#include "tfrecordfs/repack/pack.h"
#include "tfrecordfs/repack/tfds_info.h"
#include "tfrecordfs/reshape/bucket_parts.h"
#include "tfrecordfs/reshape/parts.h"
#include "tfrecordfs/reshape/reshape.h"
#include "tfrecordfs/reshape/shuffle.h"

namespace tfrecordfs::cli {
namespace {

constexpr char kReshardUsage[] = R"(Usage: tfrecordfs reshard [options] SOURCE... --output DIR

Writes every record of the shards in the SOURCEs (shard files, or
directories searched recursively, exactly as a mount would; plain, GZIP,
ZLIB and SNAPPY shards and ARRAYRECORD files, taken in that order) into new
shards DIR/NAME-00000-of-0000N.tfrecord[.gz|.zlib] or ArrayRecord files
(--format): merging many shards, splitting one and converting between
TFRecord and ArrayRecord are the same command. Payloads are copied byte for byte, in
source order, or with --shuffle in a uniformly random global order that
depends only on the seed and the sources.

A shuffled reshard sorts the records by a key drawn from the seed, the
shard's path in the SOURCE and the record's number, in two passes: each
record is read in file order and written, sorted, into runs of half the
--memory budget in a work folder under DIR; then the runs are read back a
bucket of keys at a time and the records written in key order. Memory stays
within --memory whatever the dataset's size; each record is read twice and
written twice. The order depends only on the seed and the sources: the same
bytes come out of one process and of any number of parts (--part).

Every output file is written under a temporary name (.NAME.tmp); all are
renamed together once every one is complete. As parts (--part K/N), each
part writes its run of the output shards (the ones one process would
write, byte for byte) under DIR/.tfrecordfs-parts; --finalize names them. Ctrl-C, an error or a damaged
record leaves nothing under a final name, and no file is ever replaced.

Options:
  -o, --output DIR     where the new shards go (created if needed; outside
                       every SOURCE; required); or a bucket prefix
                       s3://BUCKET/PREFIX/ or gs://...: the shards are
                       written in a scratch folder under TMPDIR, then
                       each put as one object (never over one)
  --shards N           exactly N shards, the records split as evenly as
                       possible (earlier shards take the remainder)
  --shard-size SIZE    shards of at most SIZE framed (uncompressed) bytes,
                       at least one record each; K, M, G, T suffixes are
                       binary multiples (the default: 128M); with --shuffle,
                       ceil(total / SIZE) shards of equal bytes (a shard
                       may pass SIZE by less than one record)
  --prefix NAME        shard name prefix (default: data)
  --format F           tfrecord or arrayrecord (NAME.array_record-00000-of-
                       0000N, as TFDS names them); default: arrayrecord when
                       every source is an ArrayRecord file, else tfrecord
  --compression C      TFRecord: none, gzip (.tfrecord.gz) or zlib
                       (.tfrecord.zlib); default: the sources' when every
                       shard has the same, else none. ArrayRecord: none,
                       brotli, zstd or snappy, with an optional level as the
                       reference writer spells it (brotli:6, zstd:3);
                       default zstd:3
  --group-size N       ArrayRecord: records per chunk (default 1: each record
                       read alone, as TFDS writes them for Grain)
  --shuffle            a uniformly random global order
  --seed S             the shuffle's seed (an unsigned 64-bit number; default:
                       a random one, printed in the summary)
  --skip-damaged       leave damaged records out (listed) instead of stopping
  --buffer SIZE        in source order: the cache of compressed sources'
                       inflated blocks (default 64M)
  --memory SIZE        --shuffle: the memory budget (default 512M, at least
                       1M); the same for every part of a shuffle
  --pass map|reduce    --shuffle as parts: the first pass (every part),
                       then the second (every part), then --finalize
  --json               a JSON summary instead: {"shards": [{"path": ...,
                       "records": N, "bytes": B, "file_bytes": F}],
                       "records": N, "seed": S | null, "skipped": [...]}
)";
constexpr char kReshardUsageEnd[] = R"(
Exit status: 0 when every record was written, 1 when a damaged record was
skipped or the reshard failed (a damaged record without --skip-damaged),
2 on a usage error, 130 when interrupted.
)";

// The output a bucket prefix names: the work is done in a local scratch
// folder (`scratch`, which `*output` then names), whose results go into the
// bucket (reshape/bucket_parts.h). Null for a local --output.
absl::StatusOr<std::unique_ptr<reshape::BucketParts>> OpenBucketOutput(
    std::string* output, std::optional<reshape::ScratchDir>* scratch) {
  if (!reshape::IsBucketOutput(*output)) return nullptr;
  auto bucket = reshape::BucketParts::Open(*output);
  if (!bucket.ok()) return bucket.status();
  auto made = reshape::ScratchDir::Make("reshard");
  if (!made.ok()) return made.status();
  scratch->emplace(*std::move(made));
  *output = (*scratch)->path();
  return bucket;
}

// How a failed pass ends: 130 when interrupted, else 1, after saying so.
int PassFailed(const absl::Status& status, const std::atomic<bool>* interrupted,
               absl::string_view what, absl::string_view interrupted_note,
               absl::string_view failed_note) {
  if (absl::IsCancelled(status) || interrupted->load()) {
    log::Error("interrupted: ", status.message(), interrupted_note);
    return kExitInterrupted;
  }
  log::Error(what, " failed: ", status.message(), failed_note);
  return kExitFailed;
}

// A shuffle's first pass as a part (--pass map): its pieces of the shards
// into sorted runs, published (and put into the bucket) for the reduce.
int MapPass(Tool* tool, const std::string& output, const reshape::ShuffleOptions& shuffle,
            const std::atomic<bool>* interrupted, const reshape::BucketParts* bucket) {
  source::BlockCache cache(32 << 20);
  std::vector<std::unique_ptr<source::ShardSource>> sources;
  std::vector<reshape::MapInput> inputs;
  uint64_t total_bytes = 0;
  for (const scan::ScannedShard& s : tool->shards()) {
    auto src = scan::OpenShard(s, &cache);
    if (!src.ok()) return tool->Fail(src.status());
    sources.push_back(std::move(*src));
    // The part's pieces of the shard: the records that begin in them.
    for (const reshape::Piece& piece : tool->PiecesOf(s.path)) {
      const auto [first, last] = reshape::PieceRecords(*s.index, piece);
      inputs.push_back({s.index.get(), sources.back().get(), Fnv1a64(s.mount_path), first, last});
    }
    total_bytes += s.index->data_size();
  }
  ProgressBar progress = tool->Progress(total_bytes);
  reshape::Control control;
  control.cancel = interrupted;
  control.progress = [&](uint64_t n, uint64_t bytes) { progress.Add(0, n, bytes); };
  control.mid_output = PauseHook();
  auto report =
      reshape::ShuffleMapPart(inputs, output, NewManifest(*tool, "reshard"), shuffle, control);
  progress.Finish();
  if (!report.ok()) return PassFailed(report.status(), interrupted, "reshard --pass map", "", "");
  if (bucket != nullptr) {
    const std::string dir =
        reshape::PublishedPartDir(output, tool->plan().IdHex(), tool->part()->index, "map");
    if (auto s = bucket->UploadPart(dir); !s.ok()) return tool->Fail(s);
  }
  return tool->Finish(MapPassReport(*report, tool->shards().size(), shuffle.buckets, *tool->part()),
                      report->skipped.empty());
}

// A shuffle's second pass as a part (--pass reduce): the map passes' runs
// of every part (fetched from the bucket first), and the manifest's inputs
// they read; the sources' codec as the map passes found it (this pass scans
// none), unless --format or --compression said.
absl::StatusOr<std::vector<std::string>> FindMapRuns(const Tool& tool, const std::string& output,
                                                     const reshape::ShuffleOptions& shuffle,
                                                     ReshardFlags* flags,
                                                     reshape::BucketParts* bucket,
                                                     reshape::PartManifest* manifest) {
  reshape::ReshardOptions& options = flags->options;
  if (bucket) {
    auto fetched =
        bucket->FetchMapParts(tool.plan().IdHex(), tool.part()->count, output,
                              [&](const std::vector<std::string>& totals) {
                                return reshape::ReduceBuckets(totals, shuffle.buckets, options);
                              });
    if (!fetched.ok()) return fetched;
  }
  auto mapped = reshape::FindMapParts(output, tool.plan().IdHex(), tool.part()->count);
  if (!mapped.ok()) return mapped.status();
  *manifest = NewManifest(tool, "reshard");
  manifest->inputs = std::move(mapped->inputs);
  if (!flags->codec_given && flags->format == "tfrecord") {
    options.codec = mapped->codec.value_or(source::Codec::kNone);
    if (options.codec == source::Codec::kArrayRecord) options.codec = source::Codec::kNone;
  }
  return std::move(mapped->dirs);
}

// Reshards `shards` in source order or shuffled in one process
// (reshape::Reshard), or runs a shuffle's reduce pass over `map_dirs`, with
// a progress bar.
absl::StatusOr<reshape::ReshardReport> RunReshard(const Tool& tool,
                                                  const reshape::ReshardOptions& options,
                                                  const reshape::ShuffleOptions& shuffle,
                                                  const std::vector<std::string>* map_dirs,
                                                  const std::atomic<bool>* interrupted) {
  // Compressed sources read at random positions keep recently inflated
  // blocks; the buffer option bounds that too.
  source::BlockCache cache(options.buffer_bytes);
  std::vector<std::unique_ptr<source::ShardSource>> sources;
  std::vector<reshape::Input> inputs;
  uint64_t total_bytes = 0;
  for (const scan::ScannedShard& s : tool.shards()) {
    auto src = scan::OpenShard(s, &cache);
    if (!src.ok()) return src.status();
    sources.push_back(std::move(*src));
    inputs.push_back({s.index.get(), sources.back().get(), s.mount_path});
    total_bytes += s.index->data_size();
  }
  ProgressBar progress = tool.Progress(total_bytes);
  reshape::Control control;
  control.cancel = interrupted;
  control.progress = [&](uint64_t n, uint64_t bytes) { progress.Add(0, n, bytes); };
  control.output_done = [&] { progress.Add(1, 0, 0); };  // the bar's shards: those written
  control.mid_output = PauseHook();
  auto report = map_dirs != nullptr ? reshape::ShuffleReduce(*map_dirs, shuffle, options, control)
                                    : reshape::Reshard(inputs, options, control);
  progress.Finish();
  return report;
}

// A part's shards: published whole from its work folder (and put into the
// bucket), the report's paths then naming them there.
absl::Status PublishPart(reshape::PartOutput* part_out, reshape::PartManifest manifest,
                         reshape::BucketParts* bucket, reshape::ReshardReport* report) {
  for (reshape::OutputShard& s : report->shards) {
    s.path = Basename(s.path);
    manifest.outputs.push_back(
        {s.path, s.records, s.bytes, s.file_bytes, s.crc32c.value_or(0), s.crc32c.has_value()});
    s.path = JoinPath(part_out->published_dir(), s.path);
  }
  if (auto st = part_out->Publish(std::move(manifest)); !st.ok()) return st;
  if (bucket) {
    if (auto st = bucket->UploadPart(part_out->published_dir()); !st.ok()) return st;
    for (reshape::OutputShard& s : report->shards) {
      s.path = bucket->ObjectName(JoinPath(
          JoinPath(reshape::kPartsDirName, Basename(part_out->published_dir())), Basename(s.path)));
    }
  }
  return absl::OkStatus();
}

// TFDS's metadata for the new shards of one local process
// (repack/tfds_info.h); said on stderr, never an error.
void WriteTfdsInfo(const std::vector<scan::ScannedShard>& shards,
                   const reshape::ReshardReport& report) {
  std::vector<std::string> sources;
  for (const scan::ScannedShard& s : shards) sources.push_back(s.index->path());
  std::vector<repack::TfdsOutput> outs;
  for (const reshape::OutputShard& s : report.shards) outs.push_back({s.path, s.records, s.bytes});
  std::string why;
  auto info = repack::WriteReshardedTfdsInfo(sources, outs, report.skipped.empty(), &why);
  if (!info.ok()) {
    log::Warning("dataset_info.json not written: ", info.status().message());
  } else if (*info) {
    log::Info("wrote ", **info, " (fileFormat, shardLengths and numBytes of the new shards)");
  } else if (!why.empty()) {
    log::Info("dataset_info.json not written: ", why);
  }
}

// Where the new shards go once written, the report's paths then naming
// them there: a part's are published (and put into the bucket) with
// `manifest` (a new one when none), one process's put into the bucket
// under their final names (never over one), or left in the local folder
// with TFDS's metadata beside them.
absl::Status DeliverShards(const Tool& tool, reshape::PartOutput* part_out,
                           std::optional<reshape::PartManifest> manifest,
                           reshape::BucketParts* bucket, reshape::ReshardReport* report) {
  if (part_out != nullptr) {
    return PublishPart(part_out, manifest ? *std::move(manifest) : NewManifest(tool, "reshard"),
                       bucket, report);
  }
  if (bucket != nullptr) {
    for (reshape::OutputShard& s : report->shards) {
      if (auto st = bucket->UploadNew(s.path, Basename(s.path)); !st.ok()) return st;
      s.path = bucket->ObjectName(Basename(s.path));
    }
    return absl::OkStatus();
  }
  WriteTfdsInfo(tool.shards(), *report);
  return absl::OkStatus();
}

}  // namespace

ToolSpec ReshardSpec() {
  return {.name = "reshard",
          .usage = kReshardUsage,
          .usage_end = kReshardUsageEnd,
          .usage_column = 23,
          .indexes = true,
          .parts = true,
          .finalize = true};
}

int ReshardMain(int argc, char** argv) {
  Tool tool(ReshardSpec());
  auto flags = ParseReshard(&tool, argc, argv);
  if (auto stop = tool.Stop(flags.status())) return *stop;
  reshape::ReshardOptions& options = flags->options;
  tool.SetPlanSalt(ReshardPlanSalt(*flags));
  // A shuffle's map pass may take a piece of a large shard (the records
  // that begin in it): the same plan for its reduce pass and --finalize.
  tool.SetSplitFiles(options.shuffle);
  if (tool.finalize()) return FinalizeMain(&tool, flags->output, "reshard");
  const std::string& pass = flags->pass;
  // An in-order part reads every shard's index (the whole reshard's
  // boundaries); a shuffle's map pass its own shards; its reduce pass the
  // map passes' runs only.
  tool.SetPartScope(pass == "map"      ? PartScope::kOwnFiles
                    : pass == "reduce" ? PartScope::kListOnly
                                       : PartScope::kAllFiles);
  if (options.shuffle && !flags->seeded) {
    std::random_device rd;
    options.seed = (uint64_t{rd()} << 32) | rd();
  }
  const std::atomic<bool>* interrupted = InstallInterruptHandlers();

  if (auto stop = tool.Scan()) return *stop;
  std::string output = flags->output;
  if (auto s = CheckOutputDir(output, tool.operands(), tool.shards()); !s.ok()) {
    return tool.Usage(s.message());
  }
  std::optional<reshape::ScratchDir> scratch;
  auto bucket = OpenBucketOutput(&output, &scratch);
  if (!bucket.ok()) return tool.Fail(bucket.status());
  if (auto s = ResolveReshardFormat(tool.shards(), &*flags); !s.ok()) {
    return tool.Usage(s.message());
  }
  if (auto made = MakeDirs(output, 0755); !made.ok()) return tool.Fail(made);
  options.output_dir = output;
  uint64_t input_bytes = 0;  // the plan's (every part's) measure of the SOURCEs
  for (const PlanInputFile& f : tool.plan_files()) input_bytes += f.size;
  const reshape::ShuffleOptions shuffle{options.seed,
                                        reshape::ShuffleBuckets(input_bytes, options.memory),
                                        options.memory, options.skip_damaged};
  if (pass == "map") return MapPass(&tool, output, shuffle, interrupted, bucket->get());

  std::optional<reshape::PartManifest> manifest;  // the reduce pass's, from the map passes
  std::vector<std::string> map_dirs;
  if (pass == "reduce") {
    // The first pass of every part must be there; the inputs they read are
    // this part's inputs (--finalize checks them).
    auto runs = FindMapRuns(tool, output, shuffle, &*flags, bucket->get(), &manifest.emplace());
    if (!runs.ok()) return tool.Fail(runs.status());
    map_dirs = *std::move(runs);
  }
  // A part writes into a work folder of its own, published whole at the end.
  std::unique_ptr<reshape::PartOutput> part_out;
  if (tool.part()) {
    auto begun = reshape::PartOutput::Begin(output, tool.plan().IdHex(), tool.part()->index);
    if (!begun.ok()) return tool.Fail(begun.status());
    part_out = *std::move(begun);
    options.output_dir = part_out->work_dir();
  }
  auto report =
      RunReshard(tool, options, shuffle, pass == "reduce" ? &map_dirs : nullptr, interrupted);
  if (!report.ok()) {
    return PassFailed(report.status(), interrupted, "reshard",
                      "; nothing was left under a final name", "; nothing was written");
  }

  if (auto st = DeliverShards(tool, part_out.get(), std::move(manifest), bucket->get(), &*report);
      !st.ok()) {
    return tool.Fail(st);
  }
  return tool.Finish(ReshardReport(*report, tool.shards(), options, tool.json()),
                     report->skipped.empty());
}

}  // namespace tfrecordfs::cli
