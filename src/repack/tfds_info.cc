#include "tfrecordfs/repack/tfds_info.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
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

// Where a value is in a JSON text: [begin, end).
struct Span {
  size_t begin = 0, end = 0;
};

// A small reader of JSON text that finds, without changing a byte, where
// the values a commit changes are: each split's "shardLengths" elements
// and "numBytes" (the rest is skipped, checked only for its nesting and
// strings; nlohmann has parsed the whole text before).
class InfoSpans {
 public:
  explicit InfoSpans(absl::string_view text) : t_(text) {}

  // splits[k]: its shardLengths' element spans and its numBytes' span.
  struct Split {
    std::vector<Span> lengths;
    std::optional<Span> num_bytes;
    int seen_lengths = 0, seen_num_bytes = 0;  // (a repeated key: not spliced)
  };

  // The splits of the top-level "splits" array; false when the text is not
  // laid out so (then the caller writes the text anew).
  bool Find(std::vector<Split>* splits) {
    Ws();
    bool found = false;
    if (!Object([&](absl::string_view key) {
          if (key != "splits" || found) return Skip();
          found = true;
          return Array([&](size_t) {
            splits->emplace_back();
            Split& split = splits->back();
            Ws();
            if (Peek() != '{') return Skip();
            return Object([&](absl::string_view k) {
              if (k == "shardLengths") {
                ++split.seen_lengths;
                split.lengths.clear();
                return Array([&](size_t) {
                  Ws();
                  Span s{i_, 0};
                  if (!Skip()) return false;
                  s.end = i_;
                  split.lengths.push_back(s);
                  return true;
                });
              }
              if (k == "numBytes") {
                ++split.seen_num_bytes;
                Ws();
                Span s{i_, 0};
                if (!Skip()) return false;
                s.end = i_;
                split.num_bytes = s;
                return true;
              }
              return Skip();
            });
          });
        })) {
      return false;
    }
    return found;
  }

 private:
  char Peek() const { return i_ < t_.size() ? t_[i_] : '\0'; }
  void Ws() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\r' || t_[i_] == '\t'))
      ++i_;
  }
  // A string at i_; its raw text (escapes kept) into *raw.
  bool String(absl::string_view* raw) {
    if (Peek() != '"') return false;
    const size_t from = ++i_;
    while (i_ < t_.size() && t_[i_] != '"') i_ += t_[i_] == '\\' ? 2 : 1;
    if (i_ >= t_.size()) return false;
    *raw = t_.substr(from, i_ - from);
    ++i_;
    return true;
  }
  template <typename F>
  bool Object(F&& member) {
    Ws();
    if (Peek() != '{') return false;
    ++i_;
    Ws();
    if (Peek() == '}') return ++i_, true;
    for (;;) {
      Ws();
      absl::string_view key;
      if (!String(&key)) return false;
      Ws();
      if (Peek() != ':') return false;
      ++i_;
      if (!member(key)) return false;
      Ws();
      if (Peek() == ',') {
        ++i_;
        continue;
      }
      if (Peek() != '}') return false;
      ++i_;
      return true;
    }
  }
  template <typename F>
  bool Array(F&& element) {
    Ws();
    if (Peek() != '[') return false;
    ++i_;
    Ws();
    if (Peek() == ']') return ++i_, true;
    for (size_t n = 0;; ++n) {
      if (!element(n)) return false;
      Ws();
      if (Peek() == ',') {
        ++i_;
        continue;
      }
      if (Peek() != ']') return false;
      ++i_;
      return true;
    }
  }
  // Any value.
  bool Skip() {
    Ws();
    const char c = Peek();
    if (c == '"') {
      absl::string_view raw;
      return String(&raw);
    }
    if (c == '{') return Object([&](absl::string_view) { return Skip(); });
    if (c == '[') return Array([&](size_t) { return Skip(); });
    const size_t from = i_;
    while (i_ < t_.size() && !absl::ascii_isspace(static_cast<unsigned char>(t_[i_])) &&
           t_[i_] != ',' && t_[i_] != '}' && t_[i_] != ']') {
      ++i_;
    }
    return i_ > from;
  }

  absl::string_view t_;
  size_t i_ = 0;
};

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
  out.format = std::string(head.substr(dot + 1));
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
  if (!ParseTfdsShardName(paths.file)) return std::nullopt;
  auto text = ReadFileToString(paths.info);
  if (!text.ok()) {
    if (ErrnoOf(text.status()) == ENOENT || absl::IsNotFound(text.status())) return std::nullopt;
    return text.status();
  }
  auto out = CommittedTfdsInfoJson(*text, paths.file, records, bytes_delta, paths.info);
  if (!out.ok() && absl::IsDataLoss(out.status())) {
    return SetMessage(out.status(), absl::StrCat(out.status().message(), " for ", shard_path));
  }
  return out;
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

