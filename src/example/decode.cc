#include <algorithm>
#include <cstring>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/base/utf8.h"

namespace tfrecordfs::example {

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kNone:
      return "none";
    case Kind::kBytes:
      return "bytes";
    case Kind::kFloat:
      return "float";
    case Kind::kInt64:
      return "int64";
  }
  return "?";
}

size_t Feature::size() const {
  switch (kind) {
    case Kind::kBytes:
      return bytes.size();
    case Kind::kFloat:
      return floats.size();
    case Kind::kInt64:
      return int64s.size();
    case Kind::kNone:
      break;
  }
  return 0;
}

namespace {

enum WireType { kVarint = 0, kI64 = 1, kLen = 2, kStartGroup = 3, kEndGroup = 4, kI32 = 5 };

// A cursor over one message's bytes; `base` is the offset of `data` in the
// whole payload, for error messages.
class Cursor {
 public:
  Cursor(absl::string_view data, size_t base) : data_(data), base_(base) {}

  bool done() const { return pos_ >= data_.size(); }
  size_t offset() const { return base_ + pos_; }

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("not a tf.train.Example: ", what, " at payload byte ", offset()));
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
    uint64_t tag;
    if (auto s = VarintOfAtMost(5, "tag", &tag); !s.ok()) return s;
    const uint32_t tag32 = static_cast<uint32_t>(tag);
    if ((tag32 >> 3) == 0) return Error("invalid field number");
    *field = tag32 >> 3;
    *type = static_cast<WireType>(tag32 & 7);
    return absl::OkStatus();
  }

  // Reads a LEN payload; `*sub_base` receives its payload offset.
  absl::Status Bytes(absl::string_view* out, size_t* sub_base) {
    uint64_t n;
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
    uint32_t v;
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
  size_t pos_ = 0;
};

absl::Status Unexpected(const Cursor& c, absl::string_view message, uint32_t field,
                        WireType type) {
  return c.Error(absl::StrCat("unexpected field ", field, " (wire type ", static_cast<int>(type),
                              ") in ", message));
}

absl::Status DecodeBytesList(absl::string_view data, size_t base, Feature* f) {
  Cursor c(data, base);
  while (!c.done()) {
    uint32_t field;
    WireType type;
    if (auto s = c.Tag(&field, &type); !s.ok()) return s;
    if (field != 1 || type != kLen) return Unexpected(c, "BytesList", field, type);
    absl::string_view v;
    size_t sub;
    if (auto s = c.Bytes(&v, &sub); !s.ok()) return s;
    f->bytes.push_back(v);
  }
  return absl::OkStatus();
}

absl::Status DecodeFloatList(absl::string_view data, size_t base, Feature* f) {
  Cursor c(data, base);
  while (!c.done()) {
    uint32_t field;
    WireType type;
    if (auto s = c.Tag(&field, &type); !s.ok()) return s;
    if (field == 1 && type == kI32) {
      uint32_t bits;
      if (auto s = c.Fixed32(&bits); !s.ok()) return s;
      float v;
      std::memcpy(&v, &bits, 4);
      f->floats.push_back(v);
    } else if (field == 1 && type == kLen) {
      absl::string_view run;
      size_t sub;
      if (auto s = c.Bytes(&run, &sub); !s.ok()) return s;
      if (run.size() % 4 != 0) return c.Error("packed float run not a multiple of 4 bytes");
      if (run.empty()) continue;  // memcpy into an empty vector's null data() is UB
      const size_t old = f->floats.size();
      f->floats.resize(old + run.size() / 4);
      std::memcpy(f->floats.data() + old, run.data(), run.size());
    } else {
      return Unexpected(c, "FloatList", field, type);
    }
  }
  return absl::OkStatus();
}

absl::Status DecodeInt64List(absl::string_view data, size_t base, Feature* f) {
  Cursor c(data, base);
  while (!c.done()) {
    uint32_t field;
    WireType type;
    if (auto s = c.Tag(&field, &type); !s.ok()) return s;
    if (field == 1 && type == kVarint) {
      uint64_t v;
      if (auto s = c.Varint(&v); !s.ok()) return s;
      f->int64s.push_back(static_cast<int64_t>(v));
    } else if (field == 1 && type == kLen) {
      absl::string_view run;
      size_t sub;
      if (auto s = c.Bytes(&run, &sub); !s.ok()) return s;
      Cursor r(run, sub);
      while (!r.done()) {
        uint64_t v;
        if (auto s = r.Varint(&v); !s.ok()) return s;
        f->int64s.push_back(static_cast<int64_t>(v));
      }
    } else {
      return Unexpected(c, "Int64List", field, type);
    }
  }
  return absl::OkStatus();
}

