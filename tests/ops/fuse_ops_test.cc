// FUSE operations without a mount: a temp directory of shards, a
// vfs::Filesystem over it, and the fuse::Do* functions, whose replies are
// checked as the kernel would read them (dirent buffers parsed with the
// <linux/fuse.h> layout).
#include <dirent.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/files.h"
#include "testing/make_feature.h"
#include "testing/ops.h"
#include "testing/shard.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/fuse/errno.h"
#include "tfrecordfs/fuse/ops.h"
#include "tfrecordfs/naming/feature_type.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/writer.h"
#include "tfrecordfs/staging/layout.h"
#include "tfrecordfs/staging/staged_file.h"
#include "tfrecordfs/staging/store.h"
#include "tfrecordfs/tensor/npy.h"
#include "tfrecordfs/tensor/png.h"
#include "tfrecordfs/vfs/filesystem.h"
#include "tfrecordfs/vfs/node_id.h"

namespace tfrecordfs::fuse {
namespace {

using example::Feature;
using example::FeatureTable;
using example::Kind;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// ---------------------------------------------------------------------------
// Building the source tree.

const std::string kBlob = std::string("\x00\x01\x02\x03\xfe", 5);

// A feature table builder; bytes values are copied into storage it owns.
class TableBuilder {
 public:
  TableBuilder& Int64s(std::string name, std::vector<int64_t> v) {
    features_.push_back(test::MakeFeature(std::move(name), std::move(v)));
    return *this;
  }
  TableBuilder& Floats(std::string name, std::vector<float> v) {
    features_.push_back(test::MakeFeature(std::move(name), std::move(v)));
    return *this;
  }
  TableBuilder& Bytes(std::string name, std::vector<std::string> v) {
    std::vector<absl::string_view> views;
    for (std::string& s : v) {
      storage_.push_back(std::make_unique<std::string>(std::move(s)));
      views.push_back(*storage_.back());
    }
    features_.push_back(test::MakeFeature(std::move(name), std::move(views)));
    return *this;
  }
  // TFX's missing value: an empty Feature{} with no list set.
  TableBuilder& Kindless(std::string name) {
    features_.emplace_back().name = std::move(name);
    return *this;
  }
  std::string Encode() {
    FeatureTable t;
    t.features = features_;
    std::sort(t.features.begin(), t.features.end(),
              [](const Feature& a, const Feature& b) { return a.name < b.name; });
    return example::EncodeExample(t);
  }

 private:
  std::vector<Feature> features_;
  std::vector<std::unique_ptr<std::string>> storage_;
};

using test::Dirent;
using test::FakeJpeg;
using test::kFakePng;
using test::Names;
using test::ParseDirents;
using test::ReadAll;
using test::WriteFile;
using test::WriteShard;

std::string TrainPayload(int r) {
  return TableBuilder()
      .Int64s("id", {r})
      .Bytes("image/encoded", {FakeJpeg(5000 + static_cast<size_t>(r), r)})
      .Int64s("image/class/label", {r % 3})
      .Bytes("image/class/text", {absl::StrCat("class ", r % 3)})
      .Floats("score", {static_cast<float>(r) * 0.5f})
      .Bytes("frames", {kFakePng, kBlob})
      .Encode();
}

constexpr char kInfoJson[] = "{\"name\": \"toy\", \"splits\": [\"train\"]}\n";

// ---------------------------------------------------------------------------
// Reading the replies: testing/ops.h.

// ---------------------------------------------------------------------------
// The fixture: one tree for the whole suite (it is read-only).

class OpsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new test::TempDir("tfrecordfs_ops");
    dir_ = new std::string(tmp_->path());
    ASSERT_FALSE(dir_->empty());
    const std::string& d = *dir_;
    std::vector<std::string> train0, train1;
    for (int r = 0; r < 12; ++r) train0.push_back(TrainPayload(r));
    for (int r = 0; r < 3; ++r) train1.push_back(TrainPayload(100 + r));
    WriteShard(d + "/train-00000-of-00002", train0);
    WriteShard(d + "/train-00001-of-00002", train1);
    WriteFile(d + "/dataset_info.json", kInfoJson);
    ASSERT_EQ(0, ::mkdir((d + "/nested").c_str(), 0755));
    ASSERT_EQ(0, ::mkdir((d + "/nested/deeper").c_str(), 0755));
    WriteShard(d + "/nested/deeper/eval.tfrecord",
               {TableBuilder().Int64s("label", {7, 8}).Encode(), TableBuilder().Encode()});
    WriteFile(d + "/nested/notes.txt", "plain text\n");
    WriteShard(d + "/raw.tfrecord", {"hello world", "12345"});
    WriteShard(d + "/empty.tfrecord", {});
    big_value_ = new std::string(FakeJpeg(300 * 1024 + 17, 9));
    WriteShard(d + "/big.tfrecord", {TableBuilder().Bytes("image", {*big_value_}).Encode()});

    // Five records; record 2's data is damaged (its CRC no longer matches),
    // and three stray bytes follow the last record.
    std::vector<std::string> dmg;
    for (int r = 0; r < 5; ++r) dmg.push_back(TableBuilder().Int64s("n", {r}).Encode());
    std::string bytes;
    std::vector<uint64_t> offsets;
    for (const std::string& p : dmg) {
      offsets.push_back(bytes.size());
      record::AppendFramed(&bytes, p);
    }
    bytes[offsets[2] + record::kHeaderSize + 1] ^= 0x40;
    bytes += "xyz";
    damaged_offset_ = offsets[2];
    WriteFile(d + "/damaged.tfrecord", bytes);

    vfs::Options o;
    o.sources = {d};
    o.cache_records = 8;  // small, so tests also go through eviction
    auto fs = vfs::Filesystem::Create(o);
    ASSERT_TRUE(fs.ok()) << fs.status();
    fs_ = fs->release();
    ops_ = new Ops{fs_, OpsOptions{}};
  }

  void SetUp() override { ASSERT_NE(nullptr, fs_) << "the shared tree failed to build"; }

  static void TearDownTestSuite() {
    delete ops_;
    delete fs_;
    delete tmp_;  // removes the tree
    delete dir_;
    delete big_value_;
  }

  // Looks a path up from the root; fails the test on an error or a miss.
  static fuse_entry_param Path(absl::string_view path) { return test::LookupPath(*ops_, path); }

  // The whole listing, read in one large request.
  static std::vector<Dirent> List(fuse_ino_t ino, bool plus) {
    DirReply r = DoReadDir(*ops_, ino, 1 << 20, 0, plus);
    EXPECT_EQ(0, r.err) << std::strerror(r.err);
    return ParseDirents(r.buf, plus);
  }

  static std::string Read(fuse_ino_t ino, size_t size, off_t offset) {
    ReadReply r = DoRead(*ops_, ino, size, offset);
    EXPECT_EQ(0, r.err) << std::strerror(r.err);
    return ReadAll(r);
  }

  static test::TempDir* tmp_;
  static std::string* dir_;
  static std::string* big_value_;
  static uint64_t damaged_offset_;
  static vfs::Filesystem* fs_;
  static Ops* ops_;
};

test::TempDir* OpsTest::tmp_ = nullptr;
std::string* OpsTest::dir_ = nullptr;
std::string* OpsTest::big_value_ = nullptr;
uint64_t OpsTest::damaged_offset_ = 0;
vfs::Filesystem* OpsTest::fs_ = nullptr;
Ops* OpsTest::ops_ = nullptr;

// ---------------------------------------------------------------------------
// Lookup and getattr.

TEST_F(OpsTest, RootListing) {
  EXPECT_THAT(Names(List(FUSE_ROOT_ID, false)),
              ElementsAre(".", "..", "big.tfrecord", "damaged.tfrecord", "dataset_info.json",
                          "empty.tfrecord", "nested", "raw.tfrecord", "train-00000-of-00002",
                          "train-00001-of-00002"));
  AttrReply root = DoGetAttr(*ops_, FUSE_ROOT_ID);
  ASSERT_EQ(0, root.err);
  EXPECT_TRUE(S_ISDIR(root.st.st_mode));
  EXPECT_EQ(FUSE_ROOT_ID, root.st.st_ino);
}

TEST_F(OpsTest, LookupPlainFile) {
  EntryReply r = DoLookup(*ops_, FUSE_ROOT_ID, "dataset_info.json");
  ASSERT_EQ(0, r.err);
  ASSERT_NE(0u, r.entry.ino);
  EXPECT_EQ(vfs::Space::kTree, vfs::SpaceOf(r.entry.ino));
  EXPECT_EQ(r.entry.ino, r.entry.attr.st_ino);
  EXPECT_EQ(static_cast<mode_t>(S_IFREG | 0444), r.entry.attr.st_mode);
  EXPECT_EQ(static_cast<off_t>(std::strlen(kInfoJson)), r.entry.attr.st_size);
  EXPECT_EQ(ops_->options.entry_timeout, r.entry.entry_timeout);
  EXPECT_EQ(ops_->options.attr_timeout, r.entry.attr_timeout);
  EXPECT_EQ(::getuid(), r.entry.attr.st_uid);
  // getattr agrees with the lookup.
  AttrReply a = DoGetAttr(*ops_, r.entry.ino);
  ASSERT_EQ(0, a.err);
  EXPECT_EQ(r.entry.attr.st_mode, a.st.st_mode);
  EXPECT_EQ(r.entry.attr.st_size, a.st.st_size);
  EXPECT_EQ(r.entry.attr.st_ino, a.st.st_ino);
  EXPECT_EQ(ops_->options.attr_timeout, a.timeout);
}

TEST_F(OpsTest, ShardsAreDirectories) {
  const fuse_entry_param e = Path("train-00000-of-00002");
  EXPECT_TRUE(S_ISDIR(e.attr.st_mode));
  EXPECT_EQ(static_cast<nlink_t>(2 + 12), e.attr.st_nlink);
  EXPECT_EQ(vfs::Space::kTree, vfs::SpaceOf(e.ino));
  const fuse_entry_param n = Path("nested/deeper/eval.tfrecord");
  EXPECT_TRUE(S_ISDIR(n.attr.st_mode));
  EXPECT_THAT(Names(List(Path("nested").ino, false)),
              ElementsAre(".", "..", "deeper", "notes.txt"));
}

TEST_F(OpsTest, NegativeLookupsAreCached) {
  const fuse_ino_t shard = Path("train-00000-of-00002").ino;
  const fuse_ino_t record = Path("train-00000-of-00002/03").ino;
  const fuse_ino_t image = Path("train-00000-of-00002/03/image").ino;
  const std::vector<std::pair<fuse_ino_t, std::string>> misses = {
      {FUSE_ROOT_ID, "nope"},
      {FUSE_ROOT_ID, ".hidden"},
      {FUSE_ROOT_ID, "dataset_info.json.bak"},
      {shard, "12"},
      {shard, "abc"},
      {shard, ""},
      {shard, "-1"},
      {shard, "99999999999999999999999"},
      {record, "missing"},
      {record, "id.txt"},
      {image, "encoded"},
      {Path("nested").ino, "eval.tfrecord"}};
  for (const auto& [parent, name] : misses) {
    EntryReply r = DoLookup(*ops_, parent, name);
    EXPECT_EQ(0, r.err) << name << ": " << std::strerror(r.err);
    EXPECT_EQ(0u, r.entry.ino) << name;
    EXPECT_EQ(ops_->options.negative_timeout, r.entry.entry_timeout) << name;
  }
}

