// NodeTable (staging/node_table.h): known nodes as parent and name, a
// bounded set of descriptors reopened and checked on demand, renames,
// removals and forgets. The store's operations over it: staging_store_test.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/staging/node_table.h"

namespace tfrecordfs::staging {
namespace {

class NodeTableTest : public ::testing::Test {
 protected:
  // The table over a fresh records/ folder, with `node_fds` descriptors.
  void Open(size_t node_fds) {
    ASSERT_FALSE(tmp_.path().empty());
    records_ = JoinPath(tmp_.path(), "records");
    ASSERT_EQ(::mkdir(records_.c_str(), 0700), 0);
    UniqueFd root(::open(records_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(root.valid());
    struct stat st;
    ASSERT_EQ(::fstat(root.get(), &st), 0);
    table_ = std::make_unique<NodeTable>(std::move(root), st, node_fds);
  }

  // Registers `name` in `parent` (as a lookup does); 0 after failing.
  uint64_t Lookup(uint64_t parent, const std::string& name) {
    auto pfd = table_->NodeFd(parent);
    EXPECT_TRUE(pfd.ok()) << pfd.status();
    if (!pfd.ok()) return 0;
    auto st = table_->Register(parent, (*pfd)->get(), name);
    EXPECT_TRUE(st.ok()) << name << ": " << st.status();
    return st.ok() ? st->st_ino : 0;
  }

  std::string At(const std::string& rel) const { return JoinPath(records_, rel); }

  test::TempDir tmp_{"staging_node_table_test"};
  std::string records_;
  std::unique_ptr<NodeTable> table_;
};

TEST_F(NodeTableTest, KnownNodesAreReopenedWithinTheBudget) {
  ASSERT_NO_FATAL_FAILURE(Open(4));
  ASSERT_EQ(::mkdir(At("r").c_str(), 0755), 0);
  const uint64_t r = Lookup(table_->root(), "r");
  ASSERT_NE(r, 0u);
  std::vector<uint64_t> files;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(WriteFileAtomically(At(absl::StrCat("r/f", i)), absl::StrCat(i)).ok());
    files.push_back(Lookup(r, absl::StrCat("f", i)));
    ASSERT_NE(files.back(), 0u);
  }
  EXPECT_LE(table_->cached_fds(), 4u);
  const uint64_t reopens = table_->reopens();
  for (int i = 0; i < 20; ++i) {
    auto fd = table_->Open(files[i], O_RDONLY);
    ASSERT_TRUE(fd.ok()) << fd.status();
    UniqueFd own(*fd);
    EXPECT_EQ(ReadFileToString(ProcFdPath(own.get())).value(), absl::StrCat(i));
    EXPECT_EQ(table_->RelativePath(files[i]).value(), absl::StrCat("r/f", i));
  }
  EXPECT_GT(table_->reopens(), reopens) << "the first files' descriptors were evicted";
  EXPECT_LE(table_->cached_fds(), 4u);
  EXPECT_EQ(table_->RelativePath(table_->root()).value(), "");
}

TEST_F(NodeTableTest, ANameNowNamingAnotherFileIsStale) {
  ASSERT_NO_FATAL_FAILURE(Open(1));
  ASSERT_TRUE(WriteFileAtomically(At("label"), "1\n").ok());
  ASSERT_TRUE(WriteFileAtomically(At("other"), "2\n").ok());
  const uint64_t label = Lookup(table_->root(), "label");
  ASSERT_NE(Lookup(table_->root(), "other"), 0u);  // evicts label's descriptor
  ASSERT_EQ(::rename(At("label").c_str(), At("label.old").c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(At("label"), "7\n").ok());
  EXPECT_EQ(ErrnoOf(table_->NodeFd(label).status()), ESTALE);
  ASSERT_EQ(::unlink(At("label").c_str()), 0);
  EXPECT_EQ(ErrnoOf(table_->NodeFd(label).status()), ENOENT);
  EXPECT_EQ(ErrnoOf(table_->NodeFd(12345678).status()), ESTALE) << "never known";
}

TEST_F(NodeTableTest, MovesRemovalsAndForgets) {
  ASSERT_NO_FATAL_FAILURE(Open(2));
  ASSERT_EQ(::mkdir(At("a").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(At("b").c_str(), 0755), 0);
  const uint64_t a = Lookup(table_->root(), "a");
  const uint64_t b = Lookup(table_->root(), "b");
  ASSERT_TRUE(WriteFileAtomically(At("a/x"), "x").ok());
  const uint64_t x = Lookup(a, "x");
  ASSERT_NE(x, 0u);

  // Moved: the node follows its file.
  ASSERT_EQ(::rename(At("a/x").c_str(), At("b/y").c_str()), 0);
  table_->Moved(a, "x", b, "y", 0, std::nullopt, nullptr);
  EXPECT_EQ(table_->RelativePath(x).value(), "b/y");
  NodeTable::FdRef keep;
  EXPECT_EQ(table_->KnownNode(a, "x", &keep), std::nullopt);
  EXPECT_EQ(table_->KnownNode(b, "y", &keep), x);
  ASSERT_NE(keep, nullptr);

  // Removed while the kernel knows it: still reachable, no longer named.
  ASSERT_EQ(::unlink(At("b/y").c_str()), 0);
  table_->Removed(x, std::move(keep));
  EXPECT_EQ(table_->RelativePath(x).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(table_->NodeFd(x).ok()) << "pinned until forgotten";
  EXPECT_TRUE(table_->IsLastReference(x, 1));
  EXPECT_FALSE(table_->IsLastReference(table_->root(), 1)) << "the root is never forgotten";
  table_->Forget(x, 1);
  EXPECT_FALSE(table_->Contains(x));
  EXPECT_EQ(ErrnoOf(table_->NodeFd(x).status()), ESTALE);

  // A writable descriptor is cached while its node is known.
  ASSERT_TRUE(WriteFileAtomically(At("a/w"), "").ok());
  const uint64_t w = Lookup(a, "w");
  auto wfd = table_->WritableFd(w);
  ASSERT_TRUE(wfd.ok()) << wfd.status();
  EXPECT_EQ(table_->CachedWritable(w), *wfd);
  table_->Forget(w, 1);
  EXPECT_EQ(table_->CachedWritable(w), nullptr);
  table_->Forget(a, 1);
  table_->Forget(b, 1);
  EXPECT_FALSE(table_->Contains(a));
  EXPECT_EQ(table_->cached_fds(), 0u);
}

}  // namespace
}  // namespace tfrecordfs::staging
