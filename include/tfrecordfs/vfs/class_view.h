// -o view=classes,class_feature=NAME: the ImageFolder layout (torchvision's
// ImageFolder, Keras' image_dataset_from_directory):
//
//   MOUNTPOINT/<class>/<shard>-<record><ext>
//
// <class> is the folder of the record's one value of NAME
// (naming::ClassOf: int64 as a number, text escaped reversibly; `%none`
// and `%several` for records with no value or several), or, where the
// dataset names its classes (a TFDS ClassLabel's `<NAME>.labels.txt`
// beside the shards, NAME's '/' as '-'), the name of class i for the
// int64 value i (ShownFolder in class_groups.h); <shard> is the
// shard's path in the records view with '/' as `%2F` (naming::EscapeNamePart,
// cut beyond 160 bytes with `%~` and a hash);
// <record> its index zero-padded as in the records view; a record with
// several images names them as the gallery does, after the stem
// `<shard>-<record>` (naming/gallery.h). Nothing else is shown (no source
// tree, no plain files, no staging/).
//
// Cleaning, on a read-write mount (edits committed at unmount like the
// records view's, record_edits.h):
//   * `rm` of an image deletes its record (all its images go);
//   * `mv` of an image from one class folder to another (same name) sets
//     the record's class feature to the destination's value (the whole
//     value, also where the folder's name is cut; the label's number for a
//     ClassLabel name), as an int64,
//     float or text value like the feature's file in the record
//     (RecordEdits::WriteEntry, with the staging checks); the record then
//     shows in the destination folder. A record without one value of the
//     feature (`%none`, `%several`) cannot be moved, nor moved there (EPERM,
//     logged: set it in a records-view mount).
// Everything else is EROFS (writes) or EPERM (a rename to another name).
// Records edited before (the edit store keeps them across remounts) show in
// the folder of the value their edited folder holds.
//
// The grouping (class_groups.h) is computed when the view is made, once for
// the mount; listing a class folder then reads and lays out its records a
// readdir page at a time through the record view's cache, as the gallery
// does (gallery_view.h). Images are the record view's files (record-space
// node ids): their attributes and bytes are RecordView's.
//
// Node ids: the root is the mount root (FUSE_ROOT_ID); class folders are
// ClassFolderId(i) (node_id.h), i their index in the sorted folder list.
// Listing offsets in a class folder: (member << 16 | image) + 2, member
// the record's position in the folder.
//
// Errors: NotFound, ENOTDIR / EISDIR, the record's DataLoss, EROFS for
// writes (View's defaults).
//
// Thread-safety: all methods may be called concurrently (the record view
// locks its cache; mu_, a leaf, guards the moves made through the mount).
#ifndef TFRECORDFS_VFS_CLASS_VIEW_H_
#define TFRECORDFS_VFS_CLASS_VIEW_H_

#include <time.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/vfs/attr.h"
#include "tfrecordfs/vfs/class_groups.h"
#include "tfrecordfs/vfs/mounted_shard.h"
#include "tfrecordfs/vfs/record_edits.h"
#include "tfrecordfs/vfs/record_view.h"
#include "tfrecordfs/vfs/view.h"

namespace tfrecordfs::vfs {

class ClassView final : public View {
 public:
  // `mount_paths[s]`: where the records view shows shard s. `shards` and
  // `records` are borrowed and must outlive the view.
  // `edits` null: a read-only mount.
  ClassView(const std::vector<MountedShard>& shards, const std::vector<std::string>& mount_paths,
            RecordView* records, RecordEdits* edits, ClassGroups groups);

  absl::StatusOr<Attr> GetAttr(uint64_t ino) override;
  absl::StatusOr<Attr> Lookup(uint64_t parent, absl::string_view name) override;
  absl::Status ReadDir(uint64_t ino, uint64_t fh, uint64_t offset, const EmitFn& emit) override;
  absl::StatusOr<uint64_t> Open(uint64_t ino, int flags) override;
  absl::StatusOr<ReadResult> Read(uint64_t ino, uint64_t fh, uint64_t offset, size_t size) override;
  // A class folder: class_feature (NAME) and class (the whole value, also
  // where the name is cut or a ClassLabel name).
  absl::Status Xattrs(uint64_t ino, bool read_error, XattrList* out) override;
  // rm of an image: deletes its record.
  absl::Status Unlink(uint64_t parent, absl::string_view name) override;
  // mv of an image between class folders: relabels its record.
  absl::Status Rename(uint64_t parent, absl::string_view name, uint64_t new_parent,
                      absl::string_view new_name, unsigned flags) override;

  size_t num_folders() const { return folders_.size(); }
  // Class folder f's name (f < num_folders()).
  const std::string& FolderName(size_t f) const { return folders_[f].name; }

  // Shard `shard` was rewritten (a commit while mounted: its records
  // renumbered, edits and deletions applied, shards[shard] replaced):
  // its records now show in the folders of `grouping` (GroupShard of the
  // new shard), and relabels made through this mount are forgotten (the
  // new shard holds them). A value with no class folder in this mount
  // shows nowhere until a remount (logged). Not thread-safe: call with no
  // other call of this view running (Filesystem::Commit holds the serve
  // lock exclusively).
  void ResetShard(uint64_t shard, const ShardGrouping& grouping);

 private:
  // The folder index of `ino` (kRoot for the root), or NotFound.
  static constexpr uint64_t kRoot = ~uint64_t{0};
  absl::StatusOr<uint64_t> Resolve(uint64_t ino) const;
  Attr DirAttr(uint64_t ino) const;
  // `<shard>-<record>`: the stem of a member's image names.
  std::string Stem(uint64_t shard, uint64_t record) const;
  // The folder record (shard, record) shows in now (kNotGrouped: none).
  uint32_t FolderOf(uint64_t shard, uint64_t record) const;
  // Folder f's members now (moves and deletions applied), in name order.
  std::vector<uint64_t> MembersOf(uint64_t f) const;
  // The folder of the values an edited record's folder holds.
  uint32_t FolderOfEdited(uint64_t shard, uint64_t record) const;
  uint32_t FolderIndex(absl::string_view name) const;
  // folders_' members and mtime_, from groups_ and shards_.
  void FillFolders();

  const std::vector<MountedShard>& shards_;
  RecordView* const records_;
  RecordEdits* const edits_;
  ClassGroups groups_;                    // folder_of changes only in ResetShard
  std::vector<uint32_t> shard_rank_;      // shard -> its place in name order
  std::vector<std::string> shard_names_;  // escaped mount paths
  absl::flat_hash_map<std::string, uint32_t> shard_by_name_;
  struct Folder {
    std::string name;
    std::optional<std::string> value;  // ClassGroups::values: what a move here writes
    std::vector<uint64_t> members;     // RecordKey(shard, record), in name order
  };
  std::vector<Folder> folders_;
  struct timespec mtime_ = {};  // the newest shard's: stable across mounts
  mutable Mutex mu_;
  // RecordKey -> the folder it shows in (kNotGrouped: none) when that is not
  // groups_'s: records relabelled or edited.
  absl::flat_hash_map<uint64_t, uint32_t> moved_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_CLASS_VIEW_H_
