// ArrayRecord files (arrayrecord/): the reference writer's files from
// Grain's test data, our writer's files with every compression and group
// size read back, the framed record view, and damage.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/arrayrecord/chunk.h"
#include "tfrecordfs/arrayrecord/file.h"
#include "tfrecordfs/arrayrecord/format.h"
#include "tfrecordfs/arrayrecord/writer.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/wire.h"
#include "tfrecordfs/source/block_cache.h"

namespace tfrecordfs::arrayrecord {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Fixture(const std::string& name) {
  return absl::StrCat(ARRAYRECORD_TESTDATA, "/", name);
}

// A file's bytes as a descriptor (a memfd: no disk).
class MemFile {
 public:
  explicit MemFile(const std::string& bytes) {
    fd_ = ::memfd_create("ar", MFD_CLOEXEC);
    EXPECT_GE(fd_, 0);
    EXPECT_EQ(::pwrite(fd_, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
    size_ = bytes.size();
  }
  ~MemFile() { ::close(fd_); }
  int fd() const { return fd_; }
  uint64_t size() const { return size_; }

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
};

absl::StatusOr<std::vector<std::string>> ReadAll(const std::string& bytes) {
  MemFile f(bytes);
  return ReadAllRecords(f.fd(), "mem.ar", f.size());
}

// The records in a TFRecord-framed stream, walked by hand.
std::vector<std::string> Unframe(absl::string_view s) {
  std::vector<std::string> out;
  while (s.size() >= 16) {
    const uint64_t n = DecodeFixed64(s.data());
    out.emplace_back(s.substr(12, n));
    s.remove_prefix(16 + n);
  }
  EXPECT_TRUE(s.empty());
  return out;
}

TEST(ArrayRecordFormatTest, SignatureIsTheSpecificationsAndItsHashesCheck) {
  // The specification's fixed first 64 bytes are a block header and a chunk
  // header whose hashes our HighwayHash (riegeli's key) reproduces.
  const std::string sig(reinterpret_cast<const char*>(kSignature), kSignatureSize);
  auto bh = ParseBlockHeader(sig.substr(0, 24));
  ASSERT_TRUE(bh.ok()) << bh.status();
  EXPECT_EQ(bh->previous_chunk, 0u);
  EXPECT_EQ(bh->next_chunk, 64u);
  auto ch = ParseChunkHeader(sig.substr(24, 40));
  ASSERT_TRUE(ch.ok()) << ch.status();
  EXPECT_EQ(ch->type, kSignatureChunk);
  EXPECT_EQ(EncodeBlockHeader({0, 64}), sig.substr(0, 24));
  EXPECT_EQ(EncodeChunkHeader(*ch), sig.substr(24, 40));
  std::string bad = sig;
  bad[30] ^= 1;
  EXPECT_FALSE(ParseChunkHeader(bad.substr(24, 40)).ok());
}

TEST(ArrayRecordGrainTest, ReferenceWriterFilesHoldTheDocumentedDigits) {
  // grain/_src/python/data_loader_test.py: the two files hold b"0".."9".
  std::vector<std::string> all;
  for (const char* name :
       {"digits.array_record-00000-of-00002", "digits.array_record-00001-of-00002"}) {
    const std::string bytes = Slurp(Fixture(name));
    ASSERT_EQ(bytes.size(), 131072u) << name;
    MemFile f(bytes);
    auto layout = ReadLayout(f.fd(), name, f.size());
    ASSERT_TRUE(layout.ok()) << layout.status();
    EXPECT_TRUE(layout->from_footer);
    EXPECT_TRUE(layout->problems.empty());
    EXPECT_EQ(layout->chunks.size(), 5u);
    EXPECT_NE(layout->writer_options.find("group_size:1,"), std::string::npos);
    auto records = ReadAllRecords(f.fd(), name, f.size());
    ASSERT_TRUE(records.ok()) << records.status();
    all.insert(all.end(), records->begin(), records->end());
  }
  EXPECT_EQ(all, (std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}));
}

TEST(ArrayRecordGrainTest, OurWriterWritesTheReferenceWritersBytes) {
  // Same records, same options (group_size 1, uncompressed): byte for byte
  // the file google/array_record wrote.
  WriterOptions o;
  o.group_size = 1;
  o.compression = Compression::kNone;
  auto ours = WriteToString({"0", "1", "2", "3", "4"}, o);
  ASSERT_TRUE(ours.ok()) << ours.status();
  EXPECT_TRUE(*ours == Slurp(Fixture("digits.array_record-00000-of-00002")));
  auto ours1 = WriteToString({"5", "6", "7", "8", "9"}, o);
  ASSERT_TRUE(ours1.ok()) << ours1.status();
  EXPECT_TRUE(*ours1 == Slurp(Fixture("digits.array_record-00001-of-00002")));
}

std::vector<std::string> SomeRecords(size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    // Sizes from empty to 150 KB (crossing block boundaries), varied bytes.
    const size_t size = i % 37 == 5 ? 150000 + i : (i * 131) % 900;
    std::string r(size, '\0');
    for (size_t k = 0; k < size; ++k) r[k] = static_cast<char>((i * 7 + k * (k % 13)) & 0xff);
    out.push_back(std::move(r));
  }
  return out;
}

class ArrayRecordRoundTrip : public ::testing::TestWithParam<std::tuple<Compression, uint64_t>> {};

TEST_P(ArrayRecordRoundTrip, EveryRecordReadsBackAndThroughTheFramedSource) {
  WriterOptions o;
  o.compression = std::get<0>(GetParam());
  o.group_size = std::get<1>(GetParam());
  o.level = o.compression == Compression::kBrotli ? 5 : 3;
  const std::vector<std::string> records = SomeRecords(200);
  auto bytes = WriteToString(records, o);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(bytes->size() % kBlockSize, 0u);
  auto back = ReadAll(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == records);

  MemFile f(*bytes);
  auto layout = ReadLayout(f.fd(), "mem.ar", f.size());
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->chunks.size(), (records.size() + o.group_size - 1) / o.group_size);
  EXPECT_EQ(layout->writer_options, OptionsString(o));

