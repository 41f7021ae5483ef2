// Fuzz target: what the commit of edits trusts on disk (issue 23): the
// deletion list (staging/deletions.h), which is also the commit's journal
// (which shards to rewrite, which records to leave out, which rewrite was in
// flight), and the names of the edit store's folders (staging/edits.h) and
// of TFDS shards (repack/tfds_info.h). The input is a whole deletion list,
// checked as it is and again with its checksum line recomputed so that
// mutations reach the line parser; then its bytes are read as folder and
// shard names.
//
// Invariants:
//   * ParseDeletions never crashes; it fails only with DataLoss, or with
//     FailedPrecondition for another version, and every message names the
//     path;
//   * whatever it accepts has absolute shard paths, a record count only
//     with a rewrite in flight, and re-encodes (EncodeDeletions) to a list
//     that parses to the same value and the same bytes;
//   * an accepted list is refused when torn at any earlier line end;
//   * ParseEditFolder accepts only names EditedFolderName / AddedFolderName
//     make, and gives back what made them; ParseTfdsShardName never crashes
//     and its index is below its count.
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checksum_line.h"
#include "fuzz_check.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/repack/tfds_info.h"
#include "tfrecordfs/staging/deletions.h"
#include "tfrecordfs/staging/edits.h"

namespace tfrecordfs::fuzz {
namespace {

constexpr absl::string_view kPath = "fuzz/deleted-records";

bool Same(const staging::Deletions& a, const staging::Deletions& b) {
  if (a.size() != b.size()) return false;
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
    if (ia->first != ib->first || !(ia->second.before == ib->second.before) ||
        ia->second.rewriting != ib->second.rewriting ||
        ia->second.rewritten_records != ib->second.rewritten_records ||
        ia->second.records != ib->second.records) {
      return false;
    }
  }
  return true;
}

void Check(absl::string_view bytes) {
  auto parsed = staging::ParseDeletions(bytes, kPath);
  if (!parsed.ok()) {
    CheckRefusal(parsed.status(), kPath);
    return;
  }
  for (const auto& [path, shard] : *parsed) {
    FUZZ_CHECK(absl::StartsWith(path, "/"), "shard path ", path);
    FUZZ_CHECK(!shard.rewritten_records || shard.rewriting, "records without rewriting");
  }
  const std::string text = staging::EncodeDeletions(*parsed);
  auto back = staging::ParseDeletions(text, kPath);
  FUZZ_CHECK(back.ok(), "EncodeDeletions output refused: ", back.status().ToString());
  FUZZ_CHECK(Same(*parsed, *back), "round trip changes the list");
  FUZZ_CHECK(staging::EncodeDeletions(*back) == text, "re-encoding changes the bytes");
  CheckTornPrefixesRefused(bytes,
                           [](absl::string_view b) { return staging::ParseDeletions(b, kPath); });
}

void CheckNames(absl::string_view bytes) {
  if (auto f = staging::ParseEditFolder(bytes)) {
    const std::string again = f->record ? staging::EditedFolderName(f->key, *f->record)
                                        : staging::AddedFolderName(f->key, f->added);
    // Leading zeros of a record index are the one spelling that differs.
    if (!f->record) FUZZ_CHECK(again == bytes, "added folder name ", again);
    auto back = staging::ParseEditFolder(again);
    FUZZ_CHECK(back && back->key == f->key && back->record == f->record && back->added == f->added,
               "folder name does not round-trip");
  }
  const std::string key = staging::ShardKey(bytes);
  FUZZ_CHECK(key.size() == 16, "shard key ", key);
  auto e = staging::ParseEditFolder(staging::AddedFolderName(key, bytes));
  FUZZ_CHECK(bytes.empty() || (e && e->added == bytes && !e->record), "added name lost");
  if (auto t = repack::ParseTfdsShardName(bytes)) {
    FUZZ_CHECK(t->index < t->count && !t->split.empty(), "TFDS name ", bytes);
  }
}

void FuzzOne(absl::string_view bytes) {
  CheckAsIsAndWithChecksum(bytes, [](absl::string_view b) { Check(b); });
  CheckNames(bytes.substr(0, 300));
}

}  // namespace
}  // namespace tfrecordfs::fuzz

TFRFS_FUZZ_ENTRY(tfrecordfs::fuzz::FuzzOne, size_t{1} << 30)
