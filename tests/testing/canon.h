// A canonical, owning form of an Example's features that every side of a
// cross-check converts to: our decoder's FeatureTable, protobuf's generated
// proto::Example, a layout read back from disk. Floats are kept as bit
// patterns, so NaN payloads and -0.0 compare exactly.
//
// Contract:
//   * FromTable keeps every feature, kindless ones too (kind kNone, no
//     values): a mount shows them (`<name>.none`), so they round-trip;
//   * FromProto maps a Feature with no oneof case to kNone;
//   * a later feature with the same name replaces an earlier one (neither
//     input has duplicates when it is valid).
//
// Thread-safety: pure functions.
#ifndef TFRECORDFS_TESTS_TESTING_CANON_H_
#define TFRECORDFS_TESTS_TESTING_CANON_H_

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/base/casts.h"
#include "example.pb.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/sequence.h"

namespace tfrecordfs::test {

inline uint32_t Bits(float f) { return absl::bit_cast<uint32_t>(f); }
inline float FromBits(uint32_t b) { return absl::bit_cast<float>(b); }

struct Canon {
  example::Kind kind = example::Kind::kNone;
  std::vector<std::string> bytes;
  std::vector<uint32_t> float_bits;
  std::vector<int64_t> int64s;
  bool operator==(const Canon& o) const = default;
};
using CanonTable = std::map<std::string, Canon>;

// Kind, then the values (bytes C-hex-escaped, floats as hex bits).
std::ostream& operator<<(std::ostream& os, const Canon& c);

Canon ToCanon(const example::Feature& f);
CanonTable FromTable(const example::FeatureTable& t);
CanonTable FromProto(const proto::Example& ex);

// A SequenceExample as text for comparing feature by feature with a readable
// diff: one line per context feature (kindless ones too), then per feature list its
// name, its step count and one line per step. Values are exact: floats as
// bits, bytes C-escaped, and a value longer than 80 bytes as its first 80
// bytes, its size and a 64-bit hash of all of it.
std::string SequenceText(const example::SequenceTable& t);

}  // namespace tfrecordfs::test

#endif  // TFRECORDFS_TESTS_TESTING_CANON_H_
