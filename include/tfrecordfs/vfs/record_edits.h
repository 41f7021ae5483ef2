// The edit overlay of the record view: records of the mounted shards changed
// through a read-write mount (`echo 7 > SHARD/0042/label`, `sed -i`, `cp`
// over an image, `rm`, `mv` inside a record, `mkdir SHARD/new`) and not yet
// committed. Their folders live in the edit store (staging/edits.h), a
// staging::Store served by a StagingView of its own (`folders()`), so an
// edited record takes every write, check and error a staged record does
// (staging/staged_file_checker.h: numeric files checked once whole and flagged, never refused;
// .png/.npy into tensor features, SequenceExample context/ and feature_lists/).
//
// Check-out: the first change of a record (a write, truncation, create,
// mkdir, unlink, rename or chmod inside its folder) copies every file the
// record view shows for it into `<key>-<record>` of the edit store
// (staging/edit_store.h does the disk work: whole or not at all), after the shard is
// registered in the deletion list (RecordDeletions::Register: the shard
// must be writable and unchanged on disk). From then on the record's
// folder is the edit store's:
//   * the folder keeps its record-space node id (SHARD/0042 stays the
//     node the kernel knows), and so do the files the kernel already knows
//     (their ids are translated to the copies' nodes, one store reference
//     held per id until the kernel forgets it);
//   * new lookups in it answer the edit store's node ids (staging space,
//     node_id.h kEditNodeTag), served by folders() directly.
// Added records (`mkdir SHARD/name`, `cp -r`) are folders `<key>+<name>` of
// the edit store: listed after the shard's records, in name order.
//
// A shard changed on disk behind the mount (replaced, appended to) has its
// edits neither shown nor applied, as at a mount: its record numbers may
// mean other records now. The first look at an edited or added record of
// it (one stat of the shard) logs the change once, and from then on its
// records show as the record view shows them, its added records are not
// listed and no further edit of it is taken (EROFS); the edit store keeps
// the edits (the commit reports the shard as changed).
//
// Records keep their names until the commit (repack::ApplyEdits, at
// unmount): an edited record is still SHARD/0042, a deleted one leaves a
// gap. `rmdir` of an edited record's emptied folder deletes the record.
//
// Thread-safety: thread-safe. checkout_mu_ serialises check-outs and is
// taken before mu_ (a leaf guarding the maps); neither is held while
// calling the record view or the store, except that checkout_mu_ is held
// across a whole check-out.
#ifndef TFRECORDFS_VFS_RECORD_EDITS_H_
#define TFRECORDFS_VFS_RECORD_EDITS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/staging/edit_store.h"
#include "tfrecordfs/staging/store.h"
#include "tfrecordfs/vfs/mounted_shard.h"
#include "tfrecordfs/vfs/node_id.h"
#include "tfrecordfs/vfs/record_deletions.h"
#include "tfrecordfs/vfs/record_view.h"
#include "tfrecordfs/vfs/staging_view.h"
#include "tfrecordfs/vfs/view.h"

namespace tfrecordfs::vfs {

class RecordEdits final : public View, public ShardFolderView {
 public:
  // Everything is borrowed and must outlive this. Loads the edit folders an
  // earlier mount left for shards mounted now with the fingerprint their
  // edits were made on (the others are kept, not shown, and logged).
  // `staging` (may be null): the staging folder's view, where `mv` of a
  // record into staging/ puts it. Before loading, finishes or rolls back a
  // move a crash interrupted (see MoveRecord).
  RecordEdits(const std::vector<MountedShard>& shards, RecordView* records,
              RecordDeletions* deletions, staging::Store* store, naming::FeatureTypes* types,
              StagingView* staging);
  ~RecordEdits() override;  // unsets the store's display (staging::Store::SetDisplay)
  RecordEdits(const RecordEdits&) = delete;
  RecordEdits& operator=(const RecordEdits&) = delete;

