// The hand-written Example decoder against protobuf's own parser, the encoder
// round trip, hand-built wire bytes for the corner cases protobuf allows, and
// the payloads the decoder must reject.
#include "tfrecordfs/example/example.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "example.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/canon.h"
#include "tfrecordfs/reference/wire.h"

namespace tfrecordfs::example {
namespace {

using ::testing::HasSubstr;

// The canonical form both sides convert to (tests/testing/canon.h): floats as
// bit patterns, so that NaN payloads and -0 compare exactly.
using test::Bits;
using test::Canon;
using test::CanonTable;
using test::FromBits;
using test::FromProto;
using test::FromTable;

// Decodes and checks the table's own contract: sorted, unique names, values
// only of the feature's kind, byte views inside the payload.
CanonTable DecodeChecked(absl::string_view payload) {
  auto table = DecodeExample(payload);
  EXPECT_TRUE(table.ok()) << table.status();
  if (!table.ok()) return {};
  for (size_t i = 0; i < table->features.size(); ++i) {
    const Feature& f = table->features[i];
    if (i > 0) {
      EXPECT_LT(table->features[i - 1].name, f.name) << "not sorted / not unique";
    }
    if (f.kind != Kind::kBytes) {
      EXPECT_TRUE(f.bytes.empty()) << f.name;
    }
    if (f.kind != Kind::kFloat) {
      EXPECT_TRUE(f.floats.empty()) << f.name;
    }
    if (f.kind != Kind::kInt64) {
      EXPECT_TRUE(f.int64s.empty()) << f.name;
    }
    for (absl::string_view v : f.bytes) {
      if (v.empty()) continue;
      EXPECT_GE(v.data(), payload.data());
      EXPECT_LE(v.data() + v.size(), payload.data() + payload.size());
    }
  }
  return FromTable(*table);
}

CanonTable ProtoParse(const std::string& payload) {
  proto::Example ex;
  EXPECT_TRUE(ex.ParseFromString(payload));
  return FromProto(ex);
}

// ---------------------------------------------------------------------------
// Random Examples.

class Generator {
 public:
  explicit Generator(uint32_t seed) : rng_(seed) {}

  uint32_t Uniform(uint32_t n) { return static_cast<uint32_t>(rng_() % n); }

  std::string Name() {
    static const char* const kParts[] = {
        "image", "encoded", "label", "a", "b",  "x.y", "日本",          "é", " sp ace", "%",
        "..",    ".",       "",      "0", "12", "-",   "name with\ttab"};
    std::string name;
    const int parts = 1 + static_cast<int>(Uniform(4));
    for (int i = 0; i < parts; ++i) {
      if (i > 0) name += Uniform(8) == 0 ? "//" : "/";
      name += kParts[Uniform(std::size(kParts))];
    }
    if (Uniform(10) == 0) name = "/" + name;
    if (Uniform(10) == 0) name += "/";
    return name;
  }

  float Float() {
    static const uint32_t kSpecial[] = {
        0x00000000, 0x80000000,  // +0, -0
        0x7f800000, 0xff800000,  // +inf, -inf
        0x7fc00000, 0xffc00000,  // default quiet NaNs
        0x7f800001, 0x7fbfffff,  // signalling NaNs
        0x7fc00001, 0xffffffff,  // NaN payloads
        0x00000001, 0x807fffff,  // denormals
        0x00800000, 0x7f7fffff,  // smallest normal, largest finite
        0x3f800000, 0x3dcccccd,  // 1, 0.1
    };
    if (Uniform(3) == 0) return FromBits(kSpecial[Uniform(std::size(kSpecial))]);
    return FromBits(static_cast<uint32_t>(rng_()));
  }

  int64_t Int64() {
    static const int64_t kSpecial[] = {0,
                                       1,
                                       -1,
                                       127,
                                       128,
                                       -128,
                                       std::numeric_limits<int64_t>::min(),
                                       std::numeric_limits<int64_t>::max()};
    if (Uniform(3) == 0) return kSpecial[Uniform(std::size(kSpecial))];
    return static_cast<int64_t>((static_cast<uint64_t>(rng_()) << 32) ^ rng_()) >> Uniform(64);
  }

