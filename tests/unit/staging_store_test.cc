// The staging store's operations (staging/store.h): bounded descriptors
// through lookups, renames and removals, read-only opens that create and
// lock nothing, the cleanup of a store a failed mount created, and a
// SequenceExample folder packed back. The parts on their own:
// staging_node_table_test, staging_staged_file_checker_test.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/canon.h"
#include "testing/layout_files.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/example/sequence.h"
#include "tfrecordfs/naming/feature_type.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/staging/layout.h"
#include "tfrecordfs/staging/record_folder.h"
#include "tfrecordfs/staging/staged_file.h"
#include "tfrecordfs/staging/store.h"

namespace tfrecordfs::staging {
namespace {

namespace fs = std::filesystem;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    root_ = tmp_.path();
  }
  // Opens the store under test, keeping at most `node_fds` descriptors of
  // nodes, as store_.
  void OpenStore(size_t node_fds) {
    auto store = Store::Open(root_ + "/s", {.node_fds = node_fds});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  test::TempDir tmp_{"staging_store_test"};
  std::string root_;
  std::unique_ptr<Store> store_;
};

// A file `name` in record folder `record`, open with `flags`.
struct OpenFileInStore {
  uint64_t node = 0;
  UniqueFd fd;
};

// The same in the folder node `parent` (node 0 after failing the test). A
// caller that only needs the node lets the descriptor close at once:
// CreateAt(...).node.
OpenFileInStore CreateAt(Store& store, uint64_t parent, const std::string& name, int flags) {
  OpenFileInStore out;
  auto created = store.Create(parent, name, S_IFREG | 0644, flags);
  EXPECT_TRUE(created.ok()) << created.status();
  if (!created.ok()) return out;
  out.node = created->first.st_ino;
  out.fd = UniqueFd(created->second);
  return out;
}

OpenFileInStore CreateIn(Store& store, const std::string& record, const std::string& name,
                         int flags) {
  uint64_t parent = store.root();
  if (!record.empty()) {
    auto st = store.Mkdir(store.root(), record, 0755);
    if (!st.ok()) st = store.Lookup(store.root(), record);
    EXPECT_TRUE(st.ok()) << st.status();
    if (!st.ok()) return OpenFileInStore();
    parent = st->st_ino;
  }
  return CreateAt(store, parent, name, flags);
}

// ---- Bounded descriptors (issue 15, item 7) ----

int OpenDescriptors() {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
    (void)e;
    ++n;
  }
  return n;
}

TEST_F(StoreTest, MoreKnownNodesThanTheDescriptorBudget) {
  ASSERT_NO_FATAL_FAILURE(OpenStore(8));
  Store& s = *store_;
  const int before = OpenDescriptors();
  std::vector<uint64_t> files;
  for (int r = 0; r < 10; ++r) {
    auto dir = s.Mkdir(s.root(), absl::StrCat("r", r), 0755);
    ASSERT_TRUE(dir.ok()) << dir.status();
    for (int f = 0; f < 30; ++f) {
      auto c = s.Create(dir->st_ino, absl::StrCat("f", f), S_IFREG | 0644, O_WRONLY);
      ASSERT_TRUE(c.ok()) << c.status();
      const std::string body = absl::StrCat(r, "/", f);
      ASSERT_EQ(::write(c->second, body.data(), body.size()), static_cast<ssize_t>(body.size()));
      ::close(c->second);
      files.push_back(c->first.st_ino);
    }
  }
  EXPECT_LE(s.cached_fds(), 8u);
  // The budget, and as many writable descriptors kept from Create
  // (WritableFd: max(budget / 2, 8)).
  EXPECT_LE(OpenDescriptors(), before + 16);
  // Every node is reachable again, in any order, with its own bytes.
  for (size_t i = files.size(); i-- > 0;) {
    auto fd = s.Open(files[i], O_RDONLY);
    ASSERT_TRUE(fd.ok()) << fd.status();
    UniqueFd own(*fd);
    EXPECT_EQ(ReadFileToString(absl::StrCat("/proc/self/fd/", own.get())).value(),
              absl::StrCat(i / 30, "/", i % 30));
    auto rel = s.RelativePath(files[i]);
    ASSERT_TRUE(rel.ok()) << rel.status();
    EXPECT_EQ(*rel, absl::StrCat("r", i / 30, "/f", i % 30));
  }
  EXPECT_GT(s.reopens(), 0u);
  EXPECT_LE(s.cached_fds(), 8u);
  EXPECT_LE(OpenDescriptors(), before + 16);
}

