// TFDS's dataset_info.json beside a rewritten shard (repack/tfds_info.h),
// read back with nlohmann/json.
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/temp_dir.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/repack/tfds_info.h"

namespace tfrecordfs::repack {
namespace {

TEST(TfdsShardNameTest, ParsesTfdsNamesOnly) {
  auto n = ParseTfdsShardName("mnist-train.tfrecord-00003-of-00016");
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->split, "train");
  EXPECT_EQ(n->index, 3u);
  EXPECT_EQ(n->count, 16u);
  auto dashed = ParseTfdsShardName("my-data-set-validation.array_record-00000-of-00001");
  ASSERT_TRUE(dashed.has_value());
  EXPECT_EQ(dashed->split, "validation");
  EXPECT_FALSE(ParseTfdsShardName("train-00000-of-00004.tfrecord").has_value());
  EXPECT_FALSE(ParseTfdsShardName("mnist-train.tfrecord-00016-of-00016").has_value());
  EXPECT_FALSE(ParseTfdsShardName("mnist-train.tfrecord-0003-of-00016").has_value());
  EXPECT_FALSE(ParseTfdsShardName("train.tfrecord-00003-of-00016").has_value());
}

class TfdsInfoTest : public ::testing::Test {
 protected:
  void Write(const std::string& json) {
    ASSERT_TRUE(WriteFileAtomically(dir_.Join("dataset_info.json"), json).ok());
  }
  nlohmann::json Read() {
    auto text = ReadFileToString(dir_.Join("dataset_info.json"));
    EXPECT_TRUE(text.ok());
    return nlohmann::json::parse(*text);
  }
  test::TempDir dir_;
};

TEST_F(TfdsInfoTest, SetsTheShardLengthAndMovesNumBytesKeepingTheRest) {
  Write(R"({"name": "mnist", "splits": [
      {"name": "test", "numBytes": "100", "shardLengths": ["5"]},
      {"name": "train", "numBytes": "1000", "shardLengths": ["10", "12"],
       "filepathTemplate": "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"}],
      "version": "3.0.1"})");
  auto r = UpdateTfdsInfo(dir_.Join("mnist-train.tfrecord-00001-of-00002"), 9, -30);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ(**r, dir_.Join("dataset_info.json"));
  const nlohmann::json j = Read();
  EXPECT_EQ(j["splits"][1]["shardLengths"], nlohmann::json::array({"10", "9"}));
  EXPECT_EQ(j["splits"][1]["numBytes"], "970");
  EXPECT_EQ(j["splits"][0]["shardLengths"], nlohmann::json::array({"5"}));  // other split
  EXPECT_EQ(j["version"], "3.0.1");
  EXPECT_EQ(j["splits"][1]["filepathTemplate"], "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}");
  // Idempotent without a byte delta (recovery).
  ASSERT_TRUE(UpdateTfdsInfo(dir_.Join("mnist-train.tfrecord-00001-of-00002"), 9, {}).ok());
  EXPECT_EQ(Read(), j);
}

TEST(CommittedTfdsInfoJsonTest, ChangesOnlyTheTwoValuesKeepingEveryOtherByte) {
  // Not nlohmann's layout: compact in places, tabs, an escaped non-ASCII
  // character, a float, a repeated lookalike key in another object.
  const std::string text =
      "{\"name\":\"d\",\"description\":\"caf\\u00e9 \\\"x\\\"\",\n"
      "\t\"splits\": [ {\"name\": \"test\", \"shardLengths\": [\"5\"], \"numBytes\": \"9\"},\n"
      "\t\t{ \"numBytes\" :1000, \"name\":\"train\",\"shardLengths\":[10 , 12],"
      "\"ratio\": 1.50} ],\n"
      "\"other\": {\"shardLengths\": [1], \"numBytes\": 2}}\n";
  auto r = CommittedTfdsInfoJson(text, "d-train.tfrecord-00001-of-00002", 9, -30, "info");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value());
  std::string want = text;
  want.replace(want.find("12]"), 2, "9");
  want.replace(want.find(":1000"), 5, ":970");
  EXPECT_EQ(**r, want);
  // Text a commit cannot place values in (a repeated key) is written anew.
  auto again = CommittedTfdsInfoJson(
      R"({"splits": [{"name": "train", "shardLengths": [1], "shardLengths": [3]}]})",
      "d-train.tfrecord-00000-of-00001", 2, std::nullopt, "info");
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_TRUE(again->has_value());
  EXPECT_EQ(nlohmann::json::parse(**again)["splits"][0]["shardLengths"],
            nlohmann::json::array({2}));
}

TEST_F(TfdsInfoTest, NumbersStayNumbers) {
  Write(R"({"splits": [{"name": "train", "numBytes": 50, "shardLengths": [3, 4]}]})");
  ASSERT_TRUE(UpdateTfdsInfo(dir_.Join("d-train.tfrecord-00000-of-00002"), 2, 7).ok());
  const nlohmann::json j = Read();
  EXPECT_EQ(j["splits"][0]["shardLengths"], nlohmann::json::array({2, 4}));
  EXPECT_EQ(j["splits"][0]["numBytes"], 57);
}

