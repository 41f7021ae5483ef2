#include "tfrecordfs/example/example_list.h"

#include <deque>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "decode_internal.h"
#include "tfrecordfs/base/wire.h"

namespace tfrecordfs::example {
namespace {

using internal::Cursor;
using internal::ForEachLenField;

constexpr char kWhat[] = "tensorflow.serving.ExampleListWithContext";

absl::Status Renamed(absl::Status s) { return internal::RenamedFor(kWhat, std::move(s)); }

void AppendLenField(uint32_t number, absl::string_view body, std::string* out) {
  wire::PutVarint(out, (uint64_t{number} << 3) | wire::kLen);
  wire::PutVarint(out, body.size());
  out->append(body.data(), body.size());
}

}  // namespace

absl::StatusOr<ExampleListTable> DecodeExampleList(absl::string_view payload) {
  ExampleListTable table;
  Cursor c(payload, 0, kWhat);
  absl::Status status = ForEachLenField(
      c, "ExampleListWithContext", 1, 2,
      [&](uint32_t field, absl::string_view body, size_t base) -> absl::Status {
        if (field == 2 && table.has_context) {
          return c.Error("a second context field (no ExampleListWithContext writer splits it)");
        }
        auto example = internal::DecodeExampleAt(body, base, kWhat);
        if (!example.ok()) return Renamed(example.status());
        if (field == 1) {
          table.examples.push_back(*std::move(example));
        } else {
          table.has_context = true;
          table.context = *std::move(example);
        }
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  return table;
}

absl::StatusOr<ExampleListTable> ExampleListFromEie(const FeatureTable& outer) {
  ExampleListTable table;
  bool have_examples = false;
  for (const Feature& f : outer.features) {
    const bool context = f.name == kEieContextKey;
    if (!context && f.name != kEieExamplesKey) {
      return absl::InvalidArgumentError(
          absl::StrCat("not an Example-in-Example: a feature other than ", kEieContextKey, " and ",
                       kEieExamplesKey));
    }
    if (f.kind != Kind::kBytes || (context && f.bytes.size() != 1)) {
      return absl::InvalidArgumentError(absl::StrCat("not an Example-in-Example: ", f.name,
                                                     " is not ", context ? "one " : "",
                                                     "bytes value(s)"));
    }
    for (absl::string_view v : f.bytes) {
      auto example = DecodeExample(v);
      if (!example.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("not an Example-in-Example: a value of ",
                                                       f.name, " is not an Example (",
                                                       example.status().message(), ")"));
      }
      if (context) {
        table.has_context = true;
        table.context = *std::move(example);
      } else {
        table.examples.push_back(*std::move(example));
      }
    }
    have_examples |= !context;
  }
  if (!have_examples) {
    return absl::InvalidArgumentError(
        absl::StrCat("not an Example-in-Example: no ", kEieExamplesKey));
  }
  return table;
}

std::string EncodeExampleInExample(const ExampleListTable& table) {
  std::deque<std::string> values;  // the features' views point into it
  FeatureTable outer;
  if (table.has_context) {
    values.push_back(EncodeExample(table.context));
    Feature f;
    f.name = std::string(kEieContextKey);
    f.kind = Kind::kBytes;
    f.bytes.push_back(values.back());
    outer.features.push_back(std::move(f));
  }
  Feature examples;
  examples.name = std::string(kEieExamplesKey);
  examples.kind = Kind::kBytes;
  for (const FeatureTable& ex : table.examples) values.push_back(EncodeExample(ex));
  for (size_t i = table.has_context ? 1 : 0; i < values.size(); ++i) {
    examples.bytes.push_back(values[i]);
  }
  outer.features.push_back(std::move(examples));
  return EncodeExample(outer);
}

std::string EncodeExampleList(const ExampleListTable& table) {
  std::string out;
  for (const FeatureTable& ex : table.examples) AppendLenField(1, EncodeExample(ex), &out);
  if (table.has_context) AppendLenField(2, EncodeExample(table.context), &out);
  return out;
}

}  // namespace tfrecordfs::example
