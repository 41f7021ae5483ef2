// TFRecord framing: writer -> reader round trips (TEST_P over record-size
// patterns) and damaged shards built with leveldb log_test style helpers.
#include <dirent.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/record/writer.h"
#include "tfrecordfs/source/readahead.h"

namespace tfrecordfs::record {
namespace {

using ::testing::HasSubstr;

constexpr char kPath[] = "/shards/train-00000-of-00001";

std::string Payload(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// An anonymous in-memory file holding `bytes`.
UniqueFd MemFile(absl::string_view bytes) {
  UniqueFd fd(::memfd_create("shard", MFD_CLOEXEC));
  EXPECT_TRUE(fd.valid());
  EXPECT_TRUE(WriteFull(fd.get(), bytes.data(), bytes.size(), "memfd").ok());
  return fd;
}

std::string FileContents(int fd) {
  std::string out(static_cast<size_t>(::lseek(fd, 0, SEEK_END)), '\0');
  EXPECT_TRUE(PreadFull(fd, out.data(), out.size(), 0, "memfd").ok());
  return out;
}

// A shard image in memory plus what was written into it, with helpers that
// damage it the way disks, truncated copies and text-mode transfers do.
class Shard {
 public:
  void Add(std::string payload) {
    offsets_.push_back(bytes_.size());
    AppendFramed(&bytes_, payload);
    payloads_.push_back(std::move(payload));
  }

  const std::string& bytes() const { return bytes_; }
  const std::vector<std::string>& payloads() const { return payloads_; }
  uint64_t offset(size_t i) const { return offsets_[i]; }
  uint64_t end(size_t i) const { return offsets_[i] + kFramingOverhead + payloads_[i].size(); }

  void IncrementByte(uint64_t offset, int delta) {
    bytes_[offset] = static_cast<char>(static_cast<unsigned char>(bytes_[offset]) + delta);
  }
  void ShrinkSize(size_t n) { bytes_.resize(bytes_.size() - n); }
  void AppendRaw(absl::string_view s) { bytes_.append(s.data(), s.size()); }
  // Removes `n` bytes at `offset` (a text-mode transfer dropping '\r's).
  void EraseBytes(uint64_t offset, size_t n) { bytes_.erase(offset, n); }
  // Inserts bytes at `offset` (a text-mode transfer adding '\r's).
  void InsertBytes(uint64_t offset, absl::string_view s) {
    bytes_.insert(offset, s.data(), s.size());
  }
  void SetLength(size_t record, uint64_t len) { EncodeFixed64(&bytes_[offsets_[record]], len); }
  // Recomputes the length CRC of the header at `offset` (so only deliberate
  // damage elsewhere remains).
  void FixHeaderChecksum(uint64_t offset) {
    EncodeFixed32(&bytes_[offset + kLengthSize],
                  crc32c::Mask(crc32c::Value(&bytes_[offset], kLengthSize)));
  }
  // Recomputes the data CRC of a record whose framing is otherwise intact.
  void FixDataChecksum(size_t record) {
    const uint64_t data = offsets_[record] + kHeaderSize;
    const uint64_t len = payloads_[record].size();
    EncodeFixed32(&bytes_[data + len], crc32c::Mask(crc32c::Value(&bytes_[data], len)));
  }

 private:
  std::string bytes_;
  std::vector<uint64_t> offsets_;
  std::vector<std::string> payloads_;
};

Shard MakeShard(const std::vector<size_t>& sizes) {
  Shard shard;
  for (size_t i = 0; i < sizes.size(); ++i) shard.Add(Payload(sizes[i], static_cast<uint32_t>(i)));
  return shard;
}

// Invariants every walk result keeps, damaged or not.
void CheckWalkInvariants(const WalkResult& w, uint64_t file_size) {
  ASSERT_FALSE(w.offsets.empty());
  EXPECT_EQ(file_size, w.file_size);
  for (size_t i = 1; i < w.offsets.size(); ++i) {
    EXPECT_LT(w.offsets[i - 1], w.offsets[i]) << "offsets not strictly increasing at " << i;
  }
  EXPECT_LE(w.offsets.back(), file_size);
  for (size_t i = 0; i + 1 < w.offsets.size(); ++i) {
    EXPECT_GE(w.offsets[i + 1] - w.offsets[i], kFramingOverhead) << "record " << i;
  }
}

absl::StatusOr<WalkResult> Walk(const UniqueFd& fd, uint64_t size, uint64_t start = 0) {
  return WalkHeaders(fd.get(), kPath, size, start);
}

// Every record of a walk that a checked read accepts, by index.
std::vector<std::pair<uint64_t, std::string>> ReadableRecords(const UniqueFd& fd,
                                                              const WalkResult& w) {
  std::vector<std::pair<uint64_t, std::string>> out;
  for (uint64_t i = 0; i + 1 < w.offsets.size(); ++i) {
    auto r = ReadRecord(fd.get(), kPath, i, w.offsets[i], w.offsets[i + 1]);
    if (r.ok()) out.emplace_back(i, *r);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Round trips.

struct RoundTripCase {
  std::string name;
  std::vector<size_t> sizes;
};

std::vector<RoundTripCase> RoundTripCases() {
  std::vector<RoundTripCase> cases = {
      {"NoRecords", {}},
      {"OneEmpty", {0}},
      {"OneSmall", {5}},
      {"SeveralEmpty", {0, 0, 0, 0}},
      {"OneLarge", {70000}},
      {"OneMiB", {(1 << 20) + 3}},
      {"AroundSmallThreshold", {4095, 4096, 4097, 1, 4096, 0}},
      {"AroundWindow", {65536 - 16, 65536 - 28, 65536, 65536 + 1, 3}},
      {"LargeThenSmall", {100000, 1, 2, 3, 200000, 0, 5}},
      {"SmallThenLarge", {1, 2, 3, 66000, 7, 131072, 9}},
      {"OverWriterBuffer", {600000, 600000, 600000, 10}},
  };
  // Many small records: headers straddle 64 KiB read windows.
  std::vector<size_t> many;
  for (size_t i = 0; i < 500; ++i) many.push_back((i * 37) % 1000);
  cases.push_back({"ManySmall", many});
  // Random mix of small and large, so windows start and stop repeatedly.
  std::mt19937 rng(1234);
  std::vector<size_t> mixed;
  for (int i = 0; i < 200; ++i) {
    const uint32_t r = rng() % 10;
    mixed.push_back(r < 6 ? rng() % 200 : r < 9 ? rng() % 9000 : 65536 + rng() % 70000);
  }
  cases.push_back({"RandomMix", mixed});
  return cases;
}

class RoundTripTest : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(RoundTripTest, WriterMatchesAppendFramed) {
  const Shard shard = MakeShard(GetParam().sizes);
  UniqueFd fd(::memfd_create("w", MFD_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  UniqueFd dup(::dup(fd.get()));
  ShardWriter w(std::move(fd), "memfd");
  uint64_t expect_bytes = 0;
  for (const std::string& p : shard.payloads()) {
    ASSERT_TRUE(w.Append(p).ok());
    expect_bytes += p.size() + kFramingOverhead;
    EXPECT_EQ(expect_bytes, w.bytes());
  }
  EXPECT_EQ(shard.payloads().size(), w.records());
  ASSERT_TRUE(w.Close(/*sync=*/true).ok());
  EXPECT_EQ(shard.bytes(), FileContents(dup.get()));
}

// Plain output leaves the buffer in writes of about kPlainWriteEvery bytes
// (1 MiB writes made repair and reshard 0.3x the speed of `cat` on the
// benchmark machine): once that much is appended, the file holds it.
TEST(WriterTest, PlainOutputIsWrittenInSmallPieces) {
  UniqueFd fd(::memfd_create("w", MFD_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  UniqueFd dup(::dup(fd.get()));
  ShardWriter w(std::move(fd), "memfd");
  const std::string payload = Payload(40000, 7);
  while (w.bytes() < kPlainWriteEvery) ASSERT_TRUE(w.Append(payload).ok());
  EXPECT_EQ(w.bytes(), FileContents(dup.get()).size());
  EXPECT_EQ(w.bytes(), w.file_bytes());
  ASSERT_TRUE(w.Close(/*sync=*/false).ok());
}

// Seal writes everything out (a compressed stream's end too): the file is
// complete and file_bytes() final before Close, which then only closes;
// nothing can be appended in between.
TEST(WriterTest, SealCompletesTheFileBeforeClose) {
  for (source::Codec codec : {source::Codec::kNone, source::Codec::kGzip}) {
    UniqueFd fd(::memfd_create("w", MFD_CLOEXEC));
    ASSERT_TRUE(fd.valid());
    UniqueFd dup(::dup(fd.get()));
    ShardWriter w(std::move(fd), "memfd", WriterOptions{.codec = codec});
    ASSERT_TRUE(w.Append(Payload(1000, 3)).ok());
    ASSERT_TRUE(w.Seal().ok());
    const std::string sealed = FileContents(dup.get());
    EXPECT_EQ(sealed.size(), w.file_bytes());
    EXPECT_FALSE(w.Append("late").ok());
    EXPECT_FALSE(w.Seal().ok());
    ASSERT_TRUE(w.Close(/*sync=*/true).ok());
    EXPECT_EQ(FileContents(dup.get()), sealed);
    if (codec == source::Codec::kNone) {
      std::string want;
      AppendFramed(&want, Payload(1000, 3));
      EXPECT_EQ(sealed, want);
    } else {
      EXPECT_EQ(sealed.substr(0, 2), "\x1f\x8b");  // one whole GZIP member
    }
  }
}

// file_crc32c is the CRC32C of the bytes in the file, whatever the codec,
// computed as they were written; a range copied by copy_file_range never
// passed through the writer, so the CRC is then unknown.
TEST(WriterTest, FileCrcIsTheFilesOrUnknownAfterACopiedRange) {
  for (source::Codec codec : {source::Codec::kNone, source::Codec::kGzip, source::Codec::kSnappy}) {
    UniqueFd fd(::memfd_create("w", MFD_CLOEXEC));
    ASSERT_TRUE(fd.valid());
    UniqueFd dup(::dup(fd.get()));
    ShardWriter w(std::move(fd), "memfd", WriterOptions{.codec = codec});
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(w.Append(Payload(3000 + i, i)).ok());
    ASSERT_TRUE(w.Close(/*sync=*/false).ok());
    const std::string file = FileContents(dup.get());
    ASSERT_TRUE(w.file_crc32c().has_value());
    EXPECT_EQ(*w.file_crc32c(), crc32c::Value(file));
  }
  // A plain file's framed records copied in with AppendFramedRange.
  UniqueFd src(::memfd_create("src", MFD_CLOEXEC));
  std::string framed;
  AppendFramed(&framed, Payload(500, 1));
  ASSERT_EQ(::write(src.get(), framed.data(), framed.size()), static_cast<ssize_t>(framed.size()));
  UniqueFd fd(::memfd_create("w", MFD_CLOEXEC));
  UniqueFd dup(::dup(fd.get()));
  ShardWriter w(std::move(fd), "memfd");
  ASSERT_TRUE(w.Append(Payload(100, 2)).ok());
  ASSERT_TRUE(w.AppendFramedRange(src.get(), 0, framed.size(), 1).ok());
  ASSERT_TRUE(w.Close(/*sync=*/false).ok());
  EXPECT_EQ(w.records(), 2u);
  // Unknown when the kernel copied the range; where it refused (the
  // writer's pread/write fallback), the bytes passed through and count.
  if (w.file_crc32c()) {
    EXPECT_EQ(*w.file_crc32c(), crc32c::Value(FileContents(dup.get())));
  }
}

TEST_P(RoundTripTest, WalkAndReadRecord) {
  const Shard shard = MakeShard(GetParam().sizes);
  const size_t n = shard.payloads().size();
  UniqueFd fd = MemFile(shard.bytes());
  auto w = Walk(fd, shard.bytes().size());
  ASSERT_TRUE(w.ok()) << w.status();
  CheckWalkInvariants(*w, shard.bytes().size());
  EXPECT_TRUE(w->problems.empty()) << w->problems[0].message;
  ASSERT_EQ(n + 1, w->offsets.size());
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(shard.offset(i), w->offsets[i]);
    EXPECT_EQ(shard.end(i), w->offsets[i + 1]);
    auto r = ReadRecord(fd.get(), kPath, i, w->offsets[i], w->offsets[i + 1]);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(shard.payloads()[i], *r) << "record " << i;
  }
  EXPECT_EQ(shard.bytes().size(), w->offsets.back());
}

TEST_P(RoundTripTest, WalkFromTheMiddle) {
  const Shard shard = MakeShard(GetParam().sizes);
  const size_t n = shard.payloads().size();
  UniqueFd fd = MemFile(shard.bytes());
  // From the middle record, and from the end (no records left).
  for (size_t k : {n / 2, n}) {
    const uint64_t start = k < n ? shard.offset(k) : shard.bytes().size();
    auto w = Walk(fd, shard.bytes().size(), start);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_TRUE(w->problems.empty());
    ASSERT_EQ(n - k + 1, w->offsets.size());
    EXPECT_EQ(start, w->offsets[0]);
    EXPECT_EQ(shard.bytes().size(), w->offsets.back());
  }
}

TEST_P(RoundTripTest, ForEachRecordInBuffer) {
  const Shard shard = MakeShard(GetParam().sizes);
  std::vector<std::string> got;
  absl::Status s = ForEachRecordInBuffer(shard.bytes(), [&](uint64_t i, absl::string_view data) {
    EXPECT_EQ(got.size(), i);
    got.emplace_back(data);
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(shard.payloads(), got);
}

INSTANTIATE_TEST_SUITE_P(Sizes, RoundTripTest, ::testing::ValuesIn(RoundTripCases()),
                         [](const auto& info) { return info.param.name; });

// ---------------------------------------------------------------------------
// Header parsing.

// FDSize: how many descriptors the process's table holds now.
size_t FdTableSize() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("FDSize:", 0) == 0) return std::stoul(line.substr(7));
  }
  return 0;
}

size_t OpenDescriptors() {
  size_t n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

TEST(ReserveDescriptorsTest, GrowsTheTableWithoutKeepingADescriptor) {
  const size_t before = FdTableSize();
  ASSERT_GT(before, 0u) << "no FDSize in /proc/self/status";
  const size_t open_before = OpenDescriptors();
  const size_t want = before * 4;
  const size_t limit = ReserveDescriptors(want);
  if (limit < want) GTEST_SKIP() << "RLIMIT_NOFILE allows only " << limit << " descriptors";
  EXPECT_GE(FdTableSize(), want);
  EXPECT_EQ(OpenDescriptors(), open_before);
  // Nothing else changes: a small request keeps the table as it is.
  const size_t grown = FdTableSize();
  EXPECT_EQ(ReserveDescriptors(8), limit);
  EXPECT_EQ(FdTableSize(), grown);
}

TEST(ParseHeaderTest, ValidAndDamaged) {
  std::string f;
  AppendFramed(&f, "abc");
  auto len = ParseHeader(f.data());
  ASSERT_TRUE(len.ok());
  EXPECT_EQ(3u, *len);
  EXPECT_TRUE(IsPlausibleHeader(f.data(), 0, f.size()));
  EXPECT_FALSE(IsPlausibleHeader(f.data(), 0, f.size() - 1));  // would overrun
  EXPECT_FALSE(IsPlausibleHeader(f.data(), 10, f.size()));
  EXPECT_FALSE(IsPlausibleHeader(f.data(), f.size() + 1, f.size()));
  for (size_t i = 0; i < kHeaderSize; ++i) {
    std::string d = f;
    d[i] ^= 0x01;
    auto bad = ParseHeader(d.data());
    EXPECT_EQ(absl::StatusCode::kDataLoss, bad.status().code()) << "flipped byte " << i;
    EXPECT_FALSE(IsPlausibleHeader(d.data(), 0, d.size()));
  }
}

TEST(ParseHeaderTest, HugeLengthIsParsedButNeverPlausible) {
  char h[kHeaderSize];
  for (uint64_t len : {std::numeric_limits<uint64_t>::max(),
                       std::numeric_limits<uint64_t>::max() - 15, uint64_t{1} << 63}) {
    EncodeFixed64(h, len);
    EncodeFixed32(h + kLengthSize, crc32c::Mask(crc32c::Value(h, kLengthSize)));
    auto got = ParseHeader(h);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(len, *got);
    EXPECT_FALSE(IsPlausibleHeader(h, 0, uint64_t{1} << 40));
    EXPECT_FALSE(IsPlausibleHeader(h, 100, 1 << 20));
    // Near the top of the range, offset + length must not wrap around.
    EXPECT_FALSE(IsPlausibleHeader(h, std::numeric_limits<uint64_t>::max() - 20,
                                   std::numeric_limits<uint64_t>::max()));
  }
}

// ---------------------------------------------------------------------------
// Damage.

class DamageTest : public ::testing::Test {
 protected:
  // Five records of mixed sizes; 1 and 3 straddle the small-record threshold.
  DamageTest() : shard_(MakeShard({10, 5000, 300, 100, 30})) {}

  WalkResult WalkShard() {
    fd_ = MemFile(shard_.bytes());
    auto w = Walk(fd_, shard_.bytes().size());
    EXPECT_TRUE(w.ok()) << w.status();
    if (!w.ok()) return {};
    CheckWalkInvariants(*w, shard_.bytes().size());
    return *w;
  }

  // Record 2's data damaged by one byte (its CRC no longer matches), then
  // the shard walked (the walk does not read payloads: six offsets).
  WalkResult WalkWithRecordTwoDamaged() {
    shard_.IncrementByte(shard_.offset(2) + kHeaderSize + 17, 1);
    return WalkShard();
  }
  // The walked shard as a plain source.
  source::PlainSource Source() const {
    return source::PlainSource::Borrowing(fd_.get(), kPath, shard_.bytes().size());
  }
  // Reading record 2 (damaged by WalkWithRecordTwoDamaged) into `read`
  // failed as ReadRecord fails, naming the record, its offset and the CRC.
  void ExpectRecordTwoFailsAsReadRecordDoes(const WalkResult& w,
                                            const absl::StatusOr<absl::string_view>& read) {
    auto want = ReadRecord(Source(), 2, w.offsets[2], w.offsets[3]);
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.status(), want.status());
    EXPECT_THAT(read.status().message(),
                HasSubstr(absl::StrCat("record 2 at byte offset ", shard_.offset(2))));
    EXPECT_THAT(read.status().message(), HasSubstr("CRC"));
  }

  void ExpectRecordReadable(const WalkResult& w, size_t i) {
    ASSERT_LT(i + 1, w.offsets.size());
    auto r = ReadRecord(fd_.get(), kPath, i, w.offsets[i], w.offsets[i + 1]);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(shard_.payloads()[i], *r) << "record " << i;
  }

  bool HasProblemAt(const WalkResult& w, uint64_t offset) {
    for (const WalkProblem& p : w.problems) {
      EXPECT_FALSE(p.message.empty());
      if (p.offset == offset) return true;
    }
    return false;
  }

  absl::Status ForEach() {
    return ForEachRecordInBuffer(shard_.bytes(), [](uint64_t, absl::string_view) {});
  }

  Shard shard_;
  UniqueFd fd_;
};

TEST_F(DamageTest, Clean) {
  WalkResult w = WalkShard();
  EXPECT_TRUE(w.problems.empty());
  ASSERT_EQ(6u, w.offsets.size());
  for (size_t i = 0; i < 5; ++i) ExpectRecordReadable(w, i);
}

TEST_F(DamageTest, EmptyFile) {
  shard_ = Shard();
  WalkResult w = WalkShard();
  EXPECT_TRUE(w.problems.empty());
  EXPECT_EQ(std::vector<uint64_t>{0}, w.offsets);
  int calls = 0;
  EXPECT_TRUE(ForEachRecordInBuffer("", [&](uint64_t, absl::string_view) { ++calls; }).ok());
  EXPECT_EQ(0, calls);
}

TEST_F(DamageTest, TruncatedHeader) {
  shard_.ShrinkSize(shard_.bytes().size() - shard_.offset(4) - 6);  // 6 header bytes remain
  WalkResult w = WalkShard();
  ASSERT_EQ(5u, w.offsets.size());
  EXPECT_EQ(shard_.offset(4), w.offsets.back());
  EXPECT_TRUE(HasProblemAt(w, shard_.offset(4)));
  for (size_t i = 0; i < 4; ++i) ExpectRecordReadable(w, i);
  EXPECT_EQ(absl::StatusCode::kDataLoss, ForEach().code());
}

TEST_F(DamageTest, TruncatedPayload) {
  shard_.ShrinkSize(4 + 10);  // data crc and 10 payload bytes of the last record
  WalkResult w = WalkShard();
  ASSERT_EQ(5u, w.offsets.size());
  EXPECT_EQ(shard_.offset(4), w.offsets.back());
  ASSERT_FALSE(w.problems.empty());
  EXPECT_TRUE(HasProblemAt(w, shard_.offset(4)));
  for (size_t i = 0; i < 4; ++i) ExpectRecordReadable(w, i);
  absl::Status s = ForEach();
  EXPECT_EQ(absl::StatusCode::kDataLoss, s.code());
  EXPECT_THAT(s.message(), HasSubstr("record 4"));
}

TEST_F(DamageTest, TruncatedDataCrc) {
  for (size_t cut = 1; cut <= 4; ++cut) {
    shard_ = MakeShard({10, 5000, 300, 100, 30});
    shard_.ShrinkSize(cut);
    WalkResult w = WalkShard();
    ASSERT_EQ(5u, w.offsets.size()) << "cut " << cut;
    EXPECT_TRUE(HasProblemAt(w, shard_.offset(4))) << "cut " << cut;
    for (size_t i = 0; i < 4; ++i) ExpectRecordReadable(w, i);
    EXPECT_EQ(absl::StatusCode::kDataLoss, ForEach().code());
    // A read of the damaged record with the full span it used to have fails.
    auto r = ReadRecord(fd_.get(), kPath, 4, shard_.offset(4), shard_.end(4));
    EXPECT_FALSE(r.ok());
  }
}

TEST_F(DamageTest, StrayBytesAtTheEnd) {
  for (size_t n = 1; n <= 11; ++n) {
    shard_ = MakeShard({10, 5000, 300, 100, 30});
    const uint64_t end = shard_.bytes().size();
    shard_.AppendRaw(std::string(n, '\x5a'));
    WalkResult w = WalkShard();
    ASSERT_EQ(6u, w.offsets.size()) << n << " stray bytes";
    EXPECT_EQ(end, w.offsets.back());
    EXPECT_TRUE(HasProblemAt(w, end)) << n << " stray bytes";
    for (size_t i = 0; i < 5; ++i) ExpectRecordReadable(w, i);
    EXPECT_EQ(absl::StatusCode::kDataLoss, ForEach().code());
  }
}

TEST_F(DamageTest, LongerGarbageAtTheEnd) {
  for (size_t n : {12, 15, 16, 17, 100, 70000}) {
    shard_ = MakeShard({10, 5000, 300, 100, 30});
    const uint64_t end = shard_.bytes().size();
    shard_.AppendRaw(std::string(n, '\0'));
    WalkResult w = WalkShard();
    ASSERT_EQ(6u, w.offsets.size()) << n << " trailing zero bytes";
    EXPECT_EQ(end, w.offsets.back());
    EXPECT_TRUE(HasProblemAt(w, end)) << n;
    for (size_t i = 0; i < 5; ++i) ExpectRecordReadable(w, i);
  }
}

// A damaged header costs only its own record: the record before it keeps its
// exact span, and the records after it are found and keep their indices.
TEST_F(DamageTest, LengthCrcMismatchInTheMiddle) {
  shard_.IncrementByte(shard_.offset(2) + kLengthSize, 1);  // the stored length CRC
  WalkResult w = WalkShard();
  EXPECT_TRUE(HasProblemAt(w, shard_.offset(2)));
  EXPECT_TRUE(HasProblemAt(w, shard_.offset(3)));  // where it resynchronised
  ASSERT_EQ(6u, w.offsets.size());
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(shard_.offset(i), w.offsets[i]);
  EXPECT_EQ(shard_.bytes().size(), w.offsets.back());
  for (size_t i : {0, 1, 3, 4}) ExpectRecordReadable(w, i);
  auto bad = ReadRecord(fd_.get(), kPath, 2, w.offsets[2], w.offsets[3]);
  EXPECT_EQ(absl::StatusCode::kDataLoss, bad.status().code());
  EXPECT_THAT(bad.status().message(),
              HasSubstr(absl::StrCat("record 2 at byte offset ", shard_.offset(2))));
  absl::Status s = ForEach();
  EXPECT_EQ(absl::StatusCode::kDataLoss, s.code());
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("byte offset ", shard_.offset(2))));
}

TEST_F(DamageTest, LengthFieldDamagedInTheMiddle) {
  // The length bytes themselves changed: the stored CRC no longer matches.
  for (size_t byte = 0; byte < kLengthSize; ++byte) {
    shard_ = MakeShard({10, 5000, 300, 100, 30});
    shard_.IncrementByte(shard_.offset(3) + byte, 7);
    WalkResult w = WalkShard();
    EXPECT_TRUE(HasProblemAt(w, shard_.offset(3)));
    ASSERT_EQ(6u, w.offsets.size()) << "byte " << byte;
    for (size_t i : {0, 1, 2, 4}) ExpectRecordReadable(w, i);
    EXPECT_FALSE(ReadRecord(fd_.get(), kPath, 3, w.offsets[3], w.offsets[4]).ok());
  }
}

TEST_F(DamageTest, TwoDamagedHeaders) {
  shard_.IncrementByte(shard_.offset(1) + 9, 1);
  shard_.IncrementByte(shard_.offset(3) + 2, 1);
  WalkResult w = WalkShard();
  EXPECT_TRUE(HasProblemAt(w, shard_.offset(1)));
  EXPECT_TRUE(HasProblemAt(w, shard_.offset(3)));
  ASSERT_EQ(6u, w.offsets.size());
  for (size_t i : {0, 2, 4}) ExpectRecordReadable(w, i);
}

TEST_F(DamageTest, FirstHeaderDamaged) {
  shard_.IncrementByte(0, 1);
  WalkResult w = WalkShard();
  EXPECT_TRUE(HasProblemAt(w, 0));
  ASSERT_EQ(6u, w.offsets.size());
  EXPECT_EQ(0u, w.offsets[0]);
  EXPECT_FALSE(ReadRecord(fd_.get(), kPath, 0, w.offsets[0], w.offsets[1]).ok());
  for (size_t i = 1; i < 5; ++i) ExpectRecordReadable(w, i);
}

// A record lengthened by a few bytes (LF -> CRLF): too few bytes for a record
// of their own, so the lengthened record alone is lost.
TEST_F(DamageTest, RecordLengthenedInTheMiddle) {
  for (size_t extra : {1, 2, 5, 15}) {
    shard_ = MakeShard({10, 5000, 300, 100, 30});
    shard_.InsertBytes(shard_.offset(2) + kHeaderSize + 40, std::string(extra, '\r'));
    WalkResult w = WalkShard();
    ASSERT_EQ(6u, w.offsets.size()) << extra;
    EXPECT_EQ(shard_.offset(3) + extra, w.offsets[3]);
    ExpectRecordReadable(w, 0);
    ExpectRecordReadable(w, 1);
    EXPECT_FALSE(ReadRecord(fd_.get(), kPath, 2, w.offsets[2], w.offsets[3]).ok());
    for (size_t i = 3; i < 5; ++i) {
      auto r = ReadRecord(fd_.get(), kPath, i, w.offsets[i], w.offsets[i + 1]);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(shard_.payloads()[i], *r);
    }
  }
}

// The CRLF -> LF pattern: a record loses a few bytes in the middle; it alone
// is lost, the ones before and after keep their indices and stay readable.
TEST_F(DamageTest, RecordShortenedInTheMiddle) {
  for (size_t lost : {1, 2, 3, 7, 11, 12, 13, 20}) {
    shard_ = MakeShard({10, 5000, 300, 100, 30});
    shard_.EraseBytes(shard_.offset(2) + kHeaderSize + 50, lost);
    WalkResult w = WalkShard();
    ASSERT_EQ(6u, w.offsets.size()) << lost << " bytes lost";
    EXPECT_FALSE(w.problems.empty());
    EXPECT_EQ(shard_.offset(3) - lost, w.offsets[3]);
    ExpectRecordReadable(w, 0);
    ExpectRecordReadable(w, 1);
    auto bad = ReadRecord(fd_.get(), kPath, 2, w.offsets[2], w.offsets[3]);
    EXPECT_EQ(absl::StatusCode::kDataLoss, bad.status().code()) << lost << " bytes lost";
    EXPECT_THAT(bad.status().message(), HasSubstr(kPath));
    EXPECT_THAT(bad.status().message(), HasSubstr("record 2"));
    EXPECT_THAT(bad.status().message(), HasSubstr(absl::StrCat("byte offset ", shard_.offset(2))));
    for (size_t i = 3; i < 5; ++i) {
      auto r = ReadRecord(fd_.get(), kPath, i, w.offsets[i], w.offsets[i + 1]);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(shard_.payloads()[i], *r);
    }
    EXPECT_EQ(shard_.bytes().size(), w.offsets.back());
  }
}

TEST_F(DamageTest, LastRecordShortened) {
  shard_.EraseBytes(shard_.offset(4) + kHeaderSize + 5, 2);
  WalkResult w = WalkShard();
  ASSERT_EQ(5u, w.offsets.size());
  EXPECT_TRUE(HasProblemAt(w, shard_.offset(4)));
  for (size_t i = 0; i < 4; ++i) ExpectRecordReadable(w, i);
}

TEST_F(DamageTest, DataCrcMismatch) {
  WalkResult w = WalkWithRecordTwoDamaged();
  EXPECT_TRUE(w.problems.empty());  // the walk does not read payloads
  ASSERT_EQ(6u, w.offsets.size());
  auto bad = ReadRecord(fd_.get(), kPath, 2, w.offsets[2], w.offsets[3]);
  ASSERT_EQ(absl::StatusCode::kDataLoss, bad.status().code());
  EXPECT_THAT(bad.status().message(), HasSubstr(kPath));
  EXPECT_THAT(bad.status().message(), HasSubstr("record 2"));
  EXPECT_THAT(bad.status().message(), HasSubstr(absl::StrCat("byte offset ", shard_.offset(2))));
  EXPECT_THAT(bad.status().message(), HasSubstr("CRC"));
  for (size_t i : {0, 1, 3, 4}) ExpectRecordReadable(w, i);

  absl::Status s = ForEach();
  EXPECT_EQ(absl::StatusCode::kDataLoss, s.code());
  EXPECT_THAT(s.message(), HasSubstr("record 2"));

  // Repairing the CRC (not the data) makes it readable again, with the new data.
  shard_.FixDataChecksum(2);
  fd_ = MemFile(shard_.bytes());
  auto fixed = ReadRecord(fd_.get(), kPath, 2, w.offsets[2], w.offsets[3]);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_NE(shard_.payloads()[2], *fixed);
  EXPECT_EQ(shard_.payloads()[2].size(), fixed->size());
}

TEST_F(DamageTest, ReadRecordIntoReusesOneBufferAndChecksAsReadRecordDoes) {
  // Records of 5000, 300 and 100 bytes, then the damaged one, through one
  // buffer: each view holds exactly its record's data, the buffer never
  // shrinks (no new allocation for a smaller record), and the damaged one
  // fails with ReadRecord's error.
  WalkResult w = WalkWithRecordTwoDamaged();
  ASSERT_EQ(6u, w.offsets.size());
  const source::PlainSource src = Source();
  RecordBuffer buf;
  auto big = ReadRecordInto(src, 1, w.offsets[1], w.offsets[2], &buf);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(shard_.payloads()[1], *big);
  EXPECT_FALSE(buf.held);  // a plain source holds nothing in memory
  const size_t grown = buf.bytes.size();
  EXPECT_EQ(grown, w.offsets[2] - w.offsets[1]);
  const char* const data = buf.bytes.data();
  for (size_t i : {3, 0, 4}) {
    auto r = ReadRecordInto(src, i, w.offsets[i], w.offsets[i + 1], &buf);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(shard_.payloads()[i], *r) << "record " << i;
    EXPECT_EQ(r->data(), data + kHeaderSize);  // the same bytes, not a new buffer
    EXPECT_EQ(buf.bytes.size(), grown);
  }
  ExpectRecordTwoFailsAsReadRecordDoes(w, ReadRecordInto(src, 2, w.offsets[2], w.offsets[3], &buf));
}

TEST_F(DamageTest, ReadRecordIntoACallersSlotReadsThereAndChecksAsReadRecordDoes) {
  // Records side by side in one arena (as reshard batches them): each is
  // read into its own slot, its view lies inside that slot after the
  // header, the bytes around the slot are untouched, and the damaged record
  // fails with ReadRecord's error, naming record and offset.
  WalkResult w = WalkWithRecordTwoDamaged();
  ASSERT_EQ(6u, w.offsets.size());
  const source::PlainSource src = Source();
  std::string arena(w.offsets[5] + 64, '#');
  size_t at = 32;
  for (size_t i : {4, 0, 3, 1}) {
    const size_t n = w.offsets[i + 1] - w.offsets[i];
    auto r = ReadRecordInto(src, i, w.offsets[i], w.offsets[i + 1], arena.data() + at);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(shard_.payloads()[i], *r) << "record " << i;
    EXPECT_EQ(r->data(), arena.data() + at + kHeaderSize);
    EXPECT_EQ(absl::string_view(arena).substr(at, n), shard_.bytes().substr(w.offsets[i], n));
    at += n;
  }
  EXPECT_EQ(std::string(arena.size() - at, '#'), arena.substr(at));
  EXPECT_EQ(std::string(32, '#'), arena.substr(0, 32));
  ExpectRecordTwoFailsAsReadRecordDoes(
      w, ReadRecordInto(src, 2, w.offsets[2], w.offsets[3], arena.data()));
  // A span shorter than the framing is refused before anything is read.
  auto tiny = ReadRecordInto(src, 0, w.offsets[0], w.offsets[0] + 8, arena.data());
  ASSERT_FALSE(tiny.ok());
  EXPECT_TRUE(absl::IsDataLoss(tiny.status()));
  EXPECT_THAT(tiny.status().message(), HasSubstr("shorter than 16 bytes"));
}

TEST_F(DamageTest, ReadRecordIntoParsesRecordsInReadaheadBlocksInPlace) {
  // Through a ReadaheadSource read in order: records in a fetched block
  // are checked where the block holds them (buf.held), with the same
  // bytes and the same CRC error for the damaged one.
  WalkResult w = WalkWithRecordTwoDamaged();
  ASSERT_EQ(6u, w.offsets.size());
  source::Readahead ra(size_t{16} << 20, 2);
  source::ReadaheadSource src(
      std::make_unique<source::PlainSource>(source::ShardFile::Borrowed(fd_.get(), kPath),
                                            shard_.bytes().size()),
      &ra);
  RecordBuffer buf;
  int held = 0;
  for (size_t i : {0, 1, 3, 4}) {
    if (i == 3) {
      auto bad = ReadRecordInto(src, 2, w.offsets[2], w.offsets[3], &buf);
      ASSERT_FALSE(bad.ok());
      EXPECT_THAT(bad.status().message(), HasSubstr("record 2"));
      EXPECT_THAT(bad.status().message(), HasSubstr("CRC"));
      held += buf.held != nullptr;
    }
    auto r = ReadRecordInto(src, i, w.offsets[i], w.offsets[i + 1], &buf);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(shard_.payloads()[i], *r) << "record " << i;
    held += buf.held != nullptr;
  }
  // Records 0 and 1 are read into the buffer (the second read in order
  // starts the stream); 2, 3 and 4 are in its first block.
  EXPECT_EQ(held, 3);
  EXPECT_EQ(buf.bytes.size(), w.offsets[2] - w.offsets[1]);
}

TEST_F(DamageTest, DataCrcFieldDamaged) {
  shard_.IncrementByte(shard_.end(1) - 1, 1);
  WalkResult w = WalkShard();
  auto bad = ReadRecord(fd_.get(), kPath, 1, w.offsets[1], w.offsets[2]);
  EXPECT_EQ(absl::StatusCode::kDataLoss, bad.status().code());
  ExpectRecordReadable(w, 0);
  ExpectRecordReadable(w, 2);
}

TEST_F(DamageTest, HugeLengthWithValidCrc) {
  for (uint64_t len :
       {std::numeric_limits<uint64_t>::max(), std::numeric_limits<uint64_t>::max() - 15,
        std::numeric_limits<uint64_t>::max() - 16, uint64_t{1} << 40}) {
    shard_ = MakeShard({10, 5000, 300, 100, 30});
    shard_.SetLength(2, len);
    shard_.FixHeaderChecksum(shard_.offset(2));
    WalkResult w = WalkShard();  // must not try to allocate `len` bytes
    EXPECT_TRUE(HasProblemAt(w, shard_.offset(2))) << len;
    ASSERT_EQ(6u, w.offsets.size());
    for (size_t i = 0; i < 5; ++i) EXPECT_EQ(shard_.offset(i), w.offsets[i]);
    EXPECT_EQ(shard_.bytes().size(), w.offsets.back());
    for (size_t i : {0, 1, 3, 4}) ExpectRecordReadable(w, i);
    // Reading a span that starts at the damaged header fails without
    // allocating the stated length.
    auto r = ReadRecord(fd_.get(), kPath, 2, shard_.offset(2), shard_.end(2));
    EXPECT_EQ(absl::StatusCode::kDataLoss, r.status().code());
    EXPECT_EQ(absl::StatusCode::kDataLoss, ForEach().code());
  }
}

TEST_F(DamageTest, HugeLengthInTheLastRecord) {
  shard_.SetLength(4, std::numeric_limits<uint64_t>::max() - 3);
  shard_.FixHeaderChecksum(shard_.offset(4));
  WalkResult w = WalkShard();
  ASSERT_EQ(5u, w.offsets.size());
  EXPECT_TRUE(HasProblemAt(w, shard_.offset(4)));
  for (size_t i = 0; i < 4; ++i) ExpectRecordReadable(w, i);
}

TEST_F(DamageTest, ReadRecordRejectsBadSpans) {
  WalkResult w = WalkShard();
  // Shorter than the framing, reversed, and off by one in either direction.
  EXPECT_EQ(absl::StatusCode::kDataLoss, ReadRecord(fd_.get(), kPath, 0, 0, 15).status().code());
  EXPECT_EQ(absl::StatusCode::kDataLoss, ReadRecord(fd_.get(), kPath, 0, 10, 0).status().code());
  EXPECT_EQ(absl::StatusCode::kDataLoss,
            ReadRecord(fd_.get(), kPath, 1, w.offsets[1], w.offsets[2] - 1).status().code());
  EXPECT_FALSE(ReadRecord(fd_.get(), kPath, 1, w.offsets[1], w.offsets[2] + 1).ok());
  // Past the end of the file: an error, not a crash.
  EXPECT_FALSE(ReadRecord(fd_.get(), kPath, 4, w.offsets[4], w.offsets[5] + 100).ok());
}

// Random single-byte damage anywhere: the walk never fails, keeps its
// invariants, and every record it reads back is one that was written.
TEST_F(DamageTest, RandomDamageKeepsInvariants) {
  std::mt19937 rng(99);
  const Shard clean = MakeShard({10, 5000, 300, 100, 30, 0, 70000, 1, 2});
  for (int iter = 0; iter < 300; ++iter) {
    shard_ = clean;
    const int hits = 1 + static_cast<int>(rng() % 3);
    for (int h = 0; h < hits; ++h) {
      const uint64_t at = rng() % shard_.bytes().size();
      switch (rng() % 3) {
        case 0:
          shard_.IncrementByte(at, 1 + static_cast<int>(rng() % 255));
          break;
        case 1:
          shard_.EraseBytes(at, 1 + rng() % std::min<uint64_t>(20, shard_.bytes().size() - at));
          break;
        default:
          shard_.ShrinkSize(rng() % std::min<size_t>(64, shard_.bytes().size()));
          break;
      }
    }
    WalkResult w = WalkShard();
    for (const auto& [i, data] : ReadableRecords(fd_, w)) {
      EXPECT_THAT(clean.payloads(), ::testing::Contains(data)) << "iteration " << iter;
    }
  }
}

}  // namespace
}  // namespace tfrecordfs::record

namespace tfrecordfs::record {
namespace {

// A shard in memory that counts the reads a walk makes (what a round trip
// costs on network storage: issue 12).
class CountingSource final : public source::ShardSource {
 public:
  explicit CountingSource(std::string bytes) : bytes_(std::move(bytes)) {}
  source::Codec codec() const override { return source::Codec::kNone; }
  const std::string& path() const override { return path_; }
  uint64_t size() const override { return bytes_.size(); }
  absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const override {
    ++reads_;
    if (offset >= bytes_.size()) return size_t{0};
    n = std::min<size_t>(n, bytes_.size() - offset);
    std::memcpy(buf, bytes_.data() + offset, n);
    return n;
  }
  absl::StatusOr<std::optional<source::FileRange>> Spliceable(uint64_t) const override {
    return std::optional<source::FileRange>();
  }
  int reads() const { return reads_; }

 private:
  std::string bytes_;
  std::string path_ = "counting";
  mutable int reads_ = 0;
};

TEST(WalkBlocksTest, LargeRecordsCostOneReadPerBlockNotPerRecord) {
  std::string shard;
  for (int i = 0; i < 250; ++i) AppendFramed(&shard, std::string(100000 + i, 'x'));
  CountingSource per_header(shard);
  auto a = WalkHeaders(per_header);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->offsets.size(), 251u);
  EXPECT_GE(per_header.reads(), 250);  // one pread per large record
  CountingSource blocks(shard);
  auto b = WalkHeaders(blocks, 0, size_t{8} << 20);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->offsets, a->offsets);
  EXPECT_TRUE(b->problems.empty());
  // 25 MB in 8 MiB blocks: 3-4 reads, not 250.
  EXPECT_LE(blocks.reads(), static_cast<int>(shard.size() / (size_t{8} << 20)) + 2);
}

// Issue 37: the offsets of a walk grew by doubling, each growth moving
// every offset into fresh pages (most of a `tfrecordfs index --part`'s page
// faults on 2M small records). The walk now reserves, once past 1024
// records, the count its records per byte so far predict for the rest of
// the shard (and 1/32 more); a prediction that turns out short or long still
// walks every record.
// The walk of `shard` (records of `sizes`), checked to find every record at
// its offset and the shard's end after the last.
void WalkEveryRecord(const Shard& shard, const std::vector<size_t>& sizes, WalkResult* walk) {
  CountingSource src(shard.bytes());
  auto w = WalkHeaders(src);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->offsets.size(), sizes.size() + 1);
  for (size_t i = 0; i < sizes.size(); ++i) ASSERT_EQ(w->offsets[i], shard.offset(i)) << i;
  EXPECT_EQ(w->offsets.back(), shard.bytes().size());
  *walk = *std::move(w);
}

TEST(WalkReservationTest, EvenRecordsFillOneReservation) {
  std::vector<size_t> sizes(50000, 84);  // 100-byte records
  Shard shard = MakeShard(sizes);
  WalkResult w;
  ASSERT_NO_FATAL_FAILURE(WalkEveryRecord(shard, sizes, &w));
  // Doubling ends at 65,536 (1.31x); the prediction at 1.03x and 16 more.
  EXPECT_LE(w.offsets.capacity(), sizes.size() + sizes.size() / 32 + 64);
}

TEST(WalkReservationTest, RecordsThatChangeSizeAreAllFound) {
  const std::vector<std::vector<size_t>> cases = {
      // Small first: the reservation is far too large (bounded by one
      // record per 16 bytes left).
      [] {
        std::vector<size_t> v(3000, 4);
        v.insert(v.end(), 3000, 5000);
        return v;
      }(),
      // Large first: the reservation is far too small; doubling goes on.
      [] {
        std::vector<size_t> v(3000, 5000);
        v.insert(v.end(), 40000, 4);
        return v;
      }(),
  };
  for (const std::vector<size_t>& sizes : cases) {
    Shard shard = MakeShard(sizes);
    WalkResult w;
    ASSERT_NO_FATAL_FAILURE(WalkEveryRecord(shard, sizes, &w));
    EXPECT_TRUE(w.problems.empty());
    // At most one offset per 16 bytes (ShardIndex gives an unfilled
    // reservation back).
    EXPECT_LE(w.offsets.capacity(), 2 * (shard.bytes().size() / kFramingOverhead + 1));
    // A walk from the middle (a shard that grew) finds the same records.
    CountingSource src(shard.bytes());
    auto tail = WalkHeaders(src, shard.offset(2500));
    ASSERT_TRUE(tail.ok()) << tail.status();
    ASSERT_EQ(tail->offsets.size(), sizes.size() - 2500 + 1);
    EXPECT_EQ(tail->offsets.front(), shard.offset(2500));
    EXPECT_EQ(tail->offsets[1000], shard.offset(3500));
  }
}

// Issue 34: `index`'s progress bar advanced once per whole shard, its rate
// falling while a big shard was walked. The walk now reports its position
// every kWalkProgressStep bytes or more, in order, within the shard.
TEST(WalkBlocksTest, ProgressIsReportedWhileALargeShardIsWalked) {
  std::string shard;
  for (int i = 0; i < 250; ++i) AppendFramed(&shard, std::string(100000 + i, 'x'));
  for (size_t block : {size_t{0}, size_t{8} << 20}) {
    CountingSource src(shard);
    std::vector<uint64_t> seen;
    auto w = WalkHeaders(src, 0, block, kDefaultMaxRecords,
                         [&](uint64_t walked) { seen.push_back(walked); });
    ASSERT_TRUE(w.ok()) << w.status();
    // 25 MB: a report at least every 4 MiB, so 5 or 6 of them.
    EXPECT_GE(seen.size(), shard.size() / kWalkProgressStep - 1) << block;
    uint64_t last = 0;
    for (uint64_t at : seen) {
      EXPECT_GE(at, last + kWalkProgressStep) << block;
      EXPECT_LE(at, shard.size()) << block;
      last = at;
    }
  }
}

TEST(WalkBlocksTest, DamagedShardWalksTheSameInBlocks) {
  std::string shard;
  for (int i = 0; i < 40; ++i) AppendFramed(&shard, std::string(5000 + i * 37, 'a' + i % 26));
  shard[5000 * 7 + 3] ^= 0x55;     // a header (or data) byte in the middle
  shard.resize(shard.size() - 9);  // and a truncated tail
  CountingSource x(shard), y(shard);
  auto a = WalkHeaders(x);
  auto b = WalkHeaders(y, 0, 64 * 1024);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->offsets, b->offsets);
  ASSERT_EQ(a->problems.size(), b->problems.size());
  for (size_t i = 0; i < a->problems.size(); ++i) {
    EXPECT_EQ(a->problems[i].offset, b->problems[i].offset);
    EXPECT_EQ(a->problems[i].message, b->problems[i].message);
  }
}

// The block walk on remote storage reads through a PrefetchReader (issue
// 25): the same offsets and problems as a header walk, clean or damaged,
// with the parts read ahead of it instead of one read per block.
class MemoryObject final : public source::ObjectReader {
 public:
  explicit MemoryObject(std::string bytes) : bytes_(std::move(bytes)) {}
  const std::string& url() const override { return url_; }
  uint64_t size() const override { return bytes_.size(); }
  absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const override {
    if (offset >= bytes_.size()) return size_t{0};
    n = std::min<size_t>(n, bytes_.size() - offset);
    std::memcpy(buf, bytes_.data() + offset, n);
    return n;
  }

