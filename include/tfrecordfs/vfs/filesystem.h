// The namespace the mount shows: sources mirrored at the root, one directory
// per shard, one directory per record, files per feature (naming/naming.h).
// Operations return absl::Status / StatusOr; src/fuse turns them into
// replies. Nothing here includes FUSE headers.
//
// Three kinds of node, told apart by the node id's space (node_id.h), and
// where each lives:
//   the mirrored tree    sources, directories, plain files, shard folders:
//                        filesystem.cc (the factory, and the dispatch of
//                        every call by space)
//   the record namespace records of a shard, files of a record's features:
//                        record_view.cc (private members below)
//   the staging area     a passthrough to staging::Store: StagingView
//                        (staging_view.h), which Filesystem owns
// Feature kinds for the staging checks come from KindSampler
// (kind_sampler.h), fed by every record parsed here.
//
// Errors (see fuse/errno.h for the errno each maps to):
//   NotFound            no such name
//   DataLoss (EIO)      a record whose CRC or framing is damaged; the message
//                       names the shard path, record index and byte offset
//   PosixError(EROFS)   writes outside the staging area
//
// Thread-safety (locks are tfrecordfs::Mutex, base/mutex.h: what
// ABSL_GUARDED_BY says is checked by scripts/thread-safety): all methods
// may be called concurrently. The tree and shard indexes are immutable after
// Create(). Lock order: big_record_mu_ (held while one huge record is parsed)
// before damage_mu_ and the kind sampler's (KindSampler::Learn); the
// parsed-record cache's lock, damage_mu_ and the plain files' descriptor
// table are leaves (nothing is acquired while holding them). The sampler
// orders its own two locks (kind_sampler.h) and takes none of these. The
// checked-record bits are atomic words; staging calls go to StagingView and
// staging::Store, which are thread-safe (a staging directory handle's lock is
// a leaf).
#ifndef TFRECORDFS_VFS_FILESYSTEM_H_
#define TFRECORDFS_VFS_FILESYSTEM_H_

#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/index/index_store.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/source/inflate.h"
#include "tfrecordfs/source/readahead.h"
#include "tfrecordfs/source/shard_source.h"
#include "tfrecordfs/staging/store.h"
#include "tfrecordfs/vfs/attr.h"
#include "tfrecordfs/vfs/checked_records.h"
#include "tfrecordfs/vfs/kind_sampler.h"
#include "tfrecordfs/vfs/node_id.h"
#include "tfrecordfs/vfs/record_cache.h"
#include "tfrecordfs/vfs/staging_view.h"

namespace tfrecordfs::vfs {

inline constexpr int kRemoteIndexThreads = index::kRemoteWalkThreads;
// Blocks read ahead at once for sequential readers on network storage.
inline constexpr int kReadaheadThreads = 8;

struct Options {
  // Shard files or directories (mirrored recursively at the mount root).
  std::vector<std::string> sources;
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
  // The kinds the staging checks hold staged files to. Unset: the mounted
  // shards' (HintOf). Set: these instead (tests of the checks).
  staging::KindHint staging_hints;
  // What KindOf may read, beyond the records parsed for the tree, to find the
  // kind of a feature name it has not seen: at most `kind_sample_per_call`
  // per name looked for and `kind_sample_total` over the life of the mount.
  // Defaults: 4096 records / 32 MiB per name and 65536 records / 256 MiB in
  // all (about 0.2% of a 140 GB, 1.28M-record dataset of ~110 KB records).
  // A per-call record budget of 0 turns sampling off.
  SampleBudget kind_sample_per_call = {4096, uint64_t{32} << 20};
  SampleBudget kind_sample_total = {65536, uint64_t{256} << 20};
  // Where shard indexes are loaded from and new ones saved to (cached,
  // shared or beside the shard: index/index_store.h); not owned, used only
  // by Create(). Null: every shard is walked with index::BuildShardIndex and
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
  uint64_t records_sampled = 0;  // records read by KindOf to learn feature kinds
  uint64_t bytes_sampled = 0;    // their bytes, framing included
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

  // ==== Any node: the mirrored tree, the record namespace (record_view.cc)
  // and the staging area (StagingView), told apart by the node id's space
  // (node_id.h) ====

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

  // ==== Staging: forwarded to StagingView (staging_view.h, which documents
  // handles and checks) for staging nodes; elsewhere EROFS, or EXDEV across
  // the staging boundary (links: EPERM, in src/fuse) ====

