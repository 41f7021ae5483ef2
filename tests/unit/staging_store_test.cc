// The staging store's own checks: numeric files refused at write() (before
// the bytes land), read-only opens that create and lock nothing, and the
// cleanup of a store a failed mount created.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/staging/store.h"

namespace tfrecordfs::staging {
namespace {

namespace fs = std::filesystem;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/staging_store_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::string root_;
};

// A file `name` in record folder `record`, open with `flags`.
struct OpenFileInStore {
  uint64_t node = 0;
  UniqueFd fd;
};

OpenFileInStore CreateIn(Store& store, const std::string& record, const std::string& name,
                         int flags) {
  OpenFileInStore out;
  uint64_t parent = store.root();
  if (!record.empty()) {
    auto st = store.Mkdir(store.root(), record, 0755);
    if (!st.ok()) st = store.Lookup(store.root(), record);
    EXPECT_TRUE(st.ok()) << st.status();
    if (!st.ok()) return out;
    parent = st->st_ino;
  }
  auto created = store.Create(parent, name, S_IFREG | 0644, flags);
  EXPECT_TRUE(created.ok()) << created.status();
  if (!created.ok()) return out;
  out.node = created->first.st_ino;
  out.fd = UniqueFd(created->second);
  return out;
}

// What the vfs does for write(): check, then write.
absl::Status CheckedWrite(Store& store, const OpenFileInStore& f, uint64_t offset,
                          absl::string_view data) {
  if (auto s = store.ValidateOnWrite(f.node, f.fd.get(), offset, data); !s.ok()) return s;
  if (::pwrite(f.fd.get(), data.data(), data.size(), static_cast<off_t>(offset)) !=
      static_cast<ssize_t>(data.size())) {
    return ErrnoError(errno, "pwrite");
  }
  return absl::OkStatus();
}

TEST_F(StoreTest, NumericFileRefusesABadCompleteLineAtWrite) {
  auto store = Store::Open(root_ + "/s", nullptr);
  ASSERT_TRUE(store.ok()) << store.status();
  // `echo hello > label` opens write-only: the check reads through /proc.
  OpenFileInStore label = CreateIn(**store, "r", "label", O_WRONLY | O_TRUNC);
  const absl::Status s = CheckedWrite(**store, label, 0, "hello\n");
  EXPECT_EQ(ErrnoOf(s), EINVAL) << s;
  EXPECT_NE(s.message().find("staging/r/label"), absl::string_view::npos) << s;
  struct stat st;
  ASSERT_EQ(::fstat(label.fd.get(), &st), 0);
  EXPECT_EQ(st.st_size, 0) << "the refused bytes were written";

  // Good lines pass; a value split over writes is checked once complete.
  EXPECT_TRUE(CheckedWrite(**store, label, 0, "3\n").ok());
  EXPECT_TRUE(CheckedWrite(**store, label, 2, "4").ok());
  EXPECT_TRUE(CheckedWrite(**store, label, 3, "2\n").ok());
  EXPECT_EQ(ErrnoOf(CheckedWrite(**store, label, 5, "x")), 0) << "unterminated: left to close";
  EXPECT_EQ(ErrnoOf(CheckedWrite(**store, label, 5, "x\n")), EINVAL);
  // Overwriting a good line with a bad one in place is refused too.
  EXPECT_EQ(ErrnoOf(CheckedWrite(**store, label, 0, "z")), EINVAL);
  EXPECT_EQ(ReadFileToString("/proc/self/fd/" + std::to_string(label.fd.get())).value(),
            "3\n42\nx");
}

TEST_F(StoreTest, OtherFilesAreNotCheckedAtWrite) {
  auto store = Store::Open(root_ + "/s", nullptr);
  ASSERT_TRUE(store.ok()) << store.status();
  OpenFileInStore text = CreateIn(**store, "r", "name.txt", O_RDWR);
  EXPECT_TRUE(CheckedWrite(**store, text, 0, "hello\n").ok());
  OpenFileInStore image = CreateIn(**store, "r", "image.jpg", O_RDWR);
  EXPECT_TRUE(CheckedWrite(**store, image, 0, "not a number\n").ok());
  // A loose file at the top of staging/ is no feature (the pack names it).
  OpenFileInStore loose = CreateIn(**store, "", "label", O_RDWR);
  EXPECT_TRUE(CheckedWrite(**store, loose, 0, "hello\n").ok());
  // Hidden files and editor backups are skipped by the pack: not checked.
  OpenFileInStore backup = CreateIn(**store, "r", "label~", O_RDWR);
  EXPECT_TRUE(CheckedWrite(**store, backup, 0, "hello\n").ok());
}

TEST_F(StoreTest, ReadOnlyOpenCreatesAndLocksNothing) {
  const std::string dir = root_ + "/s";
  auto missing = Store::Open(dir, nullptr, {.read_only = true});
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_FALSE(fs::exists(dir)) << "a read-only open created the store";

  auto rw = Store::Open(dir, nullptr);
  ASSERT_TRUE(rw.ok()) << rw.status();
  // Any number of read-only openers beside the read-write owner.
  auto ro1 = Store::Open(dir, nullptr, {.read_only = true});
  auto ro2 = Store::Open(dir, nullptr, {.read_only = true});
  EXPECT_TRUE(ro1.ok()) << ro1.status();
  EXPECT_TRUE(ro2.ok()) << ro2.status();
  // A second read-write owner is still refused, saying what would work.
  auto rw2 = Store::Open(dir, nullptr);
  EXPECT_EQ(ErrnoOf(rw2.status()), EBUSY) << rw2.status();
  EXPECT_NE(rw2.status().message().find("-o ro"), absl::string_view::npos) << rw2.status();

  // A read-only store over a store nobody owns leaves no lock file.
  const std::string other = root_ + "/t";
  fs::create_directories(other + "/records/r");
  auto ro = Store::Open(other, nullptr, {.read_only = true});
  ASSERT_TRUE(ro.ok()) << ro.status();
  EXPECT_FALSE(fs::exists(other + "/lock"));
}

TEST_F(StoreTest, RemoveIfEmptyKeepsStagedBytes) {
  const std::string empty = root_ + "/empty";
  ASSERT_TRUE(Store::Open(empty, nullptr).ok());
  RemoveIfEmpty(empty);
  EXPECT_FALSE(fs::exists(empty));

  const std::string full = root_ + "/full";
  {
    auto store = Store::Open(full, nullptr);
    ASSERT_TRUE(store.ok());
    CreateIn(**store, "r", "label", O_RDWR);
  }
  RemoveIfEmpty(full);
  EXPECT_TRUE(fs::exists(full + "/records/r/label"));
}

}  // namespace
}  // namespace tfrecordfs::staging
