// src/source: random access into GZIP / ZLIB shards through checkpoints.
//
// Every read is compared with a straight decompression by zlib itself
// (StraightInflate below, over tfrecordfs/reference/zlib_codec.h: inflate with
// automatic header detection, stepping over GZIP members), so these tests
// do not trust the code under test to know what the bytes should be.
// Compressed inputs are made by zlib's deflate directly (not by
// record::ShardWriter), except in the writer tests at the end.
#include <malloc.h>
#include <snappy.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/bytes.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/index/index_file.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/record/writer.h"
#include "tfrecordfs/reference/zlib_codec.h"
#include "tfrecordfs/source/inflate.h"
#include "tfrecordfs/source/shard_source.h"
#include "tfrecordfs/source/snappy_source.h"
#include "tfrecordfs/source/window_use.h"

namespace tfrecordfs::source {
namespace {

using ::testing::HasSubstr;

// ---- inputs ----------------------------------------------------------------

using test::RandomBytes;
using test::TextLike;

using reference::zlib::Deflate;
using reference::zlib::Wrap;

Codec CodecOf(Wrap w) { return w == Wrap::kGzip ? Codec::kGzip : Codec::kZlib; }

// What zlib itself makes of `file`: every byte it decompresses before the
// end or the first error, stepping over concatenated GZIP members. `clean`
// is set when the whole file decompressed without error.
std::string StraightInflate(absl::string_view file, bool* clean = nullptr) {
  const bool gzip = file.size() >= 2 && static_cast<unsigned char>(file[0]) == 0x1f &&
                    static_cast<unsigned char>(file[1]) == 0x8b;
  return reference::zlib::Inflate(file, 15 + 32, gzip, clean);
}

// A file in memory that the code under test can pread.
UniqueFd MemFile(absl::string_view bytes) {
  UniqueFd fd(memfd_create("source_test", MFD_CLOEXEC));
  EXPECT_GE(fd.get(), 0);
  EXPECT_TRUE(WriteFull(fd.get(), bytes.data(), bytes.size(), "memfd").ok());
  return fd;
}

UniqueFd Dup(const UniqueFd& fd) { return UniqueFd(::dup(fd.get())); }

struct Scanned {
  UniqueFd fd;
  ScanResult scan;
  std::string sunk;  // what the scan handed its sink
};

Scanned ScanWith(absl::string_view file, Codec codec, uint64_t span, bool isal) {
  Scanned s;
  s.fd = MemFile(file);
  auto r = ScanCompressed(
      s.fd.get(), "test.gz", file.size(), codec, span,
      [&](absl::string_view b) {
        s.sunk.append(b.data(), b.size());
        return absl::OkStatus();
      },
      nullptr, isal, [&] { s.sunk.clear(); });
  EXPECT_TRUE(r.ok()) << r.status();
  if (r.ok()) s.scan = std::move(*r);
  return s;
}

// The scan with ISA-L and the scan with zlib agree on the bytes, members
// and problems. Checkpoints may lie at other boundaries (ISA-L decodes up to
// 64 KiB ahead of the bytes it hands out, so it sees only boundaries after
// those, source/inflater.h), and every one must be as valid: zlib, checking
// each against the stream (VerifyCheckpoints: a block boundary or member
// start at that bit offset, the uncompressed offset it names, its window),
// accepts them all.
void ExpectSameScan(const Scanned& isal, const Scanned& zlib, absl::string_view file) {
  EXPECT_TRUE(isal.sunk == zlib.sunk) << isal.sunk.size() << " bytes against " << zlib.sunk.size();
  EXPECT_EQ(isal.scan.table.data_size, zlib.scan.table.data_size);
  EXPECT_EQ(isal.scan.members, zlib.scan.members);
  ASSERT_EQ(isal.scan.problem.has_value(), zlib.scan.problem.has_value());
  if (isal.scan.problem) {
    EXPECT_EQ(isal.scan.problem->compressed_offset, zlib.scan.problem->compressed_offset);
    EXPECT_EQ(isal.scan.problem->offset, zlib.scan.problem->offset);
    EXPECT_EQ(isal.scan.problem->message, zlib.scan.problem->message);
  }
  const auto& pts = isal.scan.table.points;
  ASSERT_FALSE(pts.empty());
  if (!isal.scan.problem) {
    EXPECT_TRUE(VerifyCheckpoints(isal.fd.get(), "test.gz", file.size(), isal.scan.table).ok());
  } else if (pts.size() > 1) {
    // A damaged stream does not end at data_size: every checkpoint but
    // the last is checked by inflating to the one after it.
    EXPECT_TRUE(
        VerifyCheckpoints(isal.fd.get(), "test.gz", file.size(), isal.scan.table, 0, pts.size() - 1)
            .ok());
  }
}

// Every scan in these tests runs both ways (ISA-L, the index build's, and
// zlib) and the two must agree; the ISA-L one is returned.
Scanned Scan(absl::string_view file, Codec codec, uint64_t span) {
  Scanned isal = ScanWith(file, codec, span, /*isal=*/true);
  Scanned zlib = ScanWith(file, codec, span, /*isal=*/false);
  ExpectSameScan(isal, zlib, file);
  return isal;
}

// Reads `reads` random ranges (and the edges) through an InflateSource and
// compares each with `expected`.
void CheckRandomReads(const UniqueFd& fd, uint64_t file_size,
                      std::shared_ptr<const CheckpointTable> table, absl::string_view expected,
                      int reads, uint64_t seed, size_t cache_bytes = size_t{4} << 20,
                      bool clean = false) {
  BlockCache cache(cache_bytes);
  InflateSource src(Dup(fd), "test.gz", file_size, table, &cache);
  ASSERT_EQ(src.size(), expected.size());
  std::mt19937_64 rng(seed);
  std::vector<std::pair<uint64_t, size_t>> ranges = {
      {0, 1}, {0, 100}, {expected.size() > 0 ? expected.size() - 1 : 0, 10}, {expected.size(), 5}};
  for (int i = 0; i < reads; ++i) {
    const uint64_t off = expected.empty() ? 0 : rng() % (expected.size() + 1);
    const size_t len = rng() % 4 == 0 ? rng() % (3 * kBlockSize) : rng() % 5000;
    ranges.push_back({off, len});
  }
  std::string buf;
  for (auto [off, len] : ranges) {
    buf.assign(len, '\xee');
    auto got = src.ReadAt(off, buf.data(), len);
    ASSERT_TRUE(got.ok()) << got.status() << " at " << off;
    const size_t want = off >= expected.size() ? 0 : std::min<uint64_t>(len, expected.size() - off);
    ASSERT_EQ(*got, want) << "read of " << len << " at " << off;
    ASSERT_TRUE(absl::string_view(buf.data(), *got) == expected.substr(off, want))
        << "bytes differ in a read of " << len << " at " << off;
  }
  // A clean stream never needs zlib's second opinion.
  if (clean) {
    EXPECT_FALSE(src.fell_back_to_zlib());
  }
}

// A stored window is the 32 KiB of the stream before its checkpoint, or
// the sparse form of them (source/window_use.h): every byte either that
// byte or zero.
::testing::AssertionResult IsWindowOf(absl::string_view w, absl::string_view whole) {
  if (w.size() != whole.size()) {
    return ::testing::AssertionFailure() << w.size() << " bytes, not " << whole.size();
  }
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] != whole[i] && w[i] != '\0') {
      return ::testing::AssertionFailure() << "byte " << i << " is neither the stream's nor zero";
    }
  }
  return ::testing::AssertionSuccess();
}

// ---- DetectCodec -------------------------------------------------------------