  std::string Bytes() {
    std::string s(Uniform(5) == 0 ? Uniform(3000) : Uniform(20), '\0');
    for (char& c : s) c = static_cast<char>(rng_());
    if (Uniform(3) == 0) s = "text value " + std::to_string(Uniform(100));
    return s;
  }

  // A proto Example; values are stored in the proto itself.
  proto::Example Example() {
    proto::Example ex;
    auto* map = ex.mutable_features()->mutable_feature();
    const int n = static_cast<int>(Uniform(8));
    for (int i = 0; i < n; ++i) {
      proto::Feature& f = (*map)[Name()];
      const int count = Uniform(4) == 0 ? 0 : static_cast<int>(Uniform(Uniform(5) == 0 ? 300 : 5));
      switch (Uniform(4)) {
        case 0:
          break;  // kindless Feature{}
        case 1: {
          auto* l = f.mutable_bytes_list();
          for (int k = 0; k < count; ++k) l->add_value(Bytes());
          break;
        }
        case 2: {
          auto* l = f.mutable_float_list();
          for (int k = 0; k < count; ++k) l->add_value(Float());
          break;
        }
        default: {
          auto* l = f.mutable_int64_list();
          for (int k = 0; k < count; ++k) l->add_value(Int64());
          break;
        }
      }
    }
    return ex;
  }

