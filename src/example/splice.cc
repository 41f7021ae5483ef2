#include "tfrecordfs/example/splice.h"

#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "encode_internal.h"
#include "example.pb.h"
#include "tfrecordfs/base/wire.h"
#include "tfrecordfs/example/record.h"

namespace tfrecordfs::example {
namespace {

// ---- What says the same ----

bool SameFeature(const Feature& a, const Feature& b, const SameBytesValue& same_bytes) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::kNone:
      return true;
    case Kind::kInt64:
      return a.int64s == b.int64s;
    case Kind::kFloat:
      // Bit for bit: -0 is not 0, and a NaN keeps its payload.
      return a.floats.size() == b.floats.size() &&
             (a.floats.empty() ||
              std::memcmp(a.floats.data(), b.floats.data(), a.floats.size() * sizeof(float)) == 0);
    case Kind::kBytes:
      if (a.bytes.size() != b.bytes.size()) return false;
      for (size_t i = 0; i < a.bytes.size(); ++i) {
        if (a.bytes[i] != b.bytes[i] && !(same_bytes && same_bytes(a.bytes[i], b.bytes[i]))) {
          return false;
        }
      }
      return true;
  }
  return false;
}

bool SameSteps(const std::vector<Feature>& a, const std::vector<Feature>& b,
               const SameBytesValue& same_bytes) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!SameFeature(a[i], b[i], same_bytes)) return false;
  }
  return true;
}

// Tables are sorted by name with unique names (example.h, sequence.h).
bool SameTable(const FeatureTable& a, const FeatureTable& b, const SameBytesValue& same_bytes) {
  if (a.features.size() != b.features.size()) return false;
  for (size_t i = 0; i < a.features.size(); ++i) {
    if (a.features[i].name != b.features[i].name ||
        !SameFeature(a.features[i], b.features[i], same_bytes)) {
      return false;
    }
  }
  return true;
}

bool SameLists(const std::vector<FeatureList>& a, const std::vector<FeatureList>& b,
               const SameBytesValue& same_bytes) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || !SameSteps(a[i].steps, b[i].steps, same_bytes)) return false;
  }
  return true;
}

bool SameList(const ExampleListTable& a, const ExampleListTable& b,
              const SameBytesValue& same_bytes) {
  if (a.has_context != b.has_context || !SameTable(a.context, b.context, same_bytes) ||
      a.examples.size() != b.examples.size()) {
    return false;
  }
  for (size_t i = 0; i < a.examples.size(); ++i) {
    if (!SameTable(a.examples[i], b.examples[i], same_bytes)) return false;
  }
  return true;
}

bool SameRecord(const DecodedRecord& a, const DecodedRecord& b, const SameBytesValue& same_bytes) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case PayloadKind::kExampleList:
    case PayloadKind::kExampleInExample:
      return SameList(a.list, b.list, same_bytes);
    case PayloadKind::kExample:
      return SameTable(a.example, b.example, same_bytes);
    case PayloadKind::kSequenceExample:
      return SameTable(a.sequence.context, b.sequence.context, same_bytes) &&
             SameLists(a.sequence.lists, b.sequence.lists, same_bytes);
    case PayloadKind::kRaw:
      return false;  // compared as bytes by the caller
  }
  return false;
}

// ---- The original's map entries, as they are on the wire ----

// One entry of a `map<string, ...>` field: its key, and the whole field
// (tag, length, entry) to copy as it is.
struct WireEntry {
  std::string key;
  absl::string_view field;
};

// The map entries (field 1 of the map message) of every top-level field
// `number` of `payload`, in order; `present` says whether there was such a
// field. False when the bytes are not a message of LEN fields with map
// entries (never for a payload the strict decoders took).
bool EntriesOf(absl::string_view payload, uint32_t number, std::vector<WireEntry>* out,
               bool* present) {
  wire::Cursor c(payload, 0, "record");
  while (!c.done()) {
    uint32_t field = 0;
    wire::WireType type = wire::kVarint;
    absl::string_view body;
    size_t base = 0;
    if (!c.Tag(&field, &type).ok() || type != wire::kLen || !c.Bytes(&body, &base).ok()) {
      return false;
    }
    if (field != number) continue;
    *present = true;
    wire::Cursor m(body, base, "map");
    while (!m.done()) {
      const size_t start = m.offset();
      absl::string_view entry;
      size_t entry_base = 0;
      if (!m.Tag(&field, &type).ok() || field != 1 || type != wire::kLen ||
          !m.Bytes(&entry, &entry_base).ok()) {
        return false;
      }
      WireEntry w;
      w.field = payload.substr(start, m.offset() - start);
      wire::Cursor e(entry, entry_base, "map entry");
      while (!e.done()) {
        absl::string_view v;
        size_t vbase = 0;
        if (!e.Tag(&field, &type).ok() || type != wire::kLen || !e.Bytes(&v, &vbase).ok()) {
          return false;
        }
        if (field == 1) w.key.assign(v.data(), v.size());  // the last key wins, as in protobuf
      }
      out->push_back(std::move(w));
    }
  }
  return true;
}

