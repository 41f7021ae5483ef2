// -o view=gallery: every shard folder is a flat folder of the images of its
// records (naming/gallery.h: which files are images and their names,
// `0042.jpg`, `0042-image%2Fencoded.jpg`, `0042-frames-07.png`), nothing
// else. Record folders, plain files of the sources and staging/ are not
// shown. On a read-write mount `rm` of an image deletes its record
// (UnlinkInShard; committed at unmount like an edit); every other write is
// EROFS.
//
// An image is the records view's file under another name: its node id is
// the record-space id of the same layout entry (node_id.h), so its
// attributes, bytes, open checks and extended attributes are RecordView's,
// byte for byte, and its mtime is the shard's (thumbnail caches stay
// valid). This class only names a shard folder's children: Filesystem
// sends the shard-folder lines of Lookup and ReadDir here.
//
// How names are known: lazily, per readdir page. Names need each record's
// features, so a listing reads, checks and lays out the records it reaches
// (RecordView::Parse), a page at a time, in record order; layouts are kept
// in the record view's cache (-o cache_records / cache_mb), so a listing
// that fits there is decoded once and a repeated or resumed listing reads
// nothing; a bigger one reads records again, never more than one record's
// layout per image listed. The kernel caches listings and names besides.
// A listing offset names a position (record << 16 | image) + 2, so a
// resumed readdir starts at its record without reading the ones before.
// Lookup reads one record: the name's leading digits give it.
//
// Damaged records show no images (their reader logs the damage once).
//
// Thread-safety: all methods may be called concurrently (the record view
// locks its cache; deletions go through RecordEdits); the view holds no
// state of its own.
#ifndef TFRECORDFS_VFS_GALLERY_VIEW_H_
#define TFRECORDFS_VFS_GALLERY_VIEW_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/vfs/attr.h"
#include "tfrecordfs/vfs/mounted_shard.h"
#include "tfrecordfs/vfs/record_edits.h"
#include "tfrecordfs/vfs/record_view.h"

namespace tfrecordfs::vfs {

class GalleryView final : public ShardFolderView {
 public:
  // `shards`, `records` and `edits` are borrowed and must outlive the view;
  // `edits` null: a read-only mount.
  GalleryView(const std::vector<MountedShard>& shards, RecordView* records, RecordEdits* edits);

  // The image `name` of shard folder `shard` (NotFound otherwise; the
  // record's DataLoss when its record is damaged).
  absl::StatusOr<Attr> LookupInShard(uint64_t shard, absl::string_view name) override;
  // Lists shard folder `shard` (`self`: its attributes, for "." and "..").
  absl::Status ListShard(uint64_t shard, const Attr& self, uint64_t offset,
                         const EmitFn& emit) override;
  // rm of image `name`: deletes its record (every image of it goes), as
  // `rm -r` of the record folder would (RecordEdits::DeleteRecord). EROFS on
  // a read-only mount.
  absl::Status UnlinkInShard(uint64_t shard, absl::string_view name) override;

 private:
  const std::vector<MountedShard>& shards_;
  RecordView* const records_;
  RecordEdits* const edits_;
};

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_GALLERY_VIEW_H_
