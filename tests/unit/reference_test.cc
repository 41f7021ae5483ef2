// src/reference: the hand-written wire encoder writes exactly the bytes
// protobuf's own encoding rules give (checked by hand and by protobuf's
// parser), and the zlib codec round-trips.
#include <cstdint>
#include <string>

#include "example.pb.h"
#include "gtest/gtest.h"
#include "tfrecordfs/reference/wire.h"
#include "tfrecordfs/reference/zlib_codec.h"

namespace tfrecordfs::reference {
namespace {

using wire::BytesFeature;
using wire::BytesValues;
using wire::ExampleOf;
using wire::Fixed32;
using wire::Fixed64;
using wire::Float;
using wire::FloatFeature;
using wire::Int64Feature;
using wire::Len;
using wire::MapEntry;
using wire::PackedFixed32s;
using wire::PackedFloats;
using wire::PackedVarints;
using wire::PutVarint;
using wire::Tag;
using wire::Varint;
using wire::VarintBytes;

TEST(WireTest, Varints) {
  EXPECT_EQ(VarintBytes(0), std::string("\x00", 1));
  EXPECT_EQ(VarintBytes(127), "\x7f");
  EXPECT_EQ(VarintBytes(300), "\xac\x02");
  EXPECT_EQ(VarintBytes(~uint64_t{0}), std::string(9, '\xff') + "\x01");  // int64 -1
  std::string s = "x";
  PutVarint(&s, 128);
  EXPECT_EQ(s, "x\x80\x01");
}

TEST(WireTest, KeysAreNotValidated) {
  EXPECT_EQ(Tag(1, 2), "\x0a");
  EXPECT_EQ(Tag(16, 0), "\x80\x01");
  EXPECT_EQ(Tag(0, 0), std::string("\x00", 1));  // field 0
  EXPECT_EQ(Tag(1, 3) + Tag(1, 4), "\x0b\x0c");  // group start / end
}

TEST(WireTest, Fields) {
  EXPECT_EQ(Len(2, "ab"),
            "\x12\x02"
            "ab");
  EXPECT_EQ(Varint(9, 1), "\x48\x01");
  EXPECT_EQ(Varint(1, static_cast<uint64_t>(int64_t{-1})).size(), 11u);
  EXPECT_EQ(Fixed32(1, 0x3f800000), std::string("\x0d\x00\x00\x80\x3f", 5));
  EXPECT_EQ(Float(1, 1.0f), Fixed32(1, 0x3f800000));
  EXPECT_EQ(Fixed64(1, 0x0102030405060708), "\x09\x08\x07\x06\x05\x04\x03\x02\x01");
}

TEST(WireTest, Lists) {
  EXPECT_EQ(PackedVarints({1, 300}), "\x0a\x03\x01\xac\x02");
  EXPECT_EQ(PackedVarints({}), std::string("\x0a\x00", 2));
  EXPECT_EQ(PackedFloats({1.0f, -2.0f}), PackedFixed32s({0x3f800000, 0xc0000000}));
  EXPECT_EQ(BytesValues({"a", ""}), std::string("\x0a\x01"
                                                "a\x0a\x00",
                                                5));
}

TEST(WireTest, ExampleListAndConcatenationAgree) {
  const std::string a = MapEntry("a", Int64Feature(PackedVarints({1})));
  const std::string b = MapEntry("b", FloatFeature(""));
  EXPECT_EQ(ExampleOf({a, b}), ExampleOf(a + b));
  EXPECT_EQ(ExampleOf({}), ExampleOf(""));
  EXPECT_EQ(ExampleOf(""), std::string("\x0a\x00", 2));
}

// What protobuf's parser makes of an Example written with every piece.
TEST(WireTest, ProtobufReadsWhatItSays) {
  const std::string payload = ExampleOf(
      {MapEntry("ids", Int64Feature(PackedVarints({-1, 7}) + Varint(1, 8))),
       MapEntry("xs", FloatFeature(PackedFloats({0.5f}) + Float(1, 2.0f))),
       MapEntry("text", BytesFeature(BytesValues({"cat", "dog"}))), MapEntry("none", "")});
  proto::Example ex;
  ASSERT_TRUE(ex.ParseFromString(payload));
  const auto& m = ex.features().feature();
  ASSERT_EQ(m.size(), 4u);
  const auto& ids = m.at("ids").int64_list().value();
  ASSERT_EQ(ids.size(), 3);
  EXPECT_EQ(ids[0], -1);
  EXPECT_EQ(ids[1], 7);
  EXPECT_EQ(ids[2], 8);
  const auto& xs = m.at("xs").float_list().value();
  ASSERT_EQ(xs.size(), 2);
  EXPECT_EQ(xs[0], 0.5f);
  EXPECT_EQ(xs[1], 2.0f);
  const auto& text = m.at("text").bytes_list().value();
  ASSERT_EQ(text.size(), 2);
  EXPECT_EQ(text[0], "cat");
  EXPECT_EQ(text[1], "dog");
  EXPECT_EQ(m.at("none").kind_case(), proto::Feature::KIND_NOT_SET);
}

TEST(ZlibCodecTest, RoundTrips) {
  std::string data;
  for (int i = 0; i < 5000; ++i) data += std::to_string(i * 7919 % 1000) + " ";
  for (zlib::Wrap w : {zlib::Wrap::kGzip, zlib::Wrap::kZlib}) {
    for (size_t flush_every : {size_t{0}, size_t{1024}}) {
      const std::string file = zlib::Deflate(data, w, 1, Z_DEFAULT_STRATEGY, flush_every);
      ASSERT_FALSE(file.empty());
      bool clean = false;
      EXPECT_EQ(zlib::Inflate(file, 47, /*gzip_members=*/false, &clean), data);
      EXPECT_TRUE(clean);
      EXPECT_EQ(zlib::InflateOneStream(file), data);
      // Two streams are not one stream; a cut one is not clean.
      EXPECT_EQ(zlib::InflateOneStream(file + file), std::nullopt);
      zlib::Inflate(file.substr(0, file.size() - 1), 47, false, &clean);
      EXPECT_FALSE(clean);
    }
  }
  EXPECT_EQ(zlib::Deflate("x", zlib::Wrap::kGzip, /*level=*/42), "");  // refused settings
}

}  // namespace
}  // namespace tfrecordfs::reference
