// The record namespace: a shard folder lists its records ("000", "001", ...),
// a record folder the files of its features (naming::Layout), in the record
// space of the node ids (node_id.h: shard, record, entry of the layout).
//
// What it owns: the parsed-record cache (RecordCache), the checked-record
// bits (a record found intact once is not read again to open one of its
// files), the notes of damaged records (for the `error` attribute), and the
// feature-type sampler the staging checks ask (FeatureTypeSampler, fed by
// every record parsed here).
//
// The shard folders themselves are the tree's (tree_view.h); their children
// are this view's: Filesystem asks it as their ShardFolderView (view.h).
//
// Deletions (record_deletions.h, a read-write mount): a deleted record is
// gone from its shard folder and its ids are stale; Unlink and Rmdir inside a
// record folder hide what they remove, RmdirRecord deletes the record.
//
// Errors: NotFound for names and stale ids; DataLoss (EIO) for a damaged
// record, naming the shard path, record index and byte offset (logged once
// per record); EROFS for other writes (View's defaults) and for deletions
// without a deletion list; ENOTDIR / EISDIR / ENOTEMPTY.
//
// Thread-safety: all methods may be called concurrently. Lock order:
// big_record_mu_ (held while one huge record is parsed) before damage_mu_
// and the sampler's locks (FeatureTypeSampler::Learn); the record cache's lock and
// damage_mu_ are leaves. The checked bits are atomic words.
#ifndef TFRECORDFS_VFS_RECORD_VIEW_H_
#define TFRECORDFS_VFS_RECORD_VIEW_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/vfs/attr.h"
#include "tfrecordfs/vfs/checked_records.h"
#include "tfrecordfs/vfs/feature_type_sampler.h"
#include "tfrecordfs/vfs/mounted_shard.h"
#include "tfrecordfs/vfs/record_cache.h"
#include "tfrecordfs/vfs/record_deletions.h"
#include "tfrecordfs/vfs/view.h"

namespace tfrecordfs::vfs {

struct RecordViewOptions {
  // The parsed-record cache: at most this many records and bytes (layouts).
  size_t cache_records = 65536;
  size_t cache_bytes = size_t{16} << 20;
  // What the feature-type sampler may read (FeatureTypeSampler).
  SampleBudget kind_sample_per_call = {4096, uint64_t{32} << 20};
  SampleBudget kind_sample_total = {65536, uint64_t{256} << 20};
  // Called (from any thread) with a shard's path when a record read finds
  // the shard's index wrong; unset: only logged.
  std::function<void(const std::string& path)> on_index_mismatch;
  // Deleted records and hidden files (record_deletions.h); not owned, must
  // outlive the view. Null: nothing is deleted and every delete is EROFS.
  RecordDeletions* deletions = nullptr;
  // The records take changes (a read-write records-view mount: the edit
  // overlay, record_edits.h, checks a record out at its first change):
  // record folders show 0755 and their files 0644, so that editors (vim's
  // 'readonly' for a file without write bits), file managers and the
  // kernel's own checks (default_permissions) let the mount's owner write.
  // false: 0555 and 0444.
  bool writable = false;
};

class RecordView final : public View, public ShardFolderView {
 public:
  // `shards` is borrowed: it must outlive the view and not change.
  RecordView(const std::vector<MountedShard>& shards, RecordViewOptions options);
  ~RecordView() override;
  RecordView(const RecordView&) = delete;
  RecordView& operator=(const RecordView&) = delete;

  // ---- The children of shard folder `shard` ----
  // A record folder by name ("007" or "7"; other spellings are NotFound).
  absl::StatusOr<Attr> LookupRecord(uint64_t shard, absl::string_view name) const;
  // Lists the shard folder (`self`: its attributes, for "." and "..").
  void ReadShardDir(uint64_t shard, const Attr& self, uint64_t offset, const EmitFn& emit) const;
  // ShardFolderView: LookupRecord, ReadShardDir.
  absl::StatusOr<Attr> LookupInShard(uint64_t shard, absl::string_view name) override {
    return LookupRecord(shard, name);
  }
  absl::Status ListShard(uint64_t shard, const Attr& self, uint64_t offset,
                         const EmitFn& emit) override {
    ReadShardDir(shard, self, offset, emit);
    return absl::OkStatus();
  }
  // rmdir of a record folder: deletes the record (RecordDeletions) when it
  // has no files (ENOTEMPTY otherwise) or is damaged. Changes inside a
  // record folder are the edit overlay's (record_edits.h); this view
  // answers them EROFS.
  absl::Status RmdirInShard(uint64_t shard, absl::string_view name) override;
  // Forgets what it knew of shard `shard`'s records (the parsed-record
  // cache, checked bits, damage notes): its file was rewritten and
  // shards_[shard] now describes the new one. Not concurrent with anything
  // else (Filesystem::Commit).
  void ResetShard(uint64_t shard);
  // Whether the record was deleted through the mount (not yet committed).
  bool IsDeleted(uint64_t shard, uint64_t record) const {
    return deletions_ != nullptr && deletions_->IsDeleted(shard, record);
  }
  // A record's folder name: its index, zero-padded to the shard's width.
  std::string RecordName(uint64_t shard, uint64_t record) const;

