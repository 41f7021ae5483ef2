// Builds feature tables from fuzz bytes for the naming and staging targets:
// either the input decodes as an Example (a table exactly as the mount sees
// one), or it is read as a small program of features with awkward names
// (empty, ".", "..", '/' at the ends or doubled, NUL, controls, '%', '~',
// digits, names over 255 bytes, names colliding with directories or with
// record.bin) and values of every kind.
#ifndef TFRECORDFS_TESTS_FUZZ_TABLE_GEN_H_
#define TFRECORDFS_TESTS_FUZZ_TABLE_GEN_H_

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "tfrecordfs/base/utf8.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/tensor/tensor.h"

namespace tfrecordfs::fuzz {

// A table plus the buffer its bytes views point into (the "payload").
struct GenTable {
  std::string payload;
  example::FeatureTable table;
};

inline constexpr const char* kNameDictionary[] = {
    "",
    ".",
    "..",
    "/",
    "//",
    "a/",
    "/a",
    "a//b",
    "image",
    "image/encoded",
    "image/encoded/x",
    "record.bin",
    "record",
    "0",
    "1",
    "12",
    "007",
    "0.jpg",
    "a.txt",
    "a.bin",
    "x~",
    "~",
    "%",
    "%2F",
    "%-",
    "%+",
    "a%+",
    ".hidden",
    "a/.b",
    "a/..",
    "a/0",
    "a/1",
    "label",
    "label/x",
    "\xc3\xa9t\xc3\xa9",
    "tab\tname",
    "new\nline",
    "a/b/c/d/e",
};

// Reads one feature name from the input: a dictionary word, raw bytes, a
// long repetition, or a join of two of those with '/'.
inline std::string GenName(Bytes& in, int depth = 0) {
  const uint8_t how = in.U8();
  std::string name;
  switch (how % 6) {
    case 0:
    case 1:
      name = kNameDictionary[in.U8() % (sizeof kNameDictionary / sizeof *kNameDictionary)];
      break;
    case 2:
      name = std::string(in.Str(40));
      break;
    case 3: {  // long: a piece repeated up to ~600 bytes
      const std::string piece(in.Str(8));
      const size_t reps = 1 + in.U8() * 3;
      for (size_t i = 0; i < reps && name.size() < 700; ++i) name += piece.empty() ? "x" : piece;
      break;
    }
    default:
      if (depth < 3) {
        name = GenName(in, depth + 1);
        name += '/';
        name += GenName(in, depth + 1);
      } else {
        name = std::string(in.Str(10));
      }
      break;
  }
  return name;
}

inline std::string GenBytesValue(Bytes& in) {
  static constexpr const char* kMagic[] = {
      "\xff\xd8\xff", "\x89PNG\r\n\x1a\n", "GIF89a",    "%PDF-",
      "\x1f\x8b",     "PK\x03\x04",        "\x93NUMPY", "{"};
  const uint8_t how = in.U8();
  if (how % 8 == 1) {
    // A tensor as tf.io.serialize_tensor writes it: .png / .npy views.
    static constexpr tensor::DataType kTypes[] = {
        tensor::DataType::kUint8, tensor::DataType::kUint16, tensor::DataType::kFloat,
        tensor::DataType::kBool};
    const tensor::DataType dt = kTypes[in.U8() % 4];
    std::vector<int64_t> shape;
    const int rank = in.U8() % 4;
    for (int i = 0; i < rank; ++i) shape.push_back(in.U8() % 5);
    std::string data(static_cast<size_t>(tensor::NumBytes(dt, shape).value()), '\0');
    for (char& c : data) c = static_cast<char>(in.U8());
    return tensor::EncodeTensor(dt, shape, data).value();
  }
  std::string v;
  if (how % 4 == 0) v = kMagic[in.U8() % (sizeof kMagic / sizeof *kMagic)];
  v += std::string(in.Str(how % 4 == 3 ? 255 : 24));
  return v;
}

// Reads up to 11 features; later ones of the same name replace earlier ones
// (as in a decoded table, where the last map entry wins).
inline GenTable GenFeatures(Bytes& in) {
  struct Owned {
    example::Kind kind;
    std::vector<std::string> bytes;
    std::vector<float> floats;
    std::vector<int64_t> int64s;
  };
  std::map<std::string, Owned> by_name;  // a later feature of a name replaces it
  const int n = in.U8() % 12;
  for (int i = 0; i < n && !in.empty(); ++i) {
    std::string name = GenName(in);
    if (!IsValidUtf8(name)) continue;  // DecodeExample never yields such names
    Owned f;
    f.kind = static_cast<example::Kind>(in.U8() % 4);
    const int count = in.U8() % 5;
    for (int k = 0; k < count; ++k) {
      switch (f.kind) {
        case example::Kind::kBytes:
          f.bytes.push_back(GenBytesValue(in));
          break;
        case example::Kind::kFloat: {
          const uint32_t bits = in.U32();
          float v;
          std::memcpy(&v, &bits, 4);
          f.floats.push_back(v);
          break;
        }
        case example::Kind::kInt64:
          f.int64s.push_back(static_cast<int64_t>(in.U64()));
          break;
        case example::Kind::kNone:
          break;
      }
    }
    by_name[name] = std::move(f);
  }
  GenTable out;
  size_t total = 0;
  for (const auto& [name, f] : by_name) {
    for (const auto& b : f.bytes) total += b.size();
  }
  // The views below must not move: reserve, and stay clear of the small-string
  // buffer (which a move of GenTable would copy).
  out.payload.reserve(std::max<size_t>(total, 64));
  for (auto& [name, f] : by_name) {
    example::Feature feature;
    feature.name = name;
    feature.kind = f.kind;
    for (const auto& b : f.bytes) {
      const size_t at = out.payload.size();
      out.payload += b;
      feature.bytes.emplace_back(out.payload.data() + at, b.size());
    }
    feature.floats = f.floats;
    feature.int64s = f.int64s;
    out.table.features.push_back(std::move(feature));
  }
  return out;
}

}  // namespace tfrecordfs::fuzz

#endif  // TFRECORDFS_TESTS_FUZZ_TABLE_GEN_H_
