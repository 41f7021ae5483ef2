// tf.train.SequenceExample payloads <-> a context table plus feature lists.
//
//   SequenceExample { Features context = 1; FeatureLists feature_lists = 2; }
//   FeatureLists    { map<string, FeatureList> feature_list = 1; }
//   FeatureList     { repeated Feature feature = 1; }
//
// DecodeSequenceExample is strict in the same way as DecodeExample
// (example.h), whose Feature and Features-entry decoding it reuses:
//   * fields other than the ones above (and the Example decoder's rules
//     inside Features and Feature) are rejected: unknown fields, groups,
//     wrong wire types;
//   * a payload without feature_lists (field 2) is NOT a SequenceExample: it
//     is byte for byte an Example (field 1 = Features), and is decoded as one
//     by DecodeExample. An empty feature_lists (`12 00`) is a SequenceExample
//     with no lists;
//   * repeated context / feature_lists messages merge, as in protobuf; a
//     repeated map key: the last entry wins; a repeated FeatureList value
//     inside one entry merges (its steps concatenate);
//   * list names, like feature names, must be valid UTF-8;
//   * a context whose features are all kindless while some name holds
//     control bytes is rejected, as for an Example (another message that
//     happens to parse); so is a payload whose lists all have no step
//     while some list name holds control bytes (other than tab): an
//     ExampleListWithContext's context read as FeatureLists (record.h).
//
// Thread-safety: pure functions.
#ifndef TFRECORDFS_EXAMPLE_SEQUENCE_H_
#define TFRECORDFS_EXAMPLE_SEQUENCE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/example/example.h"

namespace tfrecordfs::example {

// One feature list: its steps in order. Each step is a Feature whose `name`
// is empty; a step may be kindless (Feature{}).
struct FeatureList {
  std::string name;
  std::vector<Feature> steps;
};

struct SequenceTable {
  FeatureTable context;            // sorted by name, names unique
  std::vector<FeatureList> lists;  // sorted by name (bytewise), names unique
};

// Decodes a serialized tf.train.SequenceExample by the rules above. Bytes
// values are views into `payload`, which must outlive the table. Fails with
// InvalidArgumentError ("not a tf.train.SequenceExample: ... at payload byte
// N") otherwise.
absl::StatusOr<SequenceTable> DecodeSequenceExample(absl::string_view payload);

// Serializes a table as a tf.train.SequenceExample through the generated
// protobuf classes, deterministically (map keys sorted). feature_lists is
// always written (even with no lists), so the result decodes as a
// SequenceExample, never as an Example.
std::string EncodeSequenceExample(const SequenceTable& table);

}  // namespace tfrecordfs::example

#endif  // TFRECORDFS_EXAMPLE_SEQUENCE_H_
