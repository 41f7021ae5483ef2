// The image views (-o view=gallery, -o view=classes) through the FUSE
// operations, without a mount: a temp tree of shards, a vfs::Filesystem
// over it per view, and fuse::Do* as the kernel would call them.
#include <fcntl.h>
#include <linux/fuse.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/ops.h"
#include "testing/shard.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/fuse/errno.h"
#include "tfrecordfs/fuse/ops.h"
#include "tfrecordfs/index/index_store.h"
#include "tfrecordfs/vfs/filesystem.h"

namespace tfrecordfs::fuse {
namespace {

using example::Feature;
using example::Kind;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

// Record r of the test shard: a JPEG and a label (r % 3), except record 5
// (a JPEG and a PNG mask), record 7 (no image) and record 9 (a list of 3).
std::string Payload(int r, std::vector<std::string>* storage) {
  auto keep = [&](std::string s) -> absl::string_view {
    storage->push_back(std::move(s));
    return storage->back();
  };
  storage->reserve(64);
  example::FeatureTable t;
  auto bytes = [&](std::string name, std::vector<absl::string_view> v) {
    Feature f;
    f.name = std::move(name);
    f.kind = Kind::kBytes;
    f.bytes = std::move(v);
    t.features.push_back(std::move(f));
  };
  if (r == 9) {
    bytes("image/encoded", {keep(test::FakeJpeg(900, 1)), keep(test::FakeJpeg(901, 2)),
                            keep(test::FakeJpeg(902, 3))});
  } else if (r != 7) {
    bytes("image/encoded", {keep(test::FakeJpeg(1000 + static_cast<size_t>(r), r))});
  }
  if (r == 5) bytes("mask", {keep(test::kFakePng)});
  Feature label;
  label.name = "label";
  label.kind = Kind::kInt64;
  label.int64s = {r % 3};
  t.features.push_back(label);
  std::sort(t.features.begin(), t.features.end(),
            [](const Feature& a, const Feature& b) { return a.name < b.name; });
  return example::EncodeExample(t);
}

std::vector<std::string> Payloads(int n) {
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> storage;
    out.push_back(Payload(r, &storage));
  }
  return out;
}

class ViewsOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
    ASSERT_NO_FATAL_FAILURE(test::WriteShard(dir_ + "/train-0", Payloads(12)));
    ASSERT_EQ(0, ::mkdir((dir_ + "/nested").c_str(), 0755));
    ASSERT_NO_FATAL_FAILURE(test::WriteShard(dir_ + "/nested/eval", Payloads(2)));
    auto fd = OpenFile(dir_ + "/notes.txt", O_WRONLY | O_CREAT, 0644);
    ASSERT_TRUE(fd.ok());
    ASSERT_TRUE(WriteFull(fd->get(), "x\n", 2, "notes").ok());
  }

  std::unique_ptr<Ops> Make(vfs::ViewKind view, index::IndexStore* store = nullptr,
                            std::atomic<uint64_t>* progress = nullptr,
                            std::atomic<uint64_t>* shards_done = nullptr) {
    vfs::Options o;
    if (progress != nullptr) {
      o.on_group_progress = [progress, shards_done](uint64_t shards, uint64_t records, uint64_t) {
        *progress += records;
        if (shards_done != nullptr) *shards_done += shards;
      };
    }
    o.sources = {dir_};
    o.view = view;
    if (view == vfs::ViewKind::kClasses) o.class_feature = "label";
    o.index_store = store;
    auto fs = vfs::Filesystem::Create(o);
    EXPECT_TRUE(fs.ok()) << fs.status();
    if (!fs.ok()) return nullptr;
    filesystems_.push_back(*std::move(fs));
    return std::make_unique<Ops>(filesystems_.back().get(), OpsOptions{});
  }

  static fuse_ino_t Lookup(const Ops& ops, fuse_ino_t parent, absl::string_view name) {
    EntryReply r = DoLookup(ops, parent, name);
    EXPECT_EQ(0, r.err) << name << ": " << std::strerror(r.err);
    EXPECT_NE(0u, r.entry.ino) << name << ": not found";
    return r.entry.ino;
  }
  static std::vector<std::string> List(const Ops& ops, fuse_ino_t ino, size_t page = 1 << 20) {
    std::vector<std::string> names;
    uint64_t offset = 0;
    for (int pages = 0; pages < 10000; ++pages) {
      DirReply r = DoReadDir(ops, ino, page, static_cast<off_t>(offset), false);
      EXPECT_EQ(0, r.err) << std::strerror(r.err);
      const std::vector<test::Dirent> entries = test::ParseDirents(r.buf, false);
      if (r.err || entries.empty()) break;
      for (const test::Dirent& d : entries) {
        names.push_back(d.name);
        offset = d.off;
      }
    }
    return names;
  }
  static std::string ReadAll(const Ops& ops, fuse_ino_t ino) {
    ReadReply r = DoRead(ops, ino, 1 << 20, 0);
    EXPECT_EQ(0, r.err);
    return test::ReadAll(r);
  }

  test::TempDir tmp_{"tfrecordfs_views_ops"};
  std::string dir_;
  std::vector<std::unique_ptr<vfs::Filesystem>> filesystems_;
};

