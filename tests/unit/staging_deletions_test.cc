// The deletion list (staging/deletions.h) and the rewrite that applies it
// (repack/rewrite.h), without a mount: persist and load, damaged files
// refused, a shard rewritten without its deleted records, and recovery
// from a rewrite interrupted on either side of its rename.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/shard.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/repack/journal.h"
#include "tfrecordfs/repack/rewrite.h"
#include "tfrecordfs/staging/deletions.h"
#include "tfrecordfs/staging/edits.h"

namespace tfrecordfs::staging {
namespace {

Fingerprint StatOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return FingerprintOf(st);
}

TEST(DeletionListTest, PersistsAndLoads) {
  test::TempDir dir;
  const std::string path = DeletionsPath(dir.path());
  {
    auto list = DeletionList::Load(path);
    ASSERT_TRUE(list.ok()) << list.status();
    EXPECT_TRUE((*list)->Snapshot().empty());
    ASSERT_TRUE((*list)->Delete("/data/a b.tfrecord", {10, 20, 30}, 7).ok());
    ASSERT_TRUE((*list)->Delete("/data/a b.tfrecord", {10, 20, 30}, 2).ok());
    ASSERT_TRUE((*list)->Delete("/data/c\n.tfrecord", {1, 2, 3}, 0).ok());
    // Another fingerprint: the shard changed since its first deletion.
    EXPECT_TRUE(absl::IsFailedPrecondition((*list)->Delete("/data/a b.tfrecord", {11, 20, 30}, 1)));
  }
  auto list = DeletionList::Load(path);
  ASSERT_TRUE(list.ok()) << list.status();
  const Deletions d = (*list)->Snapshot();
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d.at("/data/a b.tfrecord").records, (std::set<uint64_t>{2, 7}));
  EXPECT_EQ(d.at("/data/a b.tfrecord").before, (Fingerprint{10, 20, 30}));
  EXPECT_EQ(d.at("/data/c\n.tfrecord").records, (std::set<uint64_t>{0}));
  EXPECT_TRUE((*list)->Contains("/data/a b.tfrecord", 7));
  EXPECT_FALSE((*list)->Contains("/data/a b.tfrecord", 3));
  // Forgetting the last shard removes the file.
  ASSERT_TRUE((*list)->Forget("/data/a b.tfrecord").ok());
  ASSERT_TRUE((*list)->Forget("/data/c\n.tfrecord").ok());
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}

TEST(DeletionListTest, ReadOnlyListWritesNothing) {
  test::TempDir dir;
  auto list = DeletionList::Load(DeletionsPath(dir.path()), /*read_only=*/true);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(ErrnoOf((*list)->Delete("/data/a.tfrecord", {}, 1)), EROFS);
}

TEST(DeletionListTest, RefusesDamagedFiles) {
  Deletions d;
  d["/data/a.tfrecord"].records = {1, 5};
  d["/data/a.tfrecord"].rewriting = Fingerprint{4, 5, 6};
  const std::string good = EncodeDeletions(d);
  auto back = ParseDeletions(good, "x");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->at("/data/a.tfrecord").rewriting, (Fingerprint{4, 5, 6}));

  std::string flipped = good;
  flipped[flipped.find("delete 5")] = 'D';
  EXPECT_TRUE(absl::IsDataLoss(ParseDeletions(flipped, "x").status()));
  EXPECT_TRUE(absl::IsDataLoss(ParseDeletions(good.substr(0, good.size() - 3), "x").status()));
  EXPECT_TRUE(absl::IsDataLoss(ParseDeletions("", "x").status()));
  EXPECT_TRUE(absl::IsDataLoss(ParseDeletions("garbage\n", "x").status()));
  // A valid checksum over a relative path (recovery removes files by it).
  Deletions rel;
  rel["data/a.tfrecord"].records = {1};
  auto bad = ParseDeletions(EncodeDeletions(rel), "x");
  EXPECT_TRUE(absl::IsDataLoss(bad.status())) << bad.status();
  // An object of a bucket is named by its URL (a bucket mount's edits);
  // another scheme is not a path.
  Deletions urls;
  urls["s3://b/data/a b.tfrecord"].before = ObjectFingerprint(12, "\"e-1\"");
  urls["s3://b/data/a b.tfrecord"].records = {3};
  urls["gs://b/x.tfrecord"].records = {1};
  auto parsed = ParseDeletions(EncodeDeletions(urls), "x");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(EncodeDeletions(*parsed), EncodeDeletions(urls));
  EXPECT_EQ(parsed->at("s3://b/data/a b.tfrecord").before, ObjectFingerprint(12, "\"e-1\""));
  EXPECT_FALSE(ObjectFingerprint(12, "\"e-1\"") == ObjectFingerprint(12, "\"e-2\""));
  Deletions http;
  http["https://h/a.tfrecord"].records = {1};
  EXPECT_TRUE(absl::IsDataLoss(ParseDeletions(EncodeDeletions(http), "x").status()));

  test::TempDir dir;
  ASSERT_TRUE(WriteFileAtomically(DeletionsPath(dir.path()), flipped).ok());
  auto list = DeletionList::Load(DeletionsPath(dir.path()));
  EXPECT_TRUE(absl::IsDataLoss(list.status())) << list.status();
  EXPECT_NE(list.status().message().find(DeletionsPath(dir.path())), std::string::npos);
}

class RewriteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 6; ++i)
      payloads_.push_back(absl::StrCat("payload ", i, std::string(i * 7, 'x')));
    test::WriteShard(shard_, payloads_);
    auto list = DeletionList::Load(DeletionsPath(dir_.Subdir("store")));
    ASSERT_TRUE(list.ok());
    list_ = *std::move(list);
  }

  // The shard's payloads, read with the project's reader.
  std::vector<std::string> Payloads() {
    auto contents = ReadFileToString(shard_);
    EXPECT_TRUE(contents.ok());
    std::vector<std::string> out;
    EXPECT_TRUE(record::ForEachRecordInBuffer(*contents, [&](uint64_t, absl::string_view d) {
                  out.emplace_back(d);
                }).ok());
    return out;
  }

  std::vector<repack::RewrittenShard> Apply() {
    auto fd = OpenFile(shard_, O_RDONLY);
    EXPECT_TRUE(fd.ok());
    struct stat st;
    ::fstat(fd->get(), &st);
    auto walk = record::WalkHeaders(fd->get(), shard_, st.st_size, 0, UINT64_MAX);
    EXPECT_TRUE(walk.ok());
    source::PlainSource src(*std::move(fd), shard_, st.st_size);
    repack::ShardToRewrite from{&src, &walk->offsets, source::Codec::kNone};
    return repack::ApplyEdits(list_.get(), edits_, naming::NoFeatureTypes(),
                              [&](const std::string& p) { return p == shard_ ? &from : nullptr; });
  }

  // An edit folder holding a raw payload (record_folder.h: record.bin).
  void EditFolder(const std::string& name, absl::string_view payload) {
    ASSERT_EQ(::mkdir(absl::StrCat(edits_, "/", name).c_str(), 0755), 0);
    ASSERT_TRUE(WriteFileAtomically(absl::StrCat(edits_, "/", name, "/record.bin"), payload).ok());
  }

  test::TempDir dir_;
  std::string shard_ = dir_.Join("a.tfrecord");
  std::string temp_ = dir_.Join(repack::TempShardName("a.tfrecord"));
  std::string edits_ = dir_.Subdir("edits");
  std::vector<std::string> payloads_;
  std::unique_ptr<DeletionList> list_;
};

TEST_F(RewriteTest, DropsDeletedRecordsKeepsOthersInOrder) {
  ASSERT_TRUE(list_->Delete(shard_, StatOf(shard_), 1).ok());
  ASSERT_TRUE(list_->Delete(shard_, StatOf(shard_), 4).ok());
  const auto report = Apply();
  ASSERT_EQ(report.size(), 1u);
  ASSERT_TRUE(report[0].status.ok()) << report[0].status;
  EXPECT_EQ(report[0].kept, 4u);
  EXPECT_EQ(report[0].deleted, 2u);
  EXPECT_EQ(Payloads(),
            (std::vector<std::string>{payloads_[0], payloads_[2], payloads_[3], payloads_[5]}));
  EXPECT_TRUE(list_->Snapshot().empty());
  EXPECT_NE(::access(temp_.c_str(), F_OK), 0);
}

TEST_F(RewriteTest, ChangedShardIsLeftAlone) {
  ASSERT_TRUE(list_->Delete(shard_, StatOf(shard_), 1).ok());
  test::WriteShard(shard_, {"other", "records", "now"});
  const auto report = Apply();
  ASSERT_EQ(report.size(), 1u);
  EXPECT_TRUE(absl::IsFailedPrecondition(report[0].status)) << report[0].status;
  EXPECT_EQ(Payloads().size(), 3u);
  EXPECT_EQ(list_->Snapshot().size(), 1u);  // still pending
}

