// schema's report (reports.h).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/cli/json_writer.h"
#include "src/cli/reports.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/base/utf8.h"

namespace tfrecordfs::cli {
namespace {

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

std::string SchemaReport(const inspect::SchemaResult& r, bool json) {
  std::string out;
  if (json) {
    JsonWriter w;
    w.BeginObject()
        .Key("records_scanned")
        .Uint(r.schema.records())
        .Key("records_total")
        .Uint(r.records_total)
        .Key("shards")
        .Uint(r.shards)
        .Key("unreadable")
        .Uint(r.unreadable)
        .Key("payloads")
        .BeginObject()
        .Key("example")
        .Uint(r.schema.examples())
        .Key("sequence_example")
        .Uint(r.schema.sequence_examples())
        .Key("example_list_with_context")
        .Uint(r.schema.example_lists())
        .Key("example_in_example")
        .Uint(r.schema.examples_in_examples())
        .Key("other")
        .Uint(r.schema.others())
        .EndObject();
    w.Key("features").BeginArray();
    for (const auto& [name, s] : r.schema.features()) {
      w.BeginObject().Key("name").String(name).Key("context").Bool(s.in_context);
      WriteStatsJson(&w, s);
      w.EndObject();
    }
    w.EndArray();
    if (r.schema.example_lists() + r.schema.examples_in_examples() > 0) {
      // ExampleListWithContext examples' features; "records" counts examples.
      w.Key("listed_examples")
          .Uint(r.schema.listed_examples())
          .Key("example_features")
          .BeginArray();
      for (const auto& [name, s] : r.schema.example_features()) {
        w.BeginObject().Key("name").String(name);
        WriteStatsJson(&w, s);
        w.EndObject();
      }
      w.EndArray();
    }
    w.Key("feature_lists").BeginArray();
    for (const auto& [name, l] : r.schema.lists()) {
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
    absl::StrAppend(
        &out, r.schema.records(), " of ", r.records_total, " record(s) in ", r.shards,
        " shard(s) read", r.schema.records() + r.unreadable == r.records_total ? "" : " (a sample)",
        ": ", r.schema.examples(), " Example(s), ", r.schema.sequence_examples(),
        " SequenceExample(s), ",
        r.schema.example_lists() + r.schema.examples_in_examples() > 0
            ? absl::StrCat(r.schema.example_lists(), " ExampleListWithContext(s), ",
                           r.schema.examples_in_examples(), " Example-in-Example(s), of ",
                           r.schema.listed_examples(), " example(s), ")
            : "",
        r.schema.others(), " other payload(s)");
    if (r.unreadable > 0) absl::StrAppend(&out, "; ", r.unreadable, " unreadable");
    absl::StrAppend(&out, "\n");
    if (r.schema.others() > 0) {
      absl::StrAppend(&out, "other payloads are not tf.train.Example (",
                      EscapeForLog(r.schema.first_other_reason()), ")\n");
    }
    if (!r.schema.features().empty()) {
      std::vector<std::vector<std::string>> rows = {
          {"feature", "kind", "records", "values/record", "details"}};
      for (const auto& [name, s] : r.schema.features()) {
        rows.push_back({EscapeForLog(name) + (s.in_context ? " (context)" : ""), s.Kind(),
                        absl::StrCat(s.present, "/", r.schema.records()),
                        CountRange(s.min_count, s.max_count), Details(s)});
      }
      absl::StrAppend(&out, "\n", Table(rows));
    }
    if (!r.schema.example_features().empty()) {
      std::vector<std::vector<std::string>> rows = {
          {"example feature", "kind", "examples", "values/example", "details"}};
      for (const auto& [name, s] : r.schema.example_features()) {
        rows.push_back({EscapeForLog(name), s.Kind(),
                        absl::StrCat(s.present, "/", r.schema.listed_examples()),
                        CountRange(s.min_count, s.max_count), Details(s)});
      }
      absl::StrAppend(&out, "\n", Table(rows));
    }
    if (!r.schema.lists().empty()) {
      std::vector<std::vector<std::string>> rows = {
          {"feature list", "kind", "records", "steps", "values/step", "details"}};
      for (const auto& [name, l] : r.schema.lists()) {
        rows.push_back({EscapeForLog(name), l.steps.Kind(),
                        absl::StrCat(l.present, "/", r.schema.records()),
                        CountRange(l.min_steps, l.max_steps),
                        CountRange(l.steps.min_count, l.steps.max_count), Details(l.steps)});
      }
      absl::StrAppend(&out, "\n", Table(rows));
    }
  }
  return out;
}

}  // namespace tfrecordfs::cli
