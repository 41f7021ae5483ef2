// ArrayRecord files in a real mount (issue 38): Grain's reference-writer
// files show their documented records; our writer's files with every
// compression and group sizes 1, 7 and 65536 show exactly what a TFRecord
// shard of the same payloads shows (features for Example payloads,
// record.bin for the rest, whose bytes are the payloads written); a damaged
// chunk is EIO for its records only, logged with its byte offset. Edits:
// mount_arrayrecord_edit_test.cc.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "mount_harness.h"
#include "testing/bytes.h"
#include "testing/shard.h"
#include "tfrecordfs/arrayrecord/file.h"
#include "tfrecordfs/arrayrecord/writer.h"
#include "tfrecordfs/base/file.h"

namespace tfrecordfs::mount_test {
namespace {

std::string Fixture(const std::string& name) {
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  return absl::StrCat(root ? root : ".", "/tests/unit/testdata/arrayrecord/", name);
}

// The record folders of a shard folder, in record order.
std::vector<std::string> RecordDirs(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  EXPECT_NE(d, nullptr) << dir;
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (!n.empty() &&
        std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      out.push_back(n);
    }
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    return std::stoull(a) < std::stoull(b);
  });
  return out;
}

std::vector<std::string> Payloads() {
  std::vector<std::string> out;
  for (int i = 0; i < 30; ++i) {
    if (i % 3 == 2) {
      // Not an Example: shown as record.bin.
      std::string raw = absl::StrCat("\xff\xfe raw payload ", i, " ");
      raw.append(static_cast<size_t>(i * 997 % 70000), static_cast<char>('a' + i % 26));
      out.push_back(raw);
    } else {
      out.push_back(
          test::LabelTextExample(static_cast<uint64_t>(i * 11), absl::StrCat("text of ", i)));
    }
  }
  return out;
}

void WriteArrayRecord(const std::string& path, const std::vector<std::string>& records,
                      arrayrecord::WriterOptions o) {
  auto bytes = arrayrecord::WriteToString(records, o);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  WriteWholeFile(path, *bytes);
}

class ArrayRecordMountTest : public ::testing::Test {
 protected:
  void SetUp() override { TFRFS_SKIP_WITHOUT_FUSE(); }
  TempDir tmp_;
};

TEST_F(ArrayRecordMountTest, GrainReferenceFilesShowTheirDocumentedRecords) {
  // grain/_src/python/data_loader_test.py: b"0" .. b"9" over the two files.
  const std::string dir = tmp_.Subdir("grain");
  for (const char* name :
       {"digits.array_record-00000-of-00002", "digits.array_record-00001-of-00002"}) {
    WriteWholeFile(dir + "/" + name, ReadWholeFile(Fixture(name)));
  }
  Mount m;
  ASSERT_EQ(m.Start({dir}), absl::OkStatus());
  std::vector<std::string> got;
  for (const char* name :
       {"digits.array_record-00000-of-00002", "digits.array_record-00001-of-00002"}) {
    const std::string shard = m.path(name);
    struct stat st;
    ASSERT_EQ(::stat(shard.c_str(), &st), 0) << shard;
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    const auto records = RecordDirs(shard);
    EXPECT_EQ(records.size(), 5u);
    for (const auto& r : records) {
      // cat(1), as a user reads it.
      CommandResult c = Shell("cat " + ShellQuote(shard + "/" + r + "/record.bin"));
      EXPECT_EQ(c.exit_code, 0) << c.err;
      got.push_back(c.out);
    }
  }
  EXPECT_EQ(got, (std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}));
}

TEST_F(ArrayRecordMountTest, EveryCompressionAndGroupSizeShowsWhatTheTfrecordTwinShows) {
  const std::string dir = tmp_.Subdir("data");
  const std::vector<std::string> payloads = Payloads();
  ASSERT_NO_FATAL_FAILURE(test::WriteShard(dir + "/twin.tfrecord", payloads));
  std::vector<std::string> names;
  for (auto c : {arrayrecord::Compression::kNone, arrayrecord::Compression::kBrotli,
                 arrayrecord::Compression::kZstd, arrayrecord::Compression::kSnappy}) {
    for (uint64_t group : {1, 7, 65536}) {
      arrayrecord::WriterOptions o;
      o.compression = c;
      o.group_size = group;
      o.level = c == arrayrecord::Compression::kBrotli ? 6 : 3;
      // Named as TFDS names them: recognised by content, not by name.
      const std::string name = absl::StrCat("ds-", arrayrecord::CompressionName(c), group,
                                            ".array_record-00000-of-00001");
      ASSERT_NO_FATAL_FAILURE(WriteArrayRecord(dir + "/" + name, payloads, o));
      names.push_back(name);
    }
  }
  Mount m;
  ASSERT_EQ(m.Start({dir}, {"-o", "inflate_cache_mb=1"}), absl::OkStatus());
  const auto twin = WalkTree(m.path("twin.tfrecord"));
  ASSERT_FALSE(twin.empty());
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const auto got = WalkTree(m.path(name));
    ASSERT_EQ(got.size(), twin.size());
    for (const auto& [rel, want] : twin) {
      auto it = got.find(rel);
      ASSERT_NE(it, got.end()) << rel;
      EXPECT_EQ(it->second.error, 0) << rel;
      EXPECT_EQ(it->second.mode, want.mode) << rel;
      EXPECT_EQ(it->second.size, want.size) << rel;
      EXPECT_TRUE(it->second.content == want.content) << rel;
    }
    // And against the writer's input itself: raw payloads byte for byte,
    // Examples as features (record i's label is 11 i).
    const auto records = RecordDirs(m.path(name));
    ASSERT_EQ(records.size(), payloads.size());
    for (size_t i = 0; i < payloads.size(); ++i) {
      const std::string rec = m.path(name) + "/" + records[i];
      if (i % 3 == 2) {
        EXPECT_TRUE(ReadWholeFile(rec + "/record.bin") == payloads[i]) << rec;
      } else {
        CommandResult c = Shell("cat " + ShellQuote(rec + "/label"));
        EXPECT_EQ(c.exit_code, 0) << c.err;
        EXPECT_NE(c.out.find(std::to_string(i * 11)), std::string::npos) << rec << ": " << c.out;
      }
    }
  }
}

