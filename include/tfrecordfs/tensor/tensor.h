// Serialized tensorflow.TensorProto (what tf.io.serialize_tensor writes) <->
// a dense numeric array.
//
// The wire layout tf.io.serialize_tensor produces for a numeric tensor
// (Tensor::AsProtoTensorContent; protobuf writes fields in number order):
//
//   08 <varint dtype>                      dtype = 1 (enum DataType)
//   12 <len> { 12 <len> { 08 <varint size> }   tensor_shape = 2: one Dim
//              ... }                            (dim = 2) per axis; a size
//                                               of 0 is an empty Dim `12 00`;
//                                               a scalar is `12 00`
//   22 <len> <bytes>                       tensor_content = 4: the elements,
//                                          C order, little-endian; omitted
//                                          when there are no elements
//
// e.g. tf.constant(1.0) -> 08 01 12 00 22 04 00 00 80 3f.
//
// DecodeTensor is strict, so that a bytes feature that merely happens to
// parse (text, JPEG, another proto) is never shown as an array. A payload is
// a tensor only when all of these hold:
//   * wire limits exactly as protobuf's parser enforces them: varints at most
//     10 bytes (the 10th at most 0x01), tags at most 5 bytes with a field
//     number >= 1, lengths at most 5 bytes and < 2^31, wire types 0, 1, 2, 5;
//   * only the fields 1 (dtype), 2 (tensor_shape), 4 (tensor_content) and the
//     *_val field that belongs to the dtype (below). version_number = 3,
//     dim names, unknown_rank, and every other *_val field are rejected:
//     tf.io.serialize_tensor never writes them, and we could not write them
//     back;
//   * dtype, tensor_shape and tensor_content each occur at most once
//     (protobuf would silently merge two shapes into one, and let a later
//     dtype win; no writer does either); a Dim has at most one size;
//   * dtype and tensor_shape are present; dtype is one of DataType below;
//     every dim size is >= 0, at most kMaxRank dims, and the element count
//     and byte size do not overflow;
//   * either tensor_content holds exactly NumElements * itemsize bytes (and no
//     *_val field is present), or there is no tensor_content and the
//     dtype's *_val field holds exactly NumElements values, or exactly one
//     value and NumElements >= 1 (TensorFlow broadcasts a single value, as
//     make_tensor_proto writes tf.fill-like constants; any other count TF
//     would truncate or pad, and we reject). A broadcast is materialised only
//     up to kMaxMaterializedBytes. A zero-element tensor has neither.
//   * *_val values lie in the dtype's range (int_val for DT_UINT8 in 0..255,
//     half_val in 0..65535, bool_val 0 or 1, uint32_val < 2^32): protobuf
//     would truncate, TensorFlow would cast; a TF writer never does either.
//   *_val fields may be packed, unpacked, or several packed runs, concatenated
//   in order as protobuf does.
//
// The dtype -> *_val field mapping (tensorflow/core/framework/tensor.cc):
//   DT_FLOAT float_val=5 (fixed32)   DT_DOUBLE double_val=6 (fixed64)
//   DT_INT32, DT_INT16, DT_INT8, DT_UINT8, DT_UINT16 int_val=7 (varint)
//   DT_INT64 int64_val=10            DT_BOOL bool_val=11
//   DT_HALF half_val=13 (varint, the 16 bits of each half)
//   DT_UINT32 uint32_val=16          DT_UINT64 uint64_val=17
//
// Thread-safety: pure functions.
#ifndef TFRECORDFS_TENSOR_TENSOR_H_
#define TFRECORDFS_TENSOR_TENSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace tfrecordfs::tensor {

// TensorFlow's DataType numbers (tensorflow/core/framework/types.proto) for
// the dtypes that have a numpy equivalent and a fixed item size.
enum class DataType : int32_t {
  kFloat = 1,    // <f4
  kDouble = 2,   // <f8
  kInt32 = 3,    // <i4
  kUint8 = 4,    // |u1
  kInt16 = 5,    // <i2
  kInt8 = 6,     // |i1
  kInt64 = 9,    // <i8
  kBool = 10,    // |b1
  kUint16 = 17,  // <u2
  kHalf = 19,    // <f2
  kUint32 = 22,  // <u4
  kUint64 = 23,  // <u8
};

// TensorFlow's TensorShape holds at most 254 dims.
inline constexpr size_t kMaxRank = 254;
// The largest broadcast of a single *_val value that DecodeTensor expands.
inline constexpr uint64_t kMaxMaterializedBytes = uint64_t{64} << 20;

