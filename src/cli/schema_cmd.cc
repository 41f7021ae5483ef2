// `tfrecordfs schema SOURCE...`: what features the records hold, from a
// sample spread over every shard (inspect::PlanSample) or from all records.
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "src/cli/commands.h"
#include "src/cli/progress.h"
#include "src/cli/reports.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/inspect/commands.h"

namespace tfrecordfs::cli {
namespace {

constexpr uint64_t kDefaultSample = 1000;

constexpr char kSchemaUsage[] = R"(Usage: tfrecordfs schema [options] SOURCE...

Summarises the features of the records in the SOURCEs (shard files, or
directories searched recursively, exactly as a mount would; plain, GZIP,
ZLIB and SNAPPY shards, ARRAYRECORD files). One row per feature: its name, kind (int64, float, bytes;
text when every bytes value is single-line UTF-8; tensor, with dtype and
shape range, when every bytes value is a serialized tensor; empty when only
Feature{} was seen; mixed), how many records have it, the fewest and most
values per record, and the value range (numbers), byte sizes and sniffed
types (bytes). SequenceExamples: context features are marked, feature lists
get rows of their own (steps per record; values per step).

Options:
  --sample N   read about N records (the default, N = 1000), spread over
               every shard: one from each shard with records, the rest in
               proportion to their sizes, evenly spaced inside each
  --all        read every record
  --json       one JSON document instead: {"records_scanned": N,
               "features": [{"name", "kind", "present", "min_count",
               "max_count", ...}], "feature_lists": [...]}
)";
constexpr char kSchemaUsageEnd[] = R"(
Exit status: 0 on success, 1 when a SOURCE or a sampled record cannot be
read, 2 on a usage error.
)";

}  // namespace

int SchemaMain(int argc, char** argv) {
  bool all = false, sample_given = false;
  uint64_t sample = kDefaultSample;
  Tool tool({.name = "schema",
             .usage = kSchemaUsage,
             .usage_end = kSchemaUsageEnd,
             .usage_column = 15,
             .indexes = true});
  auto own = [&](int* i) -> std::optional<int> {
    const std::string arg = argv[*i];
    if (arg == "--all") {
      all = true;
      return kExitOk;
    }
    if (!absl::StartsWith(arg, "--sample")) return std::nullopt;
    std::string flag, value;
    if (!TakeValue(argc, argv, i, &flag, &value) || flag != "--sample") {
      return tool.Usage(flag != "--sample" ? "unknown option " + arg
                                           : "--sample needs a number of records");
    }
    if (!absl::SimpleAtoi(value, &sample) || sample == 0) {
      return tool.Usage("--sample needs a positive number of records");
    }
    sample_given = true;
    return kExitOk;
  };
  if (auto stop = tool.Parse(argc, argv, own)) return *stop;
  if (all && sample_given) return tool.Usage("--all and --sample exclude each other");
  if (auto stop = tool.NeedSources()) return *stop;
  if (auto stop = tool.Scan()) return *stop;
  const inspect::SchemaPlan plan =
      inspect::PlanSchema(tool.shards(), all ? std::nullopt : std::optional(sample));
  ProgressBar progress = tool.Progress(plan.bytes);
  const inspect::SchemaResult result = inspect::ReadSchema(
      tool.shards(), plan,
      [&](uint64_t s, uint64_t n, uint64_t bytes) { progress.Add(s, n, bytes); });
  progress.Finish();
  return tool.Finish(SchemaReport(result, tool.json()), result.unreadable == 0);
}

}  // namespace tfrecordfs::cli
