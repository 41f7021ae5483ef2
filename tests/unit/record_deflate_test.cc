// record/deflate.h: ParallelDeflater's stream, inflated by plain zlib, at
// every size around a block and every thread count from 1 to 4; and the
// ShardWriter that uses it.
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/bytes.h"
#include "testing/inflate.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/record/deflate.h"
#include "tfrecordfs/record/writer.h"

namespace tfrecordfs::record {
namespace {

using source::Codec;
using test::Inflate;

// What the writer wrote before on one core: one zlib stream, Z_FULL_FLUSH
// after every block but the last, Z_FINISH after it.
std::string SerialDeflate(const std::vector<std::string>& blocks, Codec codec, int level) {
  z_stream z{};
  EXPECT_EQ(
      deflateInit2(&z, level, Z_DEFLATED, codec == Codec::kGzip ? 31 : 15, 8, Z_DEFAULT_STRATEGY),
      Z_OK);
  std::string out;
  std::vector<char> buf(1 << 16);
  const size_t n = std::max<size_t>(blocks.size(), 1);
  for (size_t i = 0; i < n; ++i) {
    const bool last = i + 1 == n;
    std::string in = blocks.empty() ? std::string() : blocks[i];
    z.next_in = reinterpret_cast<Bytef*>(in.data());
    z.avail_in = static_cast<uInt>(in.size());
    int r;
    do {
      z.next_out = reinterpret_cast<Bytef*>(buf.data());
      z.avail_out = static_cast<uInt>(buf.size());
      r = deflate(&z, last ? Z_FINISH : Z_FULL_FLUSH);
      out.append(buf.data(), buf.size() - z.avail_out);
    } while (z.avail_out == 0 || (last && r != Z_STREAM_END));
  }
  deflateEnd(&z);
  return out;
}

struct Made {
  std::string stream;
  std::vector<size_t> pieces;  // the size of each sink call
};

Made Deflate(const std::vector<std::string>& blocks, Codec codec, int threads, int level = 6) {
  Made m;
  ParallelDeflater d(codec, level, threads, "test", [&](absl::string_view b) {
    m.stream.append(b.data(), b.size());
    m.pieces.push_back(b.size());
    return absl::OkStatus();
  });
  for (std::string b : blocks) {
    EXPECT_TRUE(d.AddBlock(&b).ok());
    EXPECT_TRUE(b.empty());
  }
  EXPECT_TRUE(d.Finish().ok());
  EXPECT_FALSE(d.Finish().ok());  // once
  return m;
}

std::vector<std::string> Cut(const std::string& data, size_t block) {
  std::vector<std::string> out;
  for (size_t at = 0; at < data.size(); at += block) out.push_back(data.substr(at, block));
  return out;
}

// Sizes around a piece and around a block (the caller's unit, which ends
// with a full flush), at every thread count from 1 to 4.
TEST(ParallelDeflater, ZlibInflatesEverySizeAtEveryThreadCount) {
  constexpr size_t kPiece = kDeflatePiece;
  constexpr size_t kBlock = 2 * kPiece + 1000;  // three pieces, the last short
  for (Codec codec : {Codec::kGzip, Codec::kZlib}) {
    for (size_t size : {size_t{0}, size_t{1}, kPiece - 1, kPiece, kPiece + 1, kBlock - 1, kBlock,
                        kBlock + 1, 5 * kBlock + 17}) {
      const std::string data = test::WordsWithRandomRuns(size, static_cast<uint32_t>(size));
      const std::vector<std::string> blocks = Cut(data, kBlock);
      const std::string serial = SerialDeflate(blocks, codec, 6);
      std::string first;
      for (int threads = 1; threads <= 4; ++threads) {
        SCOPED_TRACE(
            absl::StrCat(source::CodecName(codec), ", ", size, " bytes, ", threads, " thread(s)"));
        const Made m = Deflate(blocks, codec, threads);
        bool ok = false;
        EXPECT_TRUE(Inflate(m.stream, codec == Codec::kGzip ? 31 : 15, &ok) == data);
        EXPECT_TRUE(ok);
        // The same bytes whatever the thread count; about the size of the
        // stream one deflate state writes with a full flush after each
        // block (a sync flush marker per piece; text-like input).
        if (threads == 1) first = m.stream;
        EXPECT_TRUE(m.stream == first);
        EXPECT_LE(m.stream.size(), serial.size() + serial.size() / 200 + 5 * (size / kPiece) + 16);
        // Each block starts a resume point: raw inflate from its offset
        // gives the bytes from its start on (nothing refers back). The
        // sink gets the header, then one call per piece.
        size_t at = m.pieces.at(0);
        size_t piece = 1;
        for (size_t b = 0; b < blocks.size(); ++b) {
          z_stream z{};
          ASSERT_EQ(inflateInit2(&z, -15), Z_OK);
          std::string out(data.size() - b * kBlock, '\0');
          z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(m.stream.data()) + at);
          z.avail_in = static_cast<uInt>(m.stream.size() - at);
          z.next_out = reinterpret_cast<Bytef*>(out.data());
          z.avail_out = static_cast<uInt>(out.size());
          const int r = inflate(&z, Z_FINISH);
          inflateEnd(&z);
          EXPECT_EQ(r, Z_STREAM_END) << "block " << b;
          EXPECT_TRUE(out == data.substr(b * kBlock)) << "block " << b;
          for (size_t k = 0; k < (blocks[b].size() + kPiece - 1) / kPiece; ++k) {
            at += m.pieces.at(piece++);
          }
        }
      }
    }
  }
}

TEST(ParallelDeflater, EveryLevel) {
  const std::string data = test::WordsWithRandomRuns(700 << 10, 7);
  for (Codec codec : {Codec::kGzip, Codec::kZlib}) {
    for (int level = 0; level <= 9; ++level) {
      const std::vector<std::string> blocks = Cut(data, 300 << 10);
      const Made m = Deflate(blocks, codec, 3, level);
      bool ok = false;
      EXPECT_TRUE(Inflate(m.stream, codec == Codec::kGzip ? 31 : 15, &ok) == data)
          << source::CodecName(codec) << " level " << level;
      EXPECT_TRUE(ok);
      // Blocks of one piece: the stream one deflate state writes, byte for
      // byte (level 0's stored blocks are cut where a fresh state cuts
      // them: the same bytes inflated, other framing).
      if (level > 0) {
        const std::vector<std::string> small = Cut(data, kDeflatePiece);
        EXPECT_TRUE(Deflate(small, codec, 2, level).stream == SerialDeflate(small, codec, level))
            << source::CodecName(codec) << " level " << level;
      }
    }
  }
}

TEST(ParallelDeflater, ASinkErrorStopsIt) {
  int calls = 0;
  ParallelDeflater d(Codec::kGzip, 6, 2, "out.gz", [&](absl::string_view) {
    return ++calls == 3 ? absl::DataLossError("disk full") : absl::OkStatus();
  });
  absl::Status s;
  for (int i = 0; i < 20 && s.ok(); ++i) {
    std::string b = test::WordsWithRandomRuns(64 << 10, static_cast<uint32_t>(i));
    s = d.AddBlock(&b);
  }
  if (s.ok()) s = d.Finish();
  EXPECT_EQ(s.message(), "disk full");
  EXPECT_EQ(calls, 3);
  std::string more = "x";
  EXPECT_FALSE(d.AddBlock(&more).ok());
}

TEST(ParallelDeflater, RefusesWhatIsNotDeflate) {
  ParallelDeflater d(Codec::kSnappy, 6, 1, "x.snappy",
                     [](absl::string_view) { return absl::OkStatus(); });
  EXPECT_FALSE(d.Finish().ok());
}

// ShardWriter: records across many kFlushEvery blocks, the file inflated
// by zlib equals the framing, whatever the thread count.
TEST(ParallelDeflater, ShardWriterOutput) {
  char dir[] = "/tmp/deflate_test.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::vector<std::string> records;
  std::string framed;
  for (int i = 0; i < 60; ++i) {
    records.push_back(
        test::WordsWithRandomRuns(static_cast<size_t>(i % 5 == 0 ? 700 << 10 : 3000 + 97 * i),
                                  static_cast<uint32_t>(1000 + i)));
    AppendFramed(&framed, records.back());
  }
  for (Codec codec : {Codec::kGzip, Codec::kZlib}) {
    std::string first;
    for (int threads = 1; threads <= 4; ++threads) {
      const std::string path = absl::StrCat(dir, "/shard");
      auto fd = OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      ASSERT_TRUE(fd.ok());
      ShardWriter w(*std::move(fd), path, {.codec = codec, .threads = threads});
      for (const std::string& r : records) ASSERT_TRUE(w.Append(r).ok());
      ASSERT_TRUE(w.Close(false).ok());
      auto file = ReadFileToString(path);
      ASSERT_TRUE(file.ok());
      EXPECT_EQ(w.file_bytes(), file->size());
      EXPECT_EQ(w.bytes(), framed.size());
      bool ok = false;
      EXPECT_TRUE(Inflate(*file, codec == Codec::kGzip ? 31 : 15, &ok) == framed)
          << source::CodecName(codec) << ", " << threads << " thread(s)";
      EXPECT_TRUE(ok);
      if (threads == 1) first = *file;
      EXPECT_TRUE(*file == first) << "the bytes depend on the thread count";
      ::unlink(path.c_str());
    }
  }
  ::rmdir(dir);
}

}  // namespace
}  // namespace tfrecordfs::record
