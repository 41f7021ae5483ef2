// Work spread over threads: ParallelFor (independent items, any order) and
// OrderedPipeline (items worked on in parallel, handed back in the order
// they were submitted). The project's thread pools are these two, so that
// a pool's hand-offs (and their locking) are written and tested once.
//
// Threads are started per call (ParallelFor) or per pipeline and joined
// before it returns or is destroyed: nothing outlives its caller, no
// process-wide pool. Both are meant for work of milliseconds or more per
// item (a deflate block, a shard, a chunk of records); per-item cost is a
// lock hand-over.
//
// Thread-safety: ParallelFor is called from any thread; `fn` runs
// concurrently on up to `threads` threads, once per index. An
// OrderedPipeline belongs to the thread that made it (its owner): Next,
// Submit, Front, Pop and the destructor are called from that thread only;
// `work` runs on the pipeline's workers, concurrently on different items,
// and never on the same item twice. Items are handed between the owner and
// a worker under the pipeline's mutex: what the owner wrote into an item
// before Submit is seen by its worker, what the worker wrote is seen by
// the owner after Front.
#ifndef TFRECORDFS_BASE_PARALLEL_H_
#define TFRECORDFS_BASE_PARALLEL_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "tfrecordfs/base/mutex.h"

namespace tfrecordfs {

// The machine's hardware threads (at least 1): what a `threads` of 0 means
// wherever an option says "0: the machine's cores".
inline int DefaultThreads() {
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// Calls fn(i) once for each i in [0, n) on min(threads, n) threads: the
// caller's and threads - 1 started ones (threads <= 1: on the caller's, in
// order). Indices are claimed one at a time in increasing order, so a long
// item does not hold back the others. Returns after every call returned.
// `fn` must be safe to call concurrently for different indices; results go
// into per-index slots or atomics.
inline void ParallelFor(size_t n, int threads, absl::FunctionRef<void(size_t)> fn) {
  const size_t t = std::min<size_t>(static_cast<size_t>(std::max(threads, 1)), n);
  if (t <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  auto run = [&] {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
  };
  std::vector<std::thread> pool;
  pool.reserve(t - 1);
  for (size_t k = 1; k < t; ++k) pool.emplace_back(run);
  run();
  for (std::thread& th : pool) th.join();
}

// A window of `window` items: the owner fills one (Next), submits it, a
// worker runs `work` on it, and the owner takes the items back in
// submission order (Front, Pop). Items are reused: Next returns a slot as
// the item that last used it left it (buffers keep their capacity), so
// `work` and the owner must reset what they reuse.
//
//   OrderedPipeline<Block> pipe(threads, 2 * threads, [](Block& b) { b.Compress(); });
//   for (each block) {
//     if (pipe.full()) { Write(pipe.Front()); pipe.Pop(); }
//     Fill(&pipe.Next());
//     pipe.Submit();
//   }
//   while (pipe.pending() > 0) { Write(pipe.Front()); pipe.Pop(); }
//
// threads <= 0: no workers; `work` runs on the owner's thread inside
// Submit (the same results, in the same order, without threads).
template <class Item>
class OrderedPipeline {
 public:
  OrderedPipeline(int threads, size_t window, std::function<void(Item&)> work)
      : work_(std::move(work)), slots_(std::max<size_t>(window, 1)), done_(slots_.size(), 0) {
    for (int t = 0; t < threads; ++t) workers_.emplace_back([this] { Run(); });
  }
  // Waits for the items the workers hold, then joins them; items submitted
  // and not taken are dropped (worked on or not).
  ~OrderedPipeline() {
    {
      MutexLock lock(&mu_);
      stop_ = true;
      changed_.SignalAll();
    }
    for (std::thread& t : workers_) t.join();
  }
  OrderedPipeline(const OrderedPipeline&) = delete;
  OrderedPipeline& operator=(const OrderedPipeline&) = delete;

  size_t window() const { return slots_.size(); }
  // Items submitted and not popped.
  size_t pending() const { return submitted_ - popped_; }
  bool full() const { return pending() == slots_.size(); }

  // The slot the next Submit hands over. Requires !full().
  Item& Next() { return slots_[submitted_ % slots_.size()]; }
  // Hands Next() to a worker (or works on it here, without workers).
  void Submit() {
    const size_t slot = submitted_ % slots_.size();
    ++submitted_;
    if (workers_.empty()) {
      work_(slots_[slot]);
      MutexLock lock(&mu_);
      done_[slot] = 1;
      return;
    }
    MutexLock lock(&mu_);
    queued_ = submitted_;
    changed_.SignalAll();
  }
  // The oldest item not popped, once `work` returned on it. Requires
  // pending() > 0.
  Item& Front() {
    const size_t slot = popped_ % slots_.size();
    MutexLock lock(&mu_);
    while (!done_[slot]) changed_.Wait(&mu_);
    return slots_[slot];
  }
  // Frees Front()'s slot for a later Next(). Requires pending() > 0.
  void Pop() {
    const size_t slot = popped_ % slots_.size();
    MutexLock lock(&mu_);
    while (!done_[slot]) changed_.Wait(&mu_);  // its worker is done with it
    done_[slot] = 0;
    ++popped_;
  }

 private:
  void Run() {
    for (;;) {
      size_t index;
      {
        MutexLock lock(&mu_);
        while (!stop_ && claimed_ == queued_) changed_.Wait(&mu_);
        if (stop_) return;
        index = claimed_++;
      }
      const size_t slot = index % slots_.size();
      work_(slots_[slot]);
      MutexLock lock(&mu_);
      done_[slot] = 1;
      changed_.SignalAll();
    }
  }

  const std::function<void(Item&)> work_;
  // Handed between the owner and one worker at a time (the header).
  std::vector<Item> slots_;
  Mutex mu_;
  CondVar changed_;
  // Per slot: `work` returned on its item (without workers: the owner's).
  std::vector<uint8_t> done_ ABSL_GUARDED_BY(mu_);
  size_t queued_ ABSL_GUARDED_BY(mu_) = 0;   // items workers may claim: [0, queued_)
  size_t claimed_ ABSL_GUARDED_BY(mu_) = 0;  // items claimed by a worker
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // The owner's.
  size_t submitted_ = 0;
  size_t popped_ = 0;
  std::vector<std::thread> workers_;
};

}  // namespace tfrecordfs

#endif  // TFRECORDFS_BASE_PARALLEL_H_
