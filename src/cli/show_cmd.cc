// `tfrecordfs show SHARD RECORD...`: records as text or JSON.
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/cli/commands.h"
#include "src/cli/json_writer.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/base/utf8.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/record.h"
#include "tfrecordfs/inspect/inspect.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/tensor/tensor.h"

namespace tfrecordfs::cli {
namespace {

constexpr char kShowUsage[] = R"(Usage: tfrecordfs show [options] SHARD RECORD...

Prints records of the shard file SHARD (plain, GZIP, ZLIB or SNAPPY, or an
ARRAYRECORD file); RECORD
is a record index, counted from 0 (`tfrecordfs count` gives the number).

Text: a heading per record, then one line per feature: name, kind[count] and
the values. Floats print as the shortest decimal that reads back bit-exact.
Bytes values print quoted when they are single-line UTF-8 text (control
bytes and '\' escaped), else as <type, N bytes> (the type sniffed from the
content, or the dtype and shape of a serialized tensor). On a terminal long
lists and long text are shortened; off a terminal every value is printed.
SequenceExamples print their context, then each feature list step by step.
ExampleListWithContext and Example-in-Example records (TF-Ranking) print
their context, then each example's features. A payload that is none of these prints as raw bytes.

Options:
  --json       one JSON document instead: for one RECORD an object, for
               several an array of them:
                 {"record": i, "offset": N, "kind": "Example",
                  "features": {"name": {"kind": "int64"|"float"|"bytes",
                                        "values": [...]}}}
               SequenceExamples: "context" (as "features") and
               "feature_lists": {"name": [[step values], ...]};
               ExampleListWithContext and ExampleInExample: "context"
               (absent when the record has none) and "examples":
               [{features}, ...]; other
               payloads: "raw". Bytes values are strings when they are
               single-line UTF-8 text, else {"base64": "..."}; NaN and
               infinite floats are strings ("nan", "-inf").
)";
constexpr char kShowUsageEnd[] = R"(
Exit status: 0 on success, 1 when SHARD or a record cannot be read (damaged,
or no such record), 2 on a usage error.
)";

constexpr size_t kTerminalValues = 8;      // values per feature on a terminal
constexpr size_t kTerminalTextBytes = 60;  // bytes of one text value

struct Style {
  bool shorten = false;
};

std::string BytesText(absl::string_view v, const Style& style) {
  if (naming::IsSingleLineText(v)) {
    if (style.shorten && v.size() > kTerminalTextBytes) {
      size_t cut = kTerminalTextBytes;
      while (cut > 0 && (static_cast<unsigned char>(v[cut]) & 0xc0) == 0x80) --cut;
      return absl::StrCat("\"", EscapeForLog(v.substr(0, cut)), "\"... (", v.size(), " bytes)");
    }
    return absl::StrCat("\"", EscapeForLog(v), "\"");
  }
  if (auto t = tensor::DecodeTensorType(v); t.ok()) {  // (a broadcast is not expanded)
    return absl::StrCat("<tensor ", tensor::InfoOf(t->dtype).name, " [",
                        absl::StrJoin(t->shape, ","), "], ", v.size(), " bytes>");
  }
  std::string ext(naming::SniffExtension(v));
  return absl::StrCat("<", ext.substr(1), ", ", v.size(), " bytes>");
}

std::string ValuesText(const example::Feature& f, const Style& style) {
  std::vector<std::string> values;
  const size_t n = f.size();
  const size_t shown = style.shorten ? std::min(n, kTerminalValues) : n;
  for (size_t i = 0; i < shown; ++i) {
    switch (f.kind) {
      case example::Kind::kInt64:
        values.push_back(absl::StrCat(f.int64s[i]));
        break;
      case example::Kind::kFloat:
        values.push_back(FormatFloat(f.floats[i]));
        break;
      case example::Kind::kBytes:
        values.push_back(BytesText(f.bytes[i], style));
        break;
      case example::Kind::kNone:
        break;
    }
  }
  std::string out = absl::StrJoin(values, " ");
  if (shown < n) absl::StrAppend(&out, " ... (", n, " values)");
  return out;
}

