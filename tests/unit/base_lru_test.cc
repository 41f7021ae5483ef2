// base/lru.h: LruMap's order, its count and byte budgets, and what it hands
// back on eviction.
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tfrecordfs/base/lru.h"

namespace tfrecordfs {
namespace {

using ::testing::ElementsAre;

TEST(LruMap, CountBudgetDropsTheLeastRecentlyUsed) {
  LruMap<int, std::string> m({.max_count = 3});
  EXPECT_TRUE(m.Put(1, "a", 1).empty());
  EXPECT_TRUE(m.Put(2, "b", 1).empty());
  EXPECT_TRUE(m.Put(3, "c", 1).empty());
  ASSERT_NE(m.Get(1), nullptr);  // 1 is now the most recent: 2 goes next
  EXPECT_THAT(m.Put(4, "d", 1), ElementsAre("b"));
  EXPECT_FALSE(m.contains(2));
  EXPECT_TRUE(m.contains(1));
  EXPECT_EQ(m.size(), 3u);
  EXPECT_EQ(m.bytes(), 3u);
}

TEST(LruMap, ByteBudgetKeepsTheNewestEvenWhenItAloneIsTooBig) {
  LruMap<int, std::string> m({.max_bytes = 10});
  m.Put(1, "x", 4);
  m.Put(2, "y", 4);
  EXPECT_THAT(m.Put(3, "z", 4), ElementsAre("x"));
  EXPECT_EQ(m.bytes(), 8u);
  EXPECT_THAT(m.Put(4, "big", 50), ElementsAre("y", "z"));
  EXPECT_EQ(m.size(), 1u);
  EXPECT_EQ(m.bytes(), 50u);
  ASSERT_NE(m.Peek(4), nullptr);
  EXPECT_EQ(*m.Peek(4), "big");
}

TEST(LruMap, PutReplacesAndHandsBackTheOldValue) {
  LruMap<std::string, int> m;
  m.Put("k", 1, 10);
  EXPECT_THAT(m.Put("k", 2, 3), ElementsAre(1));
  EXPECT_EQ(m.size(), 1u);
  EXPECT_EQ(m.bytes(), 3u);
  EXPECT_EQ(*m.Get("k"), 2);
}

TEST(LruMap, TakePeekAndPopOldest) {
  LruMap<int, std::unique_ptr<int>> m;  // move-only values
  m.Put(1, std::make_unique<int>(10), 5);
  m.Put(2, std::make_unique<int>(20), 6);
  m.Put(3, std::make_unique<int>(30), 7);
  ASSERT_NE(m.Peek(1), nullptr);  // Peek leaves 1 the oldest
  auto taken = m.Take(2);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(**taken, 20);
  EXPECT_FALSE(m.Take(2).has_value());
  EXPECT_EQ(m.bytes(), 12u);
  auto oldest = m.PopOldest();
  ASSERT_TRUE(oldest.has_value());
  EXPECT_EQ(oldest->first, 1);
  EXPECT_EQ(*oldest->second, 10);
  EXPECT_TRUE(m.Erase(3));
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.bytes(), 0u);
  EXPECT_FALSE(m.PopOldest().has_value());
}

TEST(LruMap, TrimToNewLimitsKeepsTheMostRecent) {
  LruMap<int, int> m;
  for (int i = 0; i < 10; ++i) m.Put(i, i, 1);
  m.Get(0);
  m.set_limits({.max_count = 2});
  std::vector<int> out;
  m.Trim(0, &out);
  EXPECT_THAT(out, ElementsAre(1, 2, 3, 4, 5, 6, 7, 8));
  EXPECT_TRUE(m.contains(0));
  EXPECT_TRUE(m.contains(9));
}

}  // namespace
}  // namespace tfrecordfs