  std::string framed;
  auto scan = Scan(f.fd(), "mem.ar", f.size(), [&](absl::string_view b) {
    framed.append(b.data(), b.size());
    return absl::OkStatus();
  });
  ASSERT_TRUE(scan.ok()) << scan.status();
  EXPECT_TRUE(scan->problems.empty());
  EXPECT_EQ(scan->table.data_size, framed.size());
  EXPECT_TRUE(Unframe(framed) == records);

  // Random reads through the source: each decodes its chunk.
  source::BlockCache cache(size_t{4} << 20);
  auto table = std::make_shared<source::CheckpointTable>(std::move(scan->table));
  auto dup = OpenFile(absl::StrCat("/proc/self/fd/", f.fd()), O_RDONLY);
  ASSERT_TRUE(dup.ok());
  ArrayRecordSource src(source::ShardFile(std::move(*dup), "mem.ar"), f.size(), table, &cache);
  EXPECT_EQ(src.size(), framed.size());
  for (uint64_t at : {uint64_t{0}, framed.size() / 3, framed.size() / 2, framed.size() - 5}) {
    std::string got(std::min<uint64_t>(70000, framed.size() - at), '\0');
    auto n = src.ReadAt(at, got.data(), got.size());
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(*n, got.size());
    EXPECT_TRUE(got == framed.substr(at, got.size())) << at;
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllCompressionsAndGroups, ArrayRecordRoundTrip,
    ::testing::Combine(::testing::Values(Compression::kNone, Compression::kBrotli,
                                         Compression::kZstd, Compression::kSnappy),
                       ::testing::Values(uint64_t{1}, uint64_t{7}, uint64_t{65536})));

// The file written with chunks compressed on several threads (batches of
// chunks through an OrderedPipeline) is byte for byte the one-thread
// file, whatever the compression, group size and padding, with stored
// chunks added (AddChunk, as an edit commit copies untouched chunks)
// between records that wait in batches.
TEST(ArrayRecordWriterTest, ChunksCompressedOnThreadsGiveTheOneThreadBytes) {
  // ~3 MB of records: several 1 MiB batches in flight.
  std::vector<std::string> records = SomeRecords(600);
  for (Compression c :
       {Compression::kNone, Compression::kBrotli, Compression::kZstd, Compression::kSnappy}) {
    for (uint64_t group : {uint64_t{1}, uint64_t{7}}) {
      for (bool pad : {false, true}) {
        WriterOptions o;
        o.compression = c;
        o.group_size = group;
        o.level = c == Compression::kBrotli ? 5 : 3;
        o.pad_to_block_boundary = pad;
        // A stored chunk to copy in: the first chunk of a small file.
        o.threads = 1;
        const std::string small = *WriteToString({"stored-a", "stored-b"}, [&] {
          WriterOptions s = o;
          s.group_size = 2;
          return s;
        }());
        MemFile sf(small);
        auto slayout = ReadLayout(sf.fd(), "small.ar", sf.size());
        ASSERT_TRUE(slayout.ok()) << slayout.status();
        auto stored = ReadChunk(sf.fd(), "small.ar", sf.size(), slayout->chunks[0].offset);
        ASSERT_TRUE(stored.ok()) << stored.status();

        size_t inserted = 0;
        auto write = [&](int threads) {
          inserted = 0;
          WriterOptions t = o;
          t.threads = threads;
          std::string out;
          Writer w(
              [&](absl::string_view b) {
                out.append(b.data(), b.size());
                return absl::OkStatus();
              },
              t);
          for (size_t i = 0; i < records.size(); ++i) {
            EXPECT_TRUE(w.Add(records[i]).ok());
            // Every 140 records: a chunk boundary for group sizes 1 and 7.
            if (i % 140 == 139) {
              EXPECT_TRUE(w.at_chunk_boundary());
              EXPECT_TRUE(w.AddChunk(stored->header, stored->data).ok());
              ++inserted;
            }
          }
          EXPECT_TRUE(w.Close().ok());
          EXPECT_EQ(w.pos(), out.size());
          return out;
        };
        const std::string one = write(1);
        const std::string where =
            absl::StrCat("compression ", static_cast<int>(c), ", group ", group, ", pad ", pad);
        for (int threads : {2, 4}) {
          EXPECT_TRUE(write(threads) == one) << where << ", " << threads << " threads";
        }
        auto back = ReadAll(one);
        ASSERT_TRUE(back.ok()) << where << ": " << back.status();
        EXPECT_EQ(inserted, 4u);
        EXPECT_EQ(back->size(), records.size() + 2 * inserted) << where;
      }
    }
  }
}

TEST(ArrayRecordWriterTest, EmptyFileHasAFooterAndNoRecords) {
  auto bytes = WriteToString({}, WriterOptions());
  ASSERT_TRUE(bytes.ok());
  auto back = ReadAll(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->empty());
}

TEST(ArrayRecordGrainTest, ItsChunksCopiedUnderItsFooterOptionsGiveItsBytesBack) {
  // What an edit commit does with untouched chunks (repack/
  // arrayrecord_rewrite.h): each chunk of the reference writer's file
  // added as it is stored, under the options its footer records.
  for (const char* name :
       {"digits.array_record-00000-of-00002", "digits.array_record-00001-of-00002"}) {
    const std::string bytes = Slurp(Fixture(name));
    test::TempDir tmp("arrayrecord");
    const std::string path = tmp.path() + "/f";
    ASSERT_TRUE(WriteFileReplacing(path, bytes).ok());
    auto fd = OpenFile(path, O_RDONLY);
    ASSERT_TRUE(fd.ok());
    auto layout = ReadLayout(fd->get(), path, bytes.size());
    ASSERT_TRUE(layout.ok()) << layout.status();
    auto options = ParseOptionsText(layout->writer_options);
    ASSERT_TRUE(options.ok()) << options.status();
    EXPECT_EQ(options->group_size, 1u);
    EXPECT_EQ(options->compression, Compression::kNone);
    std::string out;
    Writer w(
        [&](absl::string_view b) {
          out.append(b.data(), b.size());
          return absl::OkStatus();
        },
        *options);
    for (const ChunkEntry& e : layout->chunks) {
      auto chunk = ReadChunk(fd->get(), path, bytes.size(), e.offset);
      ASSERT_TRUE(chunk.ok()) << chunk.status();
      ASSERT_TRUE(w.at_chunk_boundary());
      ASSERT_TRUE(w.AddChunk(chunk->header, chunk->data).ok());
    }
    ASSERT_TRUE(w.Close().ok());
    EXPECT_TRUE(out == bytes) << name;
  }
}

TEST(ArrayRecordWriterTest, FooterOptionsReadAsTheReferenceReadsThem) {
  auto o = ParseOptionsText(
      "group_size:7,transpose:false,pad_to_block_boundary:true,brotli:9,max_parallelism:4");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->group_size, 7u);
  EXPECT_EQ(o->compression, Compression::kBrotli);
  EXPECT_EQ(o->level, 9);
  EXPECT_TRUE(o->pad_to_block_boundary);
  EXPECT_EQ(o->options_text,
            "group_size:7,transpose:false,pad_to_block_boundary:true,brotli:9,max_parallelism:4");
  // No compressor: the reference's default, zstd:3; group_size 65536.
  o = ParseOptionsText("window_log:20");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->compression, Compression::kZstd);
  EXPECT_EQ(o->level, 3);
  EXPECT_EQ(o->group_size, 65536u);
  // A bare pad_to_block_boundary is false in the reference's parser.
  o = ParseOptionsText("pad_to_block_boundary,snappy");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->pad_to_block_boundary);
  EXPECT_EQ(o->compression, Compression::kSnappy);
  EXPECT_EQ(ParseOptionsText("transpose:true").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(ParseOptionsText("group_size:0").ok());
  EXPECT_FALSE(ParseOptionsText("frobnicate:1").ok());
  // Our writer's string reads back as what wrote it.
  WriterOptions w;
  w.group_size = 3;
  w.compression = Compression::kBrotli;
  w.level = 5;
  o = ParseOptionsText(OptionsString(w));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->group_size, 3u);
  EXPECT_EQ(o->compression, Compression::kBrotli);
  EXPECT_EQ(o->level, 5);
}

