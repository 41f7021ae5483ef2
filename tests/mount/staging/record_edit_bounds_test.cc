// What the edit store may cost (issue 34 item 15): every edited record is a
// copy of all its files, each at least a disk block, so 100,000 edits of
// a 5.5 MB shard of small records filled 1.2 GB. `-o max_edited=N` bounds
// the records checked out at once: the next edit fails with EDQUOT and a
// log line saying to commit, and `tfrecordfs commit` empties the store so
// that editing goes on. Checked through a real mount with bash
// redirections; the result by the independent reader.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "staging_util.h"

namespace tfrecordfs::mount_test::staging_test {
namespace {

TEST(RecordEditBoundsTest, EditsBeyondMaxEditedWaitForACommit) {
  TFRFS_SKIP_WITHOUT_FUSE();
  Scratch s;
  std::vector<std::string> payloads;
  for (int i = 0; i < 6; ++i) {
    payloads.push_back(ExamplePayload({Int64Feature("id", {i}), BytesFeature("v", {"old"})}));
  }
  const std::string shard = s.src + "/data.tfrecord";
  test::WriteShard(shard, payloads);
  MountConfig config;
  config.sources = {s.src};
  config.mountpoint = s.mnt;
  config.log_dir = s.logs;
  config.options = {"staging_dir=" + s.store, "max_edited=3"};
  Mount m(config);
  ASSERT_EQ(m.Start(), absl::OkStatus());
  auto edit = [&](int record) {
    return Shell(absl::StrCat(
        "echo new > ", ShellQuote(m.path(absl::StrCat("data.tfrecord/", record, "/v.txt")))));
  };
  for (int r = 0; r < 3; ++r) {
    const CommandResult e = edit(r);
    EXPECT_EQ(e.exit_code, 0) << r << ": " << e.err;
  }
  // A fourth record is refused, saying why; a record already checked out
  // still takes edits.
  const CommandResult refused = edit(3);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(refused.err, "Disk quota exceeded")) << refused.err;
  EXPECT_TRUE(absl::StrContains(m.Stderr(), "the most -o max_edited allows (3")) << m.Stderr();
  EXPECT_EQ(edit(1).exit_code, 0);
  const CommandResult commit = RunCommand({BinaryPath(), "commit", m.mountpoint()});
  EXPECT_EQ(commit.exit_code, 0) << commit.out << commit.err;
  // The store is empty again: three more records take edits.
  for (int r = 3; r < 6; ++r) {
    const CommandResult e = edit(r);
    EXPECT_EQ(e.exit_code, 0) << r << ": " << e.err;
  }
  int status = 0;
  const CommandResult un = m.TfrUnmount(&status);
  EXPECT_EQ(un.exit_code, 0) << un.out << un.err;
  std::vector<std::string> want = {"none"};
  for (int i = 0; i < 6; ++i) want.push_back(absl::StrCat("id:int64:", i, " v:bytes:new"));
  EXPECT_EQ(ReadIndependently(shard), want);
}

}  // namespace
}  // namespace tfrecordfs::mount_test::staging_test
