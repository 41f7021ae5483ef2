// show's report (reports.h).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/cli/json_writer.h"
#include "src/cli/reports.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/base/utf8.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/record.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/tensor/tensor.h"

namespace tfrecordfs::cli {
namespace {

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

std::string ShowReport(absl::string_view path, bool compressed,
                       const std::vector<inspect::ShownRecord>& records, bool json, bool shorten) {
  const Style style{shorten};
  std::string out;
  JsonWriter w;
  if (json && records.size() > 1) w.BeginArray();
  for (const inspect::ShownRecord& shown : records) {
    if (!shown.payload.ok()) {
      log::Error(shown.payload.status().message());
      continue;
    }
    const uint64_t r = shown.record;
    const absl::string_view payload = *shown.payload;
    const example::DecodedRecord decoded = example::DecodeRecord(payload);
    // Every record starts the same way: its place, then what it holds.
    auto json_head = [&](absl::string_view kind) -> JsonWriter& {
      return w.BeginObject()
          .Key("record")
          .Uint(r)
          .Key("offset")
          .Uint(shown.offset)
          .Key("kind")
          .String(kind);
    };
    auto text_head = [&](absl::string_view what) {
      absl::StrAppend(&out, "# record ", r, " of ", EscapeForLog(path), ": ", what, ", ",
                      payload.size(), " bytes at ", compressed ? "uncompressed " : "",
                      "byte offset ", shown.offset, "\n");
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
  if (json && records.size() > 1) w.EndArray();
  if (json) out = w.str();
  if (json && out.empty()) out = records.size() > 1 ? "[]\n" : "null\n";
  return out;
}

}  // namespace tfrecordfs::cli