TEST(ArrayRecordWriterTest, CompressionOptionsAsTheReferenceSpellsThem) {
  WriterOptions o;
  ASSERT_TRUE(ParseCompression("brotli:6", &o).ok());
  EXPECT_EQ(o.compression, Compression::kBrotli);
  EXPECT_EQ(o.level, 6);
  ASSERT_TRUE(ParseCompression("zstd:3", &o).ok());
  EXPECT_EQ(o.compression, Compression::kZstd);
  ASSERT_TRUE(ParseCompression("snappy", &o).ok());
  ASSERT_TRUE(ParseCompression("none", &o).ok());
  ASSERT_TRUE(ParseCompression("uncompressed", &o).ok());
  EXPECT_EQ(o.compression, Compression::kNone);
  EXPECT_FALSE(ParseCompression("brotli:12", &o).ok());
  EXPECT_FALSE(ParseCompression("zstd:x", &o).ok());
  EXPECT_FALSE(ParseCompression("snappy:1", &o).ok());
  EXPECT_FALSE(ParseCompression("gzip", &o).ok());
}

// A file of 40 records in chunks of 10 (uncompressed: bytes findable).
std::string TenPerChunk(Compression c = Compression::kNone) {
  WriterOptions o;
  o.group_size = 10;
  o.compression = c;
  std::vector<std::string> records;
  for (int i = 0; i < 40; ++i) records.push_back(absl::StrCat("record-", i, "-payload"));
  return *WriteToString(records, o);
}

