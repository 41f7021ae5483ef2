#include "tfrecordfs/index/dali_index.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/hash.h"

namespace tfrecordfs::index {
namespace {

constexpr absl::string_view kMagic = "tfrecordfs-dali 1";

std::string Hex(uint64_t h) { return absl::StrFormat("%016x", h); }

// The registry file of a shard (by its real path), "" without a registry.
std::string EntryPath(const std::string& real_path) {
  const std::string dir = DaliRegistryDir();
  if (dir.empty()) return "";
  return absl::StrCat(dir, "/", Hex(Fnv1a64(real_path)), ".dali");
}

struct Entry {
  std::string idx_path;
  uint64_t hash = 0;
};

// The shard's entry; nullopt when there is none or it is not one (a torn or
// foreign file: ignored, as a cache would).
std::optional<Entry> ReadEntry(const std::string& entry_path, const std::string& real_path) {
  auto text = ReadFileToString(entry_path);
  if (!text.ok()) return std::nullopt;
  std::vector<std::string> lines = absl::StrSplit(*text, '\n');
  Entry e;
  if (lines.size() < 4 || lines[0] != kMagic || lines[1] != real_path || lines[2].empty() ||
      lines[2][0] != '/' || !absl::SimpleHexAtoi(lines[3], &e.hash)) {
    return std::nullopt;
  }
  e.idx_path = lines[2];
  return e;
}

absl::Status WriteEntry(const std::string& entry_path, const std::string& real_path,
                        const std::string& idx_path, uint64_t hash) {
  if (auto s = MakeDirs(Dirname(entry_path), 0755); !s.ok()) return s;
  return WriteFileAtomically(
      entry_path, absl::StrCat(kMagic, "\n", real_path, "\n", idx_path, "\n", Hex(hash), "\n"));
}

}  // namespace

std::string DaliIndexText(const std::vector<uint64_t>& offsets) {
  std::string out;
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    absl::StrAppend(&out, offsets[i], " ", offsets[i + 1] - offsets[i], "\n");
  }
  return out;
}

std::string DaliRegistryDir() { return UserCacheDir("dali"); }

absl::Status RecordDaliIndex(const std::string& shard_path, const std::string& idx_path,
                             const std::string& text) {
  const std::string real = RealPath(shard_path).value_or(shard_path);
  const std::string entry = EntryPath(real);
  if (entry.empty()) return absl::OkStatus();
  return WriteEntry(entry, real, idx_path, Fnv1a64(text));
}

bool HasDaliIndex(const std::string& shard_path) {
  const std::string real = RealPath(shard_path).value_or(shard_path);
  const std::string entry = EntryPath(real);
  return !entry.empty() && ReadEntry(entry, real).has_value();
}

absl::StatusOr<std::optional<std::string>> FollowDaliIndex(const std::string& shard_path,
                                                           const std::vector<uint64_t>& offsets) {
  const std::string real = RealPath(shard_path).value_or(shard_path);
  const std::string entry_path = EntryPath(real);
  if (entry_path.empty()) return std::nullopt;
  const std::optional<Entry> entry = ReadEntry(entry_path, real);
  if (!entry) return std::nullopt;
  const std::string text = DaliIndexText(offsets);
  const uint64_t hash = Fnv1a64(text);
  auto now = ReadFileToString(entry->idx_path);
  if (!now.ok() || (Fnv1a64(*now) != entry->hash && *now != text)) {
    // Gone, or no longer what tfrecordfs wrote: not ours to change.
    ::unlink(entry_path.c_str());
    return std::nullopt;
  }
  if (*now != text) {
    if (auto s = WriteFileAtomically(entry->idx_path, text); !s.ok()) return s;
  }
  if (entry->hash != hash) {
    if (auto s = WriteEntry(entry_path, real, entry->idx_path, hash); !s.ok()) return s;
  }
  return entry->idx_path;
}

}  // namespace tfrecordfs::index