TEST(DetectCodec, Headers) {
  EXPECT_EQ(DetectCodec(Deflate("x", Wrap::kGzip)), Codec::kGzip);
  for (int level : {0, 1, 6, 9}) {
    EXPECT_EQ(DetectCodec(Deflate("x", Wrap::kZlib, level)), Codec::kZlib) << level;
  }
  EXPECT_EQ(DetectCodec(""), Codec::kNone);
  EXPECT_EQ(DetectCodec("\x1f"), Codec::kNone);
  EXPECT_EQ(DetectCodec(absl::string_view("\x1f\x8b", 2)), Codec::kNone);  // needs the method
  EXPECT_EQ(DetectCodec(absl::string_view("\x1f\x8b\x07", 3)), Codec::kNone);
  EXPECT_EQ(DetectCodec(absl::string_view("\x78\x9c", 2)), Codec::kZlib);
  EXPECT_EQ(DetectCodec(absl::string_view("\x78\x9d", 2)), Codec::kNone);  // bad check
  EXPECT_EQ(DetectCodec(absl::string_view("\x78\xbb", 2)), Codec::kNone);  // preset dictionary
  EXPECT_EQ(DetectCodec(absl::string_view("\x88\x98", 2)), Codec::kNone);  // window > 32K
  // A plain record header whose length starts 0x78 0x9c looks like ZLIB:
  // the caller's decompressed-header check settles it (see ProbeFile).
  std::string plain;
  record::AppendFramed(&plain, std::string(0x9c78, 'a'));
  EXPECT_EQ(DetectCodec(plain), Codec::kZlib);
}

TEST(CodecName, Names) {
  EXPECT_EQ(CodecName(Codec::kNone), "none");
  EXPECT_EQ(CodecName(Codec::kGzip), "gzip");
  EXPECT_EQ(CodecName(Codec::kZlib), "zlib");
  for (Codec c : {Codec::kNone, Codec::kGzip, Codec::kZlib}) {
    EXPECT_EQ(ParseCodecName(CodecName(c)), c);
  }
  EXPECT_EQ(ParseCodecName("GZIP"), std::nullopt);
  EXPECT_EQ(ParseCodecName("gz"), std::nullopt);
  EXPECT_EQ(ParseCodecName(""), std::nullopt);
}

// ---- reads equal a straight decompression -------------------------------------

struct Case {
  std::string name;
  Wrap wrap;
  std::string data;  // uncompressed
  int level = 6;
  int strategy = Z_DEFAULT_STRATEGY;
  uint64_t span = 64 << 10;
};

class InflateReads : public ::testing::TestWithParam<int> {};

// Made once: the parameter names and every test read the same list.
const std::vector<Case>& Cases() {
  static const std::vector<Case>& cases = *new std::vector<Case>([] {
    std::vector<Case> c;
    c.push_back({"gzip text", Wrap::kGzip, TextLike(5 << 20, 1)});
    c.push_back({"zlib text", Wrap::kZlib, TextLike(5 << 20, 2)});
    c.push_back({"gzip random", Wrap::kGzip, RandomBytes(3 << 20, 3)});  // stored blocks
    c.push_back({"zlib random", Wrap::kZlib, RandomBytes(3 << 20, 4)});
    c.push_back({"gzip level 0", Wrap::kGzip, TextLike(2 << 20, 5), 0});
    c.push_back({"zlib level 0", Wrap::kZlib, TextLike(2 << 20, 6), 0});
    c.push_back({"gzip zeros", Wrap::kGzip, std::string(4 << 20, '\0'), 9});  // ~1000:1
    c.push_back({"zlib zeros", Wrap::kZlib, std::string(4 << 20, 'z'), 9});
    c.push_back({"gzip huffman only", Wrap::kGzip, TextLike(2 << 20, 7), 6, Z_HUFFMAN_ONLY});
    c.push_back({"gzip fixed codes", Wrap::kGzip, TextLike(2 << 20, 8), 6, Z_FIXED});
    c.push_back({"gzip level 1 default span", Wrap::kGzip, TextLike(6 << 20, 9), 1,
                 Z_DEFAULT_STRATEGY, kDefaultSpan});
    c.push_back({"gzip empty", Wrap::kGzip, ""});
    c.push_back({"zlib empty", Wrap::kZlib, ""});
    c.push_back({"gzip one byte", Wrap::kGzip, "x"});
    return c;
  }());
  return cases;
}

TEST_P(InflateReads, MatchStraightDecompression) {
  const Case& c = Cases()[GetParam()];
  SCOPED_TRACE(c.name);
  const std::string file = Deflate(c.data, c.wrap, c.level, c.strategy);
  bool clean = false;
  ASSERT_EQ(StraightInflate(file, &clean), c.data);
  ASSERT_TRUE(clean);
  Scanned s = Scan(file, CodecOf(c.wrap), c.span);
  EXPECT_FALSE(s.scan.problem) << s.scan.problem->message;
  EXPECT_EQ(s.scan.members, 1u);
  ASSERT_TRUE(s.sunk == c.data);
  ASSERT_EQ(s.scan.table.data_size, c.data.size());
  // Checkpoints: ordered, inside the file and the data, each at least
  // span / kDenseSpans of compressed or of uncompressed bytes after the one
  // before.
  const auto& pts = s.scan.table.points;
  ASSERT_FALSE(pts.empty());
  EXPECT_TRUE(pts[0].stream_start);
  EXPECT_EQ(pts[0].in, 0u);
  for (size_t i = 1; i < pts.size(); ++i) {
    EXPECT_GT(pts[i].out, pts[i - 1].out);
    EXPECT_GT(pts[i].in, pts[i - 1].in);
    EXPECT_TRUE(CheckpointAllowed(pts[i].in - pts[i - 1].in, pts[i].out - pts[i - 1].out, c.span))
        << "checkpoint " << i << " comes too soon";
    EXPECT_LE(pts[i].in, file.size());
    EXPECT_LE(pts[i].out, c.data.size());
    EXPECT_LT(pts[i].bits, 8);
  }
  if (c.data.size() > 4 * c.span && c.strategy != Z_FIXED && c.data.size() < 20 * file.size()) {
    // Stored and dynamic blocks end often enough for a checkpoint per span
    // or two of output (Z_FIXED level 6 writes few, long blocks; a block of
    // zeros at 1000:1 holds megabytes).
    EXPECT_GE(pts.size(), c.data.size() / c.span / 3) << c.data.size();
  }
  auto table = std::make_shared<const CheckpointTable>(s.scan.table);
  CheckRandomReads(s.fd, file.size(), table, c.data, 300, GetParam(), size_t{4} << 20,
                   /*clean=*/true);
}

