// What a TFRecord payload is: a tf.train.Example, a tf.train.SequenceExample,
// or raw bytes (anything else: TensorBoard events, ranking protos, strings).
//
// DecodeRecord is the one place that decides, for every caller (the record
// view, the kind sampler, schema, show, verify): the payload is tried as an
// Example first, since a SequenceExample without feature_lists is byte for
// byte an Example (sequence.h), then as a SequenceExample; what neither
// strict decoder takes is raw, with both decoders' reasons.
//
// Thread-safety: pure functions.
#ifndef TFRECORDFS_EXAMPLE_RECORD_H_
#define TFRECORDFS_EXAMPLE_RECORD_H_

#include <string>

#include "absl/strings/string_view.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/sequence.h"

namespace tfrecordfs::example {

enum class PayloadKind { kExample, kSequenceExample, kRaw };

// "Example", "SequenceExample", "raw".
const char* PayloadKindName(PayloadKind kind);

struct DecodedRecord {
  PayloadKind kind = PayloadKind::kRaw;
  FeatureTable example;    // kExample: the features
  SequenceTable sequence;  // kSequenceExample: context and lists
  // kRaw: why neither decoder took the payload ("<Example reason>; <SequenceExample reason>").
  std::string raw_reason;
};

// Decodes `payload` by the rules above. Bytes values are views into
// `payload`, which must outlive the result. Never fails: what is not an
// Example or a SequenceExample is kRaw.
DecodedRecord DecodeRecord(absl::string_view payload);

}  // namespace tfrecordfs::example

#endif  // TFRECORDFS_EXAMPLE_RECORD_H_
