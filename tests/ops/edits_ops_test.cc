// Tier 2: editing records of the shards through the FUSE operations, without
// a mount (vfs/record_edits.h): the first change of a record checks it out
// (its node ids stay, new lookups answer edit-store ids), writes are checked
// like staged files, rm -r's unlinks and rmdir delete, mkdir in a shard
// folder adds a record, Filesystem::Commit rewrites the shard, and a commit
// while mounted (reopen) numbers the records afresh under the next
// generation of their node ids.
#include <fcntl.h>
#include <sys/stat.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/shard.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/fuse/ops.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/staging/deletions.h"
#include "tfrecordfs/staging/layout.h"
#include "tfrecordfs/staging/store.h"
#include "tfrecordfs/vfs/filesystem.h"
#include "tfrecordfs/vfs/node_id.h"

namespace tfrecordfs::fuse {
namespace {

std::string Example(int64_t label, const std::string& text) {
  example::FeatureTable t;
  example::Feature l, x;
  l.name = "label";
  l.kind = example::Kind::kInt64;
  l.int64s = {label};
  x.name = "text";
  x.kind = example::Kind::kBytes;
  x.bytes = {text};
  t.features = {l, x};
  return example::EncodeExample(t);
}

// label of every record of `path`, -1 for a record without one.
std::vector<int64_t> Labels(const std::string& path) {
  std::vector<int64_t> out;
  auto bytes = ReadFileToString(path);
  EXPECT_TRUE(bytes.ok());
  EXPECT_TRUE(record::ForEachRecordInBuffer(*bytes, [&](uint64_t, absl::string_view payload) {
                auto t = example::DecodeExample(payload);
                int64_t v = -1;
                if (t.ok()) {
                  for (const auto& f : t->features) {
                    if (f.name == "label" && f.int64s.size() == 1) v = f.int64s[0];
                  }
                }
                out.push_back(v);
              }).ok());
  return out;
}

class EditsOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    shard_ = src_.Join("a.tfrecord");
    test::WriteShard(shard_, {Example(0, "zero"), Example(1, "one"), Example(2, "two")});
    auto store = staging::Store::Open(store_dir_.path());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    auto edits =
        staging::Store::Open(staging::EditsStoreDir(store_dir_.path()), {.reserve_journal = false});
    ASSERT_TRUE(edits.ok()) << edits.status();
    edits_ = std::move(*edits);
    auto list = staging::DeletionList::Load(staging::DeletionsPath(store_dir_.path()));
    ASSERT_TRUE(list.ok()) << list.status();
    list_ = std::move(*list);
    vfs::Options o;
    o.sources = {src_.path()};
    o.staging = store_.get();
    o.deletions = list_.get();
    o.edits = edits_.get();
    auto fs = vfs::Filesystem::Create(o);
    ASSERT_TRUE(fs.ok()) << fs.status();
    fs_ = std::move(*fs);
    ops_ = std::make_unique<Ops>(fs_.get(), OpsOptions{});
  }

  fuse_ino_t Look(fuse_ino_t parent, const std::string& name) {
    EntryReply r = DoLookup(*ops_, parent, name);
    EXPECT_EQ(0, r.err) << name;
    return r.entry.ino;
  }
  std::string ReadAll(fuse_ino_t ino) {
    ReadReply r = DoRead(*ops_, ino, 1 << 16, 0);
    EXPECT_EQ(0, r.err);
    std::string out = r.data.data;
    return out;
  }

  test::TempDir src_{"tfrecordfs_edits_ops"};
  test::TempDir store_dir_{"tfrecordfs_edits_ops"};
  std::string shard_;
  std::unique_ptr<staging::Store> store_, edits_;
  std::unique_ptr<staging::DeletionList> list_;
  std::unique_ptr<vfs::Filesystem> fs_;
  std::unique_ptr<Ops> ops_;
};

// Each step as a fixture method, so that its own test checks it and the
// commit's test makes all three before committing.
class EditsOpsStepsTest : public EditsOpsTest {
 protected:
  void SetUp() override {
    EditsOpsTest::SetUp();
    shard_ino_ = Look(FUSE_ROOT_ID, "a.tfrecord");
  }