INSTANTIATE_TEST_SUITE_P(Cases, InflateReads, ::testing::Range(0, static_cast<int>(Cases().size())),
                         [](const ::testing::TestParamInfo<int>& info) {
                           std::string n = Cases()[info.param].name;
                           for (char& ch : n) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

TEST(InflateSource, MultiMemberGzipWithAnEmptyMember) {
  const std::string a = TextLike(3 << 20, 11), b = RandomBytes(1 << 20, 12), c = TextLike(777, 13);
  // cat a.gz empty.gz b.gz c.gz
  const std::string file = Deflate(a, Wrap::kGzip) + Deflate("", Wrap::kGzip) +
                           Deflate(b, Wrap::kGzip, 1) + Deflate(c, Wrap::kGzip, 9);
  const std::string data = a + b + c;
  ASSERT_EQ(StraightInflate(file), data);
  Scanned s = Scan(file, Codec::kGzip, 64 << 10);
  EXPECT_FALSE(s.scan.problem) << s.scan.problem->message;
  EXPECT_EQ(s.scan.members, 4u);
  ASSERT_TRUE(s.sunk == data);
  int starts = 0;
  for (const Checkpoint& cp : s.scan.table.points) starts += cp.stream_start ? 1 : 0;
  EXPECT_GE(starts, 3);  // a, then b (and c): the empty member may share b's output offset
  CheckRandomReads(s.fd, file.size(), std::make_shared<const CheckpointTable>(s.scan.table), data,
                   400, 14);
}

TEST(InflateSource, ZlibStreamFromOurWriterFlushPoints) {
  // Full flushes make byte-aligned boundaries: checkpoints with bits == 0.
  const std::string data = TextLike(4 << 20, 15);
  const std::string file = Deflate(data, Wrap::kZlib, 6, Z_DEFAULT_STRATEGY, 1 << 20);
  Scanned s = Scan(file, Codec::kZlib, 64 << 10);
  ASSERT_FALSE(s.scan.problem);
  CheckRandomReads(s.fd, file.size(), std::make_shared<const CheckpointTable>(s.scan.table), data,
                   200, 16);
}

// Span 1: a checkpoint at (nearly) every block boundary, each laid by the
// ISA-L scan where it stopped its inflater (Scan checks them all with zlib),
// and the bytes read from every checkpoint through the ISA-L table and
// through the zlib table are the same.
TEST(InflateSource, IsalScanCheckpointsReadLikeZlibScanCheckpoints) {
  struct One {
    std::string name;
    std::string file;
    Codec codec;
  };
  std::vector<One> files;
  files.push_back({"text", Deflate(TextLike(3 << 20, 71), Wrap::kGzip), Codec::kGzip});
  files.push_back({"text level 1", Deflate(TextLike(2 << 20, 72), Wrap::kZlib, 1), Codec::kZlib});
  files.push_back(
      {"random (stored)", Deflate(RandomBytes(1 << 20, 73), Wrap::kGzip), Codec::kGzip});
  files.push_back(
      {"fixed codes", Deflate(TextLike(1 << 20, 74), Wrap::kGzip, 6, Z_FIXED), Codec::kGzip});
  files.push_back({"huffman only", Deflate(TextLike(1 << 20, 75), Wrap::kGzip, 6, Z_HUFFMAN_ONLY),
                   Codec::kGzip});
  files.push_back({"full flushes",
                   Deflate(TextLike(3 << 20, 76), Wrap::kZlib, 6, Z_DEFAULT_STRATEGY, 100 << 10),
                   Codec::kZlib});
  files.push_back({"two members",
                   Deflate(TextLike(1 << 20, 77), Wrap::kGzip) +
                       Deflate(RandomBytes(300 << 10, 78), Wrap::kGzip),
                   Codec::kGzip});
  for (const One& f : files) {
    SCOPED_TRACE(f.name);
    Scanned s = Scan(f.file, f.codec, 1);  // both ways, compared
    Scanned z = ScanWith(f.file, f.codec, 1, /*isal=*/false);
    ASSERT_FALSE(s.scan.problem);
    EXPECT_GT(s.scan.table.points.size(), 3u);
    BlockCache cache_isal(size_t{4} << 20), cache_zlib(size_t{4} << 20);
    InflateSource by_isal(Dup(s.fd), "test.gz", f.file.size(),
                          std::make_shared<const CheckpointTable>(s.scan.table), &cache_isal);
    InflateSource by_zlib(Dup(z.fd), "test.gz", f.file.size(),
                          std::make_shared<const CheckpointTable>(z.scan.table), &cache_zlib);
    std::vector<uint64_t> at;
    for (const auto& t : {s.scan.table.points, z.scan.table.points}) {
      for (const Checkpoint& cp : t) at.push_back(cp.out);
    }
    std::string a(3000, '\0'), b(3000, '\0');
    for (uint64_t off : at) {
      const uint64_t from = off > 1000 ? off - 1000 : 0;  // across the checkpoint
      auto ra = by_isal.ReadAt(from, a.data(), a.size());
      auto rb = by_zlib.ReadAt(from, b.data(), b.size());
      ASSERT_TRUE(ra.ok() && rb.ok()) << off;
      ASSERT_EQ(*ra, *rb) << off;
      ASSERT_TRUE(a.compare(0, *ra, s.sunk, from, *ra) == 0) << off;
      ASSERT_TRUE(b.compare(0, *rb, s.sunk, from, *rb) == 0) << off;
    }
  }
}

// ---- the index file round trip ---------------------------------------------

TEST(InflateSource, FileWindowsRoundTripThroughAnIndexFile) {
  const std::string data = TextLike(6 << 20, 21);
  const std::string file = Deflate(data, Wrap::kGzip);
  Scanned s = Scan(file, Codec::kGzip, 64 << 10);
  ASSERT_FALSE(s.scan.problem);
  ASSERT_GT(s.scan.table.points.size(), 10u);

  index::IndexFile f;
  f.file_size = file.size();
  f.mtime_ns = 123;
  f.path = "/data/test.gz";
  f.walk.file_size = data.size();
  f.walk.offsets = {0, data.size()};  // one "record": only the layout matters here
  f.codec = Codec::kGzip;
  f.data_size = data.size();
  f.checkpoints = s.scan.table.points;
  f.windows = s.scan.windows_blob;
  f.windows_size = f.windows.size();
  const std::string encoded = index::EncodeIndexFile(f);
  const test::TempDir tmp("source_test");
  ASSERT_FALSE(tmp.path().empty());
  const std::string path = tmp.Join("test.tfri");
  ASSERT_TRUE(WriteFileAtomically(path, encoded).ok());

  auto decoded = index::DecodeIndexFile(encoded);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->codec, Codec::kGzip);
  EXPECT_EQ(decoded->data_size, data.size());
  EXPECT_EQ(decoded->main_size + decoded->windows_size, encoded.size());
  ASSERT_EQ(decoded->checkpoints.size(), s.scan.table.points.size());
  for (size_t i = 0; i < decoded->checkpoints.size(); ++i) {
    const Checkpoint &a = decoded->checkpoints[i], &b = s.scan.table.points[i];
    EXPECT_EQ(a.in, b.in);
    EXPECT_EQ(a.out, b.out);
    EXPECT_EQ(a.bits, b.bits);
    EXPECT_EQ(a.stream_start, b.stream_start);
    EXPECT_EQ(a.window_offset, b.window_offset);
    EXPECT_EQ(a.window_length, b.window_length);
    EXPECT_EQ(a.window_crc, b.window_crc);
  }
  auto table = std::make_shared<CheckpointTable>();
  table->codec = Codec::kGzip;
  table->data_size = decoded->data_size;
  table->points = decoded->checkpoints;
  table->windows = Windows::InFile(path, decoded->main_size, decoded->windows_size);
  for (size_t i = 1; i < table->points.size(); i += 7) {
    auto w = table->windows->Load(table->points[i]);
    ASSERT_TRUE(w.ok()) << w.status();
    const uint64_t out = table->points[i].out;
    const size_t wlen = static_cast<size_t>(std::min<uint64_t>(out, kWindowSize));
    EXPECT_TRUE(IsWindowOf(*w, absl::string_view(data).substr(out - wlen, wlen))) << "window " << i;
  }
  CheckRandomReads(s.fd, file.size(), table, data, 300, 22);

  // Pinned to the file it was read from (Windows::InFile with its
  // identity): once open, the descriptor keeps reading that file whatever
  // is renamed over its path; a file put in its place before an open serves
  // no window, even one with the very same bytes; the reads fall back to
  // the stream start, exact.
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  auto pinned = std::make_shared<CheckpointTable>(*table);
  pinned->windows =
      Windows::InFile(path, decoded->main_size, decoded->windows_size, FileIdentity::Of(st));
  auto opened_before = std::make_shared<CheckpointTable>(*pinned);
  opened_before->windows =
      Windows::InFile(path, decoded->main_size, decoded->windows_size, FileIdentity::Of(st));
  ASSERT_TRUE(opened_before->windows->Load(opened_before->points[1]).ok());
  ASSERT_TRUE(WriteFileAtomically(path, encoded).ok());  // a rename over it
  auto replaced = pinned->windows->Load(pinned->points[1]);
  EXPECT_TRUE(absl::IsDataLoss(replaced.status())) << replaced.status();
  EXPECT_NE(replaced.status().message().find("changed after it was loaded"), std::string::npos)
      << replaced.status();
  CheckRandomReads(s.fd, file.size(), pinned, data, 30, 23);
  auto kept = opened_before->windows->Load(opened_before->points[1]);
  ASSERT_TRUE(kept.ok()) << kept.status();
  CheckRandomReads(s.fd, file.size(), opened_before, data, 30, 24);
}

TEST(InflateSource, CorruptWindowFallsBackToAnEarlierStreamStart) {
  const std::string data = TextLike(3 << 20, 31);
  const std::string file = Deflate(data, Wrap::kGzip);
  Scanned s = Scan(file, Codec::kGzip, 64 << 10);
  ASSERT_GT(s.scan.table.points.size(), 8u);
  auto table = std::make_shared<CheckpointTable>(s.scan.table);
  // Damage every other window: one through its crc, one through its bytes
  // (with the crc made to match, so the inflate of the window fails).
  std::string blob = s.scan.windows_blob;
  for (size_t i = 1; i < table->points.size(); i += 2) {
    Checkpoint& cp = table->points[i];
    if (i % 4 == 1) {
      cp.window_crc ^= 1;
    } else {
      blob[cp.window_offset] ^= 0x55;
      blob[cp.window_offset + cp.window_length / 2] ^= 0x55;
      cp.window_crc =
          crc32c::Value(absl::string_view(blob).substr(cp.window_offset, cp.window_length));
    }
  }
  table->windows = Windows::InMemory(blob);
  EXPECT_FALSE(table->windows->Load(table->points[1]).ok());
  // Reads still exact, whatever checkpoint they would have used.
  CheckRandomReads(s.fd, file.size(), table, data, 150, 32);
}

// ---- damaged streams ---------------------------------------------------------

// Scans a damaged file and checks what must hold whatever the damage:
// a problem naming a compressed offset inside the file, the data ending
// where inflate stopped, every byte of it equal to zlib's own output, and
// reads through the checkpoints equal to it too.
void CheckDamaged(const std::string& file, Codec codec, const std::string& what) {
  SCOPED_TRACE(what);
  bool clean = true;
  const std::string straight = StraightInflate(file, &clean);
  Scanned s = Scan(file, codec, 64 << 10);
  ASSERT_TRUE(s.scan.problem.has_value()) << "no problem reported";
  EXPECT_LE(s.scan.problem->compressed_offset, file.size());
  EXPECT_FALSE(s.scan.problem->message.empty());
  EXPECT_EQ(s.scan.problem->offset, s.scan.table.data_size);
  EXPECT_EQ(s.sunk.size(), s.scan.table.data_size);
  ASSERT_LE(s.sunk.size(), straight.size()) << "more bytes than zlib itself makes";
  ASSERT_TRUE(s.sunk == absl::string_view(straight).substr(0, s.sunk.size()))
      << "bytes before the damage differ from zlib's";
  CheckRandomReads(s.fd, file.size(), std::make_shared<const CheckpointTable>(s.scan.table), s.sunk,
                   60, file.size());
}

TEST(DamagedStreams, Truncated) {
  const std::string data = TextLike(3 << 20, 41);
  for (Wrap w : {Wrap::kGzip, Wrap::kZlib}) {
    const std::string file = Deflate(data, w);
    for (double frac : {0.0, 0.001, 0.3, 0.77, 0.999}) {
      const size_t cut = std::max<size_t>(3, static_cast<size_t>(file.size() * frac));
      CheckDamaged(file.substr(0, cut), CodecOf(w),
                   absl::StrCat("cut at ", cut, " of ", file.size()));
    }
    // Only the trailer cut short: all the data is there.
    const size_t trailer = w == Wrap::kGzip ? 8 : 4;
    const std::string cut = file.substr(0, file.size() - trailer / 2);
    Scanned s = Scan(cut, CodecOf(w), 64 << 10);
    ASSERT_TRUE(s.scan.problem);
    EXPECT_THAT(s.scan.problem->message, HasSubstr("truncated"));
    EXPECT_EQ(s.scan.problem->compressed_offset, cut.size());
  }
}

TEST(DamagedStreams, FlippedByteInsideADeflateBlock) {
  const std::string data = TextLike(3 << 20, 42);
  for (Wrap w : {Wrap::kGzip, Wrap::kZlib}) {
    const std::string file = Deflate(data, w);
    for (double frac : {0.1, 0.5, 0.9}) {
      std::string bad = file;
      const size_t at = static_cast<size_t>(file.size() * frac);
      bad[at] ^= 0x10;
      CheckDamaged(bad, CodecOf(w), absl::StrCat("byte ", at, " of ", file.size(), " flipped"));
    }
  }
}

TEST(DamagedStreams, GarbageAfterAGzipMember) {
  const std::string data = TextLike(1 << 20, 43);
  const std::string file = Deflate(data, Wrap::kGzip) + "this is not a member";
  Scanned s = Scan(file, Codec::kGzip, 64 << 10);
  ASSERT_TRUE(s.scan.problem);
  EXPECT_EQ(s.scan.problem->compressed_offset, file.size() - 20);
  EXPECT_THAT(s.scan.problem->message, HasSubstr("not a GZIP member"));
  EXPECT_TRUE(s.sunk == data);  // everything before it is served
  // A second member whose header is damaged after its magic.
  std::string second = Deflate(data, Wrap::kGzip);
  second[3] = static_cast<char>(0xe0);  // reserved flag bits
  const std::string two = Deflate(data, Wrap::kGzip) + second;
  Scanned t = Scan(two, Codec::kGzip, 64 << 10);
  ASSERT_TRUE(t.scan.problem);
  EXPECT_EQ(t.scan.table.data_size, data.size());
}

TEST(DamagedStreams, BytesAfterAZlibStream) {
  const std::string data = TextLike(1 << 20, 44);
  // A second ZLIB stream counts as garbage: TensorFlow reads no further.
  const std::string file = Deflate(data, Wrap::kZlib) + Deflate("more", Wrap::kZlib);
  Scanned s = Scan(file, Codec::kZlib, 64 << 10);
  ASSERT_TRUE(s.scan.problem);
  EXPECT_EQ(s.scan.problem->compressed_offset, Deflate(data, Wrap::kZlib).size());
  EXPECT_THAT(s.scan.problem->message, HasSubstr("after the end of the ZLIB stream"));
  EXPECT_EQ(s.scan.members, 1u);
  EXPECT_TRUE(s.sunk == data);
}

TEST(DamagedStreams, BadGzipTrailer) {
  const std::string data = TextLike(1 << 20, 45);
  std::string file = Deflate(data, Wrap::kGzip);
  file[file.size() - 6] ^= 1;  // the CRC-32
  CheckDamaged(file, Codec::kGzip, "bad CRC-32");
}

// ---- index::WalkShard on compressed shards -------------------------------------

std::string Shard(int records, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out;
  for (int i = 0; i < records; ++i) {
    record::AppendFramed(&out, TextLike(20 + rng() % 3000, rng()));
  }
  return out;
}

TEST(WalkShard, CompressedShardWalksLikeItsPlainTwin) {
  std::string plain = Shard(3000, 51);
  // Damage a record in the middle: its data CRC, and a later one's length.
  auto walk = record::WalkHeaders(MemFile(plain).get(), "p", plain.size());
  ASSERT_TRUE(walk.ok());
  ASSERT_TRUE(walk->problems.empty());
  const uint64_t mid = walk->offsets[1500], later = walk->offsets[2200];
  plain[mid + record::kHeaderSize + 3] ^= 1;
  plain[later + 2] ^= 0x40;
  for (Wrap w : {Wrap::kGzip, Wrap::kZlib}) {
    const std::string file = Deflate(plain, w);
    UniqueFd pfd = MemFile(plain), cfd = MemFile(file);
    auto p = index::WalkShard(pfd.get(), "plain.tfrecord", plain.size(), Codec::kNone);
    auto c = index::WalkShard(cfd.get(), "comp.tfrecord.gz", file.size(), CodecOf(w), 64 << 10);
    ASSERT_TRUE(p.ok() && c.ok());
    ASSERT_NE(c->checkpoints, nullptr);
    EXPECT_EQ(c->checkpoints->data_size, plain.size());
    EXPECT_FALSE(p->walk.problems.empty());
    EXPECT_EQ(c->walk.offsets, p->walk.offsets);
    ASSERT_EQ(c->walk.problems.size(), p->walk.problems.size());
    for (size_t i = 0; i < p->walk.problems.size(); ++i) {
      EXPECT_EQ(c->walk.problems[i].offset, p->walk.problems[i].offset);
    }
    // Every record reads the same through the source layer.
    BlockCache cache(size_t{2} << 20);
    InflateSource src(Dup(cfd), "comp", file.size(), c->checkpoints, &cache);
    PlainSource psrc = PlainSource::Borrowing(pfd.get(), "plain", plain.size());
    const auto& off = p->walk.offsets;
    for (size_t i = 0; i + 1 < off.size(); i += 37) {
      auto a = record::ReadRecord(psrc, i, off[i], off[i + 1]);
      auto b = record::ReadRecord(src, i, off[i], off[i + 1]);
      ASSERT_EQ(a.ok(), b.ok()) << i;
      if (a.ok()) {
        EXPECT_EQ(*a, *b) << i;
      }
    }
  }
}

TEST(WalkShard, TruncatedGzipShardEndsAtTheLastWholeRecord) {
  const std::string plain = Shard(2000, 52);
  const std::string file = Deflate(plain, Wrap::kGzip);
  const std::string cut = file.substr(0, file.size() * 2 / 3);
  const std::string straight = StraightInflate(cut);
  UniqueFd fd = MemFile(cut);
  auto c = index::WalkShard(fd.get(), "cut.gz", cut.size(), Codec::kGzip, 64 << 10);
  ASSERT_TRUE(c.ok());
  ASSERT_FALSE(c->walk.problems.empty());
  const record::WalkProblem& last = c->walk.problems.back();
  EXPECT_THAT(last.message, HasSubstr("compressed byte offset"));
  EXPECT_THAT(last.message, HasSubstr("gzip"));
  // Every record the walk lists is whole and equal to the original's.
  const auto& off = c->walk.offsets;
  ASSERT_GT(off.size(), 100u);
  EXPECT_LE(off.back(), straight.size());
  BlockCache cache(size_t{2} << 20);
  InflateSource src(Dup(fd), "cut.gz", cut.size(), c->checkpoints, &cache);
  for (size_t i = 0; i + 1 < off.size(); ++i) {
    auto r = record::ReadRecord(src, i, off[i], off[i + 1]);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(*r == absl::string_view(plain).substr(off[i] + record::kHeaderSize, r->size()));
  }
}

TEST(ProbeFile, CompressedShardsAndOtherCompressedFiles) {
  const std::string plain = Shard(10, 53);
  for (Wrap w : {Wrap::kGzip, Wrap::kZlib}) {
    UniqueFd fd = MemFile(Deflate(plain, w));
    Codec codec = Codec::kNone;
    auto p = index::ProbeFile(fd.get(), "x.bin", Deflate(plain, w).size(), &codec);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, index::Probe::kShard);
    EXPECT_EQ(codec, CodecOf(w));
    const std::string text = Deflate("hello, not a record at all", w);
    UniqueFd tfd = MemFile(text);
    p = index::ProbeFile(tfd.get(), "x.txt.gz", text.size(), &codec);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, index::Probe::kNotShard);
    EXPECT_EQ(codec, CodecOf(w));
  }
}

