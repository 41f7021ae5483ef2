// Helpers shared by repair.cc and reshard.cc (not part of the interface).
#ifndef TFRECORDFS_SRC_RESHAPE_INTERNAL_H_
#define TFRECORDFS_SRC_RESHAPE_INTERNAL_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/reshape/reshape.h"

namespace tfrecordfs::reshape {

inline bool Cancelled(const Control& control) {
  return control.cancel != nullptr && control.cancel->load(std::memory_order_relaxed);
}

// Calls `hook` (Control::mid_output) once, when half of an output file's `planned`
// records (at least one) have been appended.
class Midpoint {
 public:
  Midpoint(std::function<void()> hook, uint64_t planned)
      : hook_(std::move(hook)), at_(planned / 2 == 0 ? 1 : planned / 2) {}
  void Appended() {
    if (++appended_ == at_ && hook_) hook_();
  }

 private:
  std::function<void()> hook_;
  uint64_t at_, appended_ = 0;
};

// The reason part of a ReadRecord error for the record at `offset` (the
// message without its "<path>: record i at byte offset N: " prefix).
std::string DamageReason(const absl::Status& status, uint64_t offset);

// The walk problems of `idx` that lie outside the records in
// `damaged_records` (sorted record indices whose reads failed): damage
// between or after records.
std::vector<Dropped> DamageBetweenRecords(const index::ShardIndex& idx,
                                          const std::vector<uint64_t>& damaged_records);

}  // namespace tfrecordfs::reshape

#endif  // TFRECORDFS_SRC_RESHAPE_INTERNAL_H_
