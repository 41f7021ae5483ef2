// Fuzz target: DecodeRecord's choice of payload kind (example/record.h),
// above all the ExampleListWithContext (ELWC) one, whose wire bytes an
// Example or a SequenceExample can share. The input is one record payload.
//
// Invariants:
//   * DecodeRecord never crashes; the kind it gives is the first of Example
//     (Example-in-Example when it is one), SequenceExample, ELWC whose strict
//     decoder accepts (so no payload the
//     Example or SequenceExample decoder takes is ever an ELWC);
//   * an ELWC is one for protobuf too (tensorflow_serving's message, same
//     field numbers), with the same examples in order and the same context,
//     every bytes value a view inside the payload;
//   * EncodeExampleList of its table decodes back, as an ELWC, to the same
//     table, except for the shapes record.h documents as decided for the
//     earlier kind: no context or an empty one, and every example without a
//     feature (`12 00`, `0a 02 0a 00`, ...);
//   * an Example-in-Example (an Example whose features are TF-Ranking's
//     serialized_context / serialized_examples, every value an Example)
//     re-encoded decodes back to the same list;
//   * an Example table encoded (EncodeExample) is never taken for an ELWC
//     unless the Example decoder refuses it by its documented rule (all
//     features kindless, some name with a control byte).
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "example.pb.h"
#include "fuzz_check.h"
#include "testing/canon.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/example_list.h"
#include "tfrecordfs/example/record.h"
#include "tfrecordfs/example/sequence.h"

namespace tfrecordfs::fuzz {
namespace {

using example::DecodedRecord;
using example::ExampleListTable;
using example::FeatureTable;
using example::PayloadKind;
using test::CanonTable;
using test::FromProto;
using test::FromTable;

bool InPayload(const FeatureTable& t, absl::string_view payload) {
  for (const example::Feature& f : t.features) {
    for (absl::string_view b : f.bytes) {
      if (b.data() < payload.data() || b.data() + b.size() > payload.data() + payload.size()) {
        return false;
      }
    }
  }
  return true;
}

bool Ambiguous(const ExampleListTable& t) {
  if (t.has_context && !t.context.features.empty()) return false;
  for (const FeatureTable& ex : t.examples) {
    if (!ex.features.empty()) return false;
  }
  return true;
}

void Check(absl::string_view payload) {
  const DecodedRecord r = example::DecodeRecord(payload);
  const auto as_example = example::DecodeExample(payload);
  const bool is_example = as_example.ok();
  const bool is_eie = is_example && example::ExampleListFromEie(*as_example).ok();
  const bool is_sequence = example::DecodeSequenceExample(payload).ok();
  const bool is_list = example::DecodeExampleList(payload).ok();
  const PayloadKind want = is_eie        ? PayloadKind::kExampleInExample
                           : is_example  ? PayloadKind::kExample
                           : is_sequence ? PayloadKind::kSequenceExample
                           : is_list     ? PayloadKind::kExampleList
                                         : PayloadKind::kRaw;
  FUZZ_CHECK(r.kind == want,
             absl::StrCat("DecodeRecord said ", example::PayloadKindName(r.kind),
                          ", the decoders in order say ", example::PayloadKindName(want)));
  if (r.kind == PayloadKind::kExampleInExample) {
    const std::string again = example::EncodeExampleInExample(r.list);
    const DecodedRecord back = example::DecodeRecord(again);
    FUZZ_CHECK(back.kind == PayloadKind::kExampleInExample,
               "an encoded Example-in-Example decodes as another kind");
    FUZZ_CHECK(back.list.examples.size() == r.list.examples.size() &&
                   back.list.has_context == r.list.has_context &&
                   FromTable(back.list.context) == FromTable(r.list.context),
               "Example-in-Example round trip changed the list");
    for (size_t i = 0; i < r.list.examples.size(); ++i) {
      FUZZ_CHECK(FromTable(back.list.examples[i]) == FromTable(r.list.examples[i]),
                 "Example-in-Example round trip changed an example");
    }
    return;
  }
  if (r.kind != PayloadKind::kExampleList) return;
  const ExampleListTable& t = r.list;
  proto::ExampleListWithContext p;
  FUZZ_CHECK(p.ParseFromArray(payload.data(), static_cast<int>(payload.size())),
             "DecodeExampleList accepts what protobuf refuses");
  FUZZ_CHECK(static_cast<size_t>(p.examples_size()) == t.examples.size(), "example count");
  for (size_t i = 0; i < t.examples.size(); ++i) {
    FUZZ_CHECK(FromTable(t.examples[i]) == FromProto(p.examples(static_cast<int>(i))),
               absl::StrCat("example ", i, ": DecodeExampleList and protobuf disagree"));
    FUZZ_CHECK(InPayload(t.examples[i], payload), "a bytes value outside the payload");
  }
  FUZZ_CHECK(t.has_context == p.has_context(), "context presence");
  FUZZ_CHECK(FromTable(t.context) == FromProto(p.context()), "context: disagree with protobuf");
  FUZZ_CHECK(InPayload(t.context, payload), "a context bytes value outside the payload");
  const std::string again = example::EncodeExampleList(t);
  const DecodedRecord back = example::DecodeRecord(again);
  if (Ambiguous(t)) return;
  FUZZ_CHECK(back.kind == PayloadKind::kExampleList,
             absl::StrCat("an encoded ELWC decodes as ", example::PayloadKindName(back.kind)));
  FUZZ_CHECK(back.list.examples.size() == t.examples.size() &&
                 back.list.has_context == t.has_context &&
                 FromTable(back.list.context) == FromTable(t.context),
             "round trip changed the list");
  for (size_t i = 0; i < t.examples.size(); ++i) {
    FUZZ_CHECK(FromTable(back.list.examples[i]) == FromTable(t.examples[i]),
               "round trip changed an example");
  }
  // Each example alone, encoded, is an Example (or refused by the Example
  // decoder's documented rule) and never an ELWC.
  for (const FeatureTable& ex : t.examples) {
    const std::string one = example::EncodeExample(ex);
    const PayloadKind k = example::DecodeRecord(one).kind;
    FUZZ_CHECK(k == PayloadKind::kExample || k == PayloadKind::kExampleInExample ||
                   !example::DecodeExample(one).ok(),
               "an encoded Example is not an Example");
  }
}

}  // namespace
}  // namespace tfrecordfs::fuzz

TFRFS_FUZZ_ENTRY(tfrecordfs::fuzz::Check, 1u << 20)