TEST_F(OpsTest, LookupUnderAFileIsNotADirectory) {
  const fuse_ino_t file = Path("dataset_info.json").ino;
  EntryReply r = DoLookup(*ops_, file, "x");
  EXPECT_EQ(ENOTDIR, r.err);
  const fuse_ino_t leaf = Path("train-00000-of-00002/0/id").ino;
  EXPECT_EQ(ENOTDIR, DoLookup(*ops_, leaf, "x").err);
}

TEST_F(OpsTest, StaleIds) {
  EXPECT_EQ(ENOENT, DoGetAttr(*ops_, vfs::TreeId(100000)).err);
  EXPECT_EQ(ENOENT, DoGetAttr(*ops_, vfs::RecordId(1000, 0, 0)).err);
  const uint64_t rec = Path("train-00000-of-00002/0").ino;
  EXPECT_EQ(ENOENT, DoGetAttr(*ops_, vfs::RecordId(vfs::ShardOf(rec), 12, 0)).err);
  // No such entry in the record's layout.
  EXPECT_EQ(ENOENT, DoGetAttr(*ops_, vfs::RecordId(vfs::ShardOf(rec), 0, 5000)).err);
}

// ---------------------------------------------------------------------------
// Record names.

TEST_F(OpsTest, RecordNamesArePaddedToTheLargestIndex) {
  std::vector<std::string> want = {".", ".."};
  for (int r = 0; r < 12; ++r) want.push_back(r < 10 ? absl::StrCat("0", r) : absl::StrCat(r));
  EXPECT_THAT(Names(List(Path("train-00000-of-00002").ino, false)), ElementsAreArray(want));
  EXPECT_THAT(Names(List(Path("train-00001-of-00002").ino, false)),
              ElementsAre(".", "..", "0", "1", "2"));
  EXPECT_THAT(Names(List(Path("empty.tfrecord").ino, false)), ElementsAre(".", ".."));
}

TEST_F(OpsTest, UnpaddedNamesResolveToTheSameRecord) {
  const fuse_ino_t shard = Path("train-00000-of-00002").ino;
  for (int r = 0; r < 10; ++r) {
    EntryReply padded = DoLookup(*ops_, shard, absl::StrCat("0", r));
    EntryReply plain = DoLookup(*ops_, shard, absl::StrCat(r));
    ASSERT_NE(0u, padded.entry.ino);
    EXPECT_EQ(padded.entry.ino, plain.entry.ino) << r;
    EXPECT_EQ(vfs::Space::kRecord, vfs::SpaceOf(padded.entry.ino));
    EXPECT_EQ(static_cast<uint64_t>(r), vfs::RecordOf(padded.entry.ino));
    EXPECT_EQ(0u, vfs::EntryOf(padded.entry.ino));
  }
  // Over-padded names are not records.
  for (const char* name : {"000", "001", "011", "0011"}) {
    EXPECT_EQ(0u, DoLookup(*ops_, shard, name).entry.ino) << name;
  }
  const fuse_ino_t small = Path("train-00001-of-00002").ino;
  EXPECT_EQ(0u, DoLookup(*ops_, small, "00").entry.ino);
  EXPECT_EQ(0u, DoLookup(*ops_, small, "01").entry.ino);
  EXPECT_NE(0u, DoLookup(*ops_, small, "1").entry.ino);
}

// ---------------------------------------------------------------------------
// Record contents.

TEST_F(OpsTest, RecordLayout) {
  EXPECT_THAT(Names(List(Path("train-00000-of-00002/03").ino, false)),
              ElementsAre(".", "..", "frames", "id", "image", "score"));
  EXPECT_THAT(Names(List(Path("train-00000-of-00002/03/image").ino, false)),
              ElementsAre(".", "..", "class", "encoded.jpg"));
  EXPECT_THAT(Names(List(Path("train-00000-of-00002/03/image/class").ino, false)),
              ElementsAre(".", "..", "label", "text.txt"));
  EXPECT_THAT(Names(List(Path("train-00000-of-00002/03/frames").ino, false)),
              ElementsAre(".", "..", "0.png", "1.bin"));
  EXPECT_EQ("3\n", Read(Path("train-00000-of-00002/03/id").ino, 4096, 0));
  EXPECT_EQ("1.5\n", Read(Path("train-00000-of-00002/03/score").ino, 4096, 0));
  EXPECT_EQ("0\n", Read(Path("train-00000-of-00002/03/image/class/label").ino, 4096, 0));
  EXPECT_EQ("class 0\n", Read(Path("train-00000-of-00002/03/image/class/text.txt").ino, 4096, 0));
  EXPECT_EQ(kFakePng, Read(Path("train-00000-of-00002/03/frames/0.png").ino, 4096, 0));
  EXPECT_EQ(kBlob, Read(Path("train-00000-of-00002/03/frames/1.bin").ino, 4096, 0));
  // Every record of both shards.
  for (int r = 0; r < 12; ++r) {
    const std::string rec = absl::StrCat("train-00000-of-00002/", r);
    EXPECT_EQ(absl::StrCat(r, "\n"), Read(Path(rec + "/id").ino, 100, 0));
    EXPECT_EQ(FakeJpeg(5000 + static_cast<size_t>(r), r),
              Read(Path(rec + "/image/encoded.jpg").ino, 1 << 20, 0));
  }
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(absl::StrCat(100 + r, "\n"),
              Read(Path(absl::StrCat("train-00001-of-00002/", r, "/id")).ino, 100, 0));
  }
  EXPECT_EQ("7\n8\n", Read(Path("nested/deeper/eval.tfrecord/0/label").ino, 100, 0));
  EXPECT_THAT(Names(List(Path("nested/deeper/eval.tfrecord/1").ino, false)),
              ElementsAre(".", ".."));
}

TEST_F(OpsTest, NonExamplePayloadsShowRaw) {
  EXPECT_THAT(Names(List(Path("raw.tfrecord/0").ino, false)), ElementsAre(".", "..", "record.bin"));
  const fuse_entry_param e = Path("raw.tfrecord/0/record.bin");
  EXPECT_EQ(11, e.attr.st_size);
  EXPECT_EQ("hello world", Read(e.ino, 100, 0));
  EXPECT_EQ("12345", Read(Path("raw.tfrecord/1/record.bin").ino, 100, 0));
}

TEST_F(OpsTest, NodeIdsFollowTheLayout) {
  const fuse_entry_param shard = Path("train-00000-of-00002");
  const fuse_entry_param rec = Path("train-00000-of-00002/07");
  const fuse_entry_param file = Path("train-00000-of-00002/07/image/encoded.jpg");
  EXPECT_EQ(vfs::Space::kTree, vfs::SpaceOf(shard.ino));
  EXPECT_EQ(vfs::Space::kRecord, vfs::SpaceOf(rec.ino));
  EXPECT_EQ(7u, vfs::RecordOf(rec.ino));
  EXPECT_EQ(vfs::ShardOf(rec.ino), vfs::ShardOf(file.ino));
  EXPECT_EQ(7u, vfs::RecordOf(file.ino));
  EXPECT_NE(0u, vfs::EntryOf(file.ino));
  // Two shards, same record index, different ids.
  EXPECT_NE(Path("train-00001-of-00002/0").ino, Path("train-00000-of-00002/0").ino);
  // All ids in one record are distinct, and stable across lookups.
  std::set<uint64_t> seen;
  for (const char* p :
       {"", "/frames", "/frames/0.png", "/frames/1.bin", "/id", "/image", "/image/class",
        "/image/class/label", "/image/class/text.txt", "/image/encoded.jpg", "/score"}) {
    const uint64_t ino = Path(absl::StrCat("train-00000-of-00002/07", p)).ino;
    EXPECT_TRUE(seen.insert(ino).second) << p;
    EXPECT_EQ(ino, Path(absl::StrCat("train-00000-of-00002/07", p)).ino);
  }
  // Tree ids of mirrored directories and files are distinct too.
  std::set<uint64_t> tree;
  for (const Dirent& d : List(FUSE_ROOT_ID, true)) {
    if (d.name == "." || d.name == "..") continue;
    EXPECT_EQ(vfs::Space::kTree, vfs::SpaceOf(d.nodeid)) << d.name;
    EXPECT_TRUE(tree.insert(d.nodeid).second) << d.name;
    EXPECT_NE(FUSE_ROOT_ID, d.nodeid);
  }
}

// ---------------------------------------------------------------------------
// Readdir.

void CheckListingAgainstLookups(const Ops& ops, fuse_ino_t dir, const std::vector<Dirent>& ds,
                                bool plus) {
  ASSERT_GE(ds.size(), 2u);
  EXPECT_EQ(".", ds[0].name);
  EXPECT_EQ("..", ds[1].name);
  for (size_t i = 0; i < ds.size(); ++i) {
    const Dirent& d = ds[i];
    SCOPED_TRACE(d.name);
    EXPECT_EQ(i + 1, d.off) << "offsets are positions: . is 0, .. is 1, children follow";
    if (i < 2) {
      if (plus) {
        EXPECT_EQ(0u, d.nodeid) << "no lookup reference for . and ..";
      }
      EXPECT_EQ(static_cast<uint32_t>(DT_DIR), d.type);
      continue;
    }
    EntryReply e = DoLookup(ops, dir, d.name);
    ASSERT_EQ(0, e.err);
    ASSERT_NE(0u, e.entry.ino) << "listed but not found";
    EXPECT_EQ(e.entry.ino, d.ino);
    EXPECT_EQ((e.entry.attr.st_mode & S_IFMT) >> 12, d.type);
    if (plus) {
      EXPECT_EQ(e.entry.ino, d.nodeid);
      EXPECT_EQ(e.entry.ino, d.attr.ino);
      EXPECT_EQ(static_cast<uint64_t>(e.entry.attr.st_size), d.attr.size);
      EXPECT_EQ(e.entry.attr.st_mode, d.attr.mode);
      EXPECT_EQ(e.entry.attr.st_nlink, d.attr.nlink);
    }
  }
}

TEST_F(OpsTest, ReadDirEntriesMatchLookups) {
  for (const char* path : {"", "nested", "train-00000-of-00002", "train-00000-of-00002/05",
                           "train-00000-of-00002/05/image", "train-00000-of-00002/05/frames",
                           "raw.tfrecord/1", "empty.tfrecord"}) {
    SCOPED_TRACE(path);
    const fuse_ino_t dir = *path ? Path(path).ino : FUSE_ROOT_ID;
    for (bool plus : {false, true}) {
      const std::vector<Dirent> ds = List(dir, plus);
      CheckListingAgainstLookups(*ops_, dir, ds, plus);
      EXPECT_EQ(Names(List(dir, !plus)), Names(ds)) << "plus and plain list the same names";
    }
  }
}

// Reads a directory the way the kernel does: small buffers, each request
// resuming at the offset of the last entry received.
std::vector<Dirent> ListInPieces(const Ops& ops, fuse_ino_t dir, size_t size, bool plus,
                                 int* requests) {
  std::vector<Dirent> all;
  off_t offset = 0;
  *requests = 0;
  for (;;) {
    DirReply r = DoReadDir(ops, dir, size, offset, plus);
    ++*requests;
    EXPECT_EQ(0, r.err);
    EXPECT_LE(r.buf.size(), size);
    if (r.err || r.buf.empty() || *requests > 10000) break;
    std::vector<Dirent> part = ParseDirents(r.buf, plus);
    for (Dirent& d : part) {
      EXPECT_GT(static_cast<off_t>(d.off), offset) << "offsets only move forward";
      offset = static_cast<off_t>(d.off);
      all.push_back(std::move(d));
    }
  }
  return all;
}

