// The deletion overlay of the record view: records of mounted shards deleted
// on a read-write mount (`rm -r SHARD/0042`) and not yet committed.
//
// What a deletion looks like through the mount:
//   * unlinking a feature file (or removing an emptied folder) of a shard's
//     record hides it for the life of the daemon and changes nothing else:
//     it is the first step of removing the record folder, which `rm -r`
//     takes. Removing one feature file on its own is not an edit (yet): it
//     is not kept across a remount and the commit leaves the record whole;
//   * removing the record folder once it shows nothing (rmdir; `rm -r` and
//     `rm -rf` unlink its files first, then rmdir it) deletes the record:
//     it is written to the store's deletion list (staging/deletions.h) before
//     the rmdir returns, so it survives a crash and a remount, and the
//     folder disappears from the shard folder's listing. Other records keep
//     their names (0043 stays 0043) until the commit at unmount rewrites the
//     shard (repack/rewrite.h).
// A damaged record (its folder fails with EIO) can be removed with rmdir
// directly. Deletions are refused with EROFS (and a log line) without a
// deletion list (`-o ro`), for a shard whose directory is not writable, and
// for a shard that changed on disk since the mount.
//
// Thread-safety: thread-safe. mu_ is a leaf lock; the deletion list's lock is
// taken only outside it.
#ifndef TFRECORDFS_VFS_RECORD_DELETIONS_H_
#define TFRECORDFS_VFS_RECORD_DELETIONS_H_

#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/staging/deletions.h"
#include "tfrecordfs/vfs/mounted_shard.h"

namespace tfrecordfs::vfs {

class RecordDeletions {
 public:
  // `shards` and `list` are borrowed and must outlive this; `list` may be
  // null (nothing can be deleted). Loads the deletions of `list` whose
  // shard is mounted with the fingerprint they were made on (others are
  // logged and not shown).
  RecordDeletions(const std::vector<MountedShard>& shards, staging::DeletionList* list);

  bool IsDeleted(uint64_t shard, uint64_t record) const;
  bool IsHidden(uint64_t shard, uint64_t record, uint32_t entry) const;
  // Hides entry `entry` (not 0) of a record; EROFS as for DeleteRecord.
  absl::Status Hide(uint64_t shard, uint64_t record, uint32_t entry);
  // Deletes the record: persisted in the list, then hidden.
  absl::Status DeleteRecord(uint64_t shard, uint64_t record);
  // Makes sure the list has an entry for `shard` (DeletionList::Register),
  // before one of its records is edited or added (record_edits.h); EROFS
  // as for DeleteRecord.
  absl::Status Register(uint64_t shard);
  // Whether the list has an entry for `shard` made on the shard as it is
  // mounted (loaded with a matching fingerprint, or registered since).
  bool Registered(uint64_t shard) const;

 private:
  absl::Status CheckWritable(uint64_t shard) const;

  const std::vector<MountedShard>& shards_;
  staging::DeletionList* const list_;
  std::atomic<bool> any_{false};  // anything deleted or hidden: else no lock is taken
  mutable Mutex mu_;
  absl::flat_hash_set<uint64_t> deleted_ ABSL_GUARDED_BY(mu_);  // RecordKey
  absl::flat_hash_set<std::pair<uint64_t, uint32_t>> hidden_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> registered_ ABSL_GUARDED_BY(mu_);  // shard ids
};

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_RECORD_DELETIONS_H_
