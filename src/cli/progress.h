// A progress bar on stderr for the commands that walk or read shards, and
// the human number formats they share.
#ifndef TFRECORDFS_CLI_PROGRESS_H_
#define TFRECORDFS_CLI_PROGRESS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "tfrecordfs/base/mutex.h"

namespace tfrecordfs::cli {

// "1.2 GB" (powers of 1000).
std::string HumanBytes(double b);
// "312.0k", "1.05M".
std::string HumanCount(double n);

// Bytes of the regular files under the sources (an estimate of the work:
// files that are not shards count too).
uint64_t TotalBytes(const std::vector<std::string>& sources);

// True when the progress bar should be drawn: stderr is a terminal.
bool StderrIsTerminal();

// Draws "[####......] 312 shards  312.0k records  1.2 GB/4.0 GB  1.05M rec/s
// ETA 0:03" on stderr, ten times a second, while the work runs. Add() is
// thread-safe; when disabled it only counts.
class ProgressBar {
 public:
  ProgressBar(uint64_t total_bytes, bool enabled);
  ~ProgressBar() { Finish(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void Add(uint64_t shards, uint64_t records, uint64_t bytes) {
    shards_.fetch_add(shards, std::memory_order_relaxed);
    records_.fetch_add(records, std::memory_order_relaxed);
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }
  // Stops drawing and clears the line (for the summary after it).
  void Finish();

 private:
  void Loop();
  void Draw();

  const uint64_t total_bytes_;
  std::chrono::steady_clock::time_point start_;
  std::atomic<uint64_t> shards_{0}, records_{0}, bytes_{0};
  Mutex mu_;
  CondVar cv_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// The bytes of shards being walked, for a ProgressBar: a walk reports its
// position every few MiB (index::StoreOptions::on_walk_progress), and the
// bar gets what is new; when the shard is done (from the index cache or
// walked), the bar gets the shard, its records and the rest of its size.
// Thread-safe (walks run on many threads). Detach() before the bar goes:
// later calls then do nothing (the index store that calls it may outlive
// the bar).
class WalkMeter {
 public:
  explicit WalkMeter(ProgressBar* bar) : bar_(bar) {}
  void Walked(const std::string& path, uint64_t walked);
  void Done(const std::string& path, uint64_t records, uint64_t size);
  void Detach();

 private:
  Mutex mu_;
  ProgressBar* bar_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, uint64_t> walked_ ABSL_GUARDED_BY(mu_);  // path -> reported
};

}  // namespace tfrecordfs::cli

#endif  // TFRECORDFS_CLI_PROGRESS_H_
