// The mount's shard set (vfs/shard_set.h): shards opened from files written
// here, read through the caches and the readahead, a rewritten shard
// reopened as the next generation with the old one retired, and which ids
// are retired or stale. Every test ends by destroying a ShardSet that holds
// sources reading through its caches (and, where it reads ahead, the
// readahead's threads): the sanitizer builds check the destruction order.
#include <stdio.h>
#include <sys/stat.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/shard.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/scan/scan.h"
#include "tfrecordfs/source/readahead.h"
#include "tfrecordfs/vfs/mounted_shard.h"
#include "tfrecordfs/vfs/node_id.h"
#include "tfrecordfs/vfs/shard_set.h"

namespace tfrecordfs::vfs {
namespace {

std::vector<std::string> Payloads(absl::string_view stem, int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(absl::StrCat(stem, "-", i));
  return out;
}

// Record `r`'s payload as `shard` reads it (its framing: 8 bytes of
// length, 4 of CRC, the payload, 4 of CRC).
std::string Payload(const MountedShard& shard, uint64_t r) {
  const std::vector<uint64_t>& offsets = shard.index->offsets();
  const uint64_t begin = offsets[r] + 12, end = offsets[r + 1] - 4;
  std::string out(end - begin, '\0');
  auto n = shard.source->ReadAt(begin, out.data(), out.size());
  if (!n.ok()) return absl::StrCat("read failed: ", n.status().message());
  out.resize(*n);
  return out;
}

class ShardSetTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(tmp_.path().empty()); }

  std::string Path(absl::string_view name) { return absl::StrCat(tmp_.path(), "/", name); }

  // The shard at `path` as a mount scans it, shown at `mount_path`.
  scan::ScannedShard Scanned(const std::string& path, const std::string& mount_path) {
    auto scanned = scan::ScanOne(path, /*store=*/nullptr);
    EXPECT_TRUE(scanned.ok()) << scanned.status();
    if (!scanned.ok()) return {};
    scanned->mount_path = mount_path;
    return *std::move(scanned);
  }

  // `payloads` written to a new file renamed over `path`, as a commit
  // replaces a shard (the old file lives on for descriptors open on it).
  void Replace(const std::string& path, const std::vector<std::string>& payloads) {
    const std::string tmp = path + ".new";
    ASSERT_NO_FATAL_FAILURE(test::WriteShard(tmp, payloads));
    ASSERT_EQ(0, ::rename(tmp.c_str(), path.c_str()));
  }

  test::TempDir tmp_{"shard_set_test"};
};

TEST_F(ShardSetTest, AddOpensEachShardThroughTheCaches) {
  const std::string a = Path("a.tfrecord"), b = Path("b.tfrecord.gz");
  ASSERT_NO_FATAL_FAILURE(test::WriteShard(a, Payloads("a", 12)));
  ASSERT_NO_FATAL_FAILURE(test::WriteCompressibleShard(b, source::Codec::kGzip, 200, 300));
  ShardSet set(/*max_open=*/4, /*block_cache_bytes=*/size_t{1} << 20, /*index_store=*/nullptr);
  const struct timespec mtime = {1234, 5};
  ASSERT_TRUE(set.Add(Scanned(a, "a.tfrecord"), mtime).ok());
  ASSERT_TRUE(set.Add(Scanned(b, "sub/b.tfrecord.gz"), mtime).ok());

  ASSERT_EQ(set.size(), 2u);
  ASSERT_EQ(set.retired().size(), 2u);
  EXPECT_EQ(set.mount_path(0), "a.tfrecord");
  EXPECT_EQ(set.mount_path(1), "sub/b.tfrecord.gz");
  EXPECT_EQ(set.mount_path(2), "");
  const MountedShard& first = set.current()[0];
  EXPECT_EQ(first.generation, 1u);
  EXPECT_EQ(first.records_shown(), 12u);
  EXPECT_EQ(first.name_width, 2);  // 00..11
  EXPECT_EQ(first.mtime.tv_sec, 1234);
  EXPECT_EQ(Payload(first, 0), "a-0");
  EXPECT_EQ(Payload(first, 11), "a-11");
  // The GZIP shard reads in uncompressed coordinates (inflated into the
  // block cache).
  const MountedShard& second = set.current()[1];
  EXPECT_EQ(second.source->codec(), source::Codec::kGzip);
  EXPECT_EQ(second.records_shown(), 200u);
  EXPECT_EQ(Payload(second, 199).rfind("record 199 ", 0), 0u) << Payload(second, 199);
  // No generation retired yet.
  for (const MountedShard& retired : set.retired()) {
    EXPECT_EQ(retired.index, nullptr);
    EXPECT_EQ(retired.records_shown(), 0u);
  }
  EXPECT_FALSE(set.IsRetired(RecordId(0, 3, 0, /*generation=*/1)));
  EXPECT_TRUE(set.IsRetired(RecordId(0, 3, 0, /*generation=*/2)));
  EXPECT_FALSE(set.IsRetired(TreeId(0)));
  EXPECT_FALSE(set.IsRetired(RecordId(7, 0, 0, 2)));  // no shard 7
}

