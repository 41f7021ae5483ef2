#include "tfrecordfs/index/shard_index.h"

#include <regex>

#include "absl/strings/match.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/record/format.h"

namespace tfrecordfs::index {

ShardIndex::ShardIndex(std::string path, uint64_t file_size, int64_t mtime_ns,
                       record::WalkResult walk)
    : path_(std::move(path)),
      file_size_(file_size),
      mtime_ns_(mtime_ns),
      offsets_(std::move(walk.offsets)),
      problems_(std::move(walk.problems)) {
  offsets_.shrink_to_fit();
  if (offsets_.empty()) offsets_.push_back(0);
}

bool LooksLikeShardName(absl::string_view name) {
  for (absl::string_view ext : {".tfrecord", ".tfrecords", ".record", ".records", ".tfr"}) {
    if (absl::EndsWith(name, ext)) return true;
  }
  if (absl::StrContains(name, "tfrecord")) return true;
  static const std::regex kSharded(".*-[0-9]{3,}-of-[0-9]{3,}$");
  return std::regex_match(name.begin(), name.end(), kSharded);
}

absl::StatusOr<Probe> ProbeFile(int fd, absl::string_view path, uint64_t size) {
  const bool named = LooksLikeShardName(Basename(path));
  if (size == 0) return named ? Probe::kShard : Probe::kNotShard;
  if (size >= record::kFramingOverhead) {
    char header[record::kHeaderSize];
    absl::Status s = PreadFull(fd, header, sizeof header, 0, path);
    if (!s.ok()) return s;
    if (record::IsPlausibleHeader(header, 0, size)) return Probe::kShard;
  }
  return Probe::kNotShard;
}

absl::StatusOr<std::shared_ptr<const ShardIndex>> BuildShardIndex(int fd, const std::string& path,
                                                                  const struct stat& st) {
  auto walk = record::WalkHeaders(fd, path, static_cast<uint64_t>(st.st_size));
  if (!walk.ok()) return walk.status();
  const int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return std::make_shared<const ShardIndex>(path, static_cast<uint64_t>(st.st_size), mtime_ns,
                                            std::move(*walk));
}

}  // namespace tfrecordfs::index