// "kind[count]  values", or "empty".
std::string FeatureText(const example::Feature& f, const Style& style) {
  if (f.kind == example::Kind::kNone) return "empty";
  return absl::StrCat(example::KindName(f.kind), "[", f.size(), "]  ", ValuesText(f, style));
}

void AppendTable(const example::FeatureTable& table, absl::string_view indent, const Style& style,
                 std::string* out) {
  size_t width = 0;
  for (const example::Feature& f : table.features) width = std::max(width, f.name.size());
  for (const example::Feature& f : table.features) {
    const std::string name = EscapeForLog(f.name);
    absl::StrAppend(out, indent, name, std::string(width + 2 - std::min(width, f.name.size()), ' '),
                    FeatureText(f, style), "\n");
  }
}

void WriteBytesJson(JsonWriter* w, absl::string_view v) {
  if (naming::IsSingleLineText(v)) {
    w->String(v);
  } else {
    w->BeginObject().Key("base64").String(Base64(v)).EndObject();
  }
}

void WriteValuesJson(JsonWriter* w, const example::Feature& f) {
  w->BeginArray();
  switch (f.kind) {
    case example::Kind::kInt64:
      for (int64_t v : f.int64s) w->Int(v);
      break;
    case example::Kind::kFloat:
      for (float v : f.floats) WriteJsonFloat(w, v);
      break;
    case example::Kind::kBytes:
      for (absl::string_view v : f.bytes) WriteBytesJson(w, v);
      break;
    case example::Kind::kNone:
      break;
  }
  w->EndArray();
}

void WriteTableJson(JsonWriter* w, const example::FeatureTable& table) {
  w->BeginObject();
  for (const example::Feature& f : table.features) {
    w->Key(f.name).BeginObject().Key("kind").String(
        f.kind == example::Kind::kNone ? "none" : example::KindName(f.kind));
    w->Key("values");
    WriteValuesJson(w, f);
    w->EndObject();
  }
  w->EndObject();
}

}  // namespace

