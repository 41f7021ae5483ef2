// reshape::ShardSyncer: files finished (and renamed) on its thread in the
// order handed over; a failed one removed and reported; nothing left under
// a temporary name once it is gone. Reshard and RepairShard of plain shards
// (runs copied on a copier thread, fsyncs on a syncer's): the inputs'
// framing, every intact record once and in order (tests/cli checks the
// commands further; this runs the threads under TSan too).
#include "tfrecordfs/reshape/reshape.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/files.h"
#include "testing/shard.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/record/writer.h"

namespace tfrecordfs::reshape {
namespace {

std::string Framed(int records, int seed) {
  std::string out;
  for (int i = 0; i < records; ++i) record::AppendFramed(&out, absl::StrCat(seed, " record ", i));
  return out;
}

std::unique_ptr<PendingShard> Written(const std::string& final_path, int records, int seed) {
  auto out = PendingShard::Create(final_path, source::Codec::kNone);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return nullptr;
  for (int i = 0; i < records; ++i) {
    EXPECT_TRUE((*out)->Append(absl::StrCat(seed, " record ", i)).ok());
  }
  return *std::move(out);
}

std::vector<std::string> Names(const std::string& dir) {
  auto names = ListNames(dir);
  EXPECT_TRUE(names.ok()) << names.status();
  if (!names.ok()) return {};
  std::sort(names->begin(), names->end());
  return *names;
}

TEST(ShardSyncerTest, CommitsInOrderAndRemovesAFileItCannotRename) {
  test::TempDir dir;
  const std::string a = dir.Join("a"), b = dir.Join("b"), c = dir.Join("c");
  test::WriteFile(b, "in the way");
  ShardSyncer syncer(/*commit=*/true);
  syncer.Add(Written(a, 3, 1));
  syncer.Add(Written(b, 4, 2));
  syncer.Add(Written(c, 500, 3));
  std::vector<ShardSyncer::Synced> done = syncer.Wait();
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0].final_path, a);
  EXPECT_TRUE(done[0].status.ok()) << done[0].status;
  EXPECT_EQ(done[1].final_path, b);
  EXPECT_FALSE(done[1].status.ok());
  EXPECT_EQ(done[1].shard, nullptr);
  EXPECT_EQ(done[2].final_path, c);
  EXPECT_TRUE(done[2].status.ok()) << done[2].status;
  EXPECT_TRUE(absl::StrContains(syncer.error().message(), b)) << syncer.error();
  EXPECT_EQ(test::ReadFile(a), Framed(3, 1));
  EXPECT_EQ(test::ReadFile(b), "in the way");  // never replaced
  EXPECT_EQ(test::ReadFile(c), Framed(500, 3));
  EXPECT_EQ(Names(dir.path()), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(syncer.Wait().empty());
}

TEST(ShardSyncerTest, WithoutCommitFilesComeBackFsyncedUnderTheirTemporaryNames) {
  test::TempDir dir;
  const std::string a = dir.Join("a"), b = dir.Join("b");
  ShardSyncer syncer(/*commit=*/false, /*depth=*/2);
  syncer.Add(Written(a, 7, 1));
  syncer.Add(Written(b, 9, 2));
  std::vector<ShardSyncer::Synced> done = syncer.Wait();
  ASSERT_EQ(done.size(), 2u);
  ASSERT_TRUE(done[0].status.ok() && done[1].status.ok());
  EXPECT_EQ(Names(dir.path()), (std::vector<std::string>{".a.tmp", ".b.tmp"}));
  EXPECT_EQ(done[1].shard->file_bytes(), Framed(9, 2).size());
  EXPECT_EQ(test::ReadFile(dir.Join(".b.tmp")), Framed(9, 2));
  ASSERT_TRUE(done[0].shard->Commit().ok());
  done.clear();  // b, never committed, goes
  EXPECT_EQ(Names(dir.path()), (std::vector<std::string>{"a"}));
  EXPECT_EQ(test::ReadFile(a), Framed(7, 1));
}

TEST(ShardSyncerTest, DestroyedWithFilesInHandLeavesNoTemporaryFile) {
  for (bool commit : {true, false}) {
    test::TempDir dir;
    {
      ShardSyncer syncer(commit, /*depth=*/3);
      for (int i = 0; i < 3; ++i) syncer.Add(Written(dir.Join(absl::StrCat(i)), 2000, i));
    }
    // Whatever was renamed before the syncer went is whole; nothing else is left.
    for (const std::string& name : Names(dir.path())) {
      EXPECT_FALSE(absl::StartsWith(name, ".")) << name;
      EXPECT_TRUE(commit) << name;
      EXPECT_EQ(test::ReadFile(dir.Join(name)), Framed(2000, std::stoi(name)));
    }
  }
}

struct Opened {
  std::shared_ptr<const index::ShardIndex> index;
  std::unique_ptr<source::PlainSource> source;
};

Opened Open(const std::string& path) {
  auto fd = OpenFile(path, O_RDONLY | O_CLOEXEC);
  EXPECT_TRUE(fd.ok()) << fd.status();
  if (!fd.ok()) return {};
  struct stat st;
  EXPECT_EQ(0, ::fstat(fd->get(), &st));
  auto idx = index::BuildShardIndex(fd->get(), path, st);
  EXPECT_TRUE(idx.ok()) << idx.status();
  if (!idx.ok()) return {};
  return {*std::move(idx), std::make_unique<source::PlainSource>(
                               *std::move(fd), path, static_cast<uint64_t>(st.st_size))};
}

// Payloads of shard `seed`: sizes 0 .. 70000 bytes, each naming its shard
// and record.
std::vector<std::string> Payloads(int count, int seed) {
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    std::string p = absl::StrCat(seed, "/", i, ":");
    p.resize(p.size() + (i * 7919 + seed * 104729) % 70000, static_cast<char>('a' + i % 26));
    if (i % 11 == 5) p.clear();
    out.push_back(std::move(p));
  }
  return out;
}