void AppendLenField(uint32_t number, absl::string_view body, std::string* out) {
  wire::PutVarint(out, (uint64_t{number} << 3) | wire::kLen);
  wire::PutVarint(out, body.size());
  out->append(body.data(), body.size());
}

// One Features map entry, as a whole field (`0a` len entry).
std::string EncodeEntry(const Feature& f) {
  proto::Features features;
  internal::ToProto(f, &(*features.mutable_feature())[f.name]);
  return internal::SerializeDeterministically(features);
}

// One FeatureLists map entry, as a whole field.
std::string EncodeEntry(const FeatureList& list) {
  proto::FeatureLists lists;
  proto::FeatureList& pl = (*lists.mutable_feature_list())[list.name];
  for (const Feature& step : list.steps) internal::ToProto(step, pl.add_feature());
  return internal::SerializeDeterministically(lists);
}

// The entries of the map in top-level field `number` of `payload` (Features
// or FeatureLists), spliced: `original` and `edited` are its items (Feature
// or FeatureList) decoded from the original and from the edit. An entry of
// a key the edit left `same` is kept as it is; a changed key's entry is
// encoded afresh in the place of its last entry (the one a parser keeps;
// its earlier entries are dropped); a removed key's entries are dropped;
// the edit's new keys follow, in name order. `present`: whether the
// payload had such a field. nullopt when the payload's wire is not as the
// decoders took it (never expected).
template <typename Item, typename SameFn>
std::optional<std::string> SpliceMap(absl::string_view payload, uint32_t number,
                                     const std::vector<Item>& original,
                                     const std::vector<Item>& edited, SameFn same, bool* present) {
  std::vector<WireEntry> entries;
  if (!EntriesOf(payload, number, &entries, present)) return std::nullopt;
  std::map<absl::string_view, const Item*> before, after;
  for (const Item& x : original) before[x.name] = &x;
  for (const Item& x : edited) after[x.name] = &x;
  absl::flat_hash_map<absl::string_view, size_t> last;  // key -> its last entry
  for (size_t i = 0; i < entries.size(); ++i) last[entries[i].key] = i;
  std::string out;
  for (size_t i = 0; i < entries.size(); ++i) {
    const WireEntry& e = entries[i];
    auto a = after.find(e.key);
    if (a == after.end()) continue;  // removed
    auto b = before.find(e.key);
    if (b != before.end() && same(*b->second, *a->second)) {
      out.append(e.field.data(), e.field.size());
    } else if (last[e.key] == i) {
      out += EncodeEntry(*a->second);
    }
  }
  for (const Item& x : edited) {
    if (!before.count(x.name)) out += EncodeEntry(x);
  }
  return out;
}

// One Example `example` (its message bytes) spliced with the edited table:
// the whole Example message, its Features entries kept where unchanged.
std::optional<std::string> SpliceExample(absl::string_view example, const FeatureTable& before,
                                         const FeatureTable& after,
                                         const SameBytesValue& same_bytes) {
  bool present = false;
  auto features = SpliceMap(
      example, 1, before.features, after.features,
      [&](const Feature& a, const Feature& b) { return SameFeature(a, b, same_bytes); }, &present);
  if (!features) return std::nullopt;
  std::string out;
  AppendLenField(1, *features, &out);
  return out;
}

// One edited example of a list: the index of the original example whose
// bytes it keeps, or the Example message to write.
struct ListItem {
  std::optional<size_t> kept;
  std::string fresh;
};

