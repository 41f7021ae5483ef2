// tf.train.Example payloads <-> a flat feature table.
//
// DecodeExample is a hand-written, allocation-light reader of the protobuf
// wire format that keeps byte values as views into the payload, so callers
// know where every bytes value lives (the read path serves image bytes
// straight from the shard). It is strict: anything an Example writer would
// never produce makes it fail, so that other protos that happen to parse
// (TensorBoard events, ExampleListWithContext) are shown raw instead of as
// garbage features. The rules, checked against protobuf by the tests:
//   * field numbers/wire types other than Example.features=1 (LEN),
//     Features.feature=1 (LEN), map entry key=1/value=2 (LEN), Feature
//     bytes_list=1/float_list=2/int64_list=3 (LEN) and the list values=1 are
//     rejected (unknown fields, groups, wrong wire types);
//   * map keys must be valid UTF-8 (proto3 `string`);
//   * repeated numeric values may be packed, unpacked, or several packed
//     runs; all are concatenated in order, as protobuf and TensorFlow do;
//   * a repeated Features or list message is merged; within a Feature a later
//     kind replaces an earlier one (oneof); a repeated key: last entry wins;
//   * a map entry without a value, or an empty Feature{}, is kind kNone;
//   * a payload whose features are all kNone while some name holds control
//     bytes (other than tab) is rejected: that is another message read as an
//     Example (an ExampleListWithContext without context: its "names" are
//     serialized map entries), never what an Example writer produces.
//
// Thread-safety: pure functions.
#ifndef TFRECORDFS_EXAMPLE_EXAMPLE_H_
#define TFRECORDFS_EXAMPLE_EXAMPLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tfrecordfs::example {

enum class Kind : uint8_t { kNone = 0, kBytes = 1, kFloat = 2, kInt64 = 3 };

const char* KindName(Kind kind);

struct Feature {
  std::string name;
  Kind kind = Kind::kNone;
  // For kBytes: views into the buffer the feature was decoded from (or into
  // storage the caller owns when building a table to encode).
  std::vector<absl::string_view> bytes;
  std::vector<float> floats;
  std::vector<int64_t> int64s;

  size_t size() const;  // number of values of its kind
};

// Features sorted by name (bytewise), names unique.
struct FeatureTable {
  std::vector<Feature> features;
};

// Decodes a serialized tf.train.Example. The returned views point into
// `payload`, which must outlive the table. Fails with InvalidArgumentError
// ("not a tf.train.Example: ... at payload byte N") when the payload is not
// an Example by the rules above.
absl::StatusOr<FeatureTable> DecodeExample(absl::string_view payload);

// Serializes a table as a tf.train.Example through the generated protobuf
// classes, deterministically (map keys sorted). kNone features are written
// as an empty Feature{}.
std::string EncodeExample(const FeatureTable& table);

}  // namespace tfrecordfs::example

#endif  // TFRECORDFS_EXAMPLE_EXAMPLE_H_
