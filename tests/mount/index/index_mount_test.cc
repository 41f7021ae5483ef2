// Persistent shard indexes through real mounts: the second mount of the same
// sources loads every index from the cache and shows the same tree; a
// `tfrecordfs index --index-dir` directory serves -o index_dir; a shard that
// grew or was rewritten between mounts is shown as it is now.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "generated_dataset.h"
#include "gtest/gtest.h"
#include "mount_harness.h"
#include "testing/index_files.h"
#include "tfrecordfs/index/index_file.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/record/writer.h"

namespace tfrecordfs::mount_test {
namespace {

constexpr uint64_t kSeed = 7101;

size_t CountIndexFiles(const std::string& dir) {
  size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().extension() == ".tfri") ++n;
  }
  return n;
}

// Every node's type, size, inode number and (for files) bytes.
std::map<std::string, WalkedNode> Listing(const Mount& m) {
  auto walked = WalkTree(m.mountpoint());
  RemoveEmptyStaging(&walked);
  return walked;
}

void ExpectSameListing(const std::map<std::string, WalkedNode>& a,
                       const std::map<std::string, WalkedNode>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [path, node] : a) {
    auto it = b.find(path);
    ASSERT_NE(it, b.end()) << path;
    EXPECT_EQ(node.mode, it->second.mode) << path;
    EXPECT_EQ(node.size, it->second.size) << path;
    EXPECT_EQ(node.ino, it->second.ino) << path;
    EXPECT_EQ(node.error, it->second.error) << path;
    EXPECT_TRUE(node.content == it->second.content) << path;
  }
}

size_t Children(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    (void)e;
    ++n;
  }
  return n;
}

void AppendRecords(const std::string& path, int count) {
  std::string bytes;
  for (int i = 0; i < count; ++i) record::AppendFramed(&bytes, "appended " + std::to_string(i));
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(static_cast<ssize_t>(bytes.size()), ::write(fd, bytes.data(), bytes.size()));
  ::close(fd);
}

class IndexMountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TFRFS_SKIP_WITHOUT_FUSE();
    src_ = tmp_.Subdir("src");
    cache_home_ = tmp_.Subdir("xdg-cache");
    ds_ = WriteDataset(src_, kSeed);
    // The daemons inherit this: their index cache stays inside tmp_.
    const char* old = std::getenv("XDG_CACHE_HOME");
    if (old != nullptr) saved_cache_home_ = old;
    ::setenv("XDG_CACHE_HOME", cache_home_.c_str(), 1);
  }
  void TearDown() override {
    if (saved_cache_home_.empty()) {
      ::unsetenv("XDG_CACHE_HOME");
    } else {
      ::setenv("XDG_CACHE_HOME", saved_cache_home_.c_str(), 1);
    }
  }

  std::string CacheDir() const { return cache_home_ + "/tfrecordfs/index"; }

  // `tfrecordfs index --index-dir DIR` of src_ into tmp_/shared: DIR, and
  // in *out what the command printed. Fails the test when it fails.
  std::string IndexIntoShared(CommandResult* out = nullptr) {
    const std::string shared = tmp_.path() + "/shared";
    CommandResult r = RunCommand({BinaryPath(), "index", "--index-dir", shared, src_});
    EXPECT_EQ(0, r.exit_code) << r.out << r.err;
    if (out != nullptr) *out = std::move(r);
    return shared;
  }

  void StopOk(Mount* m) {
    std::string err;
    EXPECT_EQ(0, m->Stop(&err)) << err;
  }

  // Mounts src_ with -o index_dir=`index_dir` (verbose) and expects the
  // listing a mount without indexes shows; *log gets that daemon's stderr.
  void ExpectIndexDirListsAsWithout(const std::string& index_dir, std::string* log) {
    std::map<std::string, WalkedNode> plain_listing;
    {
      Mount plain;
      ASSERT_EQ(absl::OkStatus(), plain.Start({src_}, {"-o", "noindexcache"}));
      plain_listing = Listing(plain);
      StopOk(&plain);
    }
    Mount m;
    ASSERT_EQ(absl::OkStatus(),
              m.Start({src_}, {"-o", "index_dir=" + index_dir + ",noindexcache,verbose"}));
    ExpectSameListing(plain_listing, Listing(m));
    StopOk(&m);
    *log = m.Stderr();
  }

  TempDir tmp_;
  std::string src_, cache_home_, saved_cache_home_;
  GenDataset ds_;
};