 private:
  std::mt19937 rng_;
};

TEST(DecodeExampleTest, MatchesProtobufOnGeneratedExamples) {
  Generator gen(20240601);
  int nonempty = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    const proto::Example ex = gen.Example();
    std::string payload;
    ASSERT_TRUE(ex.SerializeToString(&payload));
    const CanonTable want = ProtoParse(payload);
    const CanonTable got = DecodeChecked(payload);
    ASSERT_EQ(want, got) << "iteration " << iter;
    nonempty += !got.empty();
  }
  EXPECT_GT(nonempty, 1000);  // the generator is not degenerate
}

TEST(DecodeExampleTest, EncodeDecodeRoundTrip) {
  Generator gen(77);
  for (int iter = 0; iter < 1000; ++iter) {
    const proto::Example ex = gen.Example();
    std::string original;
    ASSERT_TRUE(ex.SerializeToString(&original));
    auto table = DecodeExample(original);
    ASSERT_TRUE(table.ok()) << table.status();
    const std::string encoded = EncodeExample(*table);
    EXPECT_EQ(FromTable(*table), DecodeChecked(encoded)) << "iteration " << iter;
    EXPECT_EQ(FromProto(ex), ProtoParse(encoded)) << "iteration " << iter;
    // Deterministic: encoding the same table twice gives the same bytes.
    EXPECT_EQ(encoded, EncodeExample(*table));
  }
}

TEST(DecodeExampleTest, HandPickedTable) {
  const std::string jpeg = std::string("\xff\xd8\xff\xe0", 4) + std::string(100, '\0');
  const float nan_payload = FromBits(0x7fa00001);
  FeatureTable t;
  auto add = [&](std::string name, Kind kind) -> Feature& {
    t.features.emplace_back();
    t.features.back().name = std::move(name);
    t.features.back().kind = kind;
    return t.features.back();
  };
  add("", Kind::kInt64).int64s = {1};
  add("a/b/c", Kind::kBytes).bytes = {"x", "", "y"};
  add("empty_bytes", Kind::kBytes);
  add("empty_float", Kind::kFloat);
  add("empty_int64", Kind::kInt64);
  add("floats", Kind::kFloat).floats = {-0.0f,
                                        std::numeric_limits<float>::infinity(),
                                        -std::numeric_limits<float>::infinity(),
                                        std::numeric_limits<float>::denorm_min(),
                                        nan_payload,
                                        std::nanf(""),
                                        1.5f};
  add("image/encoded", Kind::kBytes).bytes = {jpeg};
  add("int64s", Kind::kInt64).int64s = {std::numeric_limits<int64_t>::min(), -1, 0,
                                        std::numeric_limits<int64_t>::max()};
  add("kindless", Kind::kNone);
  add("日本/語", Kind::kBytes).bytes = {"é"};
  const std::string payload = EncodeExample(t);
  const CanonTable got = DecodeChecked(payload);
  EXPECT_EQ(FromTable(t), got);
  EXPECT_EQ(ProtoParse(payload), got);
  EXPECT_EQ(Kind::kNone, got.at("kindless").kind);
  EXPECT_EQ(0x7fa00001u, got.at("floats").float_bits[4]);
  EXPECT_EQ(0x80000000u, got.at("floats").float_bits[0]);

  // The jpeg view points at the jpeg bytes inside the payload.
  auto table = DecodeExample(payload);
  ASSERT_TRUE(table.ok());
  for (const Feature& f : table->features) {
    if (f.name != "image/encoded") continue;
    ASSERT_EQ(1u, f.bytes.size());
    const size_t at = payload.find(jpeg);
    ASSERT_NE(std::string::npos, at);
    EXPECT_EQ(payload.data() + at, f.bytes[0].data());
    EXPECT_EQ(jpeg.size(), f.bytes[0].size());
  }
}

TEST(DecodeExampleTest, FeatureSize) {
  Feature f;
  EXPECT_EQ(0u, f.size());
  f.kind = Kind::kBytes;
  f.bytes = {"a", "b"};
  EXPECT_EQ(2u, f.size());
  f.kind = Kind::kInt64;
  f.int64s = {1, 2, 3};
  EXPECT_EQ(3u, f.size());
  f.kind = Kind::kFloat;
  EXPECT_EQ(0u, f.size());
  EXPECT_STREQ("bytes", KindName(Kind::kBytes));
  EXPECT_STREQ("float", KindName(Kind::kFloat));
  EXPECT_STREQ("int64", KindName(Kind::kInt64));
  EXPECT_STREQ("none", KindName(Kind::kNone));
}

TEST(DecodeExampleTest, EmptyPayloadIsAnEmptyExample) {
  auto t = DecodeExample("");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->features.empty());
  EXPECT_TRUE(DecodeChecked(EncodeExample(FeatureTable{})).empty());
  // Empty Features message, and an empty features field twice.
  EXPECT_TRUE(DecodeChecked(std::string("\x0a\x00", 2)).empty());
  EXPECT_TRUE(DecodeChecked(std::string("\x0a\x00\x0a\x00", 4)).empty());
}

// ---------------------------------------------------------------------------
// Hand-built wire bytes.

// Hand-built wire bytes (tfrecordfs/reference/wire.h).
using reference::wire::ExampleOf;
using reference::wire::Fixed32;
using reference::wire::Len;
using reference::wire::MapEntry;
using reference::wire::PackedFixed32s;
using reference::wire::PackedVarints;
using reference::wire::PutVarint;
using reference::wire::Tag;
using reference::wire::Varint;

CanonTable Both(const std::string& payload) {
  const CanonTable got = DecodeChecked(payload);
  EXPECT_EQ(ProtoParse(payload), got);
  return got;
}

TEST(WireTest, UnpackedInt64s) {
  const std::string list = Varint(1, 5) + Varint(1, static_cast<uint64_t>(-1)) + Varint(1, 300);
  const CanonTable t = Both(ExampleOf(MapEntry("n", Len(3, list))));
  EXPECT_EQ((std::vector<int64_t>{5, -1, 300}), t.at("n").int64s);
}

TEST(WireTest, UnpackedFloats) {
  const std::string list = Fixed32(1, 0x3f800000) + Fixed32(1, 0x7f800001) + Fixed32(1, 0x80000000);
  const CanonTable t = Both(ExampleOf(MapEntry("f", Len(2, list))));
  EXPECT_EQ((std::vector<uint32_t>{0x3f800000, 0x7f800001, 0x80000000}), t.at("f").float_bits);
}