const std::vector<std::string> kGalleryNames = {".",
                                                "..",
                                                "00.jpg",
                                                "01.jpg",
                                                "02.jpg",
                                                "03.jpg",
                                                "04.jpg",
                                                "05-image%2Fencoded.jpg",
                                                "05-mask.png",
                                                "06.jpg",
                                                "08.jpg",
                                                "09-image%2Fencoded-0.jpg",
                                                "09-image%2Fencoded-1.jpg",
                                                "09-image%2Fencoded-2.jpg",
                                                "10.jpg",
                                                "11.jpg"};

TEST_F(ViewsOpsTest, GalleryShowsShardFoldersOfImagesOnly) {
  auto ops = Make(vfs::ViewKind::kGallery);
  ASSERT_NE(ops, nullptr);
  EXPECT_THAT(List(*ops, FUSE_ROOT_ID), ElementsAre(".", "..", "nested", "train-0"));
  const fuse_ino_t shard = Lookup(*ops, FUSE_ROOT_ID, "train-0");
  EXPECT_THAT(List(*ops, shard), ElementsAreArray(kGalleryNames));
  EXPECT_THAT(List(*ops, Lookup(*ops, FUSE_ROOT_ID, "nested")), ElementsAre(".", "..", "eval"));
  EXPECT_EQ(DoLookup(*ops, FUSE_ROOT_ID, "notes.txt").entry.ino, 0u);
  EXPECT_EQ(DoLookup(*ops, FUSE_ROOT_ID, "staging").entry.ino, 0u);
  // Record folders of the records view are not names here.
  EXPECT_EQ(DoLookup(*ops, shard, "00").entry.ino, 0u);
  EXPECT_EQ(DoLookup(*ops, shard, "07.jpg").entry.ino, 0u);
  EXPECT_EQ(DoLookup(*ops, shard, "5.jpg").entry.ino, 0u);
}

TEST_F(ViewsOpsTest, GalleryImagesAreTheRecordsViewFilesByteForByte) {
  auto gallery = Make(vfs::ViewKind::kGallery);
  auto records = Make(vfs::ViewKind::kRecords);
  ASSERT_NE(gallery, nullptr);
  ASSERT_NE(records, nullptr);
  const fuse_ino_t gshard = Lookup(*gallery, FUSE_ROOT_ID, "train-0");
  const fuse_ino_t rshard = Lookup(*records, FUSE_ROOT_ID, "train-0");
  const std::map<std::string, std::string> same = {
      {"00.jpg", "00/image/encoded.jpg"},
      {"05-mask.png", "05/mask.png"},
      {"09-image%2Fencoded-2.jpg", "09/image/encoded/2.jpg"}};
  for (const auto& [gname, rpath] : same) {
    SCOPED_TRACE(gname);
    const fuse_ino_t g = Lookup(*gallery, gshard, gname);
    fuse_ino_t r = rshard;
    for (absl::string_view part : absl::StrSplit(rpath, '/')) r = Lookup(*records, r, part);
    const AttrReply ga = DoGetAttr(*gallery, g), ra = DoGetAttr(*records, r);
    ASSERT_EQ(0, ga.err);
    EXPECT_TRUE(S_ISREG(ga.st.st_mode));
    EXPECT_EQ(ga.st.st_size, ra.st.st_size);
    EXPECT_EQ(ga.st.st_mtim.tv_sec, ra.st.st_mtim.tv_sec);
    const std::string bytes = ReadAll(*gallery, g);
    EXPECT_EQ(bytes.size(), static_cast<size_t>(ga.st.st_size));
    EXPECT_EQ(bytes, ReadAll(*records, r));
  }
  std::vector<std::string> storage;
  Payload(9, &storage);
  EXPECT_EQ(ReadAll(*gallery, Lookup(*gallery, gshard, "09-image%2Fencoded-1.jpg")), storage[1]);
}

