// A view: one namespace of the mount, served under node ids of its own space
// (node_id.h). Filesystem (filesystem.h) is a dispatcher: it sends every
// operation on a node to the view of the node's space, and decides what
// happens at the boundaries between views (a shard folder of the tree lists
// the record view's folders; the tree's `staging` entry is the staging
// view's root; a rename across views).
//
// The views today:
//   TreeView     the sources mirrored at the root: folders, plain files,
//                shard folders (tree_view.h)
//   RecordView   records of a shard and the files of their features
//                (record_view.h)
//   StagingView  the writable staging/ folder, a passthrough to
//                staging::Store (staging_view.h)
//   ClassView    -o view=classes: class folders of images (class_view.h)
// and GalleryView (gallery_view.h), which only names a shard folder's
// children under -o view=gallery (its files are RecordView's).
// A new view (an edit overlay) is one
// class implementing this interface plus its line in Filesystem's dispatch;
// see docs/architecture.md.
//
// Contracts shared by every view:
//   * `ino` and `parent` are node ids of the view's own space that the view
//     handed out (NotFound "stale node id" otherwise);
//   * errors are absl::Status values whose errno (base/file.h ErrnoOf, or
//     the code's mapping in src/fuse/errno.cc) is what the caller sees:
//     NotFound (ENOENT), DataLoss (EIO) naming shard, record and byte
//     offset, PosixError(EROFS) for writes a view does not take;
//   * ReadDir offsets: "." is 0, ".." is 1, children follow (a view may use
//     offsets of its own, e.g. staging's telldir cookies, as long as 0
//     starts the listing and every `next` it emits resumes after that entry);
//   * handles: Open/OpenDir return 0 ("no handle") unless the view keeps
//     per-open state; a view that does documents its handles.
//
// Thread-safety: every method of every view may be called concurrently.
#ifndef TFRECORDFS_VFS_VIEW_H_
#define TFRECORDFS_VFS_VIEW_H_

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/staging/owner.h"
#include "tfrecordfs/vfs/attr.h"

namespace tfrecordfs::vfs {

// Extended attributes as (full name, value) pairs, e.g. ("user.tfrecordfs.shard", path).
using XattrList = std::vector<std::pair<std::string, std::string>>;
inline constexpr absl::string_view kXattrPrefix = "user.tfrecordfs.";
// Appends ("user.tfrecordfs." + key, value).
void AddXattr(XattrList* out, absl::string_view key, std::string value);

// EROFS: what every view that takes no writes answers to them.
absl::Status ReadOnlyError();

// Emits "." (offset 0) and ".." (offset 1) with `self`'s attributes while
// `*offset` is below 2, advancing it; false when the reply buffer filled.
bool EmitDots(const Attr& self, uint64_t* offset, const EmitFn& emit);

// What a shard folder holds, as the mount shows it: its records
// (RecordView), its records with their edits and added records
// (RecordEdits), or its images (GalleryView). Filesystem picks one at mount
// and asks it for every shard folder; `shard` is the shard's index,
// `self` the shard folder's attributes (for "." and ".."). Writes are EROFS
// unless the view takes them. Thread-safety: as the implementing view's.
class ShardFolderView {
 public:
  virtual ~ShardFolderView() = default;
  // An entry by name (NotFound otherwise).
  virtual absl::StatusOr<Attr> LookupInShard(uint64_t shard, absl::string_view name) = 0;
  virtual absl::Status ListShard(uint64_t shard, const Attr& self, uint64_t offset,
                                 const EmitFn& emit) = 0;
  // mkdir in the shard folder: a record added.
  virtual absl::StatusOr<Attr> MkdirInShard(uint64_t /*shard*/, absl::string_view /*name*/,
                                            mode_t /*mode*/,
                                            std::optional<staging::Owner> /*owner*/) {
    return ReadOnlyError();
  }
  // rm of a file in the shard folder (the gallery's images).
  virtual absl::Status UnlinkInShard(uint64_t /*shard*/, absl::string_view /*name*/) {
    return ReadOnlyError();
  }
  // rmdir of a record folder: the record deleted.
  virtual absl::Status RmdirInShard(uint64_t /*shard*/, absl::string_view /*name*/) {
    return ReadOnlyError();
  }
};

class View {
 public:
  virtual ~View() = default;

