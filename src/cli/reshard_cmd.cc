// `tfrecordfs reshard SOURCE... --output DIR`: every record of the SOURCEs
// into N new shards, in source order or shuffled (reshape::Reshard).
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/cli/commands.h"
#include "src/cli/json_writer.h"
#include "src/cli/progress.h"
#include "src/cli/reshape_cli.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/base/utf8.h"
#include "tfrecordfs/repack/pack.h"
#include "tfrecordfs/reshape/reshape.h"

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

A shuffled reshard reads each record once, in the shuffled order, through
the shard indexes (random access, gathered in batches of --buffer bytes read
in file order): memory is the buffer plus 8 bytes per record for the order,
never the dataset.

Every output file is written under a temporary name (.NAME.tmp); all are
renamed together once every one is complete. Ctrl-C, an error or a damaged
record leaves nothing under a final name, and no file is ever replaced.

Options:
  -o, --output DIR     where the new shards go (created if needed; outside
                       every SOURCE; required)
  --shards N           exactly N shards, the records split as evenly as
                       possible (earlier shards take the remainder)
  --shard-size SIZE    shards of at most SIZE framed (uncompressed) bytes,
                       at least one record each; K, M, G, T suffixes are
                       binary multiples (the default: 128M)
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
  --buffer SIZE        bytes of records read per batch (default 64M)
  --json               a JSON summary instead: {"shards": [{"path": ...,
                       "records": N, "bytes": B, "file_bytes": F}],
                       "records": N, "seed": S | null, "skipped": [...]}
  -q, --quiet          no progress bar
  --max-shard-records N
                       the most records one shard may have (default 50000000);
                       a shard with more is skipped, and the exit status is 1
  -h, --help           show this help and exit

Exit status: 0 when every record was written, 1 when a damaged record was
skipped or the reshard failed (a damaged record without --skip-damaged),
2 on a usage error, 130 when interrupted.
)";

}  // namespace

int ReshardMain(int argc, char** argv) {
  Tool tool({.name = "reshard", .usage = kReshardUsage, .indexes = true});
  std::string output;
  reshape::ReshardOptions options;
  bool seeded = false, codec_given = false;
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
        name != "--format" && name != "--group-size") {
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
  if (options.shards == 0 && options.shard_size == 0)
    options.shard_size = repack::kDefaultShardSize;
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
  if (format.empty()) {
    format = "arrayrecord";
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
  } else {
    options.codec = shards.front().codec;
    for (const scan::ScannedShard& s : shards) {
      if (s.codec != options.codec || s.codec == source::Codec::kArrayRecord) {
        options.codec = source::Codec::kNone;
      }
    }
  }
  if (auto made = MakeDirs(output, 0755); !made.ok()) return tool.Fail(made);
  options.output_dir = output;

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
    inputs.push_back({s.index.get(), sources.back().get()});
    total_bytes += s.index->data_size();
  }
  ProgressBar progress = tool.Progress(total_bytes);
  reshape::Control control;
  control.cancel = interrupted;
  control.progress = [&](uint64_t n, uint64_t bytes) { progress.Add(0, n, bytes); };
  control.output_done = [&] { progress.Add(1, 0, 0); };  // the bar's shards: those written
  control.mid_output = PauseHook();
  auto report = reshape::Reshard(inputs, options, control);
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

  for (const std::string& path : report->stale_removed) {
    log::Warning("removed ", EscapeForLog(path), ", a temporary file an interrupted reshard left");
  }
  std::string out;
  if (tool.json()) {
    JsonWriter w;
    w.BeginObject().Key("shards").BeginArray();
    for (const reshape::OutputShard& s : report->shards) {
      w.BeginObject()
          .Key("path")
          .String(s.path)
          .Key("records")
          .Uint(s.records)
          .Key("bytes")
          .Uint(s.bytes)
          .Key("file_bytes")
          .Uint(s.file_bytes)
          .EndObject();
    }
    w.EndArray().Key("records").Uint(report->records).Key("seed");
    if (options.shuffle) {
      w.Uint(options.seed);
    } else {
      w.Null();
    }
    w.Key("skipped").BeginArray();
    for (const reshape::Dropped& d : report->skipped) WriteJsonDropped(&w, d);
    w.EndArray().EndObject();
    out = w.str();
  } else {
    for (const reshape::Dropped& d : report->skipped) {
      bool compressed = false;
      for (const scan::ScannedShard& s : shards) {
        if (s.index->path() == d.path) compressed = s.codec != source::Codec::kNone;
      }
      absl::StrAppend(&out, DescribeDropped(d, compressed), ": skipped\n");
    }
    for (const reshape::OutputShard& s : report->shards) {
      absl::StrAppend(&out, s.records, "\t", EscapeForLog(s.path), "\n");
    }
    absl::StrAppend(&out, report->records, "\ttotal: ", report->shards.size(), " shard(s) from ",
                    shards.size(), " source shard(s), ",
                    options.shuffle ? absl::StrCat("shuffled with --seed ", options.seed)
                                    : std::string("in source order"),
                    report->skipped.empty()
                        ? ""
                        : absl::StrCat(", ", report->skipped.size(), " damaged skipped"),
                    "\n");
  }
  return tool.Finish(out, report->skipped.empty());
}

}  // namespace tfrecordfs::cli
