// The persistent index: .tfri encoding, and the store's rules for when a
// saved index may be used (valid), extended (grown) or must be rebuilt.
#include "tfrecordfs/index/index_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/index_files.h"
#include "testing/shard.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/index/index_file.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/record/writer.h"

namespace tfrecordfs::index {
namespace {

std::string Framed(int first, int count, size_t size = 10) {
  std::string out;
  for (int i = first; i < first + count; ++i) {
    record::AppendFramed(&out, std::string(size + static_cast<size_t>(i % 7), 'a' + i % 26));
  }
  return out;
}

void WriteBytes(const std::string& path, const std::string& bytes, int flags = O_TRUNC) {
  auto fd = OpenFile(path, O_WRONLY | O_CREAT | flags, 0644);
  ASSERT_TRUE(fd.ok()) << fd.status();
  ASSERT_TRUE(WriteFull(fd->get(), bytes.data(), bytes.size(), path).ok());
}

std::string ReadBytes(const std::string& path) {
  auto s = ReadFileToString(path);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : "";
}

// Overwrites bytes in place and puts the old mtime back, so only the
// fingerprint can notice.
void PatchKeepingMtime(const std::string& path, uint64_t offset, const std::string& bytes) {
  struct stat before;
  ASSERT_EQ(0, ::stat(path.c_str(), &before));
  auto fd = OpenFile(path, O_WRONLY);
  ASSERT_TRUE(fd.ok());
  ASSERT_EQ(static_cast<ssize_t>(bytes.size()),
            ::pwrite(fd->get(), bytes.data(), bytes.size(), static_cast<off_t>(offset)));
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(0, ::futimens(fd->get(), times));
}

class IndexStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    dir_ = tmp_.path();
    shard_ = dir_ + "/data-00000-of-00001.tfrecord";
    cache_ = dir_ + "/cache";
    WriteBytes(shard_, Framed(0, 50));
  }

  StoreOptions CacheOnly() const {
    StoreOptions o;
    o.cache_dir = cache_;
    o.durable = false;
    return o;
  }

  // Loads `path` through `store`; returns the index and fills *info.
  std::shared_ptr<const ShardIndex> Load(IndexStore& store, LoadInfo* info,
                                         const std::string& path = "") {
    auto idx =
        test::LoadShardIndex(store, path.empty() ? shard_ : path, source::Codec::kNone, info);
    EXPECT_TRUE(idx.ok()) << idx.status();
    return idx.ok() ? *idx : nullptr;
  }

  // The offsets a full walk gives today.
  std::vector<uint64_t> FullWalk(const std::string& path = "") {
    const std::string p = path.empty() ? shard_ : path;
    auto fd = OpenFile(p, O_RDONLY);
    EXPECT_TRUE(fd.ok());
    struct stat st;
    EXPECT_EQ(0, ::fstat(fd->get(), &st));
    auto idx = BuildShardIndex(fd->get(), p, st);
    EXPECT_TRUE(idx.ok());
    return (*idx)->offsets();
  }

  std::string CacheFile(IndexStore& store) {
    char real[PATH_MAX];
    EXPECT_NE(nullptr, ::realpath(shard_.c_str(), real));
    return store.CachePath(real);
  }

  // Walks once (saving the index), then expects the second load to come
  // from the cache.
  void Prime() {
    IndexStore store(CacheOnly());
    LoadInfo info;
    ASSERT_NE(nullptr, Load(store, &info));
    ASSERT_EQ(IndexSource::kWalked, info.source);
    ASSERT_TRUE(info.save_status.ok()) << info.save_status;
  }

  // Walks the shard through a store that writes its index into `shared`.
  void WriteShared(const std::string& shared) {
    StoreOptions w;
    w.shared_dir = shared;
    w.write_shared = true;
    IndexStore writer(w);
    LoadInfo info;
    ASSERT_NE(nullptr, Load(writer, &info));
    ASSERT_TRUE(info.save_status.ok()) << info.save_status;
    EXPECT_EQ(shared + "/data-00000-of-00001.tfrecord.tfri", info.stored_path);
  }

  // Loads the shard through a new store with `o`: what the load says, and
  // the index's offsets in *offsets.
  LoadInfo LoadWith(const StoreOptions& o, std::vector<uint64_t>* offsets = nullptr) {
    IndexStore store(o);
    LoadInfo info;
    auto idx = Load(store, &info);
    if (idx && offsets) *offsets = idx->offsets();
    return info;
  }
  IndexSource LoadAgain(std::vector<uint64_t>* offsets = nullptr, std::string* why = nullptr) {
    const LoadInfo info = LoadWith(CacheOnly(), offsets);
    if (why) *why = info.why_walked;
    return info.source;
  }

  test::TempDir tmp_{"index_store_test"};
  std::string dir_, shard_, cache_;
};

