// reshape::ShuffledOrder: a permutation, reproducible from its seed, and
// uniform. The uniformity checks run over a fixed set of seeds, so their
// outcome is deterministic (they cannot flake); the bounds are still those
// a fair shuffle passes with a wide margin (about 5 standard deviations),
// so that they say something about the algorithm, not about these seeds.
//
// reshape::ShardSyncer: files finished (and renamed) on its thread in the
// order handed over; a failed one removed and reported; nothing left under
// a temporary name once it is gone.
#include "tfrecordfs/reshape/reshape.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/files.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/record/writer.h"

namespace tfrecordfs::reshape {
namespace {

std::string Framed(int records, int seed) {
  std::string out;
  for (int i = 0; i < records; ++i) record::AppendFramed(&out, absl::StrCat(seed, " record ", i));
  return out;
}

std::unique_ptr<PendingShard> Written(const std::string& final_path, int records, int seed) {
  auto out = PendingShard::Create(final_path, source::Codec::kNone);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return nullptr;
  for (int i = 0; i < records; ++i) {
    EXPECT_TRUE((*out)->Append(absl::StrCat(seed, " record ", i)).ok());
  }
  return *std::move(out);
}

std::vector<std::string> Names(const std::string& dir) {
  auto names = ListNames(dir);
  EXPECT_TRUE(names.ok()) << names.status();
  if (!names.ok()) return {};
  std::sort(names->begin(), names->end());
  return *names;
}

TEST(ShardSyncerTest, CommitsInOrderAndRemovesAFileItCannotRename) {
  test::TempDir dir;
  const std::string a = dir.Join("a"), b = dir.Join("b"), c = dir.Join("c");
  test::WriteFile(b, "in the way");
  ShardSyncer syncer(/*commit=*/true);
  syncer.Add(Written(a, 3, 1));
  syncer.Add(Written(b, 4, 2));
  syncer.Add(Written(c, 500, 3));
  std::vector<ShardSyncer::Synced> done = syncer.Wait();
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0].final_path, a);
  EXPECT_TRUE(done[0].status.ok()) << done[0].status;
  EXPECT_EQ(done[1].final_path, b);
  EXPECT_FALSE(done[1].status.ok());
  EXPECT_EQ(done[1].shard, nullptr);
  EXPECT_EQ(done[2].final_path, c);
  EXPECT_TRUE(done[2].status.ok()) << done[2].status;
  EXPECT_TRUE(absl::StrContains(syncer.error().message(), b)) << syncer.error();
  EXPECT_EQ(test::ReadFile(a), Framed(3, 1));
  EXPECT_EQ(test::ReadFile(b), "in the way");  // never replaced
  EXPECT_EQ(test::ReadFile(c), Framed(500, 3));
  EXPECT_EQ(Names(dir.path()), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(syncer.Wait().empty());
}

TEST(ShardSyncerTest, WithoutCommitFilesComeBackFsyncedUnderTheirTemporaryNames) {
  test::TempDir dir;
  const std::string a = dir.Join("a"), b = dir.Join("b");
  ShardSyncer syncer(/*commit=*/false, /*depth=*/2);
  syncer.Add(Written(a, 7, 1));
  syncer.Add(Written(b, 9, 2));
  std::vector<ShardSyncer::Synced> done = syncer.Wait();
  ASSERT_EQ(done.size(), 2u);
  ASSERT_TRUE(done[0].status.ok() && done[1].status.ok());
  EXPECT_EQ(Names(dir.path()), (std::vector<std::string>{".a.tmp", ".b.tmp"}));
  EXPECT_EQ(done[1].shard->file_bytes(), Framed(9, 2).size());
  EXPECT_EQ(test::ReadFile(dir.Join(".b.tmp")), Framed(9, 2));
  ASSERT_TRUE(done[0].shard->Commit().ok());
  done.clear();  // b, never committed, goes
  EXPECT_EQ(Names(dir.path()), (std::vector<std::string>{"a"}));
  EXPECT_EQ(test::ReadFile(a), Framed(7, 1));
}

TEST(ShardSyncerTest, DestroyedWithFilesInHandLeavesNoTemporaryFile) {
  for (bool commit : {true, false}) {
    test::TempDir dir;
    {
      ShardSyncer syncer(commit, /*depth=*/3);
      for (int i = 0; i < 3; ++i) syncer.Add(Written(dir.Join(absl::StrCat(i)), 2000, i));
    }
    // Whatever was renamed before the syncer went is whole; nothing else is left.
    for (const std::string& name : Names(dir.path())) {
      EXPECT_FALSE(absl::StartsWith(name, ".")) << name;
      EXPECT_TRUE(commit) << name;
      EXPECT_EQ(test::ReadFile(dir.Join(name)), Framed(2000, std::stoi(name)));
    }
  }
}

TEST(ShuffledOrderTest, PermutationReproducibleFromTheSeed) {
  for (uint64_t n : {0, 1, 2, 3, 1000}) {
    std::vector<uint64_t> p = ShuffledOrder(n, 42);
    ASSERT_EQ(p.size(), n);
    std::vector<uint64_t> sorted = p;
    std::sort(sorted.begin(), sorted.end());
    for (uint64_t i = 0; i < n; ++i) EXPECT_EQ(sorted[i], i);
    EXPECT_EQ(ShuffledOrder(n, 42), p);
  }
  EXPECT_NE(ShuffledOrder(1000, 42), ShuffledOrder(1000, 43));
  // Fixed values: the order must not change between versions or machines
  // (a user re-creating a split relies on it). The same numbers come from
  // the Python transcription in tests/cli/reshape_test.py.
  EXPECT_EQ(ShuffledOrder(8, 12345), (std::vector<uint64_t>{3, 4, 6, 2, 5, 0, 7, 1}));
  EXPECT_EQ(ShuffledOrder(10, 0), (std::vector<uint64_t>{4, 9, 2, 5, 1, 7, 6, 0, 3, 8}));
}

// Where each record lands, over many seeds: each of the n*n (record,
// position) cells should hold seeds/n. Chi-square with (n-1)^2 degrees of
// freedom.
TEST(ShuffledOrderTest, EveryRecordEquallyLikelyAtEveryPosition) {
  constexpr uint64_t kN = 8, kSeeds = 20000;
  std::vector<uint64_t> count(kN * kN, 0);
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    const std::vector<uint64_t> p = ShuffledOrder(kN, seed);
    for (uint64_t pos = 0; pos < kN; ++pos) ++count[p[pos] * kN + pos];
  }
  const double expected = static_cast<double>(kSeeds) / kN;           // 2500
  const double sd = std::sqrt(kSeeds * (1.0 / kN) * (1 - 1.0 / kN));  // ~46.8
  double chi2 = 0;
  for (uint64_t c : count) {
    EXPECT_LT(std::abs(c - expected), 6 * sd);
    chi2 += (c - expected) * (c - expected) / expected;
  }
  // df = 49: mean 49, standard deviation ~9.9.
  EXPECT_LT(chi2, 49 + 5 * 9.9) << "positions are not uniform";
}

