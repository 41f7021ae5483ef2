// reshard's command line (src/cli/reshard_flags.h), parsed without running
// the command: the flags it takes, the checks between them, and the usage
// messages `tfrecordfs reshard` prints, word for word.
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "src/cli/reshard_flags.h"
#include "tfrecordfs/repack/pack.h"
#include "tfrecordfs/reshape/plan.h"

namespace tfrecordfs::cli {
namespace {

// Parses `args` (after "reshard") as the command does, with a Tool of
// reshard's spec; the job runners' variables are cleared so that only
// --part names a part.
class ReshardFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v :
         {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN",
          "AWS_BATCH_JOB_ARRAY_INDEX", "AWS_BATCH_JOB_ARRAY_SIZE", "JOB_COMPLETION_INDEX"}) {
      ::unsetenv(v);
    }
  }

  absl::StatusOr<ReshardFlags> Parse(std::vector<std::string> args) {
    args.insert(args.begin(), "reshard");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    tool_.emplace(ReshardSpec());
    return ParseReshard(&*tool_, static_cast<int>(args.size()), argv.data());
  }

  // The usage message of a command line that fails to parse.
  std::string Error(std::vector<std::string> args) {
    auto flags = Parse(std::move(args));
    if (flags.ok()) return "(parsed)";
    EXPECT_TRUE(absl::IsInvalidArgument(flags.status())) << flags.status();
    return std::string(flags.status().message());
  }

  std::optional<Tool> tool_;
};

std::string PartMessage(absl::string_view text, absl::string_view why) {
  return absl::StrCat("--part needs K/N, part K of N (0 <= K < N <= ", reshape::kMaxParts,
                      "), not '", text, "': ", why);
}

TEST_F(ReshardFlagsTest, APartOutsideItsCountIsAUsageError) {
  EXPECT_EQ(Error({"--part", "5/4", "in", "-o", "out"}),
            PartMessage("5/4", "K counts from 0 and must be below N"));
  EXPECT_EQ(Error({"--part=0/0", "in", "-o", "out"}), PartMessage("0/0", "N must be at least 1"));
  EXPECT_EQ(Error({"--part", "1", "in", "-o", "out"}), PartMessage("1", "no '/'"));
  EXPECT_EQ(Error({"in", "-o", "out", "--part"}), "--part needs K/N");
}

TEST_F(ReshardFlagsTest, BadValuesAreNamed) {
  EXPECT_EQ(Error({"in", "-o", "out", "--format", "parquet"}),
            "--format needs tfrecord or arrayrecord, not 'parquet'");
  EXPECT_EQ(Error({"in", "-o", "out", "--group-size", "0"}),
            "--group-size needs a number from 1 to 2147483647, not '0'");
  EXPECT_EQ(Error({"in", "-o", "out", "--shards", "100000"}),
            "--shards needs a number from 1 to 99999, not '100000'");
  EXPECT_EQ(Error({"in", "-o", "out", "--seed", "-1", "--shuffle"}),
            "--seed needs an unsigned 64-bit number, not '-1'");
  EXPECT_EQ(Error({"in", "-o", "out", "--pass", "both"}), "--pass needs map or reduce, not 'both'");
  EXPECT_EQ(Error({"in", "-o", "out", "--memory", "512K"}), "--memory needs at least 1M");
  EXPECT_TRUE(absl::StartsWith(Error({"in", "-o", "out", "--buffer", "lots"}), "--buffer: "));
  EXPECT_EQ(Error({"in", "-o", ""}), "--output needs a directory");
  EXPECT_EQ(Error({"in", "--prefix"}), "--prefix needs a value");
  EXPECT_EQ(Error({"in", "-o", "out", "--bogus"}), "unknown option --bogus");
}

