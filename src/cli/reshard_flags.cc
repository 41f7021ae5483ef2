#include "src/cli/reshard_flags.h"

#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/cli/commands.h"
#include "tfrecordfs/repack/pack.h"
#include "tfrecordfs/reshape/shuffle.h"

namespace tfrecordfs::cli {
namespace {

absl::Status Usage(absl::string_view message) { return absl::InvalidArgumentError(message); }

// Takes argv[*i] when it is one of reshard's own flags (Tool's OwnFlags).
absl::StatusOr<bool> TakeReshardFlag(int argc, char** argv, int* i, ReshardFlags* f) {
  reshape::ReshardOptions& options = f->options;
  const std::string arg = argv[*i];
  if (arg == "--shuffle") {
    options.shuffle = true;
    return true;
  }
  if (arg == "--skip-damaged") {
    options.skip_damaged = true;
    return true;
  }
  std::string flag, value;
  const std::string name = arg.substr(0, arg.find('='));
  if (name != "-o" && name != "--output" && name != "--shards" && name != "--shard-size" &&
      name != "--prefix" && name != "--compression" && name != "--seed" && name != "--buffer" &&
      name != "--memory" && name != "--pass" && name != "--format" && name != "--group-size") {
    return false;
  }
  if (!TakeValue(argc, argv, i, &flag, &value)) return Usage(flag + " needs a value");
  if (flag == "-o" || flag == "--output") {
    if (value.empty()) return Usage("--output needs a directory");
    f->output = value;
  } else if (flag == "--shards") {
    if (!absl::SimpleAtoi(value, &options.shards) || options.shards == 0 ||
        options.shards > 99999) {
      return Usage(absl::StrCat("--shards needs a number from 1 to 99999, not '", value, "'"));
    }
  } else if (flag == "--pass") {
    if (value != "map" && value != "reduce") {
      return Usage(absl::StrCat("--pass needs map or reduce, not '", value, "'"));
    }
    f->pass = value;
  } else if (flag == "--memory") {
    auto size = ParseSize(value);
    if (!size.ok()) return Usage(absl::StrCat(flag, ": ", size.status().message()));
    if (*size < reshape::kMinShuffleMemory) return Usage("--memory needs at least 1M");
    options.memory = *size;
  } else if (flag == "--shard-size" || flag == "--buffer") {
    auto size = ParseSize(value);
    if (!size.ok()) return Usage(absl::StrCat(flag, ": ", size.status().message()));
    (flag == "--buffer" ? options.buffer_bytes : options.shard_size) = *size;
  } else if (flag == "--prefix") {
    if (auto s = repack::ValidatePrefix(value); !s.ok()) return Usage(s.message());
    options.prefix = value;
  } else if (flag == "--compression") {
    f->compression = value;  // read once --format is known
    f->codec_given = true;
  } else if (flag == "--format") {
    if (value != "tfrecord" && value != "arrayrecord") {
      return Usage(absl::StrCat("--format needs tfrecord or arrayrecord, not '", value, "'"));
    }
    f->format = value;
  } else if (flag == "--group-size") {
    if (!absl::SimpleAtoi(value, &options.array_record.group_size) ||
        options.array_record.group_size == 0 || options.array_record.group_size > INT32_MAX) {
      return Usage(
          absl::StrCat("--group-size needs a number from 1 to 2147483647, not '", value, "'"));
    }
    f->group_size = value;
  } else if (flag == "--seed") {
    if (!absl::SimpleAtoi(value, &options.seed)) {
      return Usage(absl::StrCat("--seed needs an unsigned 64-bit number, not '", value, "'"));
    }
    f->seeded = true;
  }
  return true;
}

}  // namespace

absl::StatusOr<ReshardFlags> ParseReshard(Tool* tool, int argc, char** argv) {
  ReshardFlags f;
  if (absl::Status s =
          tool->ParseFlags(argc, argv, [&](int* i) { return TakeReshardFlag(argc, argv, i, &f); });
      !s.ok()) {
    return s;
  }
  if (tool->help()) return f;
  if (tool->operands().empty()) return Usage("need at least one SOURCE");
  reshape::ReshardOptions& options = f.options;
  if (f.output.empty()) return Usage("need --output DIR");
  if (options.shards > 0 && options.shard_size > 0) {
    return Usage("--shards and --shard-size exclude each other");
  }
  if (f.seeded && !options.shuffle) return Usage("--seed needs --shuffle");
  if (options.shuffle && !f.seeded && (tool->part() || tool->finalize())) {
    return Usage("--shuffle as parts needs --seed S (every part must shuffle alike)");
  }
  if (options.shards == 0 && options.shard_size == 0) {
    options.shard_size = repack::kDefaultShardSize;
  }
  options.part = tool->part();
  if (tool->finalize()) return f;  // the parts ran: --pass does not matter
  if (!f.pass.empty() && !(options.shuffle && tool->part())) {
    return Usage("--pass is for a shuffle run as parts (--shuffle with --part K/N)");
  }
  if (options.shuffle && tool->part() && f.pass.empty()) {
    return Usage(
        "a shuffle as parts runs in two passes: every part with --pass map, then every part "
        "with --pass reduce, then --finalize");
  }
  return f;
}

std::string ReshardPlanSalt(const ReshardFlags& f) {
  const reshape::ReshardOptions& o = f.options;
  return absl::StrCat("prefix=", o.prefix, " shards=", o.shards, " shard_size=", o.shard_size,
                      " compression=", f.codec_given ? f.compression : "auto",
                      " format=", f.format.empty() ? "auto" : f.format,
                      " group_size=", f.group_size.empty() ? "auto" : f.group_size,
                      " shuffle=", o.shuffle, " seed=", o.shuffle ? o.seed : 0,
                      " skip_damaged=", o.skip_damaged);
}

absl::Status ResolveReshardFormat(const std::vector<scan::ScannedShard>& shards, ReshardFlags* f) {
  reshape::ReshardOptions& options = f->options;
  if (f->format.empty()) {
    f->format = shards.empty() ? "tfrecord" : "arrayrecord";
    for (const scan::ScannedShard& s : shards) {
      if (s.codec != source::Codec::kArrayRecord) f->format = "tfrecord";
    }
  }
  if (f->format == "arrayrecord") {
    options.codec = source::Codec::kArrayRecord;
    options.array_record.compression = arrayrecord::Compression::kZstd;
    options.array_record.level = 3;
    if (f->group_size.empty()) options.array_record.group_size = 1;
    if (f->codec_given) {
      if (auto s = arrayrecord::ParseCompression(f->compression, &options.array_record); !s.ok()) {
        return Usage(absl::StrCat("--compression: ", s.message()));
      }
    }
  } else if (!f->group_size.empty()) {
    return Usage("--group-size needs --format arrayrecord");
  } else if (f->codec_given) {
    auto codec = CompressionFlag(f->compression);
    if (!codec.ok()) return codec.status();
    options.codec = *codec;
  } else if (!shards.empty()) {
    options.codec = shards.front().codec;
    for (const scan::ScannedShard& s : shards) {
      if (s.codec != options.codec || s.codec == source::Codec::kArrayRecord) {
        options.codec = source::Codec::kNone;
      }
    }
  }
  return absl::OkStatus();
}

reshape::ReshardJob ReshardJobOf(const Tool& tool, const ReshardFlags& flags) {
  reshape::ReshardJob job;
  job.shards = &tool.shards();
  job.listing = tool.plan_files();
  job.options = flags.options;
  job.pass = flags.pass == "map"      ? reshape::ReshardPass::kMap
             : flags.pass == "reduce" ? reshape::ReshardPass::kReduce
                                      : reshape::ReshardPass::kWhole;
  if (tool.part()) job.plan = tool.plan();
  // A reduce scans no shard: the map parts say the sources' codec.
  job.codec_from_map = !flags.codec_given && flags.format == "tfrecord";
  return job;
}

}  // namespace tfrecordfs::cli
