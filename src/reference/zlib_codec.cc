#include "tfrecordfs/reference/zlib_codec.h"

#include <algorithm>
#include <cstring>

namespace tfrecordfs::reference::zlib {

std::string Deflate(absl::string_view data, Wrap wrap, int level, int strategy,
                    size_t flush_every) {
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

std::string Inflate(absl::string_view file, int window_bits, bool gzip_members, bool* clean) {
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

std::optional<std::string> InflateOneStream(absl::string_view file) {
  bool clean = false;
  std::string out = Inflate(file, 15 + 32, /*gzip_members=*/false, &clean);
  if (!clean) return std::nullopt;
  return out;
}

}  // namespace tfrecordfs::reference::zlib
