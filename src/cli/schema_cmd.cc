// `tfrecordfs schema SOURCE...`: what features the records hold, from a
// sample spread over every shard (inspect::PlanSample) or from all records.
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/cli/commands.h"
#include "src/cli/json_writer.h"
#include "src/cli/progress.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/base/utf8.h"
#include "tfrecordfs/inspect/inspect.h"
#include "tfrecordfs/record/reader.h"

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

std::string CountRange(uint64_t lo, uint64_t hi) {
  if (lo > hi) return "-";
  return lo == hi ? absl::StrCat(lo) : absl::StrCat(lo, "..", hi);
}

// The "details" column: value range, sizes, sniffed types, dtypes.
std::string Details(const inspect::FeatureStats& s) {
  std::vector<std::string> parts;
  if (s.min_int64) parts.push_back(absl::StrCat("values ", *s.min_int64, "..", *s.max_int64));
  if (s.min_float) {
    parts.push_back(
        absl::StrCat("values ", FormatFloat(*s.min_float), "..", FormatFloat(*s.max_float)));
  }
  if (s.nan_values > 0) parts.push_back(absl::StrCat(s.nan_values, " NaN"));
  if (s.bytes_values > 0) {
    parts.push_back(absl::StrCat("sizes ", CountRange(s.min_bytes, s.max_bytes), " B"));
    if (s.text_values > 0 && s.text_values < s.bytes_values) {
      parts.push_back(absl::StrCat("text ", s.text_values));
    }
    for (const auto& [dtype, n] : s.tensor_dtypes) {
      parts.push_back(absl::StrCat("tensor ", dtype, " ", s.ShapeRange(), " ", n));
    }
    for (const auto& [ext, n] : s.sniffed) parts.push_back(absl::StrCat(ext.substr(1), " ", n));
  }
  if (s.empty > 0) parts.push_back(absl::StrCat("empty ", s.empty));
  return absl::StrJoin(parts, ", ");
}

void WriteStatsJson(JsonWriter* w, const inspect::FeatureStats& s) {
  w->Key("kind").String(s.Kind()).Key("present").Uint(s.present).Key("empty").Uint(s.empty);
  if (s.min_count <= s.max_count) {
    w->Key("min_count").Uint(s.min_count).Key("max_count").Uint(s.max_count);
  } else {
    w->Key("min_count").Null().Key("max_count").Null();
  }
  w->Key("kinds")
      .BeginObject()
      .Key("int64")
      .Uint(s.int64_records)
      .Key("float")
      .Uint(s.float_records)
      .Key("bytes")
      .Uint(s.bytes_records)
      .EndObject();
  if (s.min_int64) w->Key("min_value").Int(*s.min_int64).Key("max_value").Int(*s.max_int64);
  if (s.min_float) {
    w->Key("min_value");
    WriteJsonFloat(w, *s.min_float);
    w->Key("max_value");
    WriteJsonFloat(w, *s.max_float);
  }
  if (s.nan_values > 0) w->Key("nan_values").Uint(s.nan_values);
  if (s.bytes_values > 0) {
    w->Key("bytes_values")
        .Uint(s.bytes_values)
        .Key("text_values")
        .Uint(s.text_values)
        .Key("min_bytes")
        .Uint(s.min_bytes)
        .Key("max_bytes")
        .Uint(s.max_bytes);
    w->Key("sniffed").BeginObject();
    for (const auto& [ext, n] : s.sniffed) w->Key(ext).Uint(n);
    w->EndObject();
  }
  if (s.tensor_values > 0) {
    w->Key("tensor").BeginObject().Key("values").Uint(s.tensor_values).Key("dtypes").BeginObject();
    for (const auto& [dtype, n] : s.tensor_dtypes) w->Key(dtype).Uint(n);
    w->EndObject().Key("shape");
    if (s.mixed_rank) {
      w->Null();
    } else {
      w->BeginArray();
      for (size_t d = 0; d < s.min_shape.size(); ++d) {
        w->BeginArray().Int(s.min_shape[d]).Int(s.max_shape[d]).EndArray();
      }
      w->EndArray();
    }
    w->EndObject();
  }
}

