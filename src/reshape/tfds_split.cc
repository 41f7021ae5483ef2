// dataset_info.json after a finalized reshard (tfds_split.h).
#include "tfrecordfs/reshape/tfds_split.h"

#include <cerrno>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/objstore/listing.h"
#include "tfrecordfs/repack/tfds_info.h"

namespace tfrecordfs::reshape {
namespace {

constexpr char kInfoName[] = "dataset_info.json";
constexpr uint64_t kFramingBytes = 16;  // a TFRecord's header and footer

// `n` as `like` is spelt: a string (proto3's int64) unless it is a number.
nlohmann::ordered_json Like(const nlohmann::ordered_json& like, uint64_t n) {
  if (like.is_number()) return n;
  return absl::StrCat(n);
}

// The folder (or URL prefix, with its '/') a path or URL lies in.
std::string FolderOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

}  // namespace

absl::StatusOr<std::optional<std::string>> TfdsInfoForOutputs(
    const std::vector<ManifestOutput>& outputs, const std::optional<std::string>& output_info,
    const std::optional<std::string>& source_info, const std::string& where) {
  if (outputs.empty() || (!output_info && !source_info)) return std::nullopt;
  std::string split;
  std::vector<uint64_t> lengths(outputs.size(), 0);
  std::set<uint64_t> seen;
  uint64_t payload = 0;
  for (const ManifestOutput& out : outputs) {
    const auto name = repack::ParseTfdsShardName(Basename(out.path));
    if (!name || name->count != outputs.size() || (!split.empty() && name->split != split) ||
        !seen.insert(name->index).second) {
      return std::nullopt;
    }
    split = name->split;
    lengths[name->index] = out.records;
    payload += out.bytes - std::min(out.bytes, out.records * kFramingBytes);
  }
  const bool own = output_info.has_value();
  nlohmann::ordered_json info = nlohmann::ordered_json::parse(own ? *output_info : *source_info,
                                                              nullptr, /*allow_exceptions=*/false);
  if (info.is_discarded()) {
    return absl::DataLossError(absl::StrCat(where, ": ", kInfoName, " is not JSON"));
  }
  if (!info.is_object() || !info.contains("splits") || !info["splits"].is_array()) {
    return std::nullopt;
  }
  nlohmann::ordered_json splits = nlohmann::ordered_json::array();
  bool found = false;
  for (auto& s : info["splits"]) {
    if (!s.is_object() || s.value("name", "") != split) {
      if (own) splits.push_back(s);  // another split of the output
      continue;
    }
    found = true;
    const nlohmann::ordered_json like =
        s.contains("shardLengths") && s["shardLengths"].is_array() && !s["shardLengths"].empty()
            ? s["shardLengths"][0]
            : nlohmann::ordered_json("0");
    nlohmann::ordered_json shard_lengths = nlohmann::ordered_json::array();
    for (uint64_t n : lengths) shard_lengths.push_back(Like(like, n));
    s["shardLengths"] = std::move(shard_lengths);
    if (s.contains("numBytes")) s["numBytes"] = Like(s["numBytes"], payload);
    splits.push_back(s);
  }
  if (!found && own && source_info) {
    // The output's file describes other splits: split S from the SOURCE's.
    auto from_source = TfdsInfoForOutputs(outputs, std::nullopt, source_info, where);
    if (!from_source.ok() || !*from_source) return from_source;
    const nlohmann::ordered_json src = nlohmann::ordered_json::parse(**from_source);
    splits.push_back(src["splits"][0]);
    found = true;
  }
  if (!found) return std::nullopt;
  info["splits"] = std::move(splits);
  return info.dump(2) + "\n";
}

absl::StatusOr<std::optional<std::string>> WriteTfdsInfoAfterFinalize(
    const std::vector<ManifestOutput>& outputs, const std::vector<std::string>& input_paths,
    const std::string& output, const BucketParts* bucket) {
  // The SOURCE's: beside the inputs, when they share one folder.
  std::set<std::string> folders;
  for (const std::string& p : input_paths) folders.insert(FolderOf(p));
  std::optional<std::string> source_info;
  if (folders.size() == 1) {
    const std::string& folder = *folders.begin();
    if (reshape::IsBucketOutput(folder)) {
      auto src = BucketParts::Open(folder);
      if (!src.ok()) return src.status();
      auto text = (*src)->ReadObject(kInfoName);
      if (!text.ok()) return text.status();
      source_info = *std::move(text);
    } else if (!objstore::IsObjectUrl(folder)) {
      auto text = ReadFileToString(JoinPath(folder, kInfoName));
      if (text.ok()) {
        source_info = *std::move(text);
      } else if (ErrnoOf(text.status()) != ENOENT && !absl::IsNotFound(text.status())) {
        return text.status();
      }
    }
  }
  std::optional<std::string> output_info;
  const std::string where = bucket ? bucket->ObjectName(kInfoName) : JoinPath(output, kInfoName);
  if (bucket) {
    auto text = bucket->ReadObject(kInfoName);
    if (!text.ok()) return text.status();
    output_info = *std::move(text);
  } else {
    auto text = ReadFileToString(where);
    if (text.ok()) {
      output_info = *std::move(text);
    } else if (ErrnoOf(text.status()) != ENOENT && !absl::IsNotFound(text.status())) {
      return text.status();
    }
  }
  auto info = TfdsInfoForOutputs(outputs, output_info, source_info, where);
  if (!info.ok() || !*info) return info;
  if (bucket) {
    if (auto s = bucket->PutObject(kInfoName, **info); !s.ok()) return s;
  } else if (auto s = WriteFileAtomically(where, **info); !s.ok()) {
    return s;
  }
  return where;
}

}  // namespace tfrecordfs::reshape
