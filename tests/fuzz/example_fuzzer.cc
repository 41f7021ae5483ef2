// Fuzz target: the hand-written Example decoder, cross-checked against
// protobuf's generated parser. The input is one record payload.
//
// Invariants:
//   * DecodeExample never crashes, and fails only with InvalidArgument;
//   * when it accepts, protobuf accepts too and both see the same features
//     (names, kinds, values; floats bit for bit; kindless = no oneof case);
//   * the table is sorted by name with unique names, every name valid
//     UTF-8, every bytes value a view inside the payload;
//   * EncodeExample of the table decodes back to the same table.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "example.pb.h"
#include "fuzz_check.h"
#include "testing/canon.h"
#include "tfrecordfs/base/utf8.h"
#include "tfrecordfs/example/example.h"

namespace tfrecordfs::fuzz {
namespace {

using example::Feature;
using example::FeatureTable;
using example::Kind;

// Both sides convert to the canonical form of tests/testing/canon.h.
using test::FromProto;
using test::FromTable;

void Check(absl::string_view payload) {
  auto table = example::DecodeExample(payload);
  if (!table.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(table.status()), table.status().ToString());
    return;
  }
  for (size_t i = 0; i < table->features.size(); ++i) {
    const Feature& f = table->features[i];
    if (i > 0) FUZZ_CHECK(table->features[i - 1].name < f.name, "names not sorted/unique");
    FUZZ_CHECK(IsValidUtf8(f.name));
    FUZZ_CHECK(f.kind == Kind::kBytes || f.bytes.empty());
    FUZZ_CHECK(f.kind == Kind::kFloat || f.floats.empty());
    FUZZ_CHECK(f.kind == Kind::kInt64 || f.int64s.empty());
    for (absl::string_view b : f.bytes) {
      FUZZ_CHECK(b.data() >= payload.data() &&
                 b.data() + b.size() <= payload.data() + payload.size());
    }
  }
  CheckAgainstProtobuf<proto::Example>(
      payload, *table, "DecodeExample", [](const FeatureTable& t) { return FromTable(t); },
      [](const proto::Example& p) { return FromProto(p); }, example::EncodeExample,
      example::DecodeExample);
}

}  // namespace
}  // namespace tfrecordfs::fuzz

TFRFS_FUZZ_ENTRY(tfrecordfs::fuzz::Check, 1u << 20)
