// Fuzz target: the SequenceExample decoder, cross-checked against protobuf's
// generated parser. The input is one record payload.
//
// Invariants:
//   * DecodeSequenceExample never crashes and fails only with
//     InvalidArgument; it never accepts a payload DecodeExample accepts
//     (field 2 is required, and unknown to an Example);
//   * when it accepts, protobuf accepts too, with the same context features
//     and lists (names, steps, kinds, values; floats bit for bit);
//   * names sorted and unique, bytes values views inside the payload;
//   * EncodeSequenceExample of the table decodes back to the same table.
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "example.pb.h"
#include "fuzz_check.h"
#include "tfrecordfs/example/sequence.h"

namespace tfrecordfs::fuzz {
namespace {

using example::Feature;
using example::Kind;

std::string Canon(const Feature& f) {
  std::string s(1, static_cast<char>('0' + static_cast<int>(f.kind)));
  for (absl::string_view b : f.bytes) absl::StrAppend(&s, "|", b.size(), ":", b);
  for (float v : f.floats) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    absl::StrAppend(&s, "|", bits);
  }
  for (int64_t v : f.int64s) absl::StrAppend(&s, "|", v);
  return s;
}

std::string Canon(const proto::Feature& pf) {
  Feature f;
  switch (pf.kind_case()) {
    case proto::Feature::kBytesList:
      f.kind = Kind::kBytes;
      for (const auto& b : pf.bytes_list().value()) f.bytes.push_back(b);
      break;
    case proto::Feature::kFloatList:
      f.kind = Kind::kFloat;
      f.floats.assign(pf.float_list().value().begin(), pf.float_list().value().end());
      break;
    case proto::Feature::kInt64List:
      f.kind = Kind::kInt64;
      f.int64s.assign(pf.int64_list().value().begin(), pf.int64_list().value().end());
      break;
    case proto::Feature::KIND_NOT_SET:
      break;
  }
  return Canon(f);
}

using CanonSeq = std::map<std::string, std::vector<std::string>>;  // "c:name" / "l:name"

CanonSeq FromTable(const example::SequenceTable& t) {
  CanonSeq out;
  for (const Feature& f : t.context.features) out["c:" + f.name].push_back(Canon(f));
  for (const auto& l : t.lists) {
    auto& v = out["l:" + l.name];
    for (const Feature& f : l.steps) v.push_back(Canon(f));
  }
  return out;
}

CanonSeq FromProto(const proto::SequenceExample& p) {
  CanonSeq out;
  for (const auto& [k, f] : p.context().feature()) out["c:" + k].push_back(Canon(f));
  for (const auto& [k, l] : p.feature_lists().feature_list()) {
    auto& v = out["l:" + k];
    for (const auto& f : l.feature()) v.push_back(Canon(f));
  }
  return out;
}

void Check(absl::string_view payload) {
  auto t = example::DecodeSequenceExample(payload);
  if (!t.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(t.status()), t.status().ToString());
    return;
  }
  FUZZ_CHECK(!example::DecodeExample(payload).ok(), "both an Example and a SequenceExample");
  for (size_t i = 1; i < t->lists.size(); ++i) FUZZ_CHECK(t->lists[i - 1].name < t->lists[i].name);
  for (size_t i = 1; i < t->context.features.size(); ++i) {
    FUZZ_CHECK(t->context.features[i - 1].name < t->context.features[i].name);
  }
  auto inside = [&](const Feature& f) {
    for (absl::string_view b : f.bytes) {
      FUZZ_CHECK(b.data() >= payload.data() &&
                 b.data() + b.size() <= payload.data() + payload.size());
    }
  };
  for (const Feature& f : t->context.features) inside(f);
  for (const auto& l : t->lists) {
    for (const Feature& f : l.steps) inside(f);
  }
  CheckAgainstProtobuf<proto::SequenceExample>(
      payload, *t, "DecodeSequenceExample",
      [](const example::SequenceTable& table) { return FromTable(table); },
      [](const proto::SequenceExample& p) { return FromProto(p); }, example::EncodeSequenceExample,
      example::DecodeSequenceExample);
}

}  // namespace
}  // namespace tfrecordfs::fuzz

TFRFS_FUZZ_ENTRY(tfrecordfs::fuzz::Check, 1u << 20)