TEST_F(IndexMountTest, SecondMountLoadsEveryIndexFromTheCache) {
  std::map<std::string, WalkedNode> first;
  {
    Mount m;
    ASSERT_EQ(absl::OkStatus(), m.Start({src_}, {"-o", "verbose"}));
    first = Listing(m);
    StopOk(&m);
    EXPECT_NE(m.Stderr().find(" walked"), std::string::npos) << m.Stderr();
    EXPECT_EQ(m.Stderr().find("from the cache"), std::string::npos) << m.Stderr();
  }
  const size_t files = CountIndexFiles(CacheDir());
  EXPECT_GE(files, ds_.shards.size());
  {
    Mount m;
    ASSERT_EQ(absl::OkStatus(), m.Start({src_}, {"-o", "verbose"}));
    ExpectSameListing(first, Listing(m));
    StopOk(&m);
    const std::string log = m.Stderr();
    EXPECT_NE(log.find("index loaded from the cache"), std::string::npos) << log;
    EXPECT_NE(log.find(std::to_string(files) + " from the cache"), std::string::npos) << log;
    EXPECT_EQ(log.find(" walked"), std::string::npos) << log;
  }
  EXPECT_EQ(files, CountIndexFiles(CacheDir()));
}

TEST_F(IndexMountTest, NoIndexCacheNeitherReadsNorWrites) {
  Mount m;
  ASSERT_EQ(absl::OkStatus(), m.Start({src_}, {"-o", "noindexcache,verbose"}));
  StopOk(&m);
  EXPECT_EQ(0u, CountIndexFiles(cache_home_));
  EXPECT_NE(m.Stderr().find(" walked"), std::string::npos) << m.Stderr();
}

TEST_F(IndexMountTest, UnwritableCacheStillMounts) {
  WriteWholeFile(tmp_.path() + "/not-a-dir", "x");
  ::setenv("XDG_CACHE_HOME", (tmp_.path() + "/not-a-dir").c_str(), 1);
  Mount m;
  ASSERT_EQ(absl::OkStatus(), m.Start({src_}));
  const auto listing = Listing(m);
  StopOk(&m);
  EXPECT_NE(m.Stderr().find("cannot write the index cache"), std::string::npos) << m.Stderr();
  Mount plain;
  ASSERT_EQ(absl::OkStatus(), plain.Start({src_}, {"-o", "noindexcache"}));
  ExpectSameListing(Listing(plain), listing);
  StopOk(&plain);
}

TEST_F(IndexMountTest, IndexCommandFeedsIndexDir) {
  CommandResult r;
  const std::string shared = IndexIntoShared(&r);
  ASSERT_EQ(0, r.exit_code);
  EXPECT_NE(r.out.find("indexed "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" walked"), std::string::npos) << r.out;
  // The layout mirrors the mount.
  EXPECT_TRUE(std::filesystem::exists(shared + "/" + kShardBig + ".tfri"));
  EXPECT_TRUE(std::filesystem::exists(shared + "/" + kShardNested + ".tfri"));
  EXPECT_EQ(0u, CountIndexFiles(cache_home_));  // the per-user cache is left alone

  // Run again: nothing to walk.
  r = RunCommand({BinaryPath(), "index", "--index-dir", shared, src_});
  ASSERT_EQ(0, r.exit_code) << r.err;
  EXPECT_NE(r.out.find(" 0 walked"), std::string::npos) << r.out;

  std::string log;
  ASSERT_NO_FATAL_FAILURE(ExpectIndexDirListsAsWithout(shared, &log));
  EXPECT_NE(log.find("from index_dir"), std::string::npos) << log;
  EXPECT_EQ(log.find(" walked"), std::string::npos) << log;
}

