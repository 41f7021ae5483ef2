// The toolbox commands run as the real binary on the real TensorFlow files
// in ../shared/data/real (SOURCES.md gives the answers): counts, damage,
// schemas, records shown. Every case skips, saying so, when the data is
// absent (meson counts the binary as SKIP).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cli_toolbox_util.h"
#include "generated_dataset.h"
#include "gtest/gtest.h"
#include "mount_harness.h"
#include "nlohmann/json.hpp"
#include "src/cli/json_writer.h"
#include "testing/index_files.h"
#include "testing/shard.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/index/index_file.h"
#include "tfrecordfs/index/index_store.h"
#include "tfrecordfs/inspect/inspect.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/writer.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::mount_test {
namespace {

class RealToolboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = RealDataDir();
    if (data_.empty()) GTEST_SKIP() << RealDataMissing();
  }
  std::string data_;
};

// Record counts from SOURCES.md.
const std::map<std::string, uint64_t> kRealCounts = {
    {"od_raccoon_jpeg_bbox/test.record", 40},
    {"deeplab_voc_seg_jpeg_png/val-00000-of-00001.tfrecord", 3},
    {"attention_ocr_fsns_png/fsns-00000-of-00001", 5},
    {"lingvo_wmt_int64/translate_ende_wmt32k-train-00511-of-00512", 8941},
    {"lingvo_wmt_int64/wmt14_ende_wpm_32k_test.tfrecord", 100},
    {"tf_agents_antmaze_slash_keys/antmaze-medium-play-v0_0.tfrecord", 18},
    {"tfx_mnist_float784/mnist.tfrecord", 1000},
    {"non_example_ranking_elwc/eval_elwc.tfrecord", 10},
    {"non_example_raw_strings/tfrecord_iterator_test.tfrecord", 3},
    {"non_example_tensorboard_events/events.out.tfevents.1599310762", 1203},
    {"tfx_sequence_example_gzip/data_tfrecord_eval.gz", 4500},
    {"tft_sequence_example_gzip/data_tfrecord.gz", 3},
    {"basenji_zlib/test-3.tfr", 1},
    {"basenji_zlib/train-7.tfr", 0},
};

TEST_F(RealToolboxTest, CountsMatchSources) {
  CommandResult r = Tool({"count", "--json", data_});
  EXPECT_EQ(r.exit_code, 1) << "the damaged pets shard fails count";
  Json doc = ParseJson(r.out);
  uint64_t gz12 = 0, shards = 0;
  for (const Json& s : doc["shards"]) {
    const std::string rel = s["path"].get<std::string>().substr(data_.size() + 1);
    ++shards;
    if (rel.find("tfx_csv_example_gen_gzip_12shards/") == 0) {
      gz12 += s["records"].get<uint64_t>();
      continue;
    }
    if (rel == "corrupt_crlf_stripped/pets_examples.record") {
      EXPECT_TRUE(s["damaged"].get<bool>());
      continue;
    }
    ASSERT_TRUE(kRealCounts.count(rel)) << rel;
    EXPECT_EQ(s["records"].get<uint64_t>(), kRealCounts.at(rel)) << rel;
  }
  EXPECT_EQ(gz12, 5091u);  // SOURCES.md: 5,091 in the 12 GZIP shards
  EXPECT_EQ(shards, 27u);  // SOURCES.md: 27 files, all shards
}