absl::Status DecodeFeature(absl::string_view data, size_t base, Feature* f) {
  Cursor c(data, base);
  while (!c.done()) {
    uint32_t field;
    WireType type;
    if (auto s = c.Tag(&field, &type); !s.ok()) return s;
    if (field < 1 || field > 3 || type != kLen) return Unexpected(c, "Feature", field, type);
    absl::string_view list;
    size_t sub;
    if (auto s = c.Bytes(&list, &sub); !s.ok()) return s;
    const Kind kind = static_cast<Kind>(field);
    if (f->kind != kind) {  // oneof: a different kind replaces the old one
      f->bytes.clear();
      f->floats.clear();
      f->int64s.clear();
      f->kind = kind;
    }
    absl::Status s = kind == Kind::kBytes   ? DecodeBytesList(list, sub, f)
                     : kind == Kind::kFloat ? DecodeFloatList(list, sub, f)
                                            : DecodeInt64List(list, sub, f);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status DecodeEntry(absl::string_view data, size_t base, Feature* f) {
  Cursor c(data, base);
  while (!c.done()) {
    uint32_t field;
    WireType type;
    if (auto s = c.Tag(&field, &type); !s.ok()) return s;
    if ((field != 1 && field != 2) || type != kLen) {
      return Unexpected(c, "Features map entry", field, type);
    }
    absl::string_view v;
    size_t sub;
    if (auto s = c.Bytes(&v, &sub); !s.ok()) return s;
    if (field == 1) {
      if (!IsValidUtf8(v)) return c.Error("feature name is not valid UTF-8");
      f->name.assign(v.data(), v.size());
    } else if (auto s = DecodeFeature(v, sub, f); !s.ok()) {
      // A repeated value field merges into the same Feature, in order.
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FeatureTable> DecodeExample(absl::string_view payload) {
  // Last occurrence of a key wins, as in protobuf map parsing.
  std::map<std::string, Feature, std::less<>> by_name;
  Cursor c(payload, 0);
  while (!c.done()) {
    uint32_t field;
    WireType type;
    if (auto s = c.Tag(&field, &type); !s.ok()) return s;
    if (field != 1 || type != kLen) return Unexpected(c, "Example", field, type);
    absl::string_view features;
    size_t fbase;
    if (auto s = c.Bytes(&features, &fbase); !s.ok()) return s;
    Cursor fc(features, fbase);
    while (!fc.done()) {
      if (auto s = fc.Tag(&field, &type); !s.ok()) return s;
      if (field != 1 || type != kLen) return Unexpected(fc, "Features", field, type);
      absl::string_view entry;
      size_t ebase;
      if (auto s = fc.Bytes(&entry, &ebase); !s.ok()) return s;
      Feature f;
      if (auto s = DecodeEntry(entry, ebase, &f); !s.ok()) return s;
      std::string name = f.name;
      by_name.insert_or_assign(std::move(name), std::move(f));
    }
  }
  // Another message whose field 1 holds Examples (an ExampleListWithContext
  // without its context) parses as an Example whose "entries" are really
  // Features messages: every key is a serialized map entry (it starts with
  // the control byte 0x0a) and no value is ever given. No Example writer
  // produces features that are all kindless under names with control bytes,
  // so such a payload is shown raw rather than as an empty record.
  const bool all_kindless =
      !by_name.empty() && std::all_of(by_name.begin(), by_name.end(), [](const auto& kv) {
        return kv.second.kind == Kind::kNone;
      });
  if (all_kindless && std::any_of(by_name.begin(), by_name.end(), [](const auto& kv) {
        return std::any_of(kv.first.begin(), kv.first.end(), [](char ch) {
          return static_cast<unsigned char>(ch) < 0x20 && ch != '\t';
        });
      })) {
    return c.Error("only kindless features, named with control bytes (another message, such as "
                   "an ExampleListWithContext, that happens to parse)");
  }
  FeatureTable table;
  table.features.reserve(by_name.size());
  for (auto& [name, f] : by_name) table.features.push_back(std::move(f));
  return table;
}

}  // namespace tfrecordfs::example
