// Security: staging never writes outside its store, the mount is private by
// default (allow_other brings default_permissions), and sources are never
// written.
//
//   * the store's API refuses "..", ".", names with '/', absolute names and
//     NUL for every operation; symlinks planted in the store behind the
//     daemon's back are never followed (not shown, not opened, not listed
//     through, not packed);
//   * through a mount: symlink and link give EPERM, renames across the
//     staging boundary EROFS, "staging/.." lands outside staging (EROFS);
//   * a default mount has no allow_other and another user gets EACCES; with
//     -o allow_other the super options hold default_permissions, and another
//     user may read but not write;
//   * a full session (reads, cp -r into staging, new records, pack on
//     unmount) leaves every source file (size, mtime, ctime, bytes) and
//     every source directory listing unchanged, except for the new shards the
//     pack adds to the output directory.
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "generated_dataset.h"
#include "gtest/gtest.h"
#include "mount_harness.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/naming/feature_type.h"
#include "tfrecordfs/staging/layout.h"
#include "tfrecordfs/staging/record_folder.h"
#include "tfrecordfs/staging/store.h"

namespace tfrecordfs::mount_test {
namespace {

namespace fs = std::filesystem;

// Everything under `root` (recursive, symlinks not followed): rel path ->
// a description of type, size, mtime, ctime and content CRC.
std::map<std::string, std::string> Snapshot(const std::string& root) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string rel = fs::relative(e.path(), root).string();
    struct stat st;
    if (::lstat(e.path().c_str(), &st) != 0) {
      out[rel] = "lstat failed";
      continue;
    }
    std::string d =
        absl::StrCat("mode ", st.st_mode, " ctime ", st.st_ctim.tv_sec, ".", st.st_ctim.tv_nsec);
    if (S_ISREG(st.st_mode)) {
      auto bytes = ReadFileToString(e.path().string());
      absl::StrAppend(&d, " size ", st.st_size, " mtime ", st.st_mtim.tv_sec, ".",
                      st.st_mtim.tv_nsec, " crc ", bytes.ok() ? crc32c::Value(*bytes) : 0);
    }
    out[rel] = d;
  }
  return out;
}

std::set<std::string> Names(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

// The super options of the mount at `mnt` in /proc/self/mountinfo.
std::string SuperOptions(const std::string& mnt) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f.size() < 5 || f[4] != mnt) continue;
    for (size_t i = 5; i + 3 < f.size(); ++i) {
      if (f[i] == "-") return f[i + 3];
    }
  }
  return "";
}

// Runs `fn` in a child process as uid/gid 65534 (nobody); returns its exit
// code (fn's return value), or -1.
int AsNobody(const std::function<int()>& fn) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) _exit(99);
    _exit(fn());
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// ---- The store's API, without a mount ----

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.Subdir("store");
    outside_ = tmp_.Subdir("outside");
    WriteWholeFile(outside_ + "/secret", "SECRET");
    auto s = staging::Store::Open(dir_);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  TempDir tmp_;
  std::string dir_, outside_;
  std::unique_ptr<staging::Store> store_;
};

