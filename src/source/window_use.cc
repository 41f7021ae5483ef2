#include "tfrecordfs/source/window_use.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "absl/base/internal/endian.h"
#include "absl/status/status.h"
#include "tfrecordfs/source/checkpoints.h"

namespace tfrecordfs::source {

namespace {

// Deflate's bit stream (RFC 1951 3.1.1): bits from the least significant of
// each byte on. Bits past the end of the input read as zero; overrun()
// tells the caller its decode went past the end.
class BitReader {
 public:
  BitReader(absl::string_view in, uint64_t first_bit)
      : p_(reinterpret_cast<const uint8_t*>(in.data())), n_(in.size()), pos_(first_bit) {}

  // At least the next 57 bits (zeros past the end).
  uint64_t Peek() const {
    const uint64_t byte = pos_ >> 3;
    uint64_t v = 0;
    if (byte + 8 <= n_) {
      v = absl::little_endian::Load64(p_ + byte);
    } else {
      for (uint64_t i = 0; i < 8 && byte + i < n_; ++i) v |= uint64_t{p_[byte + i]} << (8 * i);
    }
    return v >> (pos_ & 7);
  }
  uint32_t Take(int bits) {
    const uint32_t v = static_cast<uint32_t>(Peek() & ((uint64_t{1} << bits) - 1));
    pos_ += static_cast<uint64_t>(bits);
    return v;
  }
  void Skip(uint64_t bits) { pos_ += bits; }
  void AlignToByte() { pos_ = (pos_ + 7) & ~uint64_t{7}; }
  bool overrun() const { return pos_ > n_ * 8; }

 private:
  const uint8_t* p_;
  uint64_t n_;
  uint64_t pos_;
};

// A canonical Huffman code (RFC 1951 3.2.2): codes of up to kFastBits bits
// decode with one table lookup, longer ones bit by bit (as zlib's puff).
class Huffman {
 public:
  // False for an over-subscribed set of lengths (an incomplete one is
  // taken: the stream was inflated before, and its unused codes never
  // occur).
  bool Build(const uint8_t* lengths, int n) {
    count_.fill(0);
    for (int s = 0; s < n; ++s) ++count_[lengths[s]];
    count_[0] = 0;
    int left = 1;
    for (int len = 1; len <= kMaxBits; ++len) {
      left <<= 1;
      left -= count_[len];
      if (left < 0) return false;
    }
    std::array<int, kMaxBits + 2> offs{};
    for (int len = 1; len <= kMaxBits; ++len) offs[len + 1] = offs[len] + count_[len];
    symbols_.assign(static_cast<size_t>(n), 0);
    for (int s = 0; s < n; ++s) {
      if (lengths[s] != 0)
        symbols_[static_cast<size_t>(offs[lengths[s]]++)] = static_cast<uint16_t>(s);
    }
    // The fast table: every short code, bit-reversed (deflate sends codes
    // most significant bit first), in every slot its trailing bits allow.
    fast_.fill(0);
    uint32_t code = 0;
    size_t index = 0;
    for (int len = 1; len <= kMaxBits; ++len) {
      for (int k = 0; k < count_[len]; ++k, ++code, ++index) {
        if (len > kFastBits) continue;
        uint32_t rev = 0;
        for (int b = 0; b < len; ++b) rev |= ((code >> b) & 1) << (len - 1 - b);
        const uint16_t entry = static_cast<uint16_t>((symbols_[index] << 4) | len);
        for (uint32_t r = rev; r < (1u << kFastBits); r += 1u << len) fast_[r] = entry;
      }
      code <<= 1;
    }
    return true;
  }

  // The next symbol, or -1 for a code the table does not have.
  int Decode(BitReader& bits) const {
    const uint64_t v = bits.Peek();
    if (const uint16_t e = fast_[v & ((1u << kFastBits) - 1)]; e != 0) {
      bits.Skip(e & 15);
      return e >> 4;
    }
    int code = 0, first = 0, index = 0;
    for (int len = 1; len <= kMaxBits; ++len) {
      code |= static_cast<int>((v >> (len - 1)) & 1);
      const int count = count_[len];
      if (code - count < first) {
        bits.Skip(static_cast<uint64_t>(len));
        return symbols_[static_cast<size_t>(index + (code - first))];
      }
      index += count;
      first += count;
      first <<= 1;
      code <<= 1;
    }
    return -1;
  }

