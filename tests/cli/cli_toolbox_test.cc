// The toolbox commands run as the real binary against data with known
// answers: the generated dataset (tests/mount/generated_dataset.h), GZIP
// copies of its shards and byte-corrupted copies (the real TensorFlow files:
// cli_toolbox_real_test.cc; --help: cli_help_test.cc). JSON output goes
// through nlohmann/json; DALI index files are compared with tfrecord2idx's
// own loop run in python3.
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

constexpr uint64_t kSeed = 4242;

// Record start offsets computed from the payloads alone (16 bytes of
// framing each), independent of the reader.
std::vector<uint64_t> Offsets(const GenShard& shard) {
  std::vector<uint64_t> out;
  uint64_t at = 0;
  for (const GenRecord& r : shard.records) {
    out.push_back(at);
    at += 16 + r.payload.size();
  }
  return out;
}

class ToolboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(BinaryPath(), "") << "TFRECORDFS_BIN is not set";
    src_ = tmp_.Subdir("src");
    ds_ = WriteDataset(src_, kSeed);
  }
  std::string Path(const std::string& rel) const { return src_ + "/" + rel; }

  TempDir tmp_;
  std::string src_;
  GenDataset ds_;
};

TEST(JsonWriterTest, EscapesAndBase64) {
  using cli::Base64;
  using cli::JsonQuote;
  EXPECT_EQ(JsonQuote("a\"b\\c\n\t\x01\x7f"), "\"a\\\"b\\\\c\\n\\t\\u0001\\u007f\"");
  EXPECT_EQ(JsonQuote("caf\xc3\xa9 \xe2\x96\x81"), "\"caf\xc3\xa9 \xe2\x96\x81\"");
  EXPECT_EQ(JsonQuote("\xff\xfe"), "\"\\ufffd\\ufffd\"");
  EXPECT_EQ(JsonQuote("\xe2\x80\xa8"), "\"\\u2028\"");
  EXPECT_EQ(Base64(""), "");
  EXPECT_EQ(Base64("f"), "Zg==");
  EXPECT_EQ(Base64("fo"), "Zm8=");
  EXPECT_EQ(Base64("foo"), "Zm9v");
  EXPECT_EQ(Base64("foobar"), "Zm9vYmFy");
  // Every byte value survives a round trip through a JSON parser.
  std::string all;
  for (int c = 0; c < 128; ++c) all.push_back(static_cast<char>(c));
  cli::JsonWriter w;
  w.BeginObject()
      .Key(all)
      .String(all)
      .Key("b")
      .BeginArray()
      .Int(-1)
      .Uint(2)
      .Bool(true)
      .Null()
      .Number("0.1")
      .EndArray()
      .EndObject();
  Json j = ParseJson(w.str());
  EXPECT_EQ(j[all].get<std::string>(), all);
  EXPECT_EQ(j["b"].size(), 5u);
}

TEST(PlanSampleTest, SpreadsOverEveryShard) {
  auto plan = inspect::PlanSample({1000, 10, 0, 1}, 100);
  std::map<size_t, size_t> per_shard;
  for (auto [s, r] : plan) ++per_shard[s];
  EXPECT_EQ(per_shard.size(), 3u);  // the empty shard gives none
  EXPECT_EQ(per_shard[3], 1u);
  EXPECT_GE(per_shard[1], 1u);
  EXPECT_NEAR(static_cast<double>(plan.size()), 100, 3);
  EXPECT_EQ(plan.front(), (std::pair<size_t, uint64_t>{0, 0}));
  EXPECT_EQ(inspect::PlanSample({5, 3}, 100).size(), 8u);  // all of them
}

