// Generated test bytes: incompressible and text-like, reproducible from a
// seed, and protobuf wire bytes written by hand. Header-only; pure functions.
#ifndef TFRECORDFS_TESTS_TESTING_BYTES_H_
#define TFRECORDFS_TESTS_TESTING_BYTES_H_

#include <cstdint>
#include <cstring>
#include <random>
#include <string>

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

// Protobuf wire encoding by hand, so that a test's payloads are not the
// project's encoder's: a varint, and a length-delimited field.
inline std::string WireVarint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}
inline std::string WireLen(int field, const std::string& bytes) {
  return WireVarint(static_cast<uint64_t>(field) << 3 | 2) + WireVarint(bytes.size()) + bytes;
}
// Example{label: int64 [label], text: bytes [text]}, by hand.
inline std::string LabelTextExample(uint64_t label, const std::string& text) {
  const std::string f_label = WireLen(3, WireLen(1, WireVarint(label)));
  const std::string f_text = WireLen(1, WireLen(1, text));
  return WireLen(1, WireLen(1, WireLen(1, "label") + WireLen(2, f_label)) +
                        WireLen(1, WireLen(1, "text") + WireLen(2, f_text)));
}

}  // namespace tfrecordfs::test

#endif  // TFRECORDFS_TESTS_TESTING_BYTES_H_