 private:
  std::string bytes_;
  std::string url_ = "s3://bucket/prefetched";
};

TEST(WalkBlocksTest, PrefetchedWalkFindsWhatTheHeaderWalkFinds) {
  for (bool damaged : {false, true}) {
    std::string shard;
    for (int i = 0; i < 400; ++i) AppendFramed(&shard, std::string(20000 + i * 97, 'a' + i % 26));
    if (damaged) {
      shard[20000 * 150 + 5] ^= 0x55;
      shard[5 * 1024 * 1024 + 11] ^= 0x21;
      shard.resize(shard.size() - 9);
    }
    CountingSource plain(shard);
    auto a = WalkHeaders(plain);
    MemoryObject object(shard);
    source::PrefetchReader::Options options;
    options.first_part = 256 * 1024;  // small parts: many part edges in the walk
    options.max_part = 1024 * 1024;
    source::PrefetchReader ahead(&object, object.url(), shard.size(), options);
    auto b = WalkHeaders(source::PlainSource::Borrowing(&ahead, object.url(), shard.size()), 0,
                         64 * 1024);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->offsets, b->offsets) << "damaged " << damaged;
    ASSERT_EQ(a->problems.size(), b->problems.size()) << "damaged " << damaged;
    for (size_t i = 0; i < a->problems.size(); ++i) {
      EXPECT_EQ(a->problems[i].offset, b->problems[i].offset);
      EXPECT_EQ(a->problems[i].message, b->problems[i].message);
    }
    EXPECT_EQ(a->problems.empty(), !damaged);
  }
}

