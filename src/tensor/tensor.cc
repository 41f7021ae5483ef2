#include "tfrecordfs/tensor/tensor.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/wire.h"

namespace tfrecordfs::tensor {
namespace {

using wire::Cursor;
using wire::Field;

constexpr DTypeInfo kDTypes[] = {
    {DataType::kFloat, "float", "<f4", 4},   {DataType::kDouble, "double", "<f8", 8},
    {DataType::kInt32, "int32", "<i4", 4},   {DataType::kUint8, "uint8", "|u1", 1},
    {DataType::kInt16, "int16", "<i2", 2},   {DataType::kInt8, "int8", "|i1", 1},
    {DataType::kInt64, "int64", "<i8", 8},   {DataType::kBool, "bool", "|b1", 1},
    {DataType::kUint16, "uint16", "<u2", 2}, {DataType::kHalf, "half", "<f2", 2},
    {DataType::kUint32, "uint32", "<u4", 4}, {DataType::kUint64, "uint64", "<u8", 8},
};

// TensorProto field numbers (tensorflow/core/framework/tensor.proto).
enum : uint32_t {
  kDtype = 1,
  kTensorShape = 2,
  kVersionNumber = 3,
  kTensorContent = 4,
  kFloatVal = 5,
  kDoubleVal = 6,
  kIntVal = 7,
  kInt64Val = 10,
  kBoolVal = 11,
  kHalfVal = 13,
  kUint32Val = 16,
  kUint64Val = 17,
};
// TensorShapeProto: dim = 2, unknown_rank = 3; Dim: size = 1, name = 2.
constexpr uint32_t kShapeDim = 2;
constexpr uint32_t kDimSize = 1;

// How the dtype's values travel in its *_val field.
enum class ValCoding { kVarint, kFixed32, kFixed64 };

struct ValField {
  uint32_t number;
  ValCoding coding;
  int64_t min;  // range of a varint value, as int64 (unused for fixed)
  uint64_t max;
};

ValField ValFieldOf(DataType dtype) {
  constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
  constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
  switch (dtype) {
    case DataType::kFloat:
      return {kFloatVal, ValCoding::kFixed32, 0, 0};
    case DataType::kDouble:
      return {kDoubleVal, ValCoding::kFixed64, 0, 0};
    case DataType::kInt32:
      return {kIntVal, ValCoding::kVarint, std::numeric_limits<int32_t>::min(),
              static_cast<uint64_t>(std::numeric_limits<int32_t>::max())};
    case DataType::kUint8:
      return {kIntVal, ValCoding::kVarint, 0, 0xff};
    case DataType::kInt16:
      return {kIntVal, ValCoding::kVarint, -32768, 32767};
    case DataType::kInt8:
      return {kIntVal, ValCoding::kVarint, -128, 127};
    case DataType::kUint16:
      return {kIntVal, ValCoding::kVarint, 0, 0xffff};
    case DataType::kInt64:
      return {kInt64Val, ValCoding::kVarint, kI64Min,
              static_cast<uint64_t>(std::numeric_limits<int64_t>::max())};
    case DataType::kBool:
      return {kBoolVal, ValCoding::kVarint, 0, 1};
    case DataType::kHalf:
      return {kHalfVal, ValCoding::kVarint, 0, 0xffff};
    case DataType::kUint32:
      return {kUint32Val, ValCoding::kVarint, 0, 0xffffffffu};
    case DataType::kUint64:
      return {kUint64Val, ValCoding::kVarint, 0, kU64Max};
  }
  return {0, ValCoding::kVarint, 0, 0};
}

bool IsValField(uint32_t n) { return n >= kFloatVal && n <= 18 && n != kTensorContent; }

// Appends one value's little-endian bytes; false if out of the dtype's range.
bool AppendValue(const ValField& vf, uint32_t itemsize, uint64_t raw, std::string* out) {
  if (vf.coding == ValCoding::kVarint) {
    if (vf.number == kUint64Val) {
      // any 64-bit value
    } else if (vf.min < 0) {
      const auto v = static_cast<int64_t>(raw);
      if (v < vf.min || (v >= 0 && static_cast<uint64_t>(v) > vf.max)) return false;
    } else if (raw > vf.max) {
      return false;
    }
  }
  char buf[8];
  EncodeFixed64(buf, raw);  // two's complement truncation = the LE low bytes
  out->append(buf, itemsize);
  return true;
}

// Decodes the dtype's *_val occurrences into `out`; counts values.
absl::Status DecodeVals(const Cursor& top, const std::vector<Field>& vals, DataType dtype,
                        std::string* out, uint64_t* count) {
  const ValField vf = ValFieldOf(dtype);
  const uint32_t itemsize = InfoOf(dtype).itemsize;
  const wire::WireType unpacked = vf.coding == ValCoding::kVarint    ? wire::kVarint
                                  : vf.coding == ValCoding::kFixed32 ? wire::kI32
                                                                     : wire::kI64;
  const size_t fixed = vf.coding == ValCoding::kFixed32 ? 4 : 8;
  *count = 0;
  for (const Field& f : vals) {
    if (f.number != vf.number) {
      return top.ErrorAt(
          absl::StrCat("field ", f.number, " does not belong to dtype ", InfoOf(dtype).name),
          f.offset);
    }
    if (f.type == unpacked) {
      if (!AppendValue(vf, itemsize, f.scalar, out)) {
        return top.ErrorAt("value out of the dtype's range", f.offset);
      }
      ++*count;
    } else if (f.type == wire::kLen) {
      if (vf.coding == ValCoding::kVarint) {
        Cursor run(f.bytes, f.offset, "tensor", "byte");
        while (!run.done()) {
          uint64_t v = 0;
          const size_t at = run.offset();
          if (auto s = run.Varint(&v); !s.ok()) return s;
          if (!AppendValue(vf, itemsize, v, out)) {
            return top.ErrorAt("value out of the dtype's range", at);
          }
          ++*count;
        }
      } else {
        if (f.bytes.size() % fixed != 0) {
          return top.ErrorAt("packed fixed-width run of a partial value", f.offset);
        }
        out->append(f.bytes.data(), f.bytes.size());  // already little-endian
        *count += f.bytes.size() / fixed;
      }
    } else {
      return top.ErrorAt(absl::StrCat("wrong wire type for field ", f.number), f.offset);
    }
  }
  return absl::OkStatus();
}

absl::Status DecodeShape(absl::string_view data, size_t base, std::vector<int64_t>* shape) {
  Cursor c(data, base, "tensor", "byte");
  Field f;
  while (!c.done()) {
    if (auto s = c.Next(&f); !s.ok()) return s;
    if (f.number != kShapeDim || f.type != wire::kLen) {
      return c.ErrorAt(absl::StrCat("field ", f.number, " in TensorShapeProto"), f.offset);
    }
    if (shape->size() == kMaxRank) return c.ErrorAt("more than 254 dims", f.offset);
    Cursor d(f.bytes, f.offset, "tensor", "byte");
    int64_t size = 0;
    bool seen = false;
    Field g;
    while (!d.done()) {
      if (auto s = d.Next(&g); !s.ok()) return s;
      if (g.number != kDimSize || g.type != wire::kVarint) {
        return d.ErrorAt(absl::StrCat("field ", g.number, " in a Dim"), g.offset);
      }
      if (seen) return d.ErrorAt("a Dim with two sizes", g.offset);
      seen = true;
      size = static_cast<int64_t>(g.scalar);
      if (size < 0) return d.ErrorAt("negative dim size", g.offset);
    }
    shape->push_back(size);
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Decode(absl::string_view payload, bool materialize) {
  Cursor c(payload, 0, "tensor", "byte");
  Tensor t;
  bool have_dtype = false, have_shape = false, have_content = false;
  std::vector<Field> vals;
  Field f;
  while (!c.done()) {
    if (auto s = c.Next(&f); !s.ok()) return s;
    switch (f.number) {
      case kDtype: {
        if (f.type != wire::kVarint) return c.ErrorAt("dtype is not a varint", f.offset);
        if (have_dtype) return c.ErrorAt("dtype given twice", f.offset);
        have_dtype = true;
        const DTypeInfo* info = FindDType(static_cast<int64_t>(f.scalar));
        if (info == nullptr) {
          return c.ErrorAt(absl::StrCat("dtype ", static_cast<int64_t>(f.scalar),
                                        " has no fixed-size numpy equivalent"),
                           f.offset);
        }
        t.dtype = info->dtype;
        break;
      }
      case kTensorShape:
        if (f.type != wire::kLen) return c.ErrorAt("tensor_shape is not a message", f.offset);
        if (have_shape) return c.ErrorAt("tensor_shape given twice", f.offset);
        have_shape = true;
        if (auto s = DecodeShape(f.bytes, f.offset, &t.shape); !s.ok()) return s;
        break;
      case kTensorContent:
        if (f.type != wire::kLen) return c.ErrorAt("tensor_content is not bytes", f.offset);
        if (have_content) return c.ErrorAt("tensor_content given twice", f.offset);
        have_content = true;
        t.data_in_input = true;
        t.data_offset = f.offset;
        t.data_size = f.bytes.size();
        break;
      case kVersionNumber:
        return c.ErrorAt("version_number (never written by tf.io.serialize_tensor)", f.offset);
      default:
        if (!IsValField(f.number)) {
          return c.ErrorAt(absl::StrCat("unknown field ", f.number), f.offset);
        }
        vals.push_back(f);
    }
  }
  if (!have_dtype) return c.Error("no dtype");
  if (!have_shape) return c.Error("no tensor_shape");
  auto bytes = NumBytes(t.dtype, t.shape);
  if (!bytes.ok()) return c.Error(bytes.status().message());
  const uint64_t want = static_cast<uint64_t>(*bytes);
  if (have_content) {
    if (!vals.empty()) return c.ErrorAt("both tensor_content and *_val", vals[0].offset);
    if (t.data_size != want) {
      return c.ErrorAt(
          absl::StrCat("tensor_content holds ", t.data_size, " bytes, the shape needs ", want),
          t.data_offset);
    }
    return t;
  }
  t.data_offset = t.data_size = 0;
  std::string values;
  uint64_t count = 0;
  if (auto s = DecodeVals(c, vals, t.dtype, &values, &count); !s.ok()) return s;
  const uint32_t itemsize = t.info().itemsize;
  const uint64_t n = want / itemsize;
  if (count == n) {
    t.materialized = std::move(values);
  } else if (count == 1 && n > 1) {
    if (want > kMaxMaterializedBytes) {
      return c.Error(
          absl::StrCat("a single value broadcast to ", want, " bytes (more than we materialise)"));
    }
    if (materialize) {
      t.materialized.reserve(want);
      for (uint64_t i = 0; i < n; ++i) t.materialized += values;
    } else {
      t.broadcast = true;
      t.materialized = std::move(values);
    }
  } else {
    return c.Error(absl::StrCat(count, " values for ", n, " elements"));
  }
  return t;
}

}  // namespace

const DTypeInfo* FindDType(int64_t dtype_number) {
  for (const DTypeInfo& d : kDTypes) {
    if (static_cast<int64_t>(d.dtype) == dtype_number) return &d;
  }
  return nullptr;
}

const DTypeInfo& InfoOf(DataType dtype) {
  const DTypeInfo* d = FindDType(static_cast<int64_t>(dtype));
  return d != nullptr ? *d : kDTypes[0];
}

absl::StatusOr<int64_t> NumElements(absl::Span<const int64_t> shape) {
  int64_t n = 1;
  bool zero = false;
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError("negative dim size");
    if (d == 0) zero = true;
  }
  if (zero) return 0;  // [0, huge, huge] is empty, not an overflow
  for (int64_t d : shape) {
    if (n > std::numeric_limits<int64_t>::max() / d) {
      return absl::InvalidArgumentError("element count overflows int64");
    }
    n *= d;
  }
  return n;
}

absl::StatusOr<int64_t> NumBytes(DataType dtype, absl::Span<const int64_t> shape) {
  auto n = NumElements(shape);
  if (!n.ok()) return n.status();
  const int64_t item = InfoOf(dtype).itemsize;
  if (*n > std::numeric_limits<int64_t>::max() / item) {
    return absl::InvalidArgumentError("byte size overflows int64");
  }
  return *n * item;
}

absl::StatusOr<Tensor> DecodeTensor(absl::string_view payload) { return Decode(payload, true); }

absl::StatusOr<Tensor> DecodeTensorLazily(absl::string_view payload) {
  return Decode(payload, false);
}

bool IsTensor(absl::string_view payload) { return Decode(payload, false).ok(); }

absl::StatusOr<TensorType> DecodeTensorType(absl::string_view payload) {
  auto t = Decode(payload, false);
  if (!t.ok()) return t.status();
  return TensorType{t->dtype, std::move(t->shape)};
}

namespace {

// The TensorShapeProto message body for `shape`.
std::string ShapeMessage(absl::Span<const int64_t> shape) {
  std::string out;
  for (int64_t d : shape) {
    out.push_back(static_cast<char>(kShapeDim << 3 | wire::kLen));
    if (d == 0) {
      out.push_back(0);  // proto3 omits a zero size: an empty Dim
      continue;
    }
    wire::PutVarint(&out, 1 + wire::VarintSize(static_cast<uint64_t>(d)));
    out.push_back(static_cast<char>(kDimSize << 3 | wire::kVarint));
    wire::PutVarint(&out, static_cast<uint64_t>(d));
  }
  return out;
}

absl::Status CheckShape(absl::Span<const int64_t> shape) {
  if (shape.size() > kMaxRank) return absl::InvalidArgumentError("more than 254 dims");
  return NumElements(shape).status();
}

}  // namespace

absl::StatusOr<std::string> EncodeTensorHeader(DataType dtype, absl::Span<const int64_t> shape) {
  if (auto s = CheckShape(shape); !s.ok()) return s;
  auto bytes = NumBytes(dtype, shape);
  if (!bytes.ok()) return bytes.status();
  if (static_cast<uint64_t>(*bytes) >= (uint64_t{1} << 31)) {
    return absl::InvalidArgumentError("EncodeTensor: protobuf bytes fields stop below 2 GiB");
  }
  const std::string shape_msg = ShapeMessage(shape);
  std::string out;
  out.push_back(static_cast<char>(kDtype << 3 | wire::kVarint));
  wire::PutVarint(&out, static_cast<uint64_t>(dtype));
  out.push_back(static_cast<char>(kTensorShape << 3 | wire::kLen));
  wire::PutVarint(&out, shape_msg.size());
  out += shape_msg;
  if (*bytes > 0) {
    out.push_back(static_cast<char>(kTensorContent << 3 | wire::kLen));
    wire::PutVarint(&out, static_cast<uint64_t>(*bytes));
  }
  return out;
}

absl::StatusOr<std::string> EncodeTensor(DataType dtype, absl::Span<const int64_t> shape,
                                         absl::string_view data) {
  if (auto s = CheckShape(shape); !s.ok()) return s;
  auto bytes = NumBytes(dtype, shape);
  if (bytes.ok() && static_cast<uint64_t>(*bytes) != data.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("EncodeTensor: ", data.size(), " data bytes, the shape needs ", *bytes));
  }
  auto out = EncodeTensorHeader(dtype, shape);
  if (!out.ok()) return out.status();
  out->append(data.data(), data.size());
  return out;
}

absl::StatusOr<uint64_t> EncodedTensorSize(DataType dtype, absl::Span<const int64_t> shape) {
  if (auto s = CheckShape(shape); !s.ok()) return s;
  auto bytes = NumBytes(dtype, shape);
  if (!bytes.ok()) return bytes.status();
  const uint64_t shape_size = ShapeMessage(shape).size();
  uint64_t n = 1 + wire::VarintSize(static_cast<uint64_t>(dtype)) + 1 +
               wire::VarintSize(shape_size) + shape_size;
  if (*bytes > 0) n += 1 + wire::VarintSize(*bytes) + *bytes;
  return n;
}

}  // namespace tfrecordfs::tensor
