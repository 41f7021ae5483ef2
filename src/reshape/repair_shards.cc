#include "tfrecordfs/reshape/repair_shards.h"

#include <set>
#include <utility>

#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/source/block_cache.h"

namespace tfrecordfs::reshape {

RepairTotals TotalsOf(const std::vector<RepairedShard>& repaired) {
  RepairTotals t;
  for (const RepairedShard& d : repaired) {
    t.records += d.status.ok() ? d.result.records_in : d.shard->index->num_records();
    t.written += d.result.records_kept;
    for (const Dropped& x : d.result.dropped) (x.record == kNoRecord ? t.spans : t.dropped) += 1;
    t.unreadable += !d.status.ok();
  }
  return t;
}

absl::StatusOr<std::vector<RepairedShard>> RepairShards(
    const std::vector<scan::ScannedShard>& shards, const std::string& write_dir,
    const Control& control, const std::function<void()>& shard_done) {
  auto cancelled = [&] { return control.cancel != nullptr && control.cancel->load(); };
  std::vector<RepairedShard> done;
  source::BlockCache cache(32 << 20);
  // Each copy is fsynced and renamed on the syncer's thread while the next
  // is written; the directories are fsynced once each at the end (one
  // journal commit for all their renames). Destroyed on return: an
  // interrupted run's copies not yet renamed are removed.
  ShardSyncer syncer(/*commit=*/true, /*depth=*/1, /*sync_dirs=*/false);
  for (const scan::ScannedShard& s : shards) {
    RepairedShard d{&s, absl::OkStatus(), {}};
    const std::string out = JoinPath(write_dir, s.mount_path);
    auto src = scan::OpenShard(s, &cache);
    if (!src.ok()) {
      d.status = src.status();
    } else if (auto made = MakeDirs(Dirname(out), 0755); !made.ok()) {
      d.status = made;
    } else {
      auto result = RepairShard(*s.index, **src, out, control, &syncer);
      if (result.ok()) {
        d.result = std::move(*result);
      } else {
        d.status = result.status();
      }
    }
    if (absl::IsCancelled(d.status) || cancelled()) {
      return absl::CancelledError(d.status.ok() ? "stopped" : d.status.message());
    }
    if (shard_done) shard_done();
    done.push_back(std::move(d));
  }
  // A copy whose fsync or rename failed was not repaired (and was removed).
  for (ShardSyncer::Synced& synced : syncer.Wait()) {
    if (synced.status.ok()) continue;
    for (RepairedShard& d : done) {
      if (d.status.ok() && d.result.output == synced.final_path) {
        d.status = synced.status;
        d.result = {};
      }
    }
  }
  if (cancelled()) return absl::CancelledError("stopped");
  std::set<std::string> dirs;
  for (const RepairedShard& d : done) {
    if (d.status.ok()) dirs.insert(Dirname(d.result.output));
  }
  for (const std::string& dir : dirs) {
    const absl::Status s = FsyncDir(dir);
    if (s.ok()) continue;
    for (RepairedShard& d : done) {
      if (d.status.ok() && Dirname(d.result.output) == dir) d.status = s;
    }
  }
  return done;
}

}  // namespace tfrecordfs::reshape
