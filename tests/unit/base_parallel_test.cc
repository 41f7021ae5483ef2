// base/parallel.h: ParallelFor and OrderedPipeline, at every thread count
// from none to more threads than items.
#include <atomic>
#include <cstdint>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/base/parallel.h"

namespace tfrecordfs {
namespace {

TEST(ParallelFor, CallsEachIndexOnce) {
  for (int threads : {0, 1, 2, 3, 4, 16}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{5}, size_t{1000}}) {
      std::vector<std::atomic<int>> calls(n);
      for (auto& c : calls) c.store(0);
      ParallelFor(n, threads, [&](size_t i) { calls[i].fetch_add(1); });
      for (size_t i = 0; i < n; ++i) {
        EXPECT_EQ(calls[i].load(), 1) << "index " << i << " of " << n << ", " << threads;
      }
    }
  }
}

TEST(ParallelFor, UsesTheThreadsItIsGiven) {
  // Two items that each wait for the other: they finish only when run at
  // the same time, on two threads.
  std::atomic<int> arrived{0};
  ParallelFor(2, 2, [&](size_t) {
    arrived.fetch_add(1);
    while (arrived.load() < 2) std::this_thread::yield();
  });
  EXPECT_EQ(arrived.load(), 2);
}

TEST(ParallelFor, OneThreadRunsInOrderOnTheCaller) {
  std::vector<size_t> order;
  const auto caller = std::this_thread::get_id();
  bool same_thread = true;
  ParallelFor(6, 1, [&](size_t i) {
    order.push_back(i);
    same_thread = same_thread && std::this_thread::get_id() == caller;
  });
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(same_thread);
}

struct Item {
  uint64_t in = 0;
  uint64_t out = 0;
  std::string buffer;  // reused from item to item
  std::thread::id worker;
};

TEST(OrderedPipeline, HandsItemsBackInOrder) {
  for (int threads : {0, 1, 2, 3, 4}) {
    for (size_t window : {size_t{1}, size_t{2}, size_t{5}}) {
      std::atomic<int> running{0}, most{0};
      OrderedPipeline<Item> pipe(threads, window, [&](Item& it) {
        const int now = running.fetch_add(1) + 1;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        // Later items finish first now and then: order comes from the
        // pipeline, not from the timing.
        if (it.in % 3 == 0) std::this_thread::yield();
        it.buffer.assign(static_cast<size_t>(it.in % 7), 'x');
        it.out = it.in * it.in;
        it.worker = std::this_thread::get_id();
        running.fetch_sub(1);
      });
      EXPECT_EQ(pipe.window(), window);
      std::vector<uint64_t> got;
      std::set<std::thread::id> workers;
      auto take = [&] {
        Item& it = pipe.Front();
        EXPECT_EQ(it.out, it.in * it.in);
        EXPECT_EQ(it.buffer.size(), it.in % 7);
        got.push_back(it.in);
        workers.insert(it.worker);
        pipe.Pop();
      };
      constexpr uint64_t kItems = 200;
      for (uint64_t i = 0; i < kItems; ++i) {
        if (pipe.full()) take();
        ASSERT_LT(pipe.pending(), window);
        pipe.Next().in = i;
        pipe.Submit();
      }
      while (pipe.pending() > 0) take();
      ASSERT_EQ(got.size(), kItems) << threads << " thread(s), window " << window;
      for (uint64_t i = 0; i < kItems; ++i) EXPECT_EQ(got[i], i);
      // Never more items at once than workers (or than the window holds).
      EXPECT_LE(most.load(), std::max(1, std::min<int>(threads, static_cast<int>(window))));
      if (threads == 0) {
        EXPECT_EQ(workers, std::set<std::thread::id>{std::this_thread::get_id()});
      } else {
        EXPECT_EQ(workers.count(std::this_thread::get_id()), 0u);
      }
    }
  }
}

TEST(OrderedPipeline, DestroyedWithItemsNotTaken) {
  for (int threads : {0, 1, 3}) {
    std::atomic<int> worked{0};
    {
      OrderedPipeline<Item> pipe(threads, 4, [&](Item&) { worked.fetch_add(1); });
      for (int i = 0; i < 4; ++i) {
        pipe.Next().in = static_cast<uint64_t>(i);
        pipe.Submit();
      }
      pipe.Front();
      pipe.Pop();
    }  // three items dropped, worked on or not: no hang, no access after
    EXPECT_GE(worked.load(), 1);
    EXPECT_LE(worked.load(), 4);
  }
}

}  // namespace
}  // namespace tfrecordfs