// ---- cursor and cache --------------------------------------------------------

TEST(InflateSource, SequentialReadsDoNotRestart) {
  const std::string data = TextLike(8 << 20, 61);
  const std::string file = Deflate(data, Wrap::kGzip);
  Scanned s = Scan(file, Codec::kGzip, 64 << 10);
  ASSERT_GT(s.scan.table.points.size(), 20u);
  BlockCache cache(size_t{1} << 20);  // far smaller than the data
  InflateSource src(Dup(s.fd), "seq.gz", file.size(),
                    std::make_shared<const CheckpointTable>(s.scan.table), &cache);
  std::string buf(4096 + 17, '\0');
  for (uint64_t off = 0; off < data.size(); off += buf.size()) {
    auto got = src.ReadAt(off, buf.data(), buf.size());
    ASSERT_TRUE(got.ok());
    ASSERT_TRUE(absl::string_view(buf.data(), *got) == absl::string_view(data).substr(off, *got));
  }
  EXPECT_LE(src.restarts(), 1u);  // the first read starts the cursor
  EXPECT_EQ(src.blocks_inflated(), (data.size() + kBlockSize - 1) / kBlockSize);
  EXPECT_LE(cache.bytes(), size_t{1} << 20);
  // A read far back restarts from a checkpoint near it, not from 0.
  ASSERT_TRUE(src.ReadAt(data.size() / 2, buf.data(), 10).ok());
  EXPECT_EQ(src.restarts(), 2u);
}

