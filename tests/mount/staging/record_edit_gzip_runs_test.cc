// A commit of one edited record in a GZIP shard copies the deflate blocks
// that did not change as they are (record/deflate_runs.h), and deflates
// again only the blocks around the edit; a shard whose flushed pieces refer
// back to each other is deflated again whole. Judged by the independent
// reader (tests/cli/tfrecord_check.py), zcat, and the file's bytes.
#include <zlib.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "record_edit_util.h"
#include "staging_util.h"
#include "tfrecordfs/record/writer.h"

namespace tfrecordfs::mount_test::staging_test {
namespace {

constexpr int kShardRecords = 300;
constexpr int kGroup = 50;  // records between flushes

// The test's own writer (zlib, not the project's): one GZIP member at zlib
// level 1 (the rewrite deflates at 6: a block deflated again is other
// bytes), `flush` after every kGroup records. `ends`: the file offset
// after each group's flush.
std::string Deflate(const std::vector<std::string>& payloads, int flush,
                    std::vector<size_t>* ends) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 1, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string file;
  std::vector<char> buf(1 << 20);
  for (size_t g = 0; g < payloads.size(); g += kGroup) {
    std::string framed;
    for (size_t i = g; i < g + kGroup && i < payloads.size(); ++i) {
      record::AppendFramed(&framed, payloads[i]);
    }
    const bool last = g + kGroup >= payloads.size();
    z.next_in = reinterpret_cast<Bytef*>(framed.data());
    z.avail_in = static_cast<uInt>(framed.size());
    int r;
    do {
      z.next_out = reinterpret_cast<Bytef*>(buf.data());
      z.avail_out = static_cast<uInt>(buf.size());
      r = deflate(&z, last ? Z_FINISH : flush);
      file.append(buf.data(), buf.size() - z.avail_out);
    } while (z.avail_out == 0 || (last && r != Z_STREAM_END));
    ends->push_back(file.size());
  }
  deflateEnd(&z);
  return file;
}

class GzipRunsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TFRFS_SKIP_WITHOUT_FUSE();
    if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
    for (int i = 0; i < kShardRecords; ++i) {
      payloads_.push_back(ExamplePayload({Int64Feature("id", {i}),
                                          BytesFeature("text", {absl::StrCat("record ", i)}),
                                          FloatFeature("score", {i + 0.5f})}));
    }
  }

  // Writes the shard, edits record 120's id through the mount (`echo >`),
  // unmounts (the commit); the new file's bytes.
  std::string EditAndCommit(const std::string& file) {
    const std::string shard = s_.src + "/a.tfrecord.gz";
    WriteWholeFile(shard, file);
    Mount d(PackConfig(s_, {s_.src}, "edit"));
    EXPECT_EQ(d.Start(), absl::OkStatus());
    CommandResult edit = RunCommand(
        {"bash", "-c", absl::StrCat("echo 7000 > ", ShellQuote(s_.mnt + "/a.tfrecord.gz/120/id"))});
    EXPECT_EQ(edit.exit_code, 0) << edit.err;
    int st = 0;
    CommandResult un = d.TfrUnmount(&st);
    EXPECT_EQ(un.exit_code, 0) << un.out << un.err;
    // The independent reader: every record, record 120 with its new id.
    std::vector<std::string> expected = {"gzip"};
    for (int i = 0; i < kShardRecords; ++i) {
      expected.push_back(
          Described(i == 120 ? 7000 : i, absl::StrCat("record ", i), absl::StrCat(i, ".5")));
    }
    EXPECT_EQ(IndependentRead(shard), expected);
    // zcat: one stream, the framing of the same records, every record but
    // the edited one byte for byte.
    CommandResult z = RunCommand({"bash", "-c", absl::StrCat("zcat ", ShellQuote(shard))});
    EXPECT_EQ(z.exit_code, 0) << z.err;
    std::string before, after;
    for (int i = 0; i < kShardRecords; ++i) {
      if (i != 120) record::AppendFramed(&before, payloads_[i]);
    }
    std::vector<std::string> read;
    for (size_t pos = 0; pos + 16 <= z.out.size();) {
      uint64_t n = 0;
      for (int b = 7; b >= 0; --b) n = (n << 8) | static_cast<unsigned char>(z.out[pos + b]);
      read.push_back(z.out.substr(pos + 12, n));
      pos += 16 + n;
    }
    EXPECT_EQ(read.size(), static_cast<size_t>(kShardRecords));
    for (size_t i = 0; i < read.size(); ++i) {
      if (i != 120) record::AppendFramed(&after, read[i]);
    }
    EXPECT_TRUE(before == after) << "an unchanged record reads back different";
    return ReadWholeFile(shard);
  }

  Scratch s_;
  std::vector<std::string> payloads_;
};