TEST_F(StoreTest, RefusesNamesThatLeaveTheDirectory) {
  const uint64_t root = store_->root();
  const auto before = Snapshot(tmp_.path());
  for (const std::string& bad :
       {std::string(".."), std::string("."), std::string(""), std::string("../escape"),
        std::string("a/b"), std::string("/etc/passwd"), outside_ + "/x", std::string("x\0y", 3),
        std::string(256, 'n')}) {
    SCOPED_TRACE(absl::CEscape(bad));
    EXPECT_FALSE(store_->Lookup(root, bad).ok());
    EXPECT_FALSE(store_->Mkdir(root, bad, 0755).ok());
    auto c = store_->Create(root, bad, 0644, O_WRONLY);
    EXPECT_FALSE(c.ok());
    if (c.ok()) ::close(c->second);
    EXPECT_FALSE(store_->Unlink(root, bad).ok());
    EXPECT_FALSE(store_->Rmdir(root, bad).ok());
  }
  ASSERT_TRUE(store_->Mkdir(root, "rec", 0755).ok());
  for (const char* bad : {"..", "../../x", "/tmp/x", "."}) {
    EXPECT_FALSE(store_->Rename(root, "rec", root, bad, 0, naming::NoFeatureTypes()).ok()) << bad;
    EXPECT_FALSE(store_->Rename(root, bad, root, "y", 0, naming::NoFeatureTypes()).ok()) << bad;
  }
  auto after = Snapshot(tmp_.path());
  after.erase(staging::RecordsDir("store") + "/rec");
  // The lock file's and directories' ctimes may change; compare the set of
  // paths: nothing appeared outside records/rec.
  std::set<std::string> b, a;
  for (const auto& [k, v] : before) b.insert(k);
  for (const auto& [k, v] : after) a.insert(k);
  EXPECT_EQ(a, b);
  EXPECT_EQ(ReadWholeFile(outside_ + "/secret"), "SECRET");
}

TEST_F(StoreTest, PlantedSymlinksAreNeverFollowed) {
  const uint64_t root = store_->root();
  const std::string records = store_->records_dir();
  ASSERT_EQ(::symlink((outside_ + "/secret").c_str(), (records + "/file-link").c_str()), 0);
  ASSERT_EQ(::symlink(outside_.c_str(), (records + "/dir-link").c_str()), 0);
  EXPECT_EQ(ErrnoOf(store_->Lookup(root, "file-link").status()), EPERM);
  EXPECT_EQ(ErrnoOf(store_->Lookup(root, "dir-link").status()), EPERM);
  // Through the store's root, nothing is created in the link's target.
  EXPECT_FALSE(store_->Mkdir(root, "dir-link", 0755).ok());
  auto c = store_->Create(root, "file-link", 0644, O_WRONLY | O_TRUNC);
  EXPECT_FALSE(c.ok());
  if (c.ok()) ::close(c->second);
  EXPECT_EQ(Names(outside_), std::set<std::string>{"secret"});
  EXPECT_EQ(ReadWholeFile(outside_ + "/secret"), "SECRET");

  // A record folder holding a symlink does not pack, even to the raw name.
  ASSERT_TRUE(store_->Mkdir(root, "rec", 0755).ok());
  ASSERT_EQ(::symlink((outside_ + "/secret").c_str(), (records + "/rec/record.bin").c_str()), 0);
  auto payload = staging::PayloadFromFolder(records + "/rec", naming::NoFeatureTypes());
  EXPECT_FALSE(payload.ok());
  EXPECT_TRUE(absl::StrContains(payload.status().message(), "symlink")) << payload.status();
}

// ---- Through a mount ----

class SecurityMountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TFRFS_SKIP_WITHOUT_FUSE();
    src_ = fs::canonical(tmp_.Subdir("src")).string();
    store_ = tmp_.Subdir("store");
    ds_ = WriteDataset(src_, 11);
    ASSERT_FALSE(HasFatalFailure());
  }
  // The pack writes into the first source directory, as it does by default
  // (the harness would otherwise point output_dir at its temp directory).
  void Start(std::vector<std::string> options = {}) {
    options.push_back("staging_dir=" + store_);
    options.push_back("output_dir=" + src_);
    std::string o;
    for (const auto& s : options) absl::StrAppend(&o, o.empty() ? "" : ",", s);
    ASSERT_EQ(mount_.Start({src_}, {"-o", o}), absl::OkStatus());
    // Let other users reach the mount point, so that what stops them is the
    // mount's own policy, not the private temp directory above it.
    ASSERT_EQ(::chmod(fs::path(mount_.mountpoint()).parent_path().c_str(), 0755), 0);
  }
  // The daemon exits 1 when a staged record could not be packed.
  void Stop(int want_exit = 0) {
    std::string err;
    EXPECT_EQ(mount_.Stop(&err), want_exit) << err << "\nstderr:\n" << mount_.Stderr();
  }
  std::string M(const std::string& rel) const { return mount_.path(rel); }

  TempDir tmp_;
  std::string src_, store_;
  GenDataset ds_;
  Mount mount_;
};

