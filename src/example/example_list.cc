#include "tfrecordfs/example/example_list.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "decode_internal.h"
#include "tfrecordfs/base/wire.h"

namespace tfrecordfs::example {
namespace {

using internal::Cursor;
using internal::ForEachLenField;

constexpr char kWhat[] = "tensorflow.serving.ExampleListWithContext";

// The shared Feature decoders name Example in their errors; say which
// message this really was (the offset already counts from the payload).
absl::Status Renamed(absl::Status s) {
  constexpr absl::string_view kPrefix = "not a tf.train.Example: ";
  if (!absl::StartsWith(s.message(), kPrefix)) return s;
  return absl::InvalidArgumentError(
      absl::StrCat("not a ", kWhat, ": ", s.message().substr(kPrefix.size())));
}

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

std::string EncodeExampleList(const ExampleListTable& table) {
  std::string out;
  for (const FeatureTable& ex : table.examples) AppendLenField(1, EncodeExample(ex), &out);
  if (table.has_context) AppendLenField(2, EncodeExample(table.context), &out);
  return out;
}

}  // namespace tfrecordfs::example
