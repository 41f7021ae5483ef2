// The work of `tfrecordfs repair` over scanned shards: RepairShard for each
// (reshape.h), the copies fsynced and renamed on a syncer thread while the
// next one is written.
//
// Thread-safety: reentrant; the threads it starts end before it returns.
#ifndef TFRECORDFS_RESHAPE_REPAIR_SHARDS_H_
#define TFRECORDFS_RESHAPE_REPAIR_SHARDS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tfrecordfs/reshape/reshape.h"
#include "tfrecordfs/scan/scan.h"

namespace tfrecordfs::reshape {

struct RepairedShard {
  const scan::ScannedShard* shard = nullptr;  // of the shards given
  absl::Status status;  // not OK: not repaired (unreadable, not written); no copy is left
  RepairResult result;  // when OK
};

// Counted as verify counts: damaged records (dropped: records = written +
// dropped for the shards copied) and damaged spans between or after
// records (bytes in no record, not copied), apart.
struct RepairTotals {
  uint64_t records = 0, written = 0, dropped = 0, spans = 0, unreadable = 0;
};
RepairTotals TotalsOf(const std::vector<RepairedShard>& repaired);

// Copies each shard to `write_dir`/<its mount path> (creating folders),
// without its damaged records; one shard that fails does not stop the
// others. Each copy is fsynced before it is renamed to its final name,
// and every folder holding a copy is fsynced once before this returns (a
// copy whose folder's fsync failed is reported with that error).
// `shard_done` is called after each shard. Errors: Cancelled
// (control.cancel, or a shard's copy cancelled), its message what stopped
// it; the copies not yet complete are then removed.
absl::StatusOr<std::vector<RepairedShard>> RepairShards(
    const std::vector<scan::ScannedShard>& shards, const std::string& write_dir,
    const Control& control, const std::function<void()>& shard_done = nullptr);

}  // namespace tfrecordfs::reshape

#endif  // TFRECORDFS_RESHAPE_REPAIR_SHARDS_H_
