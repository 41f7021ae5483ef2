// The parsed-record LRU, the node id bit layout and the handle table.
#include <cerrno>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/vfs/handle_table.h"
#include "tfrecordfs/vfs/node_id.h"
#include "tfrecordfs/vfs/record_cache.h"

namespace tfrecordfs::vfs {
namespace {

std::shared_ptr<const ParsedRecord> Rec(uint64_t tag) {
  auto r = std::make_shared<ParsedRecord>();
  r->data_offset = tag;
  return r;
}

// The tag of the cached value for `key`, or -1 when absent.
int64_t Tag(RecordCache& c, uint64_t key) {
  auto r = c.Get(key);
  return r ? static_cast<int64_t>(r->data_offset) : -1;
}

TEST(RecordCacheTest, GetOfMissingKey) {
  RecordCache c(3);
  EXPECT_EQ(nullptr, c.Get(1));
  EXPECT_EQ(0u, c.size());
}

TEST(RecordCacheTest, EvictsLeastRecentlyUsed) {
  RecordCache c(3);
  c.Put(1, Rec(10));
  c.Put(2, Rec(20));
  c.Put(3, Rec(30));
  EXPECT_EQ(3u, c.size());
  c.Put(4, Rec(40));  // evicts 1, the oldest
  EXPECT_EQ(3u, c.size());
  EXPECT_EQ(-1, Tag(c, 1));
  EXPECT_EQ(20, Tag(c, 2));  // 2 is now the most recent: order 3, 4, 2
  c.Put(5, Rec(50));         // evicts 3
  EXPECT_EQ(-1, Tag(c, 3));
  EXPECT_EQ(40, Tag(c, 4));
  EXPECT_EQ(20, Tag(c, 2));
  EXPECT_EQ(50, Tag(c, 5));
}

// A record whose layout holds one file of `text_bytes` inline bytes.
std::shared_ptr<const ParsedRecord> Big(uint64_t tag, size_t text_bytes) {
  auto r = std::make_shared<ParsedRecord>();
  r->data_offset = tag;
  r->layout.entries.resize(2);
  r->layout.entries[1].content.assign(text_bytes, 'x');
  return r;
}

TEST(RecordCacheTest, ByteBudgetEvictsLeastRecentlyUsed) {
  const size_t one = Big(0, 10000)->MemoryBytes();
  ASSERT_GT(one, 10000u);
  RecordCache c(100, 3 * one);  // room for 100 records but 3 of these
  c.Put(1, Big(10, 10000));
  c.Put(2, Big(20, 10000));
  c.Put(3, Big(30, 10000));
  EXPECT_EQ(3u, c.size());
  EXPECT_EQ(3 * one, c.bytes());
  EXPECT_EQ(10, Tag(c, 1));  // order now 2, 3, 1
  c.Put(4, Big(40, 10000));  // over budget: 2 goes
  EXPECT_EQ(3u, c.size());
  EXPECT_EQ(-1, Tag(c, 2));
  EXPECT_EQ(10, Tag(c, 1));
  // A big record pushes out as many records as it needs.
  c.Put(5, Big(50, 18000));  // almost two records' worth: 3 and 4 go
  EXPECT_EQ(-1, Tag(c, 3));
  EXPECT_EQ(-1, Tag(c, 4));
  EXPECT_EQ(10, Tag(c, 1));
  EXPECT_EQ(50, Tag(c, 5));
  EXPECT_LE(c.bytes(), 3 * one);
  // Replacing a value accounts for the new size.
  c.Put(5, Rec(51));
  EXPECT_EQ(one + Rec(0)->MemoryBytes(), c.bytes());
}

TEST(RecordCacheTest, RecordLargerThanTheBudgetIsStillKept) {
  RecordCache c(100, 1000);
  c.Put(1, Big(10, 5000));
  EXPECT_EQ(10, Tag(c, 1));  // the most recent record always stays
  c.Put(2, Big(20, 5000));
  EXPECT_EQ(-1, Tag(c, 1));
  EXPECT_EQ(20, Tag(c, 2));
  EXPECT_EQ(1u, c.size());
}

TEST(RecordCacheTest, GetRefreshesRecency) {
  RecordCache c(2);
  c.Put(1, Rec(10));
  c.Put(2, Rec(20));
  EXPECT_EQ(10, Tag(c, 1));  // 1 becomes the most recent
  c.Put(3, Rec(30));         // so 2 goes
  EXPECT_EQ(-1, Tag(c, 2));
  EXPECT_EQ(10, Tag(c, 1));
  EXPECT_EQ(30, Tag(c, 3));
}

TEST(RecordCacheTest, PutOfExistingKeyReplacesAndRefreshes) {
  RecordCache c(2);
  c.Put(1, Rec(10));
  c.Put(2, Rec(20));
  c.Put(1, Rec(11));  // replaces, becomes the most recent
  EXPECT_EQ(2u, c.size());
  c.Put(3, Rec(30));  // so 2 goes
  EXPECT_EQ(-1, Tag(c, 2));
  EXPECT_EQ(11, Tag(c, 1));
}

TEST(RecordCacheTest, CapacityZeroMeansOne) {
  RecordCache c(0);
  c.Put(1, Rec(10));
  EXPECT_EQ(1u, c.size());
  EXPECT_EQ(10, Tag(c, 1));
  c.Put(2, Rec(20));
  EXPECT_EQ(1u, c.size());
  EXPECT_EQ(-1, Tag(c, 1));
  EXPECT_EQ(20, Tag(c, 2));
}

TEST(RecordCacheTest, NeverHoldsMoreThanCapacity) {
  RecordCache c(100);
  for (uint64_t k = 0; k < 1000; ++k) {
    c.Put(k, Rec(k));
    ASSERT_LE(c.size(), 100u);
  }
  EXPECT_EQ(100u, c.size());
  for (uint64_t k = 0; k < 900; ++k) EXPECT_EQ(-1, Tag(c, k));
  for (uint64_t k = 900; k < 1000; ++k) EXPECT_EQ(static_cast<int64_t>(k), Tag(c, k));
}

TEST(RecordCacheTest, EvictedValueStaysValidForItsHolder) {
  RecordCache c(1);
  auto r = std::make_shared<ParsedRecord>();
  r->layout = naming::LayoutRaw(77);
  c.Put(1, r);
  std::shared_ptr<const ParsedRecord> held = c.Get(1);
  r.reset();
  c.Put(2, Rec(2));
  EXPECT_EQ(nullptr, c.Get(1));
  ASSERT_NE(nullptr, held);
  EXPECT_EQ(77u, held->layout.entries[1].span_length);
}

TEST(RecordCacheTest, ConcurrentUse) {
  RecordCache c(64);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&c, t] {
      for (uint64_t i = 0; i < 5000; ++i) {
        const uint64_t key = (i * 7 + static_cast<uint64_t>(t)) % 200;
        if (auto r = c.Get(key)) {
          EXPECT_EQ(key, r->data_offset);  // never another key's value
        } else {
          c.Put(key, Rec(key));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(c.size(), 64u);
}

TEST(ParsedRecordTest, MemoryBytesGrowsWithTheLayout) {
  ParsedRecord small;
  ParsedRecord big;
  big.layout = naming::LayoutRaw(5);
  big.layout.entries[1].content = std::string(1000, 'x');
  EXPECT_GE(small.MemoryBytes(), sizeof(ParsedRecord));
  EXPECT_GT(big.MemoryBytes(), small.MemoryBytes() + 1000);
}

// Short names and values live inside the entries (the small-string buffer):
// they are not charged twice, so a typical record costs what its entries do.
TEST(ParsedRecordTest, MemoryBytesChargesShortStringsOnce) {
  ParsedRecord r;
  r.layout = naming::LayoutRaw(5);
  r.layout.entries[1].content = "7\n";
  r.layout.entries.shrink_to_fit();
  EXPECT_EQ(r.MemoryBytes(),
            sizeof(ParsedRecord) + r.layout.entries.size() * sizeof(naming::Entry));
  r.layout.entries[1].content = std::string(100, 'x');
  EXPECT_EQ(r.MemoryBytes(), sizeof(ParsedRecord) +
                                 r.layout.entries.size() * sizeof(naming::Entry) +
                                 r.layout.entries[1].content.capacity() + 1);
}

TEST(NodeIdTest, TreeIds) {
  EXPECT_EQ(1u, TreeId(0));  // FUSE_ROOT_ID
  for (uint64_t i : {uint64_t{0}, uint64_t{1}, uint64_t{12345}, (uint64_t{1} << 62) - 2}) {
    EXPECT_EQ(Space::kTree, SpaceOf(TreeId(i)));
    EXPECT_EQ(i, TreeIndex(TreeId(i)));
  }
}

TEST(NodeIdTest, RecordIdsRoundTrip) {
  for (uint64_t shard : {uint64_t{0}, uint64_t{1}, kMaxShards - 1}) {
    for (uint64_t record : {uint64_t{0}, uint64_t{99}, kMaxRecordsPerShard - 1}) {
      for (uint64_t entry : {uint64_t{0}, uint64_t{3}, kMaxEntriesPerRecord - 1}) {
        const uint64_t id = RecordId(shard, record, entry);
        EXPECT_EQ(Space::kRecord, SpaceOf(id));
        EXPECT_EQ(shard, ShardOf(id));
        EXPECT_EQ(record, RecordOf(id));
        EXPECT_EQ(entry, EntryOf(id));
        EXPECT_NE(0u, id);
      }
    }
  }
  // Distinct fields give distinct ids.
  EXPECT_NE(RecordId(1, 0, 0), RecordId(0, 1, 0));
  EXPECT_NE(RecordId(0, 1, 0), RecordId(0, 0, 1));
}

TEST(NodeIdTest, StagingIds) {
  for (uint64_t n : {uint64_t{0}, uint64_t{1}, (uint64_t{1} << 62) - 1}) {
    EXPECT_EQ(Space::kStaging, SpaceOf(StagingId(n)));
    EXPECT_EQ(n, StagingIndex(StagingId(n)));
  }
}

}  // namespace
}  // namespace tfrecordfs::vfs

namespace tfrecordfs::vfs {
namespace {

struct Probe {
  explicit Probe(int* alive) : alive(alive) { ++*alive; }
  ~Probe() { --*alive; }
  int* alive;
};

TEST(HandleTableTest, ResolvesOnlyLiveNumbersOfItsOwn) {
  int alive = 0;
  HandleTable<Probe> files(1), dirs(2);
  const uint64_t a = files.Add(std::make_unique<Probe>(&alive));
  const uint64_t b = files.Add(std::make_unique<Probe>(&alive));
  const uint64_t d = dirs.Add(std::make_unique<Probe>(&alive));
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
  EXPECT_NE(a, d);
  EXPECT_EQ(alive, 3);
  ASSERT_TRUE(files.Get(a).ok());
  EXPECT_NE(*files.Get(a), nullptr);
  EXPECT_NE(*files.Get(a), *files.Get(b));
  // 0 is "no handle"; not an error.
  ASSERT_TRUE(files.Get(0).ok());
  EXPECT_EQ(*files.Get(0), nullptr);
  // Another table's number, a made-up one.
  EXPECT_EQ(ErrnoOf(files.Get(d).status()), EBADF);
  EXPECT_EQ(ErrnoOf(dirs.Get(a).status()), EBADF);
  EXPECT_EQ(ErrnoOf(files.Get(a + 1000).status()), EBADF);
  // Removed: the state is handed back (and freed with it); the number is
  // stale from then on and never issued again.
  {
    auto removed = files.Remove(a);
    ASSERT_TRUE(removed.ok());
    EXPECT_NE(removed->get(), nullptr);
  }
  EXPECT_EQ(alive, 2);
  EXPECT_EQ(ErrnoOf(files.Get(a).status()), EBADF);
  EXPECT_EQ(ErrnoOf(files.Remove(a).status()), EBADF);
  EXPECT_NE(files.Add(std::make_unique<Probe>(&alive)), a);
  EXPECT_EQ(files.size(), 2u);
}

TEST(HandleTableTest, FreesWhatIsLeftWithTheTable) {
  int alive = 0;
  {
    HandleTable<Probe> t(7);
    for (int i = 0; i < 5; ++i) t.Add(std::make_unique<Probe>(&alive));
    EXPECT_EQ(alive, 5);
  }
  EXPECT_EQ(alive, 0);
}

TEST(HandleTableTest, ConcurrentAddGetRemove) {
  HandleTable<int> t(3);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&t, k] {
      for (int i = 0; i < 2000; ++i) {
        const uint64_t fh = t.Add(std::make_unique<int>(k * 10000 + i));
        auto got = t.Get(fh);
        ASSERT_TRUE(got.ok());
        ASSERT_EQ(**got, k * 10000 + i);
        ASSERT_TRUE(t.Remove(fh).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(t.size(), 0u);
}

}  // namespace
}  // namespace tfrecordfs::vfs