  // The view of the edit store's own node ids (kEditNodeTag) and handles.
  StagingView& folders() { return folders_; }

  // Whether record-space `ino` belongs to an edited record (then this view
  // serves it).
  bool IsEdited(uint64_t ino) const;
  // Checks out the record of record-space `ino` (see the top); OK when it
  // is already. EIO for a damaged record, EROFS when the shard cannot be
  // edited (with a log line saying why).
  absl::Status CheckOut(uint64_t ino);

  // Undoes the check-out of every edited record whose folder holds exactly
  // the files the record view shows for it (names, kinds, bytes) and has no
  // file open through a handle: a change that put back what the record
  // holds (`echo 2 > label` where it was 2, `sed -i` that matched nothing)
  // or an attempt that changed nothing (an editor opened and quit, its swap
  // file made and removed; a save that failed) leaves no edit. Each folder
  // is renamed to a hidden name (atomic: a crash leaves the record edited
  // or not, never half a folder) and removed. Returns the (shard, record)
  // pairs undone: the caller has the kernel drop the folder's cached entries
  // (ids of the edit store it looked up in it). Called by the commit, with
  // nothing else running (Filesystem::serve_mu_ held exclusively): undone
  // in the middle of a tool's save, the ids the kernel holds would go stale
  // under it. Errors are logged; that record stays edited.
  std::vector<std::pair<uint64_t, uint64_t>> DropUnchanged();
  // Whether `shard` has records edited, added or moved out, or edit
  // folders in the store (an earlier mount's, kept: the shard changed
  // since). Lists the store's folders.
  bool HasEdits(uint64_t shard) const;

  // Deletes a record (RecordDeletions::DeleteRecord), dropping its edits if
  // it has any (the image views' rm: the record's files are not removed
  // one by one first).
  absl::Status DeleteRecord(uint64_t shard, uint64_t record);
  // Sets the content of file `entry` of the record's layout as the record
  // view shows it (checking the record out first), through the same checks
  // as a write (a value the feature cannot take is flagged). NotFound when
  // the file was renamed or removed by an earlier edit.
  absl::Status WriteEntry(uint64_t shard, uint64_t record, uint32_t entry,
                          absl::string_view content);
  // The RecordKeys of the records edited now.
  std::vector<uint64_t> EditedRecords() const;
  // The record an edited record's folder makes now (PayloadFromFolder);
  // NotFound when it is not edited, InvalidArgument when it makes none.
  absl::StatusOr<std::string> EditedPayload(uint64_t shard, uint64_t record);

  // ---- The children of shard folder `shard` (ShardFolderView) ----
  absl::StatusOr<Attr> LookupInShard(uint64_t shard, absl::string_view name) override;
  // The record view's listing, then the added records.
  absl::Status ListShard(uint64_t shard, const Attr& self, uint64_t offset,
                         const EmitFn& emit) override;
  // Adds a record: an empty folder `name` (EEXIST for a record's name).
  absl::StatusOr<Attr> MkdirInShard(uint64_t shard, absl::string_view name, mode_t mode,
                                    std::optional<staging::Owner> owner) override;
  // Removes an added record's folder, or deletes a record whose folder
  // shows nothing (ENOTEMPTY otherwise; RecordView::RmdirInShard for records
  // never edited).
  absl::Status RmdirInShard(uint64_t shard, absl::string_view name) override;
  // A rename whose parents are both edited record folders, folders of the
  // edit store, or shard folders (added records renamed among themselves);
  // EXDEV-free: everything is one store.
  absl::Status RenameAny(uint64_t parent, absl::string_view name, uint64_t new_parent,
                         absl::string_view new_name, unsigned flags,
                         std::optional<uint64_t> parent_shard,
                         std::optional<uint64_t> new_parent_shard);

