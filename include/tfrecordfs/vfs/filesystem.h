// The namespace the mount shows, as a dispatcher over views (view.h): the
// sources mirrored at the root (TreeView), one folder per record of every
// shard with files per feature (RecordView), and the writable staging area
// (StagingView); or, with Options::view, the images only: a flat folder per
// shard (GalleryView) or class folders at the root (ClassView). Every operation goes to the view of
// its node id's space (node_id.h); Filesystem itself only decides the boundaries between views:
//   * a shard folder is the tree's, its children are the record view's;
//   * the root's staging entry is the staging view's root (a graft);
//   * what a rename between views answers (EROFS, also across the staging
//     boundary either way: EXDEV would make `mv` copy, then fail to delete
//     the read-only source and leave the copy staged);
//   * which view holds file and directory handles (only staging's, today).
// Operations return absl::Status / StatusOr; src/fuse turns them into
// replies. Nothing here includes FUSE headers.
//
// Errors (see fuse/errno.h for the errno each maps to):
//   NotFound            no such name
//   DataLoss (EIO)      a record whose CRC or framing is damaged; the message
//                       names the shard path, record index and byte offset
//   PosixError(EROFS)   writes outside the staging area (but deletions of
//                       records: record_deletions.h)
//
// Thread-safety: all methods may be called concurrently; each view states
// its own locks (tree_view.h, record_view.h, staging_view.h). The mounted
// shards (shard_set.h) change only in Commit(reopen), which holds serve_mu_
// exclusively while every other operation holds it shared.
#ifndef TFRECORDFS_VFS_FILESYSTEM_H_
#define TFRECORDFS_VFS_FILESYSTEM_H_

#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/index/index_store.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/naming/feature_type.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/repack/rewrite.h"
#include "tfrecordfs/scan/scan.h"
#include "tfrecordfs/source/inflate.h"
#include "tfrecordfs/source/readahead.h"
#include "tfrecordfs/source/shard_source.h"
#include "tfrecordfs/staging/deletions.h"
#include "tfrecordfs/staging/store.h"
#include "tfrecordfs/vfs/attr.h"
#include "tfrecordfs/vfs/class_groups.h"
#include "tfrecordfs/vfs/class_view.h"
#include "tfrecordfs/vfs/feature_type_sampler.h"
#include "tfrecordfs/vfs/gallery_view.h"
#include "tfrecordfs/vfs/mounted_shard.h"
#include "tfrecordfs/vfs/node_id.h"
#include "tfrecordfs/vfs/record_deletions.h"
#include "tfrecordfs/vfs/record_edits.h"
#include "tfrecordfs/vfs/record_view.h"
#include "tfrecordfs/vfs/shard_set.h"
#include "tfrecordfs/vfs/staging_view.h"
#include "tfrecordfs/vfs/tree_view.h"
#include "tfrecordfs/vfs/view.h"

