// Fuzz target: SpliceEdit (example/splice.h), the rebuild of an edited record
// from its original's wire bytes, which reads the shard's bytes (untrusted).
// The input is one record payload, and, past its first 0xff byte, a second
// one; the edits tried are the original's own table encoded afresh (the
// "nothing changed" case), the table without its first feature, and the
// second payload.
//
// Invariants, for every (original, edited) pair:
//   * SpliceEdit never crashes, whatever the two payloads;
//   * "unchanged" only when the two say the same thing as the mount reads
//     them (DecodeRecord: same payload kind, same features, names, kinds,
//     values, floats bit for bit, kindless ones too; raw: equal bytes);
//   * "changed" gives a payload that says what `edited` says;
//   * the original's own table encoded afresh is always "unchanged", and the
//     table without its first feature is always "changed".
#include <cstdint>
#include <sstream>
#include <string>

#include "fuzz_check.h"
#include "testing/canon.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/record.h"
#include "tfrecordfs/example/splice.h"

namespace tfrecordfs::fuzz {
namespace {

using example::FeatureTable;
using test::FromTable;

// What a TF-Ranking list (ELWC or Example-in-Example) says: its examples,
// then its context, feature by feature.
std::string ListSays(const example::ExampleListTable& list) {
  std::ostringstream out;
  for (size_t i = 0; i < list.examples.size(); ++i) {
    for (const auto& [name, canon] : FromTable(list.examples[i])) {
      out << "examples/" << i << "/" << name << " " << canon << "\n";
    }
  }
  if (list.has_context) {
    out << "context\n";
    for (const auto& [name, canon] : FromTable(list.context)) {
      out << "context/" << name << " " << canon << "\n";
    }
  }
  return out.str();
}

// What a payload says, as the mount reads it (example/record.h's rule):
// its kind, then its features in canonical form (floats as bits, kindless
// ones too), or its bytes for a raw payload.
std::string Says(absl::string_view payload) {
  const example::DecodedRecord d = example::DecodeRecord(payload);
  std::ostringstream out;
  out << example::PayloadKindName(d.kind) << "\n";
  switch (d.kind) {
    case example::PayloadKind::kExampleInExample:  // its list, not its values' bytes
    case example::PayloadKind::kExampleList:
      out << ListSays(d.list);
      break;
    case example::PayloadKind::kExample:
      for (const auto& [name, canon] : FromTable(d.example)) out << name << " " << canon << "\n";
      break;
    case example::PayloadKind::kSequenceExample:
      out << test::SequenceText(d.sequence);
      break;
    case example::PayloadKind::kRaw:
      out << payload;
      break;
  }
  return out.str();
}

// Returns whether SpliceEdit said "changed".
bool CheckPair(absl::string_view original, absl::string_view edited) {
  const example::SplicedRecord r = example::SpliceEdit(original, edited);
  if (!r.changed) {
    if (original != edited) {
      FUZZ_CHECK(Says(original) == Says(edited),
                 "unchanged, but the payloads say different things");
    }
    return false;
  }
  FUZZ_CHECK(Says(r.payload) == Says(edited),
             "the spliced payload says something else than the edit");
  return true;
}

void Check(absl::string_view input) {
  const size_t cut = input.find('\xff');
  const absl::string_view payload = input.substr(0, cut);
  if (cut != absl::string_view::npos) CheckPair(payload, input.substr(cut + 1));
  auto table = example::DecodeExample(payload);
  if (!table.ok()) return;
  const std::string same = example::EncodeExample(*table);
  FUZZ_CHECK(!CheckPair(payload, same), "the original's own table counts as an edit");
  if (table->features.empty()) return;
  FeatureTable fewer = *table;
  fewer.features.erase(fewer.features.begin());
  FUZZ_CHECK(CheckPair(payload, example::EncodeExample(fewer)), "a removed feature is no edit");
}

}  // namespace
}  // namespace tfrecordfs::fuzz

TFRFS_FUZZ_ENTRY(tfrecordfs::fuzz::Check, 1u << 20)
