#include "tfrecordfs/vfs/record_deletions.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/log.h"

namespace tfrecordfs::vfs {
namespace {

// The fingerprint of the shard file as it is now, if it is still the file
// the mount indexed (same size and mtime).
absl::StatusOr<staging::Fingerprint> MountedFingerprint(const MountedShard& shard) {
  const std::string& path = shard.index->path();
  if (shard.object != nullptr) {
    // An object: the one the mount listed, whose ETag the commit's
    // conditional write names (repack/bucket_rewrite.h).
    if (shard.object->etag().empty()) {
      return PosixError(EROFS, absl::StrCat(path,
                                            ": the store gave no ETag, so an edit could "
                                            "not be committed conditionally"));
    }
    return staging::ObjectFingerprint(shard.object->size(), shard.object->etag());
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoError(errno, path);
  staging::Fingerprint fp = staging::FingerprintOf(st);
  if (fp.size != shard.index->file_size() || fp.mtime_ns != shard.index->mtime_ns()) {
    return PosixError(EROFS, absl::StrCat(path, ": changed on disk since the mount"));
  }
  return fp;
}

}  // namespace

RecordDeletions::RecordDeletions(const std::vector<MountedShard>& shards,
                                 staging::DeletionList* list)
    : shards_(shards), list_(list) {
  if (list_ == nullptr) return;
  const staging::Deletions pending = list_->Snapshot();
  if (pending.empty()) return;
  MutexLock lock(&mu_);
  for (uint64_t s = 0; s < shards_.size(); ++s) {
    auto it = pending.find(shards_[s].index->path());
    if (it == pending.end()) continue;
    auto fp = MountedFingerprint(shards_[s]);
    if (!fp.ok() || !(*fp == it->second.before)) {
      if (shards_[s].object != nullptr) {
        // An object another writer replaced: the edits wait for a rebase.
        log::Error(it->first,
                   ": replaced in the bucket since its records were edited or "
                   "deleted; those edits are not shown nor applied (",
                   list_->path(),
                   " keeps them): tfrecordfs commit --rebase re-applies them to "
                   "the object as it is now");
        continue;
      }
      log::Error(it->first, ": changed on disk since ", it->second.records.size(),
                 " of its records were deleted; those deletions are not shown nor applied (",
                 list_->path(), " keeps them)");
      continue;
    }
    registered_.insert(s);
    for (uint64_t r : it->second.records) deleted_.insert(RecordKey(s, r));
  }
  any_.store(!deleted_.empty());
}

bool RecordDeletions::IsDeleted(uint64_t shard, uint64_t record) const {
  if (!any_.load(std::memory_order_acquire)) return false;
  MutexLock lock(&mu_);
  return deleted_.contains(RecordKey(shard, record));
}

absl::Status RecordDeletions::CheckWritable(uint64_t shard) const {
  const std::string& path = shards_[shard].index->path();
  if (list_ == nullptr) {
    return PosixError(EROFS, absl::StrCat(path, ": read-only mount"));
  }
  if (shards_[shard].object != nullptr) {
    // An object of a bucket: rewritten by the commit with conditional
    // writes (repack/bucket_rewrite.h); an https:// URL has no such
    // writes.
    if (!absl::StartsWith(path, "s3://") && !absl::StartsWith(path, "gs://")) {
      return PosixError(EROFS, absl::StrCat(path,
                                            ": not an object of an s3:// or gs:// bucket: its "
                                            "records are read-only"));
    }
    if (shards_[shard].index->codec() == source::Codec::kArrayRecord) {
      // The bucket commit rewrites TFRecord streams (plain or compressed);
      // an ArrayRecord file is rewritten only where it lies on local disk.
      return PosixError(EROFS, absl::StrCat(path,
                                            ": an ArrayRecord object: its records are read-only "
                                            "in a bucket (edit a local copy)"));
    }
    return absl::OkStatus();
  }
  const std::string dir = path.substr(0, path.rfind('/'));
  if (::faccessat(AT_FDCWD, dir.c_str(), W_OK, AT_EACCESS) != 0) {
    const int err = errno;
    log::Warning("cannot delete records of ", path, ": its directory is not writable (",
                 std::strerror(err), ")");
    return PosixError(EROFS, absl::StrCat(dir, ": not writable"));
  }
  return absl::OkStatus();
}

void RecordDeletions::ResetShard(uint64_t shard) {
  MutexLock lock(&mu_);
  registered_.erase(shard);
  absl::erase_if(deleted_, [&](uint64_t key) { return ShardOfKey(key) == shard; });
  any_.store(!deleted_.empty(), std::memory_order_release);
}

bool RecordDeletions::Registered(uint64_t shard) const {
  MutexLock lock(&mu_);
  return registered_.contains(shard);
}

absl::Status RecordDeletions::CheckUnchanged(uint64_t shard) const {
  return MountedFingerprint(shards_[shard]).status();
}

absl::Status RecordDeletions::Register(uint64_t shard) {
  if (Registered(shard)) return absl::OkStatus();
  if (auto s = CheckWritable(shard); !s.ok()) return s;
  const std::string& path = shards_[shard].index->path();
  auto fp = MountedFingerprint(shards_[shard]);
  if (!fp.ok()) {
    log::Warning("cannot edit ", path, ": ", fp.status().message());
    return fp.status();
  }
  if (auto s = list_->Register(path, *fp); !s.ok()) {
    log::Warning("cannot edit ", path, ": ", s.message());
    return absl::IsFailedPrecondition(s) ? PosixError(EROFS, s.message()) : s;
  }
  MutexLock lock(&mu_);
  registered_.insert(shard);
  return absl::OkStatus();
}

void RecordDeletions::NoteContentKey(uint64_t shard, uint64_t record) {
  const MountedShard& m = shards_[shard];
  if (m.object == nullptr || list_ == nullptr) return;
  const std::vector<uint64_t>& offsets = m.index->offsets();
  if (record + 1 >= offsets.size()) return;
  char crc[4];
  absl::Status s = m.source->ReadFull(offsets[record + 1] - 4, crc, sizeof crc);
  if (s.ok()) {
    s = staging::AppendContentKey(staging::RecordKeysPath(list_->path()), m.index->path(), record,
                                  {offsets[record + 1] - offsets[record] - 16, DecodeFixed32(crc)});
  }
  if (!s.ok()) {
    log::Warning("record ", record, " of ", m.index->path(),
                 ": cannot keep its key for a rebase: ", s.message());
  }
}

absl::Status RecordDeletions::DeleteRecord(uint64_t shard, uint64_t record) {
  if (auto s = CheckWritable(shard); !s.ok()) return s;
  auto fp = MountedFingerprint(shards_[shard]);
  if (!fp.ok()) {
    log::Warning("cannot delete record ", record, ": ", fp.status().message());
    return fp.status();
  }
  if (!list_->Contains(shards_[shard].index->path(), record)) NoteContentKey(shard, record);
  if (auto s = list_->Delete(shards_[shard].index->path(), *fp, record); !s.ok()) {
    log::Warning("cannot delete record ", record, " of ", shards_[shard].index->path(), ": ",
                 s.message());
    return absl::IsFailedPrecondition(s) ? PosixError(EROFS, s.message()) : s;
  }
  log::Info("deleted record ", record, " of ", shards_[shard].index->path(),
            " (pending: the shard is rewritten at unmount)");
  MutexLock lock(&mu_);
  registered_.insert(shard);
  deleted_.insert(RecordKey(shard, record));
  any_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

}  // namespace tfrecordfs::vfs
