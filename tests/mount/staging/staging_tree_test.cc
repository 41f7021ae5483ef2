// MOUNT/staging/ through a real mount: an ordinary writable tree (mkdir,
// create, write, truncate, rename, unlink, rmdir, chmod, utimens), links
// refused with EPERM, the rest of the mount read-only, `-o staging=NAME` and
// its clash with a source entry, and the bytes living in staging_dir on
// disk: a daemon killed with SIGKILL (even in the middle of writing a file)
// loses nothing, the next mount shows the same staging contents.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "gtest/gtest.h"
#include "staging_util.h"

namespace tfrecordfs::mount_test::staging_test {
namespace {

class StagingTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TFRFS_SKIP_WITHOUT_FUSE();
    test::WriteShard(
        s_.src + "/base.tfrecord",
        {ExamplePayload({Int64Feature("label", {1}), FloatFeature("scores", {0.5f})}),
         ExamplePayload({Int64Feature("label", {2}), FloatFeature("scores", {1.5f})})});
  }

  MountConfig Config(const std::string& prefix, std::vector<std::string> extra = {}) const {
    MountConfig c;
    c.sources = {s_.src};
    c.mountpoint = s_.mnt;
    c.options = PackOptions(s_, prefix);
    c.options.insert(c.options.end(), extra.begin(), extra.end());
    c.log_dir = s_.logs;
    return c;
  }

  std::string M(const std::string& rel) const { return s_.mnt + "/" + rel; }
  std::string Backing(const std::string& rel) const { return s_.records() + "/" + rel; }

  Scratch s_;
};

int Errno(int rc) { return rc == 0 ? 0 : errno; }

struct stat Stat(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path << ": " << std::strerror(errno);
  return st;
}

