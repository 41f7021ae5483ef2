// Helpers shared by repair.cc and reshard.cc (not part of the interface).
#ifndef TFRECORDFS_SRC_RESHAPE_INTERNAL_H_
#define TFRECORDFS_SRC_RESHAPE_INTERNAL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/reshape/reshape.h"

namespace tfrecordfs::reshape {

inline bool Cancelled(const Control& control) {
  return control.cancel != nullptr && control.cancel->load(std::memory_order_relaxed);
}

// The output shards of a reshard into `o.output_dir`: their paths
// (repack::ShardName, 0 .. num_shards - 1), after removing what a run
// killed midway left there (its temporary files: `*stale_removed`).
// AlreadyExists, nothing written, when one of those this call writes,
// [first, last), is there already (never replaced).
absl::StatusOr<std::vector<std::string>> PrepareOutputNames(
    const ReshardOptions& o, uint64_t num_shards, uint64_t first, uint64_t last,
    std::vector<std::string>* stale_removed);

// Gives every file of `pending` (complete, fsync'd) its final name, then
// fsyncs `dir` once for all the renames; on a failure the ones already
// renamed are removed again, so that none or all of them stand.
absl::Status CommitAll(const std::vector<std::unique_ptr<PendingShard>>& pending,
                       const std::string& dir);

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

// Copies checked runs of plain shards' records into one output file on its
// own thread, so that the next run is read and checked while this one is
// written: file ranges (copy_file_range: PendingShard::AppendFramedRange,
// reshard) or the bytes the caller read and checked
// (PendingShard::AppendFramedBytes, repair: the input is read once, where
// a copy_file_range would read it again). At most kQueued runs wait. The
// caller must not touch `out` between the first Push and Finish (or the
// copier's destruction); destroy the copier before `out` and before closing
// the descriptors pushed.
class RunCopier {
 public:
  explicit RunCopier(PendingShard* out);
  // Waits for the run being copied; what is queued is not copied.
  ~RunCopier();
  RunCopier(const RunCopier&) = delete;
  RunCopier& operator=(const RunCopier&) = delete;

  // Queues `length` bytes of `fd` at `offset` (`records` whole records);
  // waits while the queue is full. The copier's first error, after which
  // nothing more is copied.
  absl::Status Push(int fd, uint64_t offset, uint64_t length, uint64_t records);
  // Queues buffer[0, length), `records` whole framed records the caller
  // read and checked, to be written as they are; waits while the queue is
  // full. The copier's first error, after which nothing more is written.
  absl::Status PushBytes(std::string buffer, uint64_t length, uint64_t records);
  // A buffer to fill for PushBytes: one already written, its size and
  // bytes as they were, when there is one (at most kQueued + 1 are kept),
  // else an empty one; runs reuse their memory instead of faulting in and
  // zero-filling new pages.
  std::string Recycled();
  // Waits until every queued run is copied; the first error.
  absl::Status Finish();

 private:
  struct Run {
    int fd;  // -1: the bytes are buffer[0, length)
    uint64_t offset, length, records;
    std::string buffer;
  };
  static constexpr size_t kQueued = 2;
  // PendingShard::StartWriteback every this many bytes written.
  static constexpr uint64_t kWritebackEvery = uint64_t{8} << 20;
  void Loop();

  PendingShard* const out_;
  Mutex mu_;
  CondVar changed_;
  std::deque<Run> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> written_ ABSL_GUARDED_BY(mu_);  // PushBytes' buffers, for Recycled
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the rest is built
};

// Every record is read and checked with record::ReadRecordInto into one
// buffer the caller keeps for all its records (repair's, reshard's arena):
// nothing allocated, filled or moved per record. (Allocating and freeing a
// batch of records at a time made glibc return the heap to the kernel after
// every batch and fault it back in for the next: 53,000 page faults and 5x
// the time of `repair` for an in-order reshard of 200 MB. ReadRecord's
// zero-filled string and its erase of the header cost repair two more
// passes over every byte. Repair of the benchmark's 2 GB with them and
// without the ShardSyncer: 1.7-3.9 s in rounds where `cat` + fsync took
// 1.6-3.4 s; without them and with the syncer, 1.0-2.0 s; the syncer alone
// had brought repair from 0.67x to 0.81x of cat's throughput.)

// The reason part of a ReadRecord error for the record at `offset` (the
// message without its "<path>: record i at byte offset N: " prefix).
std::string DamageReason(const absl::Status& status, uint64_t offset);

// The damage of `idx` outside the records in `damaged_records` (sorted
// record indices whose reads failed) as `verify` reports it
// (inspect::DamageOutsideRecords: a resync point right after a damaged
// record is that record's, not damage of its own), and the shard's tail
// after its last record (inspect::CheckTail: a truncated last record, stray
// bytes). Errors: I/O errors reading the tail.
absl::StatusOr<std::vector<Dropped>> DamageOutsideRecords(
    const index::ShardIndex& idx, const source::ShardSource& src,
    const std::vector<uint64_t>& damaged_records);

}  // namespace tfrecordfs::reshape

#endif  // TFRECORDFS_SRC_RESHAPE_INTERNAL_H_
