#include "wire.h"

#include "absl/strings/str_cat.h"

namespace tfrecordfs::test::wire {

void PutVarint(std::string* s, uint64_t v) {
  while (v >= 0x80) {
    s->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  s->push_back(static_cast<char>(v));
}

std::string VarintBytes(uint64_t v) {
  std::string s;
  PutVarint(&s, v);
  return s;
}

std::string Tag(uint32_t field, int wire) {
  return VarintBytes((uint64_t{field} << 3) | static_cast<uint64_t>(wire));
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

std::string Fixed32(uint32_t field, uint32_t v) {
  std::string s = Tag(field, 5);
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>(v >> (8 * i)));
  return s;
}

std::string PackedVarints(std::initializer_list<int64_t> vs) {
  std::string s;
  for (int64_t v : vs) PutVarint(&s, static_cast<uint64_t>(v));
  return Len(1, s);
}

std::string PackedFloats(std::initializer_list<uint32_t> bits) {
  std::string s;
  for (uint32_t b : bits) {
    for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>(b >> (8 * i)));
  }
  return Len(1, s);
}

std::string Entry(absl::string_view key, absl::string_view feature_body) {
  return Len(1, absl::StrCat(Len(1, key), Len(2, feature_body)));
}

std::string ExampleOf(absl::string_view entries) { return Len(1, entries); }

}  // namespace tfrecordfs::test::wire