TEST_F(StoreTest, RenamedNodesAreReopenedUnderTheirNewNames) {
  ASSERT_NO_FATAL_FAILURE(OpenStore(1));
  Store& s = *store_;
  auto a = s.Mkdir(s.root(), "a", 0755);
  ASSERT_TRUE(a.ok());
  auto b = s.Mkdir(s.root(), "b", 0755);
  ASSERT_TRUE(b.ok());
  const uint64_t x = CreateAt(s, a->st_ino, "x", O_WRONLY).node;
  ASSERT_NE(x, 0u);
  ASSERT_TRUE(s.Rename(a->st_ino, "x", b->st_ino, "y", 0, naming::NoFeatureTypes()).ok());
  ASSERT_TRUE(s.Mkdir(s.root(), "fill", 0755).ok());  // evicts x's descriptor
  EXPECT_EQ(s.RelativePath(x).value(), "b/y");
  EXPECT_TRUE(s.GetAttr(x).ok());
  // A folder renamed: its children follow.
  ASSERT_TRUE(s.Rename(s.root(), "b", s.root(), "c", 0, naming::NoFeatureTypes()).ok());
  ASSERT_TRUE(s.Mkdir(s.root(), "fill2", 0755).ok());
  EXPECT_EQ(s.RelativePath(x).value(), "c/y");
  auto fd = s.Open(x, O_RDONLY);
  ASSERT_TRUE(fd.ok()) << fd.status();
  ::close(*fd);
  // Exchanged names swap their nodes.
  const uint64_t z = CreateAt(s, a->st_ino, "z", O_WRONLY).node;
  ASSERT_NE(z, 0u);
  ASSERT_TRUE(
      s.Rename(a->st_ino, "z", b->st_ino, "y", RENAME_EXCHANGE, naming::NoFeatureTypes()).ok());
  EXPECT_EQ(s.RelativePath(x).value(), "a/z");
  EXPECT_EQ(s.RelativePath(z).value(), "c/y");
  // A rename over a known node: that node is gone, the mover takes its name.
  ASSERT_TRUE(s.Rename(s.root(), "a", s.root(), "fill", 0, naming::NoFeatureTypes()).ok());
  EXPECT_EQ(s.RelativePath(x).value(), "fill/z");
  ASSERT_TRUE(s.Unlink(s.root(), "fill/z").code() != absl::StatusCode::kOk);  // one component
}

