#include "tfrecordfs/index/shard_index.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/utf8.h"
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

std::vector<std::string> FormatProblems(absl::string_view path,
                                        const std::vector<record::WalkProblem>& problems,
                                        size_t max_lines) {
  std::vector<std::string> lines;
  const std::string shown_path = EscapeForLog(path);
  const size_t shown = std::min(problems.size(), max_lines);
  lines.reserve(shown + 1);
  for (size_t i = 0; i < shown; ++i) {
    lines.push_back(absl::StrCat(shown_path, ": byte offset ", problems[i].offset, ": ",
                                 EscapeForLog(problems[i].message)));
  }
  if (problems.size() > shown) {
    lines.push_back(
        absl::StrCat(shown_path, ": ... and ", problems.size() - shown, " more problem(s)"));
  }
  return lines;
}

namespace {

// Strips at least three trailing ASCII digits; false if there are fewer.
bool ConsumeDigits(absl::string_view* s) {
  size_t n = 0;
  while (n < s->size() && (*s)[s->size() - 1 - n] >= '0' && (*s)[s->size() - 1 - n] <= '9') ++n;
  s->remove_suffix(n);
  return n >= 3;
}

}  // namespace

bool LooksLikeShardName(absl::string_view name) {
  for (absl::string_view ext : {".tfrecord", ".tfrecords", ".record", ".records", ".tfr"}) {
    if (absl::EndsWith(name, ext)) return true;
  }
  if (absl::StrContains(name, "tfrecord")) return true;
  // "...-DDD-of-DDD" (three or more digits each), matched by hand: a
  // std::regex here cost more than the rest of probing a cached shard.
  absl::string_view s = name;
  return ConsumeDigits(&s) && absl::ConsumeSuffix(&s, "-of-") && ConsumeDigits(&s) &&
         absl::EndsWith(s, "-");
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
  if (named && size > 0) {
    // A shard-like name with a damaged first header: a shard if the walk
    // resynchronises onto a record.
    auto walk = record::WalkHeaders(fd, path, size);
    if (!walk.ok()) return walk.status();
    if (walk->offsets.size() > 1) return Probe::kShard;
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