TEST(ArrayRecordDamageTest, AFlippedDataByteIsDataLossForItsChunkOnly) {
  std::string bytes = TenPerChunk();
  const size_t at = bytes.find("record-13-payload");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 3] ^= 0x20;
  MemFile f(bytes);
  auto all = ReadAllRecords(f.fd(), "bad.ar", f.size());
  ASSERT_FALSE(all.ok());
  EXPECT_TRUE(absl::IsDataLoss(all.status()));
  EXPECT_NE(all.status().message().find("bad.ar: ArrayRecord chunk at byte offset"),
            std::string::npos)
      << all.status();
  std::string framed;
  auto scan = Scan(f.fd(), "bad.ar", f.size(), [&](absl::string_view b) {
    framed.append(b.data(), b.size());
    return absl::OkStatus();
  });
  ASSERT_TRUE(scan.ok()) << scan.status();
  ASSERT_EQ(scan->problems.size(), 1u);
  EXPECT_NE(scan->problems[0].message.find("data hash mismatch"), std::string::npos);
  const std::vector<std::string> got = Unframe(framed);
  ASSERT_EQ(got.size(), 40u);
  EXPECT_EQ(got[9], "record-9-payload");
  EXPECT_EQ(got[13], "");  // stands in for a record that reads as an error
  EXPECT_EQ(got[20], "record-20-payload");
  // Reading it through the source fails; its neighbours read.
  source::BlockCache cache(size_t{1} << 20);
  auto table = std::make_shared<source::CheckpointTable>(std::move(scan->table));
  auto dup = OpenFile(absl::StrCat("/proc/self/fd/", f.fd()), O_RDONLY);
  ASSERT_TRUE(dup.ok());
  ArrayRecordSource src(source::ShardFile(std::move(*dup), "bad.ar"), f.size(), table, &cache);
  char buf[16];
  const uint64_t chunk1 = table->points[2].out;
  auto bad = src.ReadAt(chunk1, buf, sizeof buf);
  EXPECT_TRUE(absl::IsDataLoss(bad.status())) << bad.status();
  EXPECT_TRUE(src.ReadAt(0, buf, sizeof buf).ok());
  EXPECT_TRUE(src.ReadAt(table->points[3].out, buf, sizeof buf).ok());
}

