// The staging area as the mount shows it: MOUNT/<staging_name>/ passed
// through to a staging::Store, in the node ids and Attrs of the rest of the
// namespace (node_id.h: Space::kStaging, the store's node number in the low
// bits). Filesystem owns one when there is a staging area and forwards every
// staging-space call to it; which space a call belongs to, and what the
// read-only rest answers (EROFS, across the boundary too), is Filesystem's
// policy, not this class's. So every `ino` / `parent` given here is a staging
// node id, and every non-zero `fh` a handle this view returned.
//
// Handles (fuse_file_info::fh): CreateFile and Open return a file handle (an
// open descriptor of the backing file, and whether it was written since the
// last check), OpenDir a directory handle (a stream of the backing
// directory), numbered by a HandleTable each (handle_table.h). A handle
// lives until Release/Discard (files) or ReleaseDir (directories); a number
// used after that, or given to a call of the other kind, fails with EBADF.
// fh 0 is "no handle": the kernel opened the node itself
// (fuse::OpsOptions::skip_open, FUSE_CAP_NO_OPEN*), and the call then opens
// what it needs for itself.
//
// Checks of staged bytes are the store's (staging::StagedFileChecker's
// ValidateOnClose, Store::Rename), against the feature types `types` gives
// (the mounted shards', from Filesystem); this view decides when they run:
// at FLUSH for a handle written since the last check, at the last close
// otherwise, when a file written without a handle looks whole
// (NoteWritten), and at rename() for what a file becomes under its new
// name. They never fail a write, a close or a rename for what a file
// holds: a file that does not pass is flagged (staged_file_checker.h).
//
// Thread-safety: all methods may be called concurrently, also on one handle
// (the kernel may send a file's reads and writes in parallel). A file
// handle's state is a descriptor (pread/pwrite need no lock) and an atomic
// flag; a directory handle's stream is guarded by its own mutex, a leaf lock
// held while the stream is read (never while calling the store). The store
// is thread-safe (staging/store.h).
#ifndef TFRECORDFS_VFS_STAGING_VIEW_H_
#define TFRECORDFS_VFS_STAGING_VIEW_H_

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/naming/feature_type.h"
#include "tfrecordfs/staging/store.h"
#include "tfrecordfs/vfs/attr.h"
#include "tfrecordfs/vfs/handle_table.h"
#include "tfrecordfs/vfs/node_id.h"
#include "tfrecordfs/vfs/view.h"

namespace tfrecordfs::vfs {

// The numbers a StagingView hands out, so that two views over two stores
// can share the staging space and the handle numbers: node ids are
// StagingId(node_tag | the store's node), handles come from HandleTables
// tagged file_tag and dir_tag (handle_table.h).
struct StagingViewIds {
  uint64_t node_tag = 0;  // 0 or a bit above every inode number (node_id.h)
  uint8_t file_tag = 1;
  uint8_t dir_tag = 2;
};

class StagingView final : public View {
 public:
  // `store` and `types` are not owned and must outlive the view.
  StagingView(staging::Store* store, naming::FeatureTypes* types, StagingViewIds ids = {});
  ~StagingView() override;  // closes the handles still open
  StagingView(const StagingView&) = delete;
  StagingView& operator=(const StagingView&) = delete;

  // The node id of the staging folder itself (the store's root).
  uint64_t root_id() const;
  // The node id of the store's node `node`, and back.
  uint64_t IdOf(uint64_t node) const { return StagingId(ids_.node_tag | node); }
  uint64_t NodeOf(uint64_t ino) const { return StagingIndex(ino) & ~ids_.node_tag; }
  // A node of the store as this view shows it (its id, mode, owner, times).
  Attr AttrOfStat(const struct stat& st) const;
  // Whether `fh` is a handle of this view's (open or closed).
  bool OwnsHandle(uint64_t fh) const;
  // The store nodes the open file handles are on.
  std::vector<uint64_t> OpenFileNodes() const;
  staging::Store* store() const { return store_; }

