#include "tfrecordfs/reference/wire.h"

#include <cstring>

#include "tfrecordfs/base/coding.h"

namespace tfrecordfs::reference::wire {

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

std::string VarintBytes(uint64_t v) {
  std::string s;
  PutVarint(&s, v);
  return s;
}

std::string Tag(uint32_t field, int wire_type) {
  return VarintBytes((uint64_t{field} << 3) | static_cast<uint64_t>(wire_type));
}

std::string Len(uint32_t field, absl::string_view body) {
  std::string s = Tag(field, 2);
  PutVarint(&s, body.size());
  s.append(body.data(), body.size());
  return s;
}

std::string Varint(uint32_t field, uint64_t v) {
  std::string s = Tag(field, 0);
  PutVarint(&s, v);
  return s;
}

std::string Fixed32(uint32_t field, uint32_t bits) {
  std::string s = Tag(field, 5);
  PutFixed32(&s, bits);
  return s;
}

std::string Fixed64(uint32_t field, uint64_t bits) {
  std::string s = Tag(field, 1);
  PutFixed64(&s, bits);
  return s;
}

namespace {
uint32_t BitsOf(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}
}  // namespace

std::string Float(uint32_t field, float v) { return Fixed32(field, BitsOf(v)); }

std::string PackedVarints(std::initializer_list<int64_t> vs) {
  std::string body;
  for (int64_t v : vs) PutVarint(&body, static_cast<uint64_t>(v));
  return Len(1, body);
}

std::string PackedFloats(std::initializer_list<float> vs) {
  std::string body;
  for (float v : vs) PutFixed32(&body, BitsOf(v));
  return Len(1, body);
}

std::string PackedFixed32s(std::initializer_list<uint32_t> bits) {
  std::string body;
  for (uint32_t b : bits) PutFixed32(&body, b);
  return Len(1, body);
}

std::string BytesValues(std::initializer_list<absl::string_view> vs) {
  std::string s;
  for (absl::string_view v : vs) s += Len(1, v);
  return s;
}

std::string BytesFeature(absl::string_view list) { return Len(1, list); }
std::string FloatFeature(absl::string_view list) { return Len(2, list); }
std::string Int64Feature(absl::string_view list) { return Len(3, list); }

std::string MapEntry(absl::string_view key, absl::string_view feature) {
  return Len(1, Len(1, key) + Len(2, feature));
}

std::string ExampleOf(absl::string_view entries) { return Len(1, entries); }

std::string ExampleOf(std::initializer_list<absl::string_view> entries) {
  std::string body;
  for (absl::string_view e : entries) body.append(e.data(), e.size());
  return Len(1, body);
}

}  // namespace tfrecordfs::reference::wire
