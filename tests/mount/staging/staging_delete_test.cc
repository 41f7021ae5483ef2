// Deleting records of mounted shards through a real mount (issue 23, the
// deletion slice): `rm -r` / `rm -rf` of record folders, `ls` keeps the
// other names, `tfrecordfs status` lists the deletions, a kill -9 of the
// daemon and a remount keep them, `tfrecordfs unmount` rewrites the shard in
// its own codec, and an independent reader (tests/cli/tfrecord_check.py
// under /usr/bin/python3) finds exactly the other records, byte-identical.
// `-o ro` refuses with EROFS.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "staging_util.h"

namespace tfrecordfs::mount_test::staging_test {
namespace {

constexpr int kRecords = 12;

// The payloads of `shard` as the independent reader sees them, hex-encoded
// one a line (exit 0), with its codec on the first line.
std::vector<std::string> IndependentRead(const std::string& shard) {
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  EXPECT_NE(root, nullptr);
  if (root == nullptr) return {};
  const std::string script = absl::StrCat(
      "import sys; sys.path.insert(0, '", root, "/tests/cli'); import tfrecord_check as t\n",
      "raw = open(sys.argv[1], 'rb').read(); print(t.codec_of(raw))\n",
      "for p in t.read_records(sys.argv[1]): print(p.hex())\n");
  CommandResult r = RunCommand({"/usr/bin/python3", "-c", script, shard});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return absl::StrSplit(r.out, '\n', absl::SkipEmpty());
}

std::string Hex(absl::string_view s) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

class StagingDeleteTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    TFRFS_SKIP_WITHOUT_FUSE();
    if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
    for (int i = 0; i < kRecords; ++i) {
      payloads_.push_back(ExamplePayload(
          {Int64Feature("id", {i}), BytesFeature("text", {absl::StrCat("record ", i)})}));
    }
    shard_name_ = WriteShardWithCodec(s_.src, "a.tfrecord", payloads_, GetParam());
    ASSERT_FALSE(HasFailure());
    shard_ = s_.src + "/" + shard_name_;
  }

  MountConfig Config(bool read_only = false) const {
    MountConfig c = PackConfig(s_, {s_.src}, "del");
    if (read_only) c.options.push_back("ro");
    return c;
  }

  std::string Ls() const {
    CommandResult r = RunCommand({"ls", s_.mnt + "/" + shard_name_});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }

  CommandResult Status() const { return RunCommand({BinaryPath(), "status", s_.mnt}); }

  Scratch s_;
  std::vector<std::string> payloads_;
  std::string shard_name_;
  std::string shard_;
};

// The names `ls` shows for records 0..11 without `deleted`.
std::string Expected(const std::vector<int>& deleted) {
  std::string out;
  for (int i = 0; i < kRecords; ++i) {
    if (std::find(deleted.begin(), deleted.end(), i) != deleted.end()) continue;
    absl::StrAppend(&out, absl::StrFormat("%02d\n", i));
  }
  return out;
}

TEST_P(StagingDeleteTest, RmRecordsSurvivesCrashAndRewritesShard) {
  struct stat before;
  ASSERT_EQ(::stat(shard_.c_str(), &before), 0);
  {
    Mount d(Config());
    ASSERT_EQ(d.Start(), absl::OkStatus());
    const std::string dir = s_.mnt + "/" + shard_name_;
    CommandResult rm = Shell(
        absl::StrCat("rm -r ", ShellQuote(dir + "/03"), " && rm -rf ", ShellQuote(dir + "/07")));
    ASSERT_EQ(rm.exit_code, 0) << rm.err;
    // Gone at once; 04 is still 04.
    EXPECT_EQ(Ls(), Expected({3, 7}));
    EXPECT_FALSE(Exists(dir + "/03"));
    EXPECT_EQ(ReadWholeFile(dir + "/04/text.txt"), "record 4\n");
    // A folder that still shows files is not removed by rmdir.
    EXPECT_NE(RunCommand({"rmdir", dir + "/05"}).exit_code, 0);
    CommandResult st = Status();
    EXPECT_EQ(st.exit_code, 0) << st.out << st.err;
    EXPECT_NE(st.out.find(absl::StrCat("deleted: ", shard_, ": 2 record(s)")), std::string::npos)
        << st.out;
    EXPECT_NE(st.out.find(": 3 7\n"), std::string::npos) << st.out;
    d.KillHard();
  }
  // The shard is untouched until the commit.
  EXPECT_EQ(IndependentRead(shard_).size(), 1u + kRecords);
  Mount d(Config());
  ASSERT_EQ(d.Start(), absl::OkStatus());
  EXPECT_EQ(Ls(), Expected({3, 7}));
  int status = 0;
  CommandResult un = d.TfrUnmount(&status);
  EXPECT_EQ(un.exit_code, 0) << un.out << un.err;
  EXPECT_NE(
      un.out.find(absl::StrCat("rewrote ", shard_, ": kept 10, changed 0, added 0, deleted 2")),
      std::string::npos)
      << un.out;

  // An independent reader: the same codec, the other records byte-identical.
  std::vector<std::string> expected = {GetParam()};
  for (int i = 0; i < kRecords; ++i) {
    if (i != 3 && i != 7) expected.push_back(Hex(payloads_[i]));
  }
  EXPECT_EQ(IndependentRead(shard_), expected);
  EXPECT_EQ(ListDir(s_.src), std::vector<std::string>{shard_name_});  // no temp file left
  CommandResult count = RunCommand({BinaryPath(), "count", shard_});
  EXPECT_EQ(count.exit_code, 0) << count.err;
  EXPECT_EQ(count.out.substr(0, 3), "10\t") << count.out;

  // A fresh read-only mount numbers the records afresh (10 records: one
  // digit).
  Mount ro(Config(/*read_only=*/true));
  ASSERT_EQ(ro.Start(), absl::OkStatus());
  EXPECT_EQ(Ls(), "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n");
  EXPECT_EQ(ReadWholeFile(s_.mnt + "/" + shard_name_ + "/3/text.txt"), "record 4\n");
  EXPECT_EQ(ReadWholeFile(s_.mnt + "/" + shard_name_ + "/7/text.txt"), "record 9\n");
  // -o ro: EROFS.
  CommandResult rm = RunCommand({"rm", "-rf", s_.mnt + "/" + shard_name_ + "/0"});
  EXPECT_NE(rm.exit_code, 0);
  EXPECT_NE(rm.err.find("Read-only file system"), std::string::npos) << rm.err;
}

INSTANTIATE_TEST_SUITE_P(Codecs, StagingDeleteTest, ::testing::Values("none", "gzip", "zlib"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace tfrecordfs::mount_test::staging_test
