// What the daemon's log file holds: rotation when a mount starts
// (base/log.h), and a damaged record logged once however often it is read
// (vfs, through its public operations).
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "testing/shard.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/vfs/filesystem.h"

namespace tfrecordfs {
namespace {

class LogTest : public ::testing::Test {
 protected:
  static std::string Slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static void Spit(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
  }

  test::TempDir tmp_{"log_test"};
  const std::string dir_ = tmp_.path();
};

TEST_F(LogTest, AppendsBelowTheRotationSize) {
  const std::string path = dir_ + "/a/b/m.log";  // parents are made
  auto start = log::UseFile(path, "first mount", 1000);
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_EQ(*start, 0u);
  const uint64_t size = Slurp(path).size();
  start = log::UseFile(path, "second mount", 1000);
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_EQ(*start, size);  // where the second mount's lines begin
  const std::string text = Slurp(path);
  EXPECT_TRUE(absl::StrContains(text, "first mount")) << text;
  EXPECT_TRUE(absl::StrContains(text, "second mount")) << text;
  EXPECT_FALSE(std::filesystem::exists(path + ".1"));
}

TEST_F(LogTest, KeepsALargeLogAsDotOneAndBeginsANewOne) {
  const std::string path = dir_ + "/m.log";
  const std::string old(1000, 'x');
  Spit(path, old);
  Spit(path + ".1", "an older rotation");
  auto start = log::UseFile(path, "this mount", 1000);
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_EQ(*start, 0u);
  EXPECT_EQ(Slurp(path + ".1"), old);  // the older .1 is replaced
  const std::string text = Slurp(path);
  EXPECT_TRUE(absl::StrContains(text, "this mount")) << text;
  EXPECT_FALSE(absl::StrContains(text, "xxx")) << text;
  log::Error("after the rotation");
  EXPECT_TRUE(absl::StrContains(Slurp(path), "error: after the rotation"));
}

TEST_F(LogTest, ZeroNeverRotates) {
  const std::string path = dir_ + "/m.log";
  Spit(path, std::string(5000, 'x'));
  auto start = log::UseFile(path, "this mount", 0);
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_EQ(*start, 5000u);
  EXPECT_FALSE(std::filesystem::exists(path + ".1"));
}

// Two records, the second with a corrupt payload (its data CRC fails when
// it is read; the header walk does not read payloads).
std::string WriteShardWithDamagedSecondRecord(const std::string& path) {
  test::WriteShard(path, {"first payload", "second payload"});
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  const std::streamoff at = 12 + 13 + 4 + 12 + 3;  // inside "second payload"
  f.seekp(at);
  f.put('#');
  return path;
}

TEST_F(LogTest, ADamagedRecordIsLoggedOnceHoweverOftenItIsRead) {
  const std::string shard = WriteShardWithDamagedSecondRecord(dir_ + "/d.tfrecord");
  const std::string path = dir_ + "/m.log";
  ASSERT_TRUE(log::UseFile(path, "damage", 0).ok());
  vfs::Options options;
  options.sources = {shard};
  options.cache_records = 1;  // every other record read evicts the last
  auto fs = vfs::Filesystem::Create(options);
  ASSERT_TRUE(fs.ok()) << fs.status();
  auto shard_dir = (*fs)->Lookup(1, "d.tfrecord");
  ASSERT_TRUE(shard_dir.ok()) << shard_dir.status();
  auto good = (*fs)->Lookup(shard_dir->ino, "0");
  auto bad = (*fs)->Lookup(shard_dir->ino, "1");
  ASSERT_TRUE(good.ok()) << good.status();
  ASSERT_TRUE(bad.ok()) << bad.status();
  const auto list = [&](uint64_t ino) {
    return (*fs)->ReadDir(ino, 0,
                          [](absl::string_view, const vfs::Attr&, uint64_t) { return true; });
  };
  for (int epoch = 0; epoch < 3; ++epoch) {
    EXPECT_TRUE(list(good->ino).ok());
    const absl::Status s = list(bad->ino);
    EXPECT_FALSE(s.ok()) << "epoch " << epoch;  // damaged every time
  }
  int errors = 0;
  for (absl::string_view line : absl::StrSplit(Slurp(path), '\n')) {
    if (absl::StrContains(line, " error: ")) ++errors;
  }
  EXPECT_EQ(errors, 1) << Slurp(path);
}

}  // namespace
}  // namespace tfrecordfs