TEST_F(ReshardFlagsTest, FlagsAreCheckedAgainstEachOther) {
  EXPECT_EQ(Error({"-o", "out"}), "need at least one SOURCE");
  EXPECT_EQ(Error({"in"}), "need --output DIR");
  EXPECT_EQ(Error({"in", "-o", "out", "--shards", "2", "--shard-size", "1M"}),
            "--shards and --shard-size exclude each other");
  EXPECT_EQ(Error({"in", "-o", "out", "--seed", "3"}), "--seed needs --shuffle");
  EXPECT_EQ(Error({"in", "-o", "out", "--shuffle", "--part", "0/2"}),
            "--shuffle as parts needs --seed S (every part must shuffle alike)");
  EXPECT_EQ(Error({"in", "-o", "out", "--shuffle", "--finalize"}),
            "--shuffle as parts needs --seed S (every part must shuffle alike)");
  EXPECT_EQ(Error({"in", "-o", "out", "--shuffle", "--seed", "1", "--part", "0/2"}),
            "a shuffle as parts runs in two passes: every part with --pass map, then every part "
            "with --pass reduce, then --finalize");
  EXPECT_EQ(Error({"in", "-o", "out", "--pass", "map"}),
            "--pass is for a shuffle run as parts (--shuffle with --part K/N)");
  EXPECT_EQ(Error({"in", "-o", "out", "--finalize", "--part", "0/2"}),
            "--finalize runs once, after the parts: no --part");
  // --finalize comes after the passes: --pass is not checked then.
  EXPECT_TRUE(Parse({"in", "-o", "out", "--finalize", "--pass", "map"}).ok());
}

