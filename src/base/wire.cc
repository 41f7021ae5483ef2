#include "tfrecordfs/base/wire.h"

#include "absl/strings/str_cat.h"

namespace tfrecordfs::wire {

absl::Status Cursor::ErrorAt(absl::string_view why, size_t at) const {
  return absl::InvalidArgumentError(
      absl::StrCat("not a ", what_, ": ", why, " at ", unit_, " ", at));
}

absl::Status Cursor::VarintOfAtMost(int max_bytes, absl::string_view what, uint64_t* out) {
  uint64_t v = 0;
  for (int i = 0; i < max_bytes; ++i) {
    if (pos_ >= data_.size()) return Error(absl::StrCat("truncated ", what));
    const uint8_t b = static_cast<uint8_t>(data_[pos_++]);
    v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);  // 7 * 9 = 63: no shift past 63
    if (!(b & 0x80)) {
      *out = v;
      return absl::OkStatus();
    }
  }
  return Error(absl::StrCat(what, " longer than ", max_bytes, " bytes"));
}

absl::Status Cursor::Tag(uint32_t* field, WireType* type) {
  uint64_t tag = 0;
  if (auto s = VarintOfAtMost(5, "tag", &tag); !s.ok()) return s;
  const uint32_t tag32 = static_cast<uint32_t>(tag);
  if ((tag32 >> 3) == 0) return Error("invalid field number");
  *field = tag32 >> 3;
  *type = static_cast<WireType>(tag32 & 7);
  return absl::OkStatus();
}

absl::Status Cursor::Bytes(absl::string_view* out, size_t* sub_base) {
  uint64_t n = 0;
  if (auto s = VarintOfAtMost(5, "length", &n); !s.ok()) return s;
  if (n > kMaxLength) return Error("length-delimited field of 2 GiB or more");
  if (n > data_.size() - pos_) return Error("length-delimited field runs past its end");
  *sub_base = base_ + pos_;
  *out = data_.substr(pos_, n);
  pos_ += n;
  return absl::OkStatus();
}

absl::Status Cursor::Fixed(int n, uint64_t* out) {
  if (data_.size() - pos_ < static_cast<size_t>(n)) {
    return Error(absl::StrCat("truncated fixed", 8 * n));
  }
  uint64_t v = 0;  // protobuf's fixed-width values are little-endian
  for (int i = 0; i < n; ++i) {
    v |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_ + i])) << (8 * i);
  }
  pos_ += n;
  *out = v;
  return absl::OkStatus();
}

absl::Status Cursor::Fixed32(uint32_t* out) {
  uint64_t v = 0;
  if (auto s = Fixed(4, &v); !s.ok()) return s;
  *out = static_cast<uint32_t>(v);
  return absl::OkStatus();
}

absl::Status Cursor::Fixed64(uint64_t* out) { return Fixed(8, out); }

absl::Status Cursor::Next(Field* f) {
  const size_t at = offset();
  WireType type = kVarint;
  if (auto s = Tag(&f->number, &type); !s.ok()) return s;
  f->type = type;
  f->offset = at;
  f->bytes = {};
  f->scalar = 0;
  switch (type) {
    case kVarint:
      return Varint(&f->scalar);
    case kI64:
      return Fixed(8, &f->scalar);
    case kI32:
      return Fixed(4, &f->scalar);
    case kLen:
      return Bytes(&f->bytes, &f->offset);
    default:
      return ErrorAt(absl::StrCat("wire type ", static_cast<int>(type), " (field ", f->number, ")"),
                     at);
  }
}

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

}  // namespace tfrecordfs::wire
