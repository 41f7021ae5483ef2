// The deletion overlay of the record view: records of mounted shards deleted
// on a read-write mount (`rm -r SHARD/0042`) and not yet committed, and the
// shards registered for edits (record_edits.h).
//
// `rm -r` of a record folder removes its files first (edits of the record,
// record_edits.h), then the emptied folder (rmdir): that deletes the record.
// The deletion is written to the store's deletion list (staging/deletions.h)
// before the rmdir returns, so it survives a crash and a remount, and the
// folder disappears from the shard folder's listing. Other records keep
// their names (0043 stays 0043) until the commit at unmount rewrites the
// shard (repack/rewrite.h). A damaged record (its folder fails with EIO)
// can be removed with rmdir directly. Deletions and edits are refused with
// EROFS (and a log line) without a deletion list (`-o ro`), for a shard
// whose directory is not writable, and for a shard that changed on disk
// since the mount.
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
  // Deletes the record: persisted in the list, then hidden.
  absl::Status DeleteRecord(uint64_t shard, uint64_t record);
  // Makes sure the list has an entry for `shard` (DeletionList::Register),
  // before one of its records is edited or added (record_edits.h); EROFS
  // as for DeleteRecord.
  absl::Status Register(uint64_t shard);
  // For a record of an object (a bucket mount's shard), stores what it is
  // (staging::ContentKey: its data's length and CRC, read from its
  // framing) before it is first edited or deleted, so that `commit
  // --rebase` can find it again in an object another writer replaced.
  // Nothing for a file. Failures are logged (that record is then not
  // re-applied by a rebase).
  void NoteContentKey(uint64_t shard, uint64_t record);
  // Forgets `shard`'s deletions and registration: it was rewritten
  // (Filesystem::Commit) and the list no longer has it.
  void ResetShard(uint64_t shard);
  // Whether the list has an entry for `shard` made on the shard as it is
  // mounted (loaded with a matching fingerprint, or registered since).
  bool Registered(uint64_t shard) const;
  // OK while `shard` is the file the mount indexed (its size and mtime:
  // one stat); EROFS "<path>: changed on disk since the mount" otherwise.
  absl::Status CheckUnchanged(uint64_t shard) const;

 private:
  absl::Status CheckWritable(uint64_t shard) const;

  const std::vector<MountedShard>& shards_;
  staging::DeletionList* const list_;
  std::atomic<bool> any_{false};  // anything deleted: else no lock is taken
  mutable Mutex mu_;
  absl::flat_hash_set<uint64_t> deleted_ ABSL_GUARDED_BY(mu_);     // RecordKey
  absl::flat_hash_set<uint64_t> registered_ ABSL_GUARDED_BY(mu_);  // shard ids
};

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_RECORD_DELETIONS_H_