TEST_F(ReshardFlagsTest, HelpEndsTheParseBeforeAnyCheck) {
  auto flags = Parse({"--help", "--bogus"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_TRUE(tool_->help());
}

TEST_F(ReshardFlagsTest, EveryFlagLandsInTheOptions) {
  auto flags = Parse({"a",
                      "b",
                      "--output=o",
                      "--shards",
                      "3",
                      "--compression",
                      "gzip",
                      "--prefix",
                      "train",
                      "--shuffle",
                      "--seed",
                      "7",
                      "--skip-damaged",
                      "--buffer",
                      "2M",
                      "--memory=4M",
                      "--part",
                      "1/2",
                      "--pass",
                      "map"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(tool_->operands(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(flags->output, "o");
  const reshape::ReshardOptions& o = flags->options;
  EXPECT_EQ(o.shards, 3u);
  EXPECT_EQ(o.shard_size, 0u);
  EXPECT_EQ(o.prefix, "train");
  EXPECT_TRUE(o.shuffle);
  EXPECT_EQ(o.seed, 7u);
  EXPECT_TRUE(flags->seeded);
  EXPECT_TRUE(o.skip_damaged);
  EXPECT_EQ(o.buffer_bytes, uint64_t{2} << 20);
  EXPECT_EQ(o.memory, uint64_t{4} << 20);
  ASSERT_TRUE(o.part.has_value());
  EXPECT_EQ(o.part->index, 1u);
  EXPECT_EQ(o.part->count, 2u);
  EXPECT_EQ(flags->pass, "map");
  EXPECT_TRUE(flags->codec_given);
  EXPECT_EQ(flags->compression, "gzip");
  // Neither --shards nor --shard-size: shards of the default size.
  auto plain = Parse({"a", "-o", "o"});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->options.shard_size, repack::kDefaultShardSize);
  EXPECT_FALSE(plain->options.part.has_value());
}

scan::ScannedShard ShardOf(source::Codec codec) {
  scan::ScannedShard s;
  s.codec = codec;
  return s;
}

TEST_F(ReshardFlagsTest, TheFormatAndCodecComeFromTheFlagsElseTheShards) {
  using source::Codec;
  const std::vector<scan::ScannedShard> gzip = {ShardOf(Codec::kGzip), ShardOf(Codec::kGzip)};
  const std::vector<scan::ScannedShard> mixed = {ShardOf(Codec::kGzip), ShardOf(Codec::kNone)};
  const std::vector<scan::ScannedShard> arrays = {ShardOf(Codec::kArrayRecord)};

  auto f = Parse({"in", "-o", "out"});
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(ResolveReshardFormat(gzip, &*f).ok());
  EXPECT_EQ(f->format, "tfrecord");
  EXPECT_EQ(f->options.codec, Codec::kGzip);  // the shards' common codec

  f = Parse({"in", "-o", "out"});
  ASSERT_TRUE(ResolveReshardFormat(mixed, &*f).ok());
  EXPECT_EQ(f->options.codec, Codec::kNone);

  f = Parse({"in", "-o", "out"});
  ASSERT_TRUE(ResolveReshardFormat(arrays, &*f).ok());
  EXPECT_EQ(f->format, "arrayrecord");
  EXPECT_EQ(f->options.codec, Codec::kArrayRecord);
  EXPECT_EQ(f->options.array_record.group_size, 1u);

  f = Parse({"in", "-o", "out", "--group-size", "4"});
  ASSERT_TRUE(ResolveReshardFormat(arrays, &*f).ok());
  EXPECT_EQ(f->options.array_record.group_size, 4u);

  f = Parse({"in", "-o", "out", "--compression", "zlib"});
  ASSERT_TRUE(ResolveReshardFormat(gzip, &*f).ok());
  EXPECT_EQ(f->options.codec, Codec::kZlib);
}

TEST_F(ReshardFlagsTest, AFormatThatCannotTakeAFlagIsAUsageError) {
  using source::Codec;
  const std::vector<scan::ScannedShard> plain = {ShardOf(Codec::kNone)};
  auto message = [&](std::vector<std::string> args) {
    auto f = Parse(std::move(args));
    EXPECT_TRUE(f.ok()) << f.status();
    if (!f.ok()) return std::string();
    const absl::Status s = ResolveReshardFormat(plain, &*f);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    return std::string(s.message());
  };
  // --group-size without arrayrecord: said or found in the shards.
  EXPECT_EQ(message({"in", "-o", "out", "--format", "tfrecord", "--group-size", "4"}),
            "--group-size needs --format arrayrecord");
  EXPECT_EQ(message({"in", "-o", "out", "--group-size", "4"}),
            "--group-size needs --format arrayrecord");
  EXPECT_EQ(message({"in", "-o", "out", "--compression", "zstd"}),
            "--compression needs none, gzip or zlib, not 'zstd'");
  EXPECT_TRUE(absl::StartsWith(
      message({"in", "-o", "out", "--format", "arrayrecord", "--compression", "gzip"}),
      "--compression: "));
}

TEST_F(ReshardFlagsTest, TheJobSaysThePassAndWhetherAReduceTakesTheMapsCodec) {
  const std::vector<scan::ScannedShard> none;  // a reduce scans no shard
  auto job_of = [&](std::vector<std::string> args) {
    auto f = Parse(std::move(args));
    EXPECT_TRUE(f.ok()) << f.status();
    if (!f.ok()) return reshape::ReshardJob();
    EXPECT_TRUE(ResolveReshardFormat(none, &*f).ok());
    return ReshardJobOf(*tool_, *f);
  };
  const std::vector<std::string> shuffle = {"in", "-o",     "out", "--shuffle", "--seed",
                                            "3",  "--part", "1/2", "--pass"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = shuffle;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  reshape::ReshardJob map = job_of(with({"map"}));
  EXPECT_EQ(map.pass, reshape::ReshardPass::kMap);
  EXPECT_EQ(map.options.seed, 3u);
  ASSERT_TRUE(map.options.part.has_value());
  EXPECT_EQ(map.options.part->index, 1u);
  reshape::ReshardJob reduce = job_of(with({"reduce"}));
  EXPECT_EQ(reduce.pass, reshape::ReshardPass::kReduce);
  EXPECT_TRUE(reduce.codec_from_map);
  EXPECT_FALSE(job_of(with({"reduce", "--compression", "none"})).codec_from_map);
  EXPECT_FALSE(job_of(with({"reduce", "--format", "arrayrecord"})).codec_from_map);
  EXPECT_EQ(job_of({"in", "-o", "out"}).pass, reshape::ReshardPass::kWhole);
}

}  // namespace
}  // namespace tfrecordfs::cli