  // Creates and opens a file (FUSE's CREATE; not the factory above).
  absl::StatusOr<std::pair<Attr, uint64_t>> CreateFile(uint64_t parent, absl::string_view name,
                                                       mode_t mode, int flags);
  absl::StatusOr<Attr> Mkdir(uint64_t parent, absl::string_view name, mode_t mode);
  // `fh` 0: a staging file the kernel opened itself (fuse::OpsOptions::
  // skip_open), written through a descriptor opened for this call. A write
  // the staged file's checks refuse fails with EINVAL before any byte lands
  // (staging::Store::ValidateOnWrite).
  absl::StatusOr<size_t> Write(uint64_t ino, uint64_t fh, absl::string_view data, uint64_t offset);
  // close() with an OPEN handle (-o open): validates a written feature file
  // (EINVAL if it does not parse or convert; the bytes stay). OK elsewhere.
  absl::Status Flush(uint64_t ino, uint64_t fh);
  // The last close of a handle: a written file not yet checked by Flush is
  // checked now (staging::Store::ValidateOnClose; a refusal is only logged,
  // the pack refuses the record later) and its kind remembered.
  void Release(uint64_t fh);
  // Closes a handle without any check (an OPEN answered ENOSYS).
  void Discard(uint64_t fh);
  // fsync(2) of a staging file handle; a no-op for read-only files.
  // With fh 0 (skip_open), a staging file is synced through a descriptor of
  // its own.
  absl::Status Fsync(uint64_t ino, uint64_t fh, bool datasync);
  // `bits` are staging::SetAttrBits; `fh` may be 0.
  absl::StatusOr<Attr> SetAttr(uint64_t ino, uint64_t fh, const struct stat& to, int bits);
  absl::Status Unlink(uint64_t parent, absl::string_view name);
  absl::Status Rmdir(uint64_t parent, absl::string_view name);
  absl::Status Rename(uint64_t parent, absl::string_view name, uint64_t new_parent,
                      absl::string_view new_name, unsigned flags);
  // Drops n kernel references to a node (only staging nodes hold any).
  void Forget(uint64_t ino, uint64_t n);
  // Free space where staged bytes go (for statfs), or false without staging.
  bool StagingSpace(uint64_t* free_bytes, uint64_t* total_bytes) const;

  // ==== Sampling: feature kinds for the staging area's checks (KindSampler) ====

  // The kind a feature name has in the mounted shards (kNone if unknown):
  // learnt from every record parsed for the tree, else by sampling more
  // records within Options::kind_sample_per_call and kind_sample_total (see
  // KindSampler for the order, the bounds and the costs). Thread-safe.
  example::Kind KindOf(absl::string_view feature_name) { return HintOf(feature_name).kind; }
  // KindOf with what the staging reverse direction needs besides the kind:
  // for bytes features, the tensor type of their values
  // (staging::FeatureHint, staging::HintOf). A sequence list answers under
  // `feature_lists/<name>`. Same sampling and costs as KindOf.
  staging::FeatureHint HintOf(absl::string_view feature_name);
  // The kinds the staging checks use (Options::staging_hints, else HintOf),
  // for the checks and the pack that run outside the mount (at unmount).
  // Valid while the Filesystem lives; nullptr without a staging area.
  const staging::KindHint& StagingHints() const { return staging_hints_; }

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
  const std::vector<std::shared_ptr<const index::ShardIndex>>& shards() const { return shards_; }

 private:
  class Tree;  // the mirrored source tree (filesystem.cc)

  // A node id taken apart and checked (Resolve).
  struct Node {
    Space space = Space::kTree;
    uint64_t tree = 0;    // kTree: the index of the node in the tree
    uint64_t shard = 0;   // kRecord: a shard of shards_,
    uint64_t record = 0;  // one of its records,
    uint32_t entry = 0;   // an entry of the record's layout (0: its folder)
  };
  using XattrList = std::vector<std::pair<std::string, std::string>>;

  static constexpr mode_t kDirMode = S_IFDIR | 0555;
  static constexpr mode_t kFileMode = S_IFREG | 0444;
  static constexpr absl::string_view kXattrPrefix = "user.tfrecordfs.";

  explicit Filesystem(const Options& options);

  // `ino` taken apart; NotFound("stale node id") unless it is a node of the
  // tree, a record of a shard (its entry is checked by ParseEntry, which
  // needs the record's layout), or a staging id while there is a staging
  // area (the store checks the rest).
  absl::StatusOr<Node> Resolve(uint64_t ino) const;
  // The attributes of `ino` (see ListXattr); `read_error` lets a record
  // folder's `error` read the record when its state is not known yet.
  absl::StatusOr<XattrList> Xattrs(uint64_t ino, bool read_error);