TEST_F(ViewsOpsTest, GalleryListingInSmallPagesDecodesEachRecordOnce) {
  auto ops = Make(vfs::ViewKind::kGallery);
  ASSERT_NE(ops, nullptr);
  const fuse_ino_t shard = Lookup(*ops, FUSE_ROOT_ID, "train-0");
  const uint64_t before = ops->fs->GetStats().records_read;
  // Pages of one or two entries: every page resumes inside or after a record.
  EXPECT_THAT(List(*ops, shard, 64), ElementsAreArray(kGalleryNames));
  const uint64_t first = ops->fs->GetStats().records_read - before;
  EXPECT_EQ(first, 12u) << "each record read once for the names";
  EXPECT_THAT(List(*ops, shard), ElementsAreArray(kGalleryNames));
  EXPECT_THAT(List(*ops, shard, 100), ElementsAreArray(kGalleryNames));
  EXPECT_EQ(ops->fs->GetStats().records_read - before, first) << "listed again from the cache";
}

TEST_F(ViewsOpsTest, ImageViewsAreReadOnly) {
  for (vfs::ViewKind view : {vfs::ViewKind::kGallery, vfs::ViewKind::kClasses}) {
    auto ops = Make(view);
    ASSERT_NE(ops, nullptr);
    const fuse_ino_t dir =
        Lookup(*ops, FUSE_ROOT_ID, view == vfs::ViewKind::kGallery ? "train-0" : "1");
    const std::string image = view == vfs::ViewKind::kGallery ? "01.jpg" : "train-0-01.jpg";
    const fuse_ino_t file = Lookup(*ops, dir, image);
    EXPECT_EQ(EROFS, ToErrno(ops->fs->Unlink(dir, image)));
    EXPECT_EQ(EROFS, ToErrno(ops->fs->Rename(dir, image, FUSE_ROOT_ID, "x.jpg", 0)));
    EXPECT_EQ(EROFS, DoCreate(*ops, dir, "new.jpg", S_IFREG | 0644, O_WRONLY).err);
    EXPECT_EQ(EROFS, DoMkdir(*ops, FUSE_ROOT_ID, "new", 0755).err);
    EXPECT_EQ(EROFS, DoOpen(*ops, file, O_RDWR).err);
    EXPECT_EQ(0, DoOpen(*ops, file, O_RDONLY).err);
  }
}

TEST_F(ViewsOpsTest, ClassesGroupRecordsByLabel) {
  auto ops = Make(vfs::ViewKind::kClasses);
  ASSERT_NE(ops, nullptr);
  EXPECT_THAT(List(*ops, FUSE_ROOT_ID), ElementsAre(".", "..", "0", "1", "2"));
  // Records 0, 3, 6, 9 of train-0 and 0 of nested/eval have label 0.
  EXPECT_THAT(List(*ops, Lookup(*ops, FUSE_ROOT_ID, "0")),
              ElementsAre(".", "..", "nested%2Feval-0.jpg", "train-0-00.jpg", "train-0-03.jpg",
                          "train-0-06.jpg", "train-0-09-image%2Fencoded-0.jpg",
                          "train-0-09-image%2Fencoded-1.jpg", "train-0-09-image%2Fencoded-2.jpg"));
  // Record 7 (label 1) has no image; record 5 (label 2) has two.
  const fuse_ino_t two = Lookup(*ops, FUSE_ROOT_ID, "2");
  EXPECT_THAT(List(*ops, two, 80),
              ElementsAre(".", "..", "train-0-02.jpg", "train-0-05-image%2Fencoded.jpg",
                          "train-0-05-mask.png", "train-0-08.jpg", "train-0-11.jpg"));
  // A name of another class's record is not in this folder.
  EXPECT_EQ(DoLookup(*ops, two, "train-0-00.jpg").entry.ino, 0u);
  const fuse_ino_t mask = Lookup(*ops, two, "train-0-05-mask.png");
  EXPECT_EQ(ReadAll(*ops, mask), test::kFakePng);
  XattrReply x = DoGetXattr(*ops, two, "user.tfrecordfs.class", 100);
  EXPECT_EQ(0, x.err);
}