// Fixed facts about a dtype. All strings are static.
struct DTypeInfo {
  DataType dtype;
  const char* name;   // TensorFlow's name without "DT_", lower case: "float"
  const char* descr;  // numpy dtype.str: "<f4", "|u1", "|b1"
  uint32_t itemsize;  // bytes per element
};

// Null for a number that is not one of DataType's values.
const DTypeInfo* FindDType(int64_t dtype_number);
const DTypeInfo& InfoOf(DataType dtype);

// The number of elements of `shape` (1 for a scalar), or InvalidArgument if a
// dim is negative or the product overflows int64.
absl::StatusOr<int64_t> NumElements(absl::Span<const int64_t> shape);
// NumElements * itemsize, or InvalidArgument if that overflows int64.
absl::StatusOr<int64_t> NumBytes(DataType dtype, absl::Span<const int64_t> shape);

// A dense array: C order, little-endian elements.
struct Tensor {
  DataType dtype = DataType::kFloat;
  std::vector<int64_t> shape;  // empty for a scalar

  // Where the element bytes are (exactly NumBytes(dtype, shape) of them):
  //   * data_in_input: at [data_offset, data_offset + data_size) of the
  //     buffer the tensor was decoded from (tensor_content, or an .npy body),
  //     so a reader can serve them straight from the shard;
  //   * otherwise in `materialized` (decoded from *_val fields, or a PNG).
  bool data_in_input = false;
  uint64_t data_offset = 0;
  uint64_t data_size = 0;
  std::string materialized;
  // DecodeTensorLazily only: a single *_val value broadcast over the shape,
  // not expanded. `materialized` then holds that one element (itemsize
  // bytes), repeated NumElements times in the array; data() is not the
  // element bytes.
  bool broadcast = false;

  const DTypeInfo& info() const { return InfoOf(dtype); }
  // The element bytes; `input` is the buffer this tensor was decoded from
  // (ignored when !data_in_input).
  absl::string_view data(absl::string_view input) const {
    return data_in_input ? input.substr(data_offset, data_size) : absl::string_view(materialized);
  }
};

// Decodes a serialized TensorProto by the rules above. Fails with
// InvalidArgument ("not a tensor: ... at byte N") otherwise. Data spans point
// into `payload`.
absl::StatusOr<Tensor> DecodeTensor(absl::string_view payload);

// DecodeTensor without expanding a broadcast (Tensor::broadcast): O(payload)
// memory whatever the shape, for views made on demand from the one value.
// Accepts exactly what DecodeTensor accepts.
absl::StatusOr<Tensor> DecodeTensorLazily(absl::string_view payload);

// True when DecodeTensor would accept `payload` (cheap: no broadcast is
// materialised).
bool IsTensor(absl::string_view payload);

// The dtype and shape of a tensor, without its elements.
struct TensorType {
  DataType dtype = DataType::kFloat;
  std::vector<int64_t> shape;  // empty for a scalar

  bool operator==(const TensorType&) const = default;
};

// The type of a payload DecodeTensor accepts, as cheaply as IsTensor (no
// broadcast is materialised; tensor_content is not copied). The same errors
// as DecodeTensor.
absl::StatusOr<TensorType> DecodeTensorType(absl::string_view payload);

// The bytes tf.io.serialize_tensor writes for an array of `dtype` and `shape`
// whose elements are `data` (C order, little-endian): dtype, tensor_shape,
// then tensor_content (omitted when empty). Fails with InvalidArgument when
// data.size() != NumBytes(dtype, shape), a dim is negative, or the rank
// exceeds kMaxRank. For every payload DecodeTensor accepts with
// data_in_input, EncodeTensor(decoded) == payload when the payload was
// written by TensorFlow (canonical varints, fields in order).
absl::StatusOr<std::string> EncodeTensor(DataType dtype, absl::Span<const int64_t> shape,
                                         absl::string_view data);

// The bytes EncodeTensor writes before the elements (dtype, tensor_shape and
// tensor_content's tag and length; all of it when there are no elements), so
// that a writer can append the elements as they come. Same errors as
// EncodedTensorSize.
absl::StatusOr<std::string> EncodeTensorHeader(DataType dtype, absl::Span<const int64_t> shape);

// The size of EncodeTensor's output without building it (for a file size).
absl::StatusOr<uint64_t> EncodedTensorSize(DataType dtype, absl::Span<const int64_t> shape);

}  // namespace tfrecordfs::tensor

#endif  // TFRECORDFS_TENSOR_TENSOR_H_