TEST_F(StoreTest, ANodeReplacedOnDiskIsStaleNotTheOtherFile) {
  ASSERT_NO_FATAL_FAILURE(OpenStore(1));
  Store& s = *store_;
  auto r = s.Mkdir(s.root(), "r", 0755);
  ASSERT_TRUE(r.ok());
  const uint64_t label = CreateAt(s, r->st_ino, "label", O_WRONLY).node;
  ASSERT_NE(label, 0u);
  ASSERT_TRUE(s.Mkdir(s.root(), "other", 0755).ok());  // evicts label's descriptor
  // Swapped behind the store's back: another file now has the name.
  const std::string path = staging::RecordsDir(root_ + "/s") + "/r/label";
  ASSERT_EQ(::rename(path.c_str(), (path + ".old").c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(path, "7\n").ok());
  auto fd = s.Open(label, O_RDONLY);
  EXPECT_EQ(ErrnoOf(fd.status()), ESTALE) << fd.status();
  if (fd.ok()) ::close(*fd);
  EXPECT_EQ(ErrnoOf(s.GetAttr(label).status()), ESTALE);
  // A symlink in its place is not followed.
  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_EQ(::symlink("/etc/passwd", path.c_str()), 0);
  EXPECT_FALSE(s.GetAttr(label).ok());
  // Gone altogether: ENOENT.
  ASSERT_EQ(::unlink(path.c_str()), 0);
  EXPECT_EQ(ErrnoOf(s.GetAttr(label).status()), ENOENT);
}

TEST_F(StoreTest, ForgottenAndRemovedNodesLeaveNothingBehind) {
  ASSERT_NO_FATAL_FAILURE(OpenStore(4));
  Store& s = *store_;
  const int before = OpenDescriptors();
  auto r = s.Mkdir(s.root(), "r", 0755);
  ASSERT_TRUE(r.ok());
  std::vector<uint64_t> nodes;
  for (int i = 0; i < 20; ++i) {
    nodes.push_back(CreateAt(s, r->st_ino, absl::StrCat("f", i), O_WRONLY).node);
    ASSERT_NE(nodes.back(), 0u);
  }
  // A removed file the kernel still knows (open after rm) keeps answering.
  ASSERT_TRUE(s.Unlink(r->st_ino, "f0").ok());
  EXPECT_TRUE(s.GetAttr(nodes[0]).ok());
  EXPECT_EQ(s.RelativePath(nodes[0]).status().code(), absl::StatusCode::kNotFound);
  for (uint64_t n : nodes) s.Forget(n, 1, naming::NoFeatureTypes());
  EXPECT_EQ(ErrnoOf(s.GetAttr(nodes[0]).status()), ESTALE);
  EXPECT_EQ(ErrnoOf(s.GetAttr(nodes[5]).status()), ESTALE);
  EXPECT_TRUE(s.GetAttr(r->st_ino).ok());
  s.Forget(r->st_ino, 1, naming::NoFeatureTypes());
  EXPECT_EQ(s.cached_fds(), 0u);
  EXPECT_EQ(OpenDescriptors(), before);
  // Looked up again: a fresh node.
  auto again = s.Lookup(s.root(), "r");
  ASSERT_TRUE(again.ok()) << again.status();
  auto f3 = s.Lookup(again->st_ino, "f3");
  ASSERT_TRUE(f3.ok()) << f3.status();
  EXPECT_EQ(s.RelativePath(f3->st_ino).value(), "r/f3");
}

TEST_F(StoreTest, ReadOnlyOpenCreatesAndLocksNothing) {
  const std::string dir = root_ + "/s";
  auto missing = Store::Open(dir, {.read_only = true});
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_FALSE(fs::exists(dir)) << "a read-only open created the store";

  auto rw = Store::Open(dir);
  ASSERT_TRUE(rw.ok()) << rw.status();
  // Any number of read-only openers beside the read-write owner.
  auto ro1 = Store::Open(dir, {.read_only = true});
  auto ro2 = Store::Open(dir, {.read_only = true});
  EXPECT_TRUE(ro1.ok()) << ro1.status();
  EXPECT_TRUE(ro2.ok()) << ro2.status();
  // A second read-write owner is still refused, saying what would work.
  auto rw2 = Store::Open(dir);
  EXPECT_EQ(ErrnoOf(rw2.status()), EBUSY) << rw2.status();
  EXPECT_NE(rw2.status().message().find("-o ro"), absl::string_view::npos) << rw2.status();

  // A read-only store over a store nobody owns leaves no lock file.
  const std::string other = root_ + "/t";
  fs::create_directories(staging::RecordsDir(other) + "/r");
  auto ro = Store::Open(other, {.read_only = true});
  ASSERT_TRUE(ro.ok()) << ro.status();
  EXPECT_FALSE(fs::exists(staging::LockFile(other)));
}

TEST_F(StoreTest, RemoveIfEmptyKeepsStagedBytes) {
  const std::string empty = root_ + "/empty";
  ASSERT_TRUE(Store::Open(empty).ok());
  RemoveIfEmpty(empty);
  EXPECT_FALSE(fs::exists(empty));

  const std::string full = root_ + "/full";
  {
    auto store = Store::Open(full);
    ASSERT_TRUE(store.ok());
    CreateIn(**store, "r", "label", O_RDWR);
  }
  RemoveIfEmpty(full);
  EXPECT_TRUE(fs::exists(staging::RecordsDir(full) + "/r/label"));
}

}  // namespace

// ---- SequenceExample folders (record_folder.h) ----

TEST_F(StoreTest, SequenceExampleFolderRoundTripsFeatureByFeature) {
  example::SequenceTable t;
  example::Feature label;
  label.name = "label";
  label.kind = example::Kind::kFloat;
  label.floats = {1.5f, -0.0f};
  t.context.features.push_back(label);
  auto list = [&](std::string name) -> example::FeatureList& {
    t.lists.emplace_back();
    t.lists.back().name = std::move(name);
    return t.lists.back();
  };
  const std::string jpeg = "\xff\xd8\xff jpeg bytes\n\x01";
  list("a");  // empty, and the path of a/b
  auto& ab = list("a/b");
  for (int i = 0; i < 11; ++i) {
    example::Feature f;
    f.kind = example::Kind::kBytes;
    f.bytes.push_back(jpeg);
    if (i == 4) f.bytes.push_back(jpeg);
    ab.steps.push_back(f);
  }
  auto& nums = list("7");
  example::Feature f1, f2, none;
  f1.kind = f2.kind = example::Kind::kFloat;
  f1.floats = {2.0f};  // prints as "2": the list's other step keeps it float
  f2.floats = {0.25f};
  nums.steps = {f1, none, f2};
  auto& text = list("words");
  example::Feature w, empty_text;
  w.kind = empty_text.kind = example::Kind::kBytes;
  w.bytes = {"hello", "world"};
  text.steps = {w, empty_text};
  list("zz");  // empty
  const std::string payload = example::EncodeSequenceExample(t);
  auto decoded = example::DecodeSequenceExample(payload);
  ASSERT_TRUE(decoded.ok());
  const naming::Layout l = naming::LayoutSequence(*decoded, payload);
  const std::string rec = root_ + "/rec";
  ASSERT_EQ(::mkdir(rec.c_str(), 0755), 0);
  ASSERT_TRUE(test::WriteLayout(l, 0, rec, payload).ok());
  auto packed = PayloadFromFolder(rec, naming::NoFeatureTypes());
  ASSERT_TRUE(packed.ok()) << packed.status();
  auto back = example::DecodeSequenceExample(*packed);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(test::SequenceText(*decoded), test::SequenceText(*back));
  EXPECT_EQ(payload, *packed);

  // A stray file beside context/ and feature_lists/ is refused with a reason.
  ASSERT_TRUE(WriteFileAtomically(rec + "/extra.txt", "x\n").ok());
  auto bad = PayloadFromFolder(rec, naming::NoFeatureTypes());
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("extra.txt"), absl::string_view::npos) << bad.status();
}

