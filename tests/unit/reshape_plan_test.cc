// The plan of parts (reshape/plan.h): a pure function of the inputs, their
// sizes, N and the salt; every byte in exactly one piece; balanced by
// bytes; split shards own the records that begin in their pieces.
#include <map>

#include "gtest/gtest.h"
#include "tfrecordfs/reshape/plan.h"

namespace tfrecordfs::reshape {
namespace {

std::vector<PlanFile> Files(const std::vector<std::pair<uint64_t, bool>>& sizes) {
  std::vector<PlanFile> files;
  for (size_t i = 0; i < sizes.size(); ++i) {
    files.push_back({"d/f" + std::to_string(i), sizes[i].first, sizes[i].second});
  }
  return files;
}

// Every byte of every file lies in exactly one piece, pieces are in input
// order across parts, and whole pieces are whole files.
void ExpectCovers(const std::vector<PlanFile>& files, const PartPlan& plan) {
  std::vector<std::pair<size_t, uint64_t>> seen;  // (file, begin) in plan order
  std::map<size_t, uint64_t> next;                // file -> next expected byte
  for (uint32_t k = 0; k < plan.parts; ++k) {
    for (const Piece& p : plan.pieces[k]) {
      ASSERT_LT(p.file, files.size());
      if (!seen.empty()) {
        ASSERT_TRUE(seen.back().first < p.file ||
                    (seen.back().first == p.file && seen.back().second < p.begin))
            << "pieces out of input order at part " << k;
      }
      seen.emplace_back(p.file, p.begin);
      EXPECT_EQ(p.begin, next[p.file]) << "file " << p.file << " part " << k;
      EXPECT_LE(p.begin, p.end);
      next[p.file] = p.end;
      if (p.whole) {
        EXPECT_EQ(p.begin, 0u);
        EXPECT_EQ(p.end, files[p.file].size);
      } else {
        EXPECT_TRUE(files[p.file].splittable);
      }
    }
  }
  for (size_t i = 0; i < files.size(); ++i) {
    EXPECT_EQ(next.count(i), 1u) << "file " << i << " in no piece";
    EXPECT_EQ(next[i], files[i].size) << "file " << i << " not covered to its end";
  }
}

uint64_t PartBytes(const PartPlan& plan, uint32_t k) {
  uint64_t b = 0;
  for (const Piece& p : plan.pieces[k]) b += p.end - p.begin;
  return b;
}

TEST(PartSpecTest, ParsesAndRefuses) {
  auto ok = ParsePartSpec("3/4");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->index, 3u);
  EXPECT_EQ(ok->count, 4u);
  ASSERT_TRUE(ParsePartSpec("0/1").ok());
  for (const char* bad : {"5/4", "4/4", "0/0", "a/b", "1/", "/2", "-1/4", "1/-4", "1/4/5", "", "3",
                          "1 /4", "+1/4", "0/100000", "0/99999999999"}) {
    EXPECT_FALSE(ParsePartSpec(bad).ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(ParsePartSpec(bad).status())) << bad;
  }
  EXPECT_TRUE(ParsePartSpec("99998/99999").ok());
}

TEST(PlanTest, WholeFilesBalancedByBytes) {
  // 12 files of assorted sizes, none splittable.
  std::vector<std::pair<uint64_t, bool>> sizes;
  uint64_t largest = 0, total = 0;
  for (uint64_t i = 0; i < 12; ++i) {
    const uint64_t s = 1000 + (i * 7919) % 5000;
    sizes.emplace_back(s, false);
    largest = std::max(largest, s);
    total += s;
  }
  const auto files = Files(sizes);
  for (uint32_t n : {1u, 2u, 3u, 4u, 8u, 12u, 20u}) {
    SCOPED_TRACE(n);
    const PartPlan plan = PlanParts(files, n, "count");
    ASSERT_EQ(plan.pieces.size(), n);
    ExpectCovers(files, plan);
    for (uint32_t k = 0; k < n; ++k) EXPECT_LE(PartBytes(plan, k), total / n + largest + 1);
  }
}

TEST(PlanTest, SplitsALargeShardAtTheCutPoints) {
  // One 10 MB splittable shard among small ones: with 4 parts each gets
  // about a quarter.
  const auto files = Files({{1000, false}, {10'000'000, true}, {2000, false}});
  const PartPlan plan = PlanParts(files, 4, "verify");
  ExpectCovers(files, plan);
  const uint64_t total = 10'003'000;
  for (uint32_t k = 0; k < 4; ++k) {
    EXPECT_LE(PartBytes(plan, k), total / 4 + 2000) << k;
    EXPECT_GE(PartBytes(plan, k), total / 4 - 2000) << k;
  }
  // The same file unsplittable goes whole to one part.
  auto whole = files;
  whole[1].splittable = false;
  const PartPlan one = PlanParts(whole, 4, "verify");
  ExpectCovers(whole, one);
  int holders = 0;
  for (uint32_t k = 0; k < 4; ++k) {
    for (const Piece& p : one.pieces[k]) holders += p.file == 1;
  }
  EXPECT_EQ(holders, 1);
}

TEST(PlanTest, DeterministicAndIdentifiesItsInputs) {
  const auto files = Files({{5000, true}, {3000, false}, {0, false}, {7000, true}});
  const PartPlan a = PlanParts(files, 3, "reshard seed=1");
  const PartPlan b = PlanParts(files, 3, "reshard seed=1");
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.IdHex().size(), 16u);
  ASSERT_EQ(a.pieces.size(), b.pieces.size());
  for (uint32_t k = 0; k < 3; ++k) {
    ASSERT_EQ(a.pieces[k].size(), b.pieces[k].size());
    for (size_t i = 0; i < a.pieces[k].size(); ++i) {
      EXPECT_EQ(a.pieces[k][i].file, b.pieces[k][i].file);
      EXPECT_EQ(a.pieces[k][i].begin, b.pieces[k][i].begin);
      EXPECT_EQ(a.pieces[k][i].end, b.pieces[k][i].end);
    }
  }
  ExpectCovers(files, a);
  // Anything the plan depends on changes its id.
  EXPECT_NE(PlanParts(files, 4, "reshard seed=1").id, a.id);
  EXPECT_NE(PlanParts(files, 3, "reshard seed=2").id, a.id);
  auto grown = files;
  grown[1].size += 1;
  EXPECT_NE(PlanParts(grown, 3, "reshard seed=1").id, a.id);
  auto renamed = files;
  renamed[0].path = "d/g0";
  EXPECT_NE(PlanParts(renamed, 3, "reshard seed=1").id, a.id);
  // Pinned: the id names directories on disk and must be the same on every
  // machine and build; the value is FNV-1a 64 of the canonical text
  // "tfrecordfs plan v1\nx\nparts 2\n" "4:d/f0 10\n", computed apart
  // (Python).
  EXPECT_EQ(PlanParts(Files({{10, false}}), 2, "x").IdHex(), "2e315ac80168a1fd");
}

