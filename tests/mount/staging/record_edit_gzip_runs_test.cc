// A commit of one edited record in a GZIP shard copies the deflate blocks
// that did not change as they are (record/deflate_runs.h), and deflates
// again only the blocks around the edit; a shard whose flushed pieces refer
// back to each other is deflated again whole. Judged by the independent
// reader (tests/cli/tfrecord_check.py), zcat, and the file's bytes.
#include <zlib.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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

// Lines of the daemon's debug log (-o verbose) saying it walked (inflated
// and indexed) the shard `name`: IndexStore::Load's "PATH: walked (why)".
size_t WalksOf(const std::string& log, const std::string& name) {
  size_t n = 0;
  for (size_t at = log.find(name + ": walked"); at != std::string::npos;
       at = log.find(name + ": walked", at + 1)) {
    ++n;
  }
  return n;
}

// A shard gzip or TensorFlow wrote (one deflate state, no flush: nothing to
// copy), large enough for several checkpoints (1 MiB spans): the commit
// deflates it whole and its check after write inflates the new file once;
// the new file's index is what that inflate found (records, checkpoints,
// windows), so the daemon does not inflate the new file a second time to
// index it (before: IndexStore::Load walked it once more after the rename,
// a whole-file inflate in every commit's time), and reads through the same
// mount and through the next one (index from the cache the commit wrote)
// come from that index: each id read at random places, against the edit.
TEST_F(GzipRunsTest, ForeignShardIsIndexedByTheCheckAfterWriteNotWalkedAgain) {
  constexpr int kRecords = 400;
  std::vector<std::string> payloads;
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < kRecords; ++i) {
    std::string blob(12000, 'a');
    for (char& ch : blob) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      ch = static_cast<char>('a' + x % 26);  // about 4.7 bits a byte: 3.4 MB of GZIP
    }
    payloads.push_back(ExamplePayload({Int64Feature("id", {i}), BytesFeature("blob", {blob})}));
  }
  std::vector<size_t> ends;
  const std::string shard = s_.src + "/a.tfrecord.gz";
  WriteWholeFile(shard, Deflate(payloads, Z_NO_FLUSH, &ends));
  MountConfig c = PackConfig(s_, {s_.src}, "edit");
  c.options.push_back("verbose");
  // Record ids read through the mount, from the last record backwards
  // (each read resumes from a checkpoint of the index).
  std::string ids_script, want;
  for (int i = kRecords - 1; i >= 0; i -= 23) {
    absl::StrAppend(&ids_script, "cat ",
                    ShellQuote(absl::StrFormat("%s/a.tfrecord.gz/%03d/id", s_.mnt, i)), "\n");
    absl::StrAppend(&want, i == 120 ? 7000 : i, "\n");
  }
  {
    Mount d(c);
    ASSERT_EQ(d.Start(), absl::OkStatus());
    CommandResult edit = RunCommand(
        {"bash", "-c", absl::StrCat("echo 7000 > ", ShellQuote(s_.mnt + "/a.tfrecord.gz/120/id"))});
    ASSERT_EQ(edit.exit_code, 0) << edit.err;
    const size_t walks = WalksOf(d.Stderr(), "a.tfrecord.gz");
    EXPECT_EQ(walks, 1u) << d.Stderr();  // the mount's own walk of the old file
    CommandResult commit = RunCommand({BinaryPath(), "commit", s_.mnt});
    ASSERT_EQ(commit.exit_code, 0) << commit.out << commit.err;
    EXPECT_NE(commit.out.find("changed 1"), std::string::npos) << commit.out;
    EXPECT_EQ(WalksOf(d.Stderr(), "a.tfrecord.gz"), walks)
        << "the new file was inflated again to index it:\n"
        << d.Stderr();
    CommandResult read = RunCommand({"bash", "-c", ids_script});
    EXPECT_EQ(read.exit_code, 0) << read.err;
    EXPECT_EQ(read.out, want);
    int st = 0;
    CommandResult un = d.TfrUnmount(&st);
    EXPECT_EQ(un.exit_code, 0) << un.out << un.err;
  }
  // The independent reader: one GZIP stream, every id, record 120's new.
  const std::vector<std::string> lines = IndependentRead(shard);
  ASSERT_EQ(lines.size(), static_cast<size_t>(kRecords) + 1);
  EXPECT_EQ(lines[0], "gzip");
  for (int i = 0; i < kRecords; ++i) {
    EXPECT_TRUE(absl::EndsWith(lines[i + 1], absl::StrCat(" id:int64:", i == 120 ? 7000 : i)))
        << i << ": " << lines[i + 1].substr(0, 40) << "..."
        << lines[i + 1].substr(std::max<size_t>(lines[i + 1].size(), 40) - 40);
  }
  // The next mount takes the index the commit saved (no walk), and reads
  // the same through it.
  Mount again(c);
  ASSERT_EQ(again.Start(), absl::OkStatus());
  CommandResult read = RunCommand({"bash", "-c", ids_script});
  EXPECT_EQ(read.exit_code, 0) << read.err;
  EXPECT_EQ(read.out, want);
  EXPECT_EQ(WalksOf(again.Stderr(), "a.tfrecord.gz"), 0u) << again.Stderr();
}

}  // namespace
}  // namespace tfrecordfs::mount_test::staging_test