TEST_F(RealToolboxTest, VerifyNamesThePetsDamageAndTheNonExampleFiles) {
  CommandResult r = Tool({"verify", "--json", data_});
  EXPECT_EQ(r.exit_code, 1);
  Json doc = ParseJson(r.out);
  std::set<uint64_t> pets;
  for (const Json& d : doc["damaged"]) {
    const std::string path = d["path"].get<std::string>();
    EXPECT_NE(path.find("corrupt_crlf_stripped/pets_examples.record"), std::string::npos)
        << "only the pets file is damaged: " << d.dump();
    if (!d["record"].is_null()) pets.insert(d["record"].get<uint64_t>());
  }
  EXPECT_TRUE(pets.count(0)) << r.out;  // SOURCES.md: record 0 fails
  EXPECT_GE(pets.size(), 4u) << "six records are 1-5 bytes short";
  std::set<std::string> non_example;
  for (const Json& s : doc["non_example_shards"]) {
    non_example.insert(s["path"].get<std::string>().substr(data_.size() + 1));
  }
  // (eval_elwc.tfrecord's ExampleListWithContext records are read as such.)
  EXPECT_EQ(non_example, (std::set<std::string>{
                             "non_example_raw_strings/tfrecord_iterator_test.tfrecord",
                             "non_example_tensorboard_events/events.out.tfevents.1599310762"}));
  EXPECT_EQ(doc["sequence_examples"].get<uint64_t>(), 4503u);
  // SOURCES.md: eval_elwc.tfrecord holds 10 ExampleListWithContext records.
  EXPECT_EQ(doc["example_lists_with_context"].get<uint64_t>(), 10u) << r.out;
  CommandResult elwc = Tool({"verify", data_ + "/non_example_ranking_elwc/eval_elwc.tfrecord"});
  EXPECT_EQ(elwc.exit_code, 0);
  EXPECT_NE(elwc.out.find("10 ExampleListWithContext(s)"), std::string::npos) << elwc.out;

  // SOURCES.md: nine whole records, five of them damaged, and a tenth
  // header at byte 782437 whose record lacks 2 bytes.
  CommandResult crlf = Tool({"verify", "--json", data_ + "/corrupt_crlf_stripped"});
  Json p = ParseJson(crlf.out);
  EXPECT_EQ(p["records"].get<uint64_t>(), 9u);
  EXPECT_EQ(p["damaged_records"].get<uint64_t>(), 5u) << crlf.out;
  EXPECT_EQ(p["damaged_spans"].get<uint64_t>(), 1u) << crlf.out;
  bool tail = false;
  for (const Json& d : p["damaged"]) {
    tail |= d["record"].is_null() &&
            d["reason"].get<std::string>().find("a record header at byte offset 782437") !=
                std::string::npos &&
            d["reason"].get<std::string>().find("2 byte(s) short") != std::string::npos;
  }
  EXPECT_TRUE(tail) << "the truncated tenth record is not reported:\n" << crlf.out;

  CommandResult text = Tool({"verify", data_ + "/corrupt_crlf_stripped"});
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.out.find("pets_examples.record: record 0 at byte offset 0: "), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("9 record(s): 5 damaged, 1 damaged span(s)"), std::string::npos)
      << text.out;

  // repair names the same damage in the same words, with the same counts
  // (it listed the resync points as dropped damage, left the truncated
  // tail out and said "4 of 9 written, 7 dropped").
  TempDir out;
  CommandResult repair = Tool({"repair", data_ + "/corrupt_crlf_stripped", "-o", out.path()});
  EXPECT_EQ(repair.exit_code, 1) << repair.err;
  std::vector<std::string> verified, repaired;
  for (absl::string_view line : absl::StrSplit(text.out, '\n', absl::SkipEmpty())) {
    if (absl::StrContains(line, " at byte offset ")) verified.emplace_back(line);
  }
  for (absl::string_view line : absl::StrSplit(repair.out, '\n', absl::SkipEmpty())) {
    if (!absl::StrContains(line, " at byte offset ")) continue;
    absl::string_view place = line;
    EXPECT_TRUE(absl::ConsumeSuffix(&place, ": dropped") ||
                absl::ConsumeSuffix(&place, ": not copied"))
        << line;
    repaired.emplace_back(place);
  }
  EXPECT_EQ(repaired, verified) << repair.out;
  EXPECT_NE(repair.out.find("4 of 9 record(s) written, 5 dropped, 1 damaged span(s)"),
            std::string::npos)
      << repair.out;
  EXPECT_EQ(Tool({"verify", data_ + "/tfx_mnist_float784"}).exit_code, 0);
}