// Issue 15, items 2 and 3: -o index_dir may be storage other users write.
// In it: a FIFO named like an index (opening it blocked the mount forever),
// a valid index grown into a 40 GB sparse file (std::bad_alloc), and an
// index whose first offset was dropped with its CRC recomputed (every
// record shifted). Each shard is walked instead and the mount shows exactly
// what a mount without indexes shows.
TEST_F(IndexMountTest, HostileIndexDirIsWalkedPast) {
  const std::string shared = IndexIntoShared();
  ASSERT_FALSE(HasFailure());
  const std::string fifo = shared + "/" + kShardBig + ".tfri";
  const std::string sparse = shared + "/" + kShardOne + ".tfri";
  const std::string poisoned = shared + "/" + kShardNested + ".tfri";
  ASSERT_TRUE(std::filesystem::exists(poisoned));
  ASSERT_EQ(0, ::unlink(fifo.c_str()));
  ASSERT_EQ(0, ::mkfifo(fifo.c_str(), 0644));
  ASSERT_EQ(0, ::truncate(sparse.c_str(), off_t{40} << 30));
  ASSERT_NO_FATAL_FAILURE(test::EditIndexFile(poisoned, [](index::IndexFile* f) {
    ASSERT_GE(f->walk.offsets.size(), 3u);
    f->walk.offsets.erase(f->walk.offsets.begin());
  }));

  std::string log;
  ASSERT_NO_FATAL_FAILURE(ExpectIndexDirListsAsWithout(shared, &log));
  EXPECT_NE(log.find("not a regular file"), std::string::npos) << log;
  EXPECT_NE(log.find("but its header implies"), std::string::npos) << log;
  EXPECT_NE(log.find("not 0"), std::string::npos) << log;
  EXPECT_NE(log.find("3 walked"), std::string::npos) << log;
}

// Issue 15, item 10: problem messages come from index files too. Logged
// at mount, they are escaped (no raw newline or terminal escape reaches the
// log) and capped per shard.
TEST_F(IndexMountTest, ProblemMessagesAreEscapedAndCapped) {
  const std::string shared = IndexIntoShared();
  ASSERT_FALSE(HasFailure());
  const std::string file = shared + "/" + kShardBig + ".tfri";
  const size_t kProblems = index::kMaxProblemsLogged + 30;
  ASSERT_NO_FATAL_FAILURE(test::EditIndexFile(file, [&](index::IndexFile* f) {
    ASSERT_TRUE(f->walk.problems.empty());
    for (size_t i = 0; i < kProblems; ++i) {
      f->walk.problems.push_back({i, "evil\n\x1b[31mFAKE LOG LINE\x1b[0m"});
    }
  }));

  Mount m;
  ASSERT_EQ(absl::OkStatus(), m.Start({src_}, {"-o", "index_dir=" + shared + ",noindexcache"}));
  StopOk(&m);
  const std::string log = m.Stderr();
  EXPECT_EQ(log.find('\x1b'), std::string::npos) << log;
  EXPECT_EQ(log.find("\nFAKE LOG LINE"), std::string::npos) << log;
  size_t lines = 0;
  for (size_t at = 0; (at = log.find("evil\\n\\x1b[31mFAKE", at)) != std::string::npos; ++at) {
    ++lines;
  }
  EXPECT_EQ(index::kMaxProblemsLogged, lines) << log;
  EXPECT_NE(log.find("... and 30 more problem(s)"), std::string::npos) << log;
}

TEST_F(IndexMountTest, IndexCommandIntoTheCacheThenMount) {
  CommandResult r = RunCommand({BinaryPath(), "index", src_});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  EXPECT_NE(r.out.find(CacheDir()), std::string::npos) << r.out;
  EXPECT_TRUE(r.err.find('\r') == std::string::npos) << "no progress bar off a terminal";
  Mount m;
  ASSERT_EQ(absl::OkStatus(), m.Start({src_}, {"-o", "verbose"}));
  StopOk(&m);
  EXPECT_EQ(m.Stderr().find(" walked"), std::string::npos) << m.Stderr();
}

