// Moving with coreutils `mv` between the shards and staging/ (issue 21,
// item 3; issue 23). A rename answered EXDEV makes `mv` copy, then delete
// the source; a crash in between, or a delete that fails, leaves the record
// twice. So a rename is done in one step or refused with EROFS, which stops
// `mv` before it copies anything: a record folder moves into staging/ in one
// step on a read-write mount (vfs/record_edits.h MoveRecord: it leaves its
// shard at the commit, exactly once); a feature file of a record, a whole
// shard folder and a staged folder moved into a shard are refused, and
// everything is on a read-only (`-o ro`) mount; `cp -r` still stages a copy.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "staging_util.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/record/reader.h"

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
  // staging/ into a shard, but record folders (`records`: those too);
  // staging/ holds an empty record folder `r`.
  void ExpectEveryMoveRefused(bool records = true) {
    if (records) {
      ExpectMvRefused("base.tfrecord/1", "staging/");       // a record folder
      ExpectMvRefused("base.tfrecord/1", "staging/moved");  // ... renamed
    }
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

TEST_F(StagingMovesTest, MvOfARecordMovesItElseFailsBeforeCopying) {
  Mount d(Config("mv"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  ASSERT_EQ(::mkdir(M("staging/r").c_str(), 0755), 0) << std::strerror(errno);
  ExpectEveryMoveRefused(/*records=*/false);
  // A record folder moves in one rename: out of its shard, into staging/.
  const CommandResult mv = RunCommand({"mv", M("base.tfrecord/1"), M("staging/moved")});
  ASSERT_EQ(mv.exit_code, 0) << mv.err;
  EXPECT_EQ(ListDir(M("base.tfrecord")), (std::vector<std::string>{"0", "2"}));
  EXPECT_EQ(ReadWholeFile(M("staging/moved/label")), "2\n");
  ASSERT_EQ(::rmdir(M("staging/r").c_str()), 0) << std::strerror(errno);
  int status = 0;
  const CommandResult u = d.TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  EXPECT_EQ(ExitCodeOfWait(status), 0) << DescribeWait(status) << "\n" << d.Stderr();
  // Packed once, and gone from its shard.
  const std::vector<std::string> packed = AllPayloads(ReadPackedShards(s_.out, "mv"));
  ASSERT_EQ(packed.size(), 1u);
  ExpectSameRecord(records_[1], packed[0], "record 1");
  auto left = ReadFileToString(s_.src + "/base.tfrecord");
  ASSERT_TRUE(left.ok());
  std::vector<std::string> kept;
  ASSERT_TRUE(record::ForEachRecordInBuffer(*left, [&](uint64_t, absl::string_view p) {
                kept.emplace_back(p);
              }).ok());
  EXPECT_EQ(kept, (std::vector<std::string>{records_[0], records_[2]}));
}

TEST_F(StagingMovesTest, MvOnAReadOnlyMountFailsBeforeCopying) {
  // A store with an empty record folder, so that `-o ro` shows staging/.
  std::filesystem::create_directories(s_.records() + "/r");
  Mount d(Config("ro", {"ro"}));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  ExpectEveryMoveRefused();
  // The system call itself, as other tools see it.
  EXPECT_NE(::rename(M("base.tfrecord/0").c_str(), M("staging/r0").c_str()), 0);
  EXPECT_EQ(errno, EROFS) << std::strerror(errno);
  int status = 0;
  std::string err;
  ASSERT_TRUE(d.Unmount(&status, &err)) << err;
  EXPECT_EQ(ExitCodeOfWait(status), 0) << DescribeWait(status) << "\n" << d.Stderr();
  EXPECT_EQ(ReadPackedShards(s_.out, "ro").size(), 0u);
}

// Copying is fine: `cp -r` stages a copy of record 1 that packs once.
TEST_F(StagingMovesTest, CpOfARecordStillStagesACopy) {
  Mount d(Config("cp"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
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
