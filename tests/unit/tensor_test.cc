// The hand-written TensorProto decoder and encoder against protobuf's parser
// (tensor.proto, our text of TensorFlow's), bytes TensorFlow writes, *_val
// forms, and hostile inputs.
#include "tfrecordfs/tensor/tensor.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor.pb.h"

namespace tfrecordfs::tensor {
namespace {

using ::testing::HasSubstr;

std::string Hex(absl::string_view s) {
  std::string out;
  for (unsigned char c : s) absl::StrAppend(&out, absl::Hex(c, absl::kZeroPad2), " ");
  return out;
}

std::string Bytes(std::initializer_list<int> v) {
  std::string s;
  for (int b : v) s.push_back(static_cast<char>(b));
  return s;
}

// Serializes a TensorProto the way protobuf does (fields in number order).
std::string Ser(const proto::TensorProto& p) {
  std::string s;
  EXPECT_TRUE(p.SerializeToString(&s));
  return s;
}

proto::TensorProto Proto(DataType dtype, std::vector<int64_t> shape) {
  proto::TensorProto p;
  p.set_dtype(static_cast<proto::DataType>(dtype));
  auto* sh = p.mutable_tensor_shape();
  for (int64_t d : shape) sh->add_dim()->set_size(d);
  return p;
}

const DataType kAll[] = {DataType::kFloat, DataType::kDouble, DataType::kInt32,
                         DataType::kUint8, DataType::kInt16,  DataType::kInt8,
                         DataType::kInt64, DataType::kBool,   DataType::kUint16,
                         DataType::kHalf,  DataType::kUint32, DataType::kUint64};

// ---------------------------------------------------------------------------
// What tf.io.serialize_tensor writes.

TEST(EncodeTensor, ScalarFloatAsTensorFlowWritesIt) {
  // tf.io.serialize_tensor(tf.constant(1.0))
  const float one = 1.0f;
  auto b =
      EncodeTensor(DataType::kFloat, {}, absl::string_view(reinterpret_cast<const char*>(&one), 4));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(Hex(*b), Hex(Bytes({0x08, 0x01, 0x12, 0x00, 0x22, 0x04, 0x00, 0x00, 0x80, 0x3f})));
}

TEST(EncodeTensor, MatrixAndZeroDims) {
  // tf.io.serialize_tensor(tf.zeros([2, 3], tf.uint8))
  auto b = EncodeTensor(DataType::kUint8, {2, 3}, std::string(6, '\0'));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Hex(*b), Hex(Bytes({0x08, 0x04, 0x12, 0x08, 0x12, 0x02, 0x08, 0x02, 0x12, 0x02,
                                0x08, 0x03, 0x22, 0x06, 0,    0,    0,    0,    0,    0})));
  // tf.zeros([2, 0]): a zero dim is an empty Dim; no tensor_content.
  b = EncodeTensor(DataType::kFloat, {2, 0}, "");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(Hex(*b), Hex(Bytes({0x08, 0x01, 0x12, 0x06, 0x12, 0x02, 0x08, 0x02, 0x12, 0x00})));
}

TEST(EncodeTensor, RejectsWrongSizesAndShapes) {
  EXPECT_FALSE(EncodeTensor(DataType::kFloat, {2}, "abc").ok());
  EXPECT_FALSE(EncodeTensor(DataType::kFloat, {-1}, "").ok());
  EXPECT_FALSE(EncodeTensor(DataType::kFloat, std::vector<int64_t>(255, 1), "abcd").ok());
  EXPECT_FALSE(EncodeTensor(DataType::kInt64, {int64_t{1} << 61, 8}, "").ok());
}

// Every dtype and a few shapes: protobuf parses what we write, we decode it
// back, re-encoding gives the same bytes, and EncodedTensorSize agrees.
TEST(EncodeTensor, EveryDtypeRoundTrips) {
  std::mt19937 rng(7);
  const std::vector<std::vector<int64_t>> shapes = {{},  {1},       {5},          {2, 3},
                                                    {0}, {3, 0, 2}, {2, 1, 3, 1}, {200}};
  for (DataType dt : kAll) {
    for (const auto& shape : shapes) {
      SCOPED_TRACE(absl::StrCat(InfoOf(dt).name, " rank ", shape.size()));
      const int64_t n = *NumBytes(dt, shape);
      std::string data(n, '\0');
      for (char& c : data) c = static_cast<char>(rng());
      if (dt == DataType::kBool) {
        for (char& c : data) c &= 1;
      }
      auto b = EncodeTensor(dt, shape, data);
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_EQ(*EncodedTensorSize(dt, shape), b->size());
      proto::TensorProto p;
      ASSERT_TRUE(p.ParseFromString(*b));
      EXPECT_EQ(p.dtype(), static_cast<int>(dt));
      ASSERT_EQ(p.tensor_shape().dim_size(), static_cast<int>(shape.size()));
      for (size_t i = 0; i < shape.size(); ++i) EXPECT_EQ(p.tensor_shape().dim(i).size(), shape[i]);
      EXPECT_EQ(p.tensor_content(), data);
      EXPECT_EQ(Ser(p), *b) << "not the bytes protobuf (and so TensorFlow) writes";

      auto t = DecodeTensor(*b);
      ASSERT_TRUE(t.ok()) << t.status();
      EXPECT_EQ(t->dtype, dt);
      EXPECT_EQ(t->shape, shape);
      EXPECT_EQ(t->data(*b), data);
      EXPECT_EQ(t->data_in_input, n > 0);
      EXPECT_EQ(*EncodeTensor(t->dtype, t->shape, t->data(*b)), *b);
      EXPECT_TRUE(IsTensor(*b));
      auto type = DecodeTensorType(*b);
      ASSERT_TRUE(type.ok()) << type.status();
      EXPECT_EQ(*type, (TensorType{dt, shape}));
    }
  }
}

TEST(DTypes, TableMatchesTensorFlowAndNumpy) {
  EXPECT_STREQ(InfoOf(DataType::kUint8).descr, "|u1");
  EXPECT_STREQ(InfoOf(DataType::kBool).descr, "|b1");
  EXPECT_STREQ(InfoOf(DataType::kHalf).descr, "<f2");
  EXPECT_EQ(InfoOf(DataType::kUint64).itemsize, 8u);
  EXPECT_EQ(FindDType(7), nullptr);   // DT_STRING
  EXPECT_EQ(FindDType(14), nullptr);  // DT_BFLOAT16: no numpy equivalent
  EXPECT_EQ(FindDType(0), nullptr);
  for (DataType dt : kAll) {
    EXPECT_EQ(proto::DataType_Name(static_cast<proto::DataType>(dt)),
              absl::AsciiStrToUpper(absl::StrCat("DT_", InfoOf(dt).name)));
  }
}

TEST(NumElements, OverflowSafe) {
  EXPECT_EQ(*NumElements({}), 1);
  EXPECT_EQ(*NumElements({0, int64_t{1} << 62, int64_t{1} << 62}), 0);
  EXPECT_FALSE(NumElements({int64_t{1} << 32, int64_t{1} << 32}).ok());
  EXPECT_EQ(*NumElements({int64_t{1} << 31, int64_t{1} << 31}), int64_t{1} << 62);
  EXPECT_FALSE(NumBytes(DataType::kDouble, {int64_t{1} << 61}).ok());
}

// ---------------------------------------------------------------------------
// *_val forms.

TEST(DecodeTensor, ValFieldsEveryDtype) {
  struct Case {
    DataType dt;
    std::function<void(proto::TensorProto*)> fill;  // three values
    std::string want;                               // their LE bytes
  };
  auto le = [](auto... v) {
    std::string s;
    (s.append(reinterpret_cast<const char*>(&v), sizeof(v)), ...);
    return s;
  };
  const std::vector<Case> cases = {
      {DataType::kFloat,
       [](auto* p) {
         p->add_float_val(1.5f);
         p->add_float_val(-2);
         p->add_float_val(0);
       },
       le(1.5f, -2.0f, 0.0f)},
      {DataType::kDouble,
       [](auto* p) {
         p->add_double_val(1e300);
         p->add_double_val(-1);
         p->add_double_val(0.5);
       },
       le(1e300, -1.0, 0.5)},
      {DataType::kInt32,
       [](auto* p) {
         p->add_int_val(-1);
         p->add_int_val(INT32_MAX);
         p->add_int_val(INT32_MIN);
       },
       le(int32_t{-1}, int32_t{INT32_MAX}, int32_t{INT32_MIN})},
      {DataType::kUint8,
       [](auto* p) {
         p->add_int_val(0);
         p->add_int_val(255);
         p->add_int_val(7);
       },
       le(uint8_t{0}, uint8_t{255}, uint8_t{7})},
      {DataType::kInt16,
       [](auto* p) {
         p->add_int_val(-32768);
         p->add_int_val(32767);
         p->add_int_val(1);
       },
       le(int16_t{-32768}, int16_t{32767}, int16_t{1})},
      {DataType::kInt8,
       [](auto* p) {
         p->add_int_val(-128);
         p->add_int_val(127);
         p->add_int_val(-1);
       },
       le(int8_t{-128}, int8_t{127}, int8_t{-1})},
      {DataType::kUint16,
       [](auto* p) {
         p->add_int_val(65535);
         p->add_int_val(0);
         p->add_int_val(300);
       },
       le(uint16_t{65535}, uint16_t{0}, uint16_t{300})},
      {DataType::kInt64,
       [](auto* p) {
         p->add_int64_val(INT64_MIN);
         p->add_int64_val(-1);
         p->add_int64_val(INT64_MAX);
       },
       le(int64_t{INT64_MIN}, int64_t{-1}, int64_t{INT64_MAX})},
      {DataType::kBool,
       [](auto* p) {
         p->add_bool_val(true);
         p->add_bool_val(false);
         p->add_bool_val(true);
       },
       le(uint8_t{1}, uint8_t{0}, uint8_t{1})},
      {DataType::kHalf,
       [](auto* p) {
         p->add_half_val(0x3c00);
         p->add_half_val(0xffff);
         p->add_half_val(0);
       },
       le(uint16_t{0x3c00}, uint16_t{0xffff}, uint16_t{0})},
      {DataType::kUint32,
       [](auto* p) {
         p->add_uint32_val(UINT32_MAX);
         p->add_uint32_val(1);
         p->add_uint32_val(0);
       },
       le(uint32_t{UINT32_MAX}, uint32_t{1}, uint32_t{0})},
      {DataType::kUint64,
       [](auto* p) {
         p->add_uint64_val(UINT64_MAX);
         p->add_uint64_val(1);
         p->add_uint64_val(0);
       },
       le(uint64_t{UINT64_MAX}, uint64_t{1}, uint64_t{0})},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(InfoOf(c.dt).name);
    proto::TensorProto p = Proto(c.dt, {3});
    c.fill(&p);
    const std::string b = Ser(p);
    auto t = DecodeTensor(b);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_FALSE(t->data_in_input);
    EXPECT_EQ(Hex(t->data(b)), Hex(c.want));
    // The same values as a [1,3] with a single broadcast value, and wrong counts.
    proto::TensorProto one = Proto(c.dt, {2, 2});
    c.fill(&one);
    EXPECT_THAT(DecodeTensor(Ser(one)).status().message(), HasSubstr("3 values for 4 elements"));
    proto::TensorProto empty = Proto(c.dt, {2});
    EXPECT_FALSE(DecodeTensor(Ser(empty)).ok());
  }
}

TEST(DecodeTensor, SingleValueBroadcasts) {
  proto::TensorProto p = Proto(DataType::kInt16, {2, 3});
  p.add_int_val(-2);
  const std::string b = Ser(p);
  auto t = DecodeTensor(b);
  ASSERT_TRUE(t.ok()) << t.status();
  std::string want;
  for (int i = 0; i < 6; ++i) want += Bytes({0xfe, 0xff});
  EXPECT_EQ(t->data(b), want);
  // Too large to materialise: refused, not allocated.
  proto::TensorProto huge = Proto(DataType::kDouble, {int64_t{1} << 40});
  huge.add_double_val(1);
  EXPECT_THAT(DecodeTensor(Ser(huge)).status().message(), HasSubstr("broadcast"));
  EXPECT_FALSE(IsTensor(Ser(huge)));
  auto type = DecodeTensorType(b);
  ASSERT_TRUE(type.ok()) << type.status();
  EXPECT_EQ(*type, (TensorType{DataType::kInt16, {2, 3}}));
  EXPECT_FALSE(DecodeTensorType("\xff\xd8\xff\xe0").ok());
}

TEST(DecodeTensor, UnpackedAndSplitPackedRuns) {
  // dtype int32, shape [3], int_val unpacked 5, then a packed run {6, 7}.
  const std::string b =
      Bytes({0x08, 0x03, 0x12, 0x04, 0x12, 0x02, 0x08, 0x03, 0x38, 0x05, 0x3a, 0x02, 0x06, 0x07});
  proto::TensorProto p;
  ASSERT_TRUE(p.ParseFromString(b));
  ASSERT_EQ(p.int_val_size(), 3);
  auto t = DecodeTensor(b);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(Hex(t->data(b)), Hex(Bytes({5, 0, 0, 0, 6, 0, 0, 0, 7, 0, 0, 0})));
  // float_val: unpacked fixed32, then a packed run.
  const std::string f = Bytes({0x08, 0x01, 0x12, 0x04, 0x12, 0x02, 0x08, 0x02, 0x2d, 0, 0, 0x80,
                               0x3f, 0x2a, 0x04, 0, 0, 0, 0x40});
  ASSERT_TRUE(p.ParseFromString(f));
  ASSERT_EQ(p.float_val_size(), 2);
  t = DecodeTensor(f);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(Hex(t->data(f)), Hex(Bytes({0, 0, 0x80, 0x3f, 0, 0, 0, 0x40})));
}

TEST(DecodeTensor, ValuesOutOfTheDtypesRange) {
  for (auto [dt, v] : std::vector<std::pair<DataType, int64_t>>{{DataType::kUint8, 256},
                                                                {DataType::kUint8, -1},
                                                                {DataType::kInt8, 128},
                                                                {DataType::kInt16, -32769},
                                                                {DataType::kUint16, 65536},
                                                                {DataType::kHalf, 65536}}) {
    proto::TensorProto p = Proto(dt, {});
    p.add_int_val(static_cast<int32_t>(v));  // routed below for half
    if (dt == DataType::kHalf) {
      p.clear_int_val();
      p.add_half_val(static_cast<int32_t>(v));
    }
    EXPECT_THAT(DecodeTensor(Ser(p)).status().message(), HasSubstr("range")) << v;
  }
  // bool_val 2 (protobuf reads true) and int_val beyond int32 (protobuf truncates).
  EXPECT_FALSE(DecodeTensor(Bytes({0x08, 0x0a, 0x12, 0x00, 0x58, 0x02})).ok());
  EXPECT_FALSE(
      DecodeTensor(Bytes({0x08, 0x03, 0x12, 0x00, 0x38, 0xff, 0xff, 0xff, 0xff, 0x0f})).ok());
  EXPECT_TRUE(DecodeTensor(Bytes({0x08, 0x0a, 0x12, 0x00, 0x58, 0x01})).ok());
}

// ---------------------------------------------------------------------------
// Not tensors.

std::string Valid() { return *EncodeTensor(DataType::kInt16, {2, 2}, "abcdefgh"); }

TEST(DecodeTensor, RejectsFieldsSerializeTensorNeverWrites) {
  auto reject = [](const proto::TensorProto& p, absl::string_view why) {
    auto t = DecodeTensor(Ser(p));
    EXPECT_FALSE(t.ok()) << why;
    EXPECT_TRUE(absl::IsInvalidArgument(t.status()));
    EXPECT_THAT(t.status().message(), HasSubstr(why));
    EXPECT_THAT(t.status().message(), HasSubstr("not a tensor"));
  };
  proto::TensorProto p = Proto(DataType::kFloat, {1});
  p.set_tensor_content(std::string(4, 'x'));
  ASSERT_TRUE(DecodeTensor(Ser(p)).ok());
  auto q = p;
  q.set_version_number(1);
  reject(q, "version_number");
  q = p;
  q.mutable_tensor_shape()->mutable_dim(0)->set_name("batch");
  reject(q, "in a Dim");
  q = p;
  q.mutable_tensor_shape()->set_unknown_rank(true);
  reject(q, "TensorShapeProto");
  q = p;
  q.add_float_val(1);
  reject(q, "both tensor_content and *_val");
  q = Proto(DataType::kFloat, {1});
  q.add_float_val(1);
  q.add_string_val("s");
  reject(q, "field 8 does not belong to dtype float");
  q = p;
  q.set_dtype(proto::DT_STRING);
  reject(q, "dtype 7");
  q = p;
  q.set_dtype(proto::DT_INVALID);
  reject(q, "no dtype");  // proto3 omits a zero enum
  q = p;
  q.clear_tensor_shape();
  reject(q, "no tensor_shape");
  q = p;
  q.mutable_tensor_shape()->mutable_dim(0)->set_size(-1);
  reject(q, "negative");
  q = p;
  q.set_tensor_content(std::string(5, 'x'));
  reject(q, "tensor_content holds 5 bytes");
  q = Proto(DataType::kFloat, {int64_t{1} << 62, 4});
  reject(q, "overflows");
  q = Proto(DataType::kFloat, std::vector<int64_t>(255, 1));
  q.add_float_val(1);
  reject(q, "254");
  const std::string with_unknown = Ser(p) + Bytes({0xa0, 0x01, 0x00});  // field 20
  ASSERT_TRUE(q.ParseFromString(with_unknown));
  EXPECT_THAT(DecodeTensor(with_unknown).status().message(), HasSubstr("unknown field 20"));
}

TEST(DecodeTensor, RejectsDuplicatedScalarFields) {
  const std::string v = Valid();
  EXPECT_THAT(DecodeTensor(v + Bytes({0x08, 0x05})).status().message(),
              HasSubstr("dtype given twice"));
  EXPECT_THAT(DecodeTensor(v + Bytes({0x12, 0x00})).status().message(),
              HasSubstr("tensor_shape given twice"));
  EXPECT_THAT(DecodeTensor(v + Bytes({0x22, 0x00})).status().message(),
              HasSubstr("tensor_content given twice"));
  // Dim with two sizes.
  EXPECT_THAT(DecodeTensor(Bytes({0x08, 0x04, 0x12, 0x06, 0x12, 0x04, 0x08, 0x01, 0x08, 0x01, 0x22,
                                  0x01, 0x00}))
                  .status()
                  .message(),
              HasSubstr("two sizes"));
}

TEST(DecodeTensor, EveryTruncationAndWireLimit) {
  const std::string v = Valid();
  for (size_t n = 0; n < v.size(); ++n) {
    EXPECT_FALSE(DecodeTensor(v.substr(0, n)).ok()) << n;
  }
  // Field order does not matter to protobuf, nor to us.
  const std::string reordered = v.substr(12) + v.substr(0, 12);
  proto::TensorProto p;
  ASSERT_TRUE(p.ParseFromString(reordered));
  EXPECT_TRUE(DecodeTensor(reordered).ok());
  // Over-long but valid varint for dtype (protobuf accepts it): so do we.
  EXPECT_TRUE(DecodeTensor(Bytes({0x08, 0x84, 0x00, 0x12, 0x00, 0x22, 0x01, 0x07})).ok());
  // An 11-byte varint; a 6-byte tag: protobuf refuses both, so do we.
  EXPECT_FALSE(DecodeTensor(Bytes({0x08, 0x84, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                   0x00, 0x12, 0x00, 0x22, 0x01, 0x07}))
                   .ok());
  EXPECT_FALSE(
      DecodeTensor(Bytes({0x88, 0x80, 0x80, 0x80, 0x80, 0x00, 0x04, 0x12, 0x00, 0x22, 0x01, 0x07}))
          .ok());
  // A 10th varint byte above 1 (bits past the 64th dropped) and a 5-byte tag
  // whose bits overflow 32 (kept modulo 2^32): the one wire cursor
  // (base/wire.h) holds protobuf's exact limits, so what protobuf reads, we
  // read, as protobuf reads it.
  for (const std::string& input :
       {Bytes({0x08, 0x84, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02, 0x12, 0x00, 0x22,
               0x01, 0x07}),
        Bytes({0x88, 0x80, 0x80, 0x80, 0x10, 0x04, 0x12, 0x00, 0x22, 0x01, 0x07})}) {
    proto::TensorProto theirs;
    ASSERT_TRUE(theirs.ParseFromString(input));
    auto ours = DecodeTensor(input);
    ASSERT_TRUE(ours.ok()) << ours.status();
    EXPECT_EQ(static_cast<int>(ours->dtype), static_cast<int>(theirs.dtype()));
  }
  // A 6-byte length, and a length of 2^31.
  EXPECT_FALSE(
      DecodeTensor(Bytes({0x08, 0x04, 0x12, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0x22, 0x01, 0x07}))
          .ok());
  EXPECT_FALSE(
      DecodeTensor(Bytes({0x08, 0x04, 0x12, 0x00, 0x22, 0x80, 0x80, 0x80, 0x80, 0x08})).ok());
  // Field 0; groups; wire types 6 and 7.
  for (int tag : {0x00, 0x02, 0x1b, 0x1c, 0x0e, 0x0f}) {
    EXPECT_FALSE(DecodeTensor(Bytes({tag, 0x00}) + v).ok()) << tag;
  }
  // Wrong wire types of known fields.
  EXPECT_FALSE(DecodeTensor(Bytes({0x0a, 0x00}) + v.substr(2)).ok());
  EXPECT_FALSE(DecodeTensor(Bytes({0x08, 0x01, 0x12, 0x00, 0x20, 0x01})).ok());
  EXPECT_FALSE(DecodeTensor("").ok());
  EXPECT_FALSE(DecodeTensor("hello, world").ok());
  EXPECT_FALSE(DecodeTensor(Bytes({0xff, 0xd8, 0xff, 0xe0})).ok());  // a JPEG
}

// Random mutations: whatever we accept, protobuf parses to the same tensor.
TEST(DecodeTensor, MutationsAgreeWithProtobuf) {
  std::mt19937 rng(11);
  const std::string v = Valid();
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string m = v;
    const int edits = 1 + rng() % 3;
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % (m.size() + 1);
      switch (rng() % 3) {
        case 0:
          if (at < m.size()) m[at] = static_cast<char>(rng());
          break;
        case 1:
          m.insert(at, 1, static_cast<char>(rng()));
          break;
        case 2:
          if (at < m.size()) m.erase(at, 1);
          break;
      }
    }
    auto t = DecodeTensor(m);
    if (!t.ok()) {
      ASSERT_TRUE(absl::IsInvalidArgument(t.status()));
      continue;
    }
    ++accepted;
    proto::TensorProto p;
    ASSERT_TRUE(p.ParseFromString(m)) << Hex(m);
    EXPECT_EQ(p.dtype(), static_cast<int>(t->dtype));
    ASSERT_EQ(p.tensor_shape().dim_size(), static_cast<int>(t->shape.size()));
    if (t->data_in_input) {
      EXPECT_EQ(p.tensor_content(), t->data(m));
    }
  }
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace tfrecordfs::tensor
