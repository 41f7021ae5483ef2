// ReadaheadSource (source/readahead.h): the bytes it serves are always the
// wrapped source's, sequential readers get blocks fetched ahead, random
// readers start nothing, and a failing fetch surfaces as the wrapped
// source's own error rather than as wrong or missing bytes.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tfrecordfs/source/readahead.h"

namespace tfrecordfs::source {
namespace {

constexpr size_t kBlock = Readahead::kBlock;

// An in-memory source that counts its reads and can be told to fail reads
// that touch a byte range (as a network file system's I/O error would).
class FakeSource final : public ShardSource {
 public:
  explicit FakeSource(std::string bytes) : bytes_(std::move(bytes)) {}

  Codec codec() const override { return Codec::kNone; }
  const std::string& path() const override { return path_; }
  uint64_t size() const override { return bytes_.size(); }
  absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const override {
    reads_.fetch_add(1);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (offset < fail_end_ && offset + n > fail_begin_) {
        return absl::DataLossError("injected I/O error at " + std::to_string(offset));
      }
      offsets_.insert(offset);
    }
    if (offset >= bytes_.size()) return size_t{0};
    n = std::min<size_t>(n, bytes_.size() - offset);
    std::memcpy(buf, bytes_.data() + offset, n);
    return n;
  }
  absl::StatusOr<std::optional<FileRange>> Spliceable(uint64_t) const override {
    return std::optional<FileRange>();
  }

  void FailRange(uint64_t begin, uint64_t end) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_begin_ = begin;
    fail_end_ = end;
  }
  uint64_t reads() const { return reads_.load(); }
  std::set<uint64_t> offsets() const {
    std::lock_guard<std::mutex> lock(mu_);
    return offsets_;
  }

 private:
  const std::string bytes_;
  const std::string path_ = "fake.tfrecord";
  mutable std::atomic<uint64_t> reads_{0};
  mutable std::mutex mu_;
  mutable std::set<uint64_t> offsets_;
  uint64_t fail_begin_ = 0, fail_end_ = 0;
};

// A ReadaheadSource over a FakeSource of `bytes`, with a Readahead of its
// own. `source` is declared before `ra`, so it is destroyed after it: ra
// joins its fetches first (readahead.h).
struct ReadaheadStack {
  ReadaheadStack(const std::string& bytes, size_t budget_bytes, int threads)
      : ra(budget_bytes, threads) {
    auto fake = std::make_unique<FakeSource>(bytes);
    inner = fake.get();
    source = std::make_unique<ReadaheadSource>(std::move(fake), &ra);
  }
  std::unique_ptr<ReadaheadSource> source;
  Readahead ra;
  FakeSource* inner = nullptr;  // owned by source
};

std::string Pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  std::mt19937 rng(seed);
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// EXPECT_EQ on megabytes prints megabytes: say where they first differ.
::testing::AssertionResult Same(std::string_view got, std::string_view want) {
  if (got == want) return ::testing::AssertionSuccess();
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  return ::testing::AssertionFailure()
         << "differ at byte " << i << " (sizes " << got.size() << " and " << want.size() << ")";
}

// Reads [offset, offset + n) through `src`; fails the test on an error.
std::string Read(const ShardSource& src, uint64_t offset, size_t n) {
  std::string out(n, '\0');
  auto got = src.ReadAt(offset, out.data(), n);
  EXPECT_TRUE(got.ok()) << got.status();
  out.resize(got.ok() ? *got : 0);
  return out;
}

TEST(ReadaheadTest, SequentialReaderGetsTheSameBytesFromBlocksFetchedAhead) {
  const std::string bytes = Pattern(5 * kBlock + 12345, 1);
  ReadaheadStack stack(bytes, 64 * kBlock, 4);
  const ReadaheadSource& src = *stack.source;
  FakeSource* inner = stack.inner;
  Readahead& ra = stack.ra;

  // Record-sized reads, one after the other (a `find` over a shard).
  std::string seen;
  const size_t step = 100'003;
  for (uint64_t off = 0; off < bytes.size(); off += step) seen += Read(src, off, step);
  EXPECT_TRUE(Same(seen, bytes));
  EXPECT_GT(ra.fetches(), 0u);
  EXPECT_GT(ra.hits(), 0u);
  // Most reads were answered from the fetched blocks: the wrapped source saw
  // the two reads that started the stream plus about one read per block.
  const uint64_t reader_reads = (bytes.size() + step - 1) / step;
  EXPECT_LT(inner->reads(), reader_reads / 2) << "reader made " << reader_reads;
}