TEST_F(RewriteTest, RecoversBeforeTheRename) {
  // A crash after the temp file was written and marked, before the rename.
  ASSERT_TRUE(list_->Delete(shard_, StatOf(shard_), 1).ok());
  test::WriteShard(temp_, {payloads_[0]});
  ASSERT_TRUE(list_->SetRewriting(shard_, StatOf(temp_)).ok());
  EXPECT_EQ(repack::RecoverRewrites(list_.get(), edits_).size(), 1u);
  EXPECT_NE(::access(temp_.c_str(), F_OK), 0);
  EXPECT_EQ(Payloads(), payloads_);
  const Deletions d = list_->Snapshot();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_FALSE(d.begin()->second.rewriting.has_value());
  EXPECT_EQ(d.begin()->second.records, (std::set<uint64_t>{1}));
}

TEST_F(RewriteTest, RecoversAfterTheRename) {
  // A crash after the rename, before the entry was dropped: applying the
  // deletions again would delete other records.
  ASSERT_TRUE(list_->Delete(shard_, StatOf(shard_), 1).ok());
  test::WriteShard(temp_, {payloads_[0]});
  ASSERT_TRUE(list_->SetRewriting(shard_, StatOf(temp_)).ok());
  ASSERT_EQ(::rename(temp_.c_str(), shard_.c_str()), 0);
  EXPECT_EQ(repack::RecoverRewrites(list_.get(), edits_).size(), 1u);
  EXPECT_TRUE(list_->Snapshot().empty());
  EXPECT_EQ(Payloads(), (std::vector<std::string>{payloads_[0]}));
}

TEST_F(RewriteTest, ReplacesEditedAndAppendsAddedRecordsInNameOrder) {
  ASSERT_TRUE(list_->Register(shard_, StatOf(shard_)).ok());
  ASSERT_TRUE(list_->Delete(shard_, StatOf(shard_), 0).ok());
  const std::string key = ShardKey(shard_);
  EditFolder(EditedFolderName(key, 2), "two, edited");
  EditFolder(AddedFolderName(key, "b"), "added b");
  EditFolder(AddedFolderName(key, "a"), "added a");
  EditFolder(EditedFolderName(ShardKey("/another/shard"), 1), "not this shard's");
  const auto report = Apply();
  ASSERT_EQ(report.size(), 1u);
  ASSERT_TRUE(report[0].status.ok()) << report[0].status;
  EXPECT_EQ(report[0].kept, 4u);
  EXPECT_EQ(report[0].changed, 1u);
  EXPECT_EQ(report[0].added, 2u);
  EXPECT_EQ(report[0].deleted, 1u);
  EXPECT_EQ(Payloads(),
            (std::vector<std::string>{payloads_[1], "two, edited", payloads_[3], payloads_[4],
                                      payloads_[5], "added a", "added b"}));
  EXPECT_TRUE(list_->Snapshot().empty());
  // This shard's folders are gone; the other shard's stay.
  EXPECT_EQ(ListEditFolders(edits_).size(), 1u);
  EXPECT_NE(::access(temp_.c_str(), F_OK), 0);
}

TEST_F(RewriteTest, AFolderThatMakesNoRecordKeepsTheShardPending) {
  ASSERT_TRUE(list_->Register(shard_, StatOf(shard_)).ok());
  const std::string folder = absl::StrCat(edits_, "/", EditedFolderName(ShardKey(shard_), 3));
  ASSERT_EQ(::mkdir(folder.c_str(), 0755), 0);
  ASSERT_TRUE(WriteFileAtomically(folder + "/label", "not a number\n").ok());
  ASSERT_TRUE(WriteFileAtomically(folder + "/record.bin", "x").ok());
  const auto before = StatOf(shard_);
  const auto report = Apply();
  ASSERT_EQ(report.size(), 1u);
  EXPECT_TRUE(absl::IsInvalidArgument(report[0].status)) << report[0].status;
  EXPECT_THAT(std::string(report[0].status.message()), testing::HasSubstr("record 3"));
  EXPECT_EQ(StatOf(shard_), before);  // not rewritten
  EXPECT_EQ(Payloads(), payloads_);
  EXPECT_EQ(list_->Snapshot().size(), 1u);
  EXPECT_EQ(ListEditFolders(edits_).size(), 1u);
}

