// Real mount of a generated dataset: the golden listing of every file, the
// reverse mapping of every record back to its features, partial and offset
// reads, record-name aliases, negative lookups and write refusals.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ostream>
#include <random>

#include "expectations.h"
#include "generated_dataset.h"
#include "gtest/gtest.h"
#include "mount_harness.h"
#include "tfrecordfs/record/writer.h"
#include "tfrecordfs/staging/layout.h"

namespace tfrecordfs::mount_test {
namespace {

constexpr uint64_t kSeed = 20240917;

class GeneratedMountTest : public GeneratedMountTestBase {
 protected:
  GeneratedMountTest() : GeneratedMountTestBase(kSeed) {}
};

int StatErrno(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? 0 : errno;
}

uint64_t InoOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    ADD_FAILURE() << "stat " << path << ": " << std::strerror(errno);
    return 0;
  }
  return st.st_ino;
}

TEST_F(GeneratedMountTest, GoldenListingMatchesEveryFile) {
  auto walked = WalkTree(mount_.mountpoint());
  EXPECT_TRUE(RemoveEmptyStaging(&walked)) << "no empty staging/ folder at the root";
  const ExpectedTree expected = ds_.Expected();
  // Sanity of the expectation itself: every layout kind is present.
  ASSERT_GT(expected.size(), 3000u);
  EXPECT_EQ(CompareTrees(expected, walked), 0u);

  // The mount root: the source directory's entries, nothing else.
  std::vector<std::string> top;
  for (const auto& [rel, node] : walked) {
    if (rel.find('/') == std::string::npos) top.push_back(rel);
  }
  EXPECT_EQ(top,
            (std::vector<std::string>{"dataset_info.json", "empty_dir", "nested", "one.tfrecord",
                                      "train-00000-of-00002", "train-00001-of-00002"}));
  // Record directory names and their zero padding (1, 2 and 3 digits).
  EXPECT_TRUE(walked.count("one.tfrecord/0"));
  EXPECT_TRUE(walked.count("train-00000-of-00002/00"));
  EXPECT_TRUE(walked.count("train-00000-of-00002/11"));
  EXPECT_FALSE(walked.count("train-00000-of-00002/12"));
  EXPECT_TRUE(walked.count("train-00001-of-00002/000"));
  EXPECT_TRUE(walked.count("train-00001-of-00002/129"));
  EXPECT_TRUE(walked.count("nested/deep/val.tfrecord/2"));
  ASSERT_TRUE(walked.count("nested/empty.tfrecord"));
  EXPECT_TRUE(S_ISDIR(walked.at("nested/empty.tfrecord").mode));
  EXPECT_TRUE(Subtree(walked, "nested/empty.tfrecord").empty());
  EXPECT_TRUE(Subtree(walked, "empty_dir").empty());
  // Inode numbers are unique across the mount (du, cp and tar rely on it).
  std::map<uint64_t, std::string> inos;
  for (const auto& [rel, node] : walked) {
    auto [it, fresh] = inos.emplace(node.ino, rel);
    EXPECT_TRUE(fresh) << rel << " shares inode " << node.ino << " with " << it->second;
  }
}

// The independent check: map every mounted file back to a feature with the
// naming reverse functions and compare to the features the test generated.
TEST_F(GeneratedMountTest, EveryRecordMapsBackToItsFeatures) {
  const auto walked = WalkTree(mount_.mountpoint());
  size_t records = 0, features = 0;
  for (const GenShard& shard : ds_.shards) {
    for (size_t r = 0; r < shard.records.size(); ++r) {
      const GenRecord& rec = shard.records[r];
      const std::string dir = shard.rel_path + "/" + RecordDirName(r, shard.records.size());
      SCOPED_TRACE(dir);
      ASSERT_TRUE(walked.count(dir));
      const auto files = Subtree(walked, dir);
      ++records;
      if (!rec.is_example) {
        ASSERT_EQ(files.size(), 1u);
        ASSERT_TRUE(files.count("record.bin"));
        EXPECT_EQ(files.at("record.bin").content, rec.payload);
        continue;
      }
      std::map<std::string, example::Kind> kinds;
      for (const OwnedFeature& f : rec.features) kinds[f.name] = f.kind;
      std::vector<std::string> errors;
      auto got = ReconstructRecord(files, kinds, &errors);
      EXPECT_TRUE(errors.empty()) << errors.front();
      for (const OwnedFeature& want : rec.features) {
        ++features;
        auto it = got.find(want.name);
        if (it == got.end()) {
          ADD_FAILURE() << "no file maps back to " << Describe(want);
          continue;
        }
        EXPECT_TRUE(SameFeature(it->second, want))
            << "got " << Describe(it->second) << "\nwant " << Describe(want);
        got.erase(it);
      }
      for (const auto& [name, f] : got) ADD_FAILURE() << "extra feature " << Describe(f);
    }
  }
  EXPECT_EQ(records, 1u + 12u + 130u + 3u);
  EXPECT_GT(features, 2500u);
}

