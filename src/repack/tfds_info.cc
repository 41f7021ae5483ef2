#include "tfrecordfs/repack/tfds_info.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/log.h"

namespace tfrecordfs::repack {

namespace {

bool AllDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A JSON number or a string of digits (proto3's int64).
std::optional<uint64_t> IntOf(const nlohmann::ordered_json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0)
    return static_cast<uint64_t>(v.get<int64_t>());
  uint64_t n;
  if (v.is_string() && absl::SimpleAtoi(v.get<std::string>(), &n)) return n;
  return std::nullopt;
}

// `n` as `like` is spelt: a string when it is one.
nlohmann::ordered_json Like(const nlohmann::ordered_json& like, uint64_t n) {
  if (like.is_string()) return absl::StrCat(n);
  return n;
}

}  // namespace

std::optional<TfdsShardName> ParseTfdsShardName(absl::string_view name) {
  // ...-<split>.<format>-NNNNN-of-MMMMM
  constexpr size_t kTail = 15;  // "-NNNNN-of-MMMMM"
  if (name.size() <= kTail) return std::nullopt;
  const absl::string_view tail = name.substr(name.size() - kTail);
  if (tail[0] != '-' || tail.substr(6, 4) != "-of-" || !AllDigits(tail.substr(1, 5)) ||
      !AllDigits(tail.substr(10, 5))) {
    return std::nullopt;
  }
  const absl::string_view head = name.substr(0, name.size() - kTail);  // <dataset>-<split>.<fmt>
  const size_t dot = head.rfind('.');
  if (dot == absl::string_view::npos) return std::nullopt;
  const absl::string_view before_dot = head.substr(0, dot);
  const size_t dash = before_dot.rfind('-');
  if (dash == absl::string_view::npos || dash + 1 == before_dot.size()) return std::nullopt;
  TfdsShardName out;
  out.split = std::string(before_dot.substr(dash + 1));
  if (!absl::SimpleAtoi(tail.substr(1, 5), &out.index) ||
      !absl::SimpleAtoi(tail.substr(10, 5), &out.count) || out.index >= out.count) {
    return std::nullopt;
  }
  return out;
}

namespace {

struct InfoPaths {
  std::string dir;
  std::string file;  // the shard's base name
  std::string info;  // <dir>/dataset_info.json
};

InfoPaths InfoPathsOf(const std::string& shard_path) {
  const size_t slash = shard_path.rfind('/');
  InfoPaths p;
  p.dir = slash == std::string::npos ? "." : shard_path.substr(0, slash);
  p.file = shard_path.substr(slash == std::string::npos ? 0 : slash + 1);
  p.info = p.dir + "/dataset_info.json";
  return p;
}

// The text dataset_info.json should have after the rewrite (see
// UpdateTfdsInfo), or nullopt when there is nothing to update.
absl::StatusOr<std::optional<std::string>> UpdatedTfdsInfo(const std::string& shard_path,
                                                           uint64_t records,
                                                           std::optional<int64_t> bytes_delta) {
  const InfoPaths paths = InfoPathsOf(shard_path);
  const auto name = ParseTfdsShardName(paths.file);
  if (!name) return std::nullopt;
  auto text = ReadFileToString(paths.info);
  if (!text.ok()) {
    if (ErrnoOf(text.status()) == ENOENT || absl::IsNotFound(text.status())) return std::nullopt;
    return text.status();
  }
  nlohmann::ordered_json info =
      nlohmann::ordered_json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (info.is_discarded()) {
    return absl::DataLossError(absl::StrCat(paths.info,
                                            ": not JSON; its split sizes were not "
                                            "updated for ",
                                            shard_path));
  }
  if (!info.is_object() || !info.contains("splits") || !info["splits"].is_array()) {
    return std::nullopt;
  }
  for (auto& split : info["splits"]) {
    if (!split.is_object() || split.value("name", "") != name->split) continue;
    if (!split.contains("shardLengths") || !split["shardLengths"].is_array() ||
        split["shardLengths"].size() != name->count) {
      return std::nullopt;
    }
    auto& lengths = split["shardLengths"];
    lengths[name->index] = Like(lengths[name->index], records);
    if (bytes_delta && split.contains("numBytes")) {
      if (auto old = IntOf(split["numBytes"])) {
        const int64_t now = static_cast<int64_t>(*old) + *bytes_delta;
        split["numBytes"] =
            Like(split["numBytes"], static_cast<uint64_t>(std::max<int64_t>(now, 0)));
      }
    }
    return info.dump(2) + "\n";
  }
  return std::nullopt;
}

// Gives `file` (the new dataset_info.json, not yet or just renamed into
// place) what `info` (the one it replaces) had: owner, group, permission
// bits. Best effort: a daemon that may not chown leaves the file its own
// (logged); the metadata itself is still right.
void KeepOwnerAndMode(const std::string& info, const std::string& file) {
  struct stat was;
  if (::stat(info.c_str(), &was) != 0) return;
  if (::chown(file.c_str(), was.st_uid, was.st_gid) != 0) {
    log::Warning(file, ": cannot give it the owner of ", info, " (", std::strerror(errno), ")");
  }
  if (::chmod(file.c_str(), was.st_mode & 07777) != 0) {
    log::Warning(file, ": cannot give it the mode of ", info, " (", std::strerror(errno), ")");
  }
}

}  // namespace

absl::StatusOr<std::optional<std::string>> UpdateTfdsInfo(const std::string& shard_path,
                                                          uint64_t records,
                                                          std::optional<int64_t> bytes_delta) {
  auto text = UpdatedTfdsInfo(shard_path, records, bytes_delta);
  if (!text.ok()) return text.status();
  if (!*text) return std::nullopt;
  const std::string info = InfoPathsOf(shard_path).info;
  struct stat was;
  const bool existed = ::stat(info.c_str(), &was) == 0;
  if (auto s = WriteFileAtomically(info, **text); !s.ok()) return s;
  if (existed && (::chown(info.c_str(), was.st_uid, was.st_gid) != 0 ||
                  ::chmod(info.c_str(), was.st_mode & 07777) != 0)) {
    log::Warning(info, ": cannot keep its owner and mode (", std::strerror(errno), ")");
  }
  return info;
}

std::string PendingTfdsInfoPath(const std::string& shard_path) {
  const InfoPaths paths = InfoPathsOf(shard_path);
  return absl::StrCat(paths.dir, "/.dataset_info.json.", paths.file, ".tmp");
}

absl::StatusOr<bool> PrepareTfdsInfo(const std::string& shard_path, uint64_t records,
                                     int64_t bytes_delta) {
  auto text = UpdatedTfdsInfo(shard_path, records, bytes_delta);
  if (!text.ok()) return text.status();
  if (!*text) return false;
  const std::string pending = PendingTfdsInfoPath(shard_path);
  if (auto s = WriteFileAtomically(pending, **text); !s.ok()) return s;
  KeepOwnerAndMode(InfoPathsOf(shard_path).info, pending);
  return true;
}

absl::StatusOr<std::optional<std::string>> FinishTfdsInfo(const std::string& shard_path) {
  const InfoPaths paths = InfoPathsOf(shard_path);
  const std::string pending = PendingTfdsInfoPath(shard_path);
  if (::rename(pending.c_str(), paths.info.c_str()) != 0) {
    if (errno == ENOENT) return std::nullopt;
    return ErrnoError(errno, absl::StrCat("rename ", pending, " over ", paths.info));
  }
  if (auto s = FsyncDir(paths.dir); !s.ok()) return s;
  return paths.info;
}

absl::StatusOr<std::optional<std::string>> WriteReshardedTfdsInfo(
    const std::vector<std::string>& sources,
    const std::vector<std::pair<std::string, uint64_t>>& outputs, absl::string_view file_format,
    bool complete, std::string* why) {
  auto no = [&](std::string reason) -> absl::StatusOr<std::optional<std::string>> {
    *why = std::move(reason);
    return std::nullopt;
  };
  if (sources.empty() || outputs.empty()) return no("no shards");
  // The sources: all N shards of one split, in one folder.
  const InfoPaths from = InfoPathsOf(sources[0]);
  if (::access(from.info.c_str(), F_OK) != 0) return no("");  // no TFDS dataset: nothing to say
  std::string split;
  std::vector<bool> seen;
  for (const std::string& path : sources) {
    const InfoPaths p = InfoPathsOf(path);
    const auto name = ParseTfdsShardName(p.file);
    if (!name || p.dir != from.dir) return no("the sources are not the shards of one TFDS split");
    if (seen.empty()) {
      split = name->split;
      seen.assign(name->count, false);
    }
    if (name->split != split || name->count != seen.size() || seen[name->index]) {
      return no("the sources are not the shards of one TFDS split");
    }
    seen[name->index] = true;
  }
  if (std::find(seen.begin(), seen.end(), false) != seen.end()) {
    return no(absl::StrCat("the sources are some of split ", split, "'s ", seen.size(),
                           " shards, not all"));
  }
  // The outputs: TFDS names of one split, in order.
  const InfoPaths to = InfoPathsOf(outputs[0].first);
  std::string out_split;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const InfoPaths p = InfoPathsOf(outputs[i].first);
    const auto name = ParseTfdsShardName(p.file);
    if (!name || p.dir != to.dir || name->index != i || name->count != outputs.size() ||
        (i > 0 && name->split != out_split)) {
      return no("the output names are not TFDS's (<dataset>-<split>.<format>-NNNNN-of-MMMMM)");
    }
    out_split = name->split;
  }
  if (!complete) return no("records were skipped as damaged: the split's counts would be wrong");
  if (::access(to.info.c_str(), F_OK) == 0) {
    return no(absl::StrCat(to.info, " exists already (left as it is)"));
  }
  auto text = ReadFileToString(from.info);
  if (!text.ok()) {
    if (ErrnoOf(text.status()) == ENOENT || absl::IsNotFound(text.status())) {
      return no(absl::StrCat("no ", from.info));
    }
    return text.status();
  }
  nlohmann::ordered_json info =
      nlohmann::ordered_json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (info.is_discarded() || !info.is_object()) {
    return absl::DataLossError(absl::StrCat(from.info, ": not a JSON object"));
  }
  if (!info.contains("splits") || !info["splits"].is_array()) {
    return no(absl::StrCat(from.info, " has no splits"));
  }
  nlohmann::ordered_json kept = nlohmann::ordered_json::array();
  for (auto& s : info["splits"]) {
    if (!s.is_object() || s.value("name", "") != split) continue;
    s["name"] = out_split;
    nlohmann::ordered_json lengths = nlohmann::ordered_json::array();
    const bool as_strings = !s.contains("shardLengths") || !s["shardLengths"].is_array() ||
                            s["shardLengths"].empty() || s["shardLengths"][0].is_string();
    for (const auto& [path, records] : outputs) {
      lengths.push_back(as_strings ? nlohmann::ordered_json(absl::StrCat(records))
                                   : nlohmann::ordered_json(records));
    }
    s["shardLengths"] = std::move(lengths);
    s.erase("filepathTemplate");
    kept.push_back(s);
  }
  if (kept.empty()) return no(absl::StrCat(from.info, " has no split ", split));
  info["splits"] = std::move(kept);
  info["fileFormat"] = std::string(file_format);
  if (auto s = WriteFileAtomically(to.info, info.dump(2) + "\n"); !s.ok()) return s;
  return to.info;
}

bool DiscardTfdsInfo(const std::string& shard_path) {
  return ::unlink(PendingTfdsInfoPath(shard_path).c_str()) == 0;
}

}  // namespace tfrecordfs::repack
