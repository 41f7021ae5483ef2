// The protobuf wire format, read with protobuf's own limits: the one cursor
// every hand-written decoder uses (Example and SequenceExample in example/,
// TensorProto in tensor/).
//
// Limits (protobuf 3.21's parse_context.h, checked against the library by
// tests/unit/example_test.cc and the fuzz targets): a varint this cursor
// accepts, protobuf accepts with the same value, and the other way round:
//   values   at most 10 bytes; bits past the 64th are dropped (VarintParse);
//   tags     at most 5 bytes, kept modulo 2^32 (ReadTag); field number >= 1;
//   lengths  at most 5 bytes and below 2^31 - 16 (ReadSize refuses sizes of
//            2 GiB or more, and those near INT_MAX).
//
// Errors are InvalidArgument: "not a <what>: <why> at <unit> <offset>",
// where offset counts from the start of the whole input (`base` locates a
// sub-message's bytes in it).
//
// Thread-safety: a Cursor is a value over borrowed bytes; distinct cursors
// are independent.
#ifndef TFRECORDFS_BASE_WIRE_H_
#define TFRECORDFS_BASE_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tfrecordfs::wire {

enum WireType { kVarint = 0, kI64 = 1, kLen = 2, kStartGroup = 3, kEndGroup = 4, kI32 = 5 };

// One field as read off the wire (Cursor::Next). For kLen, `bytes` is the
// payload and `offset` its position in the whole input; for the others
// `scalar` holds the value (fixed32/fixed64 as little-endian bits) and
// `offset` the position of the tag.
struct Field {
  uint32_t number = 0;
  WireType type = kVarint;
  uint64_t scalar = 0;
  absl::string_view bytes;
  size_t offset = 0;
};

class Cursor {
 public:
  // `data` is the message's bytes, at offset `base` of the whole input;
  // `what` names the message in errors, `unit` what offsets count.
  Cursor(absl::string_view data, size_t base, const char* what, const char* unit = "payload byte")
      : data_(data), base_(base), what_(what), unit_(unit) {}

  bool done() const { return pos_ >= data_.size(); }
  size_t offset() const { return base_ + pos_; }

  absl::Status Error(absl::string_view why) const { return ErrorAt(why, offset()); }
  absl::Status ErrorAt(absl::string_view why, size_t at) const;

  absl::Status Varint(uint64_t* out) { return VarintOfAtMost(10, "varint", out); }
  absl::Status Tag(uint32_t* field, WireType* type);
  // A LEN field's payload; `*sub_base` receives its offset in the whole input.
  absl::Status Bytes(absl::string_view* out, size_t* sub_base);
  absl::Status Fixed32(uint32_t* out);
  absl::Status Fixed64(uint64_t* out);
  // The next field, whole: its tag, then its value by wire type (groups and
  // unknown wire types are errors).
  absl::Status Next(Field* f);

 private:
  static constexpr uint64_t kMaxLength = 0x7fffffff - 16;  // ParseContext's slop
  absl::Status VarintOfAtMost(int max_bytes, absl::string_view what, uint64_t* out);
  absl::Status Fixed(int n, uint64_t* out);

  absl::string_view data_;
  size_t base_;
  const char* what_;
  const char* unit_;
  size_t pos_ = 0;
};

// Appends `v` as a varint.
void PutVarint(std::string* out, uint64_t v);
// The bytes PutVarint writes for `v`.
size_t VarintSize(uint64_t v);

}  // namespace tfrecordfs::wire

#endif  // TFRECORDFS_BASE_WIRE_H_