TEST(IndexFileTest, RoundTrip) {
  IndexFile f;
  f.file_size = 1000;
  f.mtime_ns = -5;  // before the epoch: signed
  std::memcpy(f.first_header.data(), "0123456789ab", 12);
  std::memcpy(f.last_header.data(), "ba9876543210", 12);
  f.path = "/data/x.tfrecord";
  f.walk.offsets = {0, 16, 100, 900};
  // Consistent with a walk: it stopped at damage at 900.
  f.walk.problems = {{100, "length CRC mismatch"}, {900, ""}};
  const std::string bytes = EncodeIndexFile(f);
  EXPECT_EQ(0u, (kIndexHeaderSize) % 8);
  EXPECT_EQ(std::string(kIndexMagic, 8), bytes.substr(0, 8));
  auto g = DecodeIndexFile(bytes);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(f.file_size, g->file_size);
  EXPECT_EQ(f.mtime_ns, g->mtime_ns);
  EXPECT_EQ(f.first_header, g->first_header);
  EXPECT_EQ(f.last_header, g->last_header);
  EXPECT_EQ(f.path, g->path);
  EXPECT_EQ(f.walk.offsets, g->walk.offsets);
  ASSERT_EQ(2u, g->walk.problems.size());
  EXPECT_EQ(100u, g->walk.problems[0].offset);
  EXPECT_EQ("length CRC mismatch", g->walk.problems[0].message);
  EXPECT_EQ(3u, g->num_records());
}

// The index of a 64-byte shard of two 32-byte records.
IndexFile TwoRecords(std::string path = "") {
  IndexFile f;
  f.file_size = 64;
  f.path = std::move(path);
  f.walk.offsets = {0, 32, 64};
  return f;
}

TEST(IndexFileTest, EveryTruncationAndEveryFlippedByteIsRejected) {
  IndexFile f = TwoRecords("p");
  f.walk.problems = {{3, "x"}};
  const std::string bytes = EncodeIndexFile(f);
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(DecodeIndexFile(bytes.substr(0, n)).ok()) << "truncated to " << n;
  }
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] ^= 0x10;
    EXPECT_FALSE(DecodeIndexFile(bad).ok()) << "byte " << i;
  }
  // Bytes after the main part are the windows area (read on demand, with
  // their own checksums): the main part decodes alone.
  EXPECT_TRUE(DecodeIndexFile(bytes + "x").ok());
}

// A file whose CRC is right but whose content is not: the structural checks
// must still hold.
std::string WithFixedCrc(std::string bytes) {
  bytes.resize(bytes.size() - 4);
  PutFixed32(&bytes, crc32c::Value(bytes.data(), bytes.size()));
  return bytes;
}

TEST(IndexFileTest, OtherVersionFlagsAndBadOffsetsAreRejected) {
  const std::string good = EncodeIndexFile(TwoRecords());
  std::string v2 = good;
  EncodeFixed32(v2.data() + 8, kIndexVersion + 1);
  auto d = DecodeIndexFile(WithFixedCrc(v2));
  EXPECT_TRUE(absl::IsFailedPrecondition(d.status())) << d.status();
  std::string flags = good;
  EncodeFixed32(flags.data() + 12, 1);
  EXPECT_FALSE(DecodeIndexFile(WithFixedCrc(flags)).ok());
  std::string backwards = good;
  EncodeFixed64(backwards.data() + kIndexHeaderSize + 8, 70);  // 0, 70, 64
  EXPECT_FALSE(DecodeIndexFile(WithFixedCrc(backwards)).ok());
  std::string huge = good;
  EncodeFixed64(huge.data() + 56, uint64_t{1} << 61);  // record count
  EXPECT_FALSE(DecodeIndexFile(WithFixedCrc(huge)).ok());
}

