#include "tfrecordfs/staging/edits.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/hash.h"
#include "tfrecordfs/staging/record_folder.h"

namespace tfrecordfs::staging {

std::string ShardKey(absl::string_view shard_path) {
  // Stable across runs and machines (absl::Hash is not).
  return absl::StrFormat("%016x", Fnv1a64(shard_path));
}

std::string EditedFolderName(absl::string_view key, uint64_t record) {
  return absl::StrCat(key, "-", record);
}

std::string AddedFolderName(absl::string_view key, absl::string_view name) {
  return absl::StrCat(key, "+", name);
}

std::optional<EditFolder> ParseEditFolder(absl::string_view folder) {
  constexpr size_t kKeyLen = 16;
  if (folder.size() < kKeyLen + 2) return std::nullopt;
  const absl::string_view key = folder.substr(0, kKeyLen);
  if (!std::all_of(key.begin(), key.end(),
                   [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); })) {
    return std::nullopt;
  }
  EditFolder out;
  out.key = std::string(key);
  const absl::string_view rest = folder.substr(kKeyLen + 1);
  if (folder[kKeyLen] == '-') {
    uint64_t r;
    if (!std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        !absl::SimpleAtoi(rest, &r)) {
      return std::nullopt;
    }
    out.record = r;
    return out;
  }
  if (folder[kKeyLen] == '+') {
    out.added = std::string(rest);
    return out;
  }
  return std::nullopt;
}

std::map<std::string, std::vector<std::string>> ListEditFolders(const std::string& records_dir) {
  std::map<std::string, std::vector<std::string>> out;
  auto dir = ListDir::Open(records_dir);
  if (!dir.ok()) return out;
  absl::string_view name;
  while (dir->Next(&name)) {
    if (auto f = ParseEditFolder(name)) out[f->key].push_back(std::string(name));
  }
  for (auto& [key, names] : out) std::sort(names.begin(), names.end());
  return out;
}

absl::StatusOr<ShardEdits> ReadShardEdits(const std::string& records_dir, absl::string_view key,
                                          naming::FeatureTypes& types) {
  ShardEdits out;
  const auto all = ListEditFolders(records_dir);
  auto it = all.find(std::string(key));
  if (it == all.end()) return out;
  for (const std::string& name : it->second) {
    const EditFolder f = *ParseEditFolder(name);
    auto payload = PayloadFromFolder(absl::StrCat(records_dir, "/", name), types);
    if (!payload.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(f.record ? absl::StrCat("record ", *f.record)
                                : absl::StrCat("added record '", f.added, "'"),
                       ": ", payload.status().message()));
    }
    if (f.record) {
      out.replaced[*f.record] = *std::move(payload);
    } else {
      out.added.emplace_back(f.added, *std::move(payload));
    }
    out.folders.push_back(name);
  }
  std::sort(out.added.begin(), out.added.end());
  return out;
}

}  // namespace tfrecordfs::staging
