// The stored-deflate PNG view of an image tensor (layout in png.h).
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/tensor/png.h"

namespace tfrecordfs::tensor {
namespace {

constexpr uint64_t kSigAndIhdr = 8 + 25;
constexpr uint64_t kChunkOverhead = 12;  // length, type, CRC
constexpr uint64_t kIendSize = 12;
constexpr uint64_t kMaxStored = 65535;       // bytes of one stored deflate block
constexpr uint64_t kBlockHeader = 5;         // BFINAL/BTYPE byte, LEN, NLEN
constexpr uint64_t kAdlerStride = 1u << 20;  // pixels fetched at a time for adler32

void PutBE32(char* p, uint32_t v) {
  p[0] = static_cast<char>(v >> 24);
  p[1] = static_cast<char>(v >> 16);
  p[2] = static_cast<char>(v >> 8);
  p[3] = static_cast<char>(v);
}

uint32_t Crc(uint32_t crc, const char* p, size_t n) {
  return static_cast<uint32_t>(crc32_z(crc, reinterpret_cast<const Bytef*>(p), n));
}

// The derived sizes of the layout.
struct Layout {
  explicit Layout(const PngGeometry& g)
      : row(1 + g.RowBytes()),
        raw(uint64_t{g.height} * row),
        blocks((raw + kMaxStored - 1) / kMaxStored),
        zlib(2 + kBlockHeader * blocks + raw + 4),
        chunks((zlib + kIdatPayload - 1) / kIdatPayload),
        size(kSigAndIhdr + kChunkOverhead * chunks + zlib + kIendSize) {}
  uint64_t row;     // raw bytes per row (filter byte + samples)
  uint64_t raw;     // raw (uncompressed) bytes
  uint64_t blocks;  // stored deflate blocks
  uint64_t zlib;    // zlib stream bytes
  uint64_t chunks;  // IDAT chunks
  uint64_t size;    // whole file
};

class Writer {
 public:
  Writer(const PngGeometry& g, const PixelSource& source) : g_(g), l_(g), source_(source) {}

  absl::Status Read(uint64_t offset, char* out, size_t n) {
    if (offset > l_.size || n > l_.size - offset) {
      return absl::OutOfRangeError(
          absl::StrCat("PNG range [", offset, ", +", n, ") past its size ", l_.size));
    }
    while (n > 0) {
      size_t done;
      if (offset < kSigAndIhdr) {
        char head[kSigAndIhdr];
        Head(head);
        done = std::min<uint64_t>(n, kSigAndIhdr - offset);
        std::memcpy(out, head + offset, done);
      } else if (offset >= l_.size - kIendSize) {
        static constexpr char kIend[] = "\0\0\0\0IEND\xae\x42\x60\x82";
        const uint64_t at = offset - (l_.size - kIendSize);
        done = n;  // the range ends at the file's end at most
        std::memcpy(out, kIend + at, done);
      } else {
        auto s = Chunk(offset - kSigAndIhdr, out, n, &done);
        if (!s.ok()) return s;
      }
      offset += done;
      out += done;
      n -= done;
    }
    return absl::OkStatus();
  }

 private:
  void Head(char* p) const {
    std::memcpy(p, "\x89PNG\r\n\x1a\n", 8);
    PutBE32(p + 8, 13);
    std::memcpy(p + 12, "IHDR", 4);
    PutBE32(p + 16, g_.width);
    PutBE32(p + 20, g_.height);
    static constexpr uint8_t kColorType[] = {0, 0, 4, 2, 6};
    p[24] = static_cast<char>(g_.depth);
    p[25] = static_cast<char>(kColorType[g_.channels]);
    p[26] = p[27] = p[28] = 0;  // deflate, adaptive filtering, no interlace
    PutBE32(p + 29, Crc(0, p + 12, 17));
  }

