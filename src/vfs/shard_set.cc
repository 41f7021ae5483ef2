#include "tfrecordfs/vfs/shard_set.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/vfs/node_id.h"

namespace tfrecordfs::vfs {

namespace {

// The shard at `path` as a scan would give it, with `index` (made by the
// commit that wrote the file; NotFound when null or not the file there).
absl::StatusOr<scan::ScannedShard> AdoptedShard(const std::string& path,
                                                std::shared_ptr<const index::ShardIndex> index) {
  if (index == nullptr) return absl::NotFoundError("no index made by the rewrite");
  auto fd = OpenFile(path, O_RDONLY | O_CLOEXEC);
  if (!fd.ok()) return fd.status();
  scan::ScannedShard out;
  if (::fstat(fd->get(), &out.st) != 0) return ErrnoError(errno, path);
  if (static_cast<uint64_t>(out.st.st_size) != index->file_size()) {
    return absl::NotFoundError("changed since the rewrite");
  }
  out.path = path;
  out.identity = source::FileIdentity::Of(out.st, fd->get());
  out.index = std::move(index);
  return out;
}

}  // namespace

ShardSet::ShardSet(size_t max_open, size_t block_cache_bytes, index::IndexStore* index_store)
    : fd_cache_(max_open), block_cache_(block_cache_bytes), index_store_(index_store) {}

ShardSet::~ShardSet() = default;

absl::Status ShardSet::StartReadahead(size_t budget_bytes, size_t block) {
  if (readahead_ != nullptr) return absl::FailedPreconditionError("already reading ahead");
  readahead_ = std::make_unique<source::Readahead>(budget_bytes, kReadaheadThreads, block);
  for (MountedShard& shard : current_) {
    shard.source =
        std::make_unique<source::ReadaheadSource>(std::move(shard.source), readahead_.get());
  }
  return absl::OkStatus();
}

absl::StatusOr<MountedShard> ShardSet::Open(const scan::ScannedShard& shard,
                                            struct timespec mtime) {
  MountedShard mounted;
  auto src = scan::OpenShard(shard, &block_cache_, &fd_cache_);
  if (!src.ok()) return src.status();
  mounted.source = *std::move(src);
  if (readahead_) {
    mounted.source =
        std::make_unique<source::ReadaheadSource>(std::move(mounted.source), readahead_.get());
  }
  mounted.name_width = NameWidth(shard.index->num_records());
  mounted.mtime = mtime;
  mounted.index = shard.index;
  mounted.object = shard.object;
  return mounted;
}

absl::Status ShardSet::Add(const scan::ScannedShard& shard, struct timespec mtime) {
  auto mounted = Open(shard, mtime);
  if (!mounted.ok()) return mounted.status();
  current_.push_back(*std::move(mounted));
  retired_.emplace_back();
  mount_paths_.push_back(shard.mount_path);
  return absl::OkStatus();
}

const std::string& ShardSet::mount_path(uint64_t s) const {
  static const std::string* const kNone = new std::string();
  return s < mount_paths_.size() ? mount_paths_[s] : *kNone;
}

bool ShardSet::IsRetired(uint64_t ino) const {
  if (SpaceOf(ino) != Space::kRecord) return false;
  const uint64_t s = ShardOf(ino);
  return s < current_.size() && GenerationBitOf(ino) != (current_[s].generation & 1);
}

bool ShardSet::RetiredStale(uint64_t ino) const {
  return retired_edited_.contains(RecordKey(ShardOf(ino), RecordOf(ino)));
}

absl::StatusOr<ShardSet::Replaced> ShardSet::Reopen(
    uint64_t s, const std::string& path, std::shared_ptr<const index::ShardIndex> rewritten_index,
    const std::vector<uint64_t>& edited_keys) {
  if (s >= current_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no shard ", s, " in the mount"));
  }
  // The new file: a plain one with the index its rewrite made, else
  // indexed (and cached) like a shard at mount.
  absl::StatusOr<scan::ScannedShard> scanned = AdoptedShard(path, std::move(rewritten_index));
  if (!scanned.ok()) scanned = scan::ScanOne(path, index_store_);
  if (!scanned.ok()) return scanned.status();
  absl::StatusOr<MountedShard> next = Open(*scanned, scanned->st.st_mtim);
  if (!next.ok()) return next.status();

  MountedShard& shard = current_[s];
  Replaced replaced;
  replaced.shard = s;
  replaced.old_records = shard.records_shown();
  replaced.old_width = shard.name_width;
  // The old file's records stay readable under their own ids (the other
  // generation bit, node_id.h) for as long as the kernel holds them: a
  // file opened, stat'ed or cached before the commit goes on reading the
  // old bytes its size describes; the next rewrite of the shard drops them
  // (then their ids are the new shard's again: a file kept open across two
  // commits reads the newest, as before).
  MountedShard& retired = retired_[s];
  retired.index = shard.index;
  retired.source = std::move(shard.source);
  retired.name_width = shard.name_width;
  retired.mtime = shard.mtime;
  retired.generation = shard.generation;
  absl::erase_if(retired_edited_, [s](uint64_t key) { return ShardOfKey(key) == s; });
  retired_edited_.insert(edited_keys.begin(), edited_keys.end());
  next->generation = shard.generation + 1;
  shard = *std::move(next);
  return replaced;
}

}  // namespace tfrecordfs::vfs