namespace tfrecordfs::vfs {

inline constexpr int kRemoteIndexThreads = index::kRemoteWalkThreads;

// What the mount shows (-o view=): the records view (the default), the
// gallery (gallery_view.h) or class folders (class_view.h). The image views
// show no staging folder and no plain files, and take no writes.
enum class ViewKind { kRecords, kGallery, kClasses };

struct Options {
  // Shard files or directories (mirrored recursively at the mount root).
  std::vector<std::string> sources;
  ViewKind view = ViewKind::kRecords;
  // kClasses: the feature whose value names a record's class folder
  // (-o class_feature=NAME; required there), and what Create() calls as
  // the grouping pass decodes records (the mount's progress bar; any
  // thread). The grouping is kept beside the cached indexes of
  // `index_store` (class_groups.h).
  std::string class_feature;
  std::function<void(uint64_t shards, uint64_t records, uint64_t bytes)> on_group_progress;
  // The parsed-record cache: at most this many records and bytes (layouts:
  // names, inline text values, spans). Listing or stat-ing a file of a
  // record outside the cache re-reads and re-checks the whole record.
  size_t cache_records = 65536;
  size_t cache_bytes = size_t{16} << 20;
  // Threads for the initial probe and header walk (scan::ScanOptions::
  // threads). 0 = number of CPUs (at most 16), or kRemoteIndexThreads when a
  // source is on network storage (source::OnRemoteStorage: reads there wait
  // on round trips, not CPU).
  int index_threads = 0;
  // The writable staging area: shown at the root as `staging_name` when
  // `staging` is set (not owned; must outlive the Filesystem). A source entry
  // of the same name is a Create() error.
  staging::Store* staging = nullptr;
  std::string staging_name = "staging";
  // Records deleted from the mounted shards, pending their rewrite (not
  // owned; must outlive the Filesystem). Null: records cannot be deleted
  // (EROFS). Used only by the records view (record_deletions.h).
  staging::DeletionList* deletions = nullptr;
  // The edit store (staging/edits.h; not owned, must outlive the
  // Filesystem): with `deletions`, records of the shards can be edited and
  // added (record_edits.h). Null: EROFS.
  staging::Store* edits = nullptr;
  // The most records checked out or added in the edit store at once
  // (-o max_edited; RecordEdits::set_max_edited): a check-out copies every
  // file of a record, and a file takes at least one block (4 KiB on most
  // disks), so 100,000 edits of 50-byte records cost 1.2 GB. Beyond it an
  // edit is refused (EDQUOT, logged) until `tfrecordfs commit` empties the
  // store.
  size_t max_edited = 20000;
  // The feature types the staging checks hold staged files to (not owned;
  // must outlive the Filesystem). Null: the mounted shards'
  // (feature_types()). Set: these instead (tests of the checks).
  naming::FeatureTypes* staging_types = nullptr;
  // What the feature-type sampler may read, beyond the records parsed for
  // the tree, to find the type of a feature name it has not seen: at most
  // `kind_sample_per_call`
  // per name looked for and `kind_sample_total` over the life of the mount.
  // Defaults: 4096 records / 32 MiB per name and 65536 records / 256 MiB in
  // all (about 0.2% of a 140 GB, 1.28M-record dataset of ~110 KB records).
  // A per-call record budget of 0 turns sampling off.
  SampleBudget kind_sample_per_call = {4096, uint64_t{32} << 20};
  SampleBudget kind_sample_total = {65536, uint64_t{256} << 20};
  // Where shard indexes are loaded from and new ones saved to (cached,
  // shared or beside the shard: index/index_store.h); not owned, used by
  // Create() and by Commit() (the rewritten shards); must outlive the
  // Filesystem. Null: every shard is walked with index::BuildShardIndex and
  // nothing is saved.
  index::IndexStore* index_store = nullptr;
  // Decompressed bytes of GZIP/ZLIB shards kept for readers (-o
  // inflate_cache_mb), in source::kBlockSize blocks shared by all of them:
  // listing a record and reading its files inflates that region once.
  size_t inflate_cache_bytes = size_t{32} << 20;
  // Sequential readahead (source/readahead.h) when a source is on network
  // storage (-o readahead_mb): blocks read ahead of records read in order
  // (a find, cat */label), at most this many bytes kept; 0: off.
  size_t readahead_bytes = size_t{64} << 20;
  // Shard files open at once (-o max_open): shards are opened on demand and
  // the least recently used closed beyond this, so any number of shards
  // mounts within the descriptor limit (which must exceed this plus the
  // walk threads and ~64; the daemon lifts its soft limit to the hard one).
  size_t max_open_shards = 1024;
  // Called (from any thread) with a shard's path when a record read finds
  // the shard's index wrong (its header does not frame the span the index
  // gives, and the walk recorded no damage there): the index store drops its
  // stored copy so the next mount walks again. Unset: only logged.
  std::function<void(const std::string& path)> on_index_mismatch;
};

// Statistics for statfs and the benchmarks.
struct Stats {
  uint64_t shards = 0;
  uint64_t records = 0;
  uint64_t shard_bytes = 0;
  uint64_t index_bytes = 0;      // shard indexes and the checked-record bits
  uint64_t records_read = 0;     // records read from shards and checked (cache misses)
  uint64_t records_sampled = 0;  // records read by the sampler to learn feature types
  uint64_t bytes_sampled = 0;    // their bytes, framing included
  // view=classes: how the grouping was had (class_groups.h).
  uint64_t group_shards_loaded = 0;
  uint64_t group_records_decoded = 0;
};

class Filesystem {
 public:
  // Scans the sources (scan::Scan: lists them, probes every file and indexes
  // the shards in parallel) and mirrors them. Fails as Scan does (a source
  // missing, two sources giving one name at one place of the mount, I/O
  // errors), with more than kMaxShards shards, or when the staging folder's
  // name clashes with a root entry. Damaged shards are logged and indexed up
  // to the damage.
  static absl::StatusOr<std::unique_ptr<Filesystem>> Create(const Options& options);
  ~Filesystem();

