// Fuzz target: SpliceEdit (example/splice.h), the rebuild of an edited record
// from its original's wire bytes, which reads the shard's bytes (untrusted).
// The input is one record payload, and, past its first 0xff byte, a second
// one; the edits tried are the original's own table encoded afresh (the
// "nothing changed" case), the table without its first feature, and the
// second payload.
//
// Invariants, for every (original, edited) pair:
//   * SpliceEdit never crashes, whatever the two payloads;
//   * "unchanged" only when the two say the same thing: equal bytes, or both
//     Examples with the same features (names, kinds, values, floats bit for
//     bit, kindless ones too);
//   * "changed" gives a payload that says what `edited` says: where `edited`
//     is an Example, the payload decodes to the same features;
//   * the original's own table encoded afresh is always "unchanged", and the
//     table without its first feature is always "changed".
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "testing/canon.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/splice.h"

namespace tfrecordfs::fuzz {
namespace {

using example::FeatureTable;
using test::FromTable;

// The features an Example payload holds, or nothing when it is no Example.
bool Features(absl::string_view payload, test::CanonTable* out) {
  auto table = example::DecodeExample(payload);
  if (!table.ok()) return false;
  *out = FromTable(*table);
  return true;
}

// Returns whether SpliceEdit said "changed".
bool CheckPair(absl::string_view original, absl::string_view edited) {
  const example::SplicedRecord r = example::SpliceEdit(original, edited);
  test::CanonTable want, got;
  const bool edited_is_example = Features(edited, &want);
  if (!r.changed) {
    if (original != edited) {
      FUZZ_CHECK(edited_is_example && Features(original, &got) && got == want,
                 "unchanged, but the payloads say different things");
    }
    return false;
  }
  if (edited_is_example) {
    FUZZ_CHECK(Features(r.payload, &got), "a spliced Example does not decode");
    FUZZ_CHECK(got == want, "the spliced payload says something else than the edit");
  }
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
