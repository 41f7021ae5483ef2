// Persistent shard indexes: a header walk is done once and kept on disk, so
// the next mount of the same shards only reads small index files.
//
// Where index files live:
//   - the per-user cache (read and written):
//       ${XDG_CACHE_HOME:-~/.cache}/tfrecordfs/index/<name>-<hash>.tfri
//     <name> is the shard's base name (cut to 64 bytes), <hash> 16 hex
//     digits of a 64-bit FNV-1a hash of the shard's real path;
//   - a shared index directory (-o index_dir=PATH; written by `tfrecordfs
//     index --index-dir PATH`, and by a mount only where a commit rewrote a
//     shard: Replaced), checked first. Its
//     layout mirrors the mount: the index of the shard the mount shows as
//     `train/x-00001-of-01024.tfrecord` is PATH/train/x-00001-of-01024.tfrecord.tfri.
//     Machines that see the dataset at different paths thus share one index
//     directory; the shard's path is not compared there, its base name is.
//   - beside the shard (`<shard>.tfri` in the shard's own directory; the
//     ratarmount convention), read by every mount unless -o nobeside, and
//     written by `tfrecordfs index --beside`: the second machine to mount a
//     dataset on shared storage never walks it. Checked after index_dir and
//     before the cache; compared like the shared directory (base name). A
//     mount does not show these files. For an object (s3://, gs://,
//     http(s)://), the object `<object>.tfri` beside it, read and written
//     through source::ObjectReader (ReadBeside: a GET, none when a bucket
//     listing saw no such object; WriteBeside: a PUT); its checkpoint
//     windows are then kept in memory.
//
// When a stored index is used (index_file.h has the format):
//   valid  codec, size, mtime (ns) and the fingerprint (plain shards: the
//          first and the last record's 12 header bytes; compressed shards:
//          the file's first and last 12 bytes, the GZIP trailer being a CRC
//          of the data; re-read from the shard) all match, and in the cache
//          also the real path;
//   grown  the shard is larger, its stored walk was clean and ended at the
//          stored size, and both fingerprint headers still match: only the
//          new tail is walked, from the old end. A tail with any damage is
//          walked again from the start, so the result always equals a full
//          walk;
//   else   the shard is walked in full.
// A rebuilt or extended index is written back (to the cache, or with
// write_shared to the shared directory). Stored indexes are never trusted
// beyond these checks: a torn, corrupt or other-version file is rebuilt.
//
// A cache that cannot be written (read-only home, full disk) is reported
// once with a warning and then left alone; loading goes on.
//
// Thread-safety: Load() may run on many threads at once; the counters are
// atomic.
#ifndef TFRECORDFS_INDEX_INDEX_STORE_H_
#define TFRECORDFS_INDEX_INDEX_STORE_H_

#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/index/index_file.h"
#include "tfrecordfs/index/shard_index.h"

namespace tfrecordfs::index {

struct StoreOptions {
  // The per-user cache, read and written; "" for none. IndexStore::Default
  // fills in DefaultCacheDir().
  std::string cache_dir;
  // The shared directory, checked before the cache; "" for none.
  std::string shared_dir;
  // Write new indexes into shared_dir (the `index --index-dir` command)
  // instead of the cache; the cache is then neither read nor written.
  bool write_shared = false;
  // Read `<shard>.tfri` beside each shard (see above).
  bool beside = true;
  // Write new indexes beside the shards (`index --beside`) instead of the
  // cache; the cache is then neither read nor written.
  bool write_beside = false;
  // Before using an index from shared_dir or beside a shard (files other
  // users may write), follow the shard's header chain in large sequential
  // reads and use the index only if it matches (-o index_verify). Costs a
  // read of every shard, but no per-record round trips. For a GZIP/ZLIB
  // shard, every checkpoint is also checked against the stream
  // (source::VerifyCheckpoints), as it is when writing to shared_dir or
  // beside the shards (`index` then rebuilds an index that fails); without
  // either, a mount checks them lazily, before a read resumes at one, in
  // files another user could have written (not the mounting user's or
  // root's, or writable by group or others; objects): the checkpoint table
  // of a file only they could have written is trusted, as the cache's is,
  // and its windows are read only while it is still that file.
  bool verify_shared = false;
  // Ignore stored indexes and walk every shard (they are still written).
  bool force_walk = false;
  // Called from the walking thread while Load() walks a shard: (its path,
  // the bytes of the stored file walked so far: compressed bytes for a
  // compressed shard), every few MiB (record::kWalkProgressStep) and at the
  // end. A progress bar's per-byte advance; unset: nothing is called.
  std::function<void(const std::string& path, uint64_t walked)> on_walk_progress = nullptr;
  // Make written index files durable (fsync of the file and its directory).
  // The trailing CRC already makes a torn file harmless, so the mount's cache
  // may skip this; the shared directory should not.
  bool durable = true;
  // Compressed bytes between checkpoints of a GZIP/ZLIB shard (-o gz_span).
  // A stored index made with another span is still used.
  uint64_t span = source::kDefaultSpan;
  // How plain shards are walked (-o walk=; WalkShard).
  WalkMode walk_mode = WalkMode::kAuto;
  // The most records a shard may have (-o max_shard_records,
  // --max-shard-records): a walk stops there, and a stored index of more is
  // not used; Load() then fails with record::TooManyRecords.
  uint64_t max_records = record::kDefaultMaxRecords;
};

// ${XDG_CACHE_HOME:-$HOME/.cache}/tfrecordfs/index, or "" when neither
// variable is set.
std::string DefaultCacheDir();

// Where an index came from.
enum class IndexSource { kSharedDir, kCache, kGrown, kWalked, kBeside };
absl::string_view IndexSourceName(IndexSource source);

struct LoadInfo {
  IndexSource source = IndexSource::kWalked;
  std::string stored_path;   // the index file used or written ("" if none)
  std::string why_walked;    // for kGrown / kWalked: why no stored index served
  absl::Status save_status;  // the write-back (OK when nothing was written)
  uint64_t index_bytes = 0;  // size of the index file written (0 when loaded)
};

// Totals over every Load() so far.
struct StoreStats {
  uint64_t from_shared = 0;  // index_dir, or beside the shard
  uint64_t from_beside = 0;  // of which beside the shard
  uint64_t from_cache = 0;
  uint64_t grown = 0;
  uint64_t walked = 0;
  uint64_t records = 0;
  uint64_t bytes = 0;  // shard bytes covered
  uint64_t save_failures = 0;
};

class IndexStore {
 public:
  explicit IndexStore(StoreOptions options);

