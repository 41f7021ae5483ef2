// A protobuf wire-format cursor with protobuf's own limits (private to the
// tensor module). Stricter than protobuf only where protobuf would silently
// truncate: a 10th varint byte above 0x01, a 5th tag byte above 0x0f.
//
// Thread-safety: a Cursor is a value; distinct cursors are independent.
#ifndef TFRECORDFS_SRC_TENSOR_WIRE_H_
#define TFRECORDFS_SRC_TENSOR_WIRE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tfrecordfs::tensor::wire {

enum WireType { kVarint = 0, kI64 = 1, kLen = 2, kI32 = 5 };

// One field as read off the wire. For kLen, `bytes` is the payload and
// `offset` its position in the whole input; for the others `scalar` holds
// the value (fixed32/fixed64 little-endian bits).
struct Field {
  uint32_t number = 0;
  WireType type = kVarint;
  uint64_t scalar = 0;
  absl::string_view bytes;
  size_t offset = 0;  // of the field's tag, or of `bytes` for kLen
};

class Cursor {
 public:
  // `what` names the message in errors ("not a <what>: ..."); `base` is the
  // offset of `data` in the whole input.
  Cursor(absl::string_view data, size_t base, const char* what)
      : data_(data), base_(base), what_(what) {}

  bool done() const { return pos_ >= data_.size(); }
  size_t offset() const { return base_ + pos_; }

  absl::Status Error(absl::string_view why) const { return ErrorAt(why, offset()); }
  absl::Status ErrorAt(absl::string_view why, size_t at) const {
    return absl::InvalidArgumentError(absl::StrCat("not a ", what_, ": ", why, " at byte ", at));
  }

  // A varint of at most `max_bytes` bytes; the last allowed byte must leave
  // the value below 2^`max_bits`.
  absl::Status Varint(uint64_t* out, int max_bytes = 10, int max_bits = 64) {
    uint64_t v = 0;
    for (int i = 0; i < max_bytes; ++i) {
      if (pos_ >= data_.size()) return Error("truncated varint");
      const uint8_t b = static_cast<uint8_t>(data_[pos_++]);
      const int shift = 7 * i;
      if (i == max_bytes - 1 && max_bits - shift < 7 && (b >> (max_bits - shift)) != 0) {
        return Error("varint overflows");
      }
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        *out = v;
        return absl::OkStatus();
      }
    }
    return Error("varint too long");
  }

  // The next field, whole: tag (at most 5 bytes, field >= 1), then the value
  // by wire type (lengths at most 5 bytes and < 2^31, within the input).
  absl::Status Next(Field* f) {
    const size_t at = offset();
    uint64_t tag = 0;
    if (auto s = Varint(&tag, 5, 32); !s.ok()) return s;
    f->number = static_cast<uint32_t>(tag >> 3);
    if (f->number == 0) return ErrorAt("field number 0", at);
    f->offset = at;
    f->bytes = {};
    f->scalar = 0;
    switch (tag & 7) {
      case kVarint:
        f->type = kVarint;
        return Varint(&f->scalar);
      case kI64:
        f->type = kI64;
        return Fixed(8, &f->scalar);
      case kI32:
        f->type = kI32;
        return Fixed(4, &f->scalar);
      case kLen: {
        f->type = kLen;
        uint64_t n = 0;
        if (auto s = Varint(&n, 5, 31); !s.ok()) return s;
        if (n > data_.size() - pos_) return Error("length-delimited field runs past its end");
        f->offset = offset();
        f->bytes = data_.substr(pos_, n);
        pos_ += n;
        return absl::OkStatus();
      }
      default:
        return ErrorAt(absl::StrCat("wire type ", tag & 7, " (field ", f->number, ")"), at);
    }
  }

 private:
  absl::Status Fixed(int n, uint64_t* out) {
    if (data_.size() - pos_ < static_cast<size_t>(n)) return Error("truncated fixed-width value");
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_ + i])) << (8 * i);
    pos_ += n;
    *out = v;
    return absl::OkStatus();
  }

  absl::string_view data_;
  size_t base_;
  const char* what_;
  size_t pos_ = 0;
};

inline void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

inline size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

}  // namespace tfrecordfs::tensor::wire

#endif  // TFRECORDFS_SRC_TENSOR_WIRE_H_