  // Bytes of the IDAT chunks, from `rel` bytes after the first one's start.
  absl::Status Chunk(uint64_t rel, char* out, size_t n, size_t* done) {
    const uint64_t stride = kChunkOverhead + kIdatPayload;
    const uint64_t index = rel / stride;
    const uint64_t at = rel % stride;
    const uint64_t zstart = index * kIdatPayload;
    const uint64_t payload = std::min<uint64_t>(kIdatPayload, l_.zlib - zstart);
    const uint64_t chunk_size = kChunkOverhead + payload;
    *done = std::min<uint64_t>(n, chunk_size - at);
    const uint64_t end = at + *done;
    if (end > 8 + payload) {
      // The range touches the CRC, which covers the whole payload.
      std::vector<char> buf(chunk_size);
      PutBE32(buf.data(), static_cast<uint32_t>(payload));
      std::memcpy(buf.data() + 4, "IDAT", 4);
      if (auto s = Zlib(zstart, buf.data() + 8, payload); !s.ok()) return s;
      PutBE32(buf.data() + 8 + payload, Crc(0, buf.data() + 4, 4 + payload));
      std::memcpy(out, buf.data() + at, *done);
      return absl::OkStatus();
    }
    uint64_t pos = at;
    char* o = out;
    if (pos < 8) {
      char head[8];
      PutBE32(head, static_cast<uint32_t>(payload));
      std::memcpy(head + 4, "IDAT", 4);
      const uint64_t k = std::min<uint64_t>(8, end) - pos;
      std::memcpy(o, head + pos, k);
      pos += k;
      o += k;
    }
    if (pos < end) return Zlib(zstart + pos - 8, o, end - pos);
    return absl::OkStatus();
  }

  // Bytes [z, z + n) of the zlib stream.
  absl::Status Zlib(uint64_t z, char* out, uint64_t n) {
    const uint64_t block_stride = kBlockHeader + kMaxStored;
    while (n > 0) {
      uint64_t k;
      if (z < 2) {
        static constexpr char kHeader[] = {0x78, 0x01};  // deflate, 32K window, check bits
        k = std::min<uint64_t>(n, 2 - z);
        std::memcpy(out, kHeader + z, k);
      } else if (z >= l_.zlib - 4) {
        char adler[4];
        uint32_t a;
        if (auto s = Adler(&a); !s.ok()) return s;
        PutBE32(adler, a);
        k = std::min<uint64_t>(n, l_.zlib - z);
        std::memcpy(out, adler + (z - (l_.zlib - 4)), k);
      } else {
        const uint64_t b = (z - 2) / block_stride;
        const uint64_t at = (z - 2) % block_stride;
        const uint64_t len = std::min<uint64_t>(kMaxStored, l_.raw - b * kMaxStored);
        if (at < kBlockHeader) {
          char h[kBlockHeader];
          h[0] = b + 1 == l_.blocks ? 1 : 0;  // BFINAL, BTYPE 00 (stored)
          h[1] = static_cast<char>(len & 0xff);
          h[2] = static_cast<char>(len >> 8);
          h[3] = static_cast<char>(~len & 0xff);
          h[4] = static_cast<char>((~len >> 8) & 0xff);
          k = std::min<uint64_t>(n, kBlockHeader - at);
          std::memcpy(out, h + at, k);
        } else {
          k = std::min<uint64_t>(n, kBlockHeader + len - at);
          if (auto s = Raw(b * kMaxStored + at - kBlockHeader, out, k); !s.ok()) return s;
        }
      }
      z += k;
      out += k;
      n -= k;
    }
    return absl::OkStatus();
  }

  // Raw (filtered, big-endian) bytes [r, r + n): one source call.
  absl::Status Raw(uint64_t r, char* out, uint64_t n) {
    const uint64_t rb = l_.row - 1;
    const uint64_t end = r + n;
    const uint64_t row0 = r / l_.row, col0 = r % l_.row;
    const uint64_t row1 = (end - 1) / l_.row, col1 = (end - 1) % l_.row;
    uint64_t t0 = row0 * rb + (col0 == 0 ? 0 : col0 - 1);
    uint64_t t1 = row1 * rb + (col1 == 0 ? 0 : col1);
    if (g_.depth == 16) {
      t0 &= ~uint64_t{1};
      t1 = (t1 + 1) & ~uint64_t{1};
    }
    if (t1 > t0) {
      pixels_.resize(t1 - t0);
      if (auto s = source_(t0, pixels_.data(), t1 - t0); !s.ok()) return s;
      if (g_.depth == 16) {
        for (size_t i = 0; i + 1 < pixels_.size(); i += 2) std::swap(pixels_[i], pixels_[i + 1]);
      }
    }
    for (uint64_t p = r; p < end;) {
      const uint64_t row = p / l_.row, col = p % l_.row;
      if (col == 0) {
        *out++ = 0;  // filter type None
        ++p;
        continue;
      }
      const uint64_t k = std::min(end - p, l_.row - col);
      std::memcpy(out, pixels_.data() + (row * rb + col - 1 - t0), k);
      out += k;
      p += k;
    }
    return absl::OkStatus();
  }