  // ==== Any node: sent to the view of its node id's space ====

  absl::StatusOr<Attr> Lookup(uint64_t parent, absl::string_view name);
  absl::StatusOr<Attr> GetAttr(uint64_t ino);

  // Lists a directory from position `offset` ("." is 0, ".." is 1, children
  // follow; a staging directory's offsets are its own, see StagingView).
  using EmitFn = vfs::EmitFn;
  absl::Status ReadDir(uint64_t ino, uint64_t offset, const EmitFn& emit) {
    return ReadDir(ino, 0, offset, emit);
  }

  // Opens a file. Returns a handle for the other file calls (0 for the
  // read-only tree; staging files get a real descriptor). Writes outside the
  // staging area fail with EROFS. A feature file of a damaged record fails
  // with EIO; a record found intact once is not read again to open it (its
  // layout may have left the cache: shards do not change under the mount).
  absl::StatusOr<uint64_t> Open(uint64_t ino, int flags);
  // Reads up to `size` bytes at `offset` (short only at end of file). A
  // feature file of a damaged record fails with EIO here too. `fh` is the
  // handle Open returned; a staging file read with fh 0 (the kernel may open
  // files without asking on a read-only mount) opens its backing file per call.
  absl::StatusOr<ReadResult> Read(uint64_t ino, uint64_t fh, uint64_t offset, size_t size);
  absl::StatusOr<ReadResult> Read(uint64_t ino, uint64_t offset, size_t size) {
    return Read(ino, 0, offset, size);
  }
  // Directory handles (only staging directories hold state). ReadDir also
  // accepts fh 0 for any directory (the kernel may open directories without
  // asking); a staging listing then opens its backing directory per call.
  absl::StatusOr<uint64_t> OpenDir(uint64_t ino);
  absl::Status ReadDir(uint64_t ino, uint64_t fh, uint64_t offset, const EmitFn& emit);
  void ReleaseDir(uint64_t fh);

  // ==== Writes and handles: sent to the node's view, whose header states
  // the contract (view.h; staging_view.h for staged files and their checks);
  // views that take no writes answer EROFS. A rename between views is
  // decided here (see the top). Links are refused with EPERM in src/fuse. ====

  // FUSE's CREATE (not the factory above). `owner`: the caller's ids, given
  // what is made (staging::Owner).
  absl::StatusOr<std::pair<Attr, uint64_t>> CreateFile(
      uint64_t parent, absl::string_view name, mode_t mode, int flags,
      std::optional<staging::Owner> owner = std::nullopt);
  absl::StatusOr<Attr> Mkdir(uint64_t parent, absl::string_view name, mode_t mode,
                             std::optional<staging::Owner> owner = std::nullopt);
  absl::StatusOr<size_t> Write(uint64_t ino, uint64_t fh, absl::string_view data, uint64_t offset);
  absl::Status Flush(uint64_t ino, uint64_t fh);
  void Release(uint64_t fh);
  void Discard(uint64_t fh);
  absl::Status Fsync(uint64_t ino, uint64_t fh, bool datasync);
  absl::StatusOr<Attr> SetAttr(uint64_t ino, uint64_t fh, const struct stat& to, int bits);
  absl::Status Unlink(uint64_t parent, absl::string_view name);
  absl::Status Rmdir(uint64_t parent, absl::string_view name);
  absl::Status Rename(uint64_t parent, absl::string_view name, uint64_t new_parent,
                      absl::string_view new_name, unsigned flags);
  void Forget(uint64_t ino, uint64_t n);
  // Whether `ino`'s content or attributes can change under the mount (a
  // staged node, or a node of an edited record): the adapter then lets
  // the kernel keep nothing cached for it.
  bool Mutable(uint64_t ino) const;
  // Free space where staged bytes go (for statfs), or false without staging.
  bool StagingSpace(uint64_t* free_bytes, uint64_t* total_bytes) const;