  // ---- The record namespace (record_view.cc): shard folders list their
  // records, record folders the files of their features. `Node`s are
  // Resolve()d record-space nodes. ----
  // Records of a shard the mount shows (at most kMaxRecordsPerShard).
  uint64_t RecordsShown(uint64_t shard) const;
  // A record folder of shard folder `shard` by name ("007" or "7").
  absl::StatusOr<Attr> LookupRecord(uint64_t shard, absl::string_view name) const;
  // Emits the record folders of `shard` from the `first` on (offsets as ReadDir).
  void ListRecords(uint64_t shard, uint64_t first, const EmitFn& emit) const;
  absl::StatusOr<Attr> RecordGetAttr(const Node& node);
  absl::StatusOr<Attr> RecordLookup(const Node& parent, absl::string_view name);
  absl::Status RecordReadDir(const Node& dir, uint64_t first, const EmitFn& emit);
  absl::StatusOr<ReadResult> RecordRead(const Node& node, uint64_t offset, size_t size);
  void ShardXattrs(uint64_t shard, XattrList* out) const;
  absl::Status RecordXattrs(const Node& node, bool read_error, XattrList* out);
  static void AddXattr(XattrList* out, absl::string_view key, std::string value);
  // The parsed layout of a record, through the cache. DataLoss when damaged.
  absl::StatusOr<std::shared_ptr<const ParsedRecord>> Parse(uint64_t shard, uint64_t record);
  // Parse() of a record not in the cache: reads, checks and lays it out,
  // notes damage and kinds, and caches the result.
  std::shared_ptr<const ParsedRecord> ReadAndParse(uint64_t shard, uint64_t record);
  // Parse() of node's record, NotFound("stale node id") when the record has
  // no entry node.entry.
  absl::StatusOr<std::shared_ptr<const ParsedRecord>> ParseEntry(const Node& node);
  // Why a record failed to parse, if it did (kept beyond the record cache).
  std::optional<std::string> DamageOf(uint64_t shard, uint64_t record) const;
  // Notes why a record is damaged; true unless it was noted already (then
  // the caller need not log it again).
  bool NoteDamage(uint64_t shard, uint64_t record, absl::string_view reason);
  Attr RecordDirAttr(uint64_t shard, uint64_t record) const;
  Attr EntryAttr(uint64_t shard, uint64_t record, uint32_t entry, const ParsedRecord& rec) const;
  // A record's folder name: its index, zero-padded to the shard's width.
  std::string RecordName(uint64_t shard, uint64_t record) const;
  // A record read found the index wrong: log loudly, drop the stored index.
  void IndexDisagrees(uint64_t shard, uint64_t record);
  // Reads bytes [offset, offset + n) of the record file `e` (its pieces:
  // inline bytes, spans of the record's payload at `data_offset`, PNG).
  absl::StatusOr<ReadResult> ReadPieces(uint64_t shard, uint64_t data_offset,
                                        const naming::Entry& e, uint64_t offset, size_t n) const;

  std::unique_ptr<Tree> tree_;
  std::vector<std::shared_ptr<const index::ShardIndex>> shards_;
  source::FdCache fd_cache_;          // before sources_: they point to them
  source::BlockCache inflate_cache_;
  std::vector<std::unique_ptr<source::ShardSource>> sources_;  // by shard
  // After sources_: destroyed first, it joins the threads whose fetches
  // read through them. Null unless reading ahead.
  std::unique_ptr<source::Readahead> readahead_;
  std::vector<int> shard_name_width_;   // digits of the largest record index
  std::vector<struct timespec> shard_mtime_;  // of the shard file: its folders'
  std::unique_ptr<RecordCache> cache_;
  // Records above kBigRecord bytes are parsed one at a time (memory).
  static constexpr uint64_t kBigRecord = uint64_t{64} << 20;
  // Before damage_mu_ and the sampler's kinds lock (see the top).
  Mutex big_record_mu_;
  std::function<void(const std::string&)> on_index_mismatch_;
  CheckedRecords checked_;
  // After shards_, sources_ and checked_, which it reads: destroyed first.
  std::unique_ptr<KindSampler> sampler_;
  std::atomic<uint64_t> records_read_{0};
  // The staging area; null without one (Options::staging).
  std::unique_ptr<StagingView> staging_;
  staging::KindHint staging_hints_;  // what staging_ checks against
  uint64_t staging_tree_node_ = 0;
  // Reasons of the records found damaged (leaf lock), for the `error`
  // attribute: a record's failed parse may leave the cache. Bounded by
  // kMaxDamageNotes (beyond that, records are simply read again).
  mutable Mutex damage_mu_;
  absl::flat_hash_map<uint64_t, std::string> damage_ ABSL_GUARDED_BY(damage_mu_);
};

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_FILESYSTEM_H_