TEST(ReadaheadTest, RandomReaderStartsNoFetches) {
  const std::string bytes = Pattern(8 * kBlock, 2);
  ReadaheadStack stack(bytes, 64 * kBlock, 4);
  const ReadaheadSource& src = *stack.source;
  FakeSource* inner = stack.inner;
  Readahead& ra = stack.ra;

  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    // Offsets that never continue the previous read.
    const uint64_t off = (rng() % (bytes.size() / 4096 - 2)) * 4096 + 17;
    ASSERT_TRUE(Same(Read(src, off, 1000), bytes.substr(off, 1000))) << off;
  }
  EXPECT_EQ(ra.fetches(), 0u);
  EXPECT_EQ(ra.hits(), 0u);
  EXPECT_EQ(inner->reads(), 200u);
}

TEST(ReadaheadTest, ReadsAcrossBlockEdgesAndPastTheEnd) {
  const std::string bytes = Pattern(3 * kBlock + 10, 3);
  ReadaheadStack stack(bytes, 64 * kBlock, 2);
  const ReadaheadSource& src = *stack.source;

  // Start a stream, then read spans that cross block boundaries.
  EXPECT_TRUE(Same(Read(src, 0, 4096), bytes.substr(0, 4096)));
  EXPECT_TRUE(Same(Read(src, 4096, kBlock - 4096 + 50), bytes.substr(4096, kBlock - 4096 + 50)));
  const uint64_t at = kBlock + 50;
  EXPECT_TRUE(Same(Read(src, at, 2 * kBlock), bytes.substr(at, 2 * kBlock)));
  // The tail: a short read at the end, nothing past it.
  EXPECT_TRUE(Same(Read(src, 3 * kBlock, 100), bytes.substr(3 * kBlock)));
  EXPECT_TRUE(Same(Read(src, bytes.size(), 100), ""));
  EXPECT_TRUE(Same(Read(src, bytes.size() + 5, 100), ""));
}

TEST(ReadaheadTest, AFailedFetchIsTheWrappedSourcesErrorNotWrongBytes) {
  const std::string bytes = Pattern(6 * kBlock, 4);
  ReadaheadStack stack(bytes, 64 * kBlock, 4);
  const ReadaheadSource& src = *stack.source;
  FakeSource* inner = stack.inner;
  // Block 3 cannot be read (by the fetch or anyone else).
  inner->FailRange(3 * kBlock + 100, 3 * kBlock + 101);

  std::string seen;
  uint64_t off = 0;
  const size_t step = 65536;
  for (; off + step <= 3 * kBlock; off += step) seen += Read(src, off, step);
  EXPECT_TRUE(Same(seen, bytes.substr(0, 3 * kBlock)));
  // Bytes before the damage inside block 3 still come back right...
  EXPECT_TRUE(Same(Read(src, off, 100), bytes.substr(off, 100)));
  // ...and a read of the damaged byte fails as the wrapped source fails.
  std::string buf(step, '\0');
  auto got = src.ReadAt(off + 100, buf.data(), step);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("injected"), std::string::npos) << got.status();

  // Once the storage recovers, the same read gives the right bytes.
  inner->FailRange(0, 0);
  EXPECT_TRUE(Same(Read(src, off + 100, step), bytes.substr(off + 100, step)));
}

TEST(ReadaheadTest, ASmallBudgetStillServesTheRightBytes) {
  const std::string bytes = Pattern(10 * kBlock + 7, 5);
  ReadaheadStack stack(bytes, kBlock, 2);  // one block kept: fetched blocks are evicted early
  const ReadaheadSource& src = *stack.source;
  std::string seen;
  for (uint64_t off = 0; off < bytes.size(); off += 300'007) seen += Read(src, off, 300'007);
  EXPECT_TRUE(Same(seen, bytes));
}

