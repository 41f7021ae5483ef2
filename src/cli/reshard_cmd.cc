// `tfrecordfs reshard SOURCE... --output DIR`: every record of the SOURCEs
// into N new shards, in source order or shuffled (reshape::Reshard).
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/cli/commands.h"
#include "src/cli/progress.h"
#include "src/cli/reports.h"
#include "src/cli/reshape_cli.h"
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
  if (!report.ok()) {
    if (absl::IsCancelled(report.status()) || interrupted->load()) {
      log::Error("interrupted: ", report.status().message());
      return kExitInterrupted;
    }
    log::Error("reshard --pass map failed: ", report.status().message());
    return kExitFailed;
  }
  if (bucket != nullptr) {
    const std::string dir =
        reshape::PublishedPartDir(output, tool->plan().IdHex(), tool->part()->index, "map");
    if (auto s = bucket->UploadPart(dir); !s.ok()) return tool->Fail(s);
  }
  return tool->Finish(MapPassReport(*report, tool->shards().size(), shuffle.buckets, *tool->part()),
                      report->skipped.empty());
}

}  // namespace

int ReshardMain(int argc, char** argv) {
  Tool tool({.name = "reshard",
             .usage = kReshardUsage,
             .usage_end = kReshardUsageEnd,
             .usage_column = 23,
             .indexes = true,
             .parts = true,
             .finalize = true});
  std::string output;
  reshape::ReshardOptions options;
  bool seeded = false, codec_given = false;
  std::string pass;  // --pass: a shuffle's as parts
  std::string format, compression, group_size;
  auto own = [&](int* i) -> std::optional<int> {
    const std::string arg = argv[*i];
    if (arg == "--shuffle") {
      options.shuffle = true;
      return kExitOk;
    }
    if (arg == "--skip-damaged") {
      options.skip_damaged = true;
      return kExitOk;
    }
    std::string flag, value;
    const std::string name = arg.substr(0, arg.find('='));
    if (name != "-o" && name != "--output" && name != "--shards" && name != "--shard-size" &&
        name != "--prefix" && name != "--compression" && name != "--seed" && name != "--buffer" &&
        name != "--memory" && name != "--pass" && name != "--format" && name != "--group-size") {
      return std::nullopt;
    }
    if (!TakeValue(argc, argv, i, &flag, &value)) return tool.Usage(flag + " needs a value");
    if (flag == "-o" || flag == "--output") {
      if (value.empty()) return tool.Usage("--output needs a directory");
      output = value;
    } else if (flag == "--shards") {
      if (!absl::SimpleAtoi(value, &options.shards) || options.shards == 0 ||
          options.shards > 99999) {
        return tool.Usage(
            absl::StrCat("--shards needs a number from 1 to 99999, not '", value, "'"));
      }
    } else if (flag == "--pass") {
      if (value != "map" && value != "reduce") {
        return tool.Usage(absl::StrCat("--pass needs map or reduce, not '", value, "'"));
      }
      pass = value;
    } else if (flag == "--memory") {
      auto size = ParseSize(value);
      if (!size.ok()) return tool.Usage(absl::StrCat(flag, ": ", size.status().message()));
      if (*size < reshape::kMinShuffleMemory) return tool.Usage("--memory needs at least 1M");
      options.memory = *size;
    } else if (flag == "--shard-size" || flag == "--buffer") {
      auto size = ParseSize(value);
      if (!size.ok()) return tool.Usage(absl::StrCat(flag, ": ", size.status().message()));
      (flag == "--buffer" ? options.buffer_bytes : options.shard_size) = *size;
    } else if (flag == "--prefix") {
      if (auto s = repack::ValidatePrefix(value); !s.ok()) return tool.Usage(s.message());
      options.prefix = value;
    } else if (flag == "--compression") {
      compression = value;  // read once --format is known
      codec_given = true;
    } else if (flag == "--format") {
      if (value != "tfrecord" && value != "arrayrecord") {
        return tool.Usage(
            absl::StrCat("--format needs tfrecord or arrayrecord, not '", value, "'"));
      }
      format = value;
    } else if (flag == "--group-size") {
      if (!absl::SimpleAtoi(value, &options.array_record.group_size) ||
          options.array_record.group_size == 0 || options.array_record.group_size > INT32_MAX) {
        return tool.Usage(
            absl::StrCat("--group-size needs a number from 1 to 2147483647, not '", value, "'"));
      }
      group_size = value;
    } else if (flag == "--seed") {
      if (!absl::SimpleAtoi(value, &options.seed)) {
        return tool.Usage(
            absl::StrCat("--seed needs an unsigned 64-bit number, not '", value, "'"));
      }
      seeded = true;
    }
    return kExitOk;
  };
  if (auto stop = tool.Parse(argc, argv, own)) return *stop;
  if (auto stop = tool.NeedSources()) return *stop;
  if (output.empty()) return tool.Usage("need --output DIR");
  if (options.shards > 0 && options.shard_size > 0) {
    return tool.Usage("--shards and --shard-size exclude each other");
  }
  if (seeded && !options.shuffle) return tool.Usage("--seed needs --shuffle");
  if (options.shuffle && !seeded && (tool.part() || tool.finalize())) {
    return tool.Usage("--shuffle as parts needs --seed S (every part must shuffle alike)");
  }
  if (options.shards == 0 && options.shard_size == 0)
    options.shard_size = repack::kDefaultShardSize;
  // What shapes the output: part of the plan's id, so that parts of
  // another reshard are foreign to this one.
  tool.SetPlanSalt(absl::StrCat(
      "prefix=", options.prefix, " shards=", options.shards, " shard_size=", options.shard_size,
      " compression=", codec_given ? compression : "auto",
      " format=", format.empty() ? "auto" : format,
      " group_size=", group_size.empty() ? "auto" : group_size, " shuffle=", options.shuffle,
      " seed=", options.shuffle ? options.seed : 0, " skip_damaged=", options.skip_damaged));
  // A shuffle's map pass may take a piece of a large shard (the records
  // that begin in it): the same plan for its reduce pass and --finalize.
  tool.SetSplitFiles(options.shuffle);
  if (tool.finalize()) return FinalizeMain(&tool, output, "reshard");
  if (!pass.empty() && !(options.shuffle && tool.part())) {
    return tool.Usage("--pass is for a shuffle run as parts (--shuffle with --part K/N)");
  }
  if (options.shuffle && tool.part() && pass.empty()) {
    return tool.Usage(
        "a shuffle as parts runs in two passes: every part with --pass map, then every part "
        "with --pass reduce, then --finalize");
  }
  // An in-order part reads every shard's index (the whole reshard's
  // boundaries); a shuffle's map pass its own shards; its reduce pass the
  // map passes' runs only.
  tool.SetPartScope(pass == "map"      ? PartScope::kOwnFiles
                    : pass == "reduce" ? PartScope::kListOnly
                                       : PartScope::kAllFiles);
  options.part = tool.part();
  if (options.shuffle && !seeded) {
    std::random_device rd;
    options.seed = (uint64_t{rd()} << 32) | rd();
  }
  const std::atomic<bool>* interrupted = InstallInterruptHandlers();

  if (auto stop = tool.Scan()) return *stop;
  const std::vector<scan::ScannedShard>& shards = tool.shards();
  if (auto s = CheckOutputDir(output, tool.operands(), shards); !s.ok()) {
    return tool.Usage(s.message());
  }
  // A bucket prefix: the work is done in a local scratch folder, whose
  // results go into the bucket (reshape/bucket_parts.h).
  std::unique_ptr<reshape::BucketParts> bucket;
  std::optional<reshape::ScratchDir> scratch;
  const std::string bucket_output = reshape::IsBucketOutput(output) ? output : "";
  if (!bucket_output.empty()) {
    auto opened = reshape::BucketParts::Open(output);
    if (!opened.ok()) return tool.Fail(opened.status());
    bucket = *std::move(opened);
    auto made = reshape::ScratchDir::Make("reshard");
    if (!made.ok()) return tool.Fail(made.status());
    scratch.emplace(*std::move(made));
    output = scratch->path();
  }
  if (format.empty()) {
    format = shards.empty() ? "tfrecord" : "arrayrecord";
    for (const scan::ScannedShard& s : shards) {
      if (s.codec != source::Codec::kArrayRecord) format = "tfrecord";
    }
  }
  if (format == "arrayrecord") {
    options.codec = source::Codec::kArrayRecord;
    options.array_record.compression = arrayrecord::Compression::kZstd;
    options.array_record.level = 3;
    if (group_size.empty()) options.array_record.group_size = 1;
    if (codec_given) {
      if (auto s = arrayrecord::ParseCompression(compression, &options.array_record); !s.ok()) {
        return tool.Usage(absl::StrCat("--compression: ", s.message()));
      }
    }
  } else if (!group_size.empty()) {
    return tool.Usage("--group-size needs --format arrayrecord");
  } else if (codec_given) {
    auto codec = CompressionFlag(compression);
    if (!codec.ok()) return tool.Usage(codec.status().message());
    options.codec = *codec;
  } else if (!shards.empty()) {
    options.codec = shards.front().codec;
    for (const scan::ScannedShard& s : shards) {
      if (s.codec != options.codec || s.codec == source::Codec::kArrayRecord) {
        options.codec = source::Codec::kNone;
      }
    }
  }
  if (auto made = MakeDirs(output, 0755); !made.ok()) return tool.Fail(made);
  options.output_dir = output;
  uint64_t input_bytes = 0;  // the plan's (every part's) measure of the SOURCEs
  for (const PlanInputFile& f : tool.plan_files()) input_bytes += f.size;
  const reshape::ShuffleOptions shuffle{options.seed,
                                        reshape::ShuffleBuckets(input_bytes, options.memory),
                                        options.memory, options.skip_damaged};
  if (pass == "map") return MapPass(&tool, output, shuffle, interrupted, bucket.get());
  // A part writes into a work folder of its own, published whole at the end.
  std::unique_ptr<reshape::PartOutput> part_out;
  reshape::PartManifest manifest;
  std::vector<std::string> map_dirs;
  if (pass == "reduce") {
    // The first pass of every part must be there; the inputs they read are
    // this part's inputs (--finalize checks them).
    if (bucket) {
      auto fetched =
          bucket->FetchMapParts(tool.plan().IdHex(), tool.part()->count, output,
                                [&](const std::vector<std::string>& totals) {
                                  return reshape::ReduceBuckets(totals, shuffle.buckets, options);
                                });
      if (!fetched.ok()) return tool.Fail(fetched);
    }
    auto mapped = reshape::FindMapParts(output, tool.plan().IdHex(), tool.part()->count);
    if (!mapped.ok()) return tool.Fail(mapped.status());
    map_dirs = std::move(mapped->dirs);
    manifest = NewManifest(tool, "reshard");
    manifest.inputs = std::move(mapped->inputs);
    // The sources' codec, as the map passes found it (this pass scans
    // none), unless --format or --compression said.
    if (!codec_given && format == "tfrecord") {
      options.codec = mapped->codec.value_or(source::Codec::kNone);
      if (options.codec == source::Codec::kArrayRecord) options.codec = source::Codec::kNone;
    }
  }
  if (tool.part()) {
    auto begun = reshape::PartOutput::Begin(output, tool.plan().IdHex(), tool.part()->index);
    if (!begun.ok()) return tool.Fail(begun.status());
    part_out = *std::move(begun);
    options.output_dir = part_out->work_dir();
  }

  // Compressed sources read at random positions keep recently inflated
  // blocks; the buffer option bounds that too.
  source::BlockCache cache(options.buffer_bytes);
  std::vector<std::unique_ptr<source::ShardSource>> sources;
  std::vector<reshape::Input> inputs;
  uint64_t total_bytes = 0;
  for (const scan::ScannedShard& s : shards) {
    auto src = scan::OpenShard(s, &cache);
    if (!src.ok()) return tool.Fail(src.status());
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
  auto report = pass == "reduce" ? reshape::ShuffleReduce(map_dirs, shuffle, options, control)
                                 : reshape::Reshard(inputs, options, control);
  progress.Finish();
  if (!report.ok()) {
    if (absl::IsCancelled(report.status()) || interrupted->load()) {
      log::Error("interrupted: ", report.status().message(),
                 "; nothing was left under a final name");
      return kExitInterrupted;
    }
    log::Error("reshard failed: ", report.status().message(), "; nothing was written");
    return kExitFailed;
  }

  if (part_out) {
    if (pass != "reduce") manifest = NewManifest(tool, "reshard");
    for (reshape::OutputShard& s : report->shards) {
      s.path = Basename(s.path);
      manifest.outputs.push_back(
          {s.path, s.records, s.bytes, s.file_bytes, s.crc32c.value_or(0), s.crc32c.has_value()});
      s.path = JoinPath(part_out->published_dir(), s.path);
    }
    if (auto st = part_out->Publish(std::move(manifest)); !st.ok()) return tool.Fail(st);
    if (bucket) {
      if (auto st = bucket->UploadPart(part_out->published_dir()); !st.ok()) return tool.Fail(st);
      for (reshape::OutputShard& s : report->shards) {
        s.path = bucket->ObjectName(
            JoinPath(JoinPath(reshape::kPartsDirName, Basename(part_out->published_dir())),
                     Basename(s.path)));
      }
    }
  } else if (bucket) {
    // One process: each shard put under its final name, never over one.
    for (reshape::OutputShard& s : report->shards) {
      if (auto st = bucket->UploadNew(s.path, Basename(s.path)); !st.ok()) return tool.Fail(st);
      s.path = bucket->ObjectName(Basename(s.path));
    }
  }
  if (!part_out && !bucket) {
    // TFDS's metadata for the new shards (repack/tfds_info.h).
    std::vector<std::string> sources;
    for (const scan::ScannedShard& s : shards) sources.push_back(s.index->path());
    std::vector<repack::TfdsOutput> outs;
    for (const reshape::OutputShard& s : report->shards)
      outs.push_back({s.path, s.records, s.bytes});
    std::string why;
    auto info = repack::WriteReshardedTfdsInfo(sources, outs, report->skipped.empty(), &why);
    if (!info.ok()) {
      log::Warning("dataset_info.json not written: ", info.status().message());
    } else if (*info) {
      log::Info("wrote ", **info, " (fileFormat, shardLengths and numBytes of the new shards)");
    } else if (!why.empty()) {
      log::Info("dataset_info.json not written: ", why);
    }
  }
  return tool.Finish(ReshardReport(*report, shards, options, tool.json()), report->skipped.empty());
}

}  // namespace tfrecordfs::cli
