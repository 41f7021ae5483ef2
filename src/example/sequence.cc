#include "tfrecordfs/example/sequence.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "decode_internal.h"
#include "encode_internal.h"
#include "example.pb.h"
#include "tfrecordfs/base/utf8.h"

namespace tfrecordfs::example {
namespace {

using internal::Cursor;
using internal::ForEachLenField;

constexpr char kWhat[] = "tf.train.SequenceExample";

absl::Status Renamed(absl::Status s) { return internal::RenamedFor(kWhat, std::move(s)); }

using ListMap = std::map<std::string, std::vector<Feature>, std::less<>>;

absl::Status DecodeFeatureList(absl::string_view data, size_t base, std::vector<Feature>* steps) {
  Cursor c(data, base, kWhat);
  return ForEachLenField(c, "FeatureList", 1, 1,
                         [steps](uint32_t, absl::string_view v, size_t sub) {
                           Feature f;
                           if (auto s = internal::DecodeFeature(v, sub, &f); !s.ok()) {
                             return Renamed(s);
                           }
                           steps->push_back(std::move(f));
                           return absl::OkStatus();
                         });
}

// One FeatureLists map entry: its name and its steps (a repeated value
// merges: steps concatenate).
absl::Status DecodeFeatureListsEntry(absl::string_view data, size_t base, ListMap* lists) {
  std::string name;
  std::vector<Feature> steps;
  Cursor e(data, base, kWhat);
  absl::Status s =
      ForEachLenField(e, "FeatureLists map entry", 1, 2,
                      [&](uint32_t field, absl::string_view v, size_t sub) -> absl::Status {
                        if (field == 2) return DecodeFeatureList(v, sub, &steps);
                        if (!IsValidUtf8(v)) return e.Error("feature list name is not valid UTF-8");
                        name.assign(v.data(), v.size());
                        return absl::OkStatus();
                      });
  if (!s.ok()) return s;
  lists->insert_or_assign(std::move(name), std::move(steps));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SequenceTable> DecodeSequenceExample(absl::string_view payload) {
  std::map<std::string, Feature, std::less<>> context;
  ListMap lists;
  bool have_lists = false;
  Cursor c(payload, 0, kWhat);
  absl::Status status = ForEachLenField(
      c, "SequenceExample", 1, 2,
      [&](uint32_t field, absl::string_view body, size_t base) -> absl::Status {
        if (field == 2) {
          have_lists = true;
          Cursor lc(body, base, kWhat);
          return ForEachLenField(lc, "FeatureLists", 1, 1,
                                 [&](uint32_t, absl::string_view entry, size_t ebase) {
                                   return DecodeFeatureListsEntry(entry, ebase, &lists);
                                 });
        }
        Cursor fc(body, base, kWhat);
        return ForEachLenField(fc, "Features", 1, 1,
                               [&](uint32_t, absl::string_view entry, size_t ebase) {
                                 Feature f;
                                 if (auto s = internal::DecodeEntry(entry, ebase, &f); !s.ok()) {
                                   return Renamed(s);
                                 }
                                 std::string name = f.name;
                                 context.insert_or_assign(std::move(name), std::move(f));
                                 return absl::OkStatus();
                               });
      });
  if (!status.ok()) return status;
  if (!have_lists) {
    return c.Error("no feature_lists (field 2): an Example, not a SequenceExample");
  }
  if (internal::LooksLikeAnotherMessage(context)) {
    return c.Error("only kindless context features, named with control bytes");
  }
  // An ExampleListWithContext's context read as FeatureLists: every list
  // named by a serialized map entry (a tag byte first), none with a step.
  const bool all_stepless =
      !lists.empty() &&
      std::all_of(lists.begin(), lists.end(), [](const auto& kv) { return kv.second.empty(); });
  if (all_stepless && std::any_of(lists.begin(), lists.end(), [](const auto& kv) {
        return std::any_of(kv.first.begin(), kv.first.end(), [](char ch) {
          return static_cast<unsigned char>(ch) < 0x20 && ch != '\t';
        });
      })) {
    return c.Error(
        "only stepless feature lists, named with control bytes (another message, such as an "
        "ExampleListWithContext, that happens to parse)");
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