  // ==== Feature types for the staging area's checks ====

  // What the mounted shards say about feature names (naming::FeatureType):
  // learnt from every record parsed for the tree, else by sampling more
  // records within Options::kind_sample_per_call and kind_sample_total (see
  // FeatureTypeSampler for the order, the bounds and the costs). A sequence
  // list answers under `feature_lists/<name>`. Thread-safe; valid while the
  // Filesystem lives.
  naming::FeatureTypes& feature_types();
  // The types the staging checks use (Options::staging_types, else
  // feature_types()), also for the checks and the pack that run outside the
  // mount (at unmount). Valid while the Filesystem lives.
  naming::FeatureTypes& staging_types() { return *staging_types_; }

  // ==== Extended attributes: user.tfrecordfs.*, computed and read-only ====
  //
  //   record folder   shard (the shard file's path), record (its index),
  //                   offset (byte offset of the record's framing; in the
  //                   decompressed stream of a GZIP/ZLIB shard), length
  //                   (payload bytes), compressed_offset (GZIP/ZLIB only:
  //                   the compressed offset of the nearest checkpoint at or
  //                   before the record, where inflating resumes), error
  //                   (a damaged record: the reason the log gave)
  //   feature file    feature (the real, unescaped name; a list's name for
  //   or folder       its steps), kind (int64, float, text, bytes, tensor
  //                   <dtype>, bytes list, feature list, none), section
  //                   (context or feature_list, in a SequenceExample), step
  //                   and value (the position in a feature list / bytes list)
  //   shard folder    shard, records, codec (none, gzip, zlib), error (what
  //                   the index walk found damaged, one problem a line)
  //   staged file     error (why the pack would leave its record staged:
  //   or record       a refused write's reason, else what checking the
  //   folder          file, or building the record, says now; listed only
  //                   for a refused write)
  //   anything else   none
  //
  // Cheap: a record folder's attributes come from the shard index, never
  // from its payload; `error` is listed only once the record's parse is known
  // (it failed), but getting it by name reads a record not yet read (one
  // record: the question asked is "is it damaged?"). A feature file's come
  // from its record's layout (cached; else the record is read again, as
  // GetAttr would). GetXattr of a name the node does not have: ENODATA.
  absl::StatusOr<std::vector<std::string>> ListXattr(uint64_t ino);
  absl::StatusOr<std::string> GetXattr(uint64_t ino, absl::string_view name);
  // setxattr / removexattr: EPERM outside the staging area (the attributes
  // describe the shards, which do not change), ENOTSUP inside it.
  absl::Status SetXattr(uint64_t ino, absl::string_view name);

  // ==== The mount as a whole ====

  Stats GetStats() const;
  const std::vector<MountedShard>& shards() const { return shard_set_.current(); }

  // ==== Committing edits (record_edits.h) ====

  // What the kernel keeps that a commit makes wrong; set by the FUSE layer
  // while it serves (src/fuse/session.cc), called from the committing
  // thread (never from a request: the kernel would deadlock).
  struct Invalidator {
    std::function<void(uint64_t ino)> inode;  // attributes, pages, listing
    std::function<void(uint64_t parent, const std::string& name)> entry;
  };
  // nullopt: stops invalidating (and joins the worker that does it).
  void SetInvalidator(std::optional<Invalidator> invalidator);
  // A write of `ino` was refused while the kernel wrote back a shared
  // writable mapping of it (FUSE's write-back): the refused bytes stay in
  // the kernel's page cache (only msync() sees the error), so its pages are
  // dropped, from the invalidation worker once the request is answered
  // (the kernel holds the pages until then), and later readers see the
  // file's own bytes again.
  void DropPagesLater(uint64_t ino);

