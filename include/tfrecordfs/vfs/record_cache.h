// A bounded LRU of parsed records (their layouts), keyed by shard and record,
// bounded both in records and in bytes (ParsedRecord::MemoryBytes), so that
// records with many features cannot blow the budget. The most recent record
// is always kept, whatever its size.
//
// Thread-safety (locks are tfrecordfs::Mutex, base/mutex.h: what
// ABSL_GUARDED_BY says is checked by scripts/thread-safety): all methods
// are thread-safe; mu_ is a leaf lock. Values are immutable and shared, so a
// record evicted while a reader still holds it stays valid for that reader;
// evicted and replaced values are released after mu_ is.
#ifndef TFRECORDFS_VFS_RECORD_CACHE_H_
#define TFRECORDFS_VFS_RECORD_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "tfrecordfs/base/lru.h"
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
  // At most `max_records` (0 counts as 1) records and `max_bytes` bytes.
  explicit RecordCache(size_t max_records, size_t max_bytes = SIZE_MAX)
      : lru_({.max_count = max_records == 0 ? 1 : max_records, .max_bytes = max_bytes}) {}

  std::shared_ptr<const ParsedRecord> Get(uint64_t key);
  void Put(uint64_t key, std::shared_ptr<const ParsedRecord> value);
  // Drops every record (a shard was rewritten under the mount).
  void Clear();
  size_t size() const;
  size_t bytes() const;  // sum of MemoryBytes() of the cached records

 private:
  mutable Mutex mu_;
  LruMap<uint64_t, std::shared_ptr<const ParsedRecord>> lru_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_RECORD_CACHE_H_