  // ---- Reading: every view ----
  virtual absl::StatusOr<Attr> GetAttr(uint64_t ino) = 0;
  virtual absl::StatusOr<Attr> Lookup(uint64_t parent, absl::string_view name) = 0;
  virtual absl::Status ReadDir(uint64_t ino, uint64_t fh, uint64_t offset, const EmitFn& emit) = 0;
  // Opens a file for `flags`; a view that takes no writes answers EROFS to
  // writable flags (O_WRONLY, O_RDWR, O_TRUNC).
  virtual absl::StatusOr<uint64_t> Open(uint64_t ino, int flags) = 0;
  // Up to `size` bytes at `offset`, short only at the end of the file.
  virtual absl::StatusOr<ReadResult> Read(uint64_t ino, uint64_t fh, uint64_t offset,
                                          size_t size) = 0;
  // A directory handle; by default 0 after checking that `ino` is a folder.
  virtual absl::StatusOr<uint64_t> OpenDir(uint64_t ino);
  virtual void ReleaseDir(uint64_t /*fh*/) {}
  // The user.tfrecordfs.* attributes of `ino`, appended to `out`; `read_error`:
  // the caller asks for `error` by name, which may read a record (none by default).
  virtual absl::Status Xattrs(uint64_t /*ino*/, bool /*read_error*/, XattrList* /*out*/) {
    return absl::OkStatus();
  }
  // Drops n kernel references to a node (only views that count them care).
  virtual void Forget(uint64_t /*ino*/, uint64_t /*n*/) {}

  // ---- Writing: EROFS unless the view takes writes ----
  // `owner`: the caller's ids, to give what is made (staging::Owner).
  virtual absl::StatusOr<std::pair<Attr, uint64_t>> CreateFile(
      uint64_t /*parent*/, absl::string_view /*name*/, mode_t /*mode*/, int /*flags*/,
      std::optional<staging::Owner> /*owner*/) {
    return ReadOnlyError();
  }
  virtual absl::StatusOr<Attr> Mkdir(uint64_t /*parent*/, absl::string_view /*name*/,
                                     mode_t /*mode*/, std::optional<staging::Owner> /*owner*/) {
    return ReadOnlyError();
  }
  virtual absl::StatusOr<size_t> Write(uint64_t /*ino*/, uint64_t /*fh*/,
                                       absl::string_view /*data*/, uint64_t /*offset*/) {
    return ReadOnlyError();
  }
  // `bits` are staging::SetAttrBits; `fh` may be 0.
  virtual absl::StatusOr<Attr> SetAttr(uint64_t /*ino*/, uint64_t /*fh*/, const struct stat& /*to*/,
                                       int /*bits*/) {
    return ReadOnlyError();
  }
  virtual absl::Status Unlink(uint64_t /*parent*/, absl::string_view /*name*/) {
    return ReadOnlyError();
  }
  virtual absl::Status Rmdir(uint64_t /*parent*/, absl::string_view /*name*/) {
    return ReadOnlyError();
  }
  // Both parents are this view's; renames across views are Filesystem's call.
  virtual absl::Status Rename(uint64_t /*parent*/, absl::string_view /*name*/,
                              uint64_t /*new_parent*/, absl::string_view /*new_name*/,
                              unsigned /*flags*/) {
    return ReadOnlyError();
  }
  virtual absl::Status Flush(uint64_t /*ino*/, uint64_t /*fh*/) { return absl::OkStatus(); }
  virtual absl::Status Fsync(uint64_t /*ino*/, uint64_t /*fh*/, bool /*datasync*/) {
    return absl::OkStatus();
  }
  // The last close of a file handle, with its checks; Discard: without them.
  virtual void Release(uint64_t /*fh*/) {}
  virtual void Discard(uint64_t /*fh*/) {}
};

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_VIEW_H_