  // Applies the pending edits, additions and deletions to their shards
  // (repack::ApplyEdits: crash-safe, each shard on its own). With `reopen`
  // (a commit while mounted: `tfrecordfs commit`), every other operation
  // waits meanwhile, and each rewritten shard is indexed again and shown at
  // once: its records numbered afresh under node ids of the next generation
  // (node_id.h: other ids than the old records', so that nothing the kernel
  // cached of an old file, its size or its pages, meets the new bytes),
  // the views' caches of it dropped, and the kernel's entries and
  // attributes of its folder invalidated. The old file's records stay
  // readable under their ids until the shard's next rewrite (ShardSet::Reopen). Without (at
  // unmount: nothing is served any more), the shards are only rewritten. FailedPrecondition on a
  // mount that takes no edits. Per-shard failures are in the results (their edits stay pending).
  // With `rebase` (`tfrecordfs commit --rebase`), the pending edits of an
  // object another writer replaced since the mount listed it are first
  // re-keyed onto the object the store holds now
  // (repack::RebaseObjectEdits; its report is the shard's note), then
  // committed to it.
  absl::StatusOr<std::vector<repack::RewrittenShard>> Commit(bool reopen, bool rebase = false);

 private:
  explicit Filesystem(const Options& options);

  // Create's steps, in this order (each on the Filesystem being made,
  // before any request).
  // What the mount's tree shows: every scanned entry, and which of them
  // are the shards (in shard_set_'s order).
  struct MountEntries {
    std::vector<scan::SourceEntry> entries;
    std::vector<size_t> shard_entries;
  };
  // Scans the sources (logging the shards refused, unreadable or damaged)
  // and opens every shard into shard_set_; an error when nothing can be
  // served or the sources hold more than kMaxShards shards.
  absl::StatusOr<MountEntries> OpenShards(const Options& options);
  // The records view and its retired twin, the deletions and edit overlay,
  // the staging view, the tree and the gallery, and what shard folders hold.
  void MakeViews(const Options& options, const MountEntries& entries);
  // view=classes: groups the records by Options::class_feature (an error
  // without one) and makes the class view.
  absl::Status MakeClassView(const Options& options);
  // The staging folder at the root of a records view; an error for a bad
  // or taken name.
  absl::Status GraftStaging(const Options& options);

  // The view serving node `ino` (by its space), or nullptr for a staging id
  // on a mount without staging.
  View* ViewOf(uint64_t ino) const;
  // The view for a change of `ino`: ViewOf, after checking a record out
  // into the edit store (record_edits.h); nullptr with `*status` why not.
  View* WriteViewOf(uint64_t ino, absl::Status* status) const;
  // `op` on the view that takes writes to `ino` (WriteViewOf), or its error.
  template <typename Op>
  auto OnWriteView(uint64_t ino, const Op& op) const -> decltype(op(static_cast<View*>(nullptr))) {
    absl::Status s;
    View* view = WriteViewOf(ino, &s);
    if (view == nullptr) return s;
    return op(view);
  }
  // Whether `ino` is a node of an edited record or of the edit store.
  bool EditSide(uint64_t ino) const;
  // The staging view whose handle `fh` is (nullptr: none).
  StagingView* HandleOwner(uint64_t fh) const;
  // The shard whose folder `ino` is, when the mount shows shard folders
  // (their children are the record view's, or the gallery's).
  std::optional<uint64_t> ShardFolder(uint64_t ino) const {
    return classes_ ? std::nullopt : tree_->ShardFolder(ino);
  }
  // The attributes of `ino` (see ListXattr).
  absl::StatusOr<XattrList> Xattrs(uint64_t ino, bool read_error);

