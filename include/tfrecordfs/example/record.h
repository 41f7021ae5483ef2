// What a TFRecord payload is: a tf.train.Example, a tf.train.SequenceExample,
// a TF-Ranking ExampleListWithContext (example_list.h), or raw bytes
// (anything else: TensorBoard events, other protos, strings).
//
// DecodeRecord is the one place that decides, for every caller (the record
// view, the kind sampler, schema, show, verify). The payload is tried as
//   1. an Example, since a SequenceExample without feature_lists is byte for
//      byte an Example (sequence.h);
//   2. a SequenceExample;
//   3. an ExampleListWithContext (ELWC);
// and what no strict decoder takes is raw, with their reasons. An Example
// that is an Example-in-Example (example_list.h: its only features are
// TF-Ranking's serialized_context and serialized_examples, every value a
// valid Example) is kExampleInExample. The order
// settles the wire's ambiguities (field 1 is LEN in all three messages):
// a payload that is a valid Example or SequenceExample stays one, so no
// real Example or SequenceExample is ever shown as an ELWC. An ELWC is not
// taken for either of them because those decoders refuse, by structure,
// what an ELWC turns into when read as them: an ELWC's `examples` field
// read as Features gives map entries whose keys are serialized map entries
// (they start with the tag byte 0x0a or 0x12) and that have no value, and
// its `context` read as FeatureLists gives lists named the same way with no
// steps. Features all kindless under some name holding a control byte, or
// feature lists all stepless under such a name, are never what an Example
// writer makes (example.h, sequence.h), so those payloads fall through to
// the ELWC decoder. Left ambiguous, and decided for the earlier kind: the
// empty payload (an Example with no feature), `12 00` (an ELWC with an
// empty context and no examples, also a SequenceExample with no lists), and
// ELWCs whose every Example's last map entry is empty (`0a 00`).
//
// Thread-safety: pure functions.
#ifndef TFRECORDFS_EXAMPLE_RECORD_H_
#define TFRECORDFS_EXAMPLE_RECORD_H_

#include <string>

#include "absl/strings/string_view.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/example_list.h"
#include "tfrecordfs/example/sequence.h"

namespace tfrecordfs::example {

enum class PayloadKind { kExample, kSequenceExample, kExampleList, kExampleInExample, kRaw };

// "Example", "SequenceExample", "ExampleListWithContext", "ExampleInExample", "raw".
const char* PayloadKindName(PayloadKind kind);

struct DecodedRecord {
  PayloadKind kind = PayloadKind::kRaw;
  FeatureTable example;    // kExample, kExampleInExample: the (outer) Example's features
  SequenceTable sequence;  // kSequenceExample: context and lists
  ExampleListTable list;   // kExampleList, kExampleInExample: examples and context
  // kRaw: why no decoder took the payload ("<Example reason>; <SequenceExample
  // reason>; <ExampleListWithContext reason>").
  std::string raw_reason;
};

// Decodes `payload` by the rules above. Bytes values are views into
// `payload`, which must outlive the result. Never fails: what is not an
// Example, SequenceExample or ELWC is kRaw.
DecodedRecord DecodeRecord(absl::string_view payload);

}  // namespace tfrecordfs::example

#endif  // TFRECORDFS_EXAMPLE_RECORD_H_
