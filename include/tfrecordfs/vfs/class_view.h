// -o view=classes,class_feature=NAME: the ImageFolder layout (torchvision's
// ImageFolder, Keras' image_dataset_from_directory):
//
//   MOUNTPOINT/<class>/<shard>-<record><ext>
//
// <class> is the folder of the record's one value of NAME
// (naming::ClassFolder: int64 as a number, text escaped reversibly; `%none`
// and `%several` for records with no value or several); <shard> is the
// shard's path in the records view with '/' as `%2F` (naming::EscapeNamePart,
// cut beyond 160 bytes with `%~` and a hash);
// <record> its index zero-padded as in the records view; a record with
// several images names them as the gallery does, after the stem
// `<shard>-<record>` (naming/gallery.h). Nothing else is shown (no source
// tree, no plain files, no staging/); the mount is read-only.
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
// Thread-safety: immutable after construction; all methods may be called
// concurrently (the record view locks its cache).
#ifndef TFRECORDFS_VFS_CLASS_VIEW_H_
#define TFRECORDFS_VFS_CLASS_VIEW_H_

#include <time.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/vfs/attr.h"
#include "tfrecordfs/vfs/class_groups.h"
#include "tfrecordfs/vfs/mounted_shard.h"
#include "tfrecordfs/vfs/record_view.h"
#include "tfrecordfs/vfs/view.h"

namespace tfrecordfs::vfs {

class ClassView final : public View {
 public:
  // `mount_paths[s]`: where the records view shows shard s. `shards` and
  // `records` are borrowed and must outlive the view.
  ClassView(const std::vector<MountedShard>& shards, const std::vector<std::string>& mount_paths,
            RecordView* records, ClassGroups groups);

  absl::StatusOr<Attr> GetAttr(uint64_t ino) override;
  absl::StatusOr<Attr> Lookup(uint64_t parent, absl::string_view name) override;
  absl::Status ReadDir(uint64_t ino, uint64_t fh, uint64_t offset, const EmitFn& emit) override;
  absl::StatusOr<uint64_t> Open(uint64_t ino, int flags) override;
  absl::StatusOr<ReadResult> Read(uint64_t ino, uint64_t fh, uint64_t offset, size_t size) override;
  // A class folder: class_feature (NAME) and class (the value, unescaped).
  absl::Status Xattrs(uint64_t ino, bool read_error, XattrList* out) override;

  size_t num_folders() const { return folders_.size(); }

 private:
  // The folder index of `ino` (kRoot for the root), or NotFound.
  static constexpr uint64_t kRoot = ~uint64_t{0};
  absl::StatusOr<uint64_t> Resolve(uint64_t ino) const;
  Attr DirAttr(uint64_t ino) const;
  // `<shard>-<record>`: the stem of a member's image names.
  std::string Stem(uint64_t shard, uint64_t record) const;

  const std::vector<MountedShard>& shards_;
  RecordView* const records_;
  const ClassGroups groups_;
  std::vector<std::string> shard_names_;  // escaped mount paths
  absl::flat_hash_map<std::string, uint32_t> shard_by_name_;
  struct Folder {
    std::string name;
    std::vector<uint64_t> members;  // RecordKey(shard, record), in name order
  };
  std::vector<Folder> folders_;
  struct timespec mtime_ = {};  // the newest shard's: stable across mounts
};

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_CLASS_VIEW_H_
