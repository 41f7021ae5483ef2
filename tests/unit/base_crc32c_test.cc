// CRC32C against the RFC 3720 (iSCSI) test vectors, chaining, the TFRecord
// mask, and the framing of one known record.
#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/record/writer.h"

namespace tfrecordfs::crc32c {
namespace {

TEST(Crc32cTest, Rfc3720Vectors) {
  char buf[32];

  std::memset(buf, 0, sizeof buf);
  EXPECT_EQ(0x8a9136aau, Value(buf, sizeof buf));

  std::memset(buf, 0xff, sizeof buf);
  EXPECT_EQ(0x62a8ab43u, Value(buf, sizeof buf));

  for (int i = 0; i < 32; ++i) buf[i] = static_cast<char>(i);
  EXPECT_EQ(0x46dd794eu, Value(buf, sizeof buf));

  for (int i = 0; i < 32; ++i) buf[i] = static_cast<char>(31 - i);
  EXPECT_EQ(0x113fdb5cu, Value(buf, sizeof buf));

  // An iSCSI SCSI read (10) command PDU.
  const unsigned char data[48] = {
      0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
      0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  };
  EXPECT_EQ(0xd9963a56u, Value(data, sizeof data));
}

// Every length around the short-input path (the crc32 instruction up to 64
// bytes, ISA-L above) and every alignment, against a bitwise CRC32C.
TEST(Crc32cTest, ShortAndLongInputsMatchABitwiseCrc) {
  auto bitwise = [](const unsigned char* p, size_t n) {
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < n; ++i) {
      crc ^= p[i];
      for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
    }
    return ~crc;
  };
  std::mt19937 rng(7);
  std::string buf(200, '\0');
  for (char& c : buf) c = static_cast<char>(rng());
  const auto* u = reinterpret_cast<const unsigned char*>(buf.data());
  for (size_t at = 0; at < 8; ++at) {
    for (size_t n = 0; at + n <= buf.size(); ++n) {
      ASSERT_EQ(bitwise(u + at, n), Value(buf.data() + at, n)) << "at " << at << " n " << n;
      // Chained across the two paths.
      const size_t cut = n / 3;
      ASSERT_EQ(bitwise(u + at, n),
                Extend(Value(buf.data() + at, cut), buf.data() + at + cut, n - cut));
    }
  }
}

TEST(Crc32cTest, EmptyInput) {
  EXPECT_EQ(0u, Value("", 0));
  EXPECT_EQ(0u, Value(absl::string_view()));
  // Extending by nothing changes nothing.
  const uint32_t c = Value("abc");
  EXPECT_EQ(c, Extend(c, "", 0));
}

TEST(Crc32cTest, KnownStrings) {
  // The CRC-32C "check" value.
  EXPECT_EQ(0xe3069283u, Value("123456789"));
  EXPECT_NE(Value("a"), Value("foo"));
}

TEST(Crc32cTest, Extend) {
  EXPECT_EQ(Value("hello world"), Extend(Value("hello "), "world", 5));
  EXPECT_EQ(Value("hello world"), Extend(Extend(0, "hello ", 6), "world", 5));
}

TEST(Crc32cTest, ExtendEverySplitPoint) {
  std::mt19937 rng(42);
  std::string s(1000, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  const uint32_t whole = Value(s);
  for (size_t cut = 0; cut <= s.size(); cut += 7) {
    const uint32_t a = Value(s.data(), cut);
    EXPECT_EQ(whole, Extend(a, s.data() + cut, s.size() - cut)) << "cut at " << cut;
  }
  // Three pieces.
  uint32_t c =
      Extend(Extend(Extend(0, s.data(), 13), s.data() + 13, 500), s.data() + 513, s.size() - 513);
  EXPECT_EQ(whole, c);
}

TEST(Crc32cTest, Mask) {
  const uint32_t crc = Value("foo");
  EXPECT_NE(crc, Mask(crc));
  EXPECT_NE(crc, Mask(Mask(crc)));
  EXPECT_EQ(crc, Unmask(Mask(crc)));
  EXPECT_EQ(crc, Unmask(Unmask(Mask(Mask(crc)))));
  // Mask is rotate-right-15 plus the delta.
  EXPECT_EQ(kMaskDelta, Mask(0));
  EXPECT_EQ(((1u >> 15) | (1u << 17)) + kMaskDelta, Mask(1));
}

TEST(Crc32cTest, MaskRoundTripRandom) {
  std::mt19937 rng(7);
  for (int i = 0; i < 10000; ++i) {
    const uint32_t v = static_cast<uint32_t>(rng());
    ASSERT_EQ(v, Unmask(Mask(v)));
    ASSERT_EQ(v, Mask(Unmask(v)));
  }
  for (uint32_t v : {0u, 1u, 0xffffffffu, 0x80000000u, kMaskDelta, 0x7fffu, 0x8000u}) {
    EXPECT_EQ(v, Unmask(Mask(v))) << v;
  }
  static_assert(Unmask(Mask(0x12345678u)) == 0x12345678u);
}

TEST(Crc32cTest, TfRecordFramingOf12345) {
  std::string out;
  record::AppendFramed(&out, "12345");
  const unsigned char want[] = {0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xea, 0xb2, 0x04,
                                0x3e, 0x31, 0x32, 0x33, 0x34, 0x35, 0x7a, 0x1c, 0xed, 0xe8};
  ASSERT_EQ(sizeof want, out.size());
  for (size_t i = 0; i < sizeof want; ++i) {
    EXPECT_EQ(want[i], static_cast<unsigned char>(out[i])) << "byte " << i;
  }
  // The stored CRCs are the masked CRCs of the length bytes and the data.
  EXPECT_EQ(Mask(Value(out.data(), 8)), DecodeFixed32(out.data() + 8));
  EXPECT_EQ(Mask(Value("12345")), DecodeFixed32(out.data() + 17));
}

TEST(CodingTest, FixedRoundTrip) {
  std::string s;
  PutFixed32(&s, 0x04030201u);
  PutFixed64(&s, 0x0807060504030201ull);
  ASSERT_EQ(12u, s.size());
  EXPECT_EQ('\x01', s[0]);
  EXPECT_EQ('\x04', s[3]);
  EXPECT_EQ('\x01', s[4]);
  EXPECT_EQ('\x08', s[11]);
  EXPECT_EQ(0x04030201u, DecodeFixed32(s.data()));
  EXPECT_EQ(0x0807060504030201ull, DecodeFixed64(s.data() + 4));
  char b[8];
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, ~uint64_t{0}, uint64_t{1} << 63}) {
    EncodeFixed64(b, v);
    EXPECT_EQ(v, DecodeFixed64(b));
  }
}

}  // namespace
}  // namespace tfrecordfs::crc32c
