// Editing the generated datasets (tfrecordfs-gen: SequenceExamples,
// images) and one label of a many-block GZIP/ZLIB shard through a real
// mount; untouched records stay byte for byte (the independent reader).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "record_edit_util.h"
#include "staging_util.h"

namespace tfrecordfs::mount_test::staging_test {
namespace {

// Editing what the generated datasets hold (tfrecordfs-gen): a
// SequenceExample's context values, an image replaced by `cp`; everything
// else of an edited record survives its round trip through the folder
// (compared with `tfrecordfs show` before and after), and untouched
// records stay byte for byte (the independent reader).
TEST(RecordEditGeneratedTest, SequenceExamplesAndImages) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  const char* gen = std::getenv("TFRECORDFS_GEN");
  ASSERT_NE(gen, nullptr) << "$TFRECORDFS_GEN is not set";
  Scratch s;
  const std::string seq = s.src + "/seq", sample = s.src + "/sample";
  ASSERT_EQ(0, RunCommand({gen, "sequence", seq, "--records", "3"}).exit_code);
  ASSERT_EQ(0, RunCommand({gen, "sample", sample, "--records", "4", "--shards", "1"}).exit_code);
  const std::string seq_shard = seq + "/sequence-00000-of-00001.tfrecord";
  const std::string img_shard = sample + "/train-00000-of-00001.tfrecord";
  auto show = [&](const std::string& shard, const std::string& record) {
    CommandResult r = RunCommand({BinaryPath(), "show", shard, record});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
    lines.erase(lines.begin());  // "# record N of ...: <size> bytes at <offset>"
    return lines;
  };
  const std::vector<std::string> seq0 = show(seq_shard, "0");
  const std::vector<std::string> seq_before = IndependentRead(seq_shard);
  MountConfig c = PackConfig(s, {s.src}, "edit");
  Mount d(c);
  ASSERT_EQ(d.Start(), absl::OkStatus());
  const std::string m0 = s.mnt + "/seq/sequence-00000-of-00001.tfrecord/0";
  const std::string jpeg =
      ReadWholeFile(s.mnt + "/sample/train-00000-of-00001.tfrecord/1/image/encoded.jpg");
  CommandResult edit = RunCommand(
      {"bash", "-c",
       absl::StrCat(
           "set -e; echo 5 > ", ShellQuote(m0 + "/context/label"), "; sed -i 's/.*/renamed/' ",
           ShellQuote(m0 + "/context/name.txt"), "; cp ",
           ShellQuote(s.mnt + "/sample/train-00000-of-00001.tfrecord/1/image/encoded.jpg"), " ",
           ShellQuote(s.mnt + "/sample/train-00000-of-00001.tfrecord/0/image/encoded.jpg"))});
  ASSERT_EQ(edit.exit_code, 0) << edit.err;
  int status = 0;
  CommandResult un = d.TfrUnmount(&status);
  EXPECT_EQ(un.exit_code, 0) << un.out << un.err;
  // The edited SequenceExample: only the two context values changed.
  std::vector<std::string> want = seq0, got = show(seq_shard, "0");
  // `show` prints the context's features as "  label  int64[1]  0".
  for (std::string& line : want) {
    if (absl::StartsWith(line, "  label ") || absl::StartsWith(line, "  name ")) line = "";
  }
  std::vector<std::string> got_rest = got;
  for (std::string& line : got_rest) {
    if (absl::StartsWith(line, "  label ")) {
      EXPECT_TRUE(absl::StrContains(line, " 5")) << line;
      line = "";
    }
    if (absl::StartsWith(line, "  name ")) {
      EXPECT_TRUE(absl::StrContains(line, "\"renamed\"")) << line;
      line = "";
    }
  }
  EXPECT_EQ(got_rest, want);
  // Untouched records: the same bytes.
  const std::vector<std::string> seq_after = IndependentRead(seq_shard);
  ASSERT_EQ(seq_after.size(), seq_before.size());
  EXPECT_NE(seq_after[1], seq_before[1]);
  EXPECT_EQ(seq_after[2], seq_before[2]);
  EXPECT_EQ(seq_after[3], seq_before[3]);
  // The image replaced by cp: its exact bytes, read by the independent reader.
  const std::string img = WithChecker(
      "p = next(iter(t.read_records(sys.argv[1])))\n"
      "sys.stdout.buffer.write(t.decode_example(p)['image/encoded'][1][0])\n",
      img_shard);
  EXPECT_TRUE(img == jpeg) << "record 0's image is not the copied JPEG";
}

// Issue 36: a commit of one label in a compressed shard of many deflate
// blocks (8 MiB of framing: eight blocks the writer deflates at once,
// record/deflate.h), through `echo >` and `tfrecordfs commit` on a real
// mount. Python's gzip module reads the result whole (its CRC-32 and size
// checked), zlib finds exactly one GZIP member (ZLIB: one stream, nothing
// after it), and the independent reader finds every record: the edited one
// with its new label, every other one byte for byte as before.
class CompressedCommitTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CompressedCommitTest, OneLabelOfAManyBlockShard) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  const std::string codec = GetParam();
  Scratch s;
  constexpr int kCount = 80;
  std::vector<std::string> payloads;
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < kCount; ++i) {
    // 100 KiB that deflates to about half: words drawn at random.
    std::string blob;
    while (blob.size() < (100 << 10)) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      blob += absl::StrCat("w", x % 4096, " ");
    }
    payloads.push_back(ExamplePayload({Int64Feature("label", {i}), BytesFeature("blob", {blob})}));
  }
  const std::string name = WriteShardWithCodec(s.src, "a.tfrecord", payloads, codec);
  ASSERT_FALSE(HasFailure());
  const std::string shard = s.src + "/" + name;
  // One line per record: its label and the SHA-256 of its payload; first,
  // the stream's own check (Python's gzip / zlib modules).
  auto read = [&] {
    return std::vector<std::string>(absl::StrSplit(
        WithChecker(
            absl::StrCat("import gzip, hashlib, zlib\n"
                         "raw = open(sys.argv[1], 'rb').read()\n",
                         codec == "gzip" ? "data = gzip.decompress(raw)\n"
                                           "d = zlib.decompressobj(31); d.decompress(raw)\n"
                                         : "d = zlib.decompressobj(15); data = d.decompress(raw)\n",
                         "print('one stream', d.eof and not d.unused_data, len(data))\n"
                         "for p in t.read_records(sys.argv[1]):\n"
                         "  print(t.decode_example(p)['label'][1][0], "
                         "hashlib.sha256(p).hexdigest())\n"),
            shard),
        '\n', absl::SkipEmpty()));
  };
  const std::vector<std::string> before = read();
  ASSERT_EQ(before.size(), 1u + kCount);
  Mount d(PackConfig(s, {s.src}, "edit"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  CommandResult edit = RunCommand(
      {"bash", "-c", absl::StrCat("echo 7000 > ", ShellQuote(s.mnt + "/" + name + "/37/label"))});
  ASSERT_EQ(edit.exit_code, 0) << edit.err;
  CommandResult commit = RunCommand({BinaryPath(), "commit", s.mnt});
  ASSERT_EQ(commit.exit_code, 0) << commit.out << commit.err;
  EXPECT_NE(commit.out.find(absl::StrCat("rewrote ", shard, ": kept 79, changed 1")),
            std::string::npos)
      << commit.out;
  EXPECT_EQ(ReadWholeFile(s.mnt + "/" + name + "/37/label"), "7000\n");
  const std::vector<std::string> after = read();
  ASSERT_EQ(after.size(), before.size());
  EXPECT_TRUE(absl::StartsWith(after[0], "one stream True ")) << after[0];
  for (int i = 0; i < kCount; ++i) {
    if (i == 37) {
      EXPECT_TRUE(absl::StartsWith(after[1 + i], "7000 ")) << after[1 + i];
    } else {
      EXPECT_EQ(after[1 + i], before[1 + i]) << "record " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, CompressedCommitTest, ::testing::Values("gzip", "zlib"));

}  // namespace
}  // namespace tfrecordfs::mount_test::staging_test