// Kindless features (an empty Feature{}: TFX's missing values) show as empty
// `<name>.none` files and pack back kindless, in an Example and in a
// SequenceExample's context; a file giving the feature a value beside its
// `.none` wins; a `.none` holding bytes is refused with its name.
TEST_F(StoreTest, KindlessFeaturesPackFromEmptyNoneFiles) {
  example::FeatureTable t;
  example::Feature a, k, seven;
  a.name = "a";
  a.kind = example::Kind::kInt64;
  a.int64s = {1};
  k.name = "k";
  seven.name = "7";
  t.features = {seven, a, k};
  const std::string payload = example::EncodeExample(t);
  auto decoded = example::DecodeExample(payload);
  ASSERT_TRUE(decoded.ok());
  const naming::Layout l = naming::LayoutExample(*decoded, payload);
  const std::string rec = root_ + "/rec";
  ASSERT_EQ(::mkdir(rec.c_str(), 0755), 0);
  ASSERT_TRUE(test::WriteLayout(l, 0, rec, payload).ok());
  EXPECT_TRUE(std::filesystem::exists(rec + "/k.none"));
  EXPECT_TRUE(std::filesystem::exists(rec + "/%37.none"));
  auto packed = PayloadFromFolder(rec, naming::NoFeatureTypes());
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(payload, *packed);

  ASSERT_TRUE(WriteFileAtomically(rec + "/k", "5\n").ok());
  packed = PayloadFromFolder(rec, naming::NoFeatureTypes());
  ASSERT_TRUE(packed.ok()) << packed.status();
  auto with_value = example::DecodeExample(*packed);
  ASSERT_TRUE(with_value.ok());
  ASSERT_EQ(with_value->features.size(), 3u);
  EXPECT_EQ(with_value->features[2].kind, example::Kind::kInt64);
  EXPECT_EQ(with_value->features[2].int64s, std::vector<int64_t>{5});
  ASSERT_EQ(::unlink((rec + "/k").c_str()), 0);

  ASSERT_TRUE(WriteFileAtomically(rec + "/k.none", "x").ok());
  auto bad = PayloadFromFolder(rec, naming::NoFeatureTypes());
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("k.none"), absl::string_view::npos) << bad.status();

  // TFX's SequenceExample context {i: empty, f: empty}.
  example::SequenceTable seq;
  example::Feature f, i;
  f.name = "f";
  i.name = "i";
  seq.context.features = {f, i};
  seq.lists.push_back({"s", {a}});
  seq.lists.back().steps[0].name.clear();
  const std::string spayload = example::EncodeSequenceExample(seq);
  auto sdecoded = example::DecodeSequenceExample(spayload);
  ASSERT_TRUE(sdecoded.ok());
  const naming::Layout sl = naming::LayoutSequence(*sdecoded, spayload);
  const std::string srec = root_ + "/srec";
  ASSERT_EQ(::mkdir(srec.c_str(), 0755), 0);
  ASSERT_TRUE(test::WriteLayout(sl, 0, srec, spayload).ok());
  EXPECT_TRUE(std::filesystem::exists(srec + "/context/f.none"));
  auto spacked = PayloadFromFolder(srec, naming::NoFeatureTypes());
  ASSERT_TRUE(spacked.ok()) << spacked.status();
  EXPECT_EQ(spayload, *spacked);
}

}  // namespace tfrecordfs::staging
