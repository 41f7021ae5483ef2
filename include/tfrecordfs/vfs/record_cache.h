// A bounded LRU of parsed records (their layouts), keyed by shard and record,
// bounded both in records and in bytes (ParsedRecord::MemoryBytes), so that
// records with many features cannot blow the budget. The most recent record
// is always kept, whatever its size.
//
// Thread-safety (locks are tfrecordfs::Mutex, base/mutex.h: what
// ABSL_GUARDED_BY says is checked by scripts/thread-safety): all methods
// are thread-safe; mu_ is a leaf lock. Values are immutable and shared, so a
// record evicted while a reader still holds it stays valid for that reader.
#ifndef TFRECORDFS_VFS_RECORD_CACHE_H_
#define TFRECORDFS_VFS_RECORD_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/naming/naming.h"

namespace tfrecordfs::vfs {

// A record as the read path sees it: its layout, or why it cannot be shown.
struct ParsedRecord {
  absl::Status status;       // DataLoss for a damaged record
  naming::Layout layout;     // valid when status.ok()
  uint64_t data_offset = 0;  // shard offset of the record's first data byte
  size_t MemoryBytes() const;
};

class RecordCache {
 public:
  explicit RecordCache(size_t max_records, size_t max_bytes = SIZE_MAX)
      : max_records_(max_records == 0 ? 1 : max_records), max_bytes_(max_bytes) {}

  std::shared_ptr<const ParsedRecord> Get(uint64_t key);
  void Put(uint64_t key, std::shared_ptr<const ParsedRecord> value);
  size_t size() const;
  size_t bytes() const;  // sum of MemoryBytes() of the cached records

 private:
  struct Slot {
    std::shared_ptr<const ParsedRecord> value;
    std::list<uint64_t>::iterator lru;
    size_t bytes = 0;
  };
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const size_t max_records_;
  const size_t max_bytes_;
  mutable Mutex mu_;
  absl::flat_hash_map<uint64_t, Slot> map_ ABSL_GUARDED_BY(mu_);
  std::list<uint64_t> lru_ ABSL_GUARDED_BY(mu_);  // front = most recent
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_RECORD_CACHE_H_