TEST_F(OpsTest, ReadDirResumesFromReturnedOffsets) {
  for (const char* path : {"", "train-00000-of-00002", "train-00000-of-00002/05"}) {
    const fuse_ino_t dir = *path ? Path(path).ino : FUSE_ROOT_ID;
    for (bool plus : {false, true}) {
      const std::vector<Dirent> whole = List(dir, plus);
      // Sizes that hold one entry, a few entries, and one entry and a bit.
      const size_t one = plus ? FUSE_NAME_OFFSET_DIRENTPLUS + 24 : FUSE_NAME_OFFSET + 24;
      for (size_t size : {one, one + 7, 2 * one + 8, 3 * one + 40, size_t{1024}}) {
        SCOPED_TRACE(absl::StrCat(path, " plus=", plus, " size=", size));
        int requests = 0;
        const std::vector<Dirent> pieces = ListInPieces(*ops_, dir, size, plus, &requests);
        EXPECT_EQ(Names(whole), Names(pieces));
        for (size_t i = 0; i < pieces.size() && i < whole.size(); ++i) {
          EXPECT_EQ(whole[i].off, pieces[i].off);
          EXPECT_EQ(whole[i].ino, pieces[i].ino);
        }
        if (size < 3 * one) {
          EXPECT_GT(requests, 2);
        }
      }
    }
  }
}

TEST_F(OpsTest, ReadDirEdgeCases) {
  const fuse_ino_t shard = Path("train-00000-of-00002").ino;
  // A buffer too small for one entry: nothing, and no error.
  DirReply tiny = DoReadDir(*ops_, shard, 10, 0, false);
  EXPECT_EQ(0, tiny.err);
  EXPECT_TRUE(tiny.buf.empty());
  // Past the end.
  for (off_t off : {off_t{14}, off_t{15}, off_t{1000}}) {
    DirReply r = DoReadDir(*ops_, shard, 4096, off, false);
    EXPECT_EQ(0, r.err);
    EXPECT_TRUE(r.buf.empty()) << off;
  }
  // From the middle: offset 5 resumes after the entry whose offset is 5.
  std::vector<Dirent> tail = ParseDirents(DoReadDir(*ops_, shard, 4096, 5, false).buf, false);
  ASSERT_FALSE(tail.empty());
  EXPECT_EQ("03", tail[0].name);
  EXPECT_EQ(6u, tail[0].off);
  // Not a directory.
  EXPECT_EQ(ENOTDIR, DoReadDir(*ops_, Path("dataset_info.json").ino, 4096, 0, false).err);
  EXPECT_EQ(ENOTDIR, DoReadDir(*ops_, Path("train-00000-of-00002/0/id").ino, 4096, 0, true).err);
  EXPECT_EQ(ENOENT, DoReadDir(*ops_, vfs::TreeId(99999), 4096, 0, false).err);
}

// ---------------------------------------------------------------------------
// Damage.

// A record found intact once is not read from its shard again to open one
// of its files, even after its layout has left the (8-record) cache; reading
// its bytes from the daemon still needs the layout, and reads it again.
TEST_F(OpsTest, OpenOfACheckedRecordDoesNotReadItAgain) {
  std::vector<fuse_ino_t> ids;
  for (int r = 0; r < 12; ++r) {
    ids.push_back(Path(absl::StrFormat("train-00000-of-00002/%02d/id", r)).ino);
  }
  for (fuse_ino_t ino : ids) ASSERT_EQ(0, DoOpen(*ops_, ino, O_RDONLY).err);
  const uint64_t before = fs_->GetStats().records_read;
  // Records 0-3 have left the cache by now; opening them reads nothing.
  for (fuse_ino_t ino : ids) {
    OpenReply r = DoOpen(*ops_, ino, O_RDONLY);
    EXPECT_EQ(0, r.err);
    EXPECT_EQ(EROFS, DoOpen(*ops_, ino, O_WRONLY).err);
    EXPECT_EQ(EROFS, DoOpen(*ops_, ino, O_RDONLY | O_TRUNC).err);
  }
  EXPECT_EQ(before, fs_->GetStats().records_read);
  EXPECT_EQ("0\n", Read(ids[0], 100, 0));
  EXPECT_EQ(before + 1, fs_->GetStats().records_read);
}

TEST_F(OpsTest, DamagedRecordIsEio) {
  EXPECT_THAT(Names(List(Path("damaged.tfrecord").ino, false)),
              ElementsAre(".", "..", "0", "1", "2", "3", "4"));
  // The record directory itself exists (listing a shard reads no payload),
  // but everything inside fails with EIO.
  const fuse_entry_param rec = Path("damaged.tfrecord/2");
  EXPECT_TRUE(S_ISDIR(rec.attr.st_mode));
  EntryReply inside = DoLookup(*ops_, rec.ino, "n");
  EXPECT_EQ(EIO, inside.err);
  EXPECT_EQ(EIO, DoReadDir(*ops_, rec.ino, 4096, 0, false).err);
  EXPECT_EQ(EIO, DoReadDir(*ops_, rec.ino, 4096, 0, true).err);
  // An id of an entry inside it (as a kernel holding an old id would ask).
  const uint64_t entry = vfs::RecordId(vfs::ShardOf(rec.ino), vfs::RecordOf(rec.ino), 1);
  EXPECT_EQ(EIO, DoGetAttr(*ops_, entry).err);
  EXPECT_EQ(EIO, DoOpen(*ops_, entry, O_RDONLY).err);
  EXPECT_EQ(EIO, DoRead(*ops_, entry, 100, 0).err);
  // Asking again gives the same answer (the failure is cached, not forgotten).
  EXPECT_EQ(EIO, DoLookup(*ops_, rec.ino, "n").err);
  // The neighbours are fine.
  for (int r : {0, 1, 3, 4}) {
    EXPECT_EQ(absl::StrCat(r, "\n"),
              Read(Path(absl::StrCat("damaged.tfrecord/", r, "/n")).ino, 10, 0));
  }
  // The error names the shard, the record and its byte offset.
  auto status = fs_->Lookup(rec.ino, "n");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(absl::StatusCode::kDataLoss, status.status().code());
  EXPECT_THAT(status.status().message(), HasSubstr("damaged.tfrecord"));
  EXPECT_THAT(status.status().message(), HasSubstr("record 2"));
  EXPECT_THAT(status.status().message(), HasSubstr(absl::StrCat("byte offset ", damaged_offset_)));
}

// ---------------------------------------------------------------------------
// Extended attributes.

// The NUL-separated names of a listxattr reply, asked the way getfattr asks:
// the size first, then exactly that many bytes.
std::vector<std::string> XattrNames(const Ops& ops, fuse_ino_t ino) {
  XattrReply probe = DoListXattr(ops, ino, 0);
  EXPECT_EQ(0, probe.err) << std::strerror(probe.err);
  EXPECT_TRUE(probe.size_only);
  if (probe.size == 0) return {};
  XattrReply r = DoListXattr(ops, ino, probe.size);
  EXPECT_EQ(0, r.err) << std::strerror(r.err);
  EXPECT_EQ(probe.size, r.data.size());
  EXPECT_EQ('\0', r.data.back());
  std::vector<std::string> names;
  for (size_t at = 0; at < r.data.size();) {
    const size_t end = r.data.find('\0', at);
    names.push_back(r.data.substr(at, end - at));
    at = end + 1;
  }
  return names;
}

std::string Xattr(const Ops& ops, fuse_ino_t ino, absl::string_view name) {
  XattrReply probe = DoGetXattr(ops, ino, name, 0);
  EXPECT_EQ(0, probe.err) << name << ": " << std::strerror(probe.err);
  if (probe.err) return "";
  XattrReply r = DoGetXattr(ops, ino, name, probe.size);
  EXPECT_EQ(0, r.err) << name << ": " << std::strerror(r.err);
  EXPECT_EQ(probe.size, r.data.size());
  return r.data;
}

TEST_F(OpsTest, RecordFolderXattrsComeFromTheIndexAlone) {
  const fuse_ino_t rec = Path("train-00000-of-00002/03").ino;
  const uint64_t before = fs_->GetStats().records_read;
  EXPECT_THAT(XattrNames(*ops_, rec),
              ElementsAre("user.tfrecordfs.shard", "user.tfrecordfs.record",
                          "user.tfrecordfs.offset", "user.tfrecordfs.length"));
  uint64_t offset = 0;
  for (int r = 0; r < 3; ++r) offset += TrainPayload(r).size() + record::kFramingOverhead;
  EXPECT_EQ(*dir_ + "/train-00000-of-00002", Xattr(*ops_, rec, "user.tfrecordfs.shard"));
  EXPECT_EQ("3", Xattr(*ops_, rec, "user.tfrecordfs.record"));
  EXPECT_EQ(absl::StrCat(offset), Xattr(*ops_, rec, "user.tfrecordfs.offset"));
  EXPECT_EQ(absl::StrCat(TrainPayload(3).size()), Xattr(*ops_, rec, "user.tfrecordfs.length"));
  EXPECT_EQ(before, fs_->GetStats().records_read) << "a record folder's attributes read a payload";
  // The size protocol: too small a buffer is ERANGE, an unknown user.* name
  // ENODATA, a name of another namespace (security labels, ACLs) EOPNOTSUPP.
  EXPECT_EQ(ERANGE, DoGetXattr(*ops_, rec, "user.tfrecordfs.shard", 3).err);
  EXPECT_EQ(ERANGE, DoListXattr(*ops_, rec, 5).err);
  EXPECT_EQ(ENODATA, DoGetXattr(*ops_, rec, "user.tfrecordfs.nope", 0).err);
  EXPECT_EQ(ENODATA, DoGetXattr(*ops_, rec, "user.other", 0).err);
  for (const char* name : {"security.capability", "security.selinux", "system.posix_acl_access",
                           "system.posix_acl_default", "trusted.x"}) {
    EXPECT_EQ(EOPNOTSUPP, DoGetXattr(*ops_, rec, name, 0).err) << name;
  }
  EXPECT_EQ(ENODATA, DoGetXattr(*ops_, rec, "user.tfrecordfs.feature", 0).err);
  // A larger buffer than needed is fine.
  XattrReply big = DoGetXattr(*ops_, rec, "user.tfrecordfs.record", 4096);
  EXPECT_EQ(0, big.err);
  EXPECT_FALSE(big.size_only);
  EXPECT_EQ("3", big.data);
}

TEST_F(OpsTest, FeatureFileXattrsNameTheRealFeature) {
  struct Case {
    const char* path;
    const char* feature;
    const char* kind;
  };
  for (const Case& c : std::vector<Case>{
           {"train-00000-of-00002/01/id", "id", "int64"},
           {"train-00000-of-00002/01/score", "score", "float"},
           {"train-00000-of-00002/01/image/encoded.jpg", "image/encoded", "bytes"},
           {"train-00000-of-00002/01/image/class/text.txt", "image/class/text", "text"},
           {"train-00000-of-00002/01/frames", "frames", "bytes list"},
           {"train-00000-of-00002/01/frames/1.bin", "frames", "bytes"},
       }) {
    SCOPED_TRACE(c.path);
    const fuse_ino_t ino = Path(c.path).ino;
    EXPECT_EQ(c.feature, Xattr(*ops_, ino, "user.tfrecordfs.feature"));
    EXPECT_EQ(c.kind, Xattr(*ops_, ino, "user.tfrecordfs.kind"));
  }
  EXPECT_THAT(
      XattrNames(*ops_, Path("train-00000-of-00002/01/frames/1.bin").ino),
      ElementsAre("user.tfrecordfs.feature", "user.tfrecordfs.kind", "user.tfrecordfs.value"));
  EXPECT_EQ(
      "1", Xattr(*ops_, Path("train-00000-of-00002/01/frames/1.bin").ino, "user.tfrecordfs.value"));
  // Folders that are only a '/' in names, raw records, plain files: none.
  for (const char* path : {"train-00000-of-00002/01/image", "raw.tfrecord/0/record.bin",
                           "dataset_info.json", "nested"}) {
    SCOPED_TRACE(path);
    EXPECT_THAT(XattrNames(*ops_, Path(path).ino), ElementsAre());
    EXPECT_EQ(ENODATA, DoGetXattr(*ops_, Path(path).ino, "user.tfrecordfs.feature", 0).err);
  }
  // Shard folders.
  const fuse_ino_t shard = Path("train-00000-of-00002").ino;
  EXPECT_THAT(
      XattrNames(*ops_, shard),
      ElementsAre("user.tfrecordfs.shard", "user.tfrecordfs.records", "user.tfrecordfs.codec"));
  EXPECT_EQ("12", Xattr(*ops_, shard, "user.tfrecordfs.records"));
  EXPECT_EQ("none", Xattr(*ops_, shard, "user.tfrecordfs.codec"));
}