  // adler32 of all raw bytes: every pixel, read kAdlerStride at a time.
  absl::Status Adler(uint32_t* out) {
    if (have_adler_) {
      *out = adler_;
      return absl::OkStatus();
    }
    uLong a = adler32_z(0, nullptr, 0);
    std::vector<char> buf;
    const uint64_t rows_per = std::max<uint64_t>(1, kAdlerStride / l_.row);
    for (uint64_t row = 0; row < g_.height; row += rows_per) {
      const uint64_t rows = std::min<uint64_t>(rows_per, g_.height - row);
      buf.resize(rows * l_.row);
      if (auto s = Raw(row * l_.row, buf.data(), buf.size()); !s.ok()) return s;
      a = adler32_z(a, reinterpret_cast<const Bytef*>(buf.data()), buf.size());
    }
    adler_ = static_cast<uint32_t>(a);
    have_adler_ = true;
    *out = adler_;
    return absl::OkStatus();
  }

  const PngGeometry& g_;
  const Layout l_;
  const PixelSource& source_;
  std::vector<char> pixels_;  // scratch of Raw()
  bool have_adler_ = false;
  uint32_t adler_ = 0;
};

}  // namespace

absl::StatusOr<PngGeometry> PngGeometryOf(DataType dtype, absl::Span<const int64_t> shape) {
  PngGeometry g;
  if (dtype == DataType::kUint8) {
    g.depth = 8;
  } else if (dtype == DataType::kUint16) {
    g.depth = 16;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("no PNG view of dtype ", InfoOf(dtype).name, " (uint8 or uint16 only)"));
  }
  if (shape.size() == 2) {
    g.channels = 1;
    g.rank2 = true;
  } else if (shape.size() == 3 && shape[2] >= 1 && shape[2] <= 4) {
    g.channels = static_cast<uint32_t>(shape[2]);
  } else {
    return absl::InvalidArgumentError("no PNG view of this shape ([H,W] or [H,W,1..4] only)");
  }
  constexpr int64_t kMaxSide = 0x7fffffff;  // PNG's limit on width and height
  if (shape[0] < 1 || shape[1] < 1 || shape[0] > kMaxSide || shape[1] > kMaxSide) {
    return absl::InvalidArgumentError("no PNG view: height and width must be 1..2^31-1");
  }
  g.height = static_cast<uint32_t>(shape[0]);
  g.width = static_cast<uint32_t>(shape[1]);
  return g;
}

uint64_t PngSize(const PngGeometry& g) { return Layout(g).size; }

absl::Status ReadPngRange(const PngGeometry& g, const PixelSource& source, uint64_t offset,
                          char* out, size_t n) {
  Writer w(g, source);
  return w.Read(offset, out, n);
}

absl::StatusOr<std::string> EncodePng(const PngGeometry& g, absl::string_view pixels) {
  if (pixels.size() != g.PixelBytes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "EncodePng: ", pixels.size(), " pixel bytes, the geometry needs ", g.PixelBytes()));
  }
  PixelSource source = [pixels](uint64_t off, char* buf, size_t n) {
    std::memcpy(buf, pixels.data() + off, n);
    return absl::OkStatus();
  };
  std::string out(PngSize(g), '\0');
  if (auto s = ReadPngRange(g, source, 0, out.data(), out.size()); !s.ok()) return s;
  return out;
}

}  // namespace tfrecordfs::tensor
