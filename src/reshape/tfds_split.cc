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
// The folder (or URL prefix, with its '/') a path or URL lies in.
std::string FolderOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

}  // namespace

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
  std::vector<repack::TfdsOutput> outs;
  for (const ManifestOutput& o : outputs) outs.push_back({o.path, o.records, o.bytes});
  auto info = repack::ReshardedTfdsInfoJson(outs, output_info, source_info, std::nullopt, where);
  if (!info.ok() || !*info) return info;
  if (bucket) {
    if (auto s = bucket->PutObject(kInfoName, **info); !s.ok()) return s;
  } else if (auto s = WriteFileAtomically(where, **info); !s.ok()) {
    return s;
  }
  return where;
}

}  // namespace tfrecordfs::reshape
