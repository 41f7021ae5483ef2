// Fuzz target: the pack journal (repack/journal.h), the file recovery trusts
// to decide which shards to delete and which staged folders to remove. The
// input is a whole journal file. It is checked as it is, and again with its
// checksum line recomputed (as a writer that damaged the body but kept a
// valid checksum would leave it), so that mutations reach the line parser
// behind the crc32c. Then the input is read as a program for a Journal
// (names of any bytes but '/' and NUL), which must survive EncodeJournal ->
// ParseJournal.
//
// Invariants:
//   * ParseJournal never crashes; it fails only with DataLoss, or with
//     FailedPrecondition for a well-formed journal of another version, and
//     every message names the path;
//   * whatever it accepts has absolute directories and names of one path
//     component (recovery deletes what they name), and re-encodes to a journal
//     that parses to the same value; re-encoding that gives the same bytes
//     (EncodeJournal is a fixed point after one round);
//   * an accepted file is refused when torn at any earlier line end (a torn
//     journal is never mistaken for a whole one);
//   * any Journal a pack could write (absolute directories, names of one
//     component) round-trips through EncodeJournal and ParseJournal exactly.
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "checksum_line.h"
#include "fuzz_check.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/repack/journal.h"

namespace tfrecordfs::fuzz {
namespace {

using repack::Journal;

constexpr absl::string_view kPath = "fuzz/journal";

// Where two journals differ, or "" when they are the same value.
std::string Diff(const Journal& a, const Journal& b) {
  if (a.state != b.state) return "state";
  if (a.records_dir != b.records_dir) return "records_dir";
  if (a.output_dir != b.output_dir) return "output_dir";
  if (a.remove_packed != b.remove_packed) return "remove_packed";
  if (a.shards.size() != b.shards.size()) {
    return absl::StrCat("shard count ", a.shards.size(), " vs ", b.shards.size());
  }
  for (size_t i = 0; i < a.shards.size(); ++i) {
    const Journal::Shard& x = a.shards[i];
    const Journal::Shard& y = b.shards[i];
    if (x.name != y.name) return absl::StrCat("shard ", i, " name");
    if (x.bytes != y.bytes) return absl::StrCat("shard ", i, " bytes");
    if (x.records != y.records) return absl::StrCat("shard ", i, " records");
  }
  return "";
}

// Encodes `j`, parses it back and checks it is the same value.
void CheckRoundTrip(const Journal& j) {
  const std::string text = repack::EncodeJournal(j);
  auto back = repack::ParseJournal(text, kPath);
  FUZZ_CHECK(back.ok(), "EncodeJournal output refused: ", back.status().ToString());
  const std::string diff = Diff(j, *back);
  FUZZ_CHECK(diff.empty(), "round trip changes the ", diff);
  FUZZ_CHECK(repack::EncodeJournal(*back) == text, "re-encoding changes the bytes");
}

void Check(absl::string_view bytes) {
  auto parsed = repack::ParseJournal(bytes, kPath);
  if (!parsed.ok()) {
    const absl::Status& s = parsed.status();
    CheckRefusal(s, kPath);
    if (absl::IsFailedPrecondition(s)) {
      FUZZ_CHECK(absl::StartsWith(bytes, absl::StrCat(repack::kJournalMagic, " ")),
                 "version refusal without the magic: ", s.ToString());
    }
    return;
  }
  const Journal& j = *parsed;
  FUZZ_CHECK(absl::StartsWith(j.records_dir, "/") && absl::StartsWith(j.output_dir, "/"));
  for (const Journal::Shard& s : j.shards) {
    FUZZ_CHECK(repack::IsJournalName(s.name), "shard name ", s.name);
    for (const std::string& r : s.records) {
      FUZZ_CHECK(repack::IsJournalName(r), "record name ", r);
    }
  }
  CheckRoundTrip(j);

  // Torn at any earlier line end: refused, never a smaller journal.
  CheckTornPrefixesRefused(bytes,
                           [](absl::string_view b) { return repack::ParseJournal(b, kPath); });
}

// A Journal built from the input: names are any bytes but '/' and NUL
// (never "." or ".."), directories those names after a '/'.
Journal Generate(Bytes in) {
  auto name = [&in] {
    std::string s(in.Str(40));
    for (char& c : s) {
      if (c == '/' || c == '\0') c = '_';
    }
    if (s.empty() || s == "." || s == "..") s += "n";
    return s;
  };
  auto dir = [&name] { return "/" + name(); };
  Journal j;
  const uint8_t flags = in.U8();
  j.state = (flags & 1) ? Journal::State::kCommitted : Journal::State::kPlanned;
  j.remove_packed = (flags & 2) != 0;
  j.records_dir = dir();
  j.output_dir = dir();
  const int shards = in.U8() % 5;
  for (int i = 0; i < shards && !in.empty(); ++i) {
    Journal::Shard s;
    s.name = name();
    s.bytes = in.U64();
    const int records = in.U8() % 6;
    for (int r = 0; r < records; ++r) s.records.push_back(name());
    j.shards.push_back(std::move(s));
  }
  return j;
}

void FuzzOne(absl::string_view bytes) {
  CheckAsIsAndWithChecksum(bytes, [](absl::string_view b) { Check(b); });
  CheckRoundTrip(Generate(Bytes(bytes)));
}

}  // namespace
}  // namespace tfrecordfs::fuzz

TFRFS_FUZZ_ENTRY(tfrecordfs::fuzz::FuzzOne, size_t{1} << 30)
