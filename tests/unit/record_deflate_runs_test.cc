// record/deflate_runs.h: the runs found in streams ShardWriter wrote (one
// per full-flush block but the last), in streams whose sync-flushed pieces
// refer back (none but the first), in a stream with no byte-aligned block
// end (none); and ShardWriter::AppendDeflated joining runs of one stream
// with freshly deflated records into a stream zlib inflates.
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/bytes.h"
#include "testing/inflate.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/record/deflate_runs.h"
#include "tfrecordfs/record/writer.h"

namespace tfrecordfs::record {
namespace {

using source::Codec;
using test::Inflate;

struct Shard {
  std::vector<std::string> records;
  std::string framed;
  std::vector<uint64_t> offsets;  // record offsets in `framed`, its end last
};

Shard MakeRecords(int n, uint32_t seed) {
  Shard s;
  for (int i = 0; i < n; ++i) {
    s.records.push_back(
        test::WordsWithRandomRuns(static_cast<size_t>(i % 7 == 0 ? 300 << 10 : 2000 + 131 * i),
                                  seed + static_cast<uint32_t>(i)));
    s.offsets.push_back(s.framed.size());
    AppendFramed(&s.framed, s.records.back());
  }
  s.offsets.push_back(s.framed.size());
  return s;
}

class DeflateRunsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(mkdtemp(dir_), nullptr); }
  void TearDown() override {
    for (const std::string& p : made_) ::unlink(p.c_str());
    ::rmdir(dir_);
  }
  std::string Path(absl::string_view name) {
    made_.push_back(absl::StrCat(dir_, "/", name));
    return made_.back();
  }
  // The records through ShardWriter (runs copied from `runs_of` where given).
  std::string Write(const std::string& path, const Shard& s, Codec codec) {
    auto fd = OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    EXPECT_TRUE(fd.ok());
    ShardWriter w(*std::move(fd), path, {.codec = codec, .threads = 2});
    for (const std::string& r : s.records) EXPECT_TRUE(w.Append(r).ok());
    EXPECT_TRUE(w.Close(false).ok());
    auto file = ReadFileToString(path);
    EXPECT_TRUE(file.ok());
    return file.ok() ? *file : std::string();
  }
  std::vector<DeflateRun> Runs(const std::string& path, const Shard& s, Codec codec) {
    auto fd = OpenFile(path, O_RDONLY | O_CLOEXEC);
    EXPECT_TRUE(fd.ok());
    auto runs = FindDeflateRuns(fd->get(), path, codec, s.offsets);
    EXPECT_TRUE(runs.ok()) << runs.status();
    return runs.ok() ? *runs : std::vector<DeflateRun>();
  }
  // Every run: raw-inflated from a fresh state its bytes give exactly its
  // framed bytes, with its checksum; runs in order, none empty.
  void ExpectRunsHold(const std::string& file, const Shard& s, Codec codec,
                      const std::vector<DeflateRun>& runs) {
    uint64_t last_end = 0;
    for (const DeflateRun& r : runs) {
      SCOPED_TRACE(absl::StrCat("run at file byte ", r.file_begin, ", framed byte ", r.begin));
      EXPECT_LT(r.begin, r.end);
      EXPECT_LE(last_end, r.begin);
      last_end = r.end;
      bool ok = false;
      const std::string got =
          Inflate(absl::string_view(file).substr(r.file_begin, r.file_end - r.file_begin), -15, &ok,
                  /*raw_unended=*/true);
      EXPECT_TRUE(ok);
      EXPECT_TRUE(got == s.framed.substr(r.begin, r.end - r.begin));
      const auto* b = reinterpret_cast<const Bytef*>(got.data());
      const auto n = static_cast<uInt>(got.size());
      EXPECT_EQ(r.check, codec == Codec::kGzip ? crc32(crc32(0, nullptr, 0), b, n)
                                               : adler32(adler32(0, nullptr, 0), b, n));
    }
  }

  char dir_[32] = "/tmp/deflate_runs_test.XXXXXX";
  std::vector<std::string> made_;
};

