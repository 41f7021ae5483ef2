// tensorflow.serving.ExampleListWithContext (ELWC) payloads, the records of
// TF-Ranking datasets (tensorflow_serving/apis/input.proto):
//
//   ExampleListWithContext { repeated Example examples = 1; Example context = 2; }
//
// DecodeExampleList is strict in the way DecodeExample is (example.h): the
// top level holds only LEN fields 1 and 2, every `examples` entry and the
// `context` must each decode as a tf.train.Example by DecodeExample's rules
// (unknown fields, wrong wire types, keys that are not UTF-8 all reject the
// payload). A second `context` field (protobuf would merge the two) is
// rejected too: no ELWC writer splits the context, and the table's views
// must point into the payload.
//
// An ELWC is byte for byte ambiguous with an Example or a SequenceExample in
// a few shapes (field 1 of all three is LEN); which one a payload is, is
// decided by example/record.h's DecodeRecord, in one place.
//
// TF-Ranking's other list format, Example-in-Example (EIE, tensorflow_ranking
// data.py), is a tf.train.Example of two bytes features: `serialized_examples`
// (each value a serialized Example) and `serialized_context` (one value, a
// serialized Example). ExampleListFromEie takes a decoded Example for one
// when its features are exactly those (the context optional), the context
// has one value, and every value decodes as an Example by DecodeExample's
// rules; any other Example is not one.
//
// Thread-safety: pure functions.
#ifndef TFRECORDFS_EXAMPLE_EXAMPLE_LIST_H_
#define TFRECORDFS_EXAMPLE_EXAMPLE_LIST_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/example/example.h"

namespace tfrecordfs::example {

struct ExampleListTable {
  std::vector<FeatureTable> examples;  // in wire order
  bool has_context = false;            // the payload has a `context` field (maybe empty)
  FeatureTable context;
};

// Decodes a serialized ExampleListWithContext by the rules above. Bytes
// values are views into `payload`, which must outlive the table. Fails with
// InvalidArgumentError ("not a tensorflow.serving.ExampleListWithContext:
// ... at payload byte N", the offset counted from the payload's start).
absl::StatusOr<ExampleListTable> DecodeExampleList(absl::string_view payload);

// Serializes a table: every example as an `examples` field (EncodeExample),
// in order, then `context` when has_context.
std::string EncodeExampleList(const ExampleListTable& table);

inline constexpr absl::string_view kEieContextKey = "serialized_context";
inline constexpr absl::string_view kEieExamplesKey = "serialized_examples";

// The list an Example-in-Example holds (rules above): views into the bytes
// `outer`'s values view. InvalidArgument saying why `outer` is not one.
absl::StatusOr<ExampleListTable> ExampleListFromEie(const FeatureTable& outer);

// Serializes a table as an Example-in-Example: `serialized_context` (when
// has_context) and `serialized_examples` (every example, EncodeExample),
// through EncodeExample.
std::string EncodeExampleInExample(const ExampleListTable& table);

}  // namespace tfrecordfs::example

#endif  // TFRECORDFS_EXAMPLE_EXAMPLE_LIST_H_