// Issue 15, item 2: an index whose CRC is right (EncodeIndexFile computes
// it) but whose offsets no walk could have produced is refused.
TEST_F(IndexStoreTest, OffsetsNoWalkCouldGiveAreRefusedDespiteTheirCrc) {
  const std::vector<uint64_t> walk = FullWalk();
  ASSERT_EQ(51u, walk.size());
  struct stat st;
  ASSERT_EQ(0, ::stat(shard_.c_str(), &st));
  IndexFile good;
  good.file_size = static_cast<uint64_t>(st.st_size);
  good.path = shard_;
  good.walk.file_size = good.file_size;
  good.walk.offsets = walk;
  ASSERT_TRUE(DecodeIndexFile(EncodeIndexFile(good)).ok());

  struct Case {
    const char* name;
    std::function<void(IndexFile*)> corrupt;
    const char* why;  // part of the error message
  };
  const std::vector<Case> cases = {
      {"first offset dropped", [](IndexFile* f) { f->walk.offsets.erase(f->walk.offsets.begin()); },
       "not 0"},
      {"last offset dropped", [](IndexFile* f) { f->walk.offsets.pop_back(); },
       "not at the shard's end"},
      {"an offset repeated",
       [](IndexFile* f) {
         f->walk.offsets.insert(f->walk.offsets.begin() + 7, f->walk.offsets[7]);
       },
       "do not increase"},
      {"a record split",
       [](IndexFile* f) {
         f->walk.offsets.insert(f->walk.offsets.begin() + 8, f->walk.offsets[7] + 8);
       },
       "spans only 8 bytes"},
      // A "grown" base: the index claims the shard ended inside its last
      // record, so the store would walk on from a non-boundary.
      {"fake grown base",
       [](IndexFile* f) {
         f->walk.offsets.back() = f->walk.offsets[f->walk.offsets.size() - 2] + 4;
         f->file_size = f->walk.file_size = f->walk.offsets.back();
       },
       "spans only 4 bytes"},
      {"a problem past the end",
       [](IndexFile* f) {
         f->walk.problems.push_back({f->file_size + 1, "x"});
       },
       "outside the shard"},
      {"an endless problem message",
       [](IndexFile* f) {
         f->walk.problems.push_back({0, std::string(kMaxProblemMessage + 1, 'x')});
       },
       "bytes long"},
  };
  for (const Case& c : cases) {
    IndexFile bad = good;
    c.corrupt(&bad);
    auto d = DecodeIndexFile(EncodeIndexFile(bad));
    ASSERT_FALSE(d.ok()) << c.name;
    EXPECT_TRUE(absl::IsDataLoss(d.status())) << c.name << ": " << d.status();
    EXPECT_NE(std::string(d.status().message()).find(c.why), std::string::npos)
        << c.name << ": " << d.status();
  }

  // The same corruptions in the cache: the shard is walked, never misread.
  for (const Case& c : cases) {
    IndexStore store(CacheOnly());
    IndexFile bad = good;
    char real[PATH_MAX];
    ASSERT_NE(nullptr, ::realpath(shard_.c_str(), real));
    bad.path = real;
    bad.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    c.corrupt(&bad);
    ASSERT_TRUE(::mkdir(cache_.c_str(), 0755) == 0 || errno == EEXIST);
    WriteBytes(CacheFile(store), EncodeIndexFile(bad));
    LoadInfo info;
    auto idx = Load(store, &info);
    ASSERT_NE(nullptr, idx) << c.name;
    EXPECT_EQ(IndexSource::kWalked, info.source) << c.name;
    EXPECT_EQ(walk, idx->offsets()) << c.name;
  }
}

// What a damaged shard's walk records still passes those checks.
TEST_F(IndexStoreTest, DamagedWalksPassTheInvariants) {
  // Walks `bytes` as the shard and round-trips the walk through an index file.
  auto encode_walk = [&](const std::string& bytes) -> absl::Status {
    WriteBytes(shard_, bytes);
    auto fd = OpenFile(shard_, O_RDONLY);
    if (!fd.ok()) return fd.status();
    auto walk = record::WalkHeaders(fd->get(), shard_, bytes.size());
    if (!walk.ok()) return walk.status();
    IndexFile f;
    f.file_size = bytes.size();
    f.walk = *walk;
    return DecodeIndexFile(EncodeIndexFile(f)).status();
  };
  const std::string clean = Framed(0, 20);
  for (size_t at = 0; at < clean.size(); at += 7) {
    std::string bytes = clean;
    bytes[at] ^= 0x40;
    const absl::Status s = encode_walk(bytes);
    EXPECT_TRUE(s.ok()) << "flipped byte " << at << ": " << s;
  }
  for (size_t cut = 1; cut < clean.size(); cut += 5) {
    const absl::Status s = encode_walk(clean.substr(0, cut));
    EXPECT_TRUE(s.ok()) << "cut at " << cut << ": " << s;
  }
}

// Issue 15, item 3: nothing named like an index file is read blindly.
TEST_F(IndexStoreTest, FifoInPlaceOfAnIndexIsSkippedWithoutWaiting) {
  IndexStore store(CacheOnly());
  ASSERT_EQ(0, ::mkdir(cache_.c_str(), 0755));
  // Opening a FIFO for reading without O_NONBLOCK waits for a writer: the
  // test would hang here without the fix.
  ASSERT_EQ(0, ::mkfifo(CacheFile(store).c_str(), 0644));
  LoadInfo info;
  auto idx = Load(store, &info);
  ASSERT_NE(nullptr, idx);
  EXPECT_EQ(IndexSource::kWalked, info.source);
  EXPECT_NE(info.why_walked.find("not a regular file"), std::string::npos) << info.why_walked;
}

TEST_F(IndexStoreTest, IndexFileOfAnotherSizeThanItsHeaderImpliesIsNotRead) {
  Prime();
  IndexStore store(CacheOnly());
  const std::string file = CacheFile(store);
  const std::string good = ReadBytes(file);
  // A sparse 40 GB file: refused by its size, before anything is allocated
  // for it (the old reader resized a string to st_size: std::bad_alloc).
  ASSERT_EQ(0, ::truncate(file.c_str(), off_t{40} << 30));
  LoadInfo info;
  auto idx = Load(store, &info);
  ASSERT_NE(nullptr, idx);
  EXPECT_EQ(IndexSource::kWalked, info.source);
  EXPECT_NE(info.why_walked.find("but its header implies"), std::string::npos) << info.why_walked;
  // All zeros (no header at all): refused by its magic.
  ASSERT_EQ(0, ::unlink(file.c_str()));
  WriteBytes(file, "");
  ASSERT_EQ(0, ::truncate(file.c_str(), off_t{40} << 30));
  idx = Load(store, &info);
  ASSERT_NE(nullptr, idx);
  EXPECT_EQ(IndexSource::kWalked, info.source);
  EXPECT_NE(info.why_walked.find("bad magic"), std::string::npos) << info.why_walked;
  // One byte short or long of an exact size: refused the same way.
  for (const std::string& bytes : {good.substr(0, good.size() - 1), good + "x"}) {
    WriteBytes(file, bytes);
    idx = Load(store, &info);
    ASSERT_NE(nullptr, idx);
    EXPECT_EQ(IndexSource::kWalked, info.source);
    EXPECT_NE(info.why_walked.find("but its header implies"), std::string::npos) << info.why_walked;
  }
}