TEST_F(StagingTreeTest, OrdinaryWritableTree) {
  Mount d(Config("tree"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  const std::string st = M("staging");
  ASSERT_TRUE(IsDir(st));
  EXPECT_EQ(ListDir(st), std::vector<std::string>{});

  // mkdir, create + write, read back through the mount and on disk.
  ASSERT_EQ(Errno(::mkdir((st + "/rec").c_str(), 0755)), 0) << std::strerror(errno);
  ASSERT_EQ(Errno(::mkdir((st + "/rec/sub").c_str(), 0700)), 0);
  WriteWholeFile(st + "/rec/notes.txt", "first\nsecond\n");
  EXPECT_EQ(ReadWholeFile(st + "/rec/notes.txt"), "first\nsecond\n");
  EXPECT_EQ(ReadWholeFile(Backing("rec/notes.txt")), "first\nsecond\n");
  EXPECT_EQ(Stat(st + "/rec/notes.txt").st_size, 13);
  EXPECT_TRUE(S_ISDIR(Stat(st + "/rec/sub").st_mode));
  EXPECT_EQ(Stat(st + "/rec/sub").st_mode & 07777, 0700u);

  // Writes at an offset (pwrite) and appends.
  {
    const int fd = ::open((st + "/rec/data.bin").c_str(), O_RDWR | O_CREAT | O_EXCL, 0644);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    EXPECT_EQ(::pwrite(fd, "abcdef", 6, 0), 6);
    EXPECT_EQ(::pwrite(fd, "XY", 2, 2), 2);
    EXPECT_EQ(::pwrite(fd, "!", 1, 10), 1);  // a hole
    char buf[16] = {};
    EXPECT_EQ(::pread(fd, buf, sizeof buf, 0), 11);
    EXPECT_EQ(std::string(buf, 11), std::string("abXYef\0\0\0\0!", 11));
    EXPECT_EQ(::close(fd), 0);
    // O_EXCL on an existing name.
    EXPECT_EQ(::open((st + "/rec/data.bin").c_str(), O_RDWR | O_CREAT | O_EXCL, 0644), -1);
    EXPECT_EQ(errno, EEXIST);
  }
  {
    const int fd = ::open((st + "/rec/notes.txt").c_str(), O_WRONLY | O_APPEND);
    ASSERT_GE(fd, 0);
    EXPECT_EQ(::write(fd, "third\n", 6), 6);
    EXPECT_EQ(::close(fd), 0);
    EXPECT_EQ(ReadWholeFile(st + "/rec/notes.txt"), "first\nsecond\nthird\n");
  }

  // truncate by path and through an open descriptor, shrink and grow.
  EXPECT_EQ(Errno(::truncate((st + "/rec/notes.txt").c_str(), 6)), 0);
  EXPECT_EQ(ReadWholeFile(st + "/rec/notes.txt"), "first\n");
  {
    const int fd = ::open((st + "/rec/data.bin").c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    EXPECT_EQ(::ftruncate(fd, 3), 0);
    EXPECT_EQ(::ftruncate(fd, 5), 0);
    EXPECT_EQ(::close(fd), 0);
  }
  EXPECT_EQ(ReadWholeFile(st + "/rec/data.bin"), std::string("abX\0\0", 5));
  EXPECT_EQ(Stat(Backing("rec/data.bin")).st_size, 5);
  // O_TRUNC on open.
  WriteWholeFile(st + "/rec/data.bin", "new");
  EXPECT_EQ(ReadWholeFile(st + "/rec/data.bin"), "new");

  // rename: within a folder, across folders, a folder itself, over a file.
  EXPECT_EQ(Errno(::rename((st + "/rec/data.bin").c_str(), (st + "/rec/blob.bin").c_str())), 0);
  EXPECT_FALSE(Exists(st + "/rec/data.bin"));
  EXPECT_EQ(ReadWholeFile(st + "/rec/blob.bin"), "new");
  EXPECT_EQ(Errno(::rename((st + "/rec/blob.bin").c_str(), (st + "/rec/sub/blob.bin").c_str())), 0);
  EXPECT_EQ(ReadWholeFile(Backing("rec/sub/blob.bin")), "new");
  WriteWholeFile(st + "/rec/other.txt", "other\n");
  EXPECT_EQ(Errno(::rename((st + "/rec/other.txt").c_str(), (st + "/rec/notes.txt").c_str())), 0);
  EXPECT_EQ(ReadWholeFile(st + "/rec/notes.txt"), "other\n");
  EXPECT_EQ(Errno(::mkdir((st + "/tmpdir").c_str(), 0755)), 0);
  EXPECT_EQ(Errno(::rename((st + "/tmpdir").c_str(), (st + "/rec/moved").c_str())), 0);
  EXPECT_TRUE(IsDir(st + "/rec/moved"));
  EXPECT_TRUE(IsDir(Backing("rec/moved")));
  EXPECT_FALSE(Exists(Backing("tmpdir")));

  // chmod and utimens.
  EXPECT_EQ(Errno(::chmod((st + "/rec/notes.txt").c_str(), 0600)), 0);
  EXPECT_EQ(Stat(st + "/rec/notes.txt").st_mode & 07777, 0600u);
  EXPECT_EQ(Stat(Backing("rec/notes.txt")).st_mode & 07777, 0600u);
  {
    struct timespec ts[2];
    ts[0].tv_sec = 1000000000;
    ts[0].tv_nsec = 5;
    ts[1].tv_sec = 1234567890;
    ts[1].tv_nsec = 123456789;
    EXPECT_EQ(Errno(::utimensat(AT_FDCWD, (st + "/rec/notes.txt").c_str(), ts, 0)), 0);
    const struct stat a = Stat(st + "/rec/notes.txt");
    EXPECT_EQ(a.st_mtim.tv_sec, 1234567890);
    EXPECT_EQ(a.st_mtim.tv_nsec, 123456789);
    EXPECT_EQ(a.st_atim.tv_sec, 1000000000);
    EXPECT_EQ(Stat(Backing("rec/notes.txt")).st_mtim.tv_sec, 1234567890);
    // touch (UTIME_NOW) moves mtime forward again.
    EXPECT_EQ(Errno(::utimensat(AT_FDCWD, (st + "/rec/notes.txt").c_str(), nullptr, 0)), 0);
    EXPECT_GT(Stat(st + "/rec/notes.txt").st_mtim.tv_sec, 1234567890);
  }

  // Symlinks and hard links: EPERM, nothing created.
  EXPECT_EQ(::symlink("notes.txt", (st + "/rec/link").c_str()), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(::link((st + "/rec/notes.txt").c_str(), (st + "/rec/hard").c_str()), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(::mkfifo((st + "/rec/fifo").c_str(), 0644), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_FALSE(Exists(Backing("rec/link")));
  EXPECT_FALSE(Exists(Backing("rec/hard")));
  EXPECT_FALSE(Exists(Backing("rec/fifo")));
  // The same through the shell tools.
  EXPECT_NE(Shell("ln -s x " + ShellQuote(st + "/rec/l2")).exit_code, 0);
  EXPECT_NE(
      Shell("ln " + ShellQuote(st + "/rec/notes.txt") + " " + ShellQuote(st + "/rec/h2")).exit_code,
      0);

  // Names the store refuses.
  EXPECT_EQ(::mkdir((st + "/" + std::string(256, 'n')).c_str(), 0755), -1);
  EXPECT_EQ(errno, ENAMETOOLONG);

  // unlink / rmdir, including a non-empty folder (ENOTEMPTY) and rm -r.
  EXPECT_EQ(::rmdir((st + "/rec/sub").c_str()), -1);
  EXPECT_EQ(errno, ENOTEMPTY);
  EXPECT_EQ(Errno(::unlink((st + "/rec/sub/blob.bin").c_str())), 0);
  EXPECT_EQ(Errno(::rmdir((st + "/rec/sub").c_str())), 0);
  EXPECT_FALSE(Exists(Backing("rec/sub")));
  EXPECT_EQ(::unlink((st + "/rec/missing").c_str()), -1);
  EXPECT_EQ(errno, ENOENT);
  ASSERT_EQ(Shell("mkdir -p " + ShellQuote(st + "/gone/a/b") + " && echo 1 > " +
                  ShellQuote(st + "/gone/a/b/c") + " && rm -r " + ShellQuote(st + "/gone"))
                .exit_code,
            0);
  EXPECT_FALSE(Exists(Backing("gone")));

  // What is left is one valid record folder.
  EXPECT_EQ(ListDir(st), std::vector<std::string>{"rec"});
  EXPECT_EQ(ListDir(st + "/rec"), (std::vector<std::string>{"moved", "notes.txt"}));
  EXPECT_EQ(ListDir(Backing("rec")), (std::vector<std::string>{"moved", "notes.txt"}));

  int status = 0;
  std::string err;
  ASSERT_TRUE(d.Unmount(&status, &err)) << err;
  EXPECT_EQ(ExitCodeOfWait(status), 0) << DescribeWait(status) << "\n" << d.Stderr();
  const auto shards = ReadPackedShards(s_.out, "tree");
  ASSERT_EQ(shards.size(), 1u);
  ASSERT_EQ(shards[0].payloads.size(), 1u);
  const DecodedRecord r = Decode(shards[0].payloads[0]);
  ASSERT_TRUE(r.is_example);
  ASSERT_EQ(r.features.size(), 1u);  // the empty folder `moved` adds nothing
  EXPECT_TRUE(SameFeature(r.features.begin()->second, BytesFeature("notes", {"other"})))
      << Describe(r.features.begin()->second);
  EXPECT_EQ(ListDir(s_.records()), std::vector<std::string>{});
}

TEST_F(StagingTreeTest, OutsideStagingAndRecordsIsReadOnly) {
  Mount d(Config("ro"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  EXPECT_EQ(::mkdir(M("newdir").c_str(), 0755), -1);
  EXPECT_EQ(errno, EROFS);
  // Records take edits (record_edit_test.cc); new folders in a shard
  // folder are records added to it.
  ASSERT_EQ(::mkdir(M("base.tfrecord/added").c_str(), 0755), 0) << std::strerror(errno);
  ASSERT_EQ(::rmdir(M("base.tfrecord/added").c_str()), 0) << std::strerror(errno);
  // Moving in or out of staging is refused (`mv` then copies nothing:
  // staging_moves_test.cc); records come in by `cp -r`.
  ASSERT_EQ(::mkdir(M("staging/r").c_str(), 0755), 0);
  EXPECT_EQ(::rename(M("staging/r").c_str(), M("r").c_str()), -1);
  EXPECT_EQ(errno, EROFS) << std::strerror(errno);
  EXPECT_EQ(::rmdir(M("staging/r").c_str()), 0);
  int status = 0;
  std::string err;
  ASSERT_TRUE(d.Unmount(&status, &err)) << err;
  EXPECT_EQ(ExitCodeOfWait(status), 0) << DescribeWait(status) << "\n" << d.Stderr();
  EXPECT_EQ(ReadPackedShards(s_.out, "ro").size(), 0u);  // nothing staged, nothing written
}

TEST_F(StagingTreeTest, StagingNameOptionAndClash) {
  // A source entry called `staging` clashes with the default name.
  std::filesystem::create_directories(s_.src + "/staging/inner");
  WriteWholeFile(s_.src + "/staging/inner/file.txt", "source data\n");
  {
    Mount d(Config("x"));
    EXPECT_EQ(d.RunExpectingFailure(), 1) << d.Stderr();
    EXPECT_NE(d.Stderr().find("clashes"), std::string::npos) << d.Stderr();
    EXPECT_NE(d.Stderr().find("staging=NAME"), std::string::npos) << d.Stderr();
    EXPECT_FALSE(IsMounted(s_.mnt));
  }
  // A clash with a shard shown at the root too.
  {
    Mount d(Config("x", {"staging=base.tfrecord"}));
    EXPECT_EQ(d.RunExpectingFailure(), 1) << d.Stderr();
    EXPECT_NE(d.Stderr().find("clashes"), std::string::npos) << d.Stderr();
  }
  // Not a plain name: a usage error.
  {
    Mount d(Config("x", {"staging=a/b"}));
    EXPECT_EQ(d.RunExpectingFailure(), 2) << d.Stderr();
    Mount e(Config("x", {"staging=.."}));
    EXPECT_EQ(e.RunExpectingFailure(), 2) << e.Stderr();
  }
  // Renamed: `incoming` is the writable folder, the source's `staging` is
  // an ordinary read-only directory.
  Mount d(Config("named", {"staging=incoming"}));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  EXPECT_EQ(ListDir(s_.mnt), (std::vector<std::string>{"base.tfrecord", "incoming", "staging"}));
  EXPECT_EQ(ReadWholeFile(M("staging/inner/file.txt")), "source data\n");
  EXPECT_EQ(::mkdir(M("staging/x").c_str(), 0755), -1);
  EXPECT_EQ(errno, EROFS);
  ASSERT_EQ(Shell("mkdir " + ShellQuote(M("incoming/r")) + " && echo 9 > " +
                  ShellQuote(M("incoming/r/label")))
                .exit_code,
            0);
  EXPECT_EQ(ReadWholeFile(Backing("r/label")), "9\n");
  int status = 0;
  CommandResult u = d.TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  EXPECT_EQ(ExitCodeOfWait(status), 0) << d.Stderr();
  const auto shards = ReadPackedShards(s_.out, "named");
  ASSERT_EQ(shards.size(), 1u);
  ASSERT_EQ(shards[0].payloads.size(), 1u);
  EXPECT_EQ(SingleInt(Decode(shards[0].payloads[0]), "label"), 9);
}

TEST_F(StagingTreeTest, CopiesThatPreserveOwnershipAndModes) {
  Mount d(Config("keep"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  // cp -a / cp -p chown to the owner they read (the mounting user): a no-op
  // that must succeed, or cp fails the copy.
  CommandResult cp =
      Shell("cp -a " + ShellQuote(M("base.tfrecord/0")) + " " + ShellQuote(M("staging/a")) +
            " && cp -rp " + ShellQuote(M("base.tfrecord/1")) + " " + ShellQuote(M("staging/b")));
  EXPECT_EQ(cp.exit_code, 0) << cp.err;
  // The modes came along, with the owner's write (and search) bits: staged
  // files are the user's to edit (issue 21, item 13).
  EXPECT_EQ(Stat(M("staging/a")).st_mode & 07777, 0755u);
  EXPECT_EQ(Stat(M("staging/a/label")).st_mode & 07777, 0644u);
  EXPECT_EQ(Stat(M("staging/a/label")).st_mtim.tv_sec,
            Stat(M("base.tfrecord/0/label")).st_mtim.tv_sec);
  EXPECT_EQ(Errno(::chown(M("staging/b").c_str(), ::getuid(), ::getgid())), 0);
  EXPECT_EQ(::chown(M("staging/b").c_str(), ::getuid() + 1, ::getgid()), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(::chown(M("staging/b").c_str(), ::getuid(), ::getgid() + 1), -1);
  EXPECT_EQ(errno, EPERM);
  // Outside staging nothing changes owner either.
  EXPECT_EQ(::chown(M("base.tfrecord/0/label").c_str(), ::getuid(), ::getgid()), -1);
  EXPECT_EQ(errno, EROFS);

  int status = 0;
  CommandResult u = d.TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  const auto payloads = AllPayloads(ReadPackedShards(s_.out, "keep"));
  ASSERT_EQ(payloads.size(), 2u);
  ExpectSameRecord(ExamplePayload({Int64Feature("label", {1}), FloatFeature("scores", {0.5f})}),
                   payloads[0], "a");
  ExpectSameRecord(ExamplePayload({Int64Feature("label", {2}), FloatFeature("scores", {1.5f})}),
                   payloads[1], "b");
  // Read-only copies are removed from staging after the pack all the same.
  EXPECT_EQ(ListDir(s_.records()), std::vector<std::string>{});
}

TEST_F(StagingTreeTest, OneMountPerStagingStore) {
  Mount d(Config("lock"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  TempDir other;
  MountConfig c = Config("lock2");
  c.mountpoint = other.Subdir("mnt");
  Mount e(c);
  EXPECT_EQ(e.RunExpectingFailure(), 1);
  EXPECT_NE(e.Stderr().find("in use by another read-write tfrecordfs mount"), std::string::npos)
      << e.Stderr();
  EXPECT_FALSE(IsMounted(c.mountpoint));
  // Nothing staged: the unmount reports an empty pack and succeeds.
  int status = 0;
  CommandResult u = d.TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  EXPECT_EQ(u.out, "result: ok\nnothing packed: no valid staged record\n");
}

TEST_F(StagingTreeTest, BusyMountIsNotUnmounted) {
  Mount d(Config("busy"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  ASSERT_EQ(::mkdir(M("staging/r").c_str(), 0755), 0);
  const int fd = ::open(M("staging/r/label").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "1\n", 2), 2);
  CommandResult u = mount_test::Run({BinaryPath(), "unmount", s_.mnt});
  EXPECT_EQ(u.exit_code, 1) << u.out << u.err;
  EXPECT_NE(u.err.find("cannot unmount"), std::string::npos) << u.err;
  EXPECT_TRUE(IsMounted(s_.mnt, "fuse.tfrecordfs"));
  ASSERT_EQ(::write(fd, "2\n", 2), 2);  // still served
  EXPECT_EQ(::close(fd), 0);
  int status = 0;
  u = d.TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  const auto payloads = AllPayloads(ReadPackedShards(s_.out, "busy"));
  ASSERT_EQ(payloads.size(), 1u);
  ExpectSameRecord(ExamplePayload({Int64Feature("label", {1, 2})}), payloads[0], "r");
}

TEST_F(StagingTreeTest, LargeFolderListsAndRemovesCompletely) {
  Mount d(Config("large"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  constexpr int kFiles = 1500;  // many readdir batches
  ASSERT_EQ(::mkdir(M("staging/big").c_str(), 0755), 0);
  std::vector<std::string> names;
  for (int i = 0; i < kFiles; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "file-%04d-with-a-longer-name.bin", i);
    names.push_back(name);
    const int fd = ::open(M("staging/big/" + names.back()).c_str(), O_WRONLY | O_CREAT, 0644);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    ::close(fd);
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(ListDir(M("staging/big")), names);
  CommandResult ls = Shell("ls -l " + ShellQuote(M("staging/big")) + " | grep -c '^-'");
  EXPECT_EQ(ls.out, std::to_string(kFiles) + "\n");
  // rm -r lists and unlinks at the same time: nothing may be skipped.
  CommandResult rm = Shell("rm -r " + ShellQuote(M("staging/big")));
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_FALSE(Exists(M("staging/big")));
  EXPECT_EQ(ListDir(s_.records()), std::vector<std::string>{});
  int status = 0;
  std::string err;
  ASSERT_TRUE(d.Unmount(&status, &err)) << err;
  EXPECT_EQ(ExitCodeOfWait(status), 0);
}

TEST_F(StagingTreeTest, StagedBytesSurviveSigkill) {
  auto d = std::make_unique<Mount>(Config("k1"));
  ASSERT_EQ(d->Start(), absl::OkStatus());
  ASSERT_EQ(Shell("cd " + ShellQuote(M("staging")) +
                  " && mkdir a b && echo 5 > a/label && printf 'x\\ny\\n' > a/tags.txt"
                  " && mkdir -p b/image && printf '\\377\\330\\377jpeg' > b/image/encoded.jpg"
                  " && printf '0.25\\n' > b/scores")
                .exit_code,
            0);
  // On disk already, while the mount is up.
  EXPECT_EQ(ReadWholeFile(Backing("a/label")), "5\n");
  EXPECT_EQ(ReadWholeFile(Backing("b/image/encoded.jpg")), "\xff\xd8\xffjpeg");
  const auto before = WalkTree(M("staging"));
  ASSERT_EQ(before.size(), 7u);

  d->KillHard();
  EXPECT_FALSE(IsMounted(s_.mnt));
  EXPECT_EQ(ReadWholeFile(Backing("a/tags.txt")), "x\ny\n");

  // The next mount shows the same staging contents (names, types, bytes).
  d = std::make_unique<Mount>(Config("k2"));
  ASSERT_EQ(d->Start(), absl::OkStatus());
  const auto after = WalkTree(M("staging"));
  ASSERT_EQ(after.size(), before.size());
  for (const auto& [rel, node] : before) {
    auto it = after.find(rel);
    ASSERT_NE(it, after.end()) << rel << " lost";
    EXPECT_EQ(it->second.mode, node.mode) << rel;
    EXPECT_EQ(it->second.content, node.content) << rel;
    EXPECT_EQ(it->second.size, node.size) << rel;
  }
  int status = 0;
  CommandResult u = d->TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  const auto payloads = AllPayloads(ReadPackedShards(s_.out, "k2"));
  ASSERT_EQ(payloads.size(), 2u);
  ExpectSameRecord(ExamplePayload({Int64Feature("label", {5}), BytesFeature("tags", {"x", "y"})}),
                   payloads[0], "a");
  ExpectSameRecord(ExamplePayload({BytesFeature("image/encoded", {"\xff\xd8\xffjpeg"}),
                                   FloatFeature("scores", {0.25f})}),
                   payloads[1], "b");
  EXPECT_EQ(ReadPackedShards(s_.out, "k1").size(), 0u);
}

TEST_F(StagingTreeTest, SigkillWhileAFileIsBeingWritten) {
  auto d = std::make_unique<Mount>(Config("w1"));
  ASSERT_EQ(d->Start(), absl::OkStatus());
  ASSERT_EQ(::mkdir(M("staging/rec").c_str(), 0755), 0);
  const int fd = ::open(M("staging/rec/label").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(::write(fd, "1\n2\n", 4), 4);  // each write() has reached the daemon
  const int fd2 = ::open(M("staging/rec/big.bin").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd2, 0) << std::strerror(errno);
  const std::string chunk(200000, 'q');
  ASSERT_EQ(::write(fd2, chunk.data(), chunk.size()), static_cast<ssize_t>(chunk.size()));

  d->KillHard();                         // the files are still open in this process
  EXPECT_EQ(::write(fd, "3\n", 2), -1);  // the connection is gone
  ::close(fd);
  ::close(fd2);
  EXPECT_EQ(ReadWholeFile(Backing("rec/label")), "1\n2\n");

  d = std::make_unique<Mount>(Config("w2"));
  ASSERT_EQ(d->Start(), absl::OkStatus());
  EXPECT_EQ(ReadWholeFile(M("staging/rec/label")), "1\n2\n");
  EXPECT_EQ(ReadWholeFile(M("staging/rec/big.bin")), chunk);
  // The half-written record is finished after the restart and packed.
  WriteWholeFile(M("staging/rec/label"), "1\n2\n3\n");
  int status = 0;
  CommandResult u = d->TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  const auto payloads = AllPayloads(ReadPackedShards(s_.out, "w2"));
  ASSERT_EQ(payloads.size(), 1u);
  ExpectSameRecord(ExamplePayload({Int64Feature("label", {1, 2, 3}), BytesFeature("big", {chunk})}),
                   payloads[0], "rec");
}

}  // namespace
}  // namespace tfrecordfs::mount_test::staging_test
