// Building example::Feature values by hand, for tests that make feature
// tables to encode (several unit and ops tests used to keep a copy).
//
// Contract: MakeFeature returns a feature named `name` holding `values`, of
// the kind their type says: absl::string_view or std::string -> kBytes,
// float -> kFloat, int64_t -> kInt64. `FeatureT` is example::Feature (its
// bytes are views: they point wherever `values` do, so that storage must
// outlive the feature) or any struct with the same fields (the mount tests'
// OwnedFeature, which owns its bytes). Thread-safety: pure.
#ifndef TFRECORDFS_TESTS_TESTING_MAKE_FEATURE_H_
#define TFRECORDFS_TESTS_TESTING_MAKE_FEATURE_H_

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "tfrecordfs/example/example.h"

namespace tfrecordfs::test {

template <typename FeatureT = example::Feature, typename T>
FeatureT MakeFeature(std::string name, std::vector<T> values) {
  FeatureT f;
  f.name = std::move(name);
  if constexpr (std::is_same_v<T, absl::string_view> || std::is_same_v<T, std::string>) {
    f.kind = example::Kind::kBytes;
    f.bytes = std::move(values);
  } else if constexpr (std::is_same_v<T, float>) {
    f.kind = example::Kind::kFloat;
    f.floats = std::move(values);
  } else {
    static_assert(std::is_same_v<T, int64_t>, "a feature holds bytes, floats or int64s");
    f.kind = example::Kind::kInt64;
    f.int64s = std::move(values);
  }
  return f;
}

}  // namespace tfrecordfs::test

#endif  // TFRECORDFS_TESTS_TESTING_MAKE_FEATURE_H_