// The span bounds the uncompressed side too: well-compressed data gets a
// checkpoint about every span of output, not every span of input (which
// would leave several spans of output to inflate before a random read).
TEST(InflateSource, CheckpointsAboutEverySpanOfOutput) {
  const std::string data = TextLike(8 << 20, 71);  // about 4:1
  const std::string file = Deflate(data, Wrap::kGzip);
  const uint64_t span = 256 << 10;
  Scanned s = Scan(file, Codec::kGzip, span);
  ASSERT_TRUE(s.sunk == data);
  const auto& pts = s.scan.table.points;
  EXPECT_GE(pts.size(), data.size() / span / 2);  // by input alone: about data / 4 / span
  uint64_t widest = 0;
  for (size_t i = 1; i < pts.size(); ++i) widest = std::max(widest, pts[i].out - pts[i - 1].out);
  widest = std::max(widest, data.size() - pts.back().out);
  // A checkpoint waits for the next block boundary: a block of this data
  // holds well under a span of output.
  EXPECT_LT(widest, 2 * span);
}

// A cursor that continues from where the previous read stopped gives the
// same bytes as one started afresh at the checkpoint before each read, and
// both equal zlib's straight decompression (the reads run on ISA-L from
// every checkpoint, those with bits left in a byte included).
TEST(InflateSource, ContinuedCursorMatchesFreshCursors) {
  const std::string a = TextLike(3 << 20, 72), b = RandomBytes(300 << 10, 73);
  const std::string file = Deflate(a, Wrap::kGzip, 6) + Deflate(b, Wrap::kGzip, 1) +
                           Deflate(a.substr(1000, 1 << 20), Wrap::kGzip, 9);
  const std::string data = a + b + a.substr(1000, 1 << 20);
  Scanned s = Scan(file, Codec::kGzip, 64 << 10);
  ASSERT_FALSE(s.scan.problem);
  ASSERT_TRUE(s.sunk == data);
  auto table = std::make_shared<const CheckpointTable>(s.scan.table);
  size_t with_bits = 0;
  for (const Checkpoint& cp : table->points) with_bits += cp.bits != 0 ? 1 : 0;
  EXPECT_GT(with_bits, 0u);  // the bit-priming path is exercised

  BlockCache cache(kBlockSize);  // one block: every later read inflates
  InflateSource continued(Dup(s.fd), "continued.gz", file.size(), table, &cache);
  std::mt19937_64 rng(74);
  std::string got_continued, got_fresh;
  uint64_t skips = 0;
  for (uint64_t off = 0; off < data.size();) {
    const size_t len = 1 + rng() % 40000;
    got_continued.assign(len, '\0');
    auto n = continued.ReadAt(off, got_continued.data(), len);
    ASSERT_TRUE(n.ok()) << n.status();
    got_continued.resize(*n);
    BlockCache fresh_cache(size_t{4} << 20);
    InflateSource fresh(Dup(s.fd), "fresh.gz", file.size(), table, &fresh_cache);
    got_fresh.assign(len, '\0');
    auto m = fresh.ReadAt(off, got_fresh.data(), len);
    ASSERT_TRUE(m.ok()) << m.status();
    got_fresh.resize(*m);
    ASSERT_EQ(*n, *m) << off;
    ASSERT_TRUE(got_continued == got_fresh) << "at " << off;
    ASSERT_TRUE(got_continued == absl::string_view(data).substr(off, *n)) << "at " << off;
    off += *n;
    if (rng() % 8 == 0) {  // mostly in order, some skips ahead
      off += rng() % 200000;
      ++skips;
    }
  }
  // In-order reads continue the cursor; a skip past a checkpoint restarts
  // at it.
  EXPECT_LE(continued.restarts(), 1 + skips);
  EXPECT_FALSE(continued.fell_back_to_zlib());
  // Exactly at every checkpoint, and just before it.
  for (const Checkpoint& cp : table->points) {
    for (uint64_t off : {cp.out, cp.out > 0 ? cp.out - 1 : 0}) {
      BlockCache fresh_cache(size_t{1} << 20);
      InflateSource fresh(Dup(s.fd), "fresh.gz", file.size(), table, &fresh_cache);
      char buf[300];
      auto m = fresh.ReadAt(off, buf, sizeof buf);
      ASSERT_TRUE(m.ok()) << m.status();
      ASSERT_TRUE(absl::string_view(buf, *m) == absl::string_view(data).substr(off, *m)) << off;
    }
  }
}