TEST_F(SecurityMountTest, StagingRefusesLinksAndEscapes) {
  Start();
  ASSERT_EQ(::mkdir(M("staging/rec").c_str(), 0755), 0);
  WriteWholeFile(M("staging/rec/label"), "1\n");
  EXPECT_NE(::symlink("/etc/passwd", M("staging/rec/link").c_str()), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::symlink("label", M("staging/rec/rel-link").c_str()), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::link(M("staging/rec/label").c_str(), M("staging/rec/hard").c_str()), 0);
  EXPECT_EQ(errno, EPERM);
  // "staging/.." is the mount root: read-only.
  EXPECT_NE(::mkdir(M("staging/../escape").c_str(), 0755), 0);
  EXPECT_EQ(errno, EROFS);
  EXPECT_LT(::open(M("staging/../escape.txt").c_str(), O_WRONLY | O_CREAT, 0644), 0);
  EXPECT_EQ(errno, EROFS);
  // Out of staging: EROFS (EXDEV would make mv copy, staging_moves_test.cc;
  // a record moves into staging in one step, record_edit_test.cc).
  EXPECT_NE(::rename(M("staging/rec").c_str(), M("rec").c_str()), 0);
  EXPECT_EQ(errno, EROFS);
  EXPECT_NE(::rename(M("staging/rec").c_str(), M(std::string(kShardOne) + "/x").c_str()), 0);
  EXPECT_EQ(errno, EROFS);
  // A symlink planted in the store is neither shown nor followed.
  ASSERT_EQ(::symlink((src_ + "/" + kShardOne).c_str(),
                      (staging::RecordsDir(store_) + "/rec/planted").c_str()),
            0);
  EXPECT_EQ(Names(M("staging/rec")), std::set<std::string>{"label"});
  EXPECT_LT(::open(M("staging/rec/planted").c_str(), O_RDONLY), 0);
  Stop(/*want_exit=*/1);
  EXPECT_NE(mount_.Stderr().find("record rec stays staged: planted: only regular files and "
                                 "folders can be staged (symlinks are refused)"),
            std::string::npos);
  // Nothing was created outside the store and the output directory.
  EXPECT_FALSE(fs::exists(src_ + "/escape"));
  EXPECT_FALSE(fs::exists(src_ + "/rec"));
  // The record holding the planted symlink stayed staged, unpacked.
  EXPECT_TRUE(fs::exists(staging::RecordsDir(store_) + "/rec/label"));
  for (const auto& n : Names(src_)) EXPECT_FALSE(absl::StartsWith(n, "staged-")) << n;
}

TEST_F(SecurityMountTest, DefaultMountIsPrivate) {
  Start();
  const std::string opts = SuperOptions(mount_.mountpoint());
  ASSERT_NE(opts, "") << "mount not in /proc/self/mountinfo";
  EXPECT_FALSE(absl::StrContains(opts, "allow_other")) << opts;
  const std::string file = M(std::string(kShardOne) + "/0");
  const std::string parent = fs::path(mount_.mountpoint()).parent_path().string();
  EXPECT_EQ(AsNobody([&] {
              struct stat st;
              return ::stat(parent.c_str(), &st) == 0 ? 0 : 1;
            }),
            0)
      << "the control failed: another user cannot reach the mount point's directory";
  EXPECT_EQ(AsNobody([&] {
              struct stat st;
              return ::stat(file.c_str(), &st) != 0 && errno == EACCES ? 0 : 1;
            }),
            0)
      << "another user could reach a private mount";
  Stop();
}