TEST(WireTest, TwoPackedRunsConcatenate) {
  CanonTable t = Both(ExampleOf(MapEntry("n", Len(3, PackedVarints({1, 2}) + PackedVarints({3})))));
  EXPECT_EQ((std::vector<int64_t>{1, 2, 3}), t.at("n").int64s);
  t = Both(ExampleOf(MapEntry("f", Len(2, PackedFixed32s({1, 2}) + PackedFixed32s({3, 4})))));
  EXPECT_EQ((std::vector<uint32_t>{1, 2, 3, 4}), t.at("f").float_bits);
}

TEST(WireTest, MixedPackedAndUnpacked) {
  CanonTable t = Both(ExampleOf(MapEntry(
      "n", Len(3, Varint(1, 7) + PackedVarints({8, 9}) + Varint(1, 10) + PackedVarints({})))));
  EXPECT_EQ((std::vector<int64_t>{7, 8, 9, 10}), t.at("n").int64s);
  t = Both(
      ExampleOf(MapEntry("f", Len(2, PackedFixed32s({5}) + Fixed32(1, 6) + PackedFixed32s({7})))));
  EXPECT_EQ((std::vector<uint32_t>{5, 6, 7}), t.at("f").float_bits);
}

TEST(WireTest, DuplicateKeysLastWins) {
  const std::string payload =
      ExampleOf(MapEntry("k", Len(3, PackedVarints({1}))) +
                MapEntry("other", Len(3, PackedVarints({2}))) + MapEntry("k", Len(1, Len(1, "x"))));
  const CanonTable t = Both(payload);
  ASSERT_EQ(2u, t.size());
  EXPECT_EQ(Kind::kBytes, t.at("k").kind);
  EXPECT_EQ(std::vector<std::string>{"x"}, t.at("k").bytes);
  EXPECT_TRUE(t.at("k").int64s.empty());
}

TEST(WireTest, FeatureWithTwoKindsLastWins) {
  CanonTable t = Both(ExampleOf(MapEntry("k", Len(1, Len(1, "x")) + Len(3, PackedVarints({4})))));
  EXPECT_EQ(Kind::kInt64, t.at("k").kind);
  EXPECT_EQ(std::vector<int64_t>{4}, t.at("k").int64s);
  EXPECT_TRUE(t.at("k").bytes.empty());
  t = Both(ExampleOf(MapEntry("k", Len(3, PackedVarints({4})) + Len(2, PackedFixed32s({1})))));
  EXPECT_EQ(Kind::kFloat, t.at("k").kind);
  EXPECT_TRUE(t.at("k").int64s.empty());
}

TEST(WireTest, SameKindTwiceMerges) {
  const CanonTable t =
      Both(ExampleOf(MapEntry("k", Len(3, PackedVarints({1})) + Len(3, PackedVarints({2, 3})))));
  EXPECT_EQ((std::vector<int64_t>{1, 2, 3}), t.at("k").int64s);
  const CanonTable b = Both(ExampleOf(MapEntry("b", Len(1, Len(1, "x")) + Len(1, Len(1, "y")))));
  EXPECT_EQ((std::vector<std::string>{"x", "y"}), b.at("b").bytes);
}

TEST(WireTest, RepeatedFeaturesMessagesMerge) {
  const std::string payload = ExampleOf(MapEntry("a", Len(3, PackedVarints({1})))) +
                              ExampleOf(MapEntry("b", Len(3, PackedVarints({2}))) +
                                        MapEntry("a", Len(3, PackedVarints({3}))));
  const CanonTable t = Both(payload);
  ASSERT_EQ(2u, t.size());
  EXPECT_EQ(std::vector<int64_t>{3}, t.at("a").int64s);
  EXPECT_EQ(std::vector<int64_t>{2}, t.at("b").int64s);
}