TEST(IndexFileTest, SizeRangeFollowsTheHeader) {
  IndexFile f = TwoRecords("/p");
  f.walk.problems = {{40, "abc"}};
  const std::string bytes = EncodeIndexFile(f);
  auto r = IndexFileSizeRange(bytes.substr(0, kIndexHeaderSize), 64);
  ASSERT_TRUE(r.ok()) << r.status();
  // Message lengths unknown: 0 to the bound (and 0-7 bytes of padding).
  EXPECT_LE(r->min, bytes.size());
  EXPECT_GE(r->max, bytes.size());
  EXPECT_EQ(r->min + kMaxProblemMessage + 7, r->max);
  EXPECT_EQ(r->windows, 0u);
  // An index made for a longer shard than the one at hand is useless.
  EXPECT_FALSE(IndexFileSizeRange(bytes.substr(0, kIndexHeaderSize), 63).ok());
  EXPECT_FALSE(IndexFileSizeRange(bytes.substr(0, kIndexHeaderSize - 1), 64).ok());
  EXPECT_FALSE(IndexFileSizeRange(std::string(kIndexHeaderSize, '\0'), 64).ok());
}

TEST_F(IndexStoreTest, SaveThenLoadFromCache) {
  Prime();
  std::vector<uint64_t> offsets;
  EXPECT_EQ(IndexSource::kCache, LoadAgain(&offsets));
  EXPECT_EQ(FullWalk(), offsets);
  EXPECT_EQ(51u, offsets.size());
}

TEST_F(IndexStoreTest, DamagedShardKeepsItsProblems) {
  std::string bytes = Framed(0, 10);
  bytes[40] ^= 1;  // somewhere in record 1 or 2's framing
  WriteBytes(shard_, bytes);
  Prime();
  IndexStore store(CacheOnly());
  LoadInfo info;
  auto idx = Load(store, &info);
  ASSERT_NE(nullptr, idx);
  EXPECT_EQ(IndexSource::kCache, info.source);
  EXPECT_EQ(FullWalk(), idx->offsets());
}

TEST_F(IndexStoreTest, SizeChangeRebuilds) {
  Prime();
  WriteBytes(shard_, Framed(0, 49));  // shrank
  std::vector<uint64_t> offsets;
  std::string why;
  EXPECT_EQ(IndexSource::kWalked, LoadAgain(&offsets, &why));
  EXPECT_NE(std::string::npos, why.find("size changed")) << why;
  EXPECT_EQ(FullWalk(), offsets);
  EXPECT_EQ(IndexSource::kCache, LoadAgain());  // the rebuilt index was saved
}

TEST_F(IndexStoreTest, MtimeChangeRebuilds) {
  Prime();
  const struct timespec times[2] = {{0, UTIME_OMIT}, {12345, 678}};
  ASSERT_EQ(0, ::utimensat(AT_FDCWD, shard_.c_str(), times, 0));
  std::string why;
  EXPECT_EQ(IndexSource::kWalked, LoadAgain(nullptr, &why));
  EXPECT_NE(std::string::npos, why.find("mtime")) << why;
}

TEST_F(IndexStoreTest, FirstHeaderChangeRebuilds) {
  Prime();
  // Same size, same mtime, another first record length (and CRC).
  std::string other = Framed(1, 50);
  other.resize(ReadBytes(shard_).size());
  PatchKeepingMtime(shard_, 0, other.substr(0, 12));
  std::string why;
  EXPECT_EQ(IndexSource::kWalked, LoadAgain(nullptr, &why));
  // The write changed the ctime too, which is checked first.
  EXPECT_TRUE(why.find("header") != std::string::npos || why.find("ctime") != std::string::npos)
      << why;
}

// Issue 15, item 6: another file of the same size with the mtime copied
// over (touch -r) is still another file: its inode and ctime differ.
TEST_F(IndexStoreTest, ReplacedBySameSizeSameMtimeRebuilds) {
  Prime();
  const std::vector<uint64_t> before = FullWalk();
  struct stat st;
  ASSERT_EQ(0, ::stat(shard_.c_str(), &st));
  // Same size, records cut differently: 2 records where there were more.
  std::string other;
  record::AppendFramed(&other, std::string(static_cast<size_t>(st.st_size) - 32 - 5, 'x'));
  record::AppendFramed(&other, "yyyyy");
  ASSERT_EQ(other.size(), static_cast<size_t>(st.st_size));
  const std::string tmp = shard_ + ".new";
  WriteBytes(tmp, other);
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(0, ::utimensat(AT_FDCWD, tmp.c_str(), times, 0));
  ASSERT_EQ(0, ::rename(tmp.c_str(), shard_.c_str()));
  std::vector<uint64_t> now;
  std::string why;
  EXPECT_EQ(IndexSource::kWalked, LoadAgain(&now, &why));
  EXPECT_NE(std::string::npos, why.find("inode or ctime")) << why;
  EXPECT_EQ(now.size(), 3u);
  EXPECT_NE(now, before);
}