TEST_F(ViewsOpsTest, ClassGroupingIsStoredWithTheIndexAndInvalidatedWithIt) {
  test::TempDir cache_dir("tfrecordfs_views_cache");
  index::StoreOptions store_options;
  store_options.cache_dir = cache_dir.path();
  store_options.durable = false;
  index::IndexStore store(store_options);
  {
    std::atomic<uint64_t> progress{0}, shards{0};  // what the mount's progress bar is told
    auto ops = Make(vfs::ViewKind::kClasses, &store, &progress, &shards);
    ASSERT_NE(ops, nullptr);
    const vfs::Stats s = ops->fs->GetStats();
    EXPECT_EQ(s.group_shards_loaded, 0u);
    EXPECT_EQ(s.group_records_decoded, 14u);
    EXPECT_EQ(progress.load(), 14u);
    // The bar counts shards too (it said "0 shards" throughout).
    EXPECT_EQ(shards.load(), 2u);
  }
  {
    std::atomic<uint64_t> progress{0}, shards{0};
    auto ops = Make(vfs::ViewKind::kClasses, &store, &progress, &shards);
    ASSERT_NE(ops, nullptr);
    EXPECT_EQ(progress.load(), 0u);
    EXPECT_EQ(shards.load(), 2u);
    const vfs::Stats s = ops->fs->GetStats();
    EXPECT_EQ(s.group_shards_loaded, 2u);
    EXPECT_EQ(s.group_records_decoded, 0u) << "the second mount decodes nothing";
    EXPECT_THAT(List(*ops, Lookup(*ops, FUSE_ROOT_ID, "1")),
                ElementsAre(".", "..", "nested%2Feval-1.jpg", "train-0-01.jpg", "train-0-04.jpg",
                            "train-0-10.jpg"));
  }
  // A changed shard: its index is walked again, and its grouping goes with it.
  ASSERT_NO_FATAL_FAILURE(test::WriteShard(dir_ + "/nested/eval", Payloads(5)));
  {
    auto ops = Make(vfs::ViewKind::kClasses, &store);
    ASSERT_NE(ops, nullptr);
    const vfs::Stats s = ops->fs->GetStats();
    EXPECT_EQ(s.group_shards_loaded, 1u);
    EXPECT_EQ(s.group_records_decoded, 5u);
    EXPECT_THAT(List(*ops, Lookup(*ops, FUSE_ROOT_ID, "1")),
                ElementsAre(".", "..", "nested%2Feval-1.jpg", "nested%2Feval-4.jpg",
                            "train-0-01.jpg", "train-0-04.jpg", "train-0-10.jpg"));
  }
}

TEST_F(ViewsOpsTest, ClassViewNamesFitInNameMaxForDeepShardPaths) {
  // A shard 2 x 120 bytes of folders deep: its path alone is longer than a name.
  std::string path = dir_;
  for (char c : {'a', 'b'}) {
    path += "/" + std::string(120, c);
    ASSERT_EQ(0, ::mkdir(path.c_str(), 0755));
  }
  ASSERT_NO_FATAL_FAILURE(test::WriteShard(path + "/" + std::string(40, 's'), Payloads(6)));
  auto ops = Make(vfs::ViewKind::kClasses);
  ASSERT_NE(ops, nullptr);
  const fuse_ino_t two = Lookup(*ops, FUSE_ROOT_ID, "2");
  int deep = 0;
  for (const std::string& name : List(*ops, two)) {
    EXPECT_LE(name.size(), 255u) << name;
    if (name.size() > 100) {
      ++deep;
      EXPECT_NE(Lookup(*ops, two, name), 0u) << name;
    }
  }
  EXPECT_EQ(deep, 3) << "records 2 and 5 (two images) of the deep shard";
}

TEST_F(ViewsOpsTest, ClassesNeedAFeature) {
  vfs::Options o;
  o.sources = {dir_};
  o.view = vfs::ViewKind::kClasses;
  EXPECT_FALSE(vfs::Filesystem::Create(o).ok());
}

}  // namespace
}  // namespace tfrecordfs::fuse