// ShardWriter's blocks: one run per full-flush block but the last (which
// ends the stream), covering the framing from its start.
TEST_F(DeflateRunsTest, ShardWriterBlocksAreRuns) {
  const Shard s = MakeRecords(60, 1);
  for (Codec codec : {Codec::kGzip, Codec::kZlib}) {
    SCOPED_TRACE(source::CodecName(codec));
    const std::string path = Path(absl::StrCat("w.", source::CodecName(codec)));
    const std::string file = Write(path, s, codec);
    const std::vector<DeflateRun> runs = Runs(path, s, codec);
    ExpectRunsHold(file, s, codec, runs);
    ASSERT_GE(runs.size(), s.framed.size() / kFlushEvery - 1);
    EXPECT_EQ(runs.front().begin, 0u);
    for (size_t i = 1; i < runs.size(); ++i) EXPECT_EQ(runs[i].begin, runs[i - 1].end);
    EXPECT_GE(runs.back().end, s.framed.size() - 2 * kFlushEvery);
  }
}

// One deflate state with a sync flush after every record: byte-aligned
// block ends at every record boundary, but each piece refers back into the
// one before it. Only the first candidate (from the stream's start) needs
// nothing before it.
TEST_F(DeflateRunsTest, SyncFlushedPiecesThatReferBackAreNotRuns) {
  const Shard s = MakeRecords(40, 2);
  z_stream z{};
  ASSERT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string file;
  std::vector<char> buf(1 << 20);
  for (size_t i = 0; i < s.records.size(); ++i) {
    const std::string piece = s.framed.substr(s.offsets[i], s.offsets[i + 1] - s.offsets[i]);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(piece.data()));
    z.avail_in = static_cast<uInt>(piece.size());
    const bool last = i + 1 == s.records.size();
    int r;
    do {
      z.next_out = reinterpret_cast<Bytef*>(buf.data());
      z.avail_out = static_cast<uInt>(buf.size());
      r = deflate(&z, last ? Z_FINISH : Z_SYNC_FLUSH);
      file.append(buf.data(), buf.size() - z.avail_out);
    } while (z.avail_out == 0 || (last && r != Z_STREAM_END));
  }
  deflateEnd(&z);
  const std::string path = Path("sync.gz");
  ASSERT_TRUE(WriteFileReplacing(path, file).ok());
  const std::vector<DeflateRun> runs = Runs(path, s, Codec::kGzip);
  ExpectRunsHold(file, s, Codec::kGzip, runs);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].begin, 0u);
  EXPECT_EQ(runs[0].end, s.offsets[1]);
}

// gzip's one deflate state without flushes: no run; a stream cut short:
// the runs before the cut only; not a GZIP header: none. (A flipped byte
// inflates to other bytes more often than it fails: the rewrite's check
// after write finds that by the records' CRCs, as it would find the same
// flip re-deflated.)
TEST_F(DeflateRunsTest, NoRunsWithoutFlushesAndNoneFromDamage) {
  const Shard s = MakeRecords(30, 3);
  z_stream z{};
  ASSERT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string plain(deflateBound(&z, s.framed.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(s.framed.data()));
  z.avail_in = static_cast<uInt>(s.framed.size());
  z.next_out = reinterpret_cast<Bytef*>(plain.data());
  z.avail_out = static_cast<uInt>(plain.size());
  ASSERT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  plain.resize(z.total_out);
  deflateEnd(&z);
  const std::string path = Path("plain.gz");
  ASSERT_TRUE(WriteFileReplacing(path, plain).ok());
  EXPECT_TRUE(Runs(path, s, Codec::kGzip).empty());

  const Shard big = MakeRecords(160, 4);
  const std::string wpath = Path("w.gz");
  std::string file = Write(wpath, big, Codec::kGzip);
  const std::vector<DeflateRun> all = Runs(wpath, big, Codec::kGzip);
  ASSERT_GE(all.size(), 4u);
  file.resize(all[3].file_begin + 100);
  ASSERT_TRUE(WriteFileReplacing(wpath, file).ok());
  const std::vector<DeflateRun> before = Runs(wpath, big, Codec::kGzip);
  ASSERT_EQ(before.size(), 3u);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(before[i].file_end, all[i].file_end);

  EXPECT_TRUE(Runs(wpath, big, Codec::kZlib).empty());  // a GZIP header, not ZLIB's
}

// A candidate that passes 16 MiB and 8 records without ending stops the
// scan: the full-flushed group after it is not looked for (a shard gzip
// wrote costs the inflate of its first 16 MiB only).
TEST_F(DeflateRunsTest, ALongStretchWithoutFlushesEndsTheScan) {
  Shard s;
  for (int i = 0; i < 160; ++i) {
    s.records.push_back(test::WordsWithRandomRuns(160 << 10, 100 + static_cast<uint32_t>(i)));
    s.offsets.push_back(s.framed.size());
    AppendFramed(&s.framed, s.records.back());
  }
  s.offsets.push_back(s.framed.size());
  // Full flushes after records 10 and 140 only (between: 130 records, 20 MiB).
  z_stream z{};
  ASSERT_EQ(deflateInit2(&z, 1, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string file;
  std::vector<char> buf(1 << 20);
  for (const auto& [from, to] :
       std::vector<std::pair<size_t, size_t>>{{0, 10}, {10, 140}, {140, 150}, {150, 160}}) {
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(s.framed.data()) + s.offsets[from]);
    z.avail_in = static_cast<uInt>(s.offsets[to] - s.offsets[from]);
    const bool last = to == 160;
    int r;
    do {
      z.next_out = reinterpret_cast<Bytef*>(buf.data());
      z.avail_out = static_cast<uInt>(buf.size());
      r = deflate(&z, last ? Z_FINISH : Z_FULL_FLUSH);
      file.append(buf.data(), buf.size() - z.avail_out);
    } while (z.avail_out == 0 || (last && r != Z_STREAM_END));
  }
  deflateEnd(&z);
  const std::string path = Path("long.gz");
  ASSERT_TRUE(WriteFileReplacing(path, file).ok());
  const std::vector<DeflateRun> runs = Runs(path, s, Codec::kGzip);
  ExpectRunsHold(file, s, Codec::kGzip, runs);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].end, s.offsets[10]);
}