// Issue 15, item 2: a forged index (offsets moved, CRC recomputed, the walk
// invariants kept) is caught by the headers sampled at load.
TEST_F(IndexStoreTest, ForgedMiddleOffsetIsCaughtBySampledHeaders) {
  Prime();
  IndexStore store(CacheOnly());
  const std::string file = CacheFile(store);
  ASSERT_NO_FATAL_FAILURE(test::EditIndexFile(file, [](IndexFile* f) {
    const uint64_t n = f->num_records();
    ASSERT_GE(n, 4u);
    f->walk.offsets[n / 2] += 1;  // still increasing, every span >= 16
  }));
  ASSERT_TRUE(DecodeIndexFile(ReadBytes(file)).ok());
  std::vector<uint64_t> now;
  std::string why;
  EXPECT_EQ(IndexSource::kWalked, LoadAgain(&now, &why));
  EXPECT_NE(std::string::npos, why.find("does not span what the index says")) << why;
  EXPECT_EQ(FullWalk(), now);
}

TEST_F(IndexStoreTest, LastHeaderChangeRebuilds) {
  Prime();
  const std::vector<uint64_t> offsets = FullWalk();
  PatchKeepingMtime(shard_, offsets[offsets.size() - 2] + 3, "\x7f");
  std::vector<uint64_t> now;
  EXPECT_EQ(IndexSource::kWalked, LoadAgain(&now));
  EXPECT_EQ(FullWalk(), now);
}

TEST_F(IndexStoreTest, IndexMadeForAnotherPathRebuilds) {
  Prime();
  IndexStore store(CacheOnly());
  // Another shard's cache file lands where this shard's belongs (a hash
  // collision, or a copied cache).
  const std::string other = dir_ + "/other.tfrecord";
  WriteBytes(other, ReadBytes(shard_));
  LoadInfo info;
  ASSERT_NE(nullptr, Load(store, &info, other));
  char real[PATH_MAX];
  ASSERT_NE(nullptr, ::realpath(other.c_str(), real));
  WriteBytes(CacheFile(store), ReadBytes(store.CachePath(real)));
  std::string why;
  EXPECT_EQ(IndexSource::kWalked, LoadAgain(nullptr, &why));
  EXPECT_NE(std::string::npos, why.find("made for")) << why;
}

TEST_F(IndexStoreTest, TornOrCorruptIndexFileRebuilds) {
  Prime();
  IndexStore store(CacheOnly());
  const std::string file = CacheFile(store);
  const std::string good = ReadBytes(file);
  for (const std::string& bad : {good.substr(0, good.size() / 2), std::string(),
                                 good.substr(0, good.size() - 1), std::string(good.size(), '\0')}) {
    WriteBytes(file, bad);
    std::vector<uint64_t> offsets;
    EXPECT_EQ(IndexSource::kWalked, LoadAgain(&offsets));
    EXPECT_EQ(FullWalk(), offsets);
    EXPECT_EQ(good, ReadBytes(file));  // rewritten
  }
  std::string flipped = good;
  flipped[kIndexHeaderSize + 20] ^= 4;  // an offset
  WriteBytes(file, flipped);
  EXPECT_EQ(IndexSource::kWalked, LoadAgain());
}

TEST_F(IndexStoreTest, GrownShardIsWalkedFromTheOldEnd) {
  Prime();
  WriteBytes(shard_, Framed(50, 30, 5000), O_APPEND);  // large records too
  std::vector<uint64_t> offsets;
  EXPECT_EQ(IndexSource::kGrown, LoadAgain(&offsets));
  EXPECT_EQ(FullWalk(), offsets);
  EXPECT_EQ(81u, offsets.size());
  EXPECT_EQ(IndexSource::kCache, LoadAgain(&offsets));
  EXPECT_EQ(FullWalk(), offsets);
}

TEST_F(IndexStoreTest, GrownShardWithDamagedTailIsWalkedInFull) {
  Prime();
  std::string tail = Framed(50, 5);
  tail[tail.size() / 2] ^= 0x55;
  tail += "xyz";  // stray bytes
  WriteBytes(shard_, tail, O_APPEND);
  std::vector<uint64_t> offsets;
  EXPECT_EQ(IndexSource::kWalked, LoadAgain(&offsets));
  EXPECT_EQ(FullWalk(), offsets);
}

TEST_F(IndexStoreTest, GrownAfterADamagedEndIsWalkedInFull) {
  // A shard caught mid-write: its last record is cut. Once complete, the old
  // walk's tail problem means no extension.
  const std::string full = Framed(0, 20);
  WriteBytes(shard_, full.substr(0, full.size() - 7));
  Prime();
  WriteBytes(shard_, full);
  std::vector<uint64_t> offsets;
  EXPECT_EQ(IndexSource::kWalked, LoadAgain(&offsets));
  EXPECT_EQ(FullWalk(), offsets);
  EXPECT_EQ(21u, offsets.size());
}