TEST_F(TfdsInfoTest, LeavesAloneWhatItCannotMatch) {
  const std::string json = R"({"splits": [{"name": "train", "shardLengths": ["3", "4", "5"]}]})";
  Write(json);
  // Another shard count, another split, not a TFDS name.
  for (const char* name : {"d-train.tfrecord-00000-of-00002", "d-test.tfrecord-00000-of-00003",
                           "train-00000-of-00003.tfrecord"}) {
    auto r = UpdateTfdsInfo(dir_.Join(name), 1, 0);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(r->has_value()) << name;
  }
  EXPECT_EQ(*ReadFileToString(dir_.Join("dataset_info.json")), json);
  // No dataset_info.json at all.
  test::TempDir empty;
  auto none = UpdateTfdsInfo(empty.Join("d-train.tfrecord-00000-of-00003"), 1, 0);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  // Not JSON: an error naming the file.
  Write("{not json");
  auto bad = UpdateTfdsInfo(dir_.Join("d-train.tfrecord-00000-of-00003"), 1, 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("dataset_info.json"), std::string::npos);
}

// The rewrite's two steps: the updated file waits beside the shard until
// FinishTfdsInfo renames it into place (again: nothing), or is discarded.
TEST_F(TfdsInfoTest, PreparedFileHoldsTheResultUntilFinished) {
  const std::string before =
      R"({"splits": [{"name": "train", "numBytes": "100", "shardLengths": ["3", "4"]}]})";
  Write(before);
  const std::string shard = dir_.Join("d-train.tfrecord-00001-of-00002");
  auto prepared = PrepareTfdsInfo(shard, 6, -20);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_TRUE(*prepared);
  EXPECT_EQ(PendingTfdsInfoPath(shard),
            dir_.Join(".dataset_info.json.d-train.tfrecord-00001-of-00002.tmp"));
  EXPECT_EQ(*ReadFileToString(dir_.Join("dataset_info.json")), before);  // not yet
  auto done = FinishTfdsInfo(shard);
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_TRUE(done->has_value());
  const nlohmann::json j = Read();
  EXPECT_EQ(j["splits"][0]["shardLengths"], nlohmann::json::array({"3", "6"}));
  EXPECT_EQ(j["splits"][0]["numBytes"], "80");
  // Idempotent: a second finish (recovery after the rename) changes nothing.
  auto again = FinishTfdsInfo(shard);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->has_value());
  EXPECT_EQ(Read(), j);
  // A rewrite that did not happen: the prepared file goes, the metadata stays.
  ASSERT_TRUE(*PrepareTfdsInfo(shard, 1, -1000));
  EXPECT_TRUE(DiscardTfdsInfo(shard));
  EXPECT_FALSE(DiscardTfdsInfo(shard));
  EXPECT_EQ(Read(), j);
  // Nothing to update: no file prepared.
  auto other = PrepareTfdsInfo(dir_.Join("d-test.tfrecord-00000-of-00001"), 1, 1);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_FALSE(*other);
  EXPECT_FALSE(DiscardTfdsInfo(dir_.Join("d-test.tfrecord-00000-of-00001")));
}

// The one builder of a resharded split's dataset_info.json (both `reshard`
// and `reshard --finalize` use it).
TEST(ReshardedTfdsInfoJsonTest, MergesTheSplitIntoTheOutputsOwnFile) {
  const std::string source = R"({"name": "mnist", "fileFormat": "tfrecord", "splits": [
      {"name": "train", "numBytes": "1", "shardLengths": ["7"],
       "filepathTemplate": "{SPLIT}/{SHARD_INDEX}"}]})";
  const std::string output = R"({"name": "mnist", "fileFormat": "tfrecord", "splits": [
      {"name": "test", "numBytes": 5, "shardLengths": [2]}]})";
  // Two shards of split "all" from the source's "train", as ArrayRecord.
  const std::vector<TfdsOutput> outs = {
      {"d/mnist-all.array_record-00001-of-00002", 3, 3 * 16 + 30},
      {"d/mnist-all.array_record-00000-of-00002", 4, 4 * 16 + 40}};
  auto r = ReshardedTfdsInfoJson(outs, output, source, std::string("train"), "d/dataset_info.json");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value());
  const nlohmann::json j = nlohmann::json::parse(**r);
  EXPECT_EQ(j["fileFormat"], "array_record");
  ASSERT_EQ(j["splits"].size(), 2u);
  EXPECT_EQ(j["splits"][0]["name"], "test");  // the output's other split, kept
  EXPECT_EQ(j["splits"][1]["name"], "all");
  EXPECT_EQ(j["splits"][1]["shardLengths"], nlohmann::json::array({"4", "3"}));
  EXPECT_EQ(j["splits"][1]["numBytes"], "70");
  EXPECT_FALSE(j["splits"][1].contains("filepathTemplate"));  // not TFDS's default: dropped
  // Names of two formats, or a gap in the numbering: nothing to write.
  auto mixed = ReshardedTfdsInfoJson({outs[0], {"d/mnist-all.tfrecord-00000-of-00002", 1, 17}},
                                     std::nullopt, source, std::string("train"), "x");
  ASSERT_TRUE(mixed.ok());
  EXPECT_FALSE(mixed->has_value());
  auto none = ReshardedTfdsInfoJson({outs[0]}, std::nullopt, source, std::string("train"), "x");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  // Not JSON: DataLoss naming the file.
  auto bad = ReshardedTfdsInfoJson(outs, std::string("{"), source, std::nullopt, "d/x.json");
  EXPECT_TRUE(absl::IsDataLoss(bad.status()));
  EXPECT_NE(bad.status().message().find("d/x.json"), std::string::npos);
}

}  // namespace
}  // namespace tfrecordfs::repack
