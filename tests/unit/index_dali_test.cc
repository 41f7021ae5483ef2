// DALI index files and the record of the ones tfrecordfs wrote
// (index/dali_index.h): only a file that still holds what was written
// follows its shard.
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/index/dali_index.h"

namespace tfrecordfs::index {
namespace {

class DaliIndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("XDG_CACHE_HOME", dir_.Join("cache").c_str(), 1);
    shard_ = dir_.Join("a.tfrecord");
    idx_ = dir_.Join("a.tfrecord.idx");
    ASSERT_TRUE(WriteFileAtomically(shard_, "x").ok());
  }
  test::TempDir dir_;
  std::string shard_, idx_;
};

TEST_F(DaliIndexTest, TextIsOffsetAndFramedSizePerRecord) {
  EXPECT_EQ(DaliIndexText({0, 20, 36, 100}), "0 20\n20 16\n36 64\n");
  EXPECT_EQ(DaliIndexText({0}), "");
  EXPECT_EQ(DaliRegistryDir(), dir_.Join("cache") + "/tfrecordfs/dali");
}

TEST_F(DaliIndexTest, ARecordedFileFollowsItsShard) {
  const std::string old_text = DaliIndexText({0, 20, 40});
  ASSERT_TRUE(WriteFileAtomically(idx_, old_text).ok());
  ASSERT_TRUE(RecordDaliIndex(shard_, idx_, old_text).ok());
  EXPECT_TRUE(HasDaliIndex(shard_));
  auto r = FollowDaliIndex(shard_, {0, 30});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ(**r, idx_);
  EXPECT_EQ(*ReadFileToString(idx_), "0 30\n");
  // Again (recovery): the same text, still recorded.
  r = FollowDaliIndex(shard_, {0, 30});
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ(*ReadFileToString(idx_), "0 30\n");
  // The next rewrite follows from the new text.
  r = FollowDaliIndex(shard_, {0, 10, 30});
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ(*ReadFileToString(idx_), "0 10\n10 20\n");
}

TEST_F(DaliIndexTest, AFileChangedSinceIsLeftAloneAndForgotten) {
  const std::string text = DaliIndexText({0, 20, 40});
  ASSERT_TRUE(WriteFileAtomically(idx_, text).ok());
  ASSERT_TRUE(RecordDaliIndex(shard_, idx_, text).ok());
  ASSERT_TRUE(WriteFileAtomically(idx_, "0 40\n").ok());  // someone else's now
  auto r = FollowDaliIndex(shard_, {0, 30});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_value());
  EXPECT_EQ(*ReadFileToString(idx_), "0 40\n");
  EXPECT_FALSE(HasDaliIndex(shard_));
  // Never recorded: nothing happens.
  const std::string other = dir_.Join("b.tfrecord");
  ASSERT_TRUE(WriteFileAtomically(other, "y").ok());
  r = FollowDaliIndex(other, {0, 30});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

}  // namespace
}  // namespace tfrecordfs::index