TEST(WireTest, MapEntryOddities) {
  // Value before key; key only (kind none); value only (empty name); the
  // value field twice (merged); the key twice (last wins).
  const std::string value_first = Len(1, Len(2, Len(3, PackedVarints({1}))) + Len(1, "v"));
  const std::string key_only = Len(1, Len(1, "k"));
  const std::string value_only = Len(1, Len(2, Len(3, PackedVarints({9}))));
  const std::string value_twice =
      Len(1, Len(1, "t") + Len(2, Len(3, PackedVarints({1}))) + Len(2, Len(3, PackedVarints({2}))));
  const std::string key_twice = Len(1, Len(1, "old") + Len(1, "new") + Len(2, Len(1, Len(1, "z"))));
  const CanonTable t =
      Both(ExampleOf(value_first + key_only + value_only + value_twice + key_twice));
  EXPECT_EQ(std::vector<int64_t>{1}, t.at("v").int64s);
  EXPECT_EQ(Kind::kNone, t.at("k").kind);
  EXPECT_EQ(std::vector<int64_t>{9}, t.at("").int64s);
  EXPECT_EQ((std::vector<int64_t>{1, 2}), t.at("t").int64s);
  EXPECT_EQ(0u, t.count("old"));
  EXPECT_EQ(std::vector<std::string>{"z"}, t.at("new").bytes);
}

TEST(WireTest, EmptyListsOfEachKind) {
  const CanonTable t = Both(ExampleOf(MapEntry("b", Len(1, "")) + MapEntry("f", Len(2, "")) +
                                      MapEntry("i", Len(3, "")) + MapEntry("none", "")));
  EXPECT_EQ(Kind::kBytes, t.at("b").kind);
  EXPECT_EQ(Kind::kFloat, t.at("f").kind);
  EXPECT_EQ(Kind::kInt64, t.at("i").kind);
  EXPECT_EQ(Kind::kNone, t.at("none").kind);
}

TEST(WireTest, LongVarints) {
  // Ten-byte varints for negative numbers, and a non-minimal encoding.
  std::string nonminimal = Tag(1, 0) + std::string("\x81\x80\x80\x00", 4);  // 1
  const CanonTable t = Both(ExampleOf(MapEntry(
      "n",
      Len(3, Varint(1, static_cast<uint64_t>(std::numeric_limits<int64_t>::min())) + nonminimal))));
  EXPECT_EQ((std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 1}), t.at("n").int64s);
}

// Issue 15, item 9: varints are held to protobuf's limits exactly, both
// ways: accepted by both (with the same content) or refused by both. The
// first case is what the example fuzzer found: a 6-byte length varint,
// which protobuf refuses, showed the payload as an empty record.
TEST(WireTest, VarintLimitsMatchProtobuf) {
  const std::string ones9(9, '\xff');
  const std::string zeros9(9, '\x80');
  auto value = [](const std::string& v) { return ExampleOf(MapEntry("n", Len(3, Tag(1, 0) + v))); };
  auto packed = [](const std::string& v) { return ExampleOf(MapEntry("n", Len(3, Len(1, v)))); };
  auto bytes = [](const char* s, size_t n) { return std::string(s, n); };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"6-byte length", bytes("\x0a\x80\x80\x80\x80\x80\x00", 7)},
      {"5-byte length 0", bytes("\x0a\x80\x80\x80\x80\x00", 6)},
      {"5-byte length 2^31", bytes("\x0a\x80\x80\x80\x80\x08", 6)},
      {"5-byte length 2^32 (0 modulo 2^32)", bytes("\x0a\x80\x80\x80\x80\x10", 6)},
      {"5-byte length 2^31 - 1", bytes("\x0a\xff\xff\xff\xff\x07", 6)},
      {"6-byte length of a map entry", ExampleOf(bytes("\x0a\x80\x80\x80\x80\x80\x00", 7))},
      {"6-byte length of a bytes value",
       ExampleOf(MapEntry("b", Len(1, bytes("\x0a\x81\x80\x80\x80\x80\x00", 7) + "x")))},
      {"5-byte tag", bytes("\x8a\x80\x80\x80\x00\x00", 6)},
      {"5-byte tag, field 1 modulo 2^32", bytes("\x8a\x80\x80\x80\x10\x00", 6)},
      {"6-byte tag", bytes("\x8a\x80\x80\x80\x80\x00\x00", 7)},
      {"10-byte value, last byte 0x01", value(ones9 + "\x01")},
      {"10-byte value, last byte 0x02", value(ones9 + "\x02")},
      {"10-byte value, last byte 0x7f", value(zeros9 + "\x7f")},
      {"11-byte value", value(ones9 + bytes("\x80\x00", 2))},
      {"packed 10-byte value, last byte 0x7f", packed(zeros9 + "\x7f")},
      {"packed 11-byte value", packed(ones9 + bytes("\x80\x00", 2))},
  };
  for (const auto& [name, payload] : cases) {
    auto ours = DecodeExample(payload);
    proto::Example ex;
    const bool theirs = ex.ParseFromString(payload);
    EXPECT_EQ(theirs, ours.ok()) << name << ": " << ours.status();
    if (theirs && ours.ok()) {
      EXPECT_EQ(FromProto(ex), FromTable(*ours)) << name;
    }
  }
}