TEST(ArrayRecordDamageTest, DamagedBlockHeaderInsideAChunkIsDetected) {
  // One record of 100 KB crosses the block header at 64 KiB.
  std::string bytes = *WriteToString({std::string(100000, 'x')}, [] {
    WriterOptions o;
    o.compression = Compression::kNone;
    return o;
  }());
  bytes[kBlockSize + 12] ^= 1;  // previous_chunk
  auto all = ReadAll(bytes);
  ASSERT_FALSE(all.ok());
  EXPECT_NE(all.status().message().find("block header at byte offset 65536"), std::string::npos)
      << all.status();
}

TEST(ArrayRecordDamageTest, DecompressionBombIsRefusedBeforeAllocating) {
  // A chunk declaring 1 TB of values in a tiny zstd buffer.
  std::string data(1, static_cast<char>(Compression::kZstd));
  auto sizes = Compress(Compression::kZstd, 3, std::string(1, '\x01'));
  ASSERT_TRUE(sizes.ok());
  data.push_back(static_cast<char>(sizes->size()));
  data += *sizes;
  data += "\x80\x80\x80\x80\x80\x20";  // varint 2^40: the values' declared size
  ChunkHeader h;
  h.type = kSimpleChunk;
  h.num_records = 1;
  h.decoded_data_size = 1;
  auto r = DecodeChunk(h, data, "bomb.ar: chunk at byte offset 64");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bomb.ar: chunk at byte offset 64"), std::string::npos);
  h.decoded_data_size = uint64_t{1} << 40;
  r = DecodeChunk(h, data, "bomb.ar");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("more than one chunk may hold"), std::string::npos)
      << r.status();
}

TEST(ArrayRecordDamageTest, TransposedChunkRefusesTheFileNamingWhy) {
  // Our writer's file with its first data chunk's type byte made 't' (and
  // the header hash fixed, so only the type is wrong).
  std::string bytes = TenPerChunk();
  auto h = ParseChunkHeader(bytes.substr(64, 40));
  ASSERT_TRUE(h.ok());
  h->type = kTransposedChunk;
  bytes.replace(64, 40, EncodeChunkHeader(*h));
  MemFile f(bytes);
  auto scan = Scan(f.fd(), "t.ar", f.size(), [](absl::string_view) { return absl::OkStatus(); });
  ASSERT_FALSE(scan.ok());
  EXPECT_TRUE(absl::IsUnimplemented(scan.status()));
  EXPECT_NE(scan.status().message().find("t.ar: ArrayRecord chunk at byte offset 64"),
            std::string::npos)
      << scan.status();
  EXPECT_NE(scan.status().message().find("transposed"), std::string::npos);
}