  absl::StatusOr<Attr> GetAttr(uint64_t ino) override;
  absl::StatusOr<Attr> Lookup(uint64_t parent, absl::string_view name) override;
  // Drops n kernel references to a node.
  void Forget(uint64_t ino, uint64_t n) override;

  // Opens a file for `flags` (O_TRUNC counts as a write to be checked).
  absl::StatusOr<uint64_t> Open(uint64_t ino, int flags) override;
  // Creates and opens a file; the handle counts as written. `owner`: the
  // caller's ids (staging::Owner).
  absl::StatusOr<std::pair<Attr, uint64_t>> CreateFile(
      uint64_t parent, absl::string_view name, mode_t mode, int flags,
      std::optional<staging::Owner> owner) override;
  // `fh` 0: opens the backing file for this call.
  absl::StatusOr<ReadResult> Read(uint64_t ino, uint64_t fh, uint64_t offset, size_t size) override;
  // `fh` 0: writes through a descriptor of the store's (which then notes the
  // file written: no RELEASE will come).
  absl::StatusOr<size_t> Write(uint64_t ino, uint64_t fh, absl::string_view data,
                               uint64_t offset) override;
  // close() with a handle: checks a file written since the last check (one
  // that does not parse or convert is flagged). fh 0: nothing.
  absl::Status Flush(uint64_t ino, uint64_t fh) override;
  // The last close: a file written and not checked since is checked now
  // (and flagged if it does not pass) and the handle closed. fh 0: nothing.
  void Release(uint64_t fh) override;
  // Closes a handle without any check. fh 0: nothing.
  void Discard(uint64_t fh) override;
  // fsync(2); `fh` 0: through a descriptor of its own.
  absl::Status Fsync(uint64_t ino, uint64_t fh, bool datasync) override;
  // `bits` are staging::SetAttrBits; `fh` may be 0. A size change counts as
  // a write to be checked.
  absl::StatusOr<Attr> SetAttr(uint64_t ino, uint64_t fh, const struct stat& to, int bits) override;

  absl::StatusOr<Attr> Mkdir(uint64_t parent, absl::string_view name, mode_t mode,
                             std::optional<staging::Owner> owner) override;
  absl::Status Unlink(uint64_t parent, absl::string_view name) override;
  absl::Status Rmdir(uint64_t parent, absl::string_view name) override;
  // Both parents are staging nodes.
  absl::Status Rename(uint64_t parent, absl::string_view name, uint64_t new_parent,
                      absl::string_view new_name, unsigned flags) override;

  absl::StatusOr<uint64_t> OpenDir(uint64_t ino) override;
  // Lists `ino` from `offset` (0, or a `next` emitted before). Offsets are
  // the backing directory's own telldir cookies, valid in any stream of it,
  // so entries removed while listing (rm -r) neither skip nor repeat others.
  // Only regular files and directories are shown. `fh` 0: a stream of its
  // own for this call.
  absl::Status ReadDir(uint64_t ino, uint64_t fh, uint64_t offset, const EmitFn& emit) override;
  // fh 0: nothing.
  void ReleaseDir(uint64_t fh) override;

  // `error`: why the pack would leave `ino` staged (staging::Store::
  // ErrorOf: a flagged file's reason, else what checking the file or the
  // record folder says now), when asked by name (`read_error`: reads the
  // file, or the whole record); listed only for a flagged file (one
  // fgetxattr).
  absl::Status Xattrs(uint64_t ino, bool read_error, XattrList* out) override;

  // Free space where staged bytes go (for statfs); false if statvfs fails.
  bool Space(uint64_t* free_bytes, uint64_t* total_bytes) const;

 private:
  struct FileHandle;
  struct DirHandle;

  staging::Store* const store_;
  naming::FeatureTypes* const types_;
  const StagingViewIds ids_;
  HandleTable<FileHandle> files_;  // defined in the .cc, where the
  HandleTable<DirHandle> dirs_;    // handle types are complete
};

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_STAGING_VIEW_H_
