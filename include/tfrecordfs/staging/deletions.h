// The records deleted from mounted shards and not yet committed: one small
// file in the staging store, `<store>/deleted-records`, so that a deletion
// survives a daemon crash and a remount exactly like a staged record. It is
// also the list of shards with pending edits (staging/edits.h): a shard
// entry without `delete` lines is a shard some of whose records are edited
// or added, whose folders are in the edit store.
//
// A record is named by its shard's path (an object's URL, s3://BUCKET/KEY,
// for a bucket mount: ObjectFingerprint) and its index in the shard as the
// mount indexed it. The shard's fingerprint (size, mtime in ns, inode) is kept
// with it: a shard that changed since (replaced behind the mount, or already
// rewritten) no longer matches, and its deletions are then neither shown nor
// applied, because its record indexes may mean other records now.
//
// The rewrite at unmount (repack/rewrite.h) uses the same file as its
// journal: before the rewritten shard is renamed over the old one, the new
// file's fingerprint is stored as `rewriting`; after the rename the shard's
// entry is dropped. A crash in between is resolved by the fingerprint the
// shard has then (repack::RecoverRewrites).
//
// File format (text; the path is absl::CEscape'd):
//
//   tfrecordfs-deletions 1
//   shard <size> <mtime_ns> <inode> <path>      per shard with deletions,
//   rewriting <size> <mtime_ns> <inode>         optional: rewrite in flight
//   records <count>                             optional, after rewriting: the
//                                               rewritten file's record count
//   delete <record index>                       one line per deleted record
//   ...
//   crc32c <8 lowercase hex digits>             of every byte before this line
//
// Every write replaces the file with WriteFileAtomically (temp, fsync,
// rename, fsync of the directory).
//
// Thread-safety: DeletionList is thread-safe (one internal mutex, a leaf).
#ifndef TFRECORDFS_STAGING_DELETIONS_H_
#define TFRECORDFS_STAGING_DELETIONS_H_

#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/mutex.h"

namespace tfrecordfs::staging {

inline constexpr absl::string_view kDeletionsMagic = "tfrecordfs-deletions";
inline constexpr int kDeletionsVersion = 1;

// `<store_dir>/deleted-records`.
std::string DeletionsPath(absl::string_view store_dir);

struct Fingerprint {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t inode = 0;
  bool operator==(const Fingerprint&) const = default;
};
Fingerprint FingerprintOf(const struct stat& st);
// An object's (a shard in a bucket, named by its URL): its size and, as
// the inode, a hash of its ETag (mtime 0: the ETag names the version).
Fingerprint ObjectFingerprint(uint64_t size, absl::string_view etag);

struct DeletedShard {
  Fingerprint before;                         // the shard the indexes refer to
  std::optional<Fingerprint> rewriting;       // the rewritten file, while in flight
  std::optional<uint64_t> rewritten_records;  // its record count (with rewriting)
  std::set<uint64_t> records;                 // deleted record indexes
};
// Shard path -> its deletions, in path order.
using Deletions = std::map<std::string, DeletedShard>;

std::string EncodeDeletions(const Deletions& deletions);
// DataLossError naming `path` and the line for a torn, damaged or foreign
// file; FailedPreconditionError for a newer version.
absl::StatusOr<Deletions> ParseDeletions(absl::string_view contents, absl::string_view path);

class DeletionList {
 public:
  // Loads `path` (missing: empty). `read_only`: the methods that write fail.
  static absl::StatusOr<std::unique_ptr<DeletionList>> Load(std::string path,
                                                            bool read_only = false);

  const std::string& path() const { return path_; }
  // Adds record `record` of shard `shard` (fingerprint `fp`) and persists the
  // list. FailedPrecondition when the shard has deletions under another
  // fingerprint (it changed in between).
  absl::Status Delete(const std::string& shard, const Fingerprint& fp, uint64_t record);
  // Makes sure `shard` has an entry (fingerprint `fp`), with or without
  // deletions, and persists it: done before the first edit of one of its
  // records is written to the edit store (edits.h), so that every edit
  // folder there belongs to a shard of the list. FailedPrecondition as for
  // Delete.
  absl::Status Register(const std::string& shard, const Fingerprint& fp);
  // Marks the rewrite of `shard` in flight (its new file's fingerprint and
  // record count) or not (nullopt), and persists.
  absl::Status SetRewriting(const std::string& shard, std::optional<Fingerprint> fp,
                            std::optional<uint64_t> records = std::nullopt);
  // Drops every deletion of `shard` (committed, or abandoned) and persists.
  absl::Status Forget(const std::string& shard);
  // Replaces the entry of `shard` with `next` (a rebase onto a new object:
  // repack/bucket_rewrite.h) and persists.
  absl::Status Replace(const std::string& shard, const DeletedShard& next);

  Deletions Snapshot() const;
  bool Contains(const std::string& shard, uint64_t record) const;

 private:
  DeletionList(std::string path, bool read_only, Deletions d)
      : path_(std::move(path)), read_only_(read_only), d_(std::move(d)) {}
  // Writes `next` and, once durable, makes it the list.
  absl::Status Save(Deletions next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const bool read_only_;
  mutable Mutex mu_;
  Deletions d_ ABSL_GUARDED_BY(mu_);
};

// What a record of an object was when it was first edited or deleted: the
// length and the masked CRC-32C of its data, as its framing holds them.
// Kept in `<store>/record-keys` beside the list (RecordKeysPath), one line
// per record ("<length> <crc> <index> <escaped shard path>", appended and
// fdatasync'd; the last line of a record wins; a torn line is skipped), so
// that `tfrecordfs commit --rebase` finds the record again in an object
// another writer replaced (bucket_rewrite.h RebaseObjectEdits).
struct ContentKey {
  uint64_t length = 0;
  uint32_t crc = 0;
  bool operator==(const ContentKey&) const = default;
};
// `record-keys` in the folder of the list at `list_path`.
std::string RecordKeysPath(absl::string_view list_path);
absl::Status AppendContentKey(const std::string& path, const std::string& shard, uint64_t record,
                              ContentKey key);
// The keys of `shard`'s records by index (empty when none or no file).
std::map<uint64_t, ContentKey> LoadContentKeys(const std::string& path, const std::string& shard);
// Rewrites the file without `shard`'s lines (then `keys`, when given).
absl::Status ReplaceContentKeys(const std::string& path, const std::string& shard,
                                const std::map<uint64_t, ContentKey>& keys = {});

}  // namespace tfrecordfs::staging

#endif  // TFRECORDFS_STAGING_DELETIONS_H_