// The examples of a list (ELWC or Example-in-Example) after an edit, each
// matched with the originals (`bodies`, their Example messages): with as
// many examples before as after, example i with example i; else (examples
// removed or added) an edited example equal to the next original one (or a
// later one, the ones between being removed) keeps that one's bytes, and
// the others are spliced (SpliceExample) with the next original or, past the
// last, encoded afresh. nullopt when a splice fails.
std::optional<std::vector<ListItem>> MatchExamples(const std::vector<absl::string_view>& bodies,
                                                   const ExampleListTable& before,
                                                   const ExampleListTable& after,
                                                   const SameBytesValue& same_bytes) {
  const size_t n = bodies.size();
  std::vector<ListItem> out;
  const auto splice_into = [&](size_t i, const FeatureTable& edited) {
    auto spliced = SpliceExample(bodies[i], before.examples[i], edited, same_bytes);
    if (!spliced) return false;
    out.push_back({std::nullopt, *std::move(spliced)});
    return true;
  };
  if (after.examples.size() == n) {
    for (size_t i = 0; i < n; ++i) {
      if (SameTable(before.examples[i], after.examples[i], same_bytes)) {
        out.push_back({i, {}});
      } else if (!splice_into(i, after.examples[i])) {
        return std::nullopt;
      }
    }
    return out;
  }
  size_t i = 0;  // the next original example
  for (const FeatureTable& edited : after.examples) {
    size_t k = i;
    while (k < n && !SameTable(before.examples[k], edited, same_bytes)) ++k;
    if (k < n) {
      out.push_back({k, {}});
      i = k + 1;
    } else if (i < n) {
      if (!splice_into(i, edited)) return std::nullopt;
      ++i;
    } else {
      out.push_back({std::nullopt, EncodeExample(edited)});
    }
  }
  return out;
}

// The edited context's Example message, or nullopt when a splice fails:
// the original's bytes when the edit left it the same, else spliced, or
// encoded afresh when the original had none.
std::optional<std::string> ContextBody(absl::string_view original_body,
                                       const ExampleListTable& before,
                                       const ExampleListTable& after,
                                       const SameBytesValue& same_bytes) {
  if (!before.has_context) return EncodeExample(after.context);
  if (SameTable(before.context, after.context, same_bytes)) return std::string(original_body);
  return SpliceExample(original_body, before.context, after.context, same_bytes);
}

// An ExampleListWithContext: its `examples` and `context` fields as they are
// on the wire where the edit left that Example the same, else the Example
// spliced in place (MatchExamples). The context keeps its place before or
// after the examples.
std::optional<std::string> SpliceList(absl::string_view original, const ExampleListTable& before,
                                      const ExampleListTable& after,
                                      const SameBytesValue& same_bytes) {
  std::vector<absl::string_view> fields, bodies;  // the `examples` fields, whole and body
  absl::string_view context_field, context_body;
  bool context_first = false;
  wire::Cursor c(original, 0, "record");
  while (!c.done()) {
    const size_t start = c.offset();
    uint32_t field = 0;
    wire::WireType type = wire::kVarint;
    absl::string_view body;
    size_t base = 0;
    if (!c.Tag(&field, &type).ok() || type != wire::kLen || !c.Bytes(&body, &base).ok()) {
      return std::nullopt;
    }
    const absl::string_view whole = original.substr(start, c.offset() - start);
    if (field == 1) {
      fields.push_back(whole);
      bodies.push_back(body);
    } else if (field == 2) {
      if (fields.empty()) context_first = true;
      context_field = whole;
      context_body = body;
    }
  }
  if (fields.size() != before.examples.size()) return std::nullopt;
  auto items = MatchExamples(bodies, before, after, same_bytes);
  if (!items) return std::nullopt;
  std::string examples;
  for (const ListItem& item : *items) {
    if (item.kept) {
      examples.append(fields[*item.kept].data(), fields[*item.kept].size());
    } else {
      AppendLenField(1, item.fresh, &examples);
    }
  }
  std::string context;
  if (after.has_context) {
    if (before.has_context && SameTable(before.context, after.context, same_bytes)) {
      context.assign(context_field.data(), context_field.size());
    } else {
      auto body = ContextBody(context_body, before, after, same_bytes);
      if (!body) return std::nullopt;
      AppendLenField(2, *body, &context);
    }
  }
  return context_first ? context + examples : examples + context;
}