  // ---- View: record-space nodes ----
  absl::StatusOr<Attr> GetAttr(uint64_t ino) override;
  absl::StatusOr<Attr> Lookup(uint64_t parent, absl::string_view name) override;
  absl::Status ReadDir(uint64_t ino, uint64_t fh, uint64_t offset, const EmitFn& emit) override;
  // Checks the record (EIO when damaged) unless it was found intact before.
  absl::StatusOr<uint64_t> Open(uint64_t ino, int flags) override;
  absl::StatusOr<ReadResult> Read(uint64_t ino, uint64_t fh, uint64_t offset, size_t size) override;
  // Record folder: shard, record, offset, length, compressed_offset, error;
  // feature file or folder: feature, kind, section, step, value.
  absl::Status Xattrs(uint64_t ino, bool read_error, XattrList* out) override;

  // ---- For the image views (gallery_view.h, class_view.h), whose files
  // are this view's files under other names (same node ids) ----
  // The parsed layout of a record, through the record cache (read, checked
  // and laid out on a miss). DataLoss when the record is damaged.
  absl::StatusOr<std::shared_ptr<const ParsedRecord>> Parse(uint64_t shard, uint64_t record);
  // The attributes of entry `entry` of `rec`, record `record` of `shard`
  // (mode: RecordViewOptions::writable).
  Attr EntryAttr(uint64_t shard, uint64_t record, uint32_t entry, const ParsedRecord& rec) const;

  FeatureTypeSampler& sampler() { return *sampler_; }
  const FeatureTypeSampler& sampler() const { return *sampler_; }
  uint64_t records_read() const { return records_read_.load(std::memory_order_relaxed); }
  size_t checked_bytes() const { return checked_.MemoryBytes(); }

 private:
  // A record-space node id taken apart.
  struct Node {
    uint64_t shard = 0;
    uint64_t record = 0;
    uint32_t entry = 0;  // an entry of the record's layout (0: its folder)
  };
  // NotFound("stale node id") unless `ino` names a record of a shard (its
  // entry is checked by ParseEntry, which needs the record's layout).
  absl::StatusOr<Node> Resolve(uint64_t ino) const;

  // Parse() of a record not in the cache: reads, checks and lays it out,
  // notes damage and kinds, and caches the result.
  std::shared_ptr<const ParsedRecord> ReadAndParse(uint64_t shard, uint64_t record);
  // Parse() of node's record, NotFound("stale node id") when the record has
  // no entry node.entry.
  absl::StatusOr<std::shared_ptr<const ParsedRecord>> ParseEntry(const Node& node);
  // Resolve, then ParseEntry: the node of `ino`, its record's layout, and
  // its entry in that layout.
  struct ParsedNode {
    Node node;
    std::shared_ptr<const ParsedRecord> rec;
    const naming::Entry& entry() const { return rec->layout.entries[node.entry]; }
  };
  absl::StatusOr<ParsedNode> ResolveParsed(uint64_t ino);
  // Why a record failed to parse, if it did (kept beyond the record cache).
  std::optional<std::string> DamageOf(uint64_t shard, uint64_t record) const;
  // Notes why a record is damaged; true unless it was noted already.
  bool NoteDamage(uint64_t shard, uint64_t record, absl::string_view reason);
  Attr RecordDirAttr(uint64_t shard, uint64_t record) const;
  // A record read found the index wrong: log loudly, drop the stored index.
  void IndexDisagrees(uint64_t shard, uint64_t record);
  // Reads bytes [offset, offset + n) of the record file `e` (its pieces:
  // inline bytes, spans of the record's payload at `data_offset`, PNG).
  absl::StatusOr<ReadResult> ReadPieces(uint64_t shard, uint64_t data_offset,
                                        const naming::Entry& e, uint64_t offset, size_t n) const;

  const std::vector<MountedShard>& shards_;
  std::function<void(const std::string&)> on_index_mismatch_;
  RecordDeletions* const deletions_;
  const mode_t dir_mode_;   // RecordViewOptions::writable: S_IFDIR | 0755, else 0555
  const mode_t file_mode_;  // S_IFREG | 0644, else 0444
  RecordCache cache_;
  CheckedRecords checked_;
  // After checked_, which it marks: destroyed first.
  std::unique_ptr<FeatureTypeSampler> sampler_;
  std::atomic<uint64_t> records_read_{0};
  // Records above kBigRecord bytes are parsed one at a time (memory).
  static constexpr uint64_t kBigRecord = uint64_t{64} << 20;
  // Before damage_mu_ and the sampler's kinds lock (see the top).
  Mutex big_record_mu_;
  // Reasons of the records found damaged (leaf lock): a record's failed
  // parse may leave the cache. Bounded (beyond that, records are read again).
  mutable Mutex damage_mu_;
  absl::flat_hash_map<uint64_t, std::string> damage_ ABSL_GUARDED_BY(damage_mu_);
};

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_RECORD_VIEW_H_