TEST_F(OpsTest, XattrsCannotBeSet) {
  for (const char* path :
       {"train-00000-of-00002/01", "train-00000-of-00002/01/id", "dataset_info.json", ""}) {
    SCOPED_TRACE(path);
    const fuse_ino_t ino = *path ? Path(path).ino : FUSE_ROOT_ID;
    EXPECT_EQ(EPERM, DoSetXattr(*ops_, ino, "user.tfrecordfs.feature"));
    EXPECT_EQ(EPERM, DoSetXattr(*ops_, ino, "user.comment"));
  }
}

TEST_F(OpsTest, DamagedRecordErrorIsListedOnceKnown) {
  // A tree of its own: whether the shared one has read the record depends on
  // the order tests run in.
  vfs::Options o;
  o.sources = {*dir_};
  auto fs = vfs::Filesystem::Create(o);
  ASSERT_TRUE(fs.ok()) << fs.status();
  Ops ops{fs->get(), OpsOptions{}};
  const fuse_ino_t shard = DoLookup(ops, FUSE_ROOT_ID, "damaged.tfrecord").entry.ino;
  const fuse_ino_t rec = DoLookup(ops, shard, "2").entry.ino;
  ASSERT_NE(0u, rec);
  // Not read yet: listing does not read it, so no error is listed.
  EXPECT_THAT(XattrNames(ops, rec),
              ElementsAre("user.tfrecordfs.shard", "user.tfrecordfs.record",
                          "user.tfrecordfs.offset", "user.tfrecordfs.length"));
  EXPECT_EQ(0u, (*fs)->GetStats().records_read);
  // Reading the folder fails; the reason is then an attribute.
  EXPECT_EQ(EIO, DoLookup(ops, rec, "n").err);
  EXPECT_THAT(XattrNames(ops, rec), testing::Contains("user.tfrecordfs.error"));
  const std::string error = Xattr(ops, rec, "user.tfrecordfs.error");
  EXPECT_THAT(error, HasSubstr("damaged.tfrecord"));
  EXPECT_THAT(error, HasSubstr("record 2"));
  EXPECT_THAT(error, HasSubstr(absl::StrCat("byte offset ", damaged_offset_)));
  EXPECT_EQ(absl::StrCat(damaged_offset_), Xattr(ops, rec, "user.tfrecordfs.offset"));
  // Asked for by name, `error` reads a record not read yet...
  const fuse_ino_t fine = DoLookup(ops, shard, "3").entry.ino;
  EXPECT_EQ(ENODATA, DoGetXattr(ops, fine, "user.tfrecordfs.error", 0).err);
  // ...and the answer stays once the record has left the cache.
  for (int r = 0; r < 40; ++r) {
    DoLookup(ops,
             DoLookup(ops, DoLookup(ops, FUSE_ROOT_ID, "train-00000-of-00002").entry.ino,
                      absl::StrCat(r % 12))
                 .entry.ino,
             "id");
  }
  EXPECT_EQ(error, Xattr(ops, rec, "user.tfrecordfs.error"));
  // The shard folder carries what the index walk found (three stray bytes).
  EXPECT_THAT(Xattr(ops, shard, "user.tfrecordfs.error"), HasSubstr("damaged.tfrecord"));
  EXPECT_EQ("5", Xattr(ops, shard, "user.tfrecordfs.records"));
}

// ---------------------------------------------------------------------------
// Open and read.

TEST_F(OpsTest, OpenIsReadOnly) {
  for (const char* path :
       {"dataset_info.json", "train-00000-of-00002/01/id",
        "train-00000-of-00002/01/image/encoded.jpg", "raw.tfrecord/0/record.bin"}) {
    SCOPED_TRACE(path);
    const fuse_ino_t ino = Path(path).ino;
    OpenReply ok = DoOpen(*ops_, ino, O_RDONLY);
    EXPECT_EQ(0, ok.err);
    EXPECT_TRUE(ok.keep_cache);
    EXPECT_EQ(EROFS, DoOpen(*ops_, ino, O_WRONLY).err);
    EXPECT_EQ(EROFS, DoOpen(*ops_, ino, O_RDWR).err);
    EXPECT_EQ(EROFS, DoOpen(*ops_, ino, O_RDONLY | O_TRUNC).err);
    EXPECT_EQ(EROFS, DoOpen(*ops_, ino, O_WRONLY | O_APPEND).err);
  }
  EXPECT_EQ(ENOENT, DoOpen(*ops_, vfs::TreeId(99999), O_RDONLY).err);
}

TEST_F(OpsTest, ReadInlineFile) {
  const fuse_ino_t ino = Path("train-00000-of-00002/11/id").ino;
  ReadReply whole = DoRead(*ops_, ino, 4096, 0);
  ASSERT_EQ(0, whole.err);
  EXPECT_LT(whole.data.fd, 0);
  EXPECT_EQ("11\n", whole.data.data);
  EXPECT_EQ("1\n", Read(ino, 4096, 1));
  EXPECT_EQ("1", Read(ino, 1, 1));
  EXPECT_EQ("", Read(ino, 0, 0));
  EXPECT_EQ("", Read(ino, 4096, 3));  // at EOF
  EXPECT_EQ("", Read(ino, 4096, 4));  // past EOF
  EXPECT_EQ("", Read(ino, 4096, off_t{1} << 40));
  EXPECT_EQ(EINVAL, DoRead(*ops_, ino, 10, -1).err);
}

TEST_F(OpsTest, ReadSpanFileServesShardBytes) {
  const fuse_entry_param e = Path("big.tfrecord/0/image.jpg");
  const std::string& want = *big_value_;
  ASSERT_EQ(static_cast<off_t>(want.size()), e.attr.st_size);
  ReadReply r = DoRead(*ops_, e.ino, 4096, 0);
  ASSERT_EQ(0, r.err);
  ASSERT_GE(r.data.fd, 0) << "a contiguous value is served from the shard descriptor";
  EXPECT_EQ(4096u, r.data.length);
  const size_t n = want.size();
  const std::vector<std::pair<size_t, off_t>> cases = {{4096, 0},
                                                       {4096, 1},
                                                       {1, static_cast<off_t>(n - 1)},
                                                       {100, static_cast<off_t>(n - 10)},
                                                       {131072, 65536},
                                                       {1 << 20, 0},
                                                       {0, 5},
                                                       {4096, static_cast<off_t>(n)},
                                                       {4096, static_cast<off_t>(n + 100)},
                                                       {4096, off_t{1} << 40}};
  for (auto [size, off] : cases) {
    SCOPED_TRACE(absl::StrCat("size ", size, " offset ", off));
    const std::string got = Read(e.ino, size, off);
    const size_t o = static_cast<size_t>(off);
    EXPECT_EQ(o >= n ? std::string() : want.substr(o, size), got);
  }
  // Reading the whole file in odd-sized pieces gives it back exactly.
  std::string joined;
  for (off_t off = 0;;) {
    const std::string piece = Read(e.ino, 12345, off);
    if (piece.empty()) break;
    joined += piece;
    off += static_cast<off_t>(piece.size());
  }
  EXPECT_EQ(want, joined);
}

TEST_F(OpsTest, ReadPlainFile) {
  const fuse_ino_t ino = Path("dataset_info.json").ino;
  ReadReply r = DoRead(*ops_, ino, 4096, 0);
  ASSERT_EQ(0, r.err);
  EXPECT_GE(r.data.fd, 0);
  EXPECT_EQ(kInfoJson, ReadAll(r));
  EXPECT_EQ(std::string(kInfoJson).substr(5, 4), Read(ino, 4, 5));
  EXPECT_EQ("", Read(ino, 4096, static_cast<off_t>(std::strlen(kInfoJson))));
  EXPECT_EQ("", Read(ino, 4096, 100000));
  EXPECT_EQ("plain text\n", Read(Path("nested/notes.txt").ino, 100, 0));
}

TEST_F(OpsTest, ReadOfADirectoryIsEisdir) {
  EXPECT_EQ(EISDIR, DoRead(*ops_, FUSE_ROOT_ID, 100, 0).err);
  EXPECT_EQ(EISDIR, DoRead(*ops_, Path("nested").ino, 100, 0).err);
  EXPECT_EQ(EISDIR, DoRead(*ops_, Path("train-00000-of-00002").ino, 100, 0).err);
  EXPECT_EQ(EISDIR, DoRead(*ops_, Path("train-00000-of-00002/1").ino, 100, 0).err);
  EXPECT_EQ(EISDIR, DoRead(*ops_, Path("train-00000-of-00002/1/image").ino, 100, 0).err);
}

TEST_F(OpsTest, SizesMatchContents) {
  for (const char* path :
       {"train-00000-of-00002/04/id", "train-00000-of-00002/04/score",
        "train-00000-of-00002/04/image/encoded.jpg", "train-00000-of-00002/04/image/class/text.txt",
        "train-00000-of-00002/04/frames/0.png", "raw.tfrecord/1/record.bin", "dataset_info.json"}) {
    const fuse_entry_param e = Path(path);
    EXPECT_EQ(static_cast<size_t>(e.attr.st_size), Read(e.ino, 1 << 20, 0).size()) << path;
    EXPECT_EQ(static_cast<blkcnt_t>((e.attr.st_size + 511) / 512), e.attr.st_blocks) << path;
  }
}

// ---------------------------------------------------------------------------
// Statfs.

TEST_F(OpsTest, Statfs) {
  StatfsReply r = DoStatfs(*ops_);
  ASSERT_EQ(0, r.err);
  // 12 + 3 + 2 (eval) + 2 (raw) + 0 (empty) + 1 (big) + 5 (damaged).
  EXPECT_EQ(25u, r.st.f_files);
  uint64_t shard_bytes = 0;
  for (const char* f :
       {"train-00000-of-00002", "train-00001-of-00002", "nested/deeper/eval.tfrecord",
        "raw.tfrecord", "empty.tfrecord", "big.tfrecord", "damaged.tfrecord"}) {
    struct stat st;
    ASSERT_EQ(0, ::stat(absl::StrCat(*dir_, "/", f).c_str(), &st)) << f;
    shard_bytes += static_cast<uint64_t>(st.st_size);
  }
  EXPECT_EQ((shard_bytes + 4095) / 4096, r.st.f_blocks);
  EXPECT_EQ(4096u, r.st.f_bsize);
  EXPECT_EQ(255u, r.st.f_namemax);
  const vfs::Stats s = fs_->GetStats();
  EXPECT_EQ(7u, s.shards);
  EXPECT_EQ(25u, s.records);
  EXPECT_EQ(shard_bytes, s.shard_bytes);
}

