// Generated test bytes: incompressible and text-like, reproducible from a
// seed, and protobuf wire bytes written by hand. Header-only; pure functions.
#ifndef TFRECORDFS_TESTS_TESTING_BYTES_H_
#define TFRECORDFS_TESTS_TESTING_BYTES_H_

#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include "tfrecordfs/reference/wire.h"

namespace tfrecordfs::test {

// `n` bytes from a 64-bit Mersenne twister seeded with `seed`.
inline std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(n, '\0');
  for (size_t i = 0; i + 8 <= n; i += 8) {
    const uint64_t v = rng();
    std::memcpy(&out[i], &v, 8);
  }
  for (size_t i = n - n % 8; i < n; ++i) out[i] = static_cast<char>(rng());
  return out;
}

// Text-like data: compresses about 4:1 with long matches across blocks.
inline std::string TextLike(size_t n, uint64_t seed) {
  static const char* kWords[] = {"tensor", "record", "feature", "image",   "label",      "shard ",
                                 "\n",     "0.25",   "bbox",    "encoded", "float_list", "int64"};
  std::mt19937_64 rng(seed);
  std::string out;
  while (out.size() < n) {
    out += kWords[rng() % 12];
    out += static_cast<char>('a' + rng() % 26);
  }
  out.resize(n);
  return out;
}

// Words that deflate well and refer back to each other, with a 200-byte
// run of random bytes (which do not) about one word in 50: deflate streams
// with both kinds of blocks.
inline std::string WordsWithRandomRuns(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  static const char* kWords[] = {"label", "image", "feature ", "bytes_list", "\n", "0.125 ", "cat"};
  std::string s;
  s.reserve(n + 200);
  while (s.size() < n) {
    if (rng() % 50 == 0) {
      for (int i = 0; i < 200; ++i) s.push_back(static_cast<char>(rng()));
    } else {
      s += kWords[rng() % 7];
    }
  }
  s.resize(n);
  return s;
}

// Example{label: int64 [label], text: bytes [text]}, written by hand
// (reference/wire.h), not by the project's encoder.
inline std::string LabelTextExample(uint64_t label, const std::string& text) {
  namespace wire = reference::wire;
  return wire::ExampleOf({wire::MapEntry("label", wire::Int64Feature(wire::PackedVarints(
                                                      {static_cast<int64_t>(label)}))),
                          wire::MapEntry("text", wire::BytesFeature(wire::BytesValues({text})))});
}

}  // namespace tfrecordfs::test

#endif  // TFRECORDFS_TESTS_TESTING_BYTES_H_
