// Which records have been read and found intact (data CRC, decode) once: one
// bit per record, per shard. Shards do not change under the mount, so a
// record checked once need not be read again to open one of its files, and
// FeatureTypeSampler passes over it (its types were learnt when it was read).
//
// Thread-safety: lock-free; bits are only ever set (relaxed atomic words: a
// reader may see a bit late, and then reads the record once more).
#ifndef TFRECORDFS_VFS_CHECKED_RECORDS_H_
#define TFRECORDFS_VFS_CHECKED_RECORDS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace tfrecordfs::vfs {

class CheckedRecords {
 public:
  // Adds a shard of `records` records (all unchecked); shard ids count from 0.
  void AddShard(uint64_t records) {
    records_.push_back(records);
    bits_.push_back(std::make_unique<std::atomic<uint64_t>[]>(Words(records)));  // zeroed
  }

  // Shard `shard` now has `records` records, all unchecked (its file was
  // rewritten). Not concurrent with the other methods.
  void ResetShard(uint64_t shard, uint64_t records) {
    records_[shard] = records;
    bits_[shard] = std::make_unique<std::atomic<uint64_t>[]>(Words(records));
  }

  // False for a record out of range.
  bool Checked(uint64_t shard, uint64_t record) const {
    if (shard >= bits_.size() || record >= records_[shard]) return false;
    return (bits_[shard][record / 64].load(std::memory_order_relaxed) >> (record % 64)) & 1;
  }
  // `record` must be in range.
  void MarkChecked(uint64_t shard, uint64_t record) {
    bits_[shard][record / 64].fetch_or(uint64_t{1} << (record % 64), std::memory_order_relaxed);
  }

  // The bytes the bits take (for statfs and the benchmarks).
  uint64_t MemoryBytes() const {
    uint64_t n = 0;
    for (uint64_t r : records_) n += Words(r) * sizeof(uint64_t);
    return n;
  }

 private:
  static size_t Words(uint64_t records) { return static_cast<size_t>((records + 63) / 64); }

  std::vector<uint64_t> records_;                               // by shard
  std::vector<std::unique_ptr<std::atomic<uint64_t>[]>> bits_;  // by shard
};

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_CHECKED_RECORDS_H_