TEST_F(RewriteTest, ADamagedKeptRecordStopsTheRewrite) {
  // Kept runs of a plain shard are copied without being read
  // (copy_file_range); the check of the new file finds the bad data CRC.
  auto bytes = ReadFileToString(shard_);
  ASSERT_TRUE(bytes.ok());
  std::string damaged = *bytes;
  damaged[damaged.size() - 6] ^= 0x20;  // the last record's data
  ASSERT_TRUE(WriteFileAtomically(shard_, damaged).ok());
  ASSERT_TRUE(list_->Delete(shard_, StatOf(shard_), 0).ok());
  const auto before = StatOf(shard_);
  const auto report = Apply();
  ASSERT_EQ(report.size(), 1u);
  EXPECT_TRUE(absl::IsDataLoss(report[0].status)) << report[0].status;
  EXPECT_EQ(StatOf(shard_), before);
  EXPECT_EQ(*ReadFileToString(shard_), damaged);
  EXPECT_EQ(list_->Snapshot().size(), 1u);
  EXPECT_NE(::access(temp_.c_str(), F_OK), 0);
}

TEST_F(RewriteTest, RecoveryRemovesTheFoldersOfCommittedShards) {
  // A crash after the entry was dropped, before the folders were removed.
  EditFolder(EditedFolderName(ShardKey(shard_), 1), "edited");
  ASSERT_TRUE(list_->Register("/pending/shard", Fingerprint{}).ok());
  EditFolder(EditedFolderName(ShardKey("/pending/shard"), 1), "pending");
  EXPECT_EQ(repack::RecoverRewrites(list_.get(), edits_).size(), 1u);
  const auto left = ListEditFolders(edits_);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left.begin()->first, ShardKey("/pending/shard"));
}

TEST(EditFolderTest, NamesRoundTrip) {
  const std::string key = ShardKey("/data/train-00000-of-00004.tfrecord");
  EXPECT_EQ(key.size(), 16u);
  EXPECT_NE(key, ShardKey("/data/train-00001-of-00004.tfrecord"));
  auto e = ParseEditFolder(EditedFolderName(key, 42));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->key, key);
  EXPECT_EQ(e->record, std::optional<uint64_t>(42));
  auto a = ParseEditFolder(AddedFolderName(key, "new-1"));
  ASSERT_TRUE(a.has_value());
  EXPECT_FALSE(a->record.has_value());
  EXPECT_EQ(a->added, "new-1");
  EXPECT_FALSE(ParseEditFolder(".x.tmp").has_value());
  EXPECT_FALSE(ParseEditFolder(absl::StrCat(key, "-4x")).has_value());
  EXPECT_FALSE(ParseEditFolder(absl::StrCat("ABCDEF0123456789", "-4")).has_value());
}

TEST(ContentKeysTest, AppendLoadReplace) {
  test::TempDir dir;
  const std::string list = DeletionsPath(dir.path());
  const std::string path = RecordKeysPath(list);
  EXPECT_EQ(path, absl::StrCat(dir.path(), "/record-keys"));
  EXPECT_TRUE(LoadContentKeys(path, "s3://b/a").empty());  // no file
  ASSERT_TRUE(AppendContentKey(path, "s3://b/a", 5, {100, 7}).ok());
  ASSERT_TRUE(AppendContentKey(path, "s3://b/x y", 5, {200, 8}).ok());
  ASSERT_TRUE(AppendContentKey(path, "s3://b/a", 5, {101, 9}).ok());  // the last wins
  ASSERT_TRUE(AppendContentKey(path, "s3://b/a", 6, {102, 10}).ok());
  // A torn last line (a crash mid-append) is skipped.
  {
    auto fd = OpenFile(path, O_WRONLY | O_APPEND);
    ASSERT_TRUE(fd.ok());
    ASSERT_TRUE(WriteFull(fd->get(), "12 3", 4, path).ok());
  }
  auto a = LoadContentKeys(path, "s3://b/a");
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(a[5], (ContentKey{101, 9}));
  EXPECT_EQ(a[6], (ContentKey{102, 10}));
  EXPECT_EQ(LoadContentKeys(path, "s3://b/x y")[5], (ContentKey{200, 8}));
  ASSERT_TRUE(ReplaceContentKeys(path, "s3://b/a", {{1, {5, 6}}}).ok());
  a = LoadContentKeys(path, "s3://b/a");
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[1], (ContentKey{5, 6}));
  EXPECT_EQ(LoadContentKeys(path, "s3://b/x y").size(), 1u);
  ASSERT_TRUE(ReplaceContentKeys(path, "s3://b/a").ok());
  ASSERT_TRUE(ReplaceContentKeys(path, "s3://b/x y").ok());
  EXPECT_NE(::access(path.c_str(), F_OK), 0);  // nothing left: no file
}

}  // namespace
}  // namespace tfrecordfs::staging