// ---------------------------------------------------------------------------
// Rejections.

void ExpectRejected(const std::string& payload, absl::string_view why) {
  auto t = DecodeExample(payload);
  ASSERT_FALSE(t.ok()) << why;
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, t.status().code()) << why;
  EXPECT_THAT(t.status().message(), HasSubstr("not a tf.train.Example")) << why;
  EXPECT_THAT(t.status().message(), HasSubstr("at payload byte")) << why;
}

TEST(RejectTest, UnknownFieldInExample) {
  // ExampleListWithContext: repeated Example examples = 1; Example context = 2.
  proto::Example ex;
  (*ex.mutable_features()->mutable_feature())["a"].mutable_int64_list()->add_value(1);
  const std::string e = ex.SerializeAsString();
  ExpectRejected(Len(1, e) + Len(2, e), "ExampleListWithContext");
  ExpectRejected(ExampleOf(MapEntry("a", Len(3, PackedVarints({1})))) + Varint(5, 1),
                 "trailing unknown varint field");
  ExpectRejected(ExampleOf(MapEntry("a", "")) + Len(2, ""), "empty unknown LEN field");
}

TEST(RejectTest, UnknownFieldsDeeper) {
  ExpectRejected(ExampleOf(Len(2, "x")), "unknown field in Features");
  ExpectRejected(ExampleOf(Len(1, Len(1, "k") + Len(3, "x"))), "unknown field in map entry");
  ExpectRejected(ExampleOf(MapEntry("k", Len(4, ""))), "unknown field in Feature");
  ExpectRejected(ExampleOf(MapEntry("k", Len(3, Varint(2, 1)))), "unknown field in Int64List");
  ExpectRejected(ExampleOf(MapEntry("k", Len(1, Len(2, "x")))), "unknown field in BytesList");
  ExpectRejected(ExampleOf(MapEntry("k", Len(2, Fixed32(2, 1)))), "unknown field in FloatList");
}

TEST(RejectTest, WrongWireType) {
  ExpectRejected(Varint(1, 1), "Example.features as varint");
  ExpectRejected(Fixed32(1, 1), "Example.features as fixed32");
  ExpectRejected(ExampleOf(Varint(1, 1)), "Features.feature as varint");
  ExpectRejected(ExampleOf(Len(1, Varint(1, 1))), "map key as varint");
  ExpectRejected(ExampleOf(MapEntry("k", Varint(3, 1))), "Feature.int64_list as varint");
  ExpectRejected(ExampleOf(MapEntry("k", Len(3, Fixed32(1, 1)))), "int64 value as fixed32");
  ExpectRejected(ExampleOf(MapEntry("k", Len(2, Varint(1, 1)))), "float value as varint");
  ExpectRejected(ExampleOf(MapEntry("k", Len(1, Varint(1, 1)))), "bytes value as varint");
  std::string i64 = Tag(1, 1) + std::string(8, '\0');
  ExpectRejected(ExampleOf(MapEntry("k", Len(2, i64))), "float value as fixed64");
  ExpectRejected(Tag(1, 3) + Tag(1, 4), "group");
  ExpectRejected(std::string("\x00", 1), "field number 0");
}

