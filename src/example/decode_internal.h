// Pieces of the Example decoder (decode.cc) shared with the SequenceExample
// decoder (sequence.cc); not a public API. The strictness rules are the ones
// example.h states.
#ifndef TFRECORDFS_SRC_EXAMPLE_DECODE_INTERNAL_H_
#define TFRECORDFS_SRC_EXAMPLE_DECODE_INTERNAL_H_

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/example/example.h"

namespace tfrecordfs::example::internal {

enum WireType { kVarint = 0, kI64 = 1, kLen = 2, kStartGroup = 3, kEndGroup = 4, kI32 = 5 };

// A cursor over one message's bytes; `base` is the offset of `data` in the
// whole payload, and `what` the message kind, for error messages.
class Cursor {
 public:
  Cursor(absl::string_view data, size_t base, const char* what = "tf.train.Example")
      : data_(data), base_(base), what_(what) {}

  bool done() const { return pos_ >= data_.size(); }
  size_t offset() const { return base_ + pos_; }

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("not a ", what_, ": ", what, " at payload byte ", offset()));
  }

  absl::Status Varint(uint64_t* out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (pos_ >= data_.size()) return Error("truncated varint");
      const uint8_t b = static_cast<uint8_t>(data_[pos_++]);
      if (shift == 63 && b > 1) return Error("varint overflows 64 bits");
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        *out = v;
        return absl::OkStatus();
      }
    }
    return Error("varint longer than 10 bytes");
  }

  absl::Status Tag(uint32_t* field, WireType* type) {
    uint64_t tag = 0;
    if (auto s = Varint(&tag); !s.ok()) return s;
    if ((tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) return Error("invalid field number");
    *field = static_cast<uint32_t>(tag >> 3);
    *type = static_cast<WireType>(tag & 7);
    return absl::OkStatus();
  }

  // Reads a LEN payload; `*sub_base` receives its payload offset.
  absl::Status Bytes(absl::string_view* out, size_t* sub_base) {
    uint64_t n = 0;
    if (auto s = Varint(&n); !s.ok()) return s;
    if (n > data_.size() - pos_) return Error("length-delimited field runs past its end");
    *sub_base = base_ + pos_;
    *out = data_.substr(pos_, n);
    pos_ += n;
    return absl::OkStatus();
  }

  absl::Status Fixed32(uint32_t* out) {
    if (data_.size() - pos_ < 4) return Error("truncated fixed32");
    uint32_t v;
    std::memcpy(&v, data_.data() + pos_, 4);  // protobuf fixed32 is little-endian
    pos_ += 4;
    *out = v;
    return absl::OkStatus();
  }

 private:
  absl::string_view data_;
  size_t base_;
  const char* what_;
  size_t pos_ = 0;
};

inline absl::Status Unexpected(const Cursor& c, absl::string_view message, uint32_t field,
                        WireType type) {
  return c.Error(absl::StrCat("unexpected field ", field, " (wire type ", static_cast<int>(type),
                              ") in ", message));
}

// Decodes a Feature message body into `f` (merging, as protobuf does).
absl::Status DecodeFeature(absl::string_view data, size_t base, Feature* f);
// Decodes a Features map entry (key = name, value = Feature) into `f`.
absl::Status DecodeEntry(absl::string_view data, size_t base, Feature* f);

}  // namespace tfrecordfs::example::internal

#endif  // TFRECORDFS_SRC_EXAMPLE_DECODE_INTERNAL_H_