  // What the kernel must forget after a commit (commit.cc): a folder of a
  // rewritten shard and the names it may have cached in it.
  struct StaleNames {
    uint64_t folder = 0;
    std::vector<std::string> names;
    // Records view: every record name of the folder, old and new (both
    // spellings: padded to the old and new widths, and bare digits), made
    // as they are invalidated rather than held.
    uint64_t records = 0;  // max(old count, new count); 0: none
    size_t old_width = 0, new_width = 0;
  };
  // Commit's two steps (commit.cc), under serve_mu_ held exclusively.
  // RewriteShards: the pending edits applied to their shards
  // (repack::ApplyEdits, after --rebase's re-keying), with the check-outs
  // that changed nothing dropped (their names added to `stale`).
  // ShowRewritten: each shard rewritten is reopened (ShardSet::Reopen),
  // the views' caches of it dropped, and what the kernel must forget of it
  // added to `stale` (a shard the mount cannot show any more: its result's
  // status says so).
  struct Rewrite {
    std::vector<repack::RewrittenShard> results;
    absl::flat_hash_map<std::string, uint64_t> by_path;  // shard id of each mounted path
    // The index each rewritten plain, GZIP or ZLIB shard was given
    // (index::FollowRewrite).
    absl::flat_hash_map<std::string, std::shared_ptr<const index::ShardIndex>> new_indexes;
  };
  Rewrite RewriteShards(bool rebase, std::vector<StaleNames>* stale)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(serve_mu_);
  void ShowRewritten(Rewrite* rewrite, std::vector<StaleNames>* stale)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(serve_mu_);
  // Invalidates `stale` through the invalidator, if one is set. Called
  // without the serve lock (the kernel's invalidations may wait for
  // requests) and without invalidator_mu_.
  void ForgetStale(const std::vector<StaleNames>& stale);

  // The shards of both generations and the caches and readahead they read
  // through (shard_set.h). Declared before the views, which read its
  // vectors: they are destroyed first.
  ShardSet shard_set_;
  // Read by records_: destroyed after it. Null without Options::deletions.
  std::unique_ptr<RecordDeletions> deletions_;
  std::unique_ptr<RecordView> records_;
  std::unique_ptr<RecordView> retired_view_;  // over shard_set_.retired()
  // The edit overlay (reads through records_: destroyed first). Null
  // without Options::edits.
  std::unique_ptr<RecordEdits> edits_;
  std::unique_ptr<TreeView> tree_;
  // The image views; null unless Options::view names them. The gallery
  // lists shard folders; the class view serves the root and its folders.
  std::unique_ptr<GalleryView> gallery_;
  std::unique_ptr<ClassView> classes_;
  // What every shard folder holds, chosen once at Create: the gallery, else
  // the edit overlay, else the records (one of the three above).
  ShardFolderView* shard_folders_ = nullptr;
  GroupStats group_stats_;
  GroupOptions group_options_;  // view=classes: how the grouping was made
  // The staging area; null without one (Options::staging).
  std::unique_ptr<StagingView> staging_;
  // The kernel's entry `name` in `parent`, invalidated from a worker thread
  // once the current request is answered (a record moved by rename: the
  // kernel keeps the old node id for the new name otherwise). An empty
  // `name`: node `parent` itself (its attributes and pages: DropPagesLater).
  void InvalidateLater(uint64_t parent, std::string name);
  void InvalidationLoop();
  // Every operation holds it shared; Commit(reopen) exclusively (it guards
  // shard_set_'s generations and the views' per-shard state).
  mutable SharedMutex serve_mu_;
  staging::DeletionList* edit_list_ = nullptr;  // Options::deletions
  staging::Store* edit_store_ = nullptr;        // Options::edits
  index::IndexStore* index_store_ = nullptr;    // Options::index_store
  Mutex invalidator_mu_;
  // Held while a copy of the invalidator is called (it uses the FUSE
  // session): SetInvalidator(nullopt) waits for it. After invalidator_mu_.
  Mutex invalidating_mu_;
  std::optional<Invalidator> invalidator_ ABSL_GUARDED_BY(invalidator_mu_);
  std::deque<std::pair<uint64_t, std::string>> pending_invalidations_
      ABSL_GUARDED_BY(invalidator_mu_);
  bool stop_invalidating_ ABSL_GUARDED_BY(invalidator_mu_) = false;
  CondVar invalidations_;
  std::thread invalidation_worker_;                // started by the first InvalidateLater
  naming::FeatureTypes* staging_types_ = nullptr;  // what staging_ checks against
};

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_FILESYSTEM_H_