// ---------------------------------------------------------------------------
// Create() failures.

class CreateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(a_.empty());
    ASSERT_FALSE(b_.empty());
  }

  // The staging tests' setup: a_ holds one shard, b_/store a staging store
  // checked against `types`, and staged_fs_ a filesystem over both.
  void MountWithStaging(naming::FeatureTypeMap types = {}) {
    WriteShard(a_ + "/train.tfrecord", {"x"});
    auto store = staging::Store::Open(b_ + "/store");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    vfs::Options o;
    o.sources = {a_};
    o.staging = store_.get();
    staging_types_ = std::move(types);
    o.staging_types = &staging_types_;
    auto fs = vfs::Filesystem::Create(o);
    ASSERT_TRUE(fs.ok()) << fs.status();
    staged_fs_ = std::move(*fs);
  }

  // Makes the record folder staging/r through `ops`; its node in *record.
  // Makes staging/r (*rec) and creates `label` in it (*label) as the kernel
  // does when it opens files itself: no handle (no RELEASE would ever close
  // one), and a write without one.
  static void CreateLabelWithoutHandle(Ops& ops, fuse_ino_t* rec, fuse_ino_t* label) {
    ASSERT_NO_FATAL_FAILURE(MakeRecordFolder(ops, rec));
    CreateReply c = DoCreate(ops, *rec, "label", 0644, O_WRONLY | O_CREAT | O_EXCL);
    ASSERT_EQ(0, c.err);
    EXPECT_EQ(0u, c.fh) << "no RELEASE would ever close a CREATE handle";
    EXPECT_EQ(0, DoWrite(ops, c.entry.ino, 0, "3\n", 0).err);
    *label = c.entry.ino;
  }

  static void MakeRecordFolder(Ops& ops, fuse_ino_t* record) {
    const EntryReply staging = DoLookup(ops, FUSE_ROOT_ID, "staging");
    ASSERT_EQ(0, staging.err);
    const EntryReply rec = DoMkdir(ops, staging.entry.ino, "r", 0755);
    ASSERT_EQ(0, rec.err);
    *record = rec.entry.ino;
  }

  // Declared first, removed last: the filesystem and store below go first.
  const test::TempDir a_dir_{"tfrecordfs_ops"};
  const test::TempDir b_dir_{"tfrecordfs_ops"};
  const std::string a_ = a_dir_.path();
  const std::string b_ = b_dir_.path();
  naming::FeatureTypeMap staging_types_;  // before staged_fs_, which borrows it
  std::unique_ptr<staging::Store> store_;
  std::unique_ptr<vfs::Filesystem> staged_fs_;
};

TEST_F(CreateTest, CompressedShardXattrs) {
  std::vector<std::string> payloads;
  for (int r = 0; r < 50; ++r) payloads.push_back(TrainPayload(r));
  WriteShard(a_ + "/plain", payloads);
  ASSERT_EQ(0, std::system(absl::StrCat("gzip -c ", a_, "/plain > ", a_,
                                        "/train.tfrecord.gz && rm ", a_, "/plain")
                               .c_str()));
  vfs::Options o;
  o.sources = {a_};
  auto fs = vfs::Filesystem::Create(o);
  ASSERT_TRUE(fs.ok()) << fs.status();
  Ops ops{fs->get(), OpsOptions{}};
  const fuse_ino_t shard = DoLookup(ops, FUSE_ROOT_ID, "train.tfrecord.gz").entry.ino;
  ASSERT_NE(0u, shard);
  EXPECT_EQ("gzip", Xattr(ops, shard, "user.tfrecordfs.codec"));
  const fuse_ino_t rec = DoLookup(ops, shard, "40").entry.ino;
  EXPECT_THAT(XattrNames(ops, rec), testing::Contains("user.tfrecordfs.compressed_offset"));
  uint64_t offset = 0;
  for (int r = 0; r < 40; ++r) offset += payloads[r].size() + record::kFramingOverhead;
  EXPECT_EQ(absl::StrCat(offset), Xattr(ops, rec, "user.tfrecordfs.offset"));
  uint64_t compressed = 0;
  ASSERT_TRUE(absl::SimpleAtoi(Xattr(ops, rec, "user.tfrecordfs.compressed_offset"), &compressed));
  struct stat st;
  ASSERT_EQ(0, ::stat((a_ + "/train.tfrecord.gz").c_str(), &st));
  EXPECT_LT(compressed, static_cast<uint64_t>(st.st_size));
}

TEST_F(CreateTest, StagingXattrsAreNotSupported) {
  ASSERT_NO_FATAL_FAILURE(MountWithStaging());
  Ops ops{staged_fs_.get(), OpsOptions{}};
  fuse_ino_t rec = 0;
  ASSERT_NO_FATAL_FAILURE(MakeRecordFolder(ops, &rec));
  EXPECT_THAT(XattrNames(ops, rec), ElementsAre());
  EXPECT_EQ(ENODATA, DoGetXattr(ops, rec, "user.x", 0).err);
  EXPECT_EQ(ENOTSUP, DoSetXattr(ops, rec, "user.x"));
  // -o noxattr: ENOSYS, so that the kernel stops asking.
  Ops off{staged_fs_.get(), OpsOptions{.xattr = false}};
  EXPECT_EQ(ENOSYS, DoListXattr(off, rec, 0).err);
  EXPECT_EQ(ENOSYS, DoGetXattr(off, FUSE_ROOT_ID, "user.x", 0).err);
}

TEST_F(CreateTest, TwoSourcesWithTheSameRootNameFail) {
  WriteShard(a_ + "/train.tfrecord", {"x"});
  WriteShard(b_ + "/train.tfrecord", {"y"});
  WriteShard(b_ + "/other.tfrecord", {"z"});
  vfs::Options o;
  o.sources = {a_, b_};
  auto fs = vfs::Filesystem::Create(o);
  ASSERT_FALSE(fs.ok());
  EXPECT_EQ(absl::StatusCode::kAlreadyExists, fs.status().code());
  EXPECT_THAT(fs.status().message(), HasSubstr("'train.tfrecord'"));
  EXPECT_THAT(fs.status().message(), HasSubstr(a_ + "/train.tfrecord"));
  EXPECT_THAT(fs.status().message(), HasSubstr(b_ + "/train.tfrecord"));

  // Two file sources with the same base name.
  o.sources = {a_ + "/train.tfrecord", b_ + "/train.tfrecord"};
  fs = vfs::Filesystem::Create(o);
  ASSERT_FALSE(fs.ok());
  EXPECT_EQ(absl::StatusCode::kAlreadyExists, fs.status().code());
  EXPECT_THAT(fs.status().message(), HasSubstr("train.tfrecord"));

  // A directory source and a file source colliding.
  o.sources = {a_, b_ + "/train.tfrecord"};
  EXPECT_FALSE(vfs::Filesystem::Create(o).ok());
}

TEST_F(CreateTest, DistinctSourcesMerge) {
  WriteShard(a_ + "/a.tfrecord", {"x"});
  WriteShard(b_ + "/b.tfrecord", {"y", "z"});
  vfs::Options o;
  o.sources = {a_, b_ + "/b.tfrecord"};
  auto fs = vfs::Filesystem::Create(o);
  ASSERT_TRUE(fs.ok()) << fs.status();
  Ops ops{fs->get(), OpsOptions{}};
  DirReply r = DoReadDir(ops, FUSE_ROOT_ID, 4096, 0, false);
  EXPECT_THAT(Names(ParseDirents(r.buf, false)),
              ElementsAre(".", "..", "a.tfrecord", "b.tfrecord"));
  EXPECT_EQ(3u, DoStatfs(ops).st.f_files);
}

// Plain source files are read through the mount's bounded descriptor
// cache (max_open), not kept open one descriptor each for the mount's life.
TEST_F(CreateTest, PlainFilesShareTheBoundedDescriptorCache) {
  WriteShard(a_ + "/a.tfrecord", {"x"});
  constexpr int kFiles = 64;
  for (int i = 0; i < kFiles; ++i) {
    ASSERT_TRUE(
        WriteFileAtomically(absl::StrCat(a_, "/note", i, ".txt"), absl::StrCat("note ", i, "\n"))
            .ok());
  }
  vfs::Options o;
  o.sources = {a_};
  o.max_open_shards = 4;
  auto fs = vfs::Filesystem::Create(o);
  ASSERT_TRUE(fs.ok()) << fs.status();
  const auto open_fds = [] {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
      n += !e.path().empty();
    }
    return n;
  };
  const size_t before = open_fds();
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < kFiles; ++i) {
      auto a = (*fs)->Lookup(FUSE_ROOT_ID, absl::StrCat("note", i, ".txt"));
      ASSERT_TRUE(a.ok()) << a.status();
      auto r = (*fs)->Read(a->ino, 0, 0, 4096);
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_GE(r->fd, 0);
      std::string got(r->length, '\0');
      ASSERT_EQ(static_cast<ssize_t>(got.size()),
                ::pread(r->fd, got.data(), got.size(), static_cast<off_t>(r->offset)));
      EXPECT_EQ(absl::StrCat("note ", i, "\n"), got);
    }
  }
  EXPECT_LE(open_fds(), before + 4) << "plain files must not each keep a descriptor open";
}

TEST_F(CreateTest, MissingSourceFails) {
  vfs::Options o;
  o.sources = {a_ + "/does-not-exist"};
  auto fs = vfs::Filesystem::Create(o);
  ASSERT_FALSE(fs.ok());
  EXPECT_THAT(fs.status().message(), HasSubstr("does-not-exist"));
  EXPECT_EQ(ENOENT, ToErrno(fs.status()));
  o.sources = {};
  EXPECT_FALSE(vfs::Filesystem::Create(o).ok());
}

// Handles are numbers of the staging view's tables (vfs/handle_table.h): a
// file handle used after its RELEASE, or given to a directory call, and a
// directory handle given to a file call, fail with EBADF instead of reaching
// freed or foreign state; fh 0 still means "no handle".
TEST_F(CreateTest, StaleAndForeignHandlesGiveEbadf) {
  ASSERT_NO_FATAL_FAILURE(MountWithStaging());
  Ops ops{staged_fs_.get(), OpsOptions{}};
  fuse_ino_t rec = 0;
  ASSERT_NO_FATAL_FAILURE(MakeRecordFolder(ops, &rec));
  CreateReply c = DoCreate(ops, rec, "name.txt", 0644, O_RDWR | O_CREAT | O_TRUNC);
  ASSERT_EQ(0, c.err);
  ASSERT_NE(c.fh, 0u);
  EXPECT_EQ(0, DoWrite(ops, c.entry.ino, c.fh, "hi\n", 0).err);
  EXPECT_EQ("hi\n", DoRead(ops, c.entry.ino, 16, 0, c.fh).data.data);
  OpenReply d = DoOpenDir(ops, rec);
  ASSERT_EQ(0, d.err);
  ASSERT_NE(d.fh, 0u);
  EXPECT_EQ(0, DoReadDir(ops, rec, 4096, 0, true, d.fh).err);
  // Each kind of handle given to the other kind of call.
  EXPECT_EQ(EBADF, DoRead(ops, c.entry.ino, 16, 0, d.fh).err);
  EXPECT_EQ(EBADF, DoWrite(ops, c.entry.ino, d.fh, "x", 0).err);
  EXPECT_EQ(EBADF, DoReadDir(ops, rec, 4096, 0, true, c.fh).err);
  ops.fs->Release(c.fh);
  ops.fs->ReleaseDir(d.fh);
  // Used after release.
  EXPECT_EQ(EBADF, DoRead(ops, c.entry.ino, 16, 0, c.fh).err);
  EXPECT_EQ(EBADF, DoWrite(ops, c.entry.ino, c.fh, "x", 0).err);
  EXPECT_EQ(EBADF, DoFlush(ops, c.entry.ino, c.fh));
  EXPECT_EQ(EBADF, DoReadDir(ops, rec, 4096, 0, true, d.fh).err);
  ops.fs->Release(c.fh);  // a second release is only logged
  // No handle: the calls open what they need.
  EXPECT_EQ("hi\n", DoRead(ops, c.entry.ino, 16, 0, 0).data.data);
  EXPECT_EQ(0, DoReadDir(ops, rec, 4096, 0, true, 0).err);
}