TEST_F(IndexStoreTest, GrownFromEmpty) {
  WriteBytes(shard_, "");
  Prime();
  WriteBytes(shard_, Framed(0, 3), O_APPEND);
  std::vector<uint64_t> offsets;
  EXPECT_EQ(IndexSource::kGrown, LoadAgain(&offsets));
  EXPECT_EQ(FullWalk(), offsets);
}

TEST_F(IndexStoreTest, UnwritableCacheIsTolerated) {
  WriteBytes(dir_ + "/file", "x");
  StoreOptions o;
  o.cache_dir = dir_ + "/file/cache";  // below a regular file: ENOTDIR even for root
  IndexStore store(o);
  for (int i = 0; i < 3; ++i) {
    LoadInfo info;
    auto idx = Load(store, &info);
    ASSERT_NE(nullptr, idx);
    EXPECT_EQ(FullWalk(), idx->offsets());
    EXPECT_EQ(IndexSource::kWalked, info.source);
    EXPECT_FALSE(info.save_status.ok());
  }
  EXPECT_EQ(3u, store.stats().save_failures);
}

TEST_F(IndexStoreTest, NoCacheDirMeansNoFiles) {
  IndexStore store(StoreOptions{});
  LoadInfo info;
  ASSERT_NE(nullptr, Load(store, &info));
  EXPECT_EQ(IndexSource::kWalked, info.source);
  EXPECT_TRUE(info.save_status.ok());
  EXPECT_TRUE(info.stored_path.empty());
}

TEST_F(IndexStoreTest, SharedDirIsPreferredAndNeverWritten) {
  const std::string shared = dir_ + "/shared";
  ASSERT_NO_FATAL_FAILURE(WriteShared(shared));
  Prime();  // the cache holds a valid index too
  StoreOptions o = CacheOnly();
  o.shared_dir = shared;
  IndexStore store(o);
  LoadInfo info;
  ASSERT_NE(nullptr, Load(store, &info));
  EXPECT_EQ(IndexSource::kSharedDir, info.source);
  EXPECT_EQ(1u, store.stats().from_shared);

  // A stale shared index falls back to the cache, which gets rebuilt; the
  // shared file is left as it was.
  const std::string shared_file = shared + "/data-00000-of-00001.tfrecord.tfri";
  const std::string before = ReadBytes(shared_file);
  WriteBytes(shard_, Framed(0, 49));
  ASSERT_NE(nullptr, Load(store, &info));
  EXPECT_EQ(IndexSource::kWalked, info.source);
  EXPECT_EQ(before, ReadBytes(shared_file));
  ASSERT_NE(nullptr, Load(store, &info));
  EXPECT_EQ(IndexSource::kCache, info.source);
}

TEST_F(IndexStoreTest, SharedDirServesTheSameDataAtAnotherPath) {
  const std::string shared = dir_ + "/shared";
  ASSERT_NO_FATAL_FAILURE(WriteShared(shared));
  // Another machine mounts a copy elsewhere (same bytes, same mtime).
  ASSERT_EQ(0, ::mkdir((dir_ + "/elsewhere").c_str(), 0755));
  const std::string copy = dir_ + "/elsewhere/data-00000-of-00001.tfrecord";
  ASSERT_EQ(0, std::system(("cp -p '" + shard_ + "' '" + copy + "'").c_str()));
  StoreOptions r;
  r.shared_dir = shared;
  IndexStore reader(r);
  LoadInfo info;
  ASSERT_NE(nullptr, Load(reader, &info, copy));
  EXPECT_EQ(IndexSource::kSharedDir, info.source);
}

TEST_F(IndexStoreTest, ForceWalksAndRewrites) {
  Prime();
  StoreOptions o = CacheOnly();
  o.force_walk = true;
  const LoadInfo info = LoadWith(o);
  EXPECT_EQ(IndexSource::kWalked, info.source);
  EXPECT_EQ("forced", info.why_walked);
  EXPECT_EQ(IndexSource::kCache, LoadAgain());
}

TEST_F(IndexStoreTest, SummaryCountsSources) {
  Prime();
  IndexStore store(CacheOnly());
  LoadInfo info;
  ASSERT_NE(nullptr, Load(store, &info));
  EXPECT_NE(std::string::npos, store.Summary().find("1 from the cache")) << store.Summary();
  EXPECT_EQ(50u, store.stats().records);
}

TEST(DefaultCacheDirTest, FollowsXdgThenHome) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const std::string saved_xdg = xdg ? xdg : "";
  ::setenv("XDG_CACHE_HOME", "/x/cache", 1);
  EXPECT_EQ("/x/cache/tfrecordfs/index", DefaultCacheDir());
  ::unsetenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::string saved_home = home ? home : "";
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ("/home/u/.cache/tfrecordfs/index", DefaultCacheDir());
  if (!saved_xdg.empty()) ::setenv("XDG_CACHE_HOME", saved_xdg.c_str(), 1);
  if (!saved_home.empty()) ::setenv("HOME", saved_home.c_str(), 1);
}

}  // namespace
}  // namespace tfrecordfs::index