 private:
  static constexpr int kMaxBits = 15;
  static constexpr int kFastBits = 10;
  std::array<int, kMaxBits + 1> count_{};
  std::vector<uint16_t> symbols_;
  std::array<uint16_t, 1u << kFastBits> fast_{};
};

constexpr uint16_t kLengthBase[29] = {3,  4,  5,  6,   7,   8,   9,   10,  11, 13,
                                      15, 17, 19, 23,  27,  31,  35,  43,  51, 59,
                                      67, 83, 99, 115, 131, 163, 195, 227, 258};
constexpr uint8_t kLengthExtra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                      2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
constexpr uint16_t kDistBase[30] = {1,    2,    3,    4,    5,    7,    9,    13,    17,    25,
                                    33,   49,   65,   97,   129,  193,  257,  385,   513,   769,
                                    1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
constexpr uint8_t kDistExtra[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                    6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

absl::Status Invalid(const char* why) {
  return absl::InvalidArgumentError(std::string("not a deflate stream a window serves: ") + why);
}

}  // namespace

absl::StatusOr<std::string> SparseWindow(absl::string_view window, absl::string_view in,
                                         int first_bit) {
  const uint64_t wlen = window.size();
  if (wlen > kWindowSize) return Invalid("window longer than 32 KiB");
  std::string sparse(wlen, '\0');  // the bytes read so far, copied over
  BitReader bits(in, static_cast<uint64_t>(first_bit));
  Huffman lit, dist;
  uint64_t out = 0;  // output since the boundary
  bool final = false;
  auto short_input = [] {
    return absl::OutOfRangeError("the deflate data ends before the window");
  };
  while (!final && out < kWindowSize) {
    final = bits.Take(1) != 0;
    const uint32_t type = bits.Take(2);
    if (type == 0) {  // stored
      bits.AlignToByte();
      const uint32_t len = bits.Take(16);
      const uint32_t nlen = bits.Take(16);
      if (len != (~nlen & 0xffff)) return Invalid("stored block length");
      bits.Skip(uint64_t{len} * 8);
      if (bits.overrun()) return short_input();
      out += len;
      continue;
    }
    if (type == 3) return Invalid("block type 3");
    if (type == 1) {
      uint8_t l[288 + 30];
      std::fill(l, l + 144, 8);
      std::fill(l + 144, l + 256, 9);
      std::fill(l + 256, l + 280, 7);
      std::fill(l + 280, l + 288, 8);
      std::fill(l + 288, l + 318, 5);
      lit.Build(l, 288);
      dist.Build(l + 288, 30);
    } else {
      const int nlen = static_cast<int>(bits.Take(5)) + 257;
      const int ndist = static_cast<int>(bits.Take(5)) + 1;
      const int ncode = static_cast<int>(bits.Take(4)) + 4;
      if (nlen > 286 || ndist > 30) return Invalid("too many codes");
      static constexpr uint8_t kOrder[19] = {16, 17, 18, 0, 8,  7, 9,  6, 10, 5,
                                             11, 4,  12, 3, 13, 2, 14, 1, 15};
      uint8_t cl[19] = {};
      for (int i = 0; i < ncode; ++i) cl[kOrder[i]] = static_cast<uint8_t>(bits.Take(3));
      Huffman code_lengths;
      if (!code_lengths.Build(cl, 19)) return Invalid("code length code");
      uint8_t l[286 + 30] = {};
      int n = 0;
      while (n < nlen + ndist) {
        if (bits.overrun()) return short_input();
        const int s = code_lengths.Decode(bits);
        if (s < 0) return Invalid("code length");
        if (s < 16) {
          l[n++] = static_cast<uint8_t>(s);
          continue;
        }
        uint8_t value = 0;
        int repeat = 0;
        if (s == 16) {
          if (n == 0) return Invalid("repeat with no length before");
          value = l[n - 1];
          repeat = 3 + static_cast<int>(bits.Take(2));
        } else if (s == 17) {
          repeat = 3 + static_cast<int>(bits.Take(3));
        } else {
          repeat = 11 + static_cast<int>(bits.Take(7));
        }
        if (n + repeat > nlen + ndist) return Invalid("too many lengths");
        std::fill(l + n, l + n + repeat, value);
        n += repeat;
      }
      if (l[256] == 0) return Invalid("no end-of-block code");
      if (!lit.Build(l, nlen) || !dist.Build(l + nlen, ndist)) return Invalid("code lengths");
    }
    for (;;) {
      if (bits.overrun()) return short_input();
      const int sym = lit.Decode(bits);
      if (sym < 0) return Invalid("literal/length code");
      if (sym < 256) {
        if (++out >= kWindowSize) break;
        continue;
      }
      if (sym == 256) break;
      if (sym > 285) return Invalid("length symbol");
      const uint64_t len = kLengthBase[sym - 257] + bits.Take(kLengthExtra[sym - 257]);
      const int ds = dist.Decode(bits);
      if (ds < 0 || ds > 29) return Invalid("distance code");
      const uint64_t d = kDistBase[ds] + bits.Take(kDistExtra[ds]);
      if (d > out) {
        // The copy starts d - out bytes before the boundary: its first
        // min(len, d - out) bytes come from the window.
        const uint64_t back = d - out;
        if (back > wlen) return Invalid("distance too far back");
        const uint64_t from = wlen - back;
        std::memcpy(sparse.data() + from, window.data() + from,
                    static_cast<size_t>(std::min(len, back)));
      }
      out += len;
      if (out >= kWindowSize) break;  // no later reference reaches the window
    }
  }
  if (bits.overrun()) return short_input();
  return sparse;
}

absl::StatusOr<std::string> DataAfter(StoredBytes fd, absl::string_view path, const Checkpoint& cp,
                                      int* first_bit, size_t bytes) {
  const uint64_t at = cp.bits > 0 ? cp.in - 1 : cp.in;
  *first_bit = cp.bits > 0 ? 8 - cp.bits : 0;
  std::string in(bytes, '\0');
  auto got = PreadUpTo(fd, in.data(), in.size(), at, path);
  if (!got.ok()) return got.status();
  in.resize(*got);
  return in;
}

}  // namespace tfrecordfs::source