// Hand-written paths: the layout rules of naming.h spelled out.
TEST_F(GeneratedMountTest, LayoutRulesByExample) {
  const std::string r = "one.tfrecord/0/";
  auto content = [&](const std::string& rel) { return ReadWholeFile(M(r + rel)); };
  EXPECT_EQ(content("%-"), "0\n");                   // empty name
  EXPECT_EQ(content("%2E"), "1.5\n");                // "."
  EXPECT_EQ(content("%2E..txt"), "dotdot\n");        // ".."
  EXPECT_EQ(content("ctl%01%1F%7Fname"), "1\n2\n");  // control bytes
  EXPECT_EQ(content("long_" + std::string(195, 'x') + "%+/" + std::string(100, 'x')), "0\n");
  EXPECT_EQ(content("%-image"), "7\n0\n");  // numeric beside image/
  EXPECT_EQ(content("image/format.txt"), "jpeg\n");
  EXPECT_EQ(content("image/encoded.jpg").substr(0, 3), "\xFF\xD8\xFF");
  EXPECT_EQ(content("mask.png").substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(content("record%2Ebin"), "5\n");
  EXPECT_EQ(content("%-record.bin").substr(0, 1), std::string(1, '\0'));
  EXPECT_EQ(content("%342"), "42\n");  // all-digit stem
  EXPECT_EQ(content("ambig/%30.5.txt"), "digit stem with a dot\n");
  EXPECT_EQ(content("%2Flead"), "1\n");
  EXPECT_EQ(content("trail%2F.txt"), "trailing slash\n");
  EXPECT_EQ(content("a%2F%2Fb.bin").size(), 11u);
  EXPECT_EQ(content("dir.x/%2Ehidden/y"), "9\n");
  EXPECT_EQ(content("\xE5\x9B\xBE\xE5\x83\x8F/\xE7\xBC\x96\xE7\xA0\x81.jpg").substr(0, 3),
            "\xFF\xD8\xFF");
  EXPECT_EQ(content("frames/0.bin").substr(0, 1), std::string(1, '\0'));
  EXPECT_EQ(content("space name.txt"), "with a space\n");
  EXPECT_EQ(content("empty_int64"), "");
  EXPECT_EQ(content("empty_float"), "");
  EXPECT_EQ(content("empty_bytes.txt"), "");
  EXPECT_EQ(content("varying"), "0\n");
  EXPECT_EQ(StatErrno(M(r + "missing")), ENOENT);  // kindless: an empty `.none`
  EXPECT_EQ(content("missing.none"), "");
  struct stat st;
  ASSERT_EQ(::stat(M(r + "deep").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  ASSERT_EQ(::stat(M(r + "frames").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  // A read-write mount: a record's folders take edits (the owner's write bit).
  EXPECT_EQ(st.st_mode & 07777, 0755u);

  // Float formatting of the special values, through a record that has them.
  const std::string scores = content("scores");
  EXPECT_EQ(scores.back(), '\n');

  // Non-Example payloads and the empty payload.
  const GenShard& twelve = ds_.Shard(kShardTwelve);
  EXPECT_EQ(ReadWholeFile(M("train-00000-of-00002/03/record.bin")), twelve.records[3].payload);
  EXPECT_EQ(ReadWholeFile(M("train-00000-of-00002/06/record.bin")), twelve.records[6].payload);
  ASSERT_EQ(::stat(M("train-00000-of-00002/04").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(ReadWholeFile(M(ds_.needle_file)), "first line\n" + ds_.needle + "\n");
  // Plain files are shown as they are.
  EXPECT_EQ(ReadWholeFile(M("dataset_info.json")), ds_.plain_files.at("dataset_info.json"));
  EXPECT_EQ(ReadWholeFile(M("nested/deep/zero_length")), "");
}

TEST_F(GeneratedMountTest, ReadsAtArbitraryOffsetsAndPartialReads) {
  const ExpectedTree expected = ds_.Expected();
  std::vector<std::string> files;
  for (const auto& [rel, node] : expected) {
    if (!node.is_dir) files.push_back(rel);
  }
  std::mt19937_64 rng(kSeed + 1);
  std::shuffle(files.begin(), files.end(), rng);
  files.resize(std::min<size_t>(files.size(), 300));
  files.push_back("train-00001-of-00002/007/image/encoded.jpg");  // 300 KiB
  files.push_back("dataset_info.json");
  for (const std::string& rel : files) {
    const std::string& want = expected.at(rel).content;
    const std::string path = M(rel);
    SCOPED_TRACE(rel);
    int fd = ::open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    struct stat st;
    ASSERT_EQ(::fstat(fd, &st), 0);
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), want.size());
    for (int k = 0; k < 12; ++k) {
      const uint64_t off = std::uniform_int_distribution<uint64_t>(0, want.size() + 16)(rng);
      const size_t len =
          static_cast<size_t>(std::uniform_int_distribution<uint64_t>(0, want.size() + 8)(rng));
      std::string buf(len, '\0');
      ssize_t n = ::pread(fd, buf.data(), len, static_cast<off_t>(off));
      ASSERT_GE(n, 0) << "pread at " << off << ": " << std::strerror(errno);
      buf.resize(static_cast<size_t>(n));
      const std::string slice = off >= want.size() ? "" : want.substr(off, len);
      EXPECT_EQ(buf, slice) << "pread(" << len << " bytes at " << off << ")";
    }
    ::close(fd);

    // head -c style: read a prefix and close without reading the rest.
    for (size_t k : {size_t{0}, size_t{1}, size_t{10}, size_t{4096}, size_t{70000}}) {
      fd = ::open(path.c_str(), O_RDONLY);
      ASSERT_GE(fd, 0);
      std::string prefix;
      char chunk[8192];
      while (prefix.size() < k) {
        ssize_t n = ::read(fd, chunk, std::min(sizeof chunk, k - prefix.size()));
        ASSERT_GE(n, 0) << std::strerror(errno);
        if (n == 0) break;
        prefix.append(chunk, static_cast<size_t>(n));
      }
      ::close(fd);
      EXPECT_EQ(prefix, want.substr(0, k)) << "first " << k << " bytes";
    }
  }
  // A large file read in odd-sized sequential chunks.
  const std::string big = M("train-00001-of-00002/007/image/encoded.jpg");
  int fd = ::open(big.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::string all;
  std::vector<char> chunk(12345);
  for (ssize_t n; (n = ::read(fd, chunk.data(), chunk.size())) > 0;) all.append(chunk.data(), n);
  ::close(fd);
  EXPECT_EQ(all, expected.at("train-00001-of-00002/007/image/encoded.jpg").content);
  EXPECT_GT(all.size(), 300u * 1024);
}

TEST_F(GeneratedMountTest, UnpaddedRecordNamesAreAliases) {
  struct Case {
    std::string canonical, alias;
  };
  const std::vector<Case> cases = {
      {"train-00001-of-00002/042", "train-00001-of-00002/42"},
      {"train-00001-of-00002/007", "train-00001-of-00002/7"},
      {"train-00001-of-00002/000", "train-00001-of-00002/0"},
      {"train-00000-of-00002/05", "train-00000-of-00002/5"},
      {"one.tfrecord/0", "one.tfrecord/0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.alias);
    EXPECT_EQ(InoOf(M(c.canonical)), InoOf(M(c.alias)));
    EXPECT_EQ(InoOf(M(c.canonical + "/label")), InoOf(M(c.alias + "/label")));
    EXPECT_EQ(ReadWholeFile(M(c.canonical + "/label")), ReadWholeFile(M(c.alias + "/label")));
  }
  // Only the padded and the plain decimal spelling exist; no other padding,
  // no signs, no indexes past the end.
  for (const char* bad :
       {"train-00001-of-00002/0042", "train-00001-of-00002/00042", "train-00001-of-00002/130",
        "train-00001-of-00002/+42", "train-00001-of-00002/-1", "train-00001-of-00002/42 ",
        "train-00000-of-00002/005", "train-00000-of-00002/12", "one.tfrecord/00", "one.tfrecord/1",
        "train-00001-of-00002/99999999999999999999"}) {
    EXPECT_EQ(StatErrno(M(bad)), ENOENT) << bad;
  }
}

TEST_F(GeneratedMountTest, BogusNamesGiveEnoentEveryTime) {
  for (int round = 0; round < 4; ++round) {
    for (const char* bad :
         {"nope", "one.tfrecord/0/nope", "one.tfrecord/0/image/nope.jpg",
          "one.tfrecord/0/label.txt", "one.tfrecord/abc", "nested/deep/nope.tfrecord",
          "dataset_info.json.bak", "one.tfrecord/0/frames/9.bin", "one.tfrecord/0/missing"}) {
      EXPECT_EQ(StatErrno(M(bad)), ENOENT) << bad << " (round " << round << ")";
      EXPECT_EQ(::open(M(bad).c_str(), O_RDONLY), -1);
      EXPECT_EQ(errno, ENOENT) << bad;
    }
    // Below a file: ENOTDIR.
    EXPECT_EQ(StatErrno(M("dataset_info.json/x")), ENOTDIR);
    EXPECT_EQ(StatErrno(M("one.tfrecord/0/label/x")), ENOTDIR);
    EXPECT_EQ(StatErrno(M("one.tfrecord/0/%2E/x")), ENOTDIR);
  }
}

TEST_F(GeneratedMountTest, PlainFilesAndTheTreeAreReadOnly) {
  // Records of the shards take edits on a read-write mount (record_edits.h,
  // tests/mount/staging/record_edit_test.cc); the sources' plain files and
  // folders, and the shard folders' names, do not.
  const std::string plain = M("dataset_info.json");
  const std::string dir = M("one.tfrecord/0");
  auto expect_errno = [](int rc, int want, const std::string& what) {
    const int err = errno;
    EXPECT_EQ(rc, -1) << what << " succeeded";
    if (rc == -1) {
      EXPECT_EQ(err, want) << what << ": " << std::strerror(err);
    }
  };
  // A default mount opens files without asking the daemon (FUSE no-open:
  // no round trip per open), so root's open for writing succeeds and the
  // write() is what fails with EROFS (README: the error table).
  auto expect_write_refused = [&](int fd, const std::string& what) {
    if (fd < 0) {
      expect_errno(fd, EROFS, what);
      return;
    }
    expect_errno(static_cast<int>(::write(fd, "x", 1)), EROFS, "write after " + what);
    ::close(fd);
  };
  const std::string content = ReadWholeFile(plain);
  expect_write_refused(::open(plain.c_str(), O_WRONLY), "open O_WRONLY");
  expect_write_refused(::open(plain.c_str(), O_RDWR), "open O_RDWR");
  expect_write_refused(::open(plain.c_str(), O_WRONLY | O_APPEND), "open O_APPEND");
  int fd = ::open(plain.c_str(), O_RDONLY | O_TRUNC);
  expect_errno(fd, EROFS, "open O_RDONLY|O_TRUNC");
  if (fd >= 0) ::close(fd);
  expect_errno(::truncate(plain.c_str(), 0), EROFS, "truncate");
  expect_errno(::chmod(plain.c_str(), 0644), EROFS, "chmod");
  expect_errno(::rename(plain.c_str(), M("renamed").c_str()), EROFS, "rename");
  expect_errno(::unlink(plain.c_str()), EROFS, "unlink");
  EXPECT_EQ(ReadWholeFile(plain), content);
  fd = ::creat(M("new_file").c_str(), 0644);
  expect_errno(fd, EROFS, "creat at the root");
  if (fd >= 0) ::close(fd);
  expect_errno(::mkdir(M("newdir").c_str(), 0755), EROFS, "mkdir at the root");
  expect_errno(::rmdir(M("empty_dir").c_str()), EROFS, "rmdir of an empty source dir");
  // A shard folder holds record folders only; a record is named by its
  // position, so it cannot be renamed.
  fd = ::creat(M("one.tfrecord/loose").c_str(), 0644);
  expect_errno(fd, EPERM, "creat in a shard folder");
  if (fd >= 0) ::close(fd);
  expect_errno(::rename(dir.c_str(), M("one.tfrecord/5").c_str()), EPERM, "rename of a record");
  // A record folder that shows files: ENOTEMPTY (deleting records:
  // staging_delete_test.cc).
  EXPECT_EQ(::rmdir(dir.c_str()), -1);
  EXPECT_EQ(errno, ENOTEMPTY) << std::strerror(errno);
  expect_errno(::symlink("x", (dir + "/sym").c_str()), EROFS, "symlink");
  expect_errno(::mknod((dir + "/fifo").c_str(), S_IFIFO | 0644, 0), EROFS, "mknod");
  EXPECT_EQ(StatErrno(M("newdir")), ENOENT);
  EXPECT_EQ(StatErrno(M("one.tfrecord/5")), ENOENT);
}

// A dataset generated with `seed` in tmp's src, the tree a mount of it
// shows, and how many files and folders that tree has.
struct GeneratedSource {
  GeneratedSource(TempDir& tmp, uint64_t seed)
      : src(tmp.Subdir("src")), expected(WriteDataset(src, seed).Expected()) {
    for (const auto& [rel, node] : expected) (node.is_dir ? dirs : files) += 1;
  }
  const std::string src;
  const ExpectedTree expected;
  size_t files = 0, dirs = 0;
};

// -o options that change how bytes are served give the same bytes.
TEST(GeneratedMountOptionsTest, NoSpliceAndSingleThreadedServeTheSameBytes) {
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  const GeneratedSource d(tmp, kSeed + 2);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  for (const std::vector<std::string>& opts :
       {std::vector<std::string>{"-o", "nosplice,cache_records=2"},
        std::vector<std::string>{"-s", "-o", "timeout=0"},
        std::vector<std::string>{"-o", "opendir"},
        std::vector<std::string>{"-o", "cache_mb=1,cache_records=100000"}}) {
    SCOPED_TRACE(opts.back());
    Mount m;
    const absl::Status err = m.Start({d.src}, opts);
    ASSERT_TRUE(err.ok()) << err;
    auto walked = WalkTree(m.mountpoint());
    EXPECT_TRUE(RemoveEmptyStaging(&walked));
    EXPECT_EQ(CompareTrees(d.expected, walked), 0u);
    std::string stop_err;
    EXPECT_EQ(m.Stop(&stop_err), 0) << stop_err;
  }
}

// Counts "opcode: NAME" lines in a -d (debug) daemon's stderr.
size_t CountOpcode(const std::string& log, const std::string& name) {
  const std::string needle = "opcode: " + name + " ";
  size_t n = 0;
  for (size_t at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1)) ++n;
  return n;
}

// By default the kernel opens directories itself (ENOSYS to the first
// OPENDIR, FUSE_CAP_NO_OPENDIR_SUPPORT): a walk sends the daemon one OPENDIR
// in all and no RELEASEDIR, and the listings are still complete, staging
// included; -o opendir restores one OPENDIR/RELEASEDIR pair per directory.
TEST(GeneratedMountOptionsTest, KernelOpensDirectoriesUnlessAskedNotTo) {
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  const GeneratedSource d(tmp, kSeed + 3);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  for (const bool skip : {true, false}) {
    SCOPED_TRACE(skip ? "default" : "-o opendir");
    Mount m;
    std::vector<std::string> opts = {"-d"};
    if (!skip) opts.insert(opts.end(), {"-o", "opendir"});
    ASSERT_EQ(m.Start({d.src}, opts), absl::OkStatus());
    // Staging listings have no handle to lean on when the kernel opens
    // directories: they must still follow creates and removals.
    const std::string rec = m.path(std::string(Mount::kStagingName) + "/r");
    ASSERT_EQ(::mkdir(rec.c_str(), 0755), 0);
    WriteWholeFile(rec + "/label", "1\n");
    WriteWholeFile(rec + "/name.txt", "x\n");
    auto listing = WalkTree(rec, false);
    EXPECT_EQ(listing.size(), 2u);
    ASSERT_EQ(::unlink((rec + "/label").c_str()), 0);
    listing = WalkTree(rec, false);
    ASSERT_EQ(listing.size(), 1u);
    EXPECT_EQ(listing.begin()->first, "name.txt");
    ASSERT_EQ(::unlink((rec + "/name.txt").c_str()), 0);
    ASSERT_EQ(::rmdir(rec.c_str()), 0);

    auto walked = WalkTree(m.mountpoint());
    EXPECT_TRUE(RemoveEmptyStaging(&walked));
    EXPECT_EQ(CompareTrees(d.expected, walked), 0u);
    // Counted once the daemon is gone: the kernel sends RELEASEDIR in the
    // background, so the last few may not be logged when the walk returns.
    std::string stop_err;
    EXPECT_EQ(m.Stop(&stop_err), 0) << stop_err;
    const std::string log = m.Stderr();
    if (skip) {
      EXPECT_LE(CountOpcode(log, "OPENDIR"), 1u);
      EXPECT_EQ(CountOpcode(log, "RELEASEDIR"), 0u);
    } else {
      EXPECT_GE(CountOpcode(log, "OPENDIR"), d.dirs);
      EXPECT_GE(CountOpcode(log, "RELEASEDIR"), d.dirs);
    }
  }
}

// Every listing batch carries attributes (READDIRPLUS, never the kernel's
// "auto" choice, which sends plain READDIR after the first batch of a large
// directory): a walk of a shard with a thousand records enters every record
// folder without a LOOKUP.
TEST(GeneratedMountOptionsTest, WalkOfALargeShardNeedsNoLookups) {
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  const std::string src = tmp.Subdir("src");
  constexpr int kRecords = 1000;
  std::string shard;
  for (int i = 0; i < kRecords; ++i)
    record::AppendFramed(&shard, "not an Example " + std::to_string(i));
  WriteWholeFile(src + "/big.tfrecord", shard);
  Mount m;
  ASSERT_EQ(m.Start({src}, {"-d"}), absl::OkStatus());
  const auto walked = WalkTree(m.mountpoint(), false);
  size_t folders = 0;
  for (const auto& [rel, node] : walked)
    folders += S_ISDIR(node.mode) && rel.rfind("big.tfrecord/", 0) == 0;
  EXPECT_EQ(folders, static_cast<size_t>(kRecords));
  const std::string log = m.Stderr();
  EXPECT_GE(CountOpcode(log, "READDIRPLUS"), static_cast<size_t>(kRecords));
  // The root's two entries (big.tfrecord, staging), and a few folders whose
  // fresh dentries a loaded machine reclaimed before the walk entered them;
  // the kernel's "auto" mode costs 799.
  EXPECT_LE(CountOpcode(log, "LOOKUP"), 2u + kRecords / 20)
      << "record folders entered by LOOKUP; forgets: " << CountOpcode(log, "BATCH_FORGET");
  std::string stop_err;
  EXPECT_EQ(m.Stop(&stop_err), 0) << stop_err;
}

// `ls -l` asks every entry for its security label and POSIX ACL. The mount
// keeps neither and says so (EOPNOTSUPP), and ls stops asking for the rest
// of the device: an `ls -lR` of the whole mount sends a handful of GETXATTR,
// not two per entry (ENODATA, as before, cost 220,099 round trips for the
// 100,000 entries of the benchmark's image tree and made `ls -lR` 4x slower
// than on the extracted files). The mount's own attributes still answer.
TEST(GeneratedMountOptionsTest, LsLongAsksNoAttributesPerEntry) {
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  const GeneratedSource d(tmp, kSeed + 6);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  const size_t entries = d.expected.size();
  ASSERT_GT(entries, 50u);
  const std::string first_record = std::string(kShardTwelve) + "/00";
  ASSERT_TRUE(d.expected.count(first_record) && d.expected.at(first_record).is_dir) << first_record;
  Mount m;
  ASSERT_EQ(m.Start({d.src}, {"-d", "-o", "ro"}), absl::OkStatus());
  CommandResult ls = RunCommand({"ls", "-lR", m.mountpoint()});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_EQ(ls.err, "");
  char value[256];
  const std::string rec = m.path(first_record);
  const ssize_t n = ::getxattr(rec.c_str(), "user.tfrecordfs.record", value, sizeof value);
  ASSERT_GT(n, 0) << std::strerror(errno);
  EXPECT_EQ(std::string(value, static_cast<size_t>(n)), "0");
  EXPECT_LT(::getxattr(rec.c_str(), "security.selinux", value, sizeof value), 0);
  EXPECT_EQ(errno, EOPNOTSUPP);
  std::string stop_err;
  EXPECT_EQ(m.Stop(&stop_err), 0) << stop_err;
  const size_t asked = CountOpcode(m.Stderr(), "GETXATTR");
  EXPECT_LE(asked, 8u) << "ls -lR of " << entries << " entries asked for attributes " << asked
                       << " times";
}

// Counts the requests of the kinds a file open, stat or close can cause,
// and the lookups and forgets that tell when the kernel evicted an inode.
struct FileOpCounts {
  size_t open, flush, release, getattr, read, lookup, forget, setattr;
};
FileOpCounts CountFileOps(const std::string& log) {
  return {CountOpcode(log, "OPEN"),
          CountOpcode(log, "FLUSH"),
          CountOpcode(log, "RELEASE"),
          CountOpcode(log, "GETATTR"),
          CountOpcode(log, "READ"),
          CountOpcode(log, "LOOKUP"),
          CountOpcode(log, "FORGET") + CountOpcode(log, "BATCH_FORGET"),
          CountOpcode(log, "SETATTR")};
}
std::ostream& operator<<(std::ostream& os, const FileOpCounts& c) {
  return os << "open " << c.open << ", flush " << c.flush << ", release " << c.release
            << ", getattr " << c.getattr << ", read " << c.read << ", lookup " << c.lookup
            << ", forget " << c.forget << ", setattr " << c.setattr;
}

// Walks the shards at the top of `m` (reading every file there and
// comparing it with `expected`), then counts the file requests the mount
// has logged since it started.
FileOpCounts WalkShardsCountingOps(const Mount& m, const ExpectedTree& expected) {
  for (const auto& [rel, node] : expected) {
    if (rel.find('/') != std::string::npos || rel == "staging") continue;
    if (node.is_dir) {
      WalkTree(m.path(rel));
    } else {
      EXPECT_EQ(ReadWholeFile(m.path(rel)), node.content) << rel;
    }
  }
  return CountFileOps(m.Stderr());
}

// A warm walk (`second`, after `first`, both counted from the mount's start)
// must be served from the kernel's caches: no OPEN, FLUSH or RELEASE, and
// file contents from the page cache. The page cache is the kernel's to
// reclaim, and a loaded machine does reclaim a few pages or evict a few
// inodes between two walks (seen in CI: 10 READs after 2604), so the READs
// of the warm walk must stay under a tenth of those of the two walks before
// it; a cache dropped at every open re-reads half of them.
void ExpectWarmReadsFromThePageCache(const FileOpCounts& first, const FileOpCounts& second) {
  ASSERT_GE(second.read, first.read);
  EXPECT_LT((second.read - first.read) * 10, first.read)
      << "warm reads reached the daemon; before the warm walk: " << first << "; after: " << second;
}
void ExpectWarmWalkServedByTheKernel(const FileOpCounts& first, const FileOpCounts& second) {
  EXPECT_EQ(second.open, first.open) << second;
  EXPECT_EQ(second.flush, first.flush) << second;
  EXPECT_EQ(second.release, 0u) << second;
  ExpectWarmReadsFromThePageCache(first, second);
}

// On a read-only mount the kernel opens files itself (ENOSYS to the first
// OPEN and FLUSH, FUSE_CAP_NO_OPEN_SUPPORT): a walk that reads every file
// sends at most one OPEN and one FLUSH and no RELEASE, a second walk sends
// nothing at all, every file still reads right (staging ones too, without a
// handle), writes fail with EROFS and the unmount packs nothing and writes
// nothing to the store. -o ro,open
// sends every open to the daemon again.
TEST(GeneratedMountOptionsTest, ReadOnlyMountOpensFilesWithoutTheDaemon) {
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  const GeneratedSource d(tmp, kSeed + 4);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  const std::string store = tmp.Subdir("store"), out = tmp.Subdir("out");
  // A record an earlier mount left staged, straight in the store.
  ASSERT_EQ(::mkdir(staging::RecordsDir(store).c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((staging::RecordsDir(store) + "/r").c_str(), 0755), 0);
  WriteWholeFile(staging::RecordsDir(store) + "/r/label", "7\n");

  for (const bool always_open : {false, true}) {
    SCOPED_TRACE(always_open ? "-o ro,open" : "-o ro");
    Mount m;
    ASSERT_EQ(m.Start({d.src}, {"-d", "-o", "staging_dir=" + store + ",output_dir=" + out, "-o",
                                always_open ? "ro,open" : "ro"}),
              absl::OkStatus());
    auto walked = WalkTree(m.mountpoint());
    ASSERT_EQ(walked.count("staging/r/label"), 1u);
    EXPECT_EQ(walked["staging/r/label"].content, "7\n");  // read without a handle
    for (const char* rel : {"staging/r/label", "staging/r", "staging"}) walked.erase(rel);
    EXPECT_EQ(CompareTrees(d.expected, walked), 0u);
    // Again, without staging (its attributes time out after a second).
    auto walk_shards = [&] { return WalkShardsCountingOps(m, d.expected); };
    const FileOpCounts first = walk_shards();
    const FileOpCounts second = walk_shards();
    if (always_open) {
      EXPECT_GE(first.open, d.files);
      EXPECT_GT(second.open, first.open);
    } else {
      EXPECT_LE(first.open, 1u);
      EXPECT_LE(first.flush, 1u);
      EXPECT_EQ(first.release, 0u);
      // Everything is in the kernel's caches now; a read-only mount does
      // not even invalidate atimes.
      ExpectWarmWalkServedByTheKernel(first, second);
      EXPECT_EQ(second.getattr, first.getattr) << second;
    }
    const int fd = ::open(m.path("staging/new").c_str(), O_WRONLY | O_CREAT, 0644);
    EXPECT_LT(fd, 0);
    if (fd >= 0) ::close(fd);
    EXPECT_EQ(errno, EROFS);
    EXPECT_NE(::mkdir(m.path("staging/d").c_str(), 0755), 0);
    EXPECT_EQ(errno, EROFS);
    std::string stop_err;
    EXPECT_EQ(m.Stop(&stop_err), 0) << stop_err;
    EXPECT_EQ(ReadWholeFile(staging::RecordsDir(store) + "/r/label"), "7\n")
        << "a read-only mount packed";
    // Nor did it write, create or lock anything in the store (README, "-o ro").
    EXPECT_NE(::access(staging::PackReportFile(store).c_str(), F_OK), 0)
        << "a read-only mount wrote";
    EXPECT_NE(::access(staging::LockFile(store).c_str(), F_OK), 0)
        << "a read-only mount took the lock";
  }
  EXPECT_EQ(WalkTree(out, false).size(), 0u) << "a read-only mount wrote shards";
}

// The default read-write mount opens files without the daemon, as a
// read-only one does (issue 36: since issue 21, item 19, it had answered
// every OPEN, so every open, flush and release of a record file took a
// round trip): a walk that reads every file sends at most one OPEN and one
// FLUSH and no RELEASE, and a warm walk sends the daemon exactly the
// requests a read-only mount's warm walk sends (both counted here, with
// -d; once the GETATTRs that follow its first reads are asked: a
// read-write mount's kernel drops the atime it has of what it read), and
// warm reads of every file the way `cat` makes them (open, fstat, read,
// close) send nothing, on both. What is written still reaches the daemon:
// root opens a plain file for writing, but its write() fails with EROFS
// and the bytes stay (record_writes_test.cc has the shared mappings,
// record_edit_test.cc the edits of record files). Staged files have no
// handle: `echo hello > label` succeeds and flags the file (issue 34, item
// 6), an existing file rewritten (truncated by SETATTR, written without a
// handle) holds the new bytes, no FLUSH is sent, and the record packs on
// unmount. -o open sends every OPEN (a plain file's writable open fails
// with EROFS at once) and gives staged files handles, checked at close()
// (FLUSH), which never fails.
TEST(GeneratedMountOptionsTest, ReadWriteMountOpensFilesWithoutTheDaemonToo) {
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  const GeneratedSource d(tmp, kSeed + 5);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  const std::string store = tmp.Subdir("store"), out = tmp.Subdir("out");
  auto minus = [](const FileOpCounts& a, const FileOpCounts& b) {
    return FileOpCounts{a.open - b.open,       a.flush - b.flush,    a.release - b.release,
                        a.getattr - b.getattr, a.read - b.read,      a.lookup - b.lookup,
                        a.forget - b.forget,   a.setattr - b.setattr};
  };
  // Reads every file of the shards as `cat` does (open, fstat, read,
  // close), twice, and returns what the second pass sent the daemon.
  auto warm_cats = [&](const Mount& m) {
    FileOpCounts before{};
    for (int pass = 0; pass < 2; ++pass) {
      before = CountFileOps(m.Stderr());
      for (const auto& [rel, node] : d.expected) {
        if (node.is_dir || rel.rfind("staging", 0) == 0) continue;
        const int fd = ::open(m.path(rel).c_str(), O_RDONLY | O_CLOEXEC);
        EXPECT_GE(fd, 0) << rel << ": " << std::strerror(errno);
        if (fd < 0) continue;
        struct stat st;
        EXPECT_EQ(::fstat(fd, &st), 0) << rel;
        std::string got(static_cast<size_t>(st.st_size) + 1, '\0');
        const ssize_t n = ::read(fd, got.data(), got.size());
        ::close(fd);
        EXPECT_EQ(n, static_cast<ssize_t>(node.content.size())) << rel;
        if (n >= 0) {
          EXPECT_TRUE(got.substr(0, static_cast<size_t>(n)) == node.content) << rel;
        }
      }
    }
    return minus(CountFileOps(m.Stderr()), before);
  };
  FileOpCounts ro_warm{}, ro_cats{};  // what a read-only mount's warm walk and cats send
  {
    Mount m;
    ASSERT_EQ(m.Start({d.src}, {"-d", "-o", "ro,staging_dir=" + tmp.path() + "/no-store"}),
              absl::OkStatus());
    const FileOpCounts first = WalkShardsCountingOps(m, d.expected);
    ro_warm = minus(WalkShardsCountingOps(m, d.expected), first);
    ro_cats = warm_cats(m);
    std::string stop_err;
    EXPECT_EQ(m.Stop(&stop_err), 0) << stop_err;
  }
  EXPECT_EQ(ro_cats.open + ro_cats.flush + ro_cats.release + ro_cats.getattr + ro_cats.read +
                ro_cats.lookup + ro_cats.setattr,
            0u)
      << ro_cats;

  for (const bool always_open : {false, true}) {
    SCOPED_TRACE(always_open ? "-o open" : "default");
    Mount m;
    const std::string opts = "staging_dir=" + store + ",output_dir=" + out + ",prefix=p" +
                             (always_open ? "1,open" : "0");
    ASSERT_EQ(m.Start({d.src}, {"-d", "-o", opts}), absl::OkStatus());
    auto walk_shards = [&] { return WalkShardsCountingOps(m, d.expected); };
    const FileOpCounts first = walk_shards();
    const FileOpCounts second = walk_shards();
    if (always_open) {
      EXPECT_GE(first.open, d.files);
      EXPECT_GT(second.open, first.open);
      EXPECT_EQ(second.flush, 0u) << "shard files are opened FOPEN_NOFLUSH";
      ASSERT_NO_FATAL_FAILURE(ExpectWarmReadsFromThePageCache(first, second));
    } else {
      EXPECT_LE(first.open, 1u) << first;
      EXPECT_LE(first.flush, 1u) << first;
      EXPECT_EQ(first.release, 0u) << first;
      ExpectWarmWalkServedByTheKernel(first, second);
      // The second walk also asks once for the attributes of each file the
      // first one read from the daemon (a read-write mount's kernel drops
      // the atime it has of a file read, when the read's reply arrives:
      // for a readahead the kernel sent on its own that may be after the
      // second walk asked, so a third walk may still ask for a few and
      // nothing else); the fourth asks what a read-only mount's second does.
      const FileOpCounts third = walk_shards();
      const FileOpCounts settle = minus(third, second);
      EXPECT_EQ(settle.open + settle.read + settle.lookup + settle.setattr, 0u) << settle;
      EXPECT_LE(settle.getattr, d.files) << settle;
      const FileOpCounts warm = minus(walk_shards(), third);
      EXPECT_EQ(warm.open, ro_warm.open) << "read-write: " << warm << "; read-only: " << ro_warm;
      EXPECT_EQ(warm.flush, ro_warm.flush) << "read-write: " << warm << "; read-only: " << ro_warm;
      EXPECT_EQ(warm.release, ro_warm.release)
          << "read-write: " << warm << "; read-only: " << ro_warm;
      EXPECT_EQ(warm.getattr, ro_warm.getattr)
          << "read-write: " << warm << "; read-only: " << ro_warm;
      EXPECT_EQ(warm.lookup, ro_warm.lookup)
          << "read-write: " << warm << "; read-only: " << ro_warm;
      EXPECT_EQ(warm.setattr, ro_warm.setattr)
          << "read-write: " << warm << "; read-only: " << ro_warm;
      const FileOpCounts cats = warm_cats(m);
      EXPECT_EQ(cats.open, ro_cats.open) << "read-write: " << cats << "; read-only: " << ro_cats;
      EXPECT_EQ(cats.flush, ro_cats.flush) << "read-write: " << cats << "; read-only: " << ro_cats;
      EXPECT_EQ(cats.release, ro_cats.release)
          << "read-write: " << cats << "; read-only: " << ro_cats;
      EXPECT_EQ(cats.getattr, ro_cats.getattr)
          << "read-write: " << cats << "; read-only: " << ro_cats;
      EXPECT_EQ(cats.lookup, ro_cats.lookup)
          << "read-write: " << cats << "; read-only: " << ro_cats;
      EXPECT_EQ(cats.setattr, ro_cats.setattr)
          << "read-write: " << cats << "; read-only: " << ro_cats;
    }
    for (const auto& [rel, node] : d.expected) {
      // Files of records (a folder above them names its record) take
      // edits (record_edit_test.cc); plain files do not.
      bool in_record = false;
      for (std::string up = rel; !in_record && up.find('/') != std::string::npos;) {
        up = up.substr(0, up.rfind('/'));
        in_record = ::getxattr(m.path(up).c_str(), "user.tfrecordfs.record", nullptr, 0) >= 0;
      }
      if (node.is_dir || in_record) continue;
      const int rdwr = ::open(m.path(rel).c_str(), O_RDWR);
      const int open_err = errno;
      if (always_open) {
        EXPECT_LT(rdwr, 0) << rel << " opened for writing";
        EXPECT_EQ(open_err, EROFS) << rel;
      } else if (rdwr < 0) {
        // Root opens any file O_RDWR; others meet its mode (0444).
        EXPECT_NE(::geteuid(), 0u) << rel << ": " << std::strerror(open_err);
        EXPECT_EQ(open_err, EACCES) << rel;
      } else {
        const ssize_t wrote = ::pwrite(rdwr, "x", 1, 0);
        const int write_err = errno;
        EXPECT_EQ(wrote, -1) << rel << " written";
        EXPECT_EQ(write_err, EROFS) << rel;
      }
      if (rdwr >= 0) ::close(rdwr);
      EXPECT_EQ(ReadWholeFile(m.path(rel)), node.content) << rel;
    }
    const std::string r = ShellQuote(m.path("staging/r"));
    CommandResult bad =
        Shell("bash -c " + ShellQuote("mkdir " + r + " && echo hello > " + r + "/label"));
    EXPECT_EQ(bad.exit_code, 0) << bad.err;
    CommandResult good = Shell("echo 3 > " + r + "/label && echo 41 > " + r + "/label && " +
                               "echo 5 >> " + r + "/label && cat " + r + "/label");
    EXPECT_EQ(good.exit_code, 0) << good.err;
    EXPECT_EQ(good.out, "41\n5\n");
    CommandResult partial = Shell("bash -c " + ShellQuote("printf 5x > " + r + "/label"));
    EXPECT_EQ(partial.exit_code, 0) << partial.err;
    EXPECT_EQ(ReadWholeFile(staging::RecordsDir(store) + "/r/label"), "5x");
    ASSERT_EQ(Shell("echo 41 > " + r + "/label").exit_code, 0);
    if (always_open) {
      EXPECT_GE(CountFileOps(m.Stderr()).flush, 4u);
    } else {
      EXPECT_LE(CountFileOps(m.Stderr()).flush, 1u) << "the first, answered ENOSYS";
    }
    std::string stop_err;
    EXPECT_EQ(m.Stop(&stop_err), 0) << stop_err << m.Stderr();
    EXPECT_NE(::access((staging::RecordsDir(store) + "/r").c_str(), F_OK), 0) << "not packed";
  }
  EXPECT_EQ(WalkTree(out, false).size(), 2u) << "one shard per mount";
}

}  // namespace
}  // namespace tfrecordfs::mount_test