// Runs of one stream, then an edited record deflated afresh, then more
// runs: one stream that zlib inflates to the new framing, with the right
// trailer.
TEST_F(DeflateRunsTest, AppendDeflatedJoinsRunsAndFreshBlocks) {
  Shard s = MakeRecords(160, 5);
  for (Codec codec : {Codec::kGzip, Codec::kZlib}) {
    SCOPED_TRACE(source::CodecName(codec));
    const std::string old_path = Path(absl::StrCat("old.", source::CodecName(codec)));
    const std::string old_file = Write(old_path, s, codec);
    const std::vector<DeflateRun> runs = Runs(old_path, s, codec);
    ASSERT_GE(runs.size(), 4u);
    // Record `edited`, inside the third run, changes; every other run is
    // copied.
    size_t edited = 0;
    while (s.offsets[edited] < runs[2].begin) ++edited;
    ++edited;
    Shard next = s;
    next.records[edited] = "an edited record";
    next.framed.clear();
    for (const std::string& r : next.records) AppendFramed(&next.framed, r);
    const std::string path = Path(absl::StrCat("new.", source::CodecName(codec)));
    auto fd = OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_TRUE(fd.ok());
    ShardWriter w(*std::move(fd), path, {.codec = codec, .threads = 2});
    size_t run = 0, copied = 0;
    for (size_t i = 0; i < s.records.size(); ++i) {
      while (run < runs.size() && runs[run].begin < s.offsets[i]) ++run;
      if (run < runs.size() && runs[run].begin == s.offsets[i] && run != 2) {
        size_t j = i;
        while (s.offsets[j] < runs[run].end) ++j;
        std::string bytes =
            old_file.substr(runs[run].file_begin, runs[run].file_end - runs[run].file_begin);
        ASSERT_TRUE(
            w.AppendDeflated(&bytes, runs[run].end - runs[run].begin, runs[run].check, j - i).ok());
        ++copied;
        i = j - 1;
        continue;
      }
      ASSERT_TRUE(w.Append(next.records[i]).ok());
    }
    ASSERT_TRUE(w.Close(false).ok());
    EXPECT_EQ(copied, runs.size() - 1);
    EXPECT_EQ(w.records(), s.records.size());
    EXPECT_EQ(w.bytes(), next.framed.size());
    auto file = ReadFileToString(path);
    ASSERT_TRUE(file.ok());
    bool ok = false;
    EXPECT_TRUE(Inflate(*file, codec == Codec::kGzip ? 31 : 15, &ok) == next.framed);
    EXPECT_TRUE(ok);
    // The copied runs are in it as they were.
    EXPECT_NE(
        file->find(old_file.substr(runs[3].file_begin, runs[3].file_end - runs[3].file_begin)),
        std::string::npos);
  }
}

}  // namespace
}  // namespace tfrecordfs::record