// Staged files written without a handle (fh 0: the kernel opened them
// itself, OpsOptions::skip_open): O_TRUNC arrives as a SETATTR of size 0,
// the write goes through a descriptor of the daemon's own, and lands
// whatever it holds (issue 34, item 6: one rule, flag, never refuse); a file
// that looks whole is checked at once: flagged (user.tfrecordfs.error) when
// its feature cannot take it, its kind remembered when it can.
TEST_F(CreateTest, StagingWritesWithoutAHandleAreCheckedWhenWhole) {
  ASSERT_NO_FATAL_FAILURE(MountWithStaging(naming::FeatureTypeMap(
      {{"label", example::Kind::kInt64},
       {"mask", {example::Kind::kBytes, {{tensor::DataType::kUint8, {4, 4}}}}},
       {"arr", {example::Kind::kBytes, {{tensor::DataType::kFloat, {3}}}}}})));
  Ops ops{staged_fs_.get(), OpsOptions{.skip_open = true}};
  fuse_ino_t rec = 0;
  ASSERT_NO_FATAL_FAILURE(MakeRecordFolder(ops, &rec));
  const std::string label_path = staging::RecordsDir(b_ + "/store") + "/r/label";

  // Made with CREATE (a real handle), then written again as `echo 7 > label`
  // does on a no-open connection.
  CreateReply c = DoCreate(ops, rec, "label", 0644, O_WRONLY | O_CREAT | O_TRUNC);
  ASSERT_EQ(0, c.err);
  EXPECT_EQ(0, DoWrite(ops, c.entry.ino, c.fh, "3\n", 0).err);
  ops.fs->Release(c.fh);
  const fuse_ino_t label = c.entry.ino;
  struct stat zero {};
  EXPECT_EQ(0, DoSetAttr(ops, label, zero, FUSE_SET_ATTR_SIZE, 0).err);
  WriteReply w = DoWrite(ops, label, 0, "7\n", 0);
  EXPECT_EQ(0, w.err);
  EXPECT_EQ(2u, w.written);
  EXPECT_EQ("7\n", ReadFileToString(label_path).value());
  // Appended in pieces: a value may arrive split.
  EXPECT_EQ(0, DoWrite(ops, label, 0, "-", 2).err);
  EXPECT_EQ(0, DoWrite(ops, label, 0, "12", 3).err);
  EXPECT_EQ("7\n-12", ReadFileToString(label_path).value());
  // `echo 1.5 > label` (an int64 feature): the bytes land, and the file,
  // whole (it ends in a newline), is flagged with the reason.
  auto flag = [&](const std::string& path) {
    char buf[1024];
    const ssize_t n = ::getxattr(path.c_str(), staging::kErrorXattr, buf, sizeof buf);
    return n < 0 ? std::string() : std::string(buf, static_cast<size_t>(n));
  };
  EXPECT_EQ(0, DoSetAttr(ops, label, zero, FUSE_SET_ATTR_SIZE, 0).err);
  EXPECT_EQ(0, DoWrite(ops, label, 0, "1.5\n", 0).err);
  EXPECT_EQ("1.5\n", ReadFileToString(label_path).value());
  const bool xattrs = !flag(label_path).empty() || errno != ENOTSUP;
  if (xattrs) {
    EXPECT_NE(flag(label_path).find("'1.5' is not an int64"), std::string::npos);
  }
  EXPECT_EQ(0, DoSetAttr(ops, label, zero, FUSE_SET_ATTR_SIZE, 0).err);
  EXPECT_EQ(0, DoWrite(ops, label, 0, "5\n", 0).err);
  EXPECT_EQ("", flag(label_path)) << "written again with a value: no flag";

  // Tensor files: the header is checked as it arrives, whatever the handle.
  CreateReply npy = DoCreate(ops, rec, "arr.npy", 0644, O_WRONLY | O_CREAT);
  ASSERT_EQ(0, npy.err);
  const std::string f64 = tensor::NpyHeader(tensor::DataType::kDouble, {3});
  EXPECT_EQ(0, DoWrite(ops, npy.entry.ino, npy.fh, f64, 0).err) << "float64 lands, then fixed";
  const std::string f32 = tensor::NpyHeader(tensor::DataType::kFloat, {3});
  EXPECT_EQ(0, DoWrite(ops, npy.entry.ino, npy.fh, f32, 0).err);
  EXPECT_EQ(0, DoWrite(ops, npy.entry.ino, npy.fh, std::string(12, '\0'), f32.size()).err);
  ops.fs->Release(npy.fh);
  // Made by CREATE and written without a handle, as a no-open connection
  // does (LlCreate hands out none: the kernel would send no RELEASE); 0444,
  // as `cp -r` of a mounted record makes it: the CREATE descriptor is kept.
  CreateReply png = DoCreate(ops, rec, "mask.png", 0444, O_WRONLY | O_CREAT);
  ASSERT_EQ(0, png.err);
  ops.fs->Discard(png.fh);
  const fuse_ino_t mask = png.entry.ino;
  const std::string mask_file = staging::RecordsDir(b_ + "/store") + "/r/mask.png";
  tensor::PngGeometry rgb16{.height = 4, .width = 4, .channels = 3, .depth = 16};
  auto rgb = tensor::EncodePng(rgb16, std::string(4 * 4 * 3 * 2, '\x10'));
  ASSERT_TRUE(rgb.ok());
  EXPECT_EQ(0, DoWrite(ops, mask, 0, *rgb, 0).err) << "16-bit RGB for uint8 [4,4] lands";
  if (xattrs) {
    EXPECT_NE(flag(mask_file), "") << "and is flagged: it looks whole (IEND)";
  }
  tensor::PngGeometry gray8{.height = 4, .width = 4, .channels = 1, .depth = 8, .rank2 = true};
  auto gray = tensor::EncodePng(gray8, std::string(16, '\x7f'));
  ASSERT_TRUE(gray.ok());
  const std::string mask_path = staging::RecordsDir(b_ + "/store") + "/r/mask.png";
  char tag[256];
  // Written again (truncated first, as `cp` does) in two pieces: whole (IEND)
  // after the second, checked then, its flag gone and its kind remembered
  // at once (a daemon killed now keeps it).
  EXPECT_EQ(0, DoSetAttr(ops, mask, zero, FUSE_SET_ATTR_SIZE, 0).err);
  EXPECT_EQ(0, DoWrite(ops, mask, 0, gray->substr(0, 40), 0).err);
  EXPECT_LT(::getxattr(mask_path.c_str(), staging::kKindXattr, tag, sizeof tag), 0);
  EXPECT_EQ(0, DoWrite(ops, mask, 0, gray->substr(40), 40).err);
  EXPECT_EQ("", flag(mask_path));
  const ssize_t n = ::getxattr(mask_path.c_str(), staging::kKindXattr, tag, sizeof tag);
  ASSERT_GT(n, 0) << std::strerror(errno);
  EXPECT_EQ("tensor:uint8:4,4", std::string(tag, static_cast<size_t>(n)));
  EXPECT_EQ(*gray, ReadFileToString(mask_path).value());
}

// The staging area through the ops: a directory listed without a handle
// (fh 0, the kernel opened it itself: FUSE_CAP_NO_OPENDIR_SUPPORT) and with
// one from DoOpenDir shows the same entries, and a listing read in small
// pieces while entries are removed repeats none and skips no survivor.
TEST_F(CreateTest, StagingListingsWithAndWithoutAHandle) {
  ASSERT_NO_FATAL_FAILURE(MountWithStaging());
  Ops ops{staged_fs_.get(), OpsOptions{}};
  fuse_ino_t dir = 0;
  ASSERT_NO_FATAL_FAILURE(MakeRecordFolder(ops, &dir));

  for (const bool with_handle : {false, true}) {
    SCOPED_TRACE(with_handle ? "with a DoOpenDir handle" : "fh 0");
    std::set<std::string> created;
    for (int i = 0; i < 60; ++i) {
      const std::string name = absl::StrCat("value-", i, ".txt");
      CreateReply c = DoCreate(ops, dir, name, 0644, O_WRONLY | O_CREAT | O_EXCL);
      ASSERT_EQ(0, c.err) << name << ": " << std::strerror(c.err);
      ops.fs->Release(c.fh);
      created.insert(name);
    }
    uint64_t fh = 0;
    if (with_handle) {
      OpenReply h = DoOpenDir(ops, dir);
      ASSERT_EQ(0, h.err);
      ASSERT_NE(0u, h.fh) << "staging directories hold a stream";
      fh = h.fh;
    }
    std::vector<Dirent> whole = ParseDirents(DoReadDir(ops, dir, 1 << 16, 0, false, fh).buf, false);
    std::set<std::string> names;
    for (const Dirent& d : whole) names.insert(d.name);
    std::set<std::string> want = created;
    want.insert(".");
    want.insert("..");
    EXPECT_EQ(names, want);

    // In pieces of 3-12 entries; after the first piece, remove every other
    // file not listed yet and every third one listed already.
    std::map<std::string, int> seen;
    std::set<std::string> removed;
    off_t offset = 0;
    for (int requests = 0; requests < 1000; ++requests) {
      DirReply r = DoReadDir(ops, dir, 512, offset, requests % 2 == 1, fh);
      ASSERT_EQ(0, r.err);
      if (r.buf.empty()) break;
      for (const Dirent& d : ParseDirents(r.buf, requests % 2 == 1)) {
        ++seen[d.name];
        offset = static_cast<off_t>(d.off);
      }
      if (requests == 0) {
        int k = 0;
        for (const std::string& n : created) {
          const bool listed = seen.count(n) > 0;
          if ((!listed && k % 2 == 0) || (listed && k % 3 == 0)) {
            ASSERT_TRUE(ops.fs->Unlink(dir, n).ok()) << n;
            removed.insert(n);
          }
          ++k;
        }
      }
    }
    for (const auto& [n, count] : seen) EXPECT_EQ(1, count) << n << " listed twice";
    for (const std::string& n : created) {
      if (!removed.count(n)) {
        EXPECT_EQ(1u, seen.count(n)) << n << " survived but was skipped";
      }
    }
    if (fh != 0) ops.fs->ReleaseDir(fh);
    for (const std::string& n : created) {
      if (!removed.count(n)) {
        ASSERT_TRUE(ops.fs->Unlink(dir, n).ok()) << n;
      }
    }
  }
}