TEST_F(ShardSetTest, ReopenRetiresTheOldGenerationAndKeepsItReadable) {
  const std::string a = Path("a.tfrecord"), b = Path("b.tfrecord");
  ASSERT_NO_FATAL_FAILURE(test::WriteShard(a, Payloads("old", 12)));
  ASSERT_NO_FATAL_FAILURE(test::WriteShard(b, Payloads("b", 3)));
  ShardSet set(16, size_t{1} << 20, nullptr);
  ASSERT_TRUE(set.Add(Scanned(a, "a.tfrecord"), {}).ok());
  ASSERT_TRUE(set.Add(Scanned(b, "b.tfrecord"), {}).ok());
  // Read before the rewrite: the descriptor of the old file stays open in
  // the descriptor cache, as a mounted shard's does.
  ASSERT_EQ(Payload(set.current()[0], 5), "old-5");

  ASSERT_NO_FATAL_FAILURE(Replace(a, Payloads("new", 7)));
  auto replaced = set.Reopen(0, a, /*rewritten_index=*/nullptr,
                             /*edited_keys=*/{RecordKey(0, 2), RecordKey(0, 4)});
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_EQ(replaced->shard, 0u);
  EXPECT_EQ(replaced->old_records, 12u);
  EXPECT_EQ(replaced->old_width, 2);

  const MountedShard& now = set.current()[0];
  EXPECT_EQ(now.generation, 2u);
  EXPECT_EQ(now.records_shown(), 7u);
  EXPECT_EQ(now.name_width, 1);
  EXPECT_EQ(Payload(now, 6), "new-6");
  const MountedShard& retired = set.retired()[0];
  EXPECT_EQ(retired.generation, 1u);
  EXPECT_EQ(retired.records_shown(), 12u);
  EXPECT_EQ(Payload(retired, 11), "old-11");
  // The other shard is untouched.
  EXPECT_EQ(set.current()[1].generation, 1u);
  EXPECT_EQ(set.retired()[1].index, nullptr);

  // Generation 1's ids are retired now, generation 2's are current; of the
  // retired ones, the records edited before the rewrite are stale.
  EXPECT_TRUE(set.IsRetired(RecordId(0, 3, 1, 1)));
  EXPECT_FALSE(set.IsRetired(RecordId(0, 3, 1, 2)));
  EXPECT_FALSE(set.IsRetired(RecordId(1, 0, 0, 1)));
  EXPECT_TRUE(set.RetiredStale(RecordId(0, 2, 0, 1)));
  EXPECT_TRUE(set.RetiredStale(RecordId(0, 4, 3, 1)));
  EXPECT_FALSE(set.RetiredStale(RecordId(0, 3, 0, 1)));

  // A second rewrite retires generation 2 (generation 1 is dropped, and
  // with it its stale records; the ids of generation 1 are current again).
  ASSERT_NO_FATAL_FAILURE(Replace(a, Payloads("newer", 20)));
  replaced = set.Reopen(0, a, nullptr, {RecordKey(0, 6)});
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_EQ(replaced->old_records, 7u);
  EXPECT_EQ(replaced->old_width, 1);
  EXPECT_EQ(set.current()[0].generation, 3u);
  EXPECT_EQ(set.retired()[0].generation, 2u);
  EXPECT_EQ(Payload(set.current()[0], 19), "newer-19");
  EXPECT_EQ(Payload(set.retired()[0], 6), "new-6");
  EXPECT_FALSE(set.IsRetired(RecordId(0, 3, 1, 1)));
  EXPECT_TRUE(set.IsRetired(RecordId(0, 3, 1, 2)));
  EXPECT_FALSE(set.RetiredStale(RecordId(0, 2, 0, 2)));
  EXPECT_TRUE(set.RetiredStale(RecordId(0, 6, 0, 2)));
}