// All 24 orders of 4 records, over 24000 seeds: each about 1000 times.
TEST(ShuffledOrderTest, EveryOrderEquallyLikely) {
  constexpr uint64_t kSeeds = 24000;
  std::map<std::vector<uint64_t>, uint64_t> seen;
  for (uint64_t seed = 1000000; seed < 1000000 + kSeeds; ++seed) ++seen[ShuffledOrder(4, seed)];
  ASSERT_EQ(seen.size(), 24u);
  double chi2 = 0;
  for (const auto& [order, c] : seen) chi2 += (c - 1000.0) * (c - 1000.0) / 1000.0;
  // df = 23: mean 23, standard deviation ~6.8.
  EXPECT_LT(chi2, 23 + 5 * 6.8);
}

// Neighbours in the input should not stay neighbours: the chance that
// record i+1 directly follows record i is 1/n for a uniform shuffle.
TEST(ShuffledOrderTest, NeighboursAreSeparated) {
  constexpr uint64_t kN = 100000;
  const std::vector<uint64_t> p = ShuffledOrder(kN, 7);
  uint64_t kept = 0;
  for (uint64_t i = 0; i + 1 < kN; ++i) kept += p[i + 1] == p[i] + 1;
  EXPECT_LT(kept, 10u);  // expected about 1
}

}  // namespace
}  // namespace tfrecordfs::reshape
