#include "tfrecordfs/record/deflate_runs.h"

#include <isa-l/crc.h>
#include <isa-l/igzip_lib.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "tfrecordfs/base/file.h"

namespace tfrecordfs::record {
namespace {

constexpr size_t kWindow = size_t{32} << 10;
constexpr size_t kOutput = size_t{256} << 10;  // inflated per call at most
constexpr size_t kInput = size_t{1} << 20;     // compressed bytes read at once
// A candidate that runs past this many framed bytes and records without
// ending ends the scan (the stream has no flushes; ShardWriter's candidates
// end after kFlushEvery bytes and one record).
constexpr uint64_t kGiveUpBytes = uint64_t{16} << 20;
constexpr size_t kGiveUpRecords = 8;

// The length of the GZIP header (RFC 1952) or ZLIB header (RFC 1950) at the
// start of `b`, or 0 when it is not one this reads (a preset dictionary, a
// header longer than `b`).
size_t HeaderLength(const unsigned char* b, size_t n, source::Codec codec) {
  if (codec == source::Codec::kZlib) {
    if (n < 2 || (b[0] & 0x0f) != 8 || ((b[0] << 8) | b[1]) % 31 != 0 || (b[1] & 0x20)) return 0;
    return 2;
  }
  if (n < 10 || b[0] != 0x1f || b[1] != 0x8b || b[2] != 8) return 0;
  const unsigned flags = b[3];
  size_t at = 10;
  if (flags & 4) {  // FEXTRA
    if (at + 2 > n) return 0;
    at += 2 + (b[at] | (size_t{b[at + 1]} << 8));
  }
  for (const unsigned bit : {8u, 16u}) {  // FNAME, FCOMMENT: zero-terminated
    if (!(flags & bit)) continue;
    while (at < n && b[at] != 0) ++at;
    if (at >= n) return 0;
    ++at;
  }
  if (flags & 2) at += 2;  // FHCRC
  return at <= n ? at : 0;
}

}  // namespace

absl::StatusOr<std::vector<DeflateRun>> FindDeflateRuns(int fd, const std::string& path,
                                                        source::Codec codec,
                                                        absl::Span<const uint64_t> offsets) {
  std::vector<DeflateRun> runs;
  if ((codec != source::Codec::kGzip && codec != source::Codec::kZlib) || offsets.size() < 2) {
    return runs;
  }
  const bool gzip = codec == source::Codec::kGzip;
  std::string in(kInput, '\0');
  uint64_t in_at = 0;  // the file offset of in[0]
  auto got = PreadUpTo(fd, in.data(), in.size(), 0, path);
  if (!got.ok()) return got.status();
  const size_t header =
      HeaderLength(reinterpret_cast<const unsigned char*>(in.data()), *got, codec);
  if (header == 0) return runs;

  z_stream z;
  std::memset(&z, 0, sizeof z);
  if (inflateInit2(&z, -15) != Z_OK) return runs;
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&z};
  auto* const in_data = reinterpret_cast<Bytef*>(in.data());
  z.next_in = in_data + header;
  z.avail_in = static_cast<uInt>(*got - header);
  auto file_pos = [&] { return in_at + static_cast<uint64_t>(z.next_in - in_data); };
  // Reads the file from `at` into `in`; false at its end or on an error.
  absl::Status read_error;
  auto refill = [&](uint64_t at) {
    auto n = PreadUpTo(fd, in.data(), in.size(), at, path);
    if (!n.ok()) read_error = n.status();
    in_at = at;
    z.next_in = in_data;
    z.avail_in = n.ok() ? static_cast<uInt>(*n) : 0;
    return n.ok() && *n > 0;
  };