// A cursor outlives the descriptor lease it was started with: with fewer
// descriptors than shards (FdCache of one), the descriptor a cursor was
// made with is closed, and its number given to another file, before the
// cursor restarts at a checkpoint. The restart (whose first read is the
// byte holding a checkpoint's leftover bits) must read this read's lease,
// never the earlier one: here the earlier number is held by a decoy file of
// the complement bytes, so a priming byte read from it is wrong in every
// bit (and one read from a closed number is EBADF).
TEST(InflateSource, RestartReadsThroughTheCurrentLeaseNotAnEarlierOne) {
  test::TempDir dir("inflate-lease");
  const std::string data_a = TextLike(3 << 20, 81), data_b = TextLike(1 << 20, 82);
  const std::string file_a = Deflate(data_a, Wrap::kGzip, 6);
  const std::string file_b = Deflate(data_b, Wrap::kZlib, 6);
  const std::string path_a = dir.Join("a.gz"), path_b = dir.Join("b.zz");
  ASSERT_TRUE(WriteFileAtomically(path_a, file_a).ok());
  ASSERT_TRUE(WriteFileAtomically(path_b, file_b).ok());
  std::string complement = file_a;
  for (char& c : complement) c = static_cast<char>(~c);
  Scanned sa = Scan(file_a, Codec::kGzip, 64 << 10);
  Scanned sb = Scan(file_b, Codec::kZlib, 64 << 10);
  auto table_a = std::make_shared<const CheckpointTable>(sa.scan.table);
  auto table_b = std::make_shared<const CheckpointTable>(sb.scan.table);
  std::vector<const Checkpoint*> with_bits;
  for (const Checkpoint& cp : table_a->points) {
    if (cp.bits != 0 && cp.out > 2 * kBlockSize) with_bits.push_back(&cp);
  }
  ASSERT_GE(with_bits.size(), 3u);

  auto identity = [](const std::string& path) {
    struct stat st;
    EXPECT_EQ(::stat(path.c_str(), &st), 0);
    return FileIdentity::Of(st);
  };
  FdCache fds(1);
  BlockCache cache(kBlockSize);  // one block: every read below inflates
  InflateSource a(ShardFile(path_a, identity(path_a), &fds), file_a.size(), table_a, &cache);
  InflateSource b(ShardFile(path_b, identity(path_b), &fds), file_b.size(), table_b, &cache);
  char buf[500];
  std::vector<UniqueFd> decoys;
  for (const Checkpoint* cp : with_bits) {
    ASSERT_TRUE(a.ReadAt(cp->out / 2, buf, sizeof buf).ok());  // a's cursor on a's descriptor
    ASSERT_TRUE(b.ReadAt(1000, buf, sizeof buf).ok());         // closes a's descriptor
    decoys.push_back(MemFile(complement));          // takes the number a's descriptor had
    auto got = a.ReadAt(cp->out, buf, sizeof buf);  // restarts at cp: primes its bits
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(absl::string_view(buf, *got) == absl::string_view(data_a).substr(cp->out, *got))
        << "at checkpoint " << cp->out;
  }
  EXPECT_FALSE(a.fell_back_to_zlib());
}

// A forged checkpoint (its uncompressed offset moved, as an edited index
// file with its CRC fixed would have it) makes a trusted table serve other
// bytes of the stream as these; an untrusted one (an index others may
// write) is checked against the stream before a read resumes there, so the
// reads stay exact, and VerifyCheckpoints names the forged checkpoint.
TEST(InflateSource, ForgedCheckpointIsCaughtBeforeAReadResumesAtIt) {
  const std::string data = TextLike(2 << 20, 95);
  const std::string file = Deflate(data, Wrap::kGzip, 6);
  Scanned s = Scan(file, Codec::kGzip, 256 << 10);
  ASSERT_GT(s.scan.table.points.size(), 4u);
  auto good = std::make_shared<const CheckpointTable>(s.scan.table);
  EXPECT_TRUE(VerifyCheckpoints(s.fd.get(), "t.gz", file.size(), *good).ok());

  CheckpointTable forged = s.scan.table;
  const size_t k = forged.points.size() / 2;
  const uint64_t shift = 1000;
  ASSERT_LT(forged.points[k].out + shift, forged.points[k + 1].out);
  forged.points[k].out += shift;
  auto status = VerifyCheckpoints(s.fd.get(), "t.gz", file.size(), forged);
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("checkpoint ", k, " ")));

  // In the first whole block after the forged checkpoint: a read there
  // resumes at it.
  const uint64_t off = (forged.points[k].out / kBlockSize + 1) * kBlockSize + 100;
  ASSERT_LT(off + 3000, forged.points[k + 1].out);
  char buf[3000];
  {  // trusted: the forgery is served (what an unchecked index did)
    BlockCache cache(kBlockSize);
    InflateSource src(Dup(s.fd), "t.gz", file.size(),
                      std::make_shared<const CheckpointTable>(forged), &cache);
    auto got = src.ReadAt(off, buf, sizeof buf);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_FALSE(absl::string_view(buf, *got) == absl::string_view(data).substr(off, *got));
  }
  forged.trusted = false;
  auto untrusted = std::make_shared<const CheckpointTable>(forged);
  BlockCache cache(kBlockSize);
  InflateSource src(Dup(s.fd), "t.gz", file.size(), untrusted, &cache);
  std::mt19937_64 rng(96);
  for (uint64_t at : {off, uint64_t{100}, forged.points[k - 1].out + 5, data.size() - 2000,
                      forged.points[k + 1].out}) {
    auto got = src.ReadAt(at, buf, sizeof buf);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(absl::string_view(buf, *got) == absl::string_view(data).substr(at, *got)) << at;
  }
  for (int i = 0; i < 50; ++i) {
    const uint64_t at = rng() % data.size();
    auto got = src.ReadAt(at, buf, sizeof buf);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(absl::string_view(buf, *got) == absl::string_view(data).substr(at, *got)) << at;
  }
  // An untrusted table that is right is used as it is.
  CheckpointTable honest = s.scan.table;
  honest.trusted = false;
  BlockCache cache2(kBlockSize);
  InflateSource src2(Dup(s.fd), "t.gz", file.size(),
                     std::make_shared<const CheckpointTable>(honest), &cache2);
  auto got = src2.ReadAt(data.size() - 5000, buf, sizeof buf);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(absl::string_view(buf, *got) ==
              absl::string_view(data).substr(data.size() - 5000, *got));
}