TEST(RejectTest, Truncation) {
  ExpectRejected("\x0a", "missing length");
  ExpectRejected("\x0a\x80", "truncated length varint");
  ExpectRejected("\x80", "truncated tag");
  ExpectRejected(
      "\x0a\x05"
      "ab",
      "length past the end");
  ExpectRejected(ExampleOf(MapEntry("k", Len(3, "\x01\x80"))), "truncated packed varint");
  ExpectRejected(ExampleOf(MapEntry("k", Len(2, Len(1, "abc")))),
                 "packed floats not a multiple of 4");
  ExpectRejected(ExampleOf(MapEntry("k", Len(2, Tag(1, 5) + "ab"))), "truncated fixed32");
  // A length field that points far past the end (no huge allocation).
  std::string huge = Tag(1, 2);
  PutVarint(&huge, uint64_t{1} << 62);
  ExpectRejected(huge + "abc", "huge length");
  std::string eleven = Tag(1, 0) + std::string(10, '\xff') + "\x01";
  ExpectRejected(ExampleOf(MapEntry("k", Len(3, eleven))), "varint longer than 10 bytes");
  // Cutting a valid payload anywhere but at a field boundary fails.
  const std::string full = ExampleOf(MapEntry("key", Len(3, PackedVarints({1, 2, 300}))));
  for (size_t n = 1; n < full.size(); ++n) {
    EXPECT_FALSE(DecodeExample(full.substr(0, n)).ok()) << "cut at " << n;
  }
}

TEST(RejectTest, InvalidUtf8Key) {
  for (absl::string_view key : {absl::string_view("\xff"), absl::string_view("a\xc0\xaf"),
                                absl::string_view("\xed\xa0\x80"), absl::string_view("\xe6\x97")}) {
    const std::string payload = ExampleOf(MapEntry(key, Len(3, PackedVarints({1}))));
    ExpectRejected(payload, "invalid UTF-8 key");
  }
  // Valid multi-byte keys are fine.
  EXPECT_EQ(1u, Both(ExampleOf(MapEntry("\xe6\x97\xa5", ""))).size());
}

TEST(RejectTest, RawStrings) {
  ExpectRejected("hello world", "text");
  ExpectRejected("12345", "digits");
  ExpectRejected("{\"a\": 1}", "json");
  ExpectRejected(std::string("\xff\xd8\xff\xe0", 4), "jpeg");
}

// Random byte damage: the decoder never crashes, and whatever it accepts,
// protobuf accepts with the same content (the decoder is never laxer).
TEST(RejectTest, MutatedPayloadsNeverLaxerThanProtobuf) {
  Generator gen(5);
  std::mt19937 rng(6);
  int accepted = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string payload = gen.Example().SerializeAsString();
    if (payload.empty()) continue;
    const int hits = 1 + static_cast<int>(rng() % 3);
    for (int h = 0; h < hits; ++h) {
      const size_t at = rng() % payload.size();
      switch (rng() % 3) {
        case 0:
          payload[at] = static_cast<char>(rng());
          break;
        case 1:
          payload.erase(at, 1);
          break;
        default:
          payload.resize(at);
          break;
      }
      if (payload.empty()) break;
    }
    auto t = DecodeExample(payload);
    if (!t.ok()) {
      ++rejected;
      continue;
    }
    ++accepted;
    proto::Example ex;
    ASSERT_TRUE(ex.ParseFromString(payload)) << "decoder accepted what protobuf rejects";
    ASSERT_EQ(FromProto(ex), FromTable(*t)) << "iteration " << iter;
  }
  EXPECT_GT(accepted, 10);
  EXPECT_GT(rejected, 100);
}

}  // namespace
}  // namespace tfrecordfs::example