namespace tfrecordfs::index {
namespace {

// Issue 12: `index --beside` keeps `<shard>.tfri` next to the shard, and
// any later load finds it there (another machine, no cache of its own).
TEST_F(IndexStoreTest, IndexBesideTheShardIsWrittenThenFound) {
  StoreOptions write = CacheOnly();
  write.write_beside = true;
  LoadInfo info = LoadWith(write);
  EXPECT_EQ(IndexSource::kWalked, info.source);
  ASSERT_TRUE(info.save_status.ok()) << info.save_status;
  EXPECT_EQ(info.stored_path, shard_ + kIndexSuffix);
  EXPECT_FALSE(std::filesystem::exists(cache_));  // the cache is not touched

  StoreOptions read;  // no cache at all
  IndexStore reader(read);
  ASSERT_NE(nullptr, Load(reader, &info));
  EXPECT_EQ(IndexSource::kBeside, info.source);
  EXPECT_EQ(reader.stats().from_beside, 1u);
  EXPECT_NE(reader.Summary().find("1 from beside the shards"), std::string::npos)
      << reader.Summary();

  read.beside = false;  // -o nobeside
  EXPECT_EQ(IndexSource::kWalked, LoadWith(read).source);
}

}  // namespace
}  // namespace tfrecordfs::index

namespace tfrecordfs::index {
namespace {

// Issue 15, item 2: an index others may write (beside the shard, or in an
// index_dir) can be verified against the header chain before it is used.
TEST_F(IndexStoreTest, VerifySharedFollowsTheHeaderChain) {
  StoreOptions write;
  write.write_beside = true;
  LoadWith(write);
  const std::string beside = shard_ + kIndexSuffix;
  ASSERT_NO_FATAL_FAILURE(test::EditIndexFile(beside, [](IndexFile* f) {
    f->walk.offsets[3] += 1;  // where the sampled headers do not look
  }));

  EXPECT_EQ(IndexSource::kBeside, LoadWith(StoreOptions{}).source);  // the samples cannot see it

  StoreOptions careful;
  careful.verify_shared = true;
  IndexStore verifies(careful);
  LoadInfo info;
  auto idx = Load(verifies, &info);
  ASSERT_NE(nullptr, idx);
  EXPECT_EQ(IndexSource::kWalked, info.source);
  EXPECT_NE(info.why_walked.find("header chain"), std::string::npos) << info.why_walked;
  EXPECT_EQ(idx->offsets(), FullWalk());
}

}  // namespace
}  // namespace tfrecordfs::index