TEST_F(ArrayRecordMountTest, DamagedChunkIsEioForItsRecordsOnlyAndLoggedWithItsOffset) {
  const std::string dir = tmp_.Subdir("bad");
  std::vector<std::string> payloads;
  for (int i = 0; i < 20; ++i) payloads.push_back(absl::StrCat("payload number ", i, " of twenty"));
  arrayrecord::WriterOptions o;
  o.compression = arrayrecord::Compression::kNone;
  o.group_size = 5;
  auto bytes = arrayrecord::WriteToString(payloads, o);
  ASSERT_TRUE(bytes.ok());
  const size_t at = bytes->find("payload number 7 ");
  ASSERT_NE(at, std::string::npos);
  (*bytes)[at + 2] ^= 0x01;
  const std::string file = dir + "/bad.array_record";
  WriteWholeFile(file, *bytes);
  auto fd = OpenFile(file, O_RDONLY);
  ASSERT_TRUE(fd.ok());
  auto layout = arrayrecord::ReadLayout(fd->get(), file, bytes->size());
  ASSERT_TRUE(layout.ok());
  const uint64_t chunk1 = layout->chunks[1].offset;

  Mount m;
  ASSERT_EQ(m.Start({dir}), absl::OkStatus());
  const auto records = RecordDirs(m.path("bad.array_record"));
  ASSERT_EQ(records.size(), 20u);
  for (size_t i = 0; i < records.size(); ++i) {
    const std::string path = m.path("bad.array_record/" + records[i] + "/record.bin");
    CommandResult c = Shell("cat " + ShellQuote(path));
    if (i >= 5 && i < 10) {
      EXPECT_NE(c.exit_code, 0) << path;
      EXPECT_NE(c.err.find("Input/output error"), std::string::npos) << c.err;
    } else {
      EXPECT_EQ(c.exit_code, 0) << path << ": " << c.err;
      EXPECT_EQ(c.out, payloads[i]);
    }
  }
  const std::string log = m.Stderr();
  EXPECT_NE(log.find(absl::StrCat("chunk at byte offset ", chunk1)), std::string::npos) << log;
  EXPECT_NE(log.find("data hash mismatch"), std::string::npos) << log;
  std::string error;
  EXPECT_EQ(m.Stop(&error), 0) << error;

  // Mounted again, from the index the first mount saved: the same records
  // read, the same ones fail.
  Mount again;
  ASSERT_EQ(again.Start({dir}), absl::OkStatus());
  ASSERT_EQ(RecordDirs(again.path("bad.array_record")).size(), 20u);
  for (size_t i = 0; i < records.size(); ++i) {
    const std::string path = again.path("bad.array_record/" + records[i] + "/record.bin");
    CommandResult c = Shell("cat " + ShellQuote(path));
    if (i >= 5 && i < 10) {
      EXPECT_NE(c.exit_code, 0) << path;
    } else {
      EXPECT_EQ(c.out, payloads[i]) << path << ": " << c.err;
    }
  }
}

TEST_F(ArrayRecordMountTest, TransposedFileIsRefusedNamingTheFileAndWhy) {
  const std::string dir = tmp_.Subdir("t");
  std::vector<std::string> payloads = {"a", "b", "c"};
  auto bytes = arrayrecord::WriteToString(payloads, arrayrecord::WriterOptions());
  ASSERT_TRUE(bytes.ok());
  auto h = arrayrecord::ParseChunkHeader(bytes->substr(64, 40));
  ASSERT_TRUE(h.ok());
  h->type = arrayrecord::kTransposedChunk;
  bytes->replace(64, 40, arrayrecord::EncodeChunkHeader(*h));
  WriteWholeFile(dir + "/t.array_record", *bytes);
  test::WriteShard(dir + "/ok.tfrecord", {"x"});
  Mount m;
  ASSERT_EQ(m.Start({dir}), absl::OkStatus());
  EXPECT_EQ(RecordDirs(m.path("ok.tfrecord")).size(), 1u);
  // Refused as a shard with too many records is: shown as the plain file.
  struct stat st;
  ASSERT_EQ(::stat(m.path("t.array_record").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(static_cast<size_t>(st.st_size), bytes->size());
  const std::string log = m.Stderr();
  EXPECT_NE(log.find("t.array_record"), std::string::npos) << log;
  EXPECT_NE(log.find("transposed chunk"), std::string::npos) << log;
}

}  // namespace
}  // namespace tfrecordfs::mount_test