  // Forgets `shard`'s edits (the references held included): they were
  // committed (Filesystem::Commit). Returns the added records' names, which
  // the kernel may still have cached. Not concurrent with the other calls.
  std::vector<std::string> ResetShard(uint64_t shard);
  // The records of `shard` checked out or moved away (their files were the
  // edit store's, not the shard's), as RecordKeys.
  std::vector<uint64_t> EditedKeys(uint64_t shard) const;

  // `mv SHARD/0042 staging/NAME` (to_shard empty: into the staging
  // folder's root) or `mv SHARD/0042 OTHER/NAME` (an added record of shard
  // `to_shard`): the record leaves its shard (deleted there at the commit)
  // and its folder (checked out first) becomes NAME there, exactly once:
  //   1. the edit folder is renamed to `.move-<key>-<record>-<destination
  //      folder>` in the destination store's records/ (both stores are in
  //      one directory tree: an atomic rename);
  //   2. the record's deletion is made durable (DeletionList);
  //   3. the folder is renamed to its destination name.
  // A crash after 1 and before 2 is rolled back at the next mount (the
  // folder goes back; the record stays edited), after 2 finished (renamed
  // into place). Returns the moved folder's node id in its new view; the
  // record's folder id answers as that folder until the kernel forgets it
  // (the caller invalidates the kernel's entry). EEXIST when NAME is taken,
  // EPERM into a staging sub-folder, EROFS as for edits. Test hook
  // (base/fault_points.h): move_before_delete (after 1), move_after_delete
  // (after 2). An added record (`mkdir SHARD/name`) has no deletion to make:
  // its folder `<key>+<name>` is renamed to the destination in one step.
  absl::StatusOr<uint64_t> MoveRecord(uint64_t shard, absl::string_view name,
                                      std::optional<uint64_t> to_shard, uint64_t new_parent,
                                      absl::string_view new_name);

  // Edited records and added records now, for tests and statistics.
  size_t edited() const;
  // The most records checked out or added at once (Options::max_edited in
  // filesystem.h); a check-out or mkdir beyond it is refused with EDQUOT
  // and a log line saying to commit. Call before serving.
  void set_max_edited(size_t n) { max_edited_ = n; }

  // ---- View: record-space ids of edited records, translated ----
  absl::StatusOr<Attr> GetAttr(uint64_t ino) override;
  absl::StatusOr<Attr> Lookup(uint64_t parent, absl::string_view name) override;
  absl::Status ReadDir(uint64_t ino, uint64_t fh, uint64_t offset, const EmitFn& emit) override;
  absl::StatusOr<uint64_t> Open(uint64_t ino, int flags) override;
  absl::StatusOr<ReadResult> Read(uint64_t ino, uint64_t fh, uint64_t offset, size_t size) override;
  absl::StatusOr<uint64_t> OpenDir(uint64_t ino) override;
  absl::Status Xattrs(uint64_t ino, bool read_error, XattrList* out) override;
  void Forget(uint64_t ino, uint64_t n) override;
  absl::StatusOr<std::pair<Attr, uint64_t>> CreateFile(
      uint64_t parent, absl::string_view name, mode_t mode, int flags,
      std::optional<staging::Owner> owner) override;
  absl::StatusOr<Attr> Mkdir(uint64_t parent, absl::string_view name, mode_t mode,
                             std::optional<staging::Owner> owner) override;
  absl::StatusOr<size_t> Write(uint64_t ino, uint64_t fh, absl::string_view data,
                               uint64_t offset) override;
  absl::StatusOr<Attr> SetAttr(uint64_t ino, uint64_t fh, const struct stat& to, int bits) override;
  absl::Status Unlink(uint64_t parent, absl::string_view name) override;
  absl::Status Rmdir(uint64_t parent, absl::string_view name) override;
  absl::Status Rename(uint64_t parent, absl::string_view name, uint64_t new_parent,
                      absl::string_view new_name, unsigned flags) override;
  absl::Status Flush(uint64_t ino, uint64_t fh) override;
  absl::Status Fsync(uint64_t ino, uint64_t fh, bool datasync) override;