// Full flushes every 50 records (what a writer that flushes, this
// project's included, leaves): the groups without the edit (all but the
// third, and the last, which ends the stream) are in the new file byte for
// byte. Before, every record was deflated again at level 6, and no group's
// level-1 bytes were left.
TEST_F(GzipRunsTest, UnchangedFullFlushBlocksAreCopiedAsTheyWere) {
  std::vector<size_t> ends;
  const std::string old_file = Deflate(payloads_, Z_FULL_FLUSH, &ends);
  const std::string new_file = EditAndCommit(old_file);
  ASSERT_EQ(ends.size(), 6u);
  size_t begin = 10;  // after the GZIP header
  for (size_t g = 0; g + 1 < ends.size(); ++g) {
    const std::string group = old_file.substr(begin, ends[g] - begin);
    if (g == 2) {
      EXPECT_EQ(new_file.find(group), std::string::npos) << "the edited group";
    } else {
      EXPECT_NE(new_file.find(group), std::string::npos) << "group " << g << " was not copied";
    }
    begin = ends[g];
  }
}

// SIGKILL in the middle of the rewrite (fault point rewrite_mid_shard,
// which falls after the run of records 100-149: while runs are copied, the
// edit being in record 20) leaves the shard byte for byte as it was; the
// next mount commits it, copying the runs after the edited group.
TEST_F(GzipRunsTest, SigkillWhileRunsAreCopiedKeepsTheShardThenTheNextMountCommits) {
  std::vector<size_t> ends;
  const std::string old_file = Deflate(payloads_, Z_FULL_FLUSH, &ends);
  const std::string shard = s_.src + "/a.tfrecord.gz";
  WriteWholeFile(shard, old_file);
  MountConfig c = PackConfig(s_, {s_.src}, "edit");
  c.fault = "rewrite_mid_shard";
  {
    Mount d(c);
    ASSERT_EQ(d.Start(), absl::OkStatus());
    CommandResult edit = RunCommand(
        {"bash", "-c", absl::StrCat("echo 7000 > ", ShellQuote(s_.mnt + "/a.tfrecord.gz/020/id"))});
    ASSERT_EQ(edit.exit_code, 0) << edit.err;
    int status = 0;
    CommandResult u = d.TfrUnmount(&status);
    EXPECT_EQ(u.exit_code, 1) << u.out << u.err;
    ASSERT_TRUE(KilledBySigkill(status)) << d.Stderr();
    EXPECT_NE(d.Stderr().find("TFRECORDFS_FAULT=rewrite_mid_shard"), std::string::npos)
        << d.Stderr();
    CleanStaleMount(s_.mnt);
  }
  EXPECT_TRUE(ReadWholeFile(shard) == old_file) << "the crash changed the shard";
  c.fault = "";
  {
    Mount d(c);
    ASSERT_EQ(d.Start(), absl::OkStatus());
    int status = 0;
    CommandResult u = d.TfrUnmount(&status);
    EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
    EXPECT_NE(d.Stderr().find("4 of 5 unchanged deflate run(s) copied"), std::string::npos)
        << d.Stderr();
  }
  std::vector<std::string> expected = {"gzip"};
  for (int i = 0; i < kShardRecords; ++i) {
    expected.push_back(
        Described(i == 20 ? 7000 : i, absl::StrCat("record ", i), absl::StrCat(i, ".5")));
  }
  EXPECT_EQ(IndependentRead(shard), expected);
  const std::string new_file = ReadWholeFile(shard);
  for (size_t g = 1; g + 1 < ends.size(); ++g) {
    EXPECT_NE(new_file.find(old_file.substr(ends[g - 1], ends[g] - ends[g - 1])), std::string::npos)
        << "group " << g << " was not copied";
  }
}

// Sync flushes from one deflate state: byte-aligned, but each group refers
// back into the one before it; the commit must not copy those (they would
// inflate to other bytes, or fail, in the new stream): the records read
// back right (EditAndCommit), and the groups after the first are not there.
TEST_F(GzipRunsTest, SyncFlushedGroupsThatReferBackAreDeflatedAgain) {
  std::vector<size_t> ends;
  const std::string old_file = Deflate(payloads_, Z_SYNC_FLUSH, &ends);
  const std::string new_file = EditAndCommit(old_file);
  ASSERT_EQ(ends.size(), 6u);
  for (size_t g = 1; g + 1 < ends.size(); ++g) {
    EXPECT_EQ(new_file.find(old_file.substr(ends[g - 1], ends[g] - ends[g - 1])), std::string::npos)
        << "group " << g;
  }
}

}  // namespace
}  // namespace tfrecordfs::mount_test::staging_test