TEST_F(SecurityMountTest, AllowOtherImpliesDefaultPermissions) {
  Start({"allow_other"});
  const std::string opts = SuperOptions(mount_.mountpoint());
  EXPECT_TRUE(absl::StrContains(opts, "allow_other")) << opts;
  EXPECT_TRUE(absl::StrContains(opts, "default_permissions")) << opts;
  // Another user reads the read-only tree, but the kernel enforces the mode
  // bits of the staging area (0755, owned by the mounting user).
  std::string some_file;
  for (const auto& [rel, node] : ds_.Expected()) {
    if (!node.is_dir && !node.content.empty() && absl::StartsWith(rel, kShardTwelve)) {
      some_file = rel;
      break;
    }
  }
  ASSERT_NE(some_file, "");
  const std::string want = ds_.Expected().at(some_file).content;
  const std::string path = M(some_file);
  EXPECT_EQ(
      AsNobody([&] {
        const int fd = ::open(path.c_str(), O_RDONLY);
        if (fd < 0) return 1;
        std::string buf(want.size() + 1, '\0');
        const ssize_t n = ::read(fd, buf.data(), buf.size());
        ::close(fd);
        return n == static_cast<ssize_t>(want.size()) && buf.substr(0, want.size()) == want ? 0 : 2;
      }),
      0);
  const std::string staged = M("staging/by-nobody");
  EXPECT_EQ(AsNobody([&] { return ::mkdir(staged.c_str(), 0755) != 0 && errno == EACCES ? 0 : 1; }),
            0)
      << "another user could write into the staging area";
  Stop();
}

TEST_F(SecurityMountTest, FullSessionNeverWritesSources) {
  const auto before = Snapshot(src_);
  std::map<std::string, std::set<std::string>> listings;
  for (const auto& [rel, d] : before) {
    if (fs::is_directory(src_ + "/" + rel)) listings[rel] = Names(src_ + "/" + rel);
  }
  const std::set<std::string> top = Names(src_);

  Start();
  (void)WalkTree(mount_.mountpoint());  // read everything
  CommandResult cp =
      mount_test::Run({"cp", "-r", M(std::string(kShardTwelve) + "/03"), M("staging/copy-of-03")});
  EXPECT_EQ(cp.exit_code, 0) << cp.err;
  ASSERT_EQ(::mkdir(M("staging/new").c_str(), 0755), 0);
  WriteWholeFile(M("staging/new/label"), "7\n");
  WriteWholeFile(M("staging/new/caption.txt"), "a new record\n");
  Stop();  // packs on unmount into the first source directory

  const auto after = Snapshot(src_);
  for (const auto& [rel, d] : before) {
    auto it = after.find(rel);
    ASSERT_NE(it, after.end()) << rel << " disappeared";
    if (rel.find('/') == std::string::npos && fs::is_directory(src_ + "/" + rel)) {
      EXPECT_EQ(Names(src_ + "/" + rel), listings[rel]) << rel;
    } else if (!fs::is_directory(src_ + "/" + rel)) {
      EXPECT_EQ(it->second, d) << rel << " changed";
    } else {
      EXPECT_EQ(Names(src_ + "/" + rel), listings[rel]) << rel;
      EXPECT_EQ(it->second, d) << "source directory " << rel << " changed";
    }
  }
  // The only new entries: the pack's complete shards, at the top.
  std::vector<std::string> added;
  for (const auto& n : Names(src_)) {
    if (!top.count(n)) added.push_back(n);
  }
  ASSERT_EQ(added.size(), 1u) << "expected one new shard";
  EXPECT_TRUE(absl::StartsWith(added[0], "staged-") && absl::EndsWith(added[0], ".tfrecord"))
      << added[0];
  for (const auto& [rel, d] : after) {
    if (!before.count(rel)) {
      EXPECT_EQ(rel, added[0]) << "unexpected new path in the sources";
    }
  }
}

}  // namespace
}  // namespace tfrecordfs::mount_test
