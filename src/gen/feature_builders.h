// Building the feature tables tfrecordfs-gen encodes (private to src/gen).
//
// Contract: Bytes() keeps the views it is given; the caller keeps their
// storage alive until the table is encoded. Sort() orders a table by name, as
// example::EncodeExample's deterministic output and the mount expect.
//
// Thread-safety: pure functions.
#ifndef TFRECORDFS_SRC_GEN_FEATURE_BUILDERS_H_
#define TFRECORDFS_SRC_GEN_FEATURE_BUILDERS_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "tfrecordfs/example/example.h"

namespace tfrecordfs::gen {

// A feature of `kind` with no values yet.
inline example::Feature Named(std::string name, example::Kind kind) {
  example::Feature f;
  f.name = std::move(name);
  f.kind = kind;
  return f;
}

inline example::Feature Int64s(std::string name, std::vector<int64_t> v) {
  example::Feature f = Named(std::move(name), example::Kind::kInt64);
  f.int64s = std::move(v);
  return f;
}

inline example::Feature Floats(std::string name, std::vector<float> v) {
  example::Feature f = Named(std::move(name), example::Kind::kFloat);
  f.floats = std::move(v);
  return f;
}

inline example::Feature Bytes(std::string name, std::vector<absl::string_view> v) {
  example::Feature f = Named(std::move(name), example::Kind::kBytes);
  f.bytes = std::move(v);
  return f;
}

inline void Sort(example::FeatureTable* t) {
  std::sort(t->features.begin(), t->features.end(),
            [](const example::Feature& a, const example::Feature& b) { return a.name < b.name; });
}

}  // namespace tfrecordfs::gen

#endif  // TFRECORDFS_SRC_GEN_FEATURE_BUILDERS_H_