TEST_F(ToolboxTest, HelpAndUsageErrors) {
  for (const char* cmd : {"count", "schema", "show", "verify"}) {
    SCOPED_TRACE(cmd);
    CommandResult help = Tool({cmd, "--help"});
    EXPECT_EQ(help.exit_code, 0);
    EXPECT_NE(help.out.find("Usage: tfrecordfs " + std::string(cmd)), std::string::npos);
    EXPECT_EQ(Tool({cmd}).exit_code, 2);
    EXPECT_EQ(Tool({cmd, "--bogus", src_}).exit_code, 2);
    EXPECT_EQ(Tool({cmd, src_ + "/no-such-file", "0"}).exit_code, 1);
  }
  EXPECT_EQ(Tool({"show", Path(kShardTwelve), "x"}).exit_code, 2);
  EXPECT_EQ(Tool({"schema", "--all", "--sample", "5", src_}).exit_code, 2);
  EXPECT_EQ(Tool({"schema", "--sample", "0", src_}).exit_code, 2);
  CommandResult usage = Tool({"--help"});
  EXPECT_NE(usage.out.find("tfrecordfs verify"), std::string::npos);
}

// A SOURCE without a shard is an error for every command that finds shards,
// and only files named like shards earn a warning.
TEST_F(ToolboxTest, NoShardIsAnErrorAndOnlyShardNamesWarn) {
  const std::string empty = tmp_.Subdir("empty");
  const std::string docs = tmp_.Subdir("docs");
  WriteWholeFile(docs + "/tfrecordfs.1.scd", "tfrecordfs(1)\n");
  WriteWholeFile(docs + "/notes.json", "{}\n");
  WriteWholeFile(docs + "/bad.tfrecord", "not a shard at all\n");
  ASSERT_EQ(
      Shell("gzip -c " + ShellQuote(docs + "/notes.json") + " > " +
            ShellQuote(docs + "/notes.json.gz") + " && gzip -c " +
            ShellQuote(docs + "/notes.json") + " > " + ShellQuote(docs + "/bad-00000-of-00001.gz"))
          .exit_code,
      0);
  for (const char* cmd : {"verify", "count", "schema", "index"}) {
    SCOPED_TRACE(cmd);
    CommandResult none = Tool({cmd, empty});
    EXPECT_EQ(none.exit_code, 1) << none.out << none.err;
    EXPECT_NE(none.err.find("no TFRecord shard in " + empty), std::string::npos) << none.err;
    EXPECT_EQ(none.out.find("all intact"), std::string::npos) << none.out;

    CommandResult r = Tool({cmd, docs});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("no TFRecord shard in " + docs), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("bad.tfrecord: named like a TFRecord shard"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("bad-00000-of-00001.gz: a gzip stream"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("tfrecordfs.1.scd"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("notes.json"), std::string::npos) << r.err;
  }
}

// An error is said once, on stderr; stdout keeps the report.
TEST_F(ToolboxTest, PackSaysItsErrorOnceOnStderr) {
  const std::string staged = tmp_.Subdir("staged");
  WriteWholeFile(tmp_.path() + "/missing", "a file, not a directory\n");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"pack", staged, tmp_.path() + "/missing/out"},
        std::vector<std::string>{"pack", tmp_.path() + "/missing", tmp_.Subdir("out")}}) {
    CommandResult r = Tool(args);
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_EQ(r.out, "") << "the error is on stdout too";
    const size_t at = r.err.find("pack failed: ");
    EXPECT_NE(at, std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("pack failed: ", at + 1), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("/missing"), std::string::npos) << r.err;
  }
}