std::string FramedAll(const std::vector<std::string>& payloads, size_t from, size_t to) {
  std::string out;
  for (size_t i = from; i < to; ++i) record::AppendFramed(&out, payloads[i]);
  return out;
}

TEST(ReshardTest, InOrderPlainCopyIsTheInputsFramingCutAtTheBoundaries) {
  test::TempDir dir;
  std::vector<std::string> all;
  std::vector<Opened> opened;
  std::vector<Input> inputs;
  for (int s = 0; s < 3; ++s) {
    const std::vector<std::string> p = Payloads(s == 1 ? 1 : 40 + s * 7, s);
    const std::string path = dir.Join(absl::StrCat("in-", s, ".tfrecord"));
    test::WriteShard(path, p);
    all.insert(all.end(), p.begin(), p.end());
    opened.push_back(Open(path));
  }
  for (const Opened& o : opened) inputs.push_back({o.index.get(), o.source.get()});
  for (uint64_t shards : {1, 4, 5}) {
    ReshardOptions options;
    options.output_dir = dir.Subdir(absl::StrCat("out", shards));
    options.shards = shards;
    auto report = Reshard(inputs, options);
    ASSERT_TRUE(report.ok()) << report.status();
    ASSERT_EQ(report->shards.size(), shards);
    EXPECT_EQ(report->records, all.size());
    size_t at = 0;
    for (const OutputShard& out : report->shards) {
      const std::string want = FramedAll(all, at, at + out.records);
      EXPECT_EQ(test::ReadFile(out.path), want) << out.path;
      EXPECT_EQ(out.file_bytes, want.size());
      at += out.records;
    }
    EXPECT_EQ(at, all.size());
    EXPECT_EQ(Names(options.output_dir).size(), shards);  // no temporary file left
  }
}

TEST(RepairTest, WithASyncerEveryIntactRecordInOrderAndTheDamagedOneOut) {
  test::TempDir dir;
  std::vector<std::vector<std::string>> payloads;
  std::vector<Opened> opened;
  for (int s = 0; s < 3; ++s) {
    payloads.push_back(Payloads(30, s));
    const std::string path = dir.Join(absl::StrCat("in-", s, ".tfrecord"));
    test::WriteShard(path, payloads.back());
    if (s == 1) {
      // Record 17's last payload byte flipped: a data CRC mismatch.
      std::string bytes = test::ReadFile(path);
      const size_t end = FramedAll(payloads[1], 0, 18).size();
      ASSERT_FALSE(payloads[1][17].empty());
      bytes[end - 5] ^= 0x20;
      test::WriteFile(path, bytes);
    }
    opened.push_back(Open(path));
  }
  const std::string out = dir.Subdir("out");
  ShardSyncer syncer(/*commit=*/true);
  std::vector<RepairResult> results;
  for (int s = 0; s < 3; ++s) {
    auto r = RepairShard(*opened[s].index, *opened[s].source,
                         JoinPath(out, absl::StrCat("in-", s, ".tfrecord")), {}, &syncer);
    ASSERT_TRUE(r.ok()) << r.status();
    results.push_back(*std::move(r));
  }
  for (const ShardSyncer::Synced& synced : syncer.Wait()) {
    EXPECT_TRUE(synced.status.ok()) << synced.status;
  }
  payloads[1].erase(payloads[1].begin() + 17);
  for (int s = 0; s < 3; ++s) {
    const std::string want = FramedAll(payloads[s], 0, payloads[s].size());
    EXPECT_EQ(test::ReadFile(results[s].output), want) << s;
    EXPECT_EQ(results[s].file_bytes, want.size());
    EXPECT_EQ(results[s].records_kept, payloads[s].size());
  }
  ASSERT_EQ(results[1].dropped.size(), 1u);
  EXPECT_EQ(results[1].dropped[0].record, 17u);
  EXPECT_EQ(Names(out),
            (std::vector<std::string>{"in-0.tfrecord", "in-1.tfrecord", "in-2.tfrecord"}));
}

}  // namespace
}  // namespace tfrecordfs::reshape
