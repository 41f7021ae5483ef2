#include "tfrecordfs/example/sequence.h"

#include <algorithm>
#include <map>

#include "absl/strings/match.h"
#include "decode_internal.h"
#include "encode_internal.h"
#include "example.pb.h"
#include "tfrecordfs/base/utf8.h"

namespace tfrecordfs::example {
namespace {

using internal::Cursor;
using internal::Unexpected;
using internal::WireType;

constexpr char kWhat[] = "tf.train.SequenceExample";

// The shared Feature decoders name Example in their errors; say which
// message this really was.
absl::Status Renamed(absl::Status s) {
  constexpr absl::string_view kPrefix = "not a tf.train.Example: ";
  if (!absl::StartsWith(s.message(), kPrefix)) return s;
  return absl::InvalidArgumentError(
      absl::StrCat("not a ", kWhat, ": ", s.message().substr(kPrefix.size())));
}

// Reads the next field, which must be `number` with wire type LEN.
absl::Status NextLen(Cursor* c, absl::string_view message, uint32_t want_a, uint32_t want_b,
                     uint32_t* field, absl::string_view* value, size_t* base) {
  WireType type = wire::kVarint;
  if (auto s = c->Tag(field, &type); !s.ok()) return s;
  if ((*field != want_a && *field != want_b) || type != wire::kLen) {
    return Unexpected(*c, message, *field, type);
  }
  return c->Bytes(value, base);
}

using ListMap = std::map<std::string, std::vector<Feature>, std::less<>>;

absl::Status DecodeFeatureList(absl::string_view data, size_t base, std::vector<Feature>* steps) {
  Cursor c(data, base, kWhat);
  while (!c.done()) {
    uint32_t field = 0;
    absl::string_view v;
    size_t sub = 0;
    if (auto s = NextLen(&c, "FeatureList", 1, 1, &field, &v, &sub); !s.ok()) return s;
    Feature f;
    if (auto s = internal::DecodeFeature(v, sub, &f); !s.ok()) return Renamed(s);
    steps->push_back(std::move(f));
  }
  return absl::OkStatus();
}

absl::Status DecodeFeatureLists(absl::string_view data, size_t base, ListMap* lists) {
  Cursor c(data, base, kWhat);
  while (!c.done()) {
    uint32_t field = 0;
    absl::string_view entry;
    size_t ebase = 0;
    if (auto s = NextLen(&c, "FeatureLists", 1, 1, &field, &entry, &ebase); !s.ok()) return s;
    std::string name;
    std::vector<Feature> steps;
    Cursor e(entry, ebase, kWhat);
    while (!e.done()) {
      absl::string_view v;
      size_t sub = 0;
      if (auto s = NextLen(&e, "FeatureLists map entry", 1, 2, &field, &v, &sub); !s.ok()) {
        return s;
      }
      if (field == 1) {
        if (!IsValidUtf8(v)) return e.Error("feature list name is not valid UTF-8");
        name.assign(v.data(), v.size());
      } else if (auto s = DecodeFeatureList(v, sub, &steps); !s.ok()) {
        return s;  // a repeated value merges: steps concatenate
      }
    }
    lists->insert_or_assign(std::move(name), std::move(steps));
  }
  return absl::OkStatus();
}

bool LooksLikeAnotherMessage(const std::map<std::string, Feature, std::less<>>& by_name) {
  // The same guard as DecodeExample's (see there).
  const bool all_kindless =
      !by_name.empty() && std::all_of(by_name.begin(), by_name.end(),
                                      [](const auto& kv) { return kv.second.kind == Kind::kNone; });
  return all_kindless && std::any_of(by_name.begin(), by_name.end(), [](const auto& kv) {
           return std::any_of(kv.first.begin(), kv.first.end(), [](char ch) {
             return static_cast<unsigned char>(ch) < 0x20 && ch != '\t';
           });
         });
}

}  // namespace

absl::StatusOr<SequenceTable> DecodeSequenceExample(absl::string_view payload) {
  std::map<std::string, Feature, std::less<>> context;
  ListMap lists;
  bool have_lists = false;
  Cursor c(payload, 0, kWhat);
  while (!c.done()) {
    uint32_t field = 0;
    absl::string_view body;
    size_t base = 0;
    if (auto s = NextLen(&c, "SequenceExample", 1, 2, &field, &body, &base); !s.ok()) return s;
    if (field == 2) {
      have_lists = true;
      if (auto s = DecodeFeatureLists(body, base, &lists); !s.ok()) return s;
      continue;
    }
    Cursor fc(body, base, kWhat);
    while (!fc.done()) {
      absl::string_view entry;
      size_t ebase = 0;
      if (auto s = NextLen(&fc, "Features", 1, 1, &field, &entry, &ebase); !s.ok()) return s;
      Feature f;
      if (auto s = internal::DecodeEntry(entry, ebase, &f); !s.ok()) return Renamed(s);
      std::string name = f.name;
      context.insert_or_assign(std::move(name), std::move(f));
    }
  }
  if (!have_lists) {
    return c.Error("no feature_lists (field 2): an Example, not a SequenceExample");
  }
  if (LooksLikeAnotherMessage(context)) {
    return c.Error("only kindless context features, named with control bytes");
  }
  SequenceTable table;
  table.context.features.reserve(context.size());
  for (auto& [name, f] : context) table.context.features.push_back(std::move(f));
  table.lists.reserve(lists.size());
  for (auto& [name, steps] : lists) table.lists.push_back({name, std::move(steps)});
  return table;
}

std::string EncodeSequenceExample(const SequenceTable& table) {
  proto::SequenceExample ex;
  if (!table.context.features.empty()) {
    auto* map = ex.mutable_context()->mutable_feature();
    for (const Feature& f : table.context.features) internal::ToProto(f, &(*map)[f.name]);
  }
  auto* lists = ex.mutable_feature_lists()->mutable_feature_list();
  for (const FeatureList& l : table.lists) {
    proto::FeatureList& pl = (*lists)[l.name];
    for (const Feature& step : l.steps) internal::ToProto(step, pl.add_feature());
  }
  return internal::SerializeDeterministically(ex);
}

}  // namespace tfrecordfs::example