size_t OpenDescriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// INIT's agreement decides OPEN, OPENDIR, FLUSH and CREATE replies: asked
// for and offered, the kernel opens files and folders itself; asked for but
// not offered (an older kernel), everything keeps its handle.
TEST_F(CreateTest, NegotiatedOpensAreLeftToTheKernel) {
  std::string bytes;
  record::AppendFramed(&bytes, TableBuilder().Int64s("n", {1}).Encode());
  bytes[record::kHeaderSize + 2] ^= 0x40;  // the data no longer matches its CRC
  WriteFile(a_ + "/damaged.tfrecord", bytes);
  ASSERT_NO_FATAL_FAILURE(MountWithStaging());
  const OpsOptions options{.skip_opendir = true, .skip_open = true};

  // libfuse's defaults as `want`, everything as `capable`.
  fuse_conn_info conn{};
  conn.capable = FUSE_CAP_NO_OPEN_SUPPORT | FUSE_CAP_NO_OPENDIR_SUPPORT | FUSE_CAP_READDIRPLUS |
                 FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_PARALLEL_DIROPS;
  conn.want = FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_ATOMIC_O_TRUNC;
  Ops ops{staged_fs_.get(), options};
  Negotiate(&ops, &conn);
  EXPECT_TRUE(ops.negotiated.no_open.load());
  EXPECT_TRUE(ops.negotiated.no_opendir.load());
  EXPECT_TRUE(conn.want & FUSE_CAP_NO_OPEN_SUPPORT);
  EXPECT_TRUE(conn.want & FUSE_CAP_NO_OPENDIR_SUPPORT);
  EXPECT_TRUE(conn.want & FUSE_CAP_READDIRPLUS);
  EXPECT_FALSE(conn.want & FUSE_CAP_READDIRPLUS_AUTO) << "a walk would LOOKUP every record folder";
  EXPECT_FALSE(conn.want & FUSE_CAP_ATOMIC_O_TRUNC) << "O_TRUNC must arrive as SETATTR";

  fuse_ino_t rec = 0, label = 0;
  ASSERT_NO_FATAL_FAILURE(CreateLabelWithoutHandle(ops, &rec, &label));
  EXPECT_EQ(ENOSYS, DoFlush(ops, label, 0));
  EXPECT_EQ(ENOSYS, DoOpenDir(ops, rec).err);

  // Every OPEN that passes its checks answers ENOSYS and keeps nothing open.
  const fuse_ino_t shard_file = test::LookupPath(ops, "train.tfrecord/0/record.bin").ino;
  ASSERT_NE(0u, shard_file);
  // One of each first: the staging store and the shard cache keep their own
  // descriptors of what was opened once.
  EXPECT_EQ(ENOSYS, DoOpen(ops, label, O_RDONLY).err);
  EXPECT_EQ(ENOSYS, DoOpen(ops, shard_file, O_RDONLY).err);
  const size_t fds = OpenDescriptors();
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(ENOSYS, DoOpen(ops, label, O_RDONLY).err);
    EXPECT_EQ(ENOSYS, DoOpen(ops, label, O_WRONLY).err);
    EXPECT_EQ(ENOSYS, DoOpen(ops, shard_file, O_RDONLY).err);
  }
  EXPECT_EQ(fds, OpenDescriptors()) << "handles of ENOSYS opens were kept";
  // Checks still come first: a write to a shard file, a damaged record.
  EXPECT_EQ(EROFS, DoOpen(ops, shard_file, O_WRONLY).err);
  const EntryReply damaged = DoLookup(ops, FUSE_ROOT_ID, "damaged.tfrecord");
  ASSERT_EQ(0, damaged.err);
  const EntryReply record = DoLookup(ops, damaged.entry.ino, "0");
  ASSERT_EQ(0, record.err);
  EXPECT_EQ(EIO, DoLookup(ops, record.entry.ino, "n").err);
  const uint64_t inside =
      vfs::RecordId(vfs::ShardOf(record.entry.ino), vfs::RecordOf(record.entry.ino), 1);
  EXPECT_EQ(EIO, DoOpen(ops, inside, O_RDONLY).err);

  // A kernel that does not offer them: handles as before.
  fuse_conn_info old_kernel{};
  old_kernel.capable = FUSE_CAP_READDIRPLUS;
  Ops old_ops{staged_fs_.get(), options};
  Negotiate(&old_ops, &old_kernel);
  EXPECT_FALSE(old_ops.negotiated.no_open.load());
  EXPECT_FALSE(old_ops.negotiated.no_opendir.load());
  EXPECT_FALSE(old_kernel.want & FUSE_CAP_NO_OPEN_SUPPORT);
  OpenReply o = DoOpen(old_ops, label, O_RDONLY);
  ASSERT_EQ(0, o.err);
  EXPECT_NE(0u, o.fh);
  EXPECT_EQ(0, DoFlush(old_ops, label, o.fh));
  old_ops.fs->Release(o.fh);
  OpenReply d = DoOpenDir(old_ops, rec);
  ASSERT_EQ(0, d.err);
  EXPECT_NE(0u, d.fh);
  old_ops.fs->ReleaseDir(d.fh);
  CreateReply c2 = DoCreate(old_ops, rec, "other", 0644, O_WRONLY | O_CREAT | O_EXCL);
  ASSERT_EQ(0, c2.err);
  EXPECT_NE(0u, c2.fh);
  old_ops.fs->Release(c2.fh);
}

// A read-write mount's default (OpsOptions::staging_without_handles): every
// OPEN is answered, so a writable open of a shard file fails with EROFS
// however many files were opened before (with no OPEN, root's
// open(O_RDWR) of a record file succeeded and a shared mapping of it
// changed the page cache); staging files are opened and created without a
// handle, with no FLUSH, as under skip_open.
TEST_F(CreateTest, ReadWriteMountsAnswerEveryOpenButKeepNoStagingHandles) {
  // `label` is an int64 feature of the shards: only such names are checked
  // at write() (temporary names are judged when they are final).
  ASSERT_NO_FATAL_FAILURE(
      MountWithStaging(naming::FeatureTypeMap({{"label", example::Kind::kInt64}})));
  const OpsOptions options{.skip_opendir = true, .staging_without_handles = true};
  fuse_conn_info conn{};
  conn.capable = FUSE_CAP_NO_OPEN_SUPPORT | FUSE_CAP_NO_OPENDIR_SUPPORT | FUSE_CAP_READDIRPLUS |
                 FUSE_CAP_ATOMIC_O_TRUNC;
  conn.want = FUSE_CAP_ATOMIC_O_TRUNC;
  Ops ops{staged_fs_.get(), options};
  Negotiate(&ops, &conn);
  EXPECT_FALSE(ops.negotiated.no_open.load());
  EXPECT_FALSE(conn.want & FUSE_CAP_NO_OPEN_SUPPORT);
  EXPECT_FALSE(conn.want & FUSE_CAP_ATOMIC_O_TRUNC) << "O_TRUNC must arrive as SETATTR";

  const fuse_ino_t shard_file = test::LookupPath(ops, "train.tfrecord/0/record.bin").ino;
  ASSERT_NE(0u, shard_file);
  for (int i = 0; i < 3; ++i) {
    const OpenReply o = DoOpen(ops, shard_file, O_RDONLY);
    ASSERT_EQ(0, o.err);
    EXPECT_EQ(0u, o.fh);
    EXPECT_TRUE(o.keep_cache);
    EXPECT_TRUE(o.noflush);
    for (int flags : {O_RDWR, O_WRONLY, O_RDONLY | O_TRUNC}) {
      EXPECT_EQ(EROFS, DoOpen(ops, shard_file, flags).err) << flags;
    }
  }

  fuse_ino_t rec = 0, label = 0;
  ASSERT_NO_FATAL_FAILURE(CreateLabelWithoutHandle(ops, &rec, &label));
  EXPECT_EQ(0, DoWrite(ops, label, 0, "x\n", 2).err) << "lands (and is flagged)";
  const size_t fds = OpenDescriptors();
  for (int i = 0; i < 50; ++i) {
    for (int flags : {O_RDONLY, O_RDWR, O_WRONLY}) {
      const OpenReply o = DoOpen(ops, label, flags);
      ASSERT_EQ(0, o.err) << flags;
      EXPECT_EQ(0u, o.fh) << flags;
      EXPECT_TRUE(o.noflush) << flags;
    }
  }
  EXPECT_EQ(fds, OpenDescriptors()) << "handles of staging opens were kept";
  EXPECT_EQ("3\nx\n", DoRead(ops, label, 16, 0, 0).data.data);
  EXPECT_EQ(0, DoFlush(ops, label, 0));
}

// What a caller makes in staging/ is the caller's when the daemon is root
// (issue 21, item 23: with allow_other, another user could make a folder but
// not write into it): shown and stored with its uid and gid, or the group of
// a set-group-ID folder; an existing file opened by CREATE keeps its owner;
// a chown to the owner shown is a no-op, another EPERM.
TEST_F(CreateTest, WhatACallerMakesIsTheirs) {
  if (::geteuid() != 0) GTEST_SKIP() << "only a root daemon can give files away";
  ASSERT_NO_FATAL_FAILURE(MountWithStaging());
  Ops ops{staged_fs_.get(), OpsOptions{}};
  const staging::Owner nobody{65534, 65534};
  const EntryReply staging = DoLookup(ops, FUSE_ROOT_ID, "staging");
  ASSERT_EQ(0, staging.err);
  const EntryReply rec = DoMkdir(ops, staging.entry.ino, "r", 0755, nobody);
  ASSERT_EQ(0, rec.err);
  EXPECT_EQ(65534u, rec.entry.attr.st_uid);
  EXPECT_EQ(65534u, rec.entry.attr.st_gid);
  CreateReply c = DoCreate(ops, rec.entry.ino, "label", 0644, O_WRONLY | O_CREAT, nobody);
  ASSERT_EQ(0, c.err);
  ops.fs->Release(c.fh);
  EXPECT_EQ(65534u, c.entry.attr.st_uid);
  EXPECT_EQ(65534u, DoGetAttr(ops, c.entry.ino).st.st_gid);
  const EntryReply made = DoMknod(ops, rec.entry.ino, "other", S_IFREG | 0644, nobody);
  ASSERT_EQ(0, made.err);
  EXPECT_EQ(65534u, made.entry.attr.st_uid);
  struct stat backing {};
  ASSERT_EQ(0, ::lstat((staging::RecordsDir(b_ + "/store") + "/r/label").c_str(), &backing));
  EXPECT_EQ(65534u, backing.st_uid);
  EXPECT_EQ(65534u, backing.st_gid);

  // Opened again by root's CREATE (no O_EXCL): still nobody's.
  CreateReply again =
      DoCreate(ops, rec.entry.ino, "label", 0644, O_WRONLY | O_CREAT, staging::Owner{0, 0});
  ASSERT_EQ(0, again.err);
  ops.fs->Release(again.fh);
  EXPECT_EQ(65534u, again.entry.attr.st_uid);
  EXPECT_EQ(EEXIST,
            DoCreate(ops, rec.entry.ino, "label", 0644, O_WRONLY | O_CREAT | O_EXCL, nobody).err);

  struct stat to {};
  to.st_uid = 65534;
  to.st_gid = 65534;
  EXPECT_EQ(0, DoSetAttr(ops, c.entry.ino, to, FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID, 0).err);
  to.st_uid = 0;
  EXPECT_EQ(EPERM, DoSetAttr(ops, c.entry.ino, to, FUSE_SET_ATTR_UID, 0).err);
  to.st_gid = 0;
  EXPECT_EQ(EPERM, DoSetAttr(ops, c.entry.ino, to, FUSE_SET_ATTR_GID, 0).err);

  // A set-group-ID folder of root's gives its group.
  const EntryReply shared = DoMkdir(ops, staging.entry.ino, "shared", 02777);
  ASSERT_EQ(0, shared.err);
  struct stat mode {};
  mode.st_mode = S_IFDIR | 02777;
  ASSERT_EQ(0, DoSetAttr(ops, shared.entry.ino, mode, FUSE_SET_ATTR_MODE, 0).err);
  const EntryReply inside = DoMkdir(ops, shared.entry.ino, "d", 0755, nobody);
  ASSERT_EQ(0, inside.err);
  EXPECT_EQ(65534u, inside.entry.attr.st_uid);
  EXPECT_EQ(0u, inside.entry.attr.st_gid);
  // Without a caller (and for the root caller), the daemon's own.
  const EntryReply own = DoMkdir(ops, staging.entry.ino, "own", 0755);
  ASSERT_EQ(0, own.err);
  EXPECT_EQ(0u, own.entry.attr.st_uid);
}