TEST(ArrayRecordDamageTest, FooterOffsetsThatLoopFallBackToTheWalk) {
  WriterOptions o;
  o.group_size = 10;
  o.compression = Compression::kNone;
  std::vector<std::string> records;
  for (int i = 0; i < 30; ++i) records.push_back(absl::StrCat("r", i));
  const std::string good = *WriteToString(records, o);
  MemFile f(good);
  auto layout = ReadLayout(f.fd(), "x", f.size());
  ASSERT_TRUE(layout.ok());
  // Footer records: metadata (version 1, 3 chunks, 30 records), then
  // entries of 10 records each, the third pointing back at the second.
  Records footer;
  auto add = [&](const std::string& r) {
    footer.values += r;
    footer.limits.push_back(footer.values.size());
  };
  std::string inner;
  for (uint64_t v : {uint64_t{1 << 3}, uint64_t{1}, uint64_t{2 << 3}, uint64_t{3}, uint64_t{3 << 3},
                     uint64_t{30}}) {
    wire::PutVarint(&inner, v);
  }
  std::string meta;
  wire::PutVarint(&meta, (1 << 3) | 2);
  wire::PutVarint(&meta, inner.size());
  add(meta + inner);
  for (uint64_t off :
       {layout->chunks[0].offset, layout->chunks[1].offset, layout->chunks[1].offset}) {
    std::string e;
    for (uint64_t v : {uint64_t{1 << 3}, off, uint64_t{3 << 3}, uint64_t{10}}) {
      wire::PutVarint(&e, v);
    }
    add(e);
  }
  // The same footer without the loop parses (the test's encoding is right).
  Records straight = footer;
  {
    std::string e;
    for (uint64_t v :
         {uint64_t{1 << 3}, layout->chunks[2].offset, uint64_t{3 << 3}, uint64_t{10}}) {
      wire::PutVarint(&e, v);
    }
    straight.values.resize(straight.limits[2]);
    straight.limits.pop_back();
    straight.values += e;
    straight.limits.push_back(straight.values.size());
  }
  auto fine = ParseFooter(straight, 100000, "loop.ar");
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ(fine->num_records, 30u);
  auto parsed = ParseFooter(footer, 1000, "loop.ar");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("loop.ar: ArrayRecord footer at byte offset 1000"),
            std::string::npos)
      << parsed.status();
  // A file whose footer chunk is damaged is walked instead, and says so.
  std::string bad = good;
  auto ps = ReadChunk(f.fd(), "x", f.size(), f.size() - kBlockSize);
  ASSERT_TRUE(ps.ok());
  auto ps_records = DecodeChunk(ps->header, ps->data, "x");
  ASSERT_TRUE(ps_records.ok());
  auto footer_at = ParsePostscript(*ps_records, f.size(), "x");
  ASSERT_TRUE(footer_at.ok());
  bad[*footer_at + 50] ^= 1;
  auto walked = ReadAll(bad);
  ASSERT_FALSE(walked.ok());  // ReadAllRecords refuses any problem
  MemFile g(bad);
  auto wl = ReadLayout(g.fd(), "x", g.size());
  ASSERT_TRUE(wl.ok()) << wl.status();
  EXPECT_FALSE(wl->from_footer);
  EXPECT_EQ(wl->chunks.size(), 3u);
  ASSERT_FALSE(wl->problems.empty());
  EXPECT_EQ(wl->problems[0].offset, *footer_at);
}

TEST(ArrayRecordDamageTest, WalkSkipsADamagedChunkHeaderByTheBlockHeaders) {
  // A riegeli file without a usable postscript: chunks of 30 KB records; a
  // chunk header damaged; the walk resumes at a later chunk a block header
  // names.
  WriterOptions o;
  o.group_size = 1;
  o.compression = Compression::kNone;
  std::vector<std::string> records;
  for (int i = 0; i < 8; ++i) records.push_back(std::string(30000, static_cast<char>('a' + i)));
  std::string bytes = *WriteToString(records, o);
  // Destroy the postscript (the last block) so the file is walked.
  for (size_t i = bytes.size() - kBlockSize; i < bytes.size(); ++i) bytes[i] = 0;
  MemFile f0(bytes);
  auto clean = ReadLayout(f0.fd(), "w", f0.size());
  ASSERT_TRUE(clean.ok());
  EXPECT_FALSE(clean->from_footer);
  ASSERT_GE(clean->chunks.size(), 8u);  // the footer chunk is walked as records too
  const uint64_t second = clean->chunks[1].offset;
  bytes[second + 20] ^= 1;  // inside its header
  MemFile f(bytes);
  auto wl = ReadLayout(f.fd(), "w", f.size());
  ASSERT_TRUE(wl.ok()) << wl.status();
  ASSERT_FALSE(wl->problems.empty());
  EXPECT_EQ(wl->problems[0].offset, second);
  EXPECT_EQ(wl->chunks[0].offset, clean->chunks[0].offset);
  EXPECT_GT(wl->chunks[1].offset, second);
  EXPECT_LT(wl->chunks.size(), clean->chunks.size());
}

TEST(ArrayRecordDamageTest, NotARiegeliFile) {
  auto r = ReadAll(std::string(200000, 'z'));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no signature at byte offset 0"), std::string::npos);
}

}  // namespace
}  // namespace tfrecordfs::arrayrecord