TEST_F(ShardSetTest, ReopenAdoptsTheRewritesIndexOnlyForTheFileThere) {
  const std::string a = Path("a.tfrecord");
  ASSERT_NO_FATAL_FAILURE(test::WriteShard(a, Payloads("old", 4)));
  ShardSet set(16, size_t{1} << 20, nullptr);
  ASSERT_TRUE(set.Add(Scanned(a, "a.tfrecord"), {}).ok());

  ASSERT_NO_FATAL_FAILURE(Replace(a, Payloads("new", 9)));
  const std::shared_ptr<const index::ShardIndex> made = Scanned(a, "").index;
  ASSERT_NE(made, nullptr);
  auto replaced = set.Reopen(0, a, made, {});
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_EQ(set.current()[0].index, made);  // adopted, not walked again

  // An index of another file (its size is not the file's): the file is
  // indexed again.
  ASSERT_NO_FATAL_FAILURE(Replace(a, Payloads("newest", 5)));
  replaced = set.Reopen(0, a, made, {});
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_NE(set.current()[0].index, made);
  EXPECT_EQ(set.current()[0].records_shown(), 5u);
  EXPECT_EQ(Payload(set.current()[0], 4), "newest-4");
}

TEST_F(ShardSetTest, FailedReopenChangesNothing) {
  const std::string a = Path("a.tfrecord");
  ASSERT_NO_FATAL_FAILURE(test::WriteShard(a, Payloads("old", 4)));
  ShardSet set(16, size_t{1} << 20, nullptr);
  ASSERT_TRUE(set.Add(Scanned(a, "a.tfrecord"), {}).ok());
  ASSERT_EQ(Payload(set.current()[0], 1), "old-1");

  ASSERT_EQ(0, ::unlink(a.c_str()));
  auto replaced = set.Reopen(0, a, nullptr, {RecordKey(0, 1)});
  EXPECT_FALSE(replaced.ok());
  EXPECT_EQ(set.current()[0].generation, 1u);
  EXPECT_EQ(set.current()[0].records_shown(), 4u);
  EXPECT_EQ(set.retired()[0].index, nullptr);
  EXPECT_FALSE(set.RetiredStale(RecordId(0, 1, 0, 2)));
  EXPECT_EQ(Payload(set.current()[0], 3), "old-3");  // the open descriptor

  EXPECT_EQ(set.Reopen(5, a, nullptr, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ShardSetTest, StartReadaheadWrapsTheOpenShardsAndTheNextOnes) {
  const std::string a = Path("a.tfrecord"), b = Path("b.tfrecord.gz");
  ASSERT_NO_FATAL_FAILURE(test::WriteShard(a, Payloads("a", 50)));
  ASSERT_NO_FATAL_FAILURE(test::WriteCompressibleShard(b, source::Codec::kGzip, 300, 300));
  ShardSet set(16, size_t{1} << 20, nullptr);
  ASSERT_TRUE(set.Add(Scanned(a, "a.tfrecord"), {}).ok());
  EXPECT_FALSE(set.reads_ahead());
  EXPECT_EQ(dynamic_cast<source::ReadaheadSource*>(set.current()[0].source.get()), nullptr);

  ASSERT_TRUE(set.StartReadahead(size_t{1} << 20, source::Readahead::kBlock).ok());
  EXPECT_TRUE(set.reads_ahead());
  EXPECT_EQ(set.StartReadahead(size_t{1} << 20, source::Readahead::kBlock).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(set.Add(Scanned(b, "b.tfrecord.gz"), {}).ok());
  for (const MountedShard& shard : set.current()) {
    EXPECT_NE(dynamic_cast<source::ReadaheadSource*>(shard.source.get()), nullptr);
  }
  // Read in order, so the readahead's threads fetch ahead; the ShardSet
  // then goes with fetches possibly in flight.
  for (uint64_t r = 0; r < 50; ++r) ASSERT_EQ(Payload(set.current()[0], r), absl::StrCat("a-", r));
  set.current()[1].source->ExpectReadFromStart();
  for (uint64_t r = 0; r < 300; r += 7) {
    ASSERT_EQ(Payload(set.current()[1], r).rfind(absl::StrCat("record ", r, " "), 0), 0u);
  }

  // A rewritten shard reopens through the readahead too, and the retired
  // generation keeps its own readahead source.
  ASSERT_NO_FATAL_FAILURE(Replace(a, Payloads("new", 30)));
  auto replaced = set.Reopen(0, a, nullptr, {});
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_NE(dynamic_cast<source::ReadaheadSource*>(set.current()[0].source.get()), nullptr);
  EXPECT_EQ(Payload(set.current()[0], 29), "new-29");
  EXPECT_EQ(Payload(set.retired()[0], 49), "a-49");
}

TEST_F(ShardSetTest, OpenLeavesTheSetAlone) {
  const std::string a = Path("a.tfrecord");
  ASSERT_NO_FATAL_FAILURE(test::WriteShard(a, Payloads("x", 3)));
  ShardSet set(16, size_t{1} << 20, nullptr);
  auto opened = set.Open(Scanned(a, "a.tfrecord"), {});
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(set.size(), 0u);
  EXPECT_EQ(opened->generation, 1u);
  EXPECT_EQ(Payload(*opened, 2), "x-2");
}

}  // namespace
}  // namespace tfrecordfs::vfs
