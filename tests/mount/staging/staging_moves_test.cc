// Moving out of the read-only shards with coreutils `mv` (issue 21, item 3).
// A rename answered EXDEV makes `mv` copy, then delete the source; the
// delete fails (EROFS) and `mv` exits 1, but the copy stays staged and is
// packed: the dataset then holds the record twice. Answered EROFS, `mv`
// stops before copying. So every rename with a side outside staging/ is
// EROFS, on read-write and read-only (`-o ro`) mounts alike, for a record
// folder, a feature file of a record and a whole shard folder; `cp -r` still
// stages a copy.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "staging_util.h"

namespace tfrecordfs::mount_test::staging_test {
namespace {

class StagingMovesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TFRFS_SKIP_WITHOUT_FUSE();
    records_ = {ExamplePayload({Int64Feature("label", {1}), FloatFeature("scores", {0.5f})}),
                ExamplePayload({Int64Feature("label", {2}), FloatFeature("scores", {1.5f})}),
                ExamplePayload({Int64Feature("label", {3}), FloatFeature("scores", {2.5f})})};
    test::WriteShard(s_.src + "/base.tfrecord", records_);
  }

  MountConfig Config(const std::string& prefix, std::vector<std::string> extra = {}) const {
    MountConfig c = PackConfig(s_, {s_.src}, prefix);
    c.options.insert(c.options.end(), extra.begin(), extra.end());
    return c;
  }

  std::string M(const std::string& rel) const { return s_.mnt + "/" + rel; }

  // `mv FROM TO` (paths relative to the mount) must fail as coreutils
  // reports a read-only file system, before copying anything.
  void ExpectMvRefused(const std::string& from, const std::string& to) {
    SCOPED_TRACE("mv " + from + " " + to);
    const CommandResult mv = RunCommand({"mv", M(from), M(to)});
    EXPECT_NE(mv.exit_code, 0) << mv.out << mv.err;
    EXPECT_NE(mv.err.find("cannot move"), std::string::npos) << mv.err;
    EXPECT_NE(mv.err.find("Read-only file system"), std::string::npos) << mv.err;
    EXPECT_EQ(mv.err.find("cannot remove"), std::string::npos)
        << "mv copied, then failed to remove the source: " << mv.err;
    EXPECT_TRUE(Exists(M(from))) << "the source is gone";
  }

  // Every coreutils move out of the shards into staging/, and out of
  // staging/ into a shard; staging/ holds an empty record folder `r`.
  void ExpectEveryMoveRefused() {
    ExpectMvRefused("base.tfrecord/1", "staging/");          // a record folder
    ExpectMvRefused("base.tfrecord/1", "staging/moved");     // ... renamed
    ExpectMvRefused("base.tfrecord/1/label", "staging/r/");  // a feature file
    ExpectMvRefused("base.tfrecord", "staging/");            // a shard folder
    ExpectMvRefused("staging/r", "base.tfrecord/");          // out of staging
    EXPECT_EQ(ListDir(M("staging")), std::vector<std::string>{"r"});
    EXPECT_EQ(ListDir(M("staging/r")), std::vector<std::string>{});
    EXPECT_EQ(ListDir(s_.records()), std::vector<std::string>{"r"});
    EXPECT_EQ(ListDir(s_.records() + "/r"), std::vector<std::string>{});
    EXPECT_EQ(ReadWholeFile(M("base.tfrecord/1/label")), "2\n");
  }

  Scratch s_;
  std::vector<std::string> records_;
};

TEST_F(StagingMovesTest, MvOutOfTheShardsFailsBeforeCopying) {
  Mount d(Config("mv"));
  ASSERT_EQ(d.Start(), "");
  ASSERT_EQ(::mkdir(M("staging/r").c_str(), 0755), 0) << std::strerror(errno);
  ExpectEveryMoveRefused();
  // The system call itself, as other tools see it.
  EXPECT_NE(::rename(M("base.tfrecord/0").c_str(), M("staging/r0").c_str()), 0);
  EXPECT_EQ(errno, EROFS) << std::strerror(errno);
  ASSERT_EQ(::rmdir(M("staging/r").c_str()), 0) << std::strerror(errno);
  int status = 0;
  const CommandResult u = d.TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  EXPECT_EQ(ExitCodeOfWait(status), 0) << DescribeWait(status) << "\n" << d.Stderr();
  EXPECT_EQ(ReadPackedShards(s_.out, "mv").size(), 0u) << "a failed mv left a record to pack";
}

TEST_F(StagingMovesTest, MvOnAReadOnlyMountFailsBeforeCopying) {
  // A store with an empty record folder, so that `-o ro` shows staging/.
  std::filesystem::create_directories(s_.records() + "/r");
  Mount d(Config("ro", {"ro"}));
  ASSERT_EQ(d.Start(), "");
  ExpectEveryMoveRefused();
  int status = 0;
  std::string err;
  ASSERT_TRUE(d.Unmount(&status, &err)) << err;
  EXPECT_EQ(ExitCodeOfWait(status), 0) << DescribeWait(status) << "\n" << d.Stderr();
  EXPECT_EQ(ReadPackedShards(s_.out, "ro").size(), 0u);
}

// Copying is fine: `cp -r` stages a copy of record 1 that packs once.
TEST_F(StagingMovesTest, CpOfARecordStillStagesACopy) {
  Mount d(Config("cp"));
  ASSERT_EQ(d.Start(), "");
  const CommandResult cp = RunCommand({"cp", "-r", M("base.tfrecord/1"), M("staging/")});
  ASSERT_EQ(cp.exit_code, 0) << cp.err;
  EXPECT_EQ(ListDir(M("staging")), std::vector<std::string>{"1"});
  int status = 0;
  const CommandResult u = d.TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  EXPECT_EQ(ExitCodeOfWait(status), 0) << DescribeWait(status) << "\n" << d.Stderr();
  const std::vector<std::string> packed = AllPayloads(ReadPackedShards(s_.out, "cp"));
  ASSERT_EQ(packed.size(), 1u);
  ExpectSameRecord(records_[1], packed[0], "record 1");
}

}  // namespace
}  // namespace tfrecordfs::mount_test::staging_test