// Rough edge of issue 34: `pack` into a missing output directory failed
// while repair and reshard create theirs. One rule now: all three create
// it (and its parents). The shard is read back by the independent reader.
TEST_F(ToolboxTest, PackCreatesAMissingOutputDirectoryAsRepairAndReshardDo) {
  const std::string staged = tmp_.Subdir("staged");
  ASSERT_EQ(::mkdir((staged + "/r1").c_str(), 0755), 0);
  WriteWholeFile(staged + "/r1/name.txt", "hello\n");
  const std::string out = tmp_.path() + "/new/deeper/out";
  CommandResult r = Tool({"pack", "--prefix", "p", staged, out});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string shard = out + "/p-00000-of-00001.tfrecord";
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  ASSERT_NE(root, nullptr);
  CommandResult read = RunCommand(
      {"/usr/bin/python3", "-c",
       absl::StrCat("import sys; sys.path.insert(0, '", root,
                    "/tests/cli'); import tfrecord_check as t\n"
                    "for p in t.read_records(sys.argv[1]): print(t.describe_example(p))\n"),
       shard});
  EXPECT_EQ(read.exit_code, 0) << read.err;
  EXPECT_EQ(read.out, "name:bytes:hello\n");
  // repair and reshard into missing directories, as before.
  for (const char* cmd : {"repair", "reshard"}) {
    const std::string dir = absl::StrCat(tmp_.path(), "/new-", cmd, "/x");
    CommandResult c = Tool({cmd, src_, "-o", dir});
    EXPECT_EQ(c.exit_code, 0) << cmd << ": " << c.err;
    struct stat st;
    EXPECT_EQ(::stat(dir.c_str(), &st), 0) << cmd;
  }
}

// A report that cannot be written (a full disk, a closed pipe) fails every
// command that writes one, after saying so; none exits 0 without its report.
TEST_F(ToolboxTest, EveryReportThatCannotBeWrittenFails) {
  const std::string staged = tmp_.Subdir("staged");
  const std::string packed = tmp_.Subdir("packed");
  for (const std::string& args :
       {"count " + ShellQuote(src_), "verify " + ShellQuote(src_), "schema " + ShellQuote(src_),
        "show " + ShellQuote(Path(kShardTwelve)) + " 0", "index " + ShellQuote(src_),
        "pack " + ShellQuote(staged) + " " + ShellQuote(packed)}) {
    SCOPED_TRACE(args);
    CommandResult r = Shell(ShellQuote(BinaryPath()) + " " + args + " > /dev/full");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("cannot write to stdout"), std::string::npos) << r.err;
  }
}

