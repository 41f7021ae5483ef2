#include <algorithm>
#include <cstring>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "decode_internal.h"
#include "tfrecordfs/base/utf8.h"
#include "tfrecordfs/example/example.h"

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

using internal::Cursor;
using internal::Unexpected;
using internal::WireType;
using enum wire::WireType;

absl::Status DecodeBytesList(absl::string_view data, size_t base, Feature* f) {
  Cursor c(data, base);
  while (!c.done()) {
    uint32_t field = 0;
    WireType type = kVarint;
    if (auto s = c.Tag(&field, &type); !s.ok()) return s;
    if (field != 1 || type != kLen) return Unexpected(c, "BytesList", field, type);
    absl::string_view v;
    size_t sub = 0;
    if (auto s = c.Bytes(&v, &sub); !s.ok()) return s;
    f->bytes.push_back(v);
  }
  return absl::OkStatus();
}

absl::Status DecodeFloatList(absl::string_view data, size_t base, Feature* f) {
  Cursor c(data, base);
  while (!c.done()) {
    uint32_t field = 0;
    WireType type = kVarint;
    if (auto s = c.Tag(&field, &type); !s.ok()) return s;
    if (field == 1 && type == kI32) {
      uint32_t bits = 0;
      if (auto s = c.Fixed32(&bits); !s.ok()) return s;
      float v = 0;
      std::memcpy(&v, &bits, 4);
      f->floats.push_back(v);
    } else if (field == 1 && type == kLen) {
      absl::string_view run;
      size_t sub = 0;
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
    uint32_t field = 0;
    WireType type = kVarint;
    if (auto s = c.Tag(&field, &type); !s.ok()) return s;
    if (field == 1 && type == kVarint) {
      uint64_t v = 0;
      if (auto s = c.Varint(&v); !s.ok()) return s;
      f->int64s.push_back(static_cast<int64_t>(v));
    } else if (field == 1 && type == kLen) {
      absl::string_view run;
      size_t sub = 0;
      if (auto s = c.Bytes(&run, &sub); !s.ok()) return s;
      Cursor r(run, sub);
      while (!r.done()) {
        uint64_t v = 0;
        if (auto s = r.Varint(&v); !s.ok()) return s;
        f->int64s.push_back(static_cast<int64_t>(v));
      }
    } else {
      return Unexpected(c, "Int64List", field, type);
    }
  }
  return absl::OkStatus();
}

}  // namespace

namespace internal {

absl::Status DecodeFeature(absl::string_view data, size_t base, Feature* f) {
  Cursor c(data, base);
  while (!c.done()) {
    uint32_t field = 0;
    WireType type = kVarint;
    if (auto s = c.Tag(&field, &type); !s.ok()) return s;
    if (field < 1 || field > 3 || type != kLen) return Unexpected(c, "Feature", field, type);
    absl::string_view list;
    size_t sub = 0;
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
    uint32_t field = 0;
    WireType type = kVarint;
    if (auto s = c.Tag(&field, &type); !s.ok()) return s;
    if ((field != 1 && field != 2) || type != kLen) {
      return Unexpected(c, "Features map entry", field, type);
    }
    absl::string_view v;
    size_t sub = 0;
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

}  // namespace internal

using internal::DecodeEntry;

absl::StatusOr<FeatureTable> DecodeExample(absl::string_view payload) {
  // Last occurrence of a key wins, as in protobuf map parsing.
  std::map<std::string, Feature, std::less<>> by_name;
  Cursor c(payload, 0);
  while (!c.done()) {
    uint32_t field = 0;
    WireType type = kVarint;
    if (auto s = c.Tag(&field, &type); !s.ok()) return s;
    if (field != 1 || type != kLen) return Unexpected(c, "Example", field, type);
    absl::string_view features;
    size_t fbase = 0;
    if (auto s = c.Bytes(&features, &fbase); !s.ok()) return s;
    Cursor fc(features, fbase);
    while (!fc.done()) {
      if (auto s = fc.Tag(&field, &type); !s.ok()) return s;
      if (field != 1 || type != kLen) return Unexpected(fc, "Features", field, type);
      absl::string_view entry;
      size_t ebase = 0;
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
      !by_name.empty() && std::all_of(by_name.begin(), by_name.end(),
                                      [](const auto& kv) { return kv.second.kind == Kind::kNone; });
  if (all_kindless && std::any_of(by_name.begin(), by_name.end(), [](const auto& kv) {
        return std::any_of(kv.first.begin(), kv.first.end(), [](char ch) {
          return static_cast<unsigned char>(ch) < 0x20 && ch != '\t';
        });
      })) {
    return c.Error(
        "only kindless features, named with control bytes (another message, such as "
        "an ExampleListWithContext, that happens to parse)");
  }
  FeatureTable table;
  table.features.reserve(by_name.size());
  for (auto& [name, f] : by_name) table.features.push_back(std::move(f));
  return table;
}

}  // namespace tfrecordfs::example