// mknod makes regular files only; links are refused everywhere.
TEST_F(CreateTest, MknodAndLinks) {
  ASSERT_NO_FATAL_FAILURE(MountWithStaging());
  Ops ops{staged_fs_.get(), OpsOptions{}};
  fuse_ino_t rec = 0;
  ASSERT_NO_FATAL_FAILURE(MakeRecordFolder(ops, &rec));
  EXPECT_EQ(EPERM, DoMknod(ops, rec, "fifo", S_IFIFO | 0644).err);
  EXPECT_EQ(EROFS, DoMknod(ops, FUSE_ROOT_ID, "fifo", S_IFIFO | 0644).err);
  EXPECT_EQ(EROFS, DoMknod(ops, FUSE_ROOT_ID, "file", S_IFREG | 0644).err);
  const fuse_ino_t shard = DoLookup(ops, FUSE_ROOT_ID, "train.tfrecord").entry.ino;
  EXPECT_EQ(EROFS, DoMknod(ops, shard, "file", S_IFREG | 0644).err);
  EntryReply f = DoMknod(ops, rec, "label", S_IFREG | 0644);
  ASSERT_EQ(0, f.err);
  EXPECT_NE(0u, f.entry.ino);
  EXPECT_TRUE(S_ISREG(f.entry.attr.st_mode));
  EXPECT_TRUE(std::filesystem::is_regular_file(staging::RecordsDir(b_ + "/store") + "/r/label"));
  EXPECT_EQ(EEXIST, DoMknod(ops, rec, "label", S_IFREG | 0644).err);
  EXPECT_EQ(EPERM, DoLink(ops, rec));
  EXPECT_EQ(EROFS, DoLink(ops, FUSE_ROOT_ID));
  EXPECT_EQ(EROFS, DoLink(ops, shard));
}

// ---------------------------------------------------------------------------
// Filesystem::feature_types(): feature types learnt by sampling records,
// within a budget.

class FeatureTypesTest : public CreateTest {
 protected:
  static Kind ShardKind(vfs::Filesystem& fs, absl::string_view name) {
    return fs.feature_types().Lookup(name).kind;
  }
  // `n` records of an int64 `n`; record `late_at` also has a float `late`
  // (kindless in record 0, as TFX writes a missing value); record
  // `big_at` carries a 10000-byte bytes value.
  void WriteLateShard(const std::string& path, int n, int late_at, int big_at = -1) {
    std::vector<std::string> payloads;
    for (int r = 0; r < n; ++r) {
      TableBuilder b;
      b.Int64s("n", {r});
      if (r == 0) b.Kindless("late");
      if (r == late_at) b.Floats("late", {0.5f});
      if (r == big_at) b.Bytes("blob", {std::string(10000, 'x')});
      payloads.push_back(b.Encode());
    }
    WriteShard(path, payloads);
  }
  std::unique_ptr<vfs::Filesystem> Mount(vfs::SampleBudget per_call, vfs::SampleBudget total) {
    vfs::Options o;
    o.sources = {a_};
    o.kind_sample_per_call = per_call;
    o.kind_sample_total = total;
    auto fs = vfs::Filesystem::Create(o);
    EXPECT_TRUE(fs.ok()) << fs.status();
    return fs.ok() ? std::move(*fs) : nullptr;
  }
  static constexpr vfs::SampleBudget kLots = {1u << 20, uint64_t{1} << 30};
};

// A feature only in record 50 of one shard is found, by reading records
// round-robin (record 0 of both shards, then record 1, ...) without caching
// them, and stopping once it is found. A name in no record reads every
// record once; looking for it again, or for another unknown name after
// that, reads nothing.
TEST_F(FeatureTypesTest, FeatureOnlyInALaterRecordIsFound) {
  WriteLateShard(a_ + "/a.tfrecord", 100, 50);
  WriteShard(a_ + "/b.tfrecord",
             {TableBuilder().Int64s("n", {0}).Encode(), TableBuilder().Int64s("n", {1}).Encode(),
              TableBuilder().Int64s("n", {2}).Encode()});
  auto fs = Mount({4096, uint64_t{32} << 20}, kLots);
  ASSERT_NE(nullptr, fs);
  EXPECT_EQ(Kind::kFloat, ShardKind(*fs, "late"));
  // Rounds 0-2 read both shards (6 records), rounds 3-50 only a.tfrecord.
  EXPECT_EQ(6u + 48u, fs->GetStats().records_sampled);
  EXPECT_EQ(0u, fs->GetStats().records_read) << "sampling went through the record cache";
  EXPECT_EQ(Kind::kInt64, ShardKind(*fs, "n"));
  EXPECT_EQ(Kind::kFloat, ShardKind(*fs, "late"));
  EXPECT_EQ(54u, fs->GetStats().records_sampled);

  EXPECT_EQ(Kind::kNone, ShardKind(*fs, "nope"));
  EXPECT_EQ(103u, fs->GetStats().records_sampled);
  EXPECT_EQ(Kind::kNone, ShardKind(*fs, "nope"));
  EXPECT_EQ(Kind::kNone, ShardKind(*fs, "nope either"));
  EXPECT_EQ(103u, fs->GetStats().records_sampled);
}

// Records the tree has read taught their kinds already: sampling passes
// over them without reading them again.
TEST_F(FeatureTypesTest, RecordsReadForTheTreeAreNotSampledAgain) {
  WriteLateShard(a_ + "/a.tfrecord", 20, 10);
  auto fs = Mount(kLots, kLots);
  ASSERT_NE(nullptr, fs);
  Ops ops{fs.get(), OpsOptions{}};
  const EntryReply shard = DoLookup(ops, FUSE_ROOT_ID, "a.tfrecord");
  ASSERT_EQ(0, shard.err);
  const EntryReply five = DoLookup(ops, shard.entry.ino, "05");
  ASSERT_EQ(0, five.err);
  ASSERT_EQ(0, DoLookup(ops, five.entry.ino, "n").err);  // parses record 5
  const uint64_t read = fs->GetStats().records_read;
  EXPECT_EQ(Kind::kFloat, ShardKind(*fs, "late"));
  EXPECT_EQ(10u, fs->GetStats().records_sampled);  // 0-10 but 5
  EXPECT_EQ(read, fs->GetStats().records_read);
}

// The per-call budget: each name looked for reads at most 10 records, and
// the next name's sampling resumes where the last one stopped, so `late`
// (record 50), missed when it was looked for, is learnt by the sixth
// other name. The whole-mount budget: after 30 records nothing more is read.
TEST_F(FeatureTypesTest, BudgetsBoundTheRecordsRead) {
  WriteLateShard(a_ + "/a.tfrecord", 100, 50);
  {
    auto fs = Mount({10, uint64_t{1} << 30}, {30, uint64_t{1} << 30});
    ASSERT_NE(nullptr, fs);
    EXPECT_EQ(Kind::kNone, ShardKind(*fs, "late"));
    EXPECT_EQ(10u, fs->GetStats().records_sampled);
    EXPECT_EQ(Kind::kNone, ShardKind(*fs, "late"));  // looked for already
    EXPECT_EQ(10u, fs->GetStats().records_sampled);
    EXPECT_EQ(Kind::kNone, ShardKind(*fs, "x1"));
    EXPECT_EQ(Kind::kNone, ShardKind(*fs, "x2"));
    EXPECT_EQ(30u, fs->GetStats().records_sampled);
    EXPECT_EQ(Kind::kNone, ShardKind(*fs, "x3"));
    EXPECT_EQ(Kind::kNone, ShardKind(*fs, "late"));
    EXPECT_EQ(30u, fs->GetStats().records_sampled);
  }
  {
    auto fs = Mount({10, uint64_t{1} << 30}, {100, uint64_t{1} << 30});
    ASSERT_NE(nullptr, fs);
    EXPECT_EQ(Kind::kNone, ShardKind(*fs, "late"));
    for (int i = 1; i <= 4; ++i) EXPECT_EQ(Kind::kNone, ShardKind(*fs, absl::StrCat("x", i)));
    EXPECT_EQ(50u, fs->GetStats().records_sampled);  // records 0-49
    EXPECT_EQ(Kind::kNone, ShardKind(*fs, "late"));
    EXPECT_EQ(Kind::kNone, ShardKind(*fs, "x5"));  // reads records 50-59
    EXPECT_EQ(60u, fs->GetStats().records_sampled);
    EXPECT_EQ(Kind::kFloat, ShardKind(*fs, "late"));
  }
}

// Byte budgets: the whole-mount one stops sampling before a record that
// would overrun it; a record larger than the per-call one is passed over
// (it could never be read) and the records after it still are.
TEST_F(FeatureTypesTest, ByteBudgetsBoundTheBytesRead) {
  WriteLateShard(a_ + "/a.tfrecord", 20, 10, /*big_at=*/1);
  {
    auto probe = Mount(kLots, kLots);
    ASSERT_NE(nullptr, probe);
    const index::ShardIndex& idx = *probe->shards()[0].index;
    ASSERT_GT(idx.end(1) - idx.begin(1), 10000u);
    // Records 0-5 fit in the whole-mount budget, record 6 does not.
    const uint64_t six = idx.begin(6);
    auto fs = Mount(kLots, {1000, six});
    ASSERT_NE(nullptr, fs);
    EXPECT_EQ(Kind::kNone, ShardKind(*fs, "late"));
    EXPECT_EQ(6u, fs->GetStats().records_sampled);
    EXPECT_EQ(six, fs->GetStats().bytes_sampled);
    EXPECT_EQ(Kind::kNone, ShardKind(*fs, "other"));
    EXPECT_EQ(six, fs->GetStats().bytes_sampled);
  }
  auto fs = Mount({1000, 5000}, kLots);
  ASSERT_NE(nullptr, fs);
  EXPECT_EQ(Kind::kFloat, ShardKind(*fs, "late"));
  EXPECT_EQ(10u, fs->GetStats().records_sampled);  // 0-10 but the big record 1
  EXPECT_LE(fs->GetStats().bytes_sampled, 5000u);
}

// Concurrent misses and hits: every caller gets the shards' kind, and the
// records are read once.
TEST_F(FeatureTypesTest, ConcurrentCallers) {
  WriteLateShard(a_ + "/a.tfrecord", 200, 150);
  auto fs = Mount(kLots, kLots);
  ASSERT_NE(nullptr, fs);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        if (ShardKind(*fs, "late") != Kind::kFloat) ++wrong;
        if (ShardKind(*fs, "n") != Kind::kInt64) ++wrong;
        ShardKind(*fs, absl::StrCat("unknown-", t, "-", i));
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(0, wrong.load());
  EXPECT_EQ(200u, fs->GetStats().records_sampled);
}

}  // namespace
}  // namespace tfrecordfs::fuse
