// reshape::RunReshard (reshape/reshard_run.h), the run step of `reshard`
// without its command line: one process's shards delivered under their
// final names; in-order parts published in their folders, byte for byte
// one process's shards once --finalize's FinalizeParts names them; a
// shuffle's map and reduce parts the same as one process's shuffle; and
// FailedIn naming the step a failure came from. (The command's words and
// exit statuses: tests/cli.)
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/files.h"
#include "testing/shard.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/record/writer.h"
#include "tfrecordfs/reshape/parts.h"
#include "tfrecordfs/reshape/plan.h"
#include "tfrecordfs/reshape/reshard_run.h"
#include "tfrecordfs/scan/scan.h"

namespace tfrecordfs::reshape {
namespace {

// Three plain shards of `records` records under DIR/in, scanned (walked,
// no index store) with their listing as a part's manifest names it.
struct Sources {
  std::vector<std::string> payloads;  // every record, in source order
  scan::ScanResult scanned;
  std::vector<ManifestInput> listing;
};

Sources MakeSources(const test::TempDir& dir, int records = 40) {
  Sources s;
  const std::string in = dir.Subdir("in");
  for (int k = 0; k < 3; ++k) {
    std::vector<std::string> p;
    for (int i = 0; i < records + k; ++i) p.push_back(absl::StrCat("shard ", k, " record ", i));
    test::WriteShard(JoinPath(in, absl::StrCat("in-", k, ".tfrecord")), p);
    s.payloads.insert(s.payloads.end(), p.begin(), p.end());
  }
  scan::ScanOptions options;
  options.sources = {in};
  auto scanned = scan::Scan(options);
  EXPECT_TRUE(scanned.ok()) << scanned.status();
  if (!scanned.ok()) return s;
  s.scanned = *std::move(scanned);
  std::sort(s.scanned.shards.begin(), s.scanned.shards.end(),
            [](const auto& a, const auto& b) { return a.path < b.path; });
  for (const scan::ScannedShard& shard : s.scanned.shards) {
    s.listing.push_back({shard.path, static_cast<uint64_t>(shard.st.st_size),
                         shard.st.st_mtim.tv_sec * 1'000'000'000 + shard.st.st_mtim.tv_nsec});
  }
  return s;
}

PartPlan PlanOf(const Sources& s, uint32_t parts, bool split) {
  std::vector<PlanFile> files;
  for (const ManifestInput& f : s.listing) files.push_back({f.path, f.size, split});
  return PlanParts(files, parts, "reshard test");
}

class RunReshardTest : public testing::Test {
 protected:
  // The output at `path` (OpenReshardOutput), kept for the test.
  const ReshardOutput* OutputAt(const std::string& path) {
    auto out = OpenReshardOutput(path);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return nullptr;
    outputs_.push_back(std::make_unique<ReshardOutput>(*std::move(out)));
    return outputs_.back().get();
  }

  // A job of `s` into 4 shards at `output`.
  ReshardJob JobOf(const Sources& s, const std::string& output) {
    ReshardJob job;
    job.shards = &s.scanned.shards;
    job.listing = s.listing;
    job.output = OutputAt(output);
    job.options.shards = 4;
    return job;
  }

 private:
  std::vector<std::unique_ptr<ReshardOutput>> outputs_;
};

// The files of `dir` (not hidden), sorted, with their bytes.
std::vector<std::pair<std::string, std::string>> Files(const std::string& dir) {
  auto names = ListNames(dir);
  EXPECT_TRUE(names.ok()) << names.status();
  std::vector<std::pair<std::string, std::string>> out;
  if (!names.ok()) return out;
  for (const std::string& n : *names) {
    if (n[0] != '.') out.push_back({n, test::ReadFile(JoinPath(dir, n))});
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string FramedAll(const std::vector<std::string>& payloads) {
  std::string out;
  for (const std::string& p : payloads) record::AppendFramed(&out, p);
  return out;
}

TEST_F(RunReshardTest, OneProcessDeliversItsShardsUnderTheirFinalNames) {
  test::TempDir dir;
  const Sources s = MakeSources(dir);
  ReshardJob job = JobOf(s, dir.Join("out/new"));  // made, parents too
  int begun = 0, ended = 0;
  uint64_t read = 0;
  job.on_pass_begin = [&] { ++begun; };
  job.on_pass_end = [&] { ++ended; };
  job.control.progress = [&](uint64_t n, uint64_t) { read += n; };
  auto result = RunReshard(job);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(begun, 1);
  EXPECT_EQ(ended, 1);
  EXPECT_EQ(read, s.payloads.size());
  EXPECT_EQ(result->pass, ReshardPass::kWhole);
  ASSERT_EQ(result->report.shards.size(), 4u);
  std::string all;
  for (int i = 0; i < 4; ++i) {
    const OutputShard& out = result->report.shards[i];
    EXPECT_EQ(out.path, dir.Join(absl::StrCat("out/new/data-0000", i, "-of-00004.tfrecord")));
    all += test::ReadFile(out.path);
  }
  EXPECT_EQ(all, FramedAll(s.payloads));
  // No dataset_info.json beside the sources: none written, nothing to say.
  ASSERT_TRUE(result->tfds_info.has_value());
  EXPECT_FALSE(result->tfds_info->written.has_value());
  EXPECT_TRUE(result->tfds_info->error.ok());

  // Again: the names are taken, in the pass (nothing written).
  auto again = RunReshard(job);
  EXPECT_TRUE(absl::IsAlreadyExists(again.status())) << again.status();
  EXPECT_EQ(FailedIn(again.status()), ReshardStep::kPass);
}

TEST_F(RunReshardTest, InOrderPartsArePublishedAndFinalizeToOneProcesssShards) {
  test::TempDir dir;
  const Sources s = MakeSources(dir);
  auto one = RunReshard(JobOf(s, dir.Join("one")));
  ASSERT_TRUE(one.ok()) << one.status();
  const PartPlan plan = PlanOf(s, 3, false);
  for (uint32_t k = 0; k < 3; ++k) {
    ReshardJob job = JobOf(s, dir.Join("parts"));
    job.options.part = PartSpec{k, 3};
    job.plan = plan;
    auto part = RunReshard(job);
    ASSERT_TRUE(part.ok()) << part.status();
    EXPECT_FALSE(part->tfds_info.has_value());
    const std::string published = PublishedPartDir(dir.Join("parts"), plan.IdHex(), k);
    for (const OutputShard& out : part->report.shards) {
      EXPECT_EQ(Dirname(out.path), published);
    }
    auto manifest = ReadManifest(published);
    ASSERT_TRUE(manifest.ok()) << manifest.status();
    EXPECT_EQ(manifest->command, "reshard");
    EXPECT_EQ(manifest->inputs.size(), 3u);  // an in-order part reads every shard
    EXPECT_EQ(manifest->outputs.size(), part->report.shards.size());
  }
  auto finalized = FinalizeParts(
      dir.Join("parts"), "reshard", [&](uint32_t n) { return PlanOf(s, n, false).IdHex(); },
      s.listing);
  ASSERT_TRUE(finalized.ok()) << finalized.status();
  EXPECT_EQ(Files(dir.Join("parts")), Files(dir.Join("one")));
}

TEST_F(RunReshardTest, AShuffleAsMapAndReduceParts) {
  test::TempDir dir;
  const Sources s = MakeSources(dir, 300);
  ReshardJob whole = JobOf(s, dir.Join("one"));
  whole.options.shuffle = true;
  whole.options.seed = 7;
  auto one = RunReshard(whole);
  ASSERT_TRUE(one.ok()) << one.status();

  const PartPlan plan = PlanOf(s, 2, true);
  ReshardJob job = whole;
  job.output = OutputAt(dir.Join("parts"));
  job.plan = plan;
  // The reduce before any map: the map parts are missing, a step around
  // the pass.
  job.options.part = PartSpec{0, 2};
  job.pass = ReshardPass::kReduce;
  const std::vector<scan::ScannedShard> none;
  job.shards = &none;
  auto early = RunReshard(job);
  EXPECT_TRUE(absl::IsFailedPrecondition(early.status())) << early.status();
  EXPECT_EQ(FailedIn(early.status()), ReshardStep::kOther);

  uint64_t mapped = 0;
  for (uint32_t k = 0; k < 2; ++k) {
    // Each map part reads its own pieces of the shards (all of them here:
    // a part scans only its own files, but the test hands it all three).
    job.shards = &s.scanned.shards;
    job.options.part = PartSpec{k, 2};
    job.pass = ReshardPass::kMap;
    auto map = RunReshard(job);
    ASSERT_TRUE(map.ok()) << map.status();
    EXPECT_EQ(map->pass, ReshardPass::kMap);
    EXPECT_GE(map->buckets, 1u);
    mapped += map->map.records;
  }
  EXPECT_EQ(mapped, s.payloads.size());  // every record in exactly one map part
  for (uint32_t k = 0; k < 2; ++k) {
    job.shards = &none;
    job.options.part = PartSpec{k, 2};
    job.pass = ReshardPass::kReduce;
    auto reduce = RunReshard(job);
    ASSERT_TRUE(reduce.ok()) << reduce.status();
  }
  auto finalized = FinalizeParts(
      dir.Join("parts"), "reshard", [&](uint32_t n) { return PlanOf(s, n, true).IdHex(); },
      s.listing);
  ASSERT_TRUE(finalized.ok()) << finalized.status();
  EXPECT_EQ(Files(dir.Join("parts")), Files(dir.Join("one")));
}

TEST_F(RunReshardTest, ACancelledPassLeavesNothingAndSaysItWasThePass) {
  test::TempDir dir;
  const Sources s = MakeSources(dir);
  ReshardJob job = JobOf(s, dir.Join("out"));
  std::atomic<bool> cancel{true};
  job.control.cancel = &cancel;
  auto result = RunReshard(job);
  EXPECT_TRUE(absl::IsCancelled(result.status())) << result.status();
  EXPECT_EQ(FailedIn(result.status()), ReshardStep::kPass);
  EXPECT_TRUE(Files(dir.Join("out")).empty());
}

TEST_F(RunReshardTest, AnOutputThatIsAFileFailsBeforeThePass) {
  test::TempDir dir;
  const Sources s = MakeSources(dir);
  test::WriteFile(dir.Join("file"), "x");
  ReshardJob job = JobOf(s, dir.Join("file"));
  bool begun = false;
  job.on_pass_begin = [&] { begun = true; };
  auto result = RunReshard(job);
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(FailedIn(result.status()), ReshardStep::kOther);
  EXPECT_FALSE(begun);
}

}  // namespace
}  // namespace tfrecordfs::reshape