// `index --beside` writes <shard>.tfri next to each shard; a mount with a
// fresh cache loads every shard from there, does not show the files, and
// walks a shard changed since (its beside index is stale).
TEST_F(IndexMountTest, IndexBesideServesEveryLaterMount) {
  std::map<std::string, WalkedNode> before;
  {
    Mount plain;
    ASSERT_EQ(absl::OkStatus(), plain.Start({src_}, {"-o", "noindexcache"}));
    before = Listing(plain);
    StopOk(&plain);
  }
  CommandResult r = RunCommand({BinaryPath(), "index", "--beside", src_});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  EXPECT_NE(r.out.find("index files beside the shards"), std::string::npos) << r.out;
  for (const std::string shard : {kShardOne, kShardTwelve, kShardBig, kShardNested}) {
    EXPECT_TRUE(std::filesystem::exists(src_ + "/" + shard + ".tfri")) << shard;
  }
  const size_t beside_files = CountIndexFiles(src_);
  EXPECT_EQ(0u, CountIndexFiles(cache_home_)) << "the per-user cache is left alone";

  // Again: nothing to walk, and the .tfri files are not taken for data.
  r = RunCommand({BinaryPath(), "index", "--beside", src_});
  ASSERT_EQ(0, r.exit_code) << r.out << r.err;
  EXPECT_NE(r.out.find(" 0 walked"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find(".tfri"), std::string::npos) << r.err;
  EXPECT_EQ(beside_files, CountIndexFiles(src_));

  {
    Mount m;
    ASSERT_EQ(absl::OkStatus(), m.Start({src_}, {"-o", "verbose"}));
    const auto listing = Listing(m);
    StopOk(&m);
    ExpectSameListing(before, listing);
    for (const auto& [path, node] : listing) {
      EXPECT_FALSE(path.ends_with(".tfri")) << path << " is shown";
    }
    const std::string log = m.Stderr();
    EXPECT_NE(log.find("index loaded from beside the shard"), std::string::npos) << log;
    EXPECT_NE(log.find(std::to_string(beside_files) + " from beside the shards"), std::string::npos)
        << log;
    EXPECT_EQ(log.find(" walked"), std::string::npos) << log;
  }

  // Rewritten (one record now): its beside index must not be believed.
  std::string bytes;
  record::AppendFramed(&bytes, "only one");
  WriteWholeFile(src_ + "/" + kShardBig, bytes);
  ::setenv("XDG_CACHE_HOME", tmp_.Subdir("xdg-cache-2").c_str(), 1);
  Mount m;
  ASSERT_EQ(absl::OkStatus(), m.Start({src_}, {"-o", "verbose"}));
  EXPECT_EQ(1u, Children(m.path(kShardBig)));
  StopOk(&m);
  const std::string log = m.Stderr();
  EXPECT_NE(log.find(std::to_string(beside_files - 1) + " from beside the shards"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("1 walked"), std::string::npos) << log;
  EXPECT_NE(log.find("stale (size changed"), std::string::npos) << log;
}

TEST_F(IndexMountTest, IndexCommandExitCodes) {
  EXPECT_EQ(0, RunCommand({BinaryPath(), "index", "--help"}).exit_code);
  EXPECT_EQ(2, RunCommand({BinaryPath(), "index"}).exit_code);
  EXPECT_EQ(2, RunCommand({BinaryPath(), "index", "--bogus", src_}).exit_code);
  EXPECT_EQ(2, RunCommand({BinaryPath(), "index", "--threads", "0", src_}).exit_code);
  EXPECT_EQ(2, RunCommand({BinaryPath(), "index", "--walk", "fast", src_}).exit_code);
  EXPECT_EQ(
      2,
      RunCommand({BinaryPath(), "index", "--beside", "--index-dir", tmp_.path(), src_}).exit_code);
  CommandResult missing = RunCommand({BinaryPath(), "index", src_ + "/no-such-dir"});
  EXPECT_EQ(1, missing.exit_code);
  EXPECT_NE(missing.err.find("no-such-dir"), std::string::npos) << missing.err;
  WriteWholeFile(tmp_.path() + "/file", "x");
  CommandResult unwritable =
      RunCommand({BinaryPath(), "index", "--index-dir", tmp_.path() + "/file/idx", src_});
  EXPECT_EQ(1, unwritable.exit_code) << unwritable.out;
  EXPECT_NE(unwritable.err.find("cannot save"), std::string::npos) << unwritable.err;
}

TEST_F(IndexMountTest, GrownAndRewrittenShardsAreShownAsTheyAreNow) {
  const std::string big = src_ + "/" + kShardBig;
  const size_t big_records = ds_.Shard(kShardBig).records.size();
  {
    Mount m;
    ASSERT_EQ(absl::OkStatus(), m.Start({src_}));
    EXPECT_EQ(big_records, Children(m.path(kShardBig)));
    StopOk(&m);
  }
  AppendRecords(big, 5);
  {
    Mount m;
    ASSERT_EQ(absl::OkStatus(), m.Start({src_}, {"-o", "verbose"}));
    EXPECT_EQ(big_records + 5, Children(m.path(kShardBig)));
    EXPECT_EQ("appended 4",
              ReadWholeFile(m.path(std::string(kShardBig) + "/" + std::to_string(big_records + 4) +
                                   "/" + "record.bin")));  // naming::kRawRecordName
    StopOk(&m);
    EXPECT_NE(m.Stderr().find("1 grown"), std::string::npos) << m.Stderr();
  }
  // Rewritten with fewer records: the stale index must not be used.
  std::string bytes;
  record::AppendFramed(&bytes, "only one");
  WriteWholeFile(big, bytes);
  {
    Mount m;
    ASSERT_EQ(absl::OkStatus(), m.Start({src_}));
    EXPECT_EQ(1u, Children(m.path(kShardBig)));
    StopOk(&m);
  }
}

}  // namespace
}  // namespace tfrecordfs::mount_test