  // Output: the last kWindow bytes (the window of the candidate's start
  // when it must be inflated again), then room for kOutput more.
  std::string out(kWindow + kOutput, '\0');
  size_t have = 0;  // bytes of `out` in use
  uint64_t u = 0;   // framed bytes inflated so far
  const uint32_t check0 = gzip ? 0 : 1;
  uint32_t check = check0;
  // The candidate run being inflated.
  uint64_t run_file = header, run_u = 0;
  bool fresh = true;       // inflated from a fresh state (the stream's start or a reset)
  std::string window;      // the kWindow bytes before run_u (to inflate it again)
  size_t next_offset = 0;  // offsets[next_offset] is the first offset >= u
  size_t run_record = 0;   // the index of run_u in offsets

  for (;;) {
    if (z.avail_in == 0 && !refill(file_pos())) break;
    if (have == out.size()) {
      std::memmove(out.data(), out.data() + have - kWindow, kWindow);
      have = kWindow;
    }
    z.next_out = reinterpret_cast<Bytef*>(out.data() + have);
    z.avail_out = static_cast<uInt>(out.size() - have);
    const int ret = inflate(&z, Z_BLOCK);
    const size_t produced = out.size() - have - z.avail_out;
    if (produced > 0) {
      const auto* b = reinterpret_cast<const unsigned char*>(out.data() + have);
      check = gzip ? crc32_gzip_refl(check, b, produced)
                   : isal_adler32(check, b, static_cast<uint64_t>(produced));
      have += produced;
      u += produced;
    }
    if (ret == Z_DATA_ERROR && fresh && run_file != header) {
      // A reference before the candidate's start: it is not a run. Inflate
      // it again from its start with the window it had.
      if (inflateReset(&z) != Z_OK ||
          inflateSetDictionary(&z, reinterpret_cast<const Bytef*>(window.data()),
                               static_cast<uInt>(window.size())) != Z_OK) {
        break;
      }
      fresh = false;
      std::memcpy(out.data(), window.data(), window.size());
      have = window.size();
      u = run_u;
      check = check0;
      while (next_offset > 0 && offsets[next_offset - 1] >= u) --next_offset;
      if (!refill(run_file)) break;
      continue;
    }
    if (ret != Z_OK && ret != Z_BUF_ERROR) break;  // the end (Z_STREAM_END) or damage
    if (ret == Z_BUF_ERROR && z.avail_in != 0 && z.avail_out != 0) break;
    // Between two blocks (128), not in the final one (64), at a byte
    // boundary (no bits left of the last byte read), on a record boundary
    // past the candidate's start: the candidate ends here.
    while (next_offset < offsets.size() && offsets[next_offset] < u) ++next_offset;
    if (u - run_u > kGiveUpBytes && next_offset - run_record > kGiveUpRecords) {
      // No candidate end in sight: a stream without flushes (gzip's,
      // TensorFlow's). The rest is not inflated here at all.
      break;
    }
    if ((z.data_type & (128 | 64 | 7)) != 128 || u == run_u) continue;
    if (next_offset == offsets.size() || offsets[next_offset] != u) continue;
    // Empty stored blocks that follow (a full flush's marker after a block
    // that happened to end at a byte boundary) belong to this run: skipped
    // here, outside zlib, so that the run ends after them.
    static constexpr unsigned char kEmptyStored[5] = {0, 0, 0, 0xff, 0xff};
    for (;;) {
      if (z.avail_in < sizeof kEmptyStored && !refill(file_pos())) break;
      if (z.avail_in < sizeof kEmptyStored ||
          std::memcmp(z.next_in, kEmptyStored, sizeof kEmptyStored) != 0) {
        break;
      }
      z.next_in += sizeof kEmptyStored;
      z.avail_in -= sizeof kEmptyStored;
    }
    if (!read_error.ok()) break;
    const uint64_t at = file_pos();
    if (fresh) runs.push_back({run_file, at, run_u, u, check});
    // The next candidate starts here, from a fresh state.
    const size_t w = std::min(have, kWindow);
    window.assign(out.data() + have - w, w);
    if (inflateReset(&z) != Z_OK) break;
    fresh = true;
    run_file = at;
    run_u = u;
    run_record = next_offset;
    check = check0;
  }
  if (!read_error.ok()) return read_error;
  return runs;
}

}  // namespace tfrecordfs::record
