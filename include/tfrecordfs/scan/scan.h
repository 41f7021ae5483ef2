// Finding the shards in a set of sources, the way a mount finds them, without
// building a mount.
//
// A SOURCE is a shard file or a directory, or objects named by a URL
// (s3://BUCKET/PREFIX, gs://BUCKET/PREFIX, http(s)://HOST/PATH, with
// `name@N` for N TFDS-named shards: objstore/listing.h), listed once. A bucket
// prefix is a directory whose folders are the key's '/'-separated parts;
// an object that is not a shard is an OtherFile as a local file is (a
// mount serves its bytes with ranged reads); an object that cannot be
// probed or indexed (its requests fail) is left out and reported in
// ScanResult::unreadable, so that the others are still served. A directory is searched
// recursively; its entries appear at the root of the namespace a mount would
// show, and a file source appears there under its base name. Entries are
// visited in name order (bytewise); symlinks are followed, a directory met a
// second time (a symlink loop) is not entered again; fifos, sockets and
// devices are skipped; `X.tfri` beside a sibling `X` is X's index (index
// /index_store.h, "beside the shard") and skipped, as the mount hides it.
// Every regular file is probed by content
// (index::ProbeFile: plain, GZIP or ZLIB TFRecord framing); the shards are
// indexed through an IndexStore (so cached and shared indexes are used and
// new ones written back) or, without one, by a walk.
//
// `mount_path` is the path a mount of the same sources shows a shard at
// ("train/x-00001-of-00010.tfrecord"); it keys the shared index directory
// and names DALI index files. vfs::Filesystem builds its tree from Scan()'s
// entries, so a mount and the toolbox cannot disagree.
//
// Thread-safety: Scan() runs probes and walks on its own threads and calls
// the `on_shard` and `on_other` hooks from them (concurrently: they must be
// thread-safe); the results are plain values.
#ifndef TFRECORDFS_SCAN_SCAN_H_
#define TFRECORDFS_SCAN_SCAN_H_

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tfrecordfs/index/index_store.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/objstore/access.h"
#include "tfrecordfs/source/inflate.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::scan {

// SourceEntry::parent of an entry shown at the mount root.
inline constexpr size_t kAtRoot = SIZE_MAX;

// A directory or regular file a mount mirrors, as the listing found it. A
// directory source itself has no entry (its entries are at the root).
struct SourceEntry {
  std::string path;         // as reached from the SOURCE (not resolved)
  std::string mount_path;   // where a mount shows it
  struct stat st = {};      // stat(2) of `path` when listed (symlinks followed)
  size_t parent = kAtRoot;  // the entry of its directory in ScanResult::entries
  // An object (`path` is its URL): st has its size, its mtime (Last-Modified)
  // and, as ctime, a fingerprint of its ETag (the index cache's check).
  std::shared_ptr<const source::ObjectReader> object;
};

struct ScannedShard {
  std::string path;        // as reached from the SOURCE (not resolved)
  std::string mount_path;  // where a mount shows it
  source::Codec codec = source::Codec::kNone;
  struct stat st = {};            // when probed
  source::FileIdentity identity;  // of st and the open file (source::InodesPersist)
  std::shared_ptr<const index::ShardIndex> index;
  index::LoadInfo info;  // where the index came from (kWalked without a store)
  size_t entry = 0;      // its SourceEntry in ScanResult::entries (Scan() only)
  std::shared_ptr<const source::ObjectReader> object;  // an object's (path is its URL)
};

// A regular file that is not a shard.
struct OtherFile {
  std::string path;
  std::string mount_path;
  // Set when the file is GZIP/ZLIB but holds no TFRecord framing.
  source::Codec codec = source::Codec::kNone;
  // Its name looks like a shard's (NamedLikeAShard).
  bool shard_like_name = false;
  size_t entry = 0;  // its SourceEntry in ScanResult::entries
};

// A shard found but not indexed: it holds more records than the index store
// allows (record::TooManyRecords, index::StoreOptions::max_records), or it
// is an ArrayRecord file with transposed chunks (arrayrecord::IsRefusedFile). A mount
// shows it as the plain file it is; the toolbox skips it and exits 1.
struct RefusedShard {
  std::string path;
  std::string mount_path;
  absl::Status why;  // names the path, the limit, the byte offset, the option
  size_t entry = 0;  // its SourceEntry in ScanResult::entries
};

