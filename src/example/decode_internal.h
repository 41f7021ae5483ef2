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

  // The varint limits are protobuf's own (parse_context.h in 3.21, checked
  // against the library in tests/unit/example_test.cc): a varint this
  // decoder accepts, protobuf accepts with the same value, and the other
  // way round:
  //   values   at most 10 bytes; bits past the 64th are dropped (VarintParse);
  //   tags     at most 5 bytes, kept modulo 2^32 (ReadTag);
  //   lengths  at most 5 bytes and below 2^31 - 16 (ReadSize refuses sizes
  //            of 2 GiB or more, and those near INT_MAX).
  absl::Status Varint(uint64_t* out) { return VarintOfAtMost(10, "varint", out); }

  absl::Status Tag(uint32_t* field, WireType* type) {
    uint64_t tag = 0;
    if (auto s = VarintOfAtMost(5, "tag", &tag); !s.ok()) return s;
    const uint32_t tag32 = static_cast<uint32_t>(tag);
    if ((tag32 >> 3) == 0) return Error("invalid field number");
    *field = tag32 >> 3;
    *type = static_cast<WireType>(tag32 & 7);
    return absl::OkStatus();
  }

  // Reads a LEN payload; `*sub_base` receives its payload offset.
  absl::Status Bytes(absl::string_view* out, size_t* sub_base) {
    uint64_t n = 0;
    if (auto s = VarintOfAtMost(5, "length", &n); !s.ok()) return s;
    if (n > kMaxLength) return Error("length-delimited field of 2 GiB or more");
    if (n > data_.size() - pos_) return Error("length-delimited field runs past its end");
    *sub_base = base_ + pos_;
    *out = data_.substr(pos_, n);
    pos_ += n;
    return absl::OkStatus();
  }

  absl::Status Fixed32(uint32_t* out) {
    if (data_.size() - pos_ < 4) return Error("truncated fixed32");
    uint32_t v = 0;
    std::memcpy(&v, data_.data() + pos_, 4);  // protobuf fixed32 is little-endian
    pos_ += 4;
    *out = v;
    return absl::OkStatus();
  }

 private:
  // protobuf's ParseContext::kSlopBytes: ReadSize refuses a size above
  // INT_MAX - 16.
  static constexpr uint64_t kMaxLength = 0x7fffffff - 16;

  // A varint of at most `max_bytes` bytes; bits past the 64th are dropped.
  absl::Status VarintOfAtMost(int max_bytes, absl::string_view what, uint64_t* out) {
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