std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      absl::StrAppend(&line, row[c]);
      if (c + 1 < row.size()) line.append(width[c] - row[c].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

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
  const bool json = tool.json();
  const std::vector<scan::ScannedShard>& shards = tool.shards();
  std::vector<uint64_t> counts;
  uint64_t total = 0;
  for (const scan::ScannedShard& s : shards) {
    counts.push_back(s.index->num_records());
    total += s.index->num_records();
  }
  const auto plan = inspect::PlanSample(counts, all ? total : sample);
  uint64_t plan_bytes = 0;
  for (const auto& [s, r] : plan) {
    plan_bytes += shards[s].index->end(r) - shards[s].index->begin(r);
  }
  ProgressBar progress = tool.Progress(plan_bytes);
  inspect::SchemaBuilder schema;
  source::BlockCache cache(32 << 20);
  uint64_t unreadable = 0;
  std::unique_ptr<source::ShardSource> src;
  size_t open_shard = SIZE_MAX;
  for (size_t k = 0; k < plan.size(); ++k) {
    const auto [s, r] = plan[k];
    const scan::ScannedShard& shard = shards[s];
    if (s != open_shard) {
      progress.Add(open_shard == SIZE_MAX ? 0 : 1, 0, 0);
      open_shard = s;
      auto opened = scan::OpenShard(shard, &cache);
      if (!opened.ok()) {
        log::Error(opened.status().message());
        src.reset();
      } else {
        src = std::move(*opened);
      }
    }
    if (src == nullptr) {
      ++unreadable;
      continue;
    }
    const index::ShardIndex& idx = *shard.index;
    auto data = record::ReadRecord(*src, r, idx.begin(r), idx.end(r));
    progress.Add(0, 1, idx.end(r) - idx.begin(r));
    if (!data.ok()) {
      log::Warning(data.status().message(), " (skipped)");
      ++unreadable;
      continue;
    }
    schema.Add(*data);
  }
  progress.Finish();

  std::string out;
  if (json) {
    JsonWriter w;
    w.BeginObject()
        .Key("records_scanned")
        .Uint(schema.records())
        .Key("records_total")
        .Uint(total)
        .Key("shards")
        .Uint(shards.size())
        .Key("unreadable")
        .Uint(unreadable)
        .Key("payloads")
        .BeginObject()
        .Key("example")
        .Uint(schema.examples())
        .Key("sequence_example")
        .Uint(schema.sequence_examples())
        .Key("example_list_with_context")
        .Uint(schema.example_lists())
        .Key("example_in_example")
        .Uint(schema.examples_in_examples())
        .Key("other")
        .Uint(schema.others())
        .EndObject();
    w.Key("features").BeginArray();
    for (const auto& [name, s] : schema.features()) {
      w.BeginObject().Key("name").String(name).Key("context").Bool(s.in_context);
      WriteStatsJson(&w, s);
      w.EndObject();
    }
    w.EndArray();
    if (schema.example_lists() + schema.examples_in_examples() > 0) {
      // ExampleListWithContext examples' features; "records" counts examples.
      w.Key("listed_examples").Uint(schema.listed_examples()).Key("example_features").BeginArray();
      for (const auto& [name, s] : schema.example_features()) {
        w.BeginObject().Key("name").String(name);
        WriteStatsJson(&w, s);
        w.EndObject();
      }
      w.EndArray();
    }
    w.Key("feature_lists").BeginArray();
    for (const auto& [name, l] : schema.lists()) {
      w.BeginObject()
          .Key("name")
          .String(name)
          .Key("records")
          .Uint(l.present)
          .Key("min_steps")
          .Uint(l.min_steps)
          .Key("max_steps")
          .Uint(l.max_steps);
      WriteStatsJson(&w, l.steps);  // present/min_count/max_count: per step
      w.EndObject();
    }
    w.EndArray().EndObject();
    out = w.str();
  } else {
    absl::StrAppend(&out, schema.records(), " of ", total, " record(s) in ", shards.size(),
                    " shard(s) read", schema.records() + unreadable == total ? "" : " (a sample)",
                    ": ", schema.examples(), " Example(s), ", schema.sequence_examples(),
                    " SequenceExample(s), ",
                    schema.example_lists() + schema.examples_in_examples() > 0
                        ? absl::StrCat(schema.example_lists(), " ExampleListWithContext(s), ",
                                       schema.examples_in_examples(), " Example-in-Example(s), of ",
                                       schema.listed_examples(), " example(s), ")
                        : "",
                    schema.others(), " other payload(s)");
    if (unreadable > 0) absl::StrAppend(&out, "; ", unreadable, " unreadable");
    absl::StrAppend(&out, "\n");
    if (schema.others() > 0) {
      absl::StrAppend(&out, "other payloads are not tf.train.Example (",
                      EscapeForLog(schema.first_other_reason()), ")\n");
    }
    if (!schema.features().empty()) {
      std::vector<std::vector<std::string>> rows = {
          {"feature", "kind", "records", "values/record", "details"}};
      for (const auto& [name, s] : schema.features()) {
        rows.push_back({EscapeForLog(name) + (s.in_context ? " (context)" : ""), s.Kind(),
                        absl::StrCat(s.present, "/", schema.records()),
                        CountRange(s.min_count, s.max_count), Details(s)});
      }
      absl::StrAppend(&out, "\n", Table(rows));
    }
    if (!schema.example_features().empty()) {
      std::vector<std::vector<std::string>> rows = {
          {"example feature", "kind", "examples", "values/example", "details"}};
      for (const auto& [name, s] : schema.example_features()) {
        rows.push_back({EscapeForLog(name), s.Kind(),
                        absl::StrCat(s.present, "/", schema.listed_examples()),
                        CountRange(s.min_count, s.max_count), Details(s)});
      }
      absl::StrAppend(&out, "\n", Table(rows));
    }
    if (!schema.lists().empty()) {
      std::vector<std::vector<std::string>> rows = {
          {"feature list", "kind", "records", "steps", "values/step", "details"}};
      for (const auto& [name, l] : schema.lists()) {
        rows.push_back({EscapeForLog(name), l.steps.Kind(),
                        absl::StrCat(l.present, "/", schema.records()),
                        CountRange(l.min_steps, l.max_steps),
                        CountRange(l.steps.min_count, l.steps.max_count), Details(l.steps)});
      }
      absl::StrAppend(&out, "\n", Table(rows));
    }
  }
  return tool.Finish(out, unreadable == 0);
}

}  // namespace tfrecordfs::cli
