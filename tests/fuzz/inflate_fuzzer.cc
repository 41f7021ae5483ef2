// Fuzz target: GZIP / ZLIB shards (src/source, index::WalkShard). The input
// is a compressed file, or (mode bit 1) the plaintext of one, which the
// target compresses first and then cuts or flips as the input says, so that
// the fuzzer reaches deep into valid streams as well as broken headers.
//
// Input: [mode][a][b] then the bytes.
//   mode bit 0: GZIP (0) or ZLIB (1)
//   mode bit 1: the bytes are plaintext: deflate them (level a % 10), then
//               keep only the first (b * len / 255) bytes when b < 255, and
//               flip one byte at a when mode bit 2 is set
//   mode bit 3: append a second GZIP member of the same plaintext
//   mode bits 4-5: checkpoint span 64K, 1, 100 or 4096 bytes (tiny spans:
//               a checkpoint at nearly every deflate block)
//
// Invariants:
//   * ScanCompressed (ISA-L, starting over with zlib when it asks: the sink
//     is cleared) only fails on I/O errors (never here); the bytes it
//     hands its sink are a prefix of what zlib itself decompresses from the
//     file (stepping over GZIP members), data_size is their count, and the
//     scan reports no problem exactly when zlib decompresses the whole file
//     cleanly (then both agree on every byte);
//   * checkpoints are in order, inside the file and the data;
//   * reads through an InflateSource at input-chosen offsets equal the
//     scanned bytes;
//   * WalkShard's offsets lie inside the data, in order; each record it
//     lists either reads back (through the source) as exactly the bytes the
//     framing holds, or fails with DataLoss;
//   * ProbeFile does not fail.
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuzz_check.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/reference/zlib_codec.h"
#include "tfrecordfs/source/inflate.h"