// An Example-in-Example: the outer Example spliced as an Example (its
// entries kept where unchanged), whose serialized_examples values are the
// original values where the edit left that example the same, else the
// spliced or new Example (MatchExamples), and whose serialized_context is
// kept, spliced or new likewise.
std::optional<std::string> SpliceExampleInExample(absl::string_view original,
                                                  const DecodedRecord& before,
                                                  const DecodedRecord& after,
                                                  const SameBytesValue& same_bytes) {
  absl::string_view context_value;
  std::vector<absl::string_view> values;
  for (const Feature& f : before.example.features) {
    if (f.name == kEieContextKey && !f.bytes.empty()) context_value = f.bytes[0];
    if (f.name == kEieExamplesKey) values = f.bytes;
  }
  if (values.size() != before.list.examples.size()) return std::nullopt;
  auto items = MatchExamples(values, before.list, after.list, same_bytes);
  if (!items) return std::nullopt;
  std::deque<std::string> storage;  // the new values the features view
  FeatureTable outer;
  if (after.list.has_context) {
    auto body = ContextBody(context_value, before.list, after.list, same_bytes);
    if (!body) return std::nullopt;
    storage.push_back(*std::move(body));
    Feature f;
    f.name = std::string(kEieContextKey);
    f.kind = Kind::kBytes;
    f.bytes.push_back(storage.back());
    outer.features.push_back(std::move(f));
  }
  Feature examples;
  examples.name = std::string(kEieExamplesKey);
  examples.kind = Kind::kBytes;
  for (const ListItem& item : *items) {
    if (item.kept) {
      examples.bytes.push_back(values[*item.kept]);
    } else {
      storage.push_back(item.fresh);
      examples.bytes.push_back(storage.back());
    }
  }
  outer.features.push_back(std::move(examples));
  // Kept values are bytes equal to the original ones, so an outer feature
  // the edit left alone keeps its entry; a changed one is re-encoded around
  // the values.
  bool present = false;
  auto features = SpliceMap(
      original, 1, before.example.features, outer.features,
      [&](const Feature& a, const Feature& b) { return SameFeature(a, b, {}); }, &present);
  if (!features) return std::nullopt;
  std::string out;
  AppendLenField(1, *features, &out);
  return out;
}

std::optional<std::string> Splice(absl::string_view original, const DecodedRecord& before,
                                  const DecodedRecord& after, const SameBytesValue& same_bytes) {
  const auto same_feature = [&](const Feature& a, const Feature& b) {
    return SameFeature(a, b, same_bytes);
  };
  std::string out;
  if (after.kind == PayloadKind::kExampleList) {
    return SpliceList(original, before.list, after.list, same_bytes);
  }
  if (after.kind == PayloadKind::kExampleInExample) {
    return SpliceExampleInExample(original, before, after, same_bytes);
  }
  if (after.kind == PayloadKind::kExample) {
    bool present = false;
    auto features = SpliceMap(original, 1, before.example.features, after.example.features,
                              same_feature, &present);
    if (!features) return std::nullopt;
    AppendLenField(1, *features, &out);
    return out;
  }
  bool had_context = false, had_lists = false;
  auto context = SpliceMap(original, 1, before.sequence.context.features,
                           after.sequence.context.features, same_feature, &had_context);
  auto lists = SpliceMap(
      original, 2, before.sequence.lists, after.sequence.lists,
      [&](const FeatureList& a, const FeatureList& b) {
        return SameSteps(a.steps, b.steps, same_bytes);
      },
      &had_lists);
  if (!context || !lists) return std::nullopt;
  if (had_context || !context->empty()) AppendLenField(1, *context, &out);
  AppendLenField(2, *lists, &out);  // always: it is what makes a SequenceExample
  return out;
}

}  // namespace

SplicedRecord SpliceEdit(absl::string_view original, absl::string_view edited,
                         const SameBytesValue& same_bytes) {
  SplicedRecord out;
  const DecodedRecord before = DecodeRecord(original);
  const DecodedRecord after = DecodeRecord(edited);
  if (before.kind == PayloadKind::kRaw && after.kind == PayloadKind::kRaw && original == edited) {
    return out;
  }
  if (SameRecord(before, after, same_bytes)) return out;
  out.changed = true;
  if (before.kind == after.kind && after.kind != PayloadKind::kRaw) {
    if (auto spliced = Splice(original, before, after, same_bytes)) {
      // A safety net, never expected to fail: the spliced record must say
      // what the edited one says; else the edited payload as it is.
      const DecodedRecord check = DecodeRecord(*spliced);
      if (SameRecord(check, after, same_bytes)) {
        out.payload = *std::move(spliced);
        return out;
      }
    }
  }
  out.payload = std::string(edited);
  return out;
}

}  // namespace tfrecordfs::example