// ---- sparse windows ------------------------------------------------------------

// Raw deflate of `data` at level 9 with `dict` as its history, as if it
// followed `dict` in one stream (the data after a checkpoint).
std::string DeflateAfter(absl::string_view dict, absl::string_view data) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
  EXPECT_EQ(deflateSetDictionary(&z, reinterpret_cast<const Bytef*>(dict.data()),
                                 static_cast<uInt>(dict.size())),
            Z_OK);
  std::string out(deflateBound(&z, data.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(out.size() - z.avail_out);
  deflateEnd(&z);
  return out;
}

// zlib's raw inflate of `in` with `dict` as its history (the judge: it
// knows nothing of sparse windows).
std::string InflateAfter(absl::string_view dict, absl::string_view in, size_t n) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, -15), Z_OK);
  EXPECT_EQ(inflateSetDictionary(&z, reinterpret_cast<const Bytef*>(dict.data()),
                                 static_cast<uInt>(dict.size())),
            Z_OK);
  std::string out(n, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int ret = inflate(&z, Z_FINISH);
  out.resize(out.size() - z.avail_out);
  inflateEnd(&z);
  if (ret != Z_STREAM_END) return "inflate failed: " + std::to_string(ret);
  return out;
}

TEST(SparseWindows, KeepOnlyTheBytesTheNextOutputReads) {
  const std::string window = RandomBytes(kWindowSize, 101);
  // After the boundary: the window's last 3 bytes over and over (one copy
  // that starts in the window and runs on into its own output), a run
  // copied from early in the window, new bytes, another run, more.
  std::string after;
  for (int i = 0; i < 20; ++i) after += window.substr(kWindowSize - 3);
  after += window.substr(1000, 100) + RandomBytes(5000, 102) + window.substr(20000, 300) +
           RandomBytes(40000, 103);
  const std::string in = DeflateAfter(window, after);
  // (Data that starts inside a byte is the scan's case: ScanStoresSparse...
  // below; shifting these bits would misalign its stored blocks.)
  auto sparse = SparseWindow(window, in, 0);
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  EXPECT_TRUE(IsWindowOf(*sparse, window));
  EXPECT_EQ(sparse->substr(1000, 100), window.substr(1000, 100));
  EXPECT_EQ(sparse->substr(20000, 300), window.substr(20000, 300));
  EXPECT_EQ(sparse->substr(kWindowSize - 3), window.substr(kWindowSize - 3));
  size_t kept = 0;
  for (char c : *sparse) kept += c != '\0' ? 1 : 0;
  // The runs, and the few 3-byte matches random bytes find by chance.
  EXPECT_LT(kept, 1500u);
  EXPECT_TRUE(InflateAfter(*sparse, in, after.size() + 1) == after);
  // A shorter window (near the start of a stream): offsets from its end.
  const std::string short_window = window.substr(kWindowSize - 1200);
  const std::string after2 = short_window.substr(100, 50) + RandomBytes(50000, 104);
  const std::string in2 = DeflateAfter(short_window, after2);
  auto sparse2 = SparseWindow(short_window, in2, 0);
  ASSERT_TRUE(sparse2.ok()) << sparse2.status();
  EXPECT_EQ(sparse2->substr(100, 50), short_window.substr(100, 50));
  EXPECT_TRUE(InflateAfter(*sparse2, in2, after2.size() + 1) == after2);
}

TEST(SparseWindows, ShortOrBrokenDataIsAnErrorNotAGuess) {
  const std::string window = RandomBytes(kWindowSize, 105);
  const std::string after = window.substr(500, 1000) + RandomBytes(60000, 106);
  const std::string in = DeflateAfter(window, after);
  auto cut = SparseWindow(window, absl::string_view(in).substr(0, 200), 0);
  EXPECT_TRUE(absl::IsOutOfRange(cut.status())) << cut.status();
  auto type3 = SparseWindow(window, std::string(64, '\xff'), 0);  // block type 3
  EXPECT_TRUE(absl::IsInvalidArgument(type3.status())) << type3.status();
  // A reference further back than the window it is given.
  auto too_far = SparseWindow(window.substr(0, 100), in, 0);
  EXPECT_FALSE(too_far.ok());
  for (uint64_t seed = 0; seed < 200; ++seed) {  // garbage: an answer or an error, never a crash
    const std::string junk = RandomBytes(2000, 1000 + seed);
    auto r = SparseWindow(window, junk, static_cast<int>(seed % 8));
    if (r.ok()) {
      EXPECT_TRUE(IsWindowOf(*r, window));
    }
  }
}

// The index build stores sparse windows, more checkpoints than a span
// apart would give within the same budget, and reads resuming at each of
// them are exact.
TEST(SparseWindows, ScanStoresSparseWindowsThatReadExactly) {
  const std::string data = TextLike(6 << 20, 107);
  const std::string file = Deflate(data, Wrap::kGzip, 6);
  Scanned s = Scan(file, Codec::kGzip, kDefaultSpan);
  ASSERT_FALSE(s.scan.problem);
  const CheckpointTable& t = s.scan.table;
  size_t windows = 0, sparse = 0;
  for (const Checkpoint& cp : t.points) {
    if (cp.stream_start) continue;
    auto w = t.windows->Load(cp);
    ASSERT_TRUE(w.ok()) << w.status();
    const size_t wlen = static_cast<size_t>(std::min<uint64_t>(cp.out, kWindowSize));
    const absl::string_view whole = absl::string_view(data).substr(cp.out - wlen, wlen);
    EXPECT_TRUE(IsWindowOf(*w, whole)) << cp.out;
    ++windows;
    sparse += *w != whole ? 1 : 0;
  }
  EXPECT_GT(windows, data.size() / kDefaultSpan);
  EXPECT_GE(2 * sparse, windows);
  EXPECT_LE(static_cast<double>(s.scan.windows_blob.size() + 40 * t.points.size()),
            kCheckpointBudget * static_cast<double>(file.size()) + 40 + kWindowSize / 2);
  // A read at the first block after each checkpoint resumes there.
  auto table = std::make_shared<const CheckpointTable>(t);
  size_t resumed = 0;
  for (const Checkpoint& cp : t.points) {
    const uint64_t off = (cp.out + kBlockSize - 1) / kBlockSize * kBlockSize;
    if (off >= data.size() || &t.Before(off) != &cp) continue;
    BlockCache cache(kBlockSize);
    InflateSource src(Dup(s.fd), "test.gz", file.size(), table, &cache);
    std::string buf(2 * kBlockSize, '\0');
    auto got = src.ReadAt(off, buf.data(), buf.size());
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(absl::string_view(buf.data(), *got) == absl::string_view(data).substr(off, *got))
        << "read at " << off;
    EXPECT_EQ(src.restarts(), 1u);
    ++resumed;
  }
  EXPECT_GE(2 * resumed, windows);
}