namespace tfrecordfs::fuzz {
namespace {

using source::Codec;

std::string Deflate(absl::string_view data, bool gzip, int level) {
  return reference::zlib::Deflate(
      data, gzip ? reference::zlib::Wrap::kGzip : reference::zlib::Wrap::kZlib, level);
}

// zlib's own decompression of `file` as `codec`: bytes until the end or the
// first error; GZIP members are stepped over as TensorFlow (and gzip -d) do.
std::string Straight(absl::string_view file, Codec codec, bool* clean) {
  return reference::zlib::Inflate(file, codec == Codec::kGzip ? 31 : 15, codec == Codec::kGzip,
                                  clean);
}

void Check(absl::string_view file, Codec codec, uint64_t span, uint64_t seed) {
  const int raw = memfd_create("inflate_fuzzer", MFD_CLOEXEC);
  if (raw < 0) return;
  UniqueFd fd(raw);
  if (!WriteFull(fd.get(), file.data(), file.size(), "memfd").ok()) return;
  const uint64_t size = file.size();

  std::string sunk;
  auto scan = source::ScanCompressed(
      fd.get(), "fuzz.gz", size, codec, span,
      [&](absl::string_view b) {
        sunk.append(b.data(), b.size());
        return absl::OkStatus();
      },
      nullptr, /*isal=*/true, [&] { sunk.clear(); });
  FUZZ_CHECK(scan.ok(), scan.status().ToString());
  bool clean = false;
  const std::string straight = Straight(file, codec, &clean);
  FUZZ_CHECK(scan->table.data_size == sunk.size());
  FUZZ_CHECK(sunk.size() <= straight.size(), sunk.size(), " > ", straight.size());
  FUZZ_CHECK(absl::string_view(straight).substr(0, sunk.size()) == sunk,
             "scanned bytes differ from zlib's");
  FUZZ_CHECK(clean == !scan->problem.has_value(), "zlib clean: ", clean,
             ", problem: ", scan->problem ? scan->problem->message : "none");
  if (clean) FUZZ_CHECK(sunk.size() == straight.size());
  if (scan->problem) {
    FUZZ_CHECK(scan->problem->compressed_offset <= size);
    FUZZ_CHECK(scan->problem->offset == sunk.size());
    FUZZ_CHECK(!scan->problem->message.empty());
  }
  const auto& pts = scan->table.points;
  FUZZ_CHECK(!pts.empty() && pts[0].stream_start && pts[0].in == 0 && pts[0].out == 0);
  for (size_t i = 1; i < pts.size(); ++i) {
    FUZZ_CHECK(pts[i].out >= pts[i - 1].out && pts[i].in > pts[i - 1].in);
    FUZZ_CHECK(pts[i].in <= size && pts[i].out <= sunk.size() && pts[i].bits < 8);
  }

  auto table = std::make_shared<const source::CheckpointTable>(scan->table);
  source::BlockCache cache(size_t{1} << 20);
  source::InflateSource src(UniqueFd(::dup(fd.get())), "fuzz.gz", size, table, &cache);
  uint64_t x = seed | 1;
  std::string buf;
  for (int i = 0; i < 8 && !sunk.empty(); ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const uint64_t off = x % (sunk.size() + 1);
    const size_t len = static_cast<size_t>((x >> 20) % 70000);
    buf.resize(len);
    auto got = src.ReadAt(off, buf.data(), len);
    FUZZ_CHECK(got.ok(), got.status().ToString());
    FUZZ_CHECK(*got == std::min<uint64_t>(len, sunk.size() - off));
    FUZZ_CHECK(absl::string_view(buf.data(), *got) == absl::string_view(sunk).substr(off, *got),
               "read of ", len, " at ", off, " differs");
  }

  auto walked = index::WalkShard(fd.get(), "fuzz.gz", size, codec, span);
  FUZZ_CHECK(walked.ok(), walked.status().ToString());
  const auto& off = walked->walk.offsets;
  FUZZ_CHECK(!off.empty());
  for (size_t i = 0; i < off.size(); ++i) {
    FUZZ_CHECK(off[i] <= sunk.size(), "offset ", off[i], " past ", sunk.size());
    if (i > 0) FUZZ_CHECK(off[i - 1] <= off[i]);
  }
  for (const auto& p : walked->walk.problems) FUZZ_CHECK(p.offset <= sunk.size());
  FUZZ_CHECK(walked->checkpoints != nullptr);
  FUZZ_CHECK(walked->checkpoints->data_size == sunk.size());
  source::InflateSource wsrc(UniqueFd(::dup(fd.get())), "fuzz.gz", size, walked->checkpoints,
                             &cache);
  for (size_t i = 0; i + 1 < off.size() && i < 64; ++i) {
    auto r = record::ReadRecord(wsrc, i, off[i], off[i + 1]);
    if (r.ok()) {
      FUZZ_CHECK(*r == absl::string_view(sunk).substr(off[i] + record::kHeaderSize, r->size()));
      FUZZ_CHECK(DecodeFixed64(sunk.data() + off[i]) == r->size());
    } else {
      FUZZ_CHECK(absl::IsDataLoss(r.status()), r.status().ToString());
    }
  }

  Codec probed = Codec::kNone;
  auto probe = index::ProbeFile(fd.get(), "fuzz.gz", size, &probed);
  FUZZ_CHECK(probe.ok(), probe.status().ToString());
}

}  // namespace
}  // namespace tfrecordfs::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tfrecordfs::source::Codec;
  if (size < 3 || size > (1 << 16)) return 0;
  const uint8_t mode = data[0], a = data[1], b = data[2];
  absl::string_view rest(reinterpret_cast<const char*>(data + 3), size - 3);
  const bool gzip = (mode & 1) == 0;
  std::string file;
  if (mode & 2) {
    file = tfrecordfs::fuzz::Deflate(rest, gzip, a % 10);
    if (gzip && (mode & 8)) file += tfrecordfs::fuzz::Deflate(rest, true, 6);
    if (b < 255) file.resize(file.size() * b / 255);
    if ((mode & 4) && !file.empty()) file[a % file.size()] ^= static_cast<char>(b | 1);
  } else {
    file.assign(rest.data(), rest.size());
  }
  static constexpr uint64_t kSpans[] = {64 << 10, 1, 100, 4096};
  uint64_t seed = 0;
  for (size_t i = 0; i < size; ++i) seed = seed * 131 + data[i];
  tfrecordfs::fuzz::Check(file, gzip ? Codec::kGzip : Codec::kZlib, kSpans[(mode >> 4) & 3], seed);
  return 0;
}