absl::StatusOr<std::optional<std::string>> CommittedTfdsInfoJson(absl::string_view text,
                                                                 absl::string_view shard_file,
                                                                 uint64_t records,
                                                                 std::optional<int64_t> bytes_delta,
                                                                 const std::string& where) {
  const auto name = ParseTfdsShardName(shard_file);
  if (!name) return std::nullopt;
  nlohmann::ordered_json info =
      nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (info.is_discarded()) {
    return absl::DataLossError(absl::StrCat(where, ": not JSON; its split sizes were not updated"));
  }
  if (!info.is_object() || !info.contains("splits") || !info["splits"].is_array()) {
    return std::nullopt;
  }
  size_t k = 0;
  for (auto& split : info["splits"]) {
    ++k;
    if (!split.is_object() || split.value("name", "") != name->split) continue;
    if (!split.contains("shardLengths") || !split["shardLengths"].is_array() ||
        split["shardLengths"].size() != name->count) {
      return std::nullopt;
    }
    auto& lengths = split["shardLengths"];
    lengths[name->index] = Like(lengths[name->index], records);
    bool bytes_changed = false;
    if (bytes_delta && split.contains("numBytes")) {
      if (auto old = IntOf(split["numBytes"])) {
        const int64_t now = static_cast<int64_t>(*old) + *bytes_delta;
        split["numBytes"] =
            Like(split["numBytes"], static_cast<uint64_t>(std::max<int64_t>(now, 0)));
        bytes_changed = true;
      }
    }
    // The two values replaced in the text as it is, every other byte kept
    // (its layout, escapes and number spellings are the writer's, TFDS's);
    // written anew only when the text is laid out in a way not found so.
    std::vector<InfoSpans::Split> spans;
    if (InfoSpans(text).Find(&spans) && spans.size() == info["splits"].size()) {
      const InfoSpans::Split& at = spans[k - 1];
      if (at.seen_lengths == 1 && at.lengths.size() == name->count && at.seen_num_bytes <= 1 &&
          (!bytes_changed || at.num_bytes)) {
        std::vector<std::pair<Span, std::string>> edits = {
            {at.lengths[name->index], lengths[name->index].dump()}};
        if (bytes_changed) edits.push_back({*at.num_bytes, split["numBytes"].dump()});
        std::sort(edits.begin(), edits.end(),
                  [](const auto& a, const auto& b) { return a.first.begin > b.first.begin; });
        std::string out(text);
        for (const auto& [span, value] : edits) {
          out.replace(span.begin, span.end - span.begin, value);
        }
        return out;
      }
    }
    return info.dump(2) + "\n";
  }
  return std::nullopt;
}

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