// Heap bytes in use (glibc's arena and mmapped chunks).
size_t HeapInUse() {
  const struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

// Every compressed shard that was read keeps an inflate cursor only while
// it is among the few most recently used: a mount of many shards, each read
// once, holds the blocks and idle cursors within one budget instead of a
// cursor (zlib and ISA-L state, input buffer) per shard forever.
TEST(BlockCache, IdleCursorsStayWithinTheBudgetAcrossManyShards) {
  const std::string data = TextLike(1 << 20, 91);
  const std::string file = Deflate(data, Wrap::kGzip, 6);
  Scanned s = Scan(file, Codec::kGzip, 64 << 10);
  auto table = std::make_shared<const CheckpointTable>(s.scan.table);
  const size_t budget = size_t{2} << 20;
  BlockCache cache(budget);
  std::vector<std::unique_ptr<InflateSource>> sources;
  for (int i = 0; i < 300; ++i) {
    sources.push_back(
        std::make_unique<InflateSource>(Dup(s.fd), "many.gz", file.size(), table, &cache));
  }
  const size_t before = HeapInUse();
  std::mt19937_64 rng(92);
  char buf[2000];
  for (auto& src : sources) {
    const uint64_t off = rng() % data.size();
    auto got = src->ReadAt(off, buf, sizeof buf);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(absl::string_view(buf, *got) == absl::string_view(data).substr(off, *got));
  }
  const size_t after = HeapInUse();
  // Before idle cursors were bounded: about 190 KiB per source read, 55 MiB.
  EXPECT_LT(after - std::min(after, before), budget + (size_t{1} << 20))
      << "heap grew by " << (after - before) << " bytes reading 300 shards once";
  EXPECT_LE(cache.idle_cursors(), kMaxIdleCursors);
  EXPECT_LE(cache.bytes() + cache.cursor_bytes(), budget);
  EXPECT_GT(cache.idle_cursors(), 0u);
  // A source that goes away takes its idle cursor with it.
  const size_t idle = cache.idle_cursors();
  sources.pop_back();
  EXPECT_EQ(cache.idle_cursors(), idle - 1);
}

TEST(BlockCache, StaysWithinBudgetAcrossSources) {
  const std::string data = TextLike(4 << 20, 62);
  const std::string file = Deflate(data, Wrap::kZlib);
  Scanned s = Scan(file, Codec::kZlib, 64 << 10);
  auto table = std::make_shared<const CheckpointTable>(s.scan.table);
  const size_t budget = 3 * kBlockSize;
  BlockCache cache(budget);
  InflateSource a(Dup(s.fd), "a", file.size(), table, &cache);
  InflateSource b(Dup(s.fd), "b", file.size(), table, &cache);
  std::mt19937_64 rng(63);
  char buf[1000];
  for (int i = 0; i < 200; ++i) {
    const uint64_t off = rng() % data.size();
    InflateSource& src = i % 2 ? a : b;
    auto got = src.ReadAt(off, buf, sizeof buf);
    ASSERT_TRUE(got.ok());
    ASSERT_TRUE(absl::string_view(buf, *got) == absl::string_view(data).substr(off, *got));
    ASSERT_LE(cache.bytes(), budget);
  }
  // A hit is served from the cache: re-reading the last offset inflates
  // nothing.
  const uint64_t before = a.blocks_inflated();
  ASSERT_TRUE(a.ReadAt(100, buf, 10).ok());
  ASSERT_TRUE(a.ReadAt(120, buf, 10).ok());
  EXPECT_LE(a.blocks_inflated(), before + 1);
}

// ---- record::ShardWriter compressed output --------------------------------------

class WriterCodec : public ::testing::TestWithParam<Codec> {};

TEST_P(WriterCodec, RoundTripsThroughZlibAndTheSourceLayer) {
  const Codec codec = GetParam();
  UniqueFd fd(memfd_create("writer", MFD_CLOEXEC));
  UniqueFd keep = Dup(fd);
  record::ShardWriter w(std::move(fd), "w", {.codec = codec});
  std::mt19937_64 rng(71);
  std::string plain;
  std::vector<std::string> payloads;
  for (int i = 0; i < 2500; ++i) {
    payloads.push_back(i % 3 ? TextLike(rng() % 4000, rng()) : RandomBytes(rng() % 2000, rng()));
    record::AppendFramed(&plain, payloads.back());
    ASSERT_TRUE(w.Append(payloads.back()).ok());
  }
  ASSERT_TRUE(w.Close(true).ok());
  EXPECT_EQ(w.bytes(), plain.size());
  EXPECT_FALSE(w.Append("late").ok());
  struct stat st;
  ASSERT_EQ(::fstat(keep.get(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), w.file_bytes());
  std::string file(st.st_size, '\0');
  ASSERT_TRUE(PreadFull(keep.get(), file.data(), file.size(), 0, "w").ok());
  if (codec == Codec::kNone) {
    EXPECT_EQ(file, plain);
    return;
  }
  EXPECT_EQ(DetectCodec(file), codec);
  bool clean = false;
  EXPECT_TRUE(StraightInflate(file, &clean) == plain);
  EXPECT_TRUE(clean);
  EXPECT_LT(file.size(), plain.size());
  // One stream/member; a full flush every kFlushEvery bytes leaves the
  // sync marker 00 00 ff ff (an empty stored block) at least that often.
  Scanned s = Scan(file, codec, 64 << 10);
  EXPECT_FALSE(s.scan.problem);
  EXPECT_EQ(s.scan.members, 1u);
  size_t markers = 0;
  for (size_t p = file.find(std::string("\0\0\xff\xff", 4)); p != std::string::npos;
       p = file.find(std::string("\0\0\xff\xff", 4), p + 1)) {
    ++markers;
  }
  EXPECT_GE(markers, plain.size() / record::kFlushEvery);
  auto walked = index::WalkShard(keep.get(), "w", file.size(), codec, 64 << 10);
  ASSERT_TRUE(walked.ok());
  EXPECT_TRUE(walked->walk.problems.empty());
  ASSERT_EQ(walked->walk.offsets.size(), payloads.size() + 1);
  BlockCache cache(size_t{1} << 20);
  InflateSource src(Dup(keep), "w", file.size(), walked->checkpoints, &cache);
  for (size_t i = 0; i < payloads.size(); i += 13) {
    auto r = record::ReadRecord(src, i, walked->walk.offsets[i], walked->walk.offsets[i + 1]);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(*r, payloads[i]);
  }
}

TEST_P(WriterCodec, EmptyShard) {
  UniqueFd fd(memfd_create("writer", MFD_CLOEXEC));
  UniqueFd keep = Dup(fd);
  record::ShardWriter w(std::move(fd), "w", {.codec = GetParam()});
  ASSERT_TRUE(w.Close(false).ok());
  std::string file(w.file_bytes(), '\0');
  ASSERT_TRUE(PreadFull(keep.get(), file.data(), file.size(), 0, "w").ok());
  bool clean = GetParam() == Codec::kNone;
  EXPECT_EQ(GetParam() == Codec::kNone ? file : StraightInflate(file, &clean), "");
  EXPECT_TRUE(clean);
}

INSTANTIATE_TEST_SUITE_P(Codecs, WriterCodec,
                         ::testing::Values(Codec::kNone, Codec::kGzip, Codec::kZlib),
                         [](const ::testing::TestParamInfo<Codec>& info) {
                           return std::string(CodecName(info.param));
                         });

}  // namespace
}  // namespace tfrecordfs::source