namespace tfrecordfs::mount_test {
namespace {

// Issue 15, item 2: a cached index with a forged offset where the load-time
// samples do not look (first, middle and last records are checked) is
// caught by the read of that record: EIO for it, a loud log line, and the
// cached index is dropped so the next mount walks and reads it right.
TEST_F(IndexMountTest, AForgedOffsetIsCaughtOnReadAndTheIndexDropped) {
  const std::string dir = tmp_.Subdir("forged");
  const std::string shard = dir + "/ten.tfrecord";
  std::string bytes;
  for (int i = 0; i < 10; ++i) {
    record::AppendFramed(&bytes,
                         std::string("\x01payload-") + std::to_string(i) + std::string(40, 'z'));
  }
  WriteWholeFile(shard, bytes);
  {
    Mount m;
    ASSERT_EQ(absl::OkStatus(), m.Start({dir}, {"-o", "ro"}));
    StopOk(&m);
  }
  std::string cached;
  for (const auto& e : std::filesystem::directory_iterator(CacheDir())) {
    if (e.path().filename().string().rfind("ten.tfrecord-", 0) == 0) cached = e.path().string();
  }
  ASSERT_FALSE(cached.empty());
  ASSERT_NO_FATAL_FAILURE(test::EditIndexFile(cached, [](index::IndexFile* f) {
    f->walk.offsets[3] += 1;  // records 2 and 3: neither first, middle nor last
  }));
  {
    Mount m;
    ASSERT_EQ(absl::OkStatus(), m.Start({dir}, {"-o", "ro,verbose"}));
    EXPECT_NE(m.Stderr().find("index loaded from the cache"), std::string::npos) << m.Stderr();
    struct stat st;
    EXPECT_EQ(::stat(m.path("ten.tfrecord/3/record.bin").c_str(), &st), -1);
    EXPECT_EQ(errno, EIO);
    StopOk(&m);
    EXPECT_NE(m.Stderr().find("disagrees with the shard at record 3"), std::string::npos)
        << m.Stderr();
  }
  EXPECT_FALSE(std::filesystem::exists(cached));
  {
    Mount m;
    ASSERT_EQ(absl::OkStatus(), m.Start({dir}, {"-o", "ro"}));
    EXPECT_EQ(ReadWholeFile(m.path("ten.tfrecord/3/record.bin")),
              std::string("\x01payload-3") + std::string(40, 'z'));
    StopOk(&m);
  }
}

}  // namespace
}  // namespace tfrecordfs::mount_test