// True for the names shard writers give, which are worth a warning when the
// file is not a shard: *.tfrecord, *.tfrecords, *.record, *.records,
// *.tfrec, *.tfr, sharded names ("train-00001-of-00010", three or more
// digits each), and any of those with .gz or .zlib after it. Stricter than
// index::LooksLikeShardName (which also takes names containing "tfrecord",
// such as tfrecordfs.1.scd, to tell an empty shard from an empty file).
bool NamedLikeAShard(absl::string_view name);

// Why `file` deserves a warning ("<path>: named like a TFRecord shard, but
// ..."), or "" when it is an ordinary file. Callers append what they do
// with it ("; skipped").
std::string NotAShardNote(const OtherFile& file);

struct ScanOptions {
  std::vector<std::string> sources;
  // Loads indexes; null: every shard is walked and nothing is saved.
  index::IndexStore* store = nullptr;
  // Probing and indexing threads; 0: one per CPU (at most 16), or
  // index::kRemoteWalkThreads when a source is on remote storage
  // (source::OnRemoteStorage), where a walk waits on round trips, not CPU.
  int threads = 0;
  // Called once, after the sources are listed and before any file is
  // probed, with the number of regular files to probe and the threads that
  // will (e.g. to reserve descriptors before the threads exist).
  std::function<void(size_t files, int threads)> before_probe;
  // Called once, after the sources are listed and before before_probe,
  // with the regular files found (in listing order); a file it returns
  // false for is neither probed nor indexed nor reported: it is in no list
  // of the result (its entry stays in `entries`). `--part K/N` keeps its
  // own files this way (reshape/plan.h), so that a part indexes no other
  // part's shards. Null: every file.
  std::function<std::vector<bool>(const std::vector<const SourceEntry*>& files)> select;
  // Called once per shard as soon as it is indexed, from a scan thread.
  std::function<void(const ScannedShard&)> on_shard;
  // Called once per regular file that is not a shard as soon as it is
  // probed, from a scan thread.
  std::function<void(const OtherFile&)> on_other;
  // Keeps the bytes fetched from objects (a mount passes the cache of its
  // one byte budget); null: Scan makes one of kObjectCacheBytes.
  std::shared_ptr<source::BlockCache> object_cache;
  // How s3:// and gs:// SOURCEs are reached beyond what the environment
  // says (objstore/access.h); unset: objstore::DefaultObjectOptions() (the mount's).
  std::optional<objstore::ObjectOptions> objects;
};

inline constexpr size_t kObjectCacheBytes = size_t{64} << 20;

struct ScanResult {
  // Every directory and regular file, in listing order: source by source,
  // depth first, by name within a directory; a directory before its entries.
  std::vector<SourceEntry> entries;
  std::vector<ScannedShard> shards;  // in listing order
  std::vector<OtherFile> others;
  std::vector<RefusedShard> refused;  // in listing order
  // Objects that could not be probed or indexed (`why` names the URL and
  // the request that failed), left out of `entries` (their `entry` is
  // kAtRoot); in listing order. A local file that cannot be read fails
  // the scan instead.
  std::vector<RefusedShard> unreadable;
};

// Scans `options.sources`. Errors: a SOURCE that does not exist or is
// neither a file nor a directory, a directory that cannot be listed, two
// sources giving the same name at one place of the mount (AlreadyExists),
// and I/O errors while probing or walking. Damaged shards are not errors:
// their index holds the walk's problems; nor are shards with too many
// records (ScanResult::refused).
absl::StatusOr<ScanResult> Scan(const ScanOptions& options);

// The one place a scanned shard becomes a ShardSource, for the mount and
// the toolbox alike: a PlainSource, or an InflateSource over its index's
// checkpoints using `cache` (which must outlive the source). An object's
// shard reads the object (`fds` is not used).
//   * `fds` null (the toolbox): the file is opened now; FailedPrecondition
//     when it changed (size or mtime) since it was indexed.
//   * `fds` given (a mount of any number of shards): the file is opened on
//     demand through that bounded cache (which must outlive the source) and
//     checked against its identity at every (re)open; reads of a changed
//     file fail with DataLoss.
absl::StatusOr<std::unique_ptr<source::ShardSource>> OpenShard(const ScannedShard& shard,
                                                               source::BlockCache* cache,
                                                               source::FdCache* fds = nullptr);

// One shard given by its path or URL (the `show` command): probes it and indexes
// it through `store` (or a walk when null); a URL is reached as `objects`
// say. InvalidArgument when it is not a TFRecord shard.
absl::StatusOr<ScannedShard> ScanOne(const std::string& path, index::IndexStore* store,
                                     std::optional<objstore::ObjectOptions> objects = std::nullopt);

}  // namespace tfrecordfs::scan

#endif  // TFRECORDFS_SCAN_SCAN_H_
