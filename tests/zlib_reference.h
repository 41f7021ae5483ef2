// zlib's own view of compressed bytes, for tests and fuzz targets that must
// not trust src/source to say what a GZIP or ZLIB file holds: deflate with
// chosen settings, and inflate until the end or the first error.
// Header-only (unit, mount and fuzz binaries share it); thread-safe.
#ifndef TFRECORDFS_TESTS_ZLIB_REFERENCE_H_
#define TFRECORDFS_TESTS_ZLIB_REFERENCE_H_

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace tfrecordfs::zlib_reference {

enum class Wrap { kGzip, kZlib, kRaw };

// deflate with the given level and strategy; `flush_every` > 0 ends a
// block with Z_FULL_FLUSH every that many input bytes. "" if zlib refuses
// the settings.
inline std::string Deflate(absl::string_view data, Wrap wrap, int level = 6,
                           int strategy = Z_DEFAULT_STRATEGY, size_t flush_every = 0) {
  z_stream z;
  std::memset(&z, 0, sizeof z);
  const int bits = wrap == Wrap::kGzip ? 31 : wrap == Wrap::kZlib ? 15 : -15;
  if (deflateInit2(&z, level, Z_DEFLATED, bits, 8, strategy) != Z_OK) return "";
  std::string out;
  size_t pos = 0;
  char buf[1 << 16];
  for (;;) {
    size_t take = data.size() - pos;
    if (flush_every > 0) take = std::min(take, flush_every);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + pos));
    z.avail_in = static_cast<uInt>(take);
    pos += take;
    const int flush = pos == data.size() ? Z_FINISH : Z_FULL_FLUSH;
    int ret;
    do {
      z.next_out = reinterpret_cast<Bytef*>(buf);
      z.avail_out = sizeof buf;
      ret = deflate(&z, flush);
      out.append(buf, sizeof buf - z.avail_out);
    } while (z.avail_out == 0 || (flush == Z_FINISH && ret != Z_STREAM_END));
    if (flush == Z_FINISH) break;
  }
  deflateEnd(&z);
  return out;
}

// Every byte zlib decompresses from `file` before its end or first error.
// `window_bits` as for inflateInit2 (31 GZIP, 15 ZLIB, 47 either). With
// `gzip_members`, a stream end followed by 1f 8b starts the next GZIP member
// (as gzip -d and TensorFlow read); anything else after a stream end stops.
// *clean (when given) says whether the whole file decompressed.
inline std::string Inflate(absl::string_view file, int window_bits, bool gzip_members,
                           bool* clean = nullptr) {
  z_stream z;
  std::memset(&z, 0, sizeof z);
  std::string out;
  bool ok = false;
  if (inflateInit2(&z, window_bits) != Z_OK) {
    if (clean) *clean = false;
    return out;
  }
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(file.data()));
  z.avail_in = static_cast<uInt>(file.size());
  char buf[1 << 16];
  for (;;) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    const int ret = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
    if (ret == Z_STREAM_END) {
      if (z.avail_in == 0) {
        ok = true;
        break;
      }
      if (!gzip_members || z.avail_in < 2 || z.next_in[0] != 0x1f || z.next_in[1] != 0x8b) break;
      inflateReset(&z);
      continue;
    }
    if (ret != Z_OK) break;                         // damage; Z_BUF_ERROR: truncated
    if (z.avail_in == 0 && z.avail_out > 0) break;  // truncated
  }
  inflateEnd(&z);
  if (clean) *clean = ok;
  return out;
}

// A GZIP or ZLIB file that is exactly one whole stream (one GZIP member),
// decompressed; nullopt otherwise.
inline std::optional<std::string> InflateOneStream(absl::string_view file) {
  bool clean = false;
  std::string out = Inflate(file, 15 + 32, /*gzip_members=*/false, &clean);
  if (!clean) return std::nullopt;
  return out;
}

}  // namespace tfrecordfs::zlib_reference

#endif  // TFRECORDFS_TESTS_ZLIB_REFERENCE_H_