TEST_F(RealToolboxTest, SchemasMatchSources) {
  {
    CommandResult r = Tool({"schema", "--all", "--json", data_ + "/tfx_mnist_float784"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    Json doc = ParseJson(r.out);
    EXPECT_EQ(doc["records_scanned"].get<uint64_t>(), 1000u);
    ASSERT_EQ(doc["features"].size(), 2u);
    EXPECT_EQ(doc["features"][0]["name"].get<std::string>(), "image_class");
    EXPECT_EQ(doc["features"][0]["kind"].get<std::string>(), "int64");
    EXPECT_EQ(doc["features"][1]["name"].get<std::string>(), "image_floats");
    EXPECT_EQ(doc["features"][1]["kind"].get<std::string>(), "float");
    EXPECT_EQ(doc["features"][1]["min_count"].get<uint64_t>(), 784u);
    EXPECT_EQ(doc["features"][1]["max_count"].get<uint64_t>(), 784u);
  }
  {
    // Raccoon: JPEG bytes, 1-2 boxes per image.
    CommandResult r = Tool({"schema", "--json", data_ + "/od_raccoon_jpeg_bbox"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    Json doc = ParseJson(r.out);
    std::map<std::string, Json> f;
    for (const Json& x : doc["features"]) f[x["name"].get<std::string>()] = x;
    ASSERT_TRUE(f.count("image/encoded"));
    EXPECT_EQ(f["image/encoded"]["kind"].get<std::string>(), "bytes");
    EXPECT_EQ(f["image/encoded"]["sniffed"][".jpg"].get<uint64_t>(), 40u);
    EXPECT_EQ(f["image/object/bbox/xmin"]["kind"].get<std::string>(), "float");
    EXPECT_EQ(f["image/object/bbox/xmin"]["min_count"].get<uint64_t>(), 1u);
    EXPECT_EQ(f["image/object/bbox/xmin"]["max_count"].get<uint64_t>(), 2u);
    EXPECT_EQ(f["image/format"]["kind"].get<std::string>(), "text");
  }
  {
    // tft: int_feature is both a context feature and a feature list.
    CommandResult r = Tool({"schema", "--all", "--json", data_ + "/tft_sequence_example_gzip"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    Json doc = ParseJson(r.out);
    EXPECT_EQ(doc["payloads"]["sequence_example"].get<uint64_t>(), 3u);
    std::map<std::string, Json> ctx, lists;
    for (const Json& x : doc["features"]) ctx[x["name"].get<std::string>()] = x;
    for (const Json& x : doc["feature_lists"]) lists[x["name"].get<std::string>()] = x;
    ASSERT_TRUE(ctx.count("int_feature") && lists.count("int_feature")) << r.out;
    EXPECT_TRUE(ctx["int_feature"]["context"].get<bool>());
    EXPECT_EQ(lists["int_feature"]["kind"].get<std::string>(), "int64");
    EXPECT_EQ(lists["string_feature"]["min_count"].get<uint64_t>(), 0u);  // an empty step
  }
  {
    // The 12 GZIP shards: pickup_census_tract is Feature{} in shard 0's records.
    CommandResult r =
        Tool({"schema", "--all", "--json", data_ + "/tfx_csv_example_gen_gzip_12shards"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    Json doc = ParseJson(r.out);
    EXPECT_EQ(doc["records_scanned"].get<uint64_t>(), 5091u);
    EXPECT_EQ(doc["features"].size(), 18u);
    for (const Json& x : doc["features"]) {
      EXPECT_EQ(x["present"].get<uint64_t>(), 5091u) << x.dump();
      if (!x["max_count"].is_null()) {
        EXPECT_LE(x["max_count"].get<uint64_t>(), 1u);
      }
    }
  }
  {
    CommandResult r = Tool({"schema", "--json", data_ + "/non_example_tensorboard_events"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    Json doc = ParseJson(r.out);
    EXPECT_EQ(doc["payloads"]["other"].get<uint64_t>(), doc["records_scanned"].get<uint64_t>());
    EXPECT_EQ(doc["features"].size(), 0u);
  }
}

TEST_F(RealToolboxTest, ShowRealRecords) {
  CommandResult r =
      Tool({"show", "--json", data_ + "/non_example_raw_strings/tfrecord_iterator_test.tfrecord",
            "0", "1", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json doc = ParseJson(r.out);
  ASSERT_EQ(doc.size(), 3u);
  EXPECT_EQ(doc[0]["raw"].get<std::string>(), "hello world");
  EXPECT_EQ(doc[1]["raw"].get<std::string>(), "12345");
  EXPECT_EQ(doc[2]["raw"].get<std::string>(), "success");
  CommandResult seq =
      Tool({"show", "--json", data_ + "/tft_sequence_example_gzip/data_tfrecord.gz", "0"});
  ASSERT_EQ(seq.exit_code, 0) << seq.err;
  Json s = ParseJson(seq.out);
  EXPECT_EQ(s["feature_lists"]["string_feature"][0], Json({"Hello", "World"}));
  EXPECT_TRUE(s["feature_lists"]["string_feature"][1].empty());
  EXPECT_EQ(s["context"]["float_feature"]["kind"].get<std::string>(), "float");
  CommandResult pets = Tool({"show", data_ + "/corrupt_crlf_stripped/pets_examples.record", "0"});
  EXPECT_EQ(pets.exit_code, 1);
  EXPECT_NE(pets.err.find("record 0 at byte offset 0"), std::string::npos) << pets.err;
}

}  // namespace
}  // namespace tfrecordfs::mount_test
