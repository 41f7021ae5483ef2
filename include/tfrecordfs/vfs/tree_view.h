// The mirrored source tree: the mount root, the folders and plain files of
// the sources (read-only, byte for byte), and one folder per shard, in the
// tree space of the node ids (node_id.h: the index of a node, plus one).
//
// A shard folder's own attributes are this view's; its children (the
// records) are RecordView's: Filesystem asks ShardFolder() and sends them
// there. A graft (AddGraft) is an entry of the root served by another view
// (the staging folder): its attributes are that view's root's, so the
// kernel only ever sees that view's node id for it.
//
// Plain files are read through the mount's bounded descriptor cache (the
// shards' FdCache), so any number of them mounts within the descriptor
// limit; a plain file is opened without blocking (a source replaced by a
// FIFO must not hang a reader) and only while it still is a regular file.
// A plain file that is an object (not a shard: a dataset_info.json in a
// bucket) is read with the object's ranged GETs (objstore/http.h: pinned to
// its listed ETag, through the mount's block cache), one FUSE read at a
// time: a read asks for what the cache misses of the FUSE request's range,
// at least kMinObjectFetch bytes (1 MiB), never the whole object.
//
// Errors: NotFound, ENOTDIR, EISDIR, EROFS for writes (View's defaults),
// EIO for a plain file that is no longer a regular file, the object's
// errors (EIO, DataLoss for an object replaced since it was listed).
//
// Thread-safety: the tree is immutable after construction (AddGraft is part
// of construction: call it before the view is shared); the descriptor cache
// locks internally. All other methods may be called concurrently.
#ifndef TFRECORDFS_VFS_TREE_VIEW_H_
#define TFRECORDFS_VFS_TREE_VIEW_H_

#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/scan/scan.h"
#include "tfrecordfs/source/shard_source.h"
#include "tfrecordfs/vfs/attr.h"
#include "tfrecordfs/vfs/mounted_shard.h"
#include "tfrecordfs/vfs/view.h"

namespace tfrecordfs::vfs {

class TreeView final : public View {
 public:
  // The tree of `entries` (scan::ScanResult::entries: node e + 1 is entry e,
  // node 0 the root). `shard_entries[s]` is the entry of mounted shard s;
  // `shards` and `fds` are borrowed and must outlive the view. `shards_only`
  // (the gallery): plain files are left out; folders and shards stay.
  // `writable_shards`: shard folders show 0755 (they take new records and
  // record deletions: a read-write records-view mount), else 0555.
  TreeView(const std::vector<scan::SourceEntry>& entries, const std::vector<size_t>& shard_entries,
           const std::vector<MountedShard>& shards, source::FdCache* fds, bool shards_only = false,
           bool writable_shards = false);

  // Adds `name` at the root, served by `view` from its node `root`
  // (AlreadyExists naming the clashing source path when the root has that
  // name already).
  absl::Status AddGraft(absl::string_view name, View* view, uint64_t root);

  // The shard whose folder is tree node `ino`, if it is one.
  std::optional<uint64_t> ShardFolder(uint64_t ino) const;
  // The node id of shard `shard`'s folder.
  uint64_t ShardFolderId(uint64_t shard) const { return shard_folder_ids_[shard]; }
  // Where shard `shard`'s folder is: its parent's node id and its name.
  std::pair<uint64_t, std::string> ShardFolderEntry(uint64_t shard) const;

  // ---- View: tree-space nodes ----
  absl::StatusOr<Attr> GetAttr(uint64_t ino) override;
  // `parent` must not be a shard folder (Filesystem sends those to RecordView).
  absl::StatusOr<Attr> Lookup(uint64_t parent, absl::string_view name) override;
  // `ino` must not be a shard folder (as Lookup).
  absl::Status ReadDir(uint64_t ino, uint64_t fh, uint64_t offset, const EmitFn& emit) override;
  absl::StatusOr<uint64_t> Open(uint64_t ino, int flags) override;
  absl::StatusOr<ReadResult> Read(uint64_t ino, uint64_t fh, uint64_t offset, size_t size) override;
  // A shard folder: shard, records, codec, error (what the walk found damaged).
  absl::Status Xattrs(uint64_t ino, bool read_error, XattrList* out) override;

 private:
  enum class Type { kDir, kPlainFile, kShard, kGraft };
  struct Node {
    std::string name;
    uint64_t parent = 0;
    Type type = Type::kDir;
    std::vector<uint64_t> children;  // tree indices, sorted by name
    std::string real_path;
    struct stat st = {};
    uint64_t shard = 0;   // kShard
    uint64_t fd_key = 0;  // kPlainFile: its key in fds_
    // kPlainFile of object storage (a dataset_info.json beside the shards
    // of a bucket): read through it, with ranged GETs, not through fds_.
    std::shared_ptr<const source::ObjectReader> object;
    View* graft = nullptr;    // kGraft: the view serving it,
    uint64_t graft_root = 0;  // from this node of it
  };

  // The tree index of `ino`, or NotFound("stale node id").
  absl::StatusOr<uint64_t> Resolve(uint64_t ino) const;
  std::optional<uint64_t> Find(uint64_t dir, absl::string_view name) const;

  std::vector<Node> nodes_;
  const std::vector<MountedShard>& shards_;
  source::FdCache* const fds_;
  const mode_t shard_mode_;                 // of shard folders (writable_shards)
  std::vector<uint64_t> shard_folder_ids_;  // by shard
};

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_TREE_VIEW_H_