  // Record 1's label becomes 9 through a writable open.
  void EditRecordOne() {
    const fuse_ino_t rec1 = Look(shard_ino_, "1");
    const fuse_ino_t label1 = Look(rec1, "label");
    ASSERT_EQ(vfs::SpaceOf(label1), vfs::Space::kRecord);
    EXPECT_FALSE(fs_->Mutable(label1));
    // A writable open checks the record out; the ids the kernel knows stay.
    OpenReply open = DoOpen(*ops_, label1, O_WRONLY | O_TRUNC);
    ASSERT_EQ(0, open.err) << std::strerror(open.err);
    EXPECT_TRUE(fs_->Mutable(label1));
    EXPECT_FALSE(open.keep_cache);
    EXPECT_EQ(0, DoWrite(*ops_, label1, open.fh, "x\n", 0).err);  // lands: flagged at close
    EXPECT_EQ(0, DoWrite(*ops_, label1, open.fh, "9\n", 0).err);
    EXPECT_EQ(0, DoFlush(*ops_, label1, open.fh));
    fs_->Release(open.fh);
    EXPECT_EQ(DoGetAttr(*ops_, label1).st.st_size, 2);
    EXPECT_EQ(ReadAll(label1), "9\n");
    // New lookups in the edited record answer the edit store's ids.
    const fuse_ino_t text1 = Look(rec1, "text.txt");
    EXPECT_EQ(vfs::SpaceOf(text1), vfs::Space::kStaging);
    EXPECT_TRUE(vfs::IsEditId(text1));
    EXPECT_EQ(ReadAll(text1), "one\n");
  }

  // rm -r 2: the files, then the folder.
  void DeleteRecordTwo() {
    const fuse_ino_t rec2 = Look(shard_ino_, "2");
    ASSERT_TRUE(fs_->Unlink(rec2, "label").ok());
    ASSERT_TRUE(fs_->Unlink(rec2, "text.txt").ok());
    EXPECT_EQ(ENOTEMPTY, ErrnoOf(fs_->Rmdir(shard_ino_, "0")));  // shows files
    ASSERT_TRUE(fs_->Rmdir(shard_ino_, "2").ok());
    EXPECT_EQ(0u, DoLookup(*ops_, shard_ino_, "2").entry.ino);  // gone (a cached miss)
  }

  // mkdir in the shard folder adds a record, "new", of label 5.
  void AddRecord() {
    EntryReply added = DoMkdir(*ops_, shard_ino_, "new", 0755);
    ASSERT_EQ(0, added.err) << std::strerror(added.err);
    CreateReply label_new = DoCreate(*ops_, added.entry.ino, "label", 0644, O_WRONLY | O_CREAT);
    ASSERT_EQ(0, label_new.err);
    ASSERT_EQ(0, DoWrite(*ops_, label_new.entry.ino, label_new.fh, "5\n", 0).err);
    if (label_new.fh != 0) fs_->Release(label_new.fh);
    // A file directly in a shard folder is no record.
    EXPECT_EQ(EPERM, DoCreate(*ops_, shard_ino_, "loose", 0644, O_WRONLY | O_CREAT).err);
  }

  fuse_ino_t shard_ino_ = 0;
};

TEST_F(EditsOpsStepsTest, AWritableOpenChecksTheRecordOutUnderTheSameIds) { EditRecordOne(); }

TEST_F(EditsOpsStepsTest, RmDashROfARecordDeletesIt) { DeleteRecordTwo(); }

TEST_F(EditsOpsStepsTest, MkdirInAShardFolderAddsARecord) { AddRecord(); }

TEST_F(EditsOpsStepsTest, CommitWhileMountedRewritesTheShardAndShowsItAfresh) {
  EditRecordOne();
  DeleteRecordTwo();
  AddRecord();
  ASSERT_FALSE(HasFailure());
  const fuse_ino_t shard = shard_ino_;
  const uint64_t gen_before = DoLookup(*ops_, shard, "0").entry.generation;
  auto committed = fs_->Commit(/*reopen=*/true);
  ASSERT_TRUE(committed.ok()) << committed.status();
  ASSERT_EQ(committed->size(), 1u);
  const repack::RewrittenShard& r = (*committed)[0];
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.kept, 1u);
  EXPECT_EQ(r.changed, 1u);
  EXPECT_EQ(r.added, 1u);
  EXPECT_EQ(r.deleted, 1u);
  EXPECT_EQ(Labels(shard_), (std::vector<int64_t>{0, 9, 5}));
  const EntryReply rec2_now = DoLookup(*ops_, shard, "2");
  ASSERT_EQ(0, rec2_now.err);
  EXPECT_EQ(rec2_now.entry.generation, gen_before + 1);
  EXPECT_EQ(ReadAll(Look(rec2_now.entry.ino, "label")), "5\n");
  EXPECT_EQ(0u, DoLookup(*ops_, shard, "new").entry.ino);
  EXPECT_FALSE(fs_->Mutable(Look(Look(shard, "1"), "label")));
  // Nothing left to commit.
  auto again = fs_->Commit(/*reopen=*/true);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
}

}  // namespace
}  // namespace tfrecordfs::fuse