TEST_F(ToolboxTest, CountMatchesTheDataset) {
  CommandResult r = Tool({"count", src_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Mount order: depth first, by name.
  std::string expected;
  uint64_t total = 0;
  // nested/deep/val.tfrecord sorts before nested/empty.tfrecord ("deep" < "empty.tfrecord").
  for (const std::string& rel :
       {std::string(kShardNested), std::string(kShardEmpty), std::string(kShardOne),
        std::string(kShardTwelve), std::string(kShardBig)}) {
    const uint64_t n = ds_.Shard(rel).records.size();
    total += n;
    absl::StrAppend(&expected, n, "\t", Path(rel), "\n");
  }
  absl::StrAppend(&expected, total, "\ttotal\n");
  EXPECT_EQ(r.out, expected);
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << "no progress bar off a terminal";

  CommandResult j = Tool({"count", "--json", src_});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  Json doc = ParseJson(j.out);
  EXPECT_EQ(doc["records"].get<uint64_t>(), total);
  ASSERT_EQ(doc["shards"].size(), 5u);
  EXPECT_EQ(doc["shards"][0]["path"].get<std::string>(), Path(kShardNested));
  EXPECT_EQ(doc["shards"][0]["records"].get<uint64_t>(), 3u);

  // A file SOURCE, and GZIP copies (recognised by content, whatever the name).
  const std::string gz = tmp_.Subdir("gz");
  ASSERT_EQ(
      Shell("gzip -c " + ShellQuote(Path(kShardBig)) + " > " + ShellQuote(gz + "/big.gz") +
            " && gzip -c " + ShellQuote(Path(kShardTwelve)) + " > " + ShellQuote(gz + "/twelve"))
          .exit_code,
      0);
  CommandResult c = Tool({"count", Path(kShardOne), gz});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(c.out, absl::StrCat("1\t", Path(kShardOne), "\n130\t", gz, "/big.gz\n12\t", gz,
                                "/twelve\n143\ttotal\n"));
}

TEST_F(ToolboxTest, ShowPrintsEveryValueExactly) {
  const GenShard& shard = ds_.Shard(kShardBig);
  const std::vector<uint64_t> offsets = Offsets(shard);
  for (uint64_t rec : {0, 7, 129}) {
    SCOPED_TRACE(rec);
    CommandResult r = Tool({"show", "--json", Path(kShardBig), std::to_string(rec)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    Json doc = ParseJson(r.out);
    EXPECT_EQ(doc["record"].get<uint64_t>(), rec);
    EXPECT_EQ(doc["offset"].get<uint64_t>(), offsets[rec]);
    EXPECT_EQ(doc["kind"].get<std::string>(), "Example");
    const GenRecord& g = shard.records[rec];
    ASSERT_TRUE(g.is_example);
    size_t kinded = 0;
    for (const OwnedFeature& f : g.features) {
      SCOPED_TRACE(f.name);
      ASSERT_TRUE(doc["features"].contains(f.name));
      const Json& jf = doc["features"][f.name];
      ++kinded;
      switch (f.kind) {
        case example::Kind::kNone:
          EXPECT_EQ(jf["kind"].get<std::string>(), "none");
          break;
        case example::Kind::kInt64:
          EXPECT_EQ(jf["kind"].get<std::string>(), "int64");
          EXPECT_EQ(jf["values"].get<std::vector<int64_t>>(), f.int64s);
          break;
        case example::Kind::kFloat: {
          EXPECT_EQ(jf["kind"].get<std::string>(), "float");
          ASSERT_EQ(jf["values"].size(), f.floats.size());
          for (size_t i = 0; i < f.floats.size(); ++i) {
            const Json& v = jf["values"][i];
            if (v.is_string()) {  // NaN, inf: the naming format
              EXPECT_EQ(v.get<std::string>(),
                        absl::StripSuffix(naming::FormatFloats({&f.floats[i], 1}), "\n"));
            } else {
              ASSERT_TRUE(v.is_number_float()) << v.dump();  // "1.0", "-0.0": floats
              const float got = v.get<float>();
              EXPECT_EQ(std::memcmp(&got, &f.floats[i], 4), 0) << got << " vs " << f.floats[i];
            }
          }
          break;
        }
        case example::Kind::kBytes:
          EXPECT_EQ(jf["kind"].get<std::string>(), "bytes");
          ASSERT_EQ(jf["values"].size(), f.bytes.size());
          for (size_t i = 0; i < f.bytes.size(); ++i) {
            const Json& v = jf["values"][i];
            if (naming::IsSingleLineText(f.bytes[i])) {
              EXPECT_EQ(v.get<std::string>(), f.bytes[i]);
            } else {
              std::string decoded;
              ASSERT_TRUE(absl::Base64Unescape(v["base64"].get<std::string>(), &decoded));
              EXPECT_EQ(decoded, f.bytes[i]);
            }
          }
          break;
      }
    }
    EXPECT_EQ(doc["features"].size(), kinded);
  }
  // Non-Example payloads, several records in one document.
  CommandResult raw = Tool({"show", "--json", Path(kShardTwelve), "3", "8"});
  ASSERT_EQ(raw.exit_code, 0) << raw.err;
  Json arr = ParseJson(raw.out);
  ASSERT_TRUE(arr.is_array());
  ASSERT_EQ(arr.size(), 2u);
  EXPECT_EQ(arr[0]["kind"].get<std::string>(), "other");
  std::string decoded;
  ASSERT_TRUE(absl::Base64Unescape(arr[0]["raw"]["base64"].get<std::string>(), &decoded));
  EXPECT_EQ(decoded, ds_.Shard(kShardTwelve).records[3].payload);
  // Text: one line per feature, values in full off a terminal.
  CommandResult text = Tool({"show", Path(kShardTwelve), "5"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find(ds_.needle), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("# record 5 of "), std::string::npos);
  // No such record.
  CommandResult missing = Tool({"show", Path(kShardTwelve), "12"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("has 12 record(s)"), std::string::npos) << missing.err;
  EXPECT_EQ(Tool({"show", Path("dataset_info.json"), "0"}).exit_code, 1);
}

TEST_F(ToolboxTest, SchemaCountsEveryFeature) {
  CommandResult r = Tool({"schema", "--all", "--json", src_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json doc = ParseJson(r.out);
  // Independent tally from the generator's own features.
  struct Want {
    uint64_t present = 0, min_count = UINT64_MAX, max_count = 0;
    std::set<example::Kind> kinds;
  };
  std::map<std::string, Want> want;
  uint64_t records = 0, examples = 0;
  for (const GenShard& s : ds_.shards) {
    for (const GenRecord& g : s.records) {
      ++records;
      if (!example::DecodeExample(g.payload).ok()) continue;
      ++examples;
      for (const OwnedFeature& f : g.features) {
        Want& w = want[f.name];
        ++w.present;
        if (f.kind == example::Kind::kNone) continue;
        w.kinds.insert(f.kind);
        const uint64_t n = f.kind == example::Kind::kInt64   ? f.int64s.size()
                           : f.kind == example::Kind::kFloat ? f.floats.size()
                                                             : f.bytes.size();
        w.min_count = std::min(w.min_count, n);
        w.max_count = std::max(w.max_count, n);
      }
    }
  }
  EXPECT_EQ(doc["records_scanned"].get<uint64_t>(), records);
  EXPECT_EQ(doc["payloads"]["example"].get<uint64_t>(), examples);
  EXPECT_EQ(doc["payloads"]["other"].get<uint64_t>(), records - examples);
  ASSERT_EQ(doc["features"].size(), want.size());
  for (const Json& f : doc["features"]) {
    const std::string name = f["name"].get<std::string>();
    SCOPED_TRACE(name);
    ASSERT_TRUE(want.count(name));
    const Want& w = want[name];
    EXPECT_EQ(f["present"].get<uint64_t>(), w.present);
    if (w.kinds.empty()) {
      EXPECT_EQ(f["kind"].get<std::string>(), "empty");
      continue;
    }
    EXPECT_EQ(f["min_count"].get<uint64_t>(), w.min_count);
    EXPECT_EQ(f["max_count"].get<uint64_t>(), w.max_count);
    const std::string kind = f["kind"].get<std::string>();
    if (w.kinds.size() > 1) {
      EXPECT_EQ(kind, "mixed");
    } else if (*w.kinds.begin() == example::Kind::kInt64) {
      EXPECT_EQ(kind, "int64");
    } else if (*w.kinds.begin() == example::Kind::kFloat) {
      EXPECT_EQ(kind, "float");
    } else {
      EXPECT_TRUE(kind == "bytes" || kind == "text" || kind == "tensor") << kind;
    }
  }
  // The default is a sample that still reaches every shard with records.
  CommandResult sample = Tool({"schema", "--sample", "4", "--json", src_});
  ASSERT_EQ(sample.exit_code, 0) << sample.err;
  Json sdoc = ParseJson(sample.out);
  EXPECT_EQ(sdoc["records_scanned"].get<uint64_t>(), 4u);  // 4 shards hold records
  CommandResult text = Tool({"schema", src_});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("feature"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("caption"), std::string::npos) << text.out;
}

TEST_F(ToolboxTest, VerifyNamesDamagedRecords) {
  CommandResult clean = Tool({"verify", Path(kShardBig), Path("nested")});
  EXPECT_EQ(clean.exit_code, 0) << clean.out << clean.err;
  EXPECT_NE(clean.out.find("3 shard(s), 133 record(s): all intact"), std::string::npos)
      << clean.out;

  // Flip one payload byte of record 40 (a data CRC mismatch) in a copy, and
  // the same in a GZIP copy.
  const GenShard& big = ds_.Shard(kShardBig);
  const uint64_t offset = Offsets(big)[40];
  const std::string bad_dir = tmp_.Subdir("bad");
  std::string bytes = ReadWholeFile(Path(kShardBig));
  bytes[offset + 12 + 3] ^= 0x20;
  WriteWholeFile(bad_dir + "/big.tfrecord", bytes);
  ASSERT_EQ(Shell("gzip -c " + ShellQuote(bad_dir + "/big.tfrecord") + " > " +
                  ShellQuote(bad_dir + "/big.tfrecord.gz"))
                .exit_code,
            0);
  CommandResult r = Tool({"verify", "--json", bad_dir});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  Json doc = ParseJson(r.out);
  EXPECT_EQ(doc["shards"].get<uint64_t>(), 2u);
  EXPECT_EQ(doc["records"].get<uint64_t>(), 260u);
  ASSERT_EQ(doc["damaged"].size(), 2u) << r.out;
  for (const Json& d : doc["damaged"]) {
    EXPECT_EQ(d["record"].get<uint64_t>(), 40u);
    EXPECT_EQ(d["offset"].get<uint64_t>(), offset);
    EXPECT_NE(d["reason"].get<std::string>().find("data CRC mismatch"), std::string::npos);
  }
  EXPECT_FALSE(doc["damaged"][0].contains("checkpoint_offset"));  // plain
  // gz: the checkpoint a reader resumes from, at or before the record.
  EXPECT_LE(doc["damaged"][1]["checkpoint_offset"].get<uint64_t>(), offset);
  CommandResult text = Tool({"verify", bad_dir});
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.out.find(bad_dir + "/big.tfrecord: record 40 at byte offset " +
                          std::to_string(offset) + ": data CRC mismatch"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("record 40 at uncompressed byte offset"), std::string::npos);
  EXPECT_NE(text.out.find("2 damaged"), std::string::npos) << text.out;

  // In a shard of Examples, payloads that are not one are damaged (records
  // 3, 6 and 8 of the twelve; record 4, empty, is an empty Example).
  CommandResult mixed = Tool({"verify", "--json", Path(kShardTwelve)});
  EXPECT_EQ(mixed.exit_code, 1);
  Json m = ParseJson(mixed.out);
  std::vector<uint64_t> named;
  for (const Json& d : m["damaged"]) named.push_back(d["record"].get<uint64_t>());
  EXPECT_EQ(named, (std::vector<uint64_t>{3, 6, 8})) << mixed.out;
}

// A truncated last record right after a damaged one: the tail is reported
// on its own (not folded into the damaged record before it), and the
// summary counts records and spans apart.
TEST_F(ToolboxTest, VerifyReportsATruncatedTailAfterADamagedRecord) {
  const GenShard& big = ds_.Shard(kShardBig);
  const std::vector<uint64_t> offsets = Offsets(big);
  const size_t n = offsets.size();
  ASSERT_GE(n, 3u);
  std::string bytes = ReadWholeFile(Path(kShardBig));
  bytes[offsets[n - 2] + 12 + 1] ^= 0x20;  // data CRC mismatch in the next-to-last record
  bytes.resize(bytes.size() - 2);          // the last record lacks 2 bytes
  const std::string dir = tmp_.Subdir("tail");
  WriteWholeFile(dir + "/big.tfrecord", bytes);

  CommandResult r = Tool({"verify", "--json", dir});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  Json doc = ParseJson(r.out);
  EXPECT_EQ(doc["records"].get<uint64_t>(), n - 1);
  EXPECT_EQ(doc["damaged_records"].get<uint64_t>(), 1u) << r.out;
  EXPECT_EQ(doc["damaged_spans"].get<uint64_t>(), 1u) << r.out;
  ASSERT_EQ(doc["damaged"].size(), 2u) << r.out;
  EXPECT_EQ(doc["damaged"][0]["record"].get<uint64_t>(), n - 2);
  const Json& tail = doc["damaged"][1];
  EXPECT_TRUE(tail["record"].is_null()) << r.out;
  EXPECT_EQ(tail["offset"].get<uint64_t>(), offsets[n - 1]);
  const std::string reason = tail["reason"].get<std::string>();
  EXPECT_NE(reason.find("a record header at byte offset " + std::to_string(offsets[n - 1])),
            std::string::npos)
      << reason;
  EXPECT_NE(reason.find("ends 2 byte(s) short"), std::string::npos) << reason;

  CommandResult text = Tool({"verify", dir});
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.out.find("(a truncated last record)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(std::to_string(n - 1) +
                          " record(s): 1 damaged, 1 damaged span(s) between or after records"),
            std::string::npos)
      << text.out;
}

// A forged checkpoint in an index beside a GZIP shard (its CRC fixed, so the
// file decodes) would make reads serve other records' bytes: verify checks
// the checkpoints of every index it loads from a file against the stream.
TEST_F(ToolboxTest, VerifyRefusesAForgedCheckpointBesideAGzipShard) {
  const std::string dir = tmp_.Subdir("forged");
  const std::string shard = dir + "/data.tfrecord.gz";
  constexpr size_t kPayload = 300;
  ASSERT_NO_FATAL_FAILURE(
      test::WriteCompressibleShard(shard, source::Codec::kGzip, 3000, kPayload));
  {  // The index beside the shard, with a checkpoint every 64 KiB.
    index::StoreOptions o;
    o.write_beside = true;
    o.durable = false;
    o.span = 64 << 10;
    index::IndexStore store(o);
    index::LoadInfo info;
    ASSERT_TRUE(test::LoadShardIndex(store, shard, source::Codec::kGzip, &info).ok());
  }
  const std::string beside = index::IndexStore::BesidePath(shard);
  CommandResult good = Tool({"verify", "--json", dir});
  EXPECT_EQ(good.exit_code, 0) << good.out << good.err;

  // Move a middle checkpoint one record on: every CRC of the file still holds.
  ASSERT_NO_FATAL_FAILURE(test::ForgeMiddleCheckpoint(beside, kPayload + record::kFramingOverhead));

  CommandResult forged = Tool({"verify", dir});
  EXPECT_EQ(forged.exit_code, 1) << forged.out << forged.err;
  EXPECT_NE(forged.out.find("tfrecordfs index --force"), std::string::npos) << forged.out;
  EXPECT_EQ(forged.out.find("all intact"), std::string::npos) << forged.out;
}

TEST_F(ToolboxTest, DaliIndexMatchesTfrecord2idx) {
  const std::string gz = tmp_.Subdir("src/gz");
  ASSERT_EQ(Shell("gzip -c " + ShellQuote(Path(kShardTwelve)) + " > " +
                  ShellQuote(gz + "/twelve.tfrecord.gz"))
                .exit_code,
            0);
  const std::string dali = tmp_.path() + "/dali";
  CommandResult r = Tool({"index", "--dali-dir", dali, src_});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("DALI reads the raw file bytes"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("wrote 5 DALI index file(s)"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dali + "/gz/twelve.tfrecord.gz.idx"));
  // DALI's tools/tfrecord2idx loop, in python.
  constexpr char kTfrecord2idx[] = R"(
import struct, sys
f = open(sys.argv[1], 'rb')
while True:
    current = f.tell()
    byte_len = f.read(8)
    if len(byte_len) == 0:
        break
    f.read(4)
    proto_len = struct.unpack('q', byte_len)[0]
    f.read(proto_len)
    f.read(4)
    sys.stdout.write(str(current) + ' ' + str(f.tell() - current) + '\n')
)";
  for (const GenShard& s : ds_.shards) {
    SCOPED_TRACE(s.rel_path);
    CommandResult py = RunCommand({"/usr/bin/python3", "-c", kTfrecord2idx, Path(s.rel_path)});
    ASSERT_EQ(py.exit_code, 0) << py.err;
    EXPECT_EQ(ReadWholeFile(dali + "/" + s.rel_path + ".idx"), py.out);
  }
}

}  // namespace
}  // namespace tfrecordfs::mount_test
