// Shard detection by name and content, and building a shard's offset index.
#include <sys/mman.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/utf8.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/writer.h"

namespace tfrecordfs::index {
namespace {

UniqueFd MemFile(absl::string_view bytes) {
  UniqueFd fd(::memfd_create("probe", MFD_CLOEXEC));
  EXPECT_TRUE(fd.valid());
  EXPECT_TRUE(WriteFull(fd.get(), bytes.data(), bytes.size(), "memfd").ok());
  return fd;
}

std::string Framed(const std::vector<std::string>& payloads) {
  std::string out;
  for (const std::string& p : payloads) record::AppendFramed(&out, p);
  return out;
}

Probe ProbeBytes(absl::string_view bytes, const std::string& path) {
  UniqueFd fd = MemFile(bytes);
  auto p = ProbeFile(fd.get(), path, bytes.size());
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : Probe::kNotShard;
}

TEST(LooksLikeShardNameTest, ShardNames) {
  for (const char* name : {"train.tfrecord", "train.tfrecords", "a.record", "a.records", "x.tfr",
                           "my_tfrecord_file", "data.tfrecord-00000-of-00004",
                           "train-00001-of-00010", "eval-001-of-100", "mnist-train.tfrecord"}) {
    EXPECT_TRUE(LooksLikeShardName(name)) << name;
  }
}

TEST(LooksLikeShardNameTest, OtherNames) {
  for (const char* name :
       {"dataset_info.json", "README", "features.json", "x-1-of-2", "train-00001-of-00010.json",
        "record", "image.jpg", "records.txt", "", "tfr"}) {
    EXPECT_FALSE(LooksLikeShardName(name)) << name;
  }
}

TEST(ProbeFileTest, ValidShardWhateverTheName) {
  const std::string shard = Framed({"a", "bb", ""});
  EXPECT_EQ(Probe::kShard, ProbeBytes(shard, "/d/train.tfrecord"));
  EXPECT_EQ(Probe::kShard, ProbeBytes(shard, "/d/data.bin"));
  EXPECT_EQ(Probe::kShard, ProbeBytes(Framed({""}), "/d/smallest"));  // 16 bytes
}

TEST(ProbeFileTest, OtherFiles) {
  EXPECT_EQ(Probe::kNotShard, ProbeBytes("{\"name\": \"mnist\"}", "/d/dataset_info.json"));
  EXPECT_EQ(Probe::kNotShard, ProbeBytes("hello", "/d/train.tfrecord"));
  EXPECT_EQ(Probe::kNotShard, ProbeBytes(std::string(100, '\0'), "/d/zeros.tfrecord"));
  EXPECT_EQ(Probe::kNotShard, ProbeBytes("short", "/d/short"));
  // A valid header whose record does not fit: a truncated single record.
  std::string cut = Framed({std::string(100, 'x')});
  cut.resize(50);
  EXPECT_EQ(Probe::kNotShard, ProbeBytes(cut, "/d/cut.bin"));
}

TEST(ProbeFileTest, EmptyFiles) {
  EXPECT_EQ(Probe::kShard, ProbeBytes("", "/d/empty.tfrecord"));
  EXPECT_EQ(Probe::kShard, ProbeBytes("", "/d/train-00000-of-00001"));
  EXPECT_EQ(Probe::kNotShard, ProbeBytes("", "/d/empty.txt"));
}

TEST(ProbeFileTest, DamagedFirstHeader) {
  std::string shard = Framed({std::string(40, 'a'), "second", "third"});
  shard[3] ^= 0x10;  // the first length field
  // Named like a shard: walked, and the records after the damage count.
  EXPECT_EQ(Probe::kShard, ProbeBytes(shard, "/d/train.tfrecord"));
  // Otherwise only the first header decides.
  EXPECT_EQ(Probe::kNotShard, ProbeBytes(shard, "/d/data.bin"));
}

TEST(BuildShardIndexTest, CleanShard) {
  const std::vector<std::string> payloads = {"one", "", std::string(70000, 'x'), "four"};
  const std::string bytes = Framed(payloads);
  UniqueFd fd = MemFile(bytes);
  struct stat st;
  ASSERT_EQ(0, ::fstat(fd.get(), &st));
  st.st_mtim.tv_sec = 1700000000;
  st.st_mtim.tv_nsec = 123;
  auto idx = BuildShardIndex(fd.get(), "/d/x.tfrecord", st);
  ASSERT_TRUE(idx.ok()) << idx.status();
  const ShardIndex& i = **idx;
  EXPECT_EQ("/d/x.tfrecord", i.path());
  EXPECT_EQ(bytes.size(), i.file_size());
  EXPECT_EQ(int64_t{1700000000} * 1000000000 + 123, i.mtime_ns());
  ASSERT_EQ(payloads.size(), i.num_records());
  ASSERT_EQ(payloads.size() + 1, i.offsets().size());
  uint64_t pos = 0;
  for (size_t r = 0; r < payloads.size(); ++r) {
    EXPECT_EQ(pos, i.begin(r));
    pos += payloads[r].size() + record::kFramingOverhead;
    EXPECT_EQ(pos, i.end(r));
    EXPECT_EQ(payloads[r].size(), i.end(r) - i.begin(r) - record::kFramingOverhead);
  }
  EXPECT_TRUE(i.problems().empty());
  EXPECT_GE(i.MemoryBytes(), i.offsets().size() * sizeof(uint64_t));
}

TEST(BuildShardIndexTest, EmptyShard) {
  UniqueFd fd = MemFile("");
  struct stat st;
  ASSERT_EQ(0, ::fstat(fd.get(), &st));
  auto idx = BuildShardIndex(fd.get(), "/d/e.tfrecord", st);
  ASSERT_TRUE(idx.ok());
  EXPECT_EQ(0u, (*idx)->num_records());
  EXPECT_EQ(std::vector<uint64_t>{0}, (*idx)->offsets());
}

TEST(BuildShardIndexTest, DamagedShardKeepsProblems) {
  std::string bytes = Framed({"a", "b", "c"});
  bytes += "xyz";  // stray bytes
  UniqueFd fd = MemFile(bytes);
  struct stat st;
  ASSERT_EQ(0, ::fstat(fd.get(), &st));
  auto idx = BuildShardIndex(fd.get(), "/d/t.tfrecord", st);
  ASSERT_TRUE(idx.ok());
  EXPECT_EQ(3u, (*idx)->num_records());
  ASSERT_EQ(1u, (*idx)->problems().size());
  EXPECT_EQ(bytes.size() - 3, (*idx)->problems()[0].offset);
}

TEST(ShardIndexTest, EmptyWalkStillHasAnEndOffset) {
  ShardIndex i("/p", 0, 0, record::WalkResult{});
  EXPECT_EQ(0u, i.num_records());
  EXPECT_EQ(1u, i.offsets().size());
}

// Issue 15, item 10: what is logged of a shard's problems.
TEST(EscapeForLogTest, ControlBytesAndInvalidUtf8AreEscaped) {
  EXPECT_EQ("plain text, caf\xc3\xa9 \xe6\x97\xa5",
            EscapeForLog("plain text, caf\xc3\xa9 \xe6\x97\xa5"));
  EXPECT_EQ("a\\nb\\tc\\\\d", EscapeForLog("a\nb\tc\\d"));
  EXPECT_EQ("\\x1b[31mred\\x1b[0m", EscapeForLog("\x1b[31mred\x1b[0m"));
  EXPECT_EQ("\\x00\\x7f\\x0d", EscapeForLog(std::string("\0\x7f\r", 3)));
  EXPECT_EQ("\\xff\\xc3", EscapeForLog("\xff\xc3"));  // invalid, truncated
  EXPECT_EQ("\\xc2\\x9b2J", EscapeForLog("\xc2\x9b"
                                         "2J"));    // C1 CSI
  EXPECT_EQ("\xc2\xa0", EscapeForLog("\xc2\xa0"));  // U+00A0 is printable
}

TEST(FormatProblemsTest, EscapedAndCapped) {
  std::vector<record::WalkProblem> problems;
  for (uint64_t i = 0; i < 25; ++i) problems.push_back({i * 100, "bad\n\x1b[2Jthing"});
  const std::vector<std::string> lines = FormatProblems("/d/x\n.tfrecord", problems, 20);
  ASSERT_EQ(21u, lines.size());
  EXPECT_EQ("/d/x\\n.tfrecord: byte offset 0: bad\\n\\x1b[2Jthing", lines[0]);
  EXPECT_EQ("/d/x\\n.tfrecord: byte offset 1900: bad\\n\\x1b[2Jthing", lines[19]);
  EXPECT_EQ("/d/x\\n.tfrecord: ... and 5 more problem(s)", lines[20]);
  for (const std::string& line : lines) EXPECT_EQ(std::string::npos, line.find('\n'));
  problems.resize(20);
  EXPECT_EQ(20u, FormatProblems("p", problems, 20).size());
  EXPECT_TRUE(FormatProblems("p", {}).empty());
}

}  // namespace
}  // namespace tfrecordfs::index