 private:
  // The edit store's node id for record-space `ino`, or for an edit-store
  // id itself; NotFound("stale node id") otherwise.
  absl::StatusOr<uint64_t> Inner(uint64_t ino) const;
  // Copies record `record` of `shard` into the edit store (see the top).
  absl::Status Materialize(uint64_t shard, uint64_t record, const std::string& folder)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(checkout_mu_);
  // The bytes of file `entry` of the record's layout, as the record view
  // reads them.
  absl::StatusOr<std::string> RecordFileBytes(uint64_t shard, uint64_t record, uint32_t entry);
  // Whether the folder at `dir` holds exactly the record's files (DropIfUnchanged).
  absl::StatusOr<bool> SameAsRecord(uint64_t shard, uint64_t record, const std::string& dir);
  // The shard whose edit-store key (staging::ShardKey) is `key`.
  std::optional<uint64_t> ShardOfStoreKey(absl::string_view key) const;
  // The view serving an inner id: the edit store's, or staging's (a moved
  // record's folder).
  StagingView& ViewFor(uint64_t inner) {
    return IsEditId(inner) || staging_ == nullptr ? folders_ : *staging_;
  }
  // Drops the record's check-out from the maps: the store nodes whose
  // references were held (to Forget), its folder's in *folder.
  std::vector<uint64_t> ForgetCheckOut(uint64_t shard, uint64_t record, uint64_t* folder);
  // Finishes or rolls back the moves a crash interrupted (MoveRecord).
  void RecoverMoves();
  // A path of the edit store (relative to its records/) as errors name it:
  // `<shard path>/<record folder>/<path in it>`.
  std::string Describe(absl::string_view rel) const;
  std::string Key(uint64_t shard) const;
  // Whether `shard`'s edits are hidden because it changed on disk since
  // the mount (a stat while it has not; logged once when it has).
  bool Hidden(uint64_t shard) const ABSL_LOCKS_EXCLUDED(mu_);
  // OK while fewer than max_edited_ records are checked out or added;
  // EDQUOT (logged) otherwise.
  absl::Status CheckRoom() const ABSL_LOCKS_EXCLUDED(mu_);
  // EROFS for an edit of a shard whose edits are hidden (Hidden()).
  absl::Status ChangedError(uint64_t shard) const;

  const std::vector<MountedShard>& shards_;
  RecordView* const records_;
  RecordDeletions* const deletions_;
  staging::Store* const store_;
  const staging::EditStore disk_;  // store_'s folders on disk
  naming::FeatureTypes* const types_;
  StagingView folders_;
  StagingView* const staging_;
  absl::flat_hash_map<std::string, uint64_t> shard_of_key_;  // immutable after construction

  std::atomic<bool> any_{false};  // anything edited: else IsEdited takes no lock
  size_t max_edited_ = SIZE_MAX;  // set_max_edited
  Mutex checkout_mu_;             // before mu_
  mutable Mutex mu_;
  // RecordKey -> the store node of its folder (one reference held).
  absl::flat_hash_map<uint64_t, uint64_t> edited_ ABSL_GUARDED_BY(mu_);
  // Record-space ids of an edited record's files -> their copies' store
  // nodes (one reference held each, until the kernel forgets the id).
  absl::flat_hash_map<uint64_t, uint64_t> translated_ ABSL_GUARDED_BY(mu_);
  // Records moved out of their shard this mount -> their folder's id in its
  // new view (one reference held).
  absl::flat_hash_map<uint64_t, uint64_t> moved_ ABSL_GUARDED_BY(mu_);
  // Added records' names per shard.
  absl::flat_hash_map<uint64_t, std::set<std::string>> added_ ABSL_GUARDED_BY(mu_);
  // Shards changed on disk since the mount: their edits are hidden (see
  // the top). Filled by Hidden(), cleared by ResetShard.
  mutable absl::flat_hash_set<uint64_t> hidden_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_RECORD_EDITS_H_