TEST(PlanTest, MorePartsThanBytesAndNoBytes) {
  const auto files = Files({{1, false}, {1, false}});
  const PartPlan plan = PlanParts(files, 8, "count");
  ExpectCovers(files, plan);
  const auto empty = Files({{0, false}, {0, true}});
  const PartPlan none = PlanParts(empty, 3, "count");
  ExpectCovers(empty, none);
  EXPECT_EQ(none.pieces[0].size(), 2u);
  EXPECT_TRUE(PlanParts({}, 4, "count").pieces[3].empty());
}

TEST(PlanTest, PieceRecordsOwnTheRecordsBeginningInThem) {
  // Records of 100 framed bytes: offsets 0, 100, ..., 1000.
  record::WalkResult walk;
  for (uint64_t o = 0; o <= 1000; o += 100) walk.offsets.push_back(o);
  walk.file_size = 1000;
  const index::ShardIndex idx("s", 1000, 0, walk);
  const auto files = std::vector<PlanFile>{{"s", 1000, true}};
  for (uint32_t n : {1u, 2u, 3u, 7u, 11u, 40u}) {
    SCOPED_TRACE(n);
    const PartPlan plan = PlanParts(files, n, "verify");
    uint64_t next = 0;
    for (uint32_t k = 0; k < n; ++k) {
      for (const Piece& p : plan.pieces[k]) {
        const auto [first, last] = PieceRecords(idx, p);
        EXPECT_EQ(first, next);
        EXPECT_LE(first, last);
        for (uint64_t r = first; r < last; ++r) {
          EXPECT_GE(idx.begin(r), p.begin);
          EXPECT_LT(idx.begin(r), p.end);
        }
        next = last;
      }
    }
    EXPECT_EQ(next, 10u);  // every record exactly once
  }
}

TEST(PlanTest, SplitByWeight) {
  EXPECT_EQ(SplitByWeight({10, 10, 10, 10}, 2), (std::vector<size_t>{0, 2, 4}));
  EXPECT_EQ(SplitByWeight({10, 10, 10, 10}, 1), (std::vector<size_t>{0, 4}));
  EXPECT_EQ(SplitByWeight({}, 3), (std::vector<size_t>{0, 0, 0, 0}));
  EXPECT_EQ(SplitByWeight({0, 0}, 2), (std::vector<size_t>{0, 2, 2}));
  // Runs are contiguous, cover all items, and are balanced.
  std::vector<uint64_t> w;
  for (int i = 0; i < 100; ++i) w.push_back(1 + (i * 37) % 11);
  for (uint32_t n : {2u, 3u, 8u, 100u, 150u}) {
    const auto cuts = SplitByWeight(w, n);
    ASSERT_EQ(cuts.size(), n + 1);
    EXPECT_EQ(cuts.front(), 0u);
    EXPECT_EQ(cuts.back(), w.size());
    for (uint32_t k = 0; k < n; ++k) EXPECT_LE(cuts[k], cuts[k + 1]);
  }
}

}  // namespace
}  // namespace tfrecordfs::reshape