TEST(ReadaheadTest, ConcurrentSequentialReadersOfSeveralSources) {
  // Four shards sharing one Readahead, each read in order by its own thread,
  // and a fifth thread reading one of them at random meanwhile.
  std::vector<std::string> contents;
  std::vector<std::unique_ptr<ReadaheadSource>> sources;  // destroyed after ra
  Readahead ra(16 * kBlock, 4);
  for (uint32_t i = 0; i < 4; ++i) {
    contents.push_back(Pattern(4 * kBlock + i * 1000, 10 + i));
    sources.push_back(
        std::make_unique<ReadaheadSource>(std::make_unique<FakeSource>(contents.back()), &ra));
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (size_t i = 0; i < sources.size(); ++i) {
    threads.emplace_back([&, i] {
      std::string buf(70'001, '\0');
      for (uint64_t off = 0; off < contents[i].size(); off += buf.size()) {
        auto got = sources[i]->ReadAt(off, buf.data(), buf.size());
        if (!got.ok() || std::string_view(buf.data(), *got) !=
                             std::string_view(contents[i]).substr(off, buf.size())) {
          bad.fetch_add(1);
        }
      }
    });
  }
  threads.emplace_back([&] {
    std::mt19937 rng(99);
    std::string buf(5000, '\0');
    for (int k = 0; k < 300; ++k) {
      const uint64_t off = rng() % (contents[0].size() - buf.size());
      auto got = sources[0]->ReadAt(off, buf.data(), buf.size());
      if (!got.ok() || std::string_view(buf.data(), *got) !=
                           std::string_view(contents[0]).substr(off, buf.size())) {
        bad.fetch_add(1);
      }
    }
  });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(ra.fetches(), 0u);
}

TEST(ReadaheadWindowTest, StartsSmallDoublesToItsLimitAndStops) {
  ReadaheadWindow w(2, 8);
  EXPECT_EQ(w.blocks(), 0u);
  w.Start();
  EXPECT_EQ(w.blocks(), 2u);
  w.Grow();
  EXPECT_EQ(w.blocks(), 4u);
  w.Grow();
  EXPECT_EQ(w.blocks(), 8u);
  w.Grow();
  EXPECT_EQ(w.blocks(), 8u);
  w.Stop();
  EXPECT_EQ(w.blocks(), 0u);
  w.Grow();  // growing a stopped window starts it
  EXPECT_EQ(w.blocks(), 2u);
  w.StartAt(5);  // carried on from the shard before: within first and max
  EXPECT_EQ(w.blocks(), 5u);
  w.StartAt(1);
  EXPECT_EQ(w.blocks(), 2u);
  w.StartAt(100);
  EXPECT_EQ(w.blocks(), 8u);
  ReadaheadWindow odd(3, 5);
  odd.Start();
  odd.Grow();
  EXPECT_EQ(odd.blocks(), 5u);
}

TEST(ReadaheadTest, TheWindowFollowsTheBudget) {
  // Object blocks: 8 MiB (2 blocks) first, 32 MiB (8 blocks) at most...
  Readahead objects(64 << 20, 2, Readahead::kObjectBlock);
  ReadaheadWindow w = objects.NewWindow();
  w.Start();
  EXPECT_EQ(w.blocks(), 2u);
  for (int i = 0; i < 10; ++i) w.Grow();
  EXPECT_EQ(w.blocks(), 8u);
  // ... and never more than half the budget, nor less than a block.
  Readahead small(16 << 20, 2, Readahead::kObjectBlock);
  ReadaheadWindow ws = small.NewWindow();
  for (int i = 0; i < 10; ++i) ws.Grow();
  EXPECT_EQ(ws.blocks(), 2u);
  Readahead tiny(kBlock, 2);
  ReadaheadWindow wt = tiny.NewWindow();
  for (int i = 0; i < 10; ++i) wt.Grow();
  EXPECT_EQ(wt.blocks(), 1u);
}

TEST(ReadaheadTest, TheWindowGrowsAsTheReaderMovesOn) {
  // 1 MiB blocks, budget 64 MiB: 8 blocks ahead at first, 32 at most.
  const std::string bytes = Pattern(48 * kBlock, 30);
  ReadaheadStack stack(bytes, 64 * kBlock, 4);
  const ReadaheadSource& src = *stack.source;
  auto fetched_to = [&] {
    // The end of the furthest block the readahead asked for.
    uint64_t far = 0;
    for (uint64_t off : stack.inner->offsets()) far = std::max(far, off + kBlock);
    return far;
  };
  // Fetches run on the Readahead's threads: wait (at most 5 s) for them.
  auto reaches = [&](uint64_t end) {
    for (int i = 0; i < 1000 && fetched_to() < end; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return fetched_to() >= end;
  };
  Read(src, 0, 1000);
  Read(src, 1000, 1000);  // sequential: the stream starts with its first window
  EXPECT_TRUE(reaches(8 * kBlock));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(fetched_to(), 8 * kBlock);  // blocks 0-7, no more
  // Into the next two blocks: the window doubles each time (16, then 32).
  Read(src, 2000, kBlock);
  EXPECT_TRUE(reaches(1 * kBlock + 16 * kBlock));
  Read(src, 2000 + kBlock, kBlock);
  EXPECT_TRUE(reaches(2 * kBlock + 32 * kBlock));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(fetched_to(), 2 * kBlock + 32 * kBlock);  // the limit: half the budget
  // A jump stops the stream: the reads after it start nothing new.
  const uint64_t before = stack.inner->reads();
  Read(src, 40 * kBlock + 5, 100);
  Read(src, 20 * kBlock + 5, 100);
  EXPECT_LE(stack.inner->reads(), before + 2);
}

TEST(ReadaheadTest, ObjectBlocksReuseTheStringsOfBlocksEvicted) {
  // 4 MiB blocks, a 16 MiB budget (two spare strings, two blocks cached):
  // once the cache is full, a fetch evicts the oldest block and reads into
  // its string, rather than into fresh pages.
  constexpr size_t kObj = Readahead::kObjectBlock;
  std::string bytes(12 * kObj + 99, '\0');
  std::mt19937_64 rng(50);
  for (size_t i = 0; i + 8 <= bytes.size(); i += 8) {
    const uint64_t v = rng();
    std::memcpy(bytes.data() + i, &v, 8);
  }
  Readahead ra(4 * kObj, 2, kObj);
  ReadaheadSource src(std::make_unique<FakeSource>(bytes), &ra);
  std::string seen;
  for (uint64_t off = 0; off < bytes.size(); off += 1'000'003) seen += Read(src, off, 1'000'003);
  EXPECT_TRUE(Same(seen, bytes));
  EXPECT_GE(ra.fetches(), 11u);
  // All but the first few: the cache's two blocks, the two spares and
  // the two fetches in flight.
  EXPECT_GE(ra.reused() + 6, ra.fetches()) << ra.reused() << " of " << ra.fetches();
}

// Three shards in mount order behind `ra`: shard i holds `size + extra * i`
// bytes of Pattern(..., seed + i); `inner` sees each one's reads.
struct Shards {
  std::vector<std::string> contents;
  std::vector<FakeSource*> inner;
  std::vector<std::unique_ptr<ReadaheadSource>> sources;
};
Shards ThreeShards(Readahead* ra, size_t size, size_t extra, uint32_t seed) {
  Shards out;
  out.contents.reserve(3);
  for (uint32_t i = 0; i < 3; ++i) {
    out.contents.push_back(Pattern(size + extra * i, seed + i));
    auto fake = std::make_unique<FakeSource>(out.contents.back());
    out.inner.push_back(fake.get());
    out.sources.push_back(std::make_unique<ReadaheadSource>(std::move(fake), ra));
  }
  return out;
}

TEST(ReadaheadTest, AStreamAtItsShardsEndPrimesTheNextShard) {
  // Three shards in mount order; reading the first to its end fetches the
  // start of the second (not the third) before the second is read, and
  // the second's reads are then served from there.
  Readahead ra(64 * kBlock, 4);
  auto [contents, inner, sources] = ThreeShards(&ra, 3 * kBlock, 777, 40);
  const size_t step = 100'003;
  std::string seen;
  for (uint64_t off = 0; off < contents[0].size(); off += step)
    seen += Read(*sources[0], off, step);
  EXPECT_TRUE(Same(seen, contents[0]));
  EXPECT_EQ(ra.primed(), 1u);
  // The second shard's first blocks are asked for without a read of it.
  for (int i = 0; i < 200 && inner[1]->reads() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(inner[1]->offsets().contains(0));
  EXPECT_EQ(inner[2]->reads(), 0u);
  const uint64_t hits = ra.hits();
  seen.clear();
  for (uint64_t off = 0; off < contents[1].size(); off += step)
    seen += Read(*sources[1], off, step);
  EXPECT_TRUE(Same(seen, contents[1]));
  // Every read of the second shard was served from blocks read ahead: its
  // source saw whole blocks only.
  EXPECT_EQ(ra.hits() - hits, (contents[1].size() + step - 1) / step);
  for (uint64_t off : inner[1]->offsets()) EXPECT_EQ(off % kBlock, 0u) << off;
  EXPECT_EQ(ra.primed(), 2u);  // and it primed the third
  // A source destroyed is no longer primed: reading the third to its end
  // primes nothing (there is nothing after it).
  sources[0].reset();
  seen.clear();
  for (uint64_t off = 0; off < contents[2].size(); off += step)
    seen += Read(*sources[2], off, step);
  EXPECT_TRUE(Same(seen, contents[2]));
  EXPECT_EQ(ra.primed(), 2u);
}

// How many reads `inner` saw that started inside a block rather than at its
// start: reads the stream did not serve (a fetch is always a whole block).
size_t DirectReads(const FakeSource& inner) {
  size_t n = 0;
  for (uint64_t off : inner.offsets()) n += off % kBlock != 0;
  return n;
}

TEST(ReadaheadTest, BlocksReadPastGoFirstSoTheNextShardsPrimedBlocksStay) {
  // A `find` over shards in mount order, with a budget that holds exactly
  // two shards (the one being read and the next, primed): the primed blocks of the next shard,
  // fetched long before it is read and untouched since, must outlive the blocks the reader has
  // passed. Under plain LRU they were the oldest and went first, and the
  // next shard was then read one direct read per record.
  Readahead ra(24 * kBlock, 4);
  auto [contents, inner, sources] = ThreeShards(&ra, 12 * kBlock, 0, 80);
  const size_t step = 100'003;
  for (size_t i = 0; i < 3; ++i) {
    std::string seen;
    for (uint64_t off = 0; off < contents[i].size(); off += step) {
      seen += Read(*sources[i], off, step);
      if (i < 2 && off < contents[i].size() / 2 && off + step >= contents[i].size() / 2) {
        // Halfway, the next shard is primed: its blocks land before the
        // reader touches the rest of this shard's (as in a `find`, where
        // the fetches are faster than the listing).
        for (int k = 0; k < 400 && inner[i + 1]->reads() == 0; ++k) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    EXPECT_TRUE(Same(seen, contents[i])) << "shard " << i;
  }
  EXPECT_EQ(ra.primed(), 2u);
  // The first shard's stream starts with one direct read; the primed ones
  // with none. Each block was fetched once.
  EXPECT_LE(DirectReads(*inner[0]), 1u);
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(DirectReads(*inner[i]), 0u) << "shard " << i;
    EXPECT_EQ(inner[i]->reads(), 12u) << "shard " << i;
  }
}

TEST(ReadaheadTest, ABlockEvictedBeforeItsReaderGotThereIsFetchedAgain) {
  // Stream A starts (its window is fetched), then stream B reads far
  // through a budget of four blocks, which evicts A's blocks before A reads
  // them. A then goes on: the block it is in is fetched again with the
  // window after it, rather than read one direct read per record.
  Readahead ra(4 * kBlock, 2);
  ASSERT_EQ(ra.NewWindow().first(), 2u);
  auto [contents, inner, sources] = ThreeShards(&ra, 16 * kBlock, 0, 90);
  const size_t step = 100'003;
  std::string a = Read(*sources[0], 0, step);
  a += Read(*sources[0], step, step);  // sequential: blocks 0-2 started
  for (int i = 0; i < 400 && ra.fetches() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::string b;
  for (uint64_t off = 0; off < contents[2].size(); off += step) b += Read(*sources[2], off, step);
  EXPECT_TRUE(Same(b, contents[2]));
  const size_t before = DirectReads(*inner[0]);
  for (uint64_t off = a.size(); off < contents[0].size(); off += step)
    a += Read(*sources[0], off, step);
  EXPECT_TRUE(Same(a, contents[0]));
  // A 16-block shard in 100 KB reads is 168 reads: at most one direct read
  // where an evicted block is met (and each such block is fetched again).
  EXPECT_LE(DirectReads(*inner[0]) - before, 2u);
}

TEST(ReadaheadTest, AListedShardFetchesItsFirstWindowBeforeItsFirstRead) {
  // Three shards; listing the second's folder asks for its first blocks
  // with no read of it, and its reads are then served from those blocks.
  // A listing of the third before any read primes nothing (one listed
  // shard at a time); after a read, a listing primes again.
  Readahead ra(64 * kBlock, 4);
  auto [contents, inner, sources] = ThreeShards(&ra, 12 * kBlock, 333, 60);
  sources[1]->ExpectReadFromStart();
  sources[2]->ExpectReadFromStart();  // refused: the second is not read yet
  EXPECT_EQ(ra.expected(), 1u);
  const uint64_t first = ra.NewWindow().first();
  ASSERT_GE(first, 2u);
  for (int i = 0; i < 400 && ra.fetches() < first; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(ra.fetches(), first);
  std::set<uint64_t> want;
  for (uint64_t b = 0; b < first; ++b) want.insert(b * kBlock);
  EXPECT_EQ(inner[1]->offsets(), want);
  EXPECT_EQ(inner[0]->reads(), 0u);
  EXPECT_EQ(inner[2]->reads(), 0u);
  // Listing it again (or a source read already) starts nothing more.
  sources[1]->ExpectReadFromStart();
  EXPECT_EQ(ra.expected(), 1u);

  // The first read, at offset 0, is served from the blocks and goes on as
  // a stream: the source sees whole blocks only.
  const size_t step = 100'003;
  std::string seen;
  for (uint64_t off = 0; off < contents[1].size(); off += step)
    seen += Read(*sources[1], off, step);
  EXPECT_TRUE(Same(seen, contents[1]));
  for (uint64_t off : inner[1]->offsets()) EXPECT_EQ(off % kBlock, 0u) << off;
  EXPECT_EQ(ra.hits(), (contents[1].size() + step - 1) / step);

  // Read: a listing primes again (the third was primed by the second's
  // end already, so that listing is the first shard's).
  sources[0]->ExpectReadFromStart();
  EXPECT_EQ(ra.expected(), 2u);
  for (int i = 0; i < 400 && !inner[0]->offsets().contains(0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(inner[0]->offsets().contains(0));
}

TEST(ReadaheadTest, HeldBytesComeFromTheBlocksWithoutACopyAndGoOnWithTheStream) {
  // Record-sized pieces taken with Held where they lie in one block (the
  // record parse's path), ReadAt for those straddling two: the bytes are
  // the source's, the stream reads ahead as with ReadAt only, and held
  // bytes stay valid after the cache has let their block go.
  const std::string bytes = Pattern(10 * kBlock + 4321, 7);
  ReadaheadStack stack(bytes, 4 * kBlock, 2);
  const ReadaheadSource& src = *stack.source;
  EXPECT_FALSE(src.Held(0, 1000));                // nothing fetched yet: read it
  EXPECT_FALSE(src.Held(bytes.size() - 10, 11));  // past the end
  // The first two reads start the stream (the second follows the first).
  std::string seen = Read(src, 0, 1000);
  EXPECT_FALSE(src.Held(1000, 1000));
  seen += Read(src, 1000, 1000);
  size_t held = 0;
  std::optional<HeldBytes> first_held;
  uint64_t first_off = 0;
  const size_t step = 100'003;
  for (uint64_t off = 2000; off < bytes.size(); off += step) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(step, bytes.size() - off));
    if (auto h = src.Held(off, n)) {
      ASSERT_EQ(h->bytes.size(), n);
      seen.append(h->bytes.data(), h->bytes.size());
      ++held;
      if (!first_held) {
        first_held = std::move(h);
        first_off = off;
      }
    } else {
      EXPECT_NE(off / kBlock, (off + n - 1) / kBlock) << off;  // only straddling pieces
      seen += Read(src, off, n);
    }
  }
  EXPECT_TRUE(Same(seen, bytes));
  EXPECT_GE(held, bytes.size() / step - 11);
  // The stream read ahead: whole blocks only reached the wrapped source,
  // but for the first two reads.
  for (uint64_t off : stack.inner->offsets()) {
    if (off != 0 && off != 1000) {
      EXPECT_EQ(off % kBlock, 0u) << off;
    }
  }
  // The first held piece's block was evicted long ago (4 blocks kept).
  ASSERT_TRUE(first_held);
  EXPECT_EQ(first_off, 2000u);
  EXPECT_EQ(first_held->bytes, absl::string_view(bytes).substr(first_off, step));
}

TEST(ReadaheadTest, AListingOfAnEmptyShardStartsNothing) {
  ReadaheadStack stack("", 64 * kBlock, 2);
  stack.source->ExpectReadFromStart();
  EXPECT_EQ(stack.ra.expected(), 0u);
  EXPECT_EQ(stack.ra.primed(), 0u);
}

// ---- PrefetchReader ----

// An object in memory that answers each ranged read after `latency` (a
// round trip), records the ranges asked for and how many were in flight at
// once, and fails reads touching a byte range with an error naming its URL
// and the byte offset (as HttpObject's do).
class FakeObject final : public ObjectReader {
 public:
  FakeObject(std::string bytes, std::chrono::milliseconds latency)
      : bytes_(std::move(bytes)), latency_(latency) {}
  const std::string& url() const override { return url_; }
  uint64_t size() const override { return bytes_.size(); }
  absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ranges_.emplace_back(offset, offset + n);
      max_in_flight_ = std::max(max_in_flight_, ++in_flight_);
    }
    std::this_thread::sleep_for(latency_);
    std::lock_guard<std::mutex> lock(mu_);
    --in_flight_;
    if (offset < fail_end_ && offset + n > fail_begin_) {
      return absl::UnavailableError(absl::StrCat(url_, ": 503 at byte offset ", offset));
    }
    if (offset >= bytes_.size()) return size_t{0};
    n = std::min<size_t>(n, bytes_.size() - offset);
    std::memcpy(buf, bytes_.data() + offset, n);
    return n;
  }

  void FailRange(uint64_t begin, uint64_t end) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_begin_ = begin;
    fail_end_ = end;
  }
  std::vector<std::pair<uint64_t, uint64_t>> ranges() const {
    std::lock_guard<std::mutex> lock(mu_);
    return ranges_;
  }
  int max_in_flight() const {
    std::lock_guard<std::mutex> lock(mu_);
    return max_in_flight_;
  }

 private:
  const std::string bytes_;
  const std::chrono::milliseconds latency_;
  const std::string url_ = "s3://bucket/shard-00000-of-00001";
  mutable std::mutex mu_;
  mutable std::vector<std::pair<uint64_t, uint64_t>> ranges_;
  mutable int in_flight_ = 0, max_in_flight_ = 0;
  uint64_t fail_begin_ = 0, fail_end_ = 0;
};

constexpr size_t kMiB = size_t{1} << 20;

// Reads all of `r` front to back in `chunk`-byte reads, as a walk does.
std::string ReadAll(const PrefetchReader& r, size_t chunk) {
  std::string out, buf(chunk, '\0');
  for (uint64_t off = 0;;) {
    auto got = r.ReadAt(off, buf.data(), chunk);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok() || *got == 0) break;
    out.append(buf.data(), *got);
    off += *got;
  }
  return out;
}

TEST(PrefetchReaderTest, SequentialReaderGetsTheBytesInOrderFromGrowingPartsInFlight) {
  const std::string bytes = Pattern(13 * kMiB + 777, 11);
  FakeObject object(bytes, std::chrono::milliseconds(20));
  PrefetchReader r(&object, object.url(), bytes.size());
  EXPECT_TRUE(Same(ReadAll(r, 100000), bytes));
  // Parts of 1, 2, 4 and 8 MiB (the last cut at the end), several in flight.
  auto ranges = object.ranges();  // in the order the threads got there
  std::sort(ranges.begin(), ranges.end());
  ASSERT_EQ(ranges.size(), 4u);
  EXPECT_EQ(ranges[0], std::make_pair(uint64_t{0}, uint64_t{kMiB}));
  EXPECT_EQ(ranges[1].second - ranges[1].first, 2 * kMiB);
  EXPECT_EQ(ranges[2].second - ranges[2].first, 4 * kMiB);
  EXPECT_EQ(ranges[3].second, bytes.size());
  EXPECT_GE(object.max_in_flight(), 3);
  EXPECT_EQ(r.reads(), 4u);
}

TEST(PrefetchReaderTest, ReadsAreExactAtTheEndAndNothingPastItIsRequested) {
  const std::string bytes = Pattern(3 * kMiB + 5, 12);
  FakeObject object(bytes, std::chrono::milliseconds(1));
  PrefetchReader::Options options;
  options.first_part = 64 * 1024;
  options.max_part = 256 * 1024;
  PrefetchReader r(&object, object.url(), bytes.size(), options);
  EXPECT_TRUE(Same(ReadAll(r, 4096 + 3), bytes));
  std::string buf(100, '\0');
  auto tail = r.ReadAt(bytes.size() - 7, buf.data(), buf.size());
  ASSERT_TRUE(tail.ok()) << tail.status();
  ASSERT_EQ(*tail, 7u);
  EXPECT_EQ(buf.substr(0, 7), bytes.substr(bytes.size() - 7));
  auto at_end = r.ReadAt(bytes.size(), buf.data(), buf.size());
  ASSERT_TRUE(at_end.ok());
  EXPECT_EQ(*at_end, 0u);
  auto past = r.ReadAt(bytes.size() + 4096, buf.data(), buf.size());
  ASSERT_TRUE(past.ok());
  EXPECT_EQ(*past, 0u);
  for (const auto& [begin, end] : object.ranges()) {
    EXPECT_LT(begin, bytes.size());
    EXPECT_LE(end, bytes.size()) << "a range past the end was requested at " << begin;
  }
}

TEST(PrefetchReaderTest, AFailedPartFailsOnlyTheReadsThatNeedItNamingTheObjectAndOffset) {
  const std::string bytes = Pattern(12 * kMiB, 13);
  FakeObject object(bytes, std::chrono::milliseconds(2));
  object.FailRange(3 * kMiB + 100, 3 * kMiB + 101);  // inside the third part, [3, 7) MiB
  PrefetchReader r(&object, object.url(), bytes.size());
  std::string buf(kMiB / 2, '\0');
  uint64_t off = 0;
  for (; off < 3 * kMiB; off += buf.size()) {
    auto got = r.ReadAt(off, buf.data(), buf.size());
    ASSERT_TRUE(got.ok()) << "at " << off << ": " << got.status();
    ASSERT_EQ(*got, buf.size());
    ASSERT_TRUE(Same(buf, std::string_view(bytes).substr(off, buf.size())));
  }
  auto bad = r.ReadAt(off, buf.data(), buf.size());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(bad.status().message()),
              ::testing::HasSubstr("s3://bucket/shard-00000-of-00001: 503 at byte offset " +
                                   std::to_string(3 * kMiB)));
}

TEST(PrefetchReaderTest, ALocalReadErrorNamesThePathAndOffset) {
  // pread of a directory fails (EISDIR), as a network file system's read can.
  const int dir = ::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dir, 0);
  {
    PrefetchReader r(dir, "/data/shard-00003-of-00008", 5 * kMiB);
    std::string buf(4096, '\0');
    auto got = r.ReadAt(0, buf.data(), buf.size());
    ASSERT_FALSE(got.ok());
    EXPECT_THAT(std::string(got.status().message()),
                ::testing::HasSubstr("/data/shard-00003-of-00008 at byte offset 0"));
  }
  ::close(dir);
}

TEST(PrefetchReaderTest, BytesInFlightOrHeldStayWithinTheBudget) {
  const std::string bytes = Pattern(40 * kMiB + 3, 14);
  FakeObject object(bytes, std::chrono::milliseconds(3));
  PrefetchReader::Options options;
  options.first_part = kMiB;
  options.max_part = 2 * kMiB;
  PrefetchBudget budget(20 * kMiB);  // a walk's share: a quarter, 5 MiB
  options.budget = &budget;
  {
    PrefetchReader r(&object, object.url(), bytes.size(), options);
    EXPECT_TRUE(Same(ReadAll(r, 64 * 1024), bytes));
    EXPECT_LE(r.peak_bytes(), budget.Share());
    EXPECT_GE(r.peak_bytes(), 4 * kMiB);  // it did read ahead
  }
  EXPECT_LE(budget.peak(), 5 * kMiB);
  EXPECT_EQ(budget.held(), 0u);  // every part's buffer given back
  EXPECT_LE(object.max_in_flight(), 4);
  EXPECT_GE(object.max_in_flight(), 2);

  // A part larger than the budget still progresses, one at a time.
  FakeObject small(bytes, std::chrono::milliseconds(0));
  PrefetchBudget tight_budget(kMiB / 2);
  options.budget = &tight_budget;
  {
    PrefetchReader tight(&small, small.url(), bytes.size(), options);
    EXPECT_TRUE(Same(ReadAll(tight, 300000), bytes));
    EXPECT_LE(tight.peak_bytes(), kMiB);
  }
  EXPECT_EQ(small.max_in_flight(), 1);
  EXPECT_EQ(tight_budget.held(), 0u);
}

TEST(PrefetchReaderTest, WalksAtOnceShareOneBudget) {
  // Four walks of 24 MiB objects, each of which alone would keep 1+2+4+8+8
  // MiB in flight, under one 12 MiB budget: together they stay within it
  // (plus one first part per walk that holds nothing), each reads its own
  // bytes, and none is starved by the others: each reads ahead.
  constexpr int kWalks = 4;
  PrefetchBudget budget(12 * kMiB);
  std::vector<std::string> contents;
  std::vector<std::unique_ptr<FakeObject>> objects;
  for (int i = 0; i < kWalks; ++i) {
    contents.push_back(Pattern(24 * kMiB + 100 * i, 20 + i));
    objects.push_back(std::make_unique<FakeObject>(contents.back(), std::chrono::milliseconds(2)));
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> walks;
  std::vector<size_t> peaks(kWalks);
  for (int i = 0; i < kWalks; ++i) {
    walks.emplace_back([&, i] {
      PrefetchReader::Options options;
      options.budget = &budget;
      PrefetchReader r(objects[i].get(), objects[i]->url(), contents[i].size(), options);
      if (ReadAll(r, 256 * 1024) != contents[i]) bad.fetch_add(1);
      peaks[i] = r.peak_bytes();
    });
  }
  for (std::thread& t : walks) t.join();
  EXPECT_EQ(bad.load(), 0);
  const size_t first_part = PrefetchReader::Options().first_part;
  EXPECT_LE(budget.peak(), budget.budget() + kWalks * first_part);
  for (size_t p : peaks) EXPECT_GE(p, 2 * kMiB);
  EXPECT_EQ(budget.held(), 0u);
}

TEST(PrefetchReaderTest, ReadsBehindAndJumpsAheadGetTheRightBytes) {
  const std::string bytes = Pattern(30 * kMiB, 15);
  FakeObject object(bytes, std::chrono::milliseconds(1));
  PrefetchReader::Options options;
  PrefetchBudget budget(32 * kMiB);  // a share of 8 MiB: parts of 1, 2 and 4 MiB ahead
  options.budget = &budget;
  PrefetchReader r(&object, object.url(), bytes.size(), options);
  std::string buf(kMiB + 17, '\0');
  auto check = [&](uint64_t off) {
    auto got = r.ReadAt(off, buf.data(), buf.size());
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(*got, std::min<uint64_t>(buf.size(), bytes.size() - off));
    EXPECT_TRUE(Same(std::string_view(buf.data(), *got), std::string_view(bytes).substr(off, *got)))
        << "at " << off;
  };
  check(0);
  check(buf.size());
  check(2 * buf.size());
  check(100);            // behind the parts held: a direct read
  check(20 * kMiB + 5);  // ahead of the parts started: the stream restarts at its page
  for (uint64_t off = 20 * kMiB + 5 + buf.size(); off < bytes.size(); off += buf.size()) check(off);
  const auto ranges = object.ranges();
  EXPECT_TRUE(std::find(ranges.begin(), ranges.end(),
                        std::make_pair(uint64_t{100}, uint64_t{100 + buf.size()})) != ranges.end());
  EXPECT_TRUE(std::find(ranges.begin(), ranges.end(),
                        std::make_pair(uint64_t{20 * kMiB}, uint64_t{21 * kMiB})) != ranges.end());
}

TEST(PrefetchReaderTest, DestroyedWithPartsInFlight) {
  const std::string bytes = Pattern(16 * kMiB, 16);
  FakeObject object(bytes, std::chrono::milliseconds(30));
  {
    PrefetchReader r(&object, object.url(), bytes.size());
    std::string buf(10, '\0');
    ASSERT_TRUE(r.ReadAt(0, buf.data(), buf.size()).ok());
  }  // waits for the parts still in flight: nothing reads `object` after this
  const size_t n = object.ranges().size();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(object.ranges().size(), n);
}

}  // namespace
}  // namespace tfrecordfs::source
