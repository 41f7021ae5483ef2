// scan::Scan's listing: the entries a mount mirrors (directories included),
// their parents and order, which files are shards, and the hooks.
#include "tfrecordfs/scan/scan.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing/files.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/record/writer.h"

namespace tfrecordfs::scan {
namespace {

using test::WriteFile;

std::string Shard(int records) {
  std::string out;
  for (int i = 0; i < records; ++i) record::AppendFramed(&out, std::string(5, 'a' + i));
  return out;
}

class ScanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    dir_ = tmp_.path();
  }

  test::TempDir tmp_{"scan_test"};
  std::string dir_;
};

TEST_F(ScanTest, EntriesMirrorTheSourcesWithParents) {
  const std::string a = dir_ + "/a", b = dir_ + "/b";
  ASSERT_EQ(0, ::mkdir(a.c_str(), 0755));
  ASSERT_EQ(0, ::mkdir((a + "/train").c_str(), 0755));
  ASSERT_EQ(0, ::mkdir((a + "/empty").c_str(), 0755));
  ASSERT_EQ(0, ::mkdir(b.c_str(), 0755));
  WriteFile(a + "/train/x.tfrecord", Shard(3));
  WriteFile(a + "/notes.txt", "hello\n");
  WriteFile(b + "/y.tfrecord", "not a shard at all");
  WriteFile(dir_ + "/z.tfrecord", Shard(2));

  std::atomic<int> others{0};
  size_t files_seen = 0;
  ScanOptions options;
  options.sources = {a, b + "/y.tfrecord", dir_ + "/z.tfrecord"};
  options.threads = 2;
  options.before_probe = [&](size_t files, int threads) {
    files_seen = files;
    EXPECT_GE(threads, 1);
  };
  options.on_other = [&](const OtherFile&) { ++others; };
  auto result = Scan(options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(4u, files_seen);
  EXPECT_EQ(2, others.load());

  // Source by source, a directory before its entries, by name within one.
  std::vector<std::string> paths;
  for (const SourceEntry& e : result->entries) paths.push_back(e.mount_path);
  EXPECT_EQ((std::vector<std::string>{"empty", "notes.txt", "train", "train/x.tfrecord",
                                      "y.tfrecord", "z.tfrecord"}),
            paths);
  const auto& entries = result->entries;
  EXPECT_EQ(kAtRoot, entries[0].parent);
  EXPECT_TRUE(S_ISDIR(entries[0].st.st_mode));
  EXPECT_EQ(2u, entries[3].parent);  // train/x.tfrecord in train
  EXPECT_EQ(a + "/train/x.tfrecord", entries[3].path);
  EXPECT_EQ(kAtRoot, entries[4].parent);

  ASSERT_EQ(2u, result->shards.size());
  EXPECT_EQ(3u, result->shards[0].entry);
  EXPECT_EQ(3u, result->shards[0].index->num_records());
  EXPECT_EQ(5u, result->shards[1].entry);
  ASSERT_EQ(2u, result->others.size());
  EXPECT_EQ(1u, result->others[0].entry);
  EXPECT_EQ("", NotAShardNote(result->others[0]));  // notes.txt: nothing to say
  EXPECT_EQ(4u, result->others[1].entry);
  EXPECT_EQ(b + "/y.tfrecord: named like a TFRecord shard, but its first 12 bytes are not a "
                "record header with a valid length CRC (byte offset 0)",
            NotAShardNote(result->others[1]));
}

TEST(NamedLikeAShardTest, OnlyShardWritersNames) {
  for (const char* name : {"train.tfrecord", "train.tfrecords", "a.record", "a.records", "x.tfrec",
                           "test-3.tfr", "train-00001-of-00010", "data.tfrecord-00000-of-00004",
                           "train.tfrecord.gz", "train-00001-of-00010.gz", "x.tfrecord.zlib"}) {
    EXPECT_TRUE(NamedLikeAShard(name)) << name;
  }
  for (const char* name :
       {"tfrecordfs.1.scd", "my_tfrecord_notes.txt", "notes.json.gz", "archive.tar.gz",
        "train-00001-of-00010.json", ".tfrecord", "record", "records.txt", "x-1-of-2", ""}) {
    EXPECT_FALSE(NamedLikeAShard(name)) << name;
  }
}

TEST_F(ScanTest, TwoSourcesGivingOneNameFail) {
  const std::string a = dir_ + "/a", b = dir_ + "/b";
  ASSERT_EQ(0, ::mkdir(a.c_str(), 0755));
  ASSERT_EQ(0, ::mkdir(b.c_str(), 0755));
  WriteFile(a + "/x.tfrecord", Shard(1));
  WriteFile(b + "/x.tfrecord", Shard(1));
  ScanOptions options;
  options.sources = {a, b};
  bool probed = false;
  options.before_probe = [&](size_t, int) { probed = true; };
  auto result = Scan(options);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(absl::IsAlreadyExists(result.status())) << result.status();
  EXPECT_FALSE(probed);
}

}  // namespace
}  // namespace tfrecordfs::scan
