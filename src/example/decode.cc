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
using internal::ForEachLenField;
using internal::Unexpected;
using internal::WireType;
using enum wire::WireType;

absl::Status DecodeBytesList(absl::string_view data, size_t base, Feature* f) {
  Cursor c(data, base);
  return ForEachLenField(c, "BytesList", 1, 1, [f](uint32_t, absl::string_view v, size_t) {
    f->bytes.push_back(v);
    return absl::OkStatus();
  });
}

// A FloatList or an Int64List: field 1 only, each value alone (wire type
// `single`, read by read_one) or in packed LEN runs (read by read_run).
template <typename ReadOne, typename ReadRun>
absl::Status DecodeNumberList(absl::string_view data, size_t base, absl::string_view message,
                              WireType single, ReadOne read_one, ReadRun read_run) {
  Cursor c(data, base);
  while (!c.done()) {
    uint32_t field = 0;
    WireType type = kVarint;
    if (auto s = c.Tag(&field, &type); !s.ok()) return s;
    if (field != 1 || (type != single && type != kLen)) return Unexpected(c, message, field, type);
    if (type == single) {
      if (auto s = read_one(c); !s.ok()) return s;
      continue;
    }
    absl::string_view run;
    size_t sub = 0;
    if (auto s = c.Bytes(&run, &sub); !s.ok()) return s;
    if (auto s = read_run(c, run, sub); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status DecodeFloatList(absl::string_view data, size_t base, Feature* f) {
  const auto read_one = [f](Cursor& c) {
    uint32_t bits = 0;
    if (auto s = c.Fixed32(&bits); !s.ok()) return s;
    float v = 0;
    std::memcpy(&v, &bits, 4);
    f->floats.push_back(v);
    return absl::OkStatus();
  };
  const auto read_run = [f](Cursor& c, absl::string_view run, size_t) {
    if (run.size() % 4 != 0) return c.Error("packed float run not a multiple of 4 bytes");
    if (run.empty()) return absl::OkStatus();  // memcpy into an empty vector's null data() is UB
    const size_t old = f->floats.size();
    f->floats.resize(old + run.size() / 4);
    std::memcpy(f->floats.data() + old, run.data(), run.size());
    return absl::OkStatus();
  };
  return DecodeNumberList(data, base, "FloatList", kI32, read_one, read_run);
}

absl::Status DecodeInt64List(absl::string_view data, size_t base, Feature* f) {
  const auto read_one = [f](Cursor& c) {
    uint64_t v = 0;
    if (auto s = c.Varint(&v); !s.ok()) return s;
    f->int64s.push_back(static_cast<int64_t>(v));
    return absl::OkStatus();
  };
  const auto read_run = [&read_one](Cursor&, absl::string_view run, size_t sub) {
    Cursor r(run, sub);
    while (!r.done()) {
      if (auto s = read_one(r); !s.ok()) return s;
    }
    return absl::OkStatus();
  };
  return DecodeNumberList(data, base, "Int64List", kVarint, read_one, read_run);
}

}  // namespace

namespace internal {

absl::Status DecodeFeature(absl::string_view data, size_t base, Feature* f) {
  Cursor c(data, base);
  return ForEachLenField(c, "Feature", 1, 3,
                         [f](uint32_t field, absl::string_view list, size_t sub) {
                           const Kind kind = static_cast<Kind>(field);
                           if (f->kind != kind) {  // oneof: a different kind replaces the old one
                             f->bytes.clear();
                             f->floats.clear();
                             f->int64s.clear();
                             f->kind = kind;
                           }
                           return kind == Kind::kBytes   ? DecodeBytesList(list, sub, f)
                                  : kind == Kind::kFloat ? DecodeFloatList(list, sub, f)
                                                         : DecodeInt64List(list, sub, f);
                         });
}

absl::Status DecodeEntry(absl::string_view data, size_t base, Feature* f) {
  Cursor c(data, base);
  return ForEachLenField(c, "Features map entry", 1, 2,
                         [&c, f](uint32_t field, absl::string_view v, size_t sub) -> absl::Status {
                           // A repeated value merges into the same Feature, in order.
                           if (field == 2) return DecodeFeature(v, sub, f);
                           if (!IsValidUtf8(v)) return c.Error("feature name is not valid UTF-8");
                           f->name.assign(v.data(), v.size());
                           return absl::OkStatus();
                         });
}

bool LooksLikeAnotherMessage(const std::map<std::string, Feature, std::less<>>& by_name) {
  const bool all_kindless =
      !by_name.empty() && std::all_of(by_name.begin(), by_name.end(),
                                      [](const auto& kv) { return kv.second.kind == Kind::kNone; });
  return all_kindless && std::any_of(by_name.begin(), by_name.end(), [](const auto& kv) {
           return std::any_of(kv.first.begin(), kv.first.end(), [](char ch) {
             return static_cast<unsigned char>(ch) < 0x20 && ch != '\t';
           });
         });
}

}  // namespace internal

using internal::DecodeEntry;

absl::StatusOr<FeatureTable> DecodeExample(absl::string_view payload) {
  return internal::DecodeExampleAt(payload, 0, "tf.train.Example");
}

absl::StatusOr<FeatureTable> internal::DecodeExampleAt(absl::string_view payload, size_t base,
                                                       const char* what) {
  // Last occurrence of a key wins, as in protobuf map parsing.
  std::map<std::string, Feature, std::less<>> by_name;
  Cursor c(payload, base, what);
  absl::Status status =
      ForEachLenField(c, "Example", 1, 1, [&](uint32_t, absl::string_view features, size_t fbase) {
        Cursor fc(features, fbase, what);
        return ForEachLenField(fc, "Features", 1, 1,
                               [&](uint32_t, absl::string_view entry, size_t ebase) {
                                 Feature f;
                                 if (auto s = DecodeEntry(entry, ebase, &f); !s.ok()) return s;
                                 std::string name = f.name;
                                 by_name.insert_or_assign(std::move(name), std::move(f));
                                 return absl::OkStatus();
                               });
      });
  if (!status.ok()) return status;
  if (internal::LooksLikeAnotherMessage(by_name)) {
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