int ShowMain(int argc, char** argv) {
  Tool tool({.name = "show",
             .usage = kShowUsage,
             .usage_end = kShowUsageEnd,
             .usage_column = 15,
             .quiet = false,
             .indexes = true});
  if (auto stop = tool.Parse(argc, argv)) return *stop;
  const bool json = tool.json();
  const std::vector<std::string>& positional = tool.operands();
  if (positional.size() < 2) return tool.Usage("need a SHARD and at least one RECORD");
  std::vector<uint64_t> wanted;
  for (size_t k = 1; k < positional.size(); ++k) {
    uint64_t r = 0;
    if (!absl::SimpleAtoi(positional[k], &r) || positional[k][0] == '+') {
      return tool.Usage(
          absl::StrCat("RECORD must be a record index (0, 1, ...), not '", positional[k], "'"));
    }
    wanted.push_back(r);
  }
  const std::string& path = positional[0];
  auto shard = scan::ScanOne(path, tool.store(), tool.objects());
  if (!shard.ok()) return tool.Fail(shard.status());
  source::BlockCache cache(32 << 20);
  auto src = scan::OpenShard(*shard, &cache);
  if (!src.ok()) return tool.Fail(src.status());
  const index::ShardIndex& idx = *shard->index;
  const Style style{!json && StdoutIsTerminal()};
  bool failed = false;
  std::string out;
  JsonWriter w;
  if (json && wanted.size() > 1) w.BeginArray();
  for (uint64_t r : wanted) {
    if (r >= idx.num_records()) {
      log::Error(path, ": no record ", r, ": the shard has ", idx.num_records(), " record(s)");
      failed = true;
      continue;
    }
    auto data = record::ReadRecord(**src, r, idx.begin(r), idx.end(r));
    if (!data.ok()) {
      log::Error(data.status().message());
      failed = true;
      continue;
    }
    const absl::string_view payload = *data;
    const example::DecodedRecord decoded = example::DecodeRecord(payload);
    // Every record starts the same way: its place, then what it holds.
    auto json_head = [&](absl::string_view kind) -> JsonWriter& {
      return w.BeginObject()
          .Key("record")
          .Uint(r)
          .Key("offset")
          .Uint(idx.begin(r))
          .Key("kind")
          .String(kind);
    };
    auto text_head = [&](absl::string_view what) {
      absl::StrAppend(&out, "# record ", r, " of ", EscapeForLog(path), ": ", what, ", ",
                      payload.size(), " bytes at ",
                      shard->codec == source::Codec::kNone ? "" : "uncompressed ", "byte offset ",
                      idx.begin(r), "\n");
    };
    if (decoded.kind == example::PayloadKind::kExample) {
      if (json) {
        json_head("Example").Key("features");
        WriteTableJson(&w, decoded.example);
        w.EndObject();
      } else {
        text_head("Example");
        AppendTable(decoded.example, "", style, &out);
      }
    } else if (decoded.kind == example::PayloadKind::kSequenceExample) {
      const example::SequenceTable& seq = decoded.sequence;
      if (json) {
        json_head("SequenceExample").Key("context");
        WriteTableJson(&w, seq.context);
        w.Key("feature_lists").BeginObject();
        for (const example::FeatureList& l : seq.lists) {
          w.Key(l.name).BeginArray();
          for (const example::Feature& step : l.steps) WriteValuesJson(&w, step);
          w.EndArray();
        }
        w.EndObject().EndObject();
      } else {
        text_head("SequenceExample");
        absl::StrAppend(&out, "context:\n");
        AppendTable(seq.context, "  ", style, &out);
        absl::StrAppend(&out, "feature_lists:\n");
        for (const example::FeatureList& l : seq.lists) {
          absl::StrAppend(&out, "  ", EscapeForLog(l.name), "  ", l.steps.size(), " step(s)\n");
          for (size_t k = 0; k < l.steps.size(); ++k) {
            if (style.shorten && k == kTerminalValues) {
              absl::StrAppend(&out, "    ... (", l.steps.size(), " steps)\n");
              break;
            }
            absl::StrAppend(&out, "    [", k, "] ", FeatureText(l.steps[k], style), "\n");
          }
        }
      }
    } else if (decoded.kind == example::PayloadKind::kExampleList ||
               decoded.kind == example::PayloadKind::kExampleInExample) {
      const example::ExampleListTable& list = decoded.list;
      const char* kind = example::PayloadKindName(decoded.kind);
      if (json) {
        json_head(kind);
        if (list.has_context) {
          w.Key("context");
          WriteTableJson(&w, list.context);
        }
        w.Key("examples").BeginArray();
        for (const example::FeatureTable& ex : list.examples) WriteTableJson(&w, ex);
        w.EndArray().EndObject();
      } else {
        text_head(kind);
        if (list.has_context) {
          absl::StrAppend(&out, "context:\n");
          AppendTable(list.context, "  ", style, &out);
        }
        absl::StrAppend(&out, "examples:  ", list.examples.size(), " example(s)\n");
        for (size_t k = 0; k < list.examples.size(); ++k) {
          absl::StrAppend(&out, "  [", k, "]\n");
          AppendTable(list.examples[k], "    ", style, &out);
        }
      }
    } else if (json) {
      json_head("other").Key("reason").String(decoded.raw_reason).Key("raw");
      WriteBytesJson(&w, payload);
      w.EndObject();
    } else {
      text_head(absl::StrCat("not a tf.train.Example, SequenceExample or ExampleListWithContext (",
                             EscapeForLog(decoded.raw_reason), ")"));
      absl::StrAppend(&out, "raw  ", BytesText(payload, style), "\n");
    }
  }
  if (json && wanted.size() > 1) w.EndArray();
  if (json) out = w.str();
  if (json && out.empty()) out = wanted.size() > 1 ? "[]\n" : "null\n";
  return tool.Finish(out, !failed);
}

}  // namespace tfrecordfs::cli