namespace tfrecordfs::index {
namespace {

// A GZIP shard's index beside it, with one checkpoint's uncompressed offset
// moved by one record (equal-size records: the framing still checks out)
// and its CRC recomputed by the project's own index writer. Where another
// user could have written the file (writable by others here), a mount takes
// it untrusted (its checkpoints are checked before a read resumes at one);
// a file only the mounting user (or root) could have written is their word,
// as their cache is (issue 36: checking a trusted user's index_dir from the
// start of the stream read a whole shard before one deep record). `index
// --beside` and index_verify check every checkpoint either way and walk
// the shard again instead of calling the file valid.
TEST(IndexStoreCheckpoints, AForgedBesideCheckpointIsNeverVouchedFor) {
  test::TempDir tmp("forged-cp");
  const std::string shard = tmp.Join("data.tfrecord.gz");
  constexpr size_t kPayload = 300;
  ASSERT_NO_FATAL_FAILURE(
      test::WriteCompressibleShard(shard, source::Codec::kGzip, 3000, kPayload));
  auto load = [&](StoreOptions o, LoadInfo* info) {
    o.durable = false;
    o.span = 64 << 10;
    IndexStore store(o);
    auto idx = test::LoadShardIndex(store, shard, source::Codec::kGzip, info);
    EXPECT_TRUE(idx.ok()) << idx.status();
    return idx.ok() ? *idx : nullptr;
  };
  StoreOptions beside_writer;
  beside_writer.write_beside = true;
  LoadInfo info;
  ASSERT_NE(load(beside_writer, &info), nullptr);
  ASSERT_EQ(info.source, IndexSource::kWalked);
  const std::string beside = IndexStore::BesidePath(shard);
  ASSERT_NO_FATAL_FAILURE(test::ForgeMiddleCheckpoint(beside, kPayload + record::kFramingOverhead));

  StoreOptions mount;                           // beside read, nothing written
  ASSERT_EQ(::chmod(beside.c_str(), 0644), 0);  // the user's own
  auto idx = load(mount, &info);
  ASSERT_NE(idx, nullptr);
  EXPECT_EQ(info.source, IndexSource::kBeside);
  ASSERT_NE(idx->checkpoints(), nullptr);
  EXPECT_TRUE(idx->checkpoints()->trusted);
  ASSERT_EQ(::chmod(beside.c_str(), 0666), 0);  // others may write it
  idx = load(mount, &info);
  ASSERT_NE(idx, nullptr);
  EXPECT_EQ(info.source, IndexSource::kBeside);
  ASSERT_NE(idx->checkpoints(), nullptr);
  EXPECT_FALSE(idx->checkpoints()->trusted);

  StoreOptions verify = mount;
  verify.verify_shared = true;  // -o index_verify
  idx = load(verify, &info);
  ASSERT_NE(idx, nullptr);
  EXPECT_EQ(info.source, IndexSource::kWalked) << "index_verify used the forged index";
  EXPECT_TRUE(idx->checkpoints()->trusted);

  idx = load(beside_writer, &info);  // `tfrecordfs index --beside`
  ASSERT_NE(idx, nullptr);
  EXPECT_EQ(info.source, IndexSource::kWalked) << "the forged index was called already valid";
  idx = load(beside_writer, &info);  // rewritten: now valid
  EXPECT_EQ(info.source, IndexSource::kBeside);
}

// A shard of `n` empty records written with the project's writer as
// `codec`: 16 bytes a record, which GZIP shrinks about 1000:1 (a bomb).
void WriteEmptyRecords(const std::string& path, uint64_t n, source::Codec codec) {
  auto fd = OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_TRUE(fd.ok()) << fd.status();
  record::ShardWriter w(std::move(*fd), path, {.codec = codec});
  for (uint64_t i = 0; i < n; ++i) ASSERT_TRUE(w.Append("").ok());
  ASSERT_TRUE(w.Close(false).ok());
}

absl::StatusOr<WalkedShard> WalkWithLimit(const std::string& path, source::Codec codec,
                                          uint64_t max_records, uint64_t* fed = nullptr) {
  auto fd = OpenFile(path, O_RDONLY);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return absl::InternalError("fstat");
  return WalkShard(
      fd->get(), path, static_cast<uint64_t>(st.st_size), codec, source::kDefaultSpan,
      [fed](uint64_t in) {
        if (fed) *fed = in;
      },
      WalkMode::kAuto, max_records);
}

TEST_F(IndexStoreTest, ShardsOverTheRecordLimitAreRefusedNamingPathLimitAndOffset) {
  for (source::Codec codec :
       {source::Codec::kNone, source::Codec::kGzip, source::Codec::kZlib, source::Codec::kSnappy}) {
    SCOPED_TRACE(source::CodecName(codec));
    const std::string path = dir_ + "/bomb.tfrecord";
    ASSERT_NO_FATAL_FAILURE(WriteEmptyRecords(path, 1000, codec));
    // At the limit: indexed.
    auto at = WalkWithLimit(path, codec, 1000);
    ASSERT_TRUE(at.ok()) << at.status();
    EXPECT_EQ(at->walk.offsets.size(), 1001u);
    // One over: refused, naming the shard, the limit and where it stopped
    // (record 999 is the 1000th and starts at 999 * 16).
    auto over = WalkWithLimit(path, codec, 999);
    ASSERT_FALSE(over.ok());
    EXPECT_TRUE(record::IsTooManyRecords(over.status())) << over.status();
    EXPECT_TRUE(absl::IsResourceExhausted(over.status()));
    const std::string msg(over.status().message());
    EXPECT_NE(msg.find(path + ": more than 999 records"), std::string::npos) << msg;
    EXPECT_NE(msg.find("byte offset 15984"), std::string::npos) << msg;
    EXPECT_NE(msg.find("max_shard_records"), std::string::npos) << msg;
  }
}

TEST_F(IndexStoreTest, ACompressedShardOverTheLimitIsNotInflatedFurther) {
  // 1M empty records: 16 MiB of framing in a GZIP file of about 16 KiB.
  const std::string path = dir_ + "/bomb.tfrecord.gz";
  ASSERT_NO_FATAL_FAILURE(WriteEmptyRecords(path, uint64_t{1} << 20, source::Codec::kGzip));
  struct stat st;
  ASSERT_EQ(0, ::stat(path.c_str(), &st));
  uint64_t fed = 0;
  auto over = WalkWithLimit(path, source::Codec::kGzip, 1000, &fed);
  ASSERT_TRUE(record::IsTooManyRecords(over.status())) << over.status();
  // The scan stopped in its first megabytes of output, long before the end
  // of the compressed file (progress is reported per MiB of input, so a
  // scan that went on would have reported the whole file at its end).
  EXPECT_LT(fed, static_cast<uint64_t>(st.st_size));
}

TEST_F(IndexStoreTest, StoredIndexesAndGrownTailsOverTheLimitAreRefused) {
  Prime();  // 50 records, walked and saved
  StoreOptions small = CacheOnly();
  small.max_records = 49;
  LoadInfo info;
  {
    IndexStore store(small);
    auto idx = test::LoadShardIndex(store, shard_, source::Codec::kNone, &info);
    EXPECT_TRUE(record::IsTooManyRecords(idx.status())) << idx.status();
  }
  // The shard grows by 10 records: the tail walk counts the old ones too.
  WriteBytes(shard_, Framed(50, 10), O_APPEND);
  small.max_records = 55;
  {
    IndexStore store(small);
    auto idx = test::LoadShardIndex(store, shard_, source::Codec::kNone, &info);
    EXPECT_TRUE(record::IsTooManyRecords(idx.status())) << idx.status();
  }
  small.max_records = 60;
  IndexStore enough(small);
  EXPECT_NE(nullptr, Load(enough, &info));
  EXPECT_EQ(info.source, IndexSource::kGrown);
}

}  // namespace
}  // namespace tfrecordfs::index
