// reshard's report (reports.h).
#include <string>

#include "absl/strings/str_cat.h"
#include "src/cli/json_writer.h"
#include "src/cli/reports.h"
#include "src/cli/reshape_cli.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/base/utf8.h"

namespace tfrecordfs::cli {
namespace {

// What became of TFDS's metadata beside one local process's shards.
void LogTfdsInfo(const reshape::TfdsInfoOutcome& info) {
  if (!info.error.ok()) {
    log::Warning("dataset_info.json not written: ", info.error.message());
  } else if (info.written) {
    log::Info("wrote ", *info.written,
              " (fileFormat, shardLengths and numBytes of the new shards)");
  } else if (!info.why_not.empty()) {
    log::Info("dataset_info.json not written: ", info.why_not);
  }
}

std::string ShardsReport(const reshape::ReshardReport& report,
                         const std::vector<scan::ScannedShard>& shards,
                         const reshape::ReshardOptions& options, bool json) {
  for (const std::string& path : report.stale_removed) {
    log::Warning("removed ", EscapeForLog(path), ", a temporary file an interrupted reshard left");
  }
  std::string out;
  if (json) {
    JsonWriter w;
    w.BeginObject().Key("shards").BeginArray();
    for (const reshape::OutputShard& s : report.shards) {
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
    w.EndArray().Key("records").Uint(report.records).Key("seed");
    if (options.shuffle) {
      w.Uint(options.seed);
    } else {
      w.Null();
    }
    w.Key("skipped").BeginArray();
    for (const reshape::Dropped& d : report.skipped) WriteJsonDropped(&w, d);
    w.EndArray().EndObject();
    out = w.str();
  } else {
    for (const reshape::Dropped& d : report.skipped) {
      bool compressed = false;
      for (const scan::ScannedShard& s : shards) {
        if (s.index->path() == d.path) compressed = s.codec != source::Codec::kNone;
      }
      absl::StrAppend(&out, DescribeDropped(d, compressed), ": skipped\n");
    }
    for (const reshape::OutputShard& s : report.shards) {
      absl::StrAppend(&out, s.records, "\t", EscapeForLog(s.path), "\n");
    }
    absl::StrAppend(
        &out, report.records, "\ttotal: ", report.shards.size(), " shard(s)",
        options.part ? absl::StrCat(" (part ", options.part->index, "/", options.part->count,
                                    ", published; --finalize names them)")
                     : "",
        " from ", shards.size(), " source shard(s), ",
        options.shuffle ? absl::StrCat("shuffled with --seed ", options.seed)
                        : std::string("in source order"),
        report.skipped.empty() ? "" : absl::StrCat(", ", report.skipped.size(), " damaged skipped"),
        "\n");
  }
  return out;
}

std::string MapPassReport(const reshape::MapReport& report, size_t shards, uint32_t buckets,
                          const reshape::PartSpec& part) {
  std::string out;
  for (const reshape::Dropped& d : report.skipped) {
    absl::StrAppend(&out, DescribeDropped(d, false), ": skipped\n");
  }
  absl::StrAppend(&out, report.records, "\tmapped: ", shards, " shard(s) into ", report.runs.size(),
                  " run(s) of ", buckets, " bucket(s) (part ", part.index, "/", part.count,
                  ", first pass; then --pass reduce)\n");
  return out;
}

}  // namespace

std::string ReshardReport(const reshape::ReshardResult& result,
                          const std::vector<scan::ScannedShard>& shards,
                          const reshape::ReshardOptions& options, bool json) {
  if (result.pass == reshape::ReshardPass::kMap) {
    return MapPassReport(result.map, shards.size(), result.buckets, *options.part);
  }
  if (result.tfds_info) LogTfdsInfo(*result.tfds_info);
  return ShardsReport(result.report, shards, options, json);
}

}  // namespace tfrecordfs::cli
