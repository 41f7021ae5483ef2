// base/fs_util: the filesystem helpers every module shares. Each test builds
// a small tree in a TempDir and checks what is on disk afterwards, not just
// the status.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"

namespace tfrecordfs {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// Whole-file writes and reads through base/file.h.
void WriteFile(const std::string& path, absl::string_view contents) {
  ASSERT_TRUE(WriteFileAtomically(path, contents).ok()) << path;
}

std::string ReadFile(const std::string& path) { return ReadFileToString(path).value_or("?"); }

bool IsDir(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool Present(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

TEST(JoinPathTest, OneSlash) {
  EXPECT_EQ(JoinPath("a", "b"), "a/b");
  EXPECT_EQ(JoinPath("a/", "b"), "a/b");
  EXPECT_EQ(JoinPath("/", "b"), "/b");
}

// ---- RemoveTree ----

TEST(RemoveTreeTest, RemovesANestedTreeWithoutFollowingSymlinks) {
  test::TempDir tmp;
  // Outside the tree: what the symlinks point at must survive.
  const std::string outside = tmp.Subdir("outside");
  WriteFile(outside + "/keep.txt", "precious");
  const std::string outside_file = tmp.Join("outside.txt");
  WriteFile(outside_file, "also precious");

  const std::string root = tmp.Subdir("tree/a/b/c");
  WriteFile(tmp.Join("tree/top.txt"), "x");
  WriteFile(tmp.Join("tree/a/b/c/deep.txt"), "y");
  ASSERT_EQ(::symlink(outside.c_str(), tmp.Join("tree/a/to_dir").c_str()), 0);
  ASSERT_EQ(::symlink(outside_file.c_str(), tmp.Join("tree/a/b/to_file").c_str()), 0);
  ASSERT_EQ(::symlink("/nonexistent/dangling", tmp.Join("tree/dangling").c_str()), 0);
  // A read-only folder (as `cp -r` from the read-only mount leaves them).
  ASSERT_EQ(::chmod(tmp.Join("tree/a/b").c_str(), 0555), 0);

  ASSERT_TRUE(RemoveTree(tmp.Join("tree")).ok());
  EXPECT_FALSE(Present(tmp.Join("tree")));
  EXPECT_EQ(ReadFile(outside + "/keep.txt"), "precious");
  EXPECT_EQ(ReadFile(outside_file), "also precious");
  EXPECT_TRUE(IsDir(outside));
}

TEST(RemoveTreeTest, SymlinkToADirectoryIsUnlinkedNotEmptied) {
  test::TempDir tmp;
  const std::string target = tmp.Subdir("target");
  WriteFile(target + "/f", "z");
  ASSERT_EQ(::symlink(target.c_str(), tmp.Join("link").c_str()), 0);
  ASSERT_TRUE(RemoveTree(tmp.Join("link")).ok());
  EXPECT_FALSE(Present(tmp.Join("link")));
  EXPECT_EQ(ReadFile(target + "/f"), "z");
}

TEST(RemoveTreeTest, MissingPathAndPlainFile) {
  test::TempDir tmp;
  EXPECT_TRUE(RemoveTree(tmp.Join("missing")).ok());
  WriteFile(tmp.Join("file"), "f");
  EXPECT_TRUE(RemoveTree(tmp.Join("file")).ok());
  EXPECT_FALSE(Present(tmp.Join("file")));
}

// ---- RenameNoReplace ----

TEST(RenameNoReplaceTest, RefusesAnExistingNameAndLeavesBothAlone) {
  test::TempDir tmp;
  const std::string from = tmp.Join("from"), to = tmp.Join("to");
  WriteFile(from, "new");
  WriteFile(to, "old");
  absl::Status s = RenameNoReplace(from, to);
  EXPECT_EQ(ErrnoOf(s), EEXIST) << s;
  EXPECT_THAT(s.message(), HasSubstr(from));
  EXPECT_THAT(s.message(), HasSubstr(to));
  EXPECT_EQ(ReadFile(from), "new");
  EXPECT_EQ(ReadFile(to), "old");

  // An existing directory, or a dangling symlink, is not replaced either.
  const std::string dir = tmp.Subdir("dir");
  EXPECT_EQ(ErrnoOf(RenameNoReplace(from, dir)), EEXIST);
  ASSERT_EQ(::symlink("/nonexistent", tmp.Join("dangling").c_str()), 0);
  EXPECT_EQ(ErrnoOf(RenameNoReplace(from, tmp.Join("dangling"))), EEXIST);
  EXPECT_EQ(ReadFile(from), "new");
}

TEST(RenameNoReplaceTest, RenamesToAFreeName) {
  test::TempDir tmp;
  WriteFile(tmp.Join("from"), "data");
  ASSERT_TRUE(RenameNoReplace(tmp.Join("from"), tmp.Join("free")).ok());
  EXPECT_FALSE(Present(tmp.Join("from")));
  EXPECT_EQ(ReadFile(tmp.Join("free")), "data");
  // A missing source names both paths.
  absl::Status s = RenameNoReplace(tmp.Join("from"), tmp.Join("other"));
  EXPECT_EQ(ErrnoOf(s), ENOENT);
  EXPECT_THAT(s.message(), HasSubstr("rename " + tmp.Join("from") + " -> " + tmp.Join("other")));
}

// ---- MakeDirs ----

TEST(MakeDirsTest, NestedAndExisting) {
  test::TempDir tmp;
  const std::string deep = tmp.Join("a/b/c/d");
  ASSERT_TRUE(MakeDirs(deep, 0750).ok());
  EXPECT_TRUE(IsDir(deep));
  struct stat st;
  ASSERT_EQ(::stat(tmp.Join("a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777 & ~0750, 0u) << std::oct << st.st_mode;  // umask may clear more
  // Existing: fine, and a trailing slash too.
  EXPECT_TRUE(MakeDirs(deep, 0750).ok());
  EXPECT_TRUE(MakeDirs(tmp.Join("a/b/"), 0750).ok());
  EXPECT_TRUE(MakeDirs(tmp.path(), 0750).ok());
  EXPECT_TRUE(MakeDirs("", 0750).ok());
  EXPECT_TRUE(MakeDirs("/", 0750).ok());
}

TEST(MakeDirsTest, UnderARegularFileFailsNamingThePath) {
  test::TempDir tmp;
  const std::string file = tmp.Join("file");
  WriteFile(file, "not a directory");
  absl::Status s = MakeDirs(file + "/sub/dir", 0755);
  EXPECT_EQ(ErrnoOf(s), ENOTDIR) << s;
  EXPECT_THAT(s.message(), HasSubstr(file + "/sub"));
  EXPECT_EQ(ReadFile(file), "not a directory");

  // The file itself is not a directory either (mkdir -p says so too).
  s = MakeDirs(file, 0755);
  EXPECT_EQ(ErrnoOf(s), EEXIST) << s;
  EXPECT_THAT(s.message(), HasSubstr("mkdir " + file));
}

// ---- ListDir ----

TEST(ListDirTest, ListsEntriesWithoutDotAndDotDot) {
  test::TempDir tmp;
  const std::string dir = tmp.Subdir("d");
  WriteFile(dir + "/one", "1");
  WriteFile(dir + "/.hidden", "h");
  tmp.Subdir("d/sub");
  ASSERT_EQ(::symlink("/nonexistent", (dir + "/link").c_str()), 0);

  auto list = ListDir::Open(dir);
  ASSERT_TRUE(list.ok()) << list.status();
  std::vector<std::string> names;
  for (absl::string_view name; list->Next(&name);) names.emplace_back(name);
  EXPECT_TRUE(list->status().ok()) << list->status();
  EXPECT_THAT(names, UnorderedElementsAre("one", ".hidden", "sub", "link"));
  // The end stays the end.
  absl::string_view more;
  EXPECT_FALSE(list->Next(&more));

  auto again = ListNames(dir);
  ASSERT_TRUE(again.ok());
  std::sort(again->begin(), again->end());
  EXPECT_THAT(*again, ElementsAre(".hidden", "link", "one", "sub"));

  auto empty = ListNames(tmp.Subdir("empty"));
  ASSERT_TRUE(empty.ok());
  EXPECT_THAT(*empty, IsEmpty());
}

TEST(ListDirTest, ErrorsNameThePath) {
  test::TempDir tmp;
  const std::string missing = tmp.Join("missing");
  auto list = ListDir::Open(missing);
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(ErrnoOf(list.status()), ENOENT);
  EXPECT_THAT(list.status().message(), HasSubstr(missing));

  WriteFile(tmp.Join("file"), "f");
  auto names = ListNames(tmp.Join("file"));
  EXPECT_EQ(ErrnoOf(names.status()), ENOTDIR);
  EXPECT_THAT(names.status().message(), HasSubstr(tmp.Join("file")));
}

int OpenDescriptors() {
  auto names = ListNames("/proc/self/fd");
  return names.ok() ? static_cast<int>(names->size()) : -1;
}

TEST(ListDirTest, ClosesItsDescriptor) {
  test::TempDir tmp;
  tmp.Subdir("d/x");
  const int before = OpenDescriptors();
  {
    auto list = ListDir::Open(tmp.Join("d"));
    ASSERT_TRUE(list.ok());
    EXPECT_EQ(OpenDescriptors(), before + 1);
    ListDir moved = std::move(*list);  // the moved-from one closes nothing
    struct stat st;
    EXPECT_EQ(::fstatat(moved.fd(), "x", &st, AT_SYMLINK_NOFOLLOW), 0);
  }
  EXPECT_EQ(OpenDescriptors(), before);

  // Adopt owns the descriptor: closed with the ListDir, and on failure.
  auto fd = OpenFile(tmp.Join("d"), O_RDONLY | O_DIRECTORY);
  ASSERT_TRUE(fd.ok());
  {
    auto list = ListDir::Adopt(std::move(*fd), "d");
    ASSERT_TRUE(list.ok()) << list.status();
    absl::string_view name;
    ASSERT_TRUE(list->Next(&name));
    EXPECT_EQ(name, "x");
  }
  EXPECT_EQ(OpenDescriptors(), before);
  WriteFile(tmp.Join("f"), "");
  auto not_dir = OpenFile(tmp.Join("f"), O_RDONLY);
  ASSERT_TRUE(not_dir.ok());
  auto bad = ListDir::Adopt(std::move(*not_dir), "the file f");
  EXPECT_EQ(ErrnoOf(bad.status()), ENOTDIR);
  EXPECT_THAT(bad.status().message(), HasSubstr("the file f"));
  EXPECT_EQ(OpenDescriptors(), before);
}

// ---- RealPath, Exists, UnlinkIfExists, times ----

TEST(RealPathTest, ResolvesSymlinksAndFailsOnAMissingPath) {
  test::TempDir tmp;  // canonical already
  const std::string dir = tmp.Subdir("real");
  ASSERT_EQ(::symlink(dir.c_str(), tmp.Join("alias").c_str()), 0);
  auto r = RealPath(tmp.Join("alias/../real/."));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, dir);

  const std::string missing = tmp.Join("missing/x");
  auto m = RealPath(missing);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(ErrnoOf(m.status()), ENOENT);
  EXPECT_THAT(m.status().message(), HasSubstr(missing));
  EXPECT_EQ(RealPath(missing).value_or(missing), missing);
}

TEST(ExistsTest, AnyTypeIncludingDanglingSymlinks) {
  test::TempDir tmp;
  EXPECT_FALSE(*Exists(tmp.Join("none")));
  ASSERT_EQ(::symlink("/nonexistent", tmp.Join("dangling").c_str()), 0);
  EXPECT_TRUE(*Exists(tmp.Join("dangling")));
  EXPECT_TRUE(*Exists(tmp.path()));
  WriteFile(tmp.Join("f"), "");
  EXPECT_EQ(ErrnoOf(Exists(tmp.Join("f/below")).status()), ENOTDIR);
}

TEST(UnlinkIfExistsTest, SaysWhetherItWasThere) {
  test::TempDir tmp;
  WriteFile(tmp.Join("f"), "");
  EXPECT_TRUE(*UnlinkIfExists(tmp.Join("f")));
  EXPECT_FALSE(*UnlinkIfExists(tmp.Join("f")));
  auto dir = UnlinkIfExists(tmp.Subdir("d"));
  ASSERT_FALSE(dir.ok());
  EXPECT_THAT(dir.status().message(), HasSubstr("unlink " + tmp.Join("d")));
  EXPECT_TRUE(IsDir(tmp.Join("d")));

  WriteFile(tmp.Join("g"), "");
  EXPECT_TRUE(UnlinkDurably(tmp.Join("g")).ok());
  EXPECT_FALSE(Present(tmp.Join("g")));
  EXPECT_TRUE(UnlinkDurably(tmp.Join("g")).ok());
  EXPECT_EQ(ErrnoOf(UnlinkDurably(tmp.Join("none/g"))), ENOENT);  // no directory to fsync
}

// Both whole-file writers replace what is there and leave no temp file
// behind, also when the write fails (the directory is gone).
TEST(WriteFileTest, AtomicallyAndReplacingLeaveOnlyTheFile) {
  test::TempDir tmp;
  using Writer = absl::Status (*)(const std::string&, absl::string_view);
  for (Writer write : {Writer{&WriteFileAtomically}, Writer{&WriteFileReplacing}}) {
    const std::string path = tmp.Join("f");
    ASSERT_TRUE(write(path, "old").ok());
    ASSERT_TRUE(write(path, "new contents").ok());
    EXPECT_EQ(ReadFile(path), "new contents");
    EXPECT_THAT(*ListNames(tmp.path()), ElementsAre("f"));
    EXPECT_EQ(ErrnoOf(write(tmp.Join("none/f"), "x")), ENOENT);
    EXPECT_THAT(*ListNames(tmp.path()), ElementsAre("f"));
    ASSERT_TRUE(*UnlinkIfExists(path));
  }
}

// The writers over pieces write them one after the other (empty pieces
// included), as the index store writes an index file: its header, the
// offsets straight from the walk's vector, the rest.
TEST(WriteFileTest, PiecesAreWrittenInOrder) {
  test::TempDir tmp;
  using PiecesWriter = absl::Status (*)(const std::string&, absl::Span<const absl::string_view>);
  for (PiecesWriter write :
       {PiecesWriter{&WriteFileAtomically}, PiecesWriter{&WriteFileReplacing}}) {
    const std::string path = tmp.Join("f");
    const std::string big(300000, 'b');
    const std::vector<absl::string_view> pieces = {"head|", "", big, "|tail"};
    ASSERT_TRUE(write(path, pieces).ok());
    EXPECT_EQ(ReadFile(path), absl::StrCat("head|", big, "|tail"));
    ASSERT_TRUE(write(path, {}).ok());
    EXPECT_EQ(ReadFile(path), "");
    EXPECT_THAT(*ListNames(tmp.path()), ElementsAre("f"));
    ASSERT_TRUE(*UnlinkIfExists(path));
  }
}

TEST(TimesTest, Nanoseconds) {
  struct stat st = {};
  st.st_mtim = {1700000000, 123456789};
  st.st_ctim = {-1, 999999999};
  EXPECT_EQ(MtimeNs(st), int64_t{1700000000123456789});
  EXPECT_EQ(CtimeNs(st), -1);
}

}  // namespace
}  // namespace tfrecordfs