  // The index of the open shard `fd` (stat `st`), from a stored index when
  // one is valid, else by walking (all of it, or only the tail of a grown
  // shard) and writing the result back. `path` is how the shard was reached
  // (its real path keys the cache); `mount_path` is where the mount shows it
  // (it keys the shared directory). Errors are the walk's I/O errors and
  // record::TooManyRecords (options().max_records); a bad stored index or a
  // failed write-back is not an error (see `info`).
  // `codec` is how the shard is stored (index::ProbeFile): an index made
  // for another codec is not used. For a compressed shard, the index keeps
  // the checkpoint windows in the index file when it was saved (else in
  // memory) and loads one only when a read resumes at it.
  absl::StatusOr<std::shared_ptr<const ShardIndex>> Load(
      source::StoredBytes fd, const std::string& path, const std::string& mount_path,
      const struct stat& st, source::Codec codec = source::Codec::kNone, LoadInfo* info = nullptr);

  // Deletes the cached index of the shard at `path` (a read found it wrong;
  // index_dir and beside-the-shard files are left alone: they are not ours
  // to change). Thread-safe.
  void Drop(const std::string& path);

  // After the shard at `path` was replaced by a file this process wrote and
  // checked (a commit of record edits, repack/rewrite.h), whose records
  // start at `offsets` (the end of the last one last): the stored indexes of
  // the old file follow it. For a plain shard, the new file's index is made
  // from `offsets` (no walk); for a GZIP/ZLIB shard, from `walked` (what the
  // check after write's inflate of the new file found, as WalkShard makes
  // it; taken: moved from). That index is saved to the cache as Load would
  // save it, and written over the shard's `.tfri` beside it and its
  // index_dir entry (`mount_path`; "" when not known) where those exist
  // (they described the old file); the index is returned. Otherwise (a
  // compressed shard without `walked`, or no `offsets`), the cached index
  // is dropped, the other two are removed, and nullptr is returned (Load
  // walks the new file). A file it cannot write or remove is logged and
  // left (Load finds it stale by size and mtime). Thread-safe.
  std::shared_ptr<const ShardIndex> Replaced(const std::string& path, const std::string& mount_path,
                                             source::Codec codec,
                                             const std::vector<uint64_t>* offsets,
                                             WalkedShard* walked = nullptr);

  // The index file names for a shard.
  std::string CachePath(const std::string& real_path) const;
  std::string SharedPath(const std::string& mount_path) const;
  // `<shard path>.tfri`.
  static std::string BesidePath(const std::string& shard_path);

  const StoreOptions& options() const { return options_; }
  StoreStats stats() const;
  // One line, e.g. "1024 shard(s) indexed: 1024 from the cache (DIR)".
  std::string Summary() const;

 private:
  // Writes `file` to `target`, or with a PUT beside `beside_object` when
  // given (`index --beside` of an object).
  absl::Status Save(const std::string& target, const IndexFile& file,
                    const source::ObjectReader* beside_object = nullptr);

  const StoreOptions options_;
  std::atomic<uint64_t> from_shared_{0}, from_beside_{0}, from_cache_{0}, grown_{0}, walked_{0};
  std::atomic<uint64_t> records_{0}, bytes_{0}, save_failures_{0};
  std::atomic<bool> cache_unwritable_{false};
  std::once_flag made_cache_dir_;
  absl::Status cache_dir_status_;  // set once under made_cache_dir_
};

// Everything of ours that indexes the shard at `path` follows its rewrite
// by a commit of record edits (repack/rewrite.h FollowRewrite): with
// `store`, IndexStore::Replaced (`mount_path` keys its index_dir entry; ""
// when not known), and the DALI index recorded for it (dali_index.h
// FollowDaliIndex). Without `offsets` (recovery), a plain shard is walked
// first when anything needs its offsets; `checked`: a GZIP/ZLIB shard's walk
// made by the check after write (IndexStore::Replaced's `walked`). Returns Replaced's
// index (nullptr: none made). Failures are logged.
std::shared_ptr<const ShardIndex> FollowRewrite(IndexStore* store, const std::string& path,
                                                const std::string& mount_path,
                                                const std::vector<uint64_t>* offsets,
                                                WalkedShard* checked = nullptr);

// Extends `old`, the clean walk of the first old.file_size bytes of a shard,
// over the shard's bytes up to `file_size`. Returns NotFound when the new tail
// is damaged (the caller walks the whole shard), record::TooManyRecords when
// old and new records together are more than `max_records`, and I/O errors.
absl::StatusOr<record::WalkResult> WalkGrownTail(source::StoredBytes fd, absl::string_view path,
                                                 const IndexFile& old, uint64_t file_size,
                                                 uint64_t max_records = record::kDefaultMaxRecords);

}  // namespace tfrecordfs::index

#endif  // TFRECORDFS_INDEX_INDEX_STORE_H_