// ---- StreamWalker's size hint ----------------------------------------------

// A stream of `n` small records, fed in chunks of `chunk` bytes to a walker
// given `hint` (expected bytes, most records; none when expected is 0).
struct HintedWalk {
  WalkResult result;
  size_t capacity;
};
HintedWalk WalkWithHint(const std::string& stream, size_t chunk, uint64_t expected, uint64_t most) {
  StreamWalker w(kPath);
  for (size_t at = 0; at < stream.size(); at += chunk) {
    if (at == chunk && expected != 0) w.ExpectBytes(expected, most);
    EXPECT_TRUE(w.Feed(absl::string_view(stream).substr(at, chunk)).ok());
  }
  EXPECT_TRUE(w.Finish(stream.size()));
  WalkResult r = w.TakeResult();
  const size_t capacity = r.offsets.capacity();
  return {std::move(r), capacity};
}

TEST(StreamWalkerHintTest, AnAccurateHintReservesAboutTheRecordCountOnce) {
  std::string stream;
  for (int i = 0; i < 100000; ++i) AppendFramed(&stream, Payload(60 + i % 40, i));
  const HintedWalk plain = WalkWithHint(stream, 256 << 10, 0, 0);
  const HintedWalk hinted = WalkWithHint(stream, 256 << 10, stream.size(), stream.size() / 8);
  EXPECT_EQ(hinted.result.offsets, plain.result.offsets);
  const size_t n = plain.result.offsets.size();
  // The prediction from the first chunk is within a few percent here:
  // reserved once, with 1/32 to spare, where doubling left up to 2x.
  EXPECT_GE(hinted.capacity, n);
  EXPECT_LE(hinted.capacity, n + n / 16);
  EXPECT_GT(plain.capacity, n + n / 16);  // what the hint saves (doubling from 1)
}

TEST(StreamWalkerHintTest, AWrongHintNeitherLosesRecordsNorReservesPastItsBound) {
  std::string stream;
  for (int i = 0; i < 50000; ++i) AppendFramed(&stream, Payload(30, i));
  const HintedWalk plain = WalkWithHint(stream, 64 << 10, 0, 0);
  // Far too many bytes expected: the reservation stops at `most`.
  const HintedWalk big = WalkWithHint(stream, 64 << 10, stream.size() * 1000, 60000);
  EXPECT_EQ(big.result.offsets, plain.result.offsets);
  EXPECT_LE(big.capacity, 60001u);
  // Too few records allowed, or too few bytes expected: the offsets grow on.
  const HintedWalk small = WalkWithHint(stream, 64 << 10, stream.size() / 10, 100);
  EXPECT_EQ(small.result.offsets, plain.result.offsets);
  const HintedWalk few = WalkWithHint(stream, 64 << 10, stream.size() / 10, 1000000);
  EXPECT_EQ(few.result.offsets, plain.result.offsets);
}

}  // namespace
}  // namespace tfrecordfs::record