absl::StatusOr<std::optional<std::string>> ReshardedTfdsInfoJson(
    const std::vector<TfdsOutput>& outputs, const std::optional<std::string>& output_info,
    const std::optional<std::string>& source_info, const std::optional<std::string>& source_split,
    const std::string& where) {
  constexpr uint64_t kFramingBytes = 16;  // a TFRecord's header and footer
  constexpr char kDefaultTemplate[] = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}";
  if (outputs.empty() || (!output_info && !source_info)) return std::nullopt;
  std::string split, format;
  std::vector<uint64_t> lengths(outputs.size(), 0);
  std::vector<bool> seen(outputs.size(), false);
  uint64_t payload = 0;
  for (const TfdsOutput& out : outputs) {
    const auto name = ParseTfdsShardName(InfoPathsOf(out.path).file);
    if (!name || name->count != outputs.size() || seen[name->index] ||
        (!split.empty() && (name->split != split || name->format != format))) {
      return std::nullopt;
    }
    split = name->split;
    format = name->format;
    seen[name->index] = true;
    lengths[name->index] = out.records;
    payload += out.bytes - std::min(out.bytes, out.records * kFramingBytes);
  }
  const std::string& from_split = source_split ? *source_split : split;
  // `text` parsed; a split of it by name (nullopt: none).
  auto parse = [&](const std::string& text) -> absl::StatusOr<nlohmann::ordered_json> {
    nlohmann::ordered_json info =
        nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (info.is_discarded() || !info.is_object()) {
      return absl::DataLossError(absl::StrCat(where, ": not a JSON object"));
    }
    return info;
  };
  auto find = [](nlohmann::ordered_json& info,
                 const std::string& name) -> std::optional<nlohmann::ordered_json> {
    if (!info.contains("splits") || !info["splits"].is_array()) return std::nullopt;
    for (const auto& s : info["splits"]) {
      if (s.is_object() && s.value("name", "") == name) return s;
    }
    return std::nullopt;
  };
  nlohmann::ordered_json info;
  std::optional<nlohmann::ordered_json> base;
  nlohmann::ordered_json splits = nlohmann::ordered_json::array();
  if (output_info) {
    auto own = parse(*output_info);
    if (!own.ok()) return own.status();
    info = *std::move(own);
    base = find(info, split);
    if (info.contains("splits") && info["splits"].is_array()) {
      for (const auto& s : info["splits"]) {
        if (!s.is_object() || s.value("name", "") != split) splits.push_back(s);
      }
    }
  }
  if (!base && source_info) {
    auto src = parse(*source_info);
    if (!src.ok()) return src.status();
    base = find(*src, from_split);
    if (!output_info) info = *std::move(src);
  }
  if (!base) return std::nullopt;
  nlohmann::ordered_json& s = *base;
  s["name"] = split;
  const nlohmann::ordered_json like =
      s.contains("shardLengths") && s["shardLengths"].is_array() && !s["shardLengths"].empty()
          ? s["shardLengths"][0]
          : nlohmann::ordered_json("0");
  nlohmann::ordered_json shard_lengths = nlohmann::ordered_json::array();
  for (uint64_t n : lengths) shard_lengths.push_back(Like(like, n));
  s["shardLengths"] = std::move(shard_lengths);
  s["numBytes"] = Like(s.contains("numBytes") ? s["numBytes"] : like, payload);
  if (s.contains("filepathTemplate") && s["filepathTemplate"] != kDefaultTemplate) {
    s.erase("filepathTemplate");
  }
  splits.push_back(std::move(s));
  info["splits"] = std::move(splits);
  info["fileFormat"] = format;
  return info.dump(2) + "\n";
}

absl::StatusOr<std::optional<std::string>> WriteReshardedTfdsInfo(
    const std::vector<std::string>& sources, const std::vector<TfdsOutput>& outputs, bool complete,
    std::string* why) {
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
  const InfoPaths to = InfoPathsOf(outputs[0].path);
  for (const TfdsOutput& out : outputs) {
    if (InfoPathsOf(out.path).dir != to.dir) return no("the outputs are not in one folder");
  }
  if (!complete) return no("records were skipped as damaged: the split's counts would be wrong");
  auto read = [](const std::string& path) -> absl::StatusOr<std::optional<std::string>> {
    auto text = ReadFileToString(path);
    if (text.ok()) return std::optional<std::string>(*std::move(text));
    if (ErrnoOf(text.status()) == ENOENT || absl::IsNotFound(text.status())) return std::nullopt;
    return text.status();
  };
  auto source_info = read(from.info);
  if (!source_info.ok()) return source_info.status();
  if (!*source_info) return no(absl::StrCat("no ", from.info));
  auto output_info = read(to.info);
  if (!output_info.ok()) return output_info.status();
  auto text = ReshardedTfdsInfoJson(outputs, *output_info, *source_info, split,
                                    *output_info ? to.info : from.info);
  if (!text.ok()) return text.status();
  if (!*text) {
    return no(absl::StrCat(
        "the output names are not TFDS's (<dataset>-<split>.<format>-NNNNN-of-MMMMM) or ",
        from.info, " has no split ", split));
  }
  if (auto s = WriteFileAtomically(to.info, **text); !s.ok()) return s;
  return to.info;
}

bool DiscardTfdsInfo(const std::string& shard_path) {
  return ::unlink(PendingTfdsInfoPath(shard_path).c_str()) == 0;
}

}  // namespace tfrecordfs::repack
