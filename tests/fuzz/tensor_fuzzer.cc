// Fuzz target: the hand-written TensorProto decoder, cross-checked against
// protobuf's generated parser (tensor.proto). The input is one bytes value.
//
// Invariants:
//   * DecodeTensor never crashes and fails only with InvalidArgument;
//     IsTensor agrees with it;
//   * when it accepts, protobuf accepts too and sees the same dtype, shape
//     and tensor_content; data spans lie inside the input and hold exactly
//     NumBytes(dtype, shape) bytes;
//   * EncodeTensor of the result decodes back to the same array.
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "tensor.pb.h"
#include "tfrecordfs/tensor/tensor.h"

namespace tfrecordfs::fuzz {
namespace {

void Check(absl::string_view in) {
  auto t = tensor::DecodeTensor(in);
  FUZZ_CHECK(t.ok() == tensor::IsTensor(in), "IsTensor disagrees with DecodeTensor");
  if (!t.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(t.status()), t.status().ToString());
    return;
  }
  auto bytes = tensor::NumBytes(t->dtype, t->shape);
  FUZZ_CHECK(bytes.ok());
  const absl::string_view data = t->data(in);
  FUZZ_CHECK(data.size() == static_cast<uint64_t>(*bytes), "element bytes of the wrong size");
  if (t->data_in_input) FUZZ_CHECK(t->data_offset + t->data_size <= in.size());
  proto::TensorProto p;
  FUZZ_CHECK(p.ParseFromArray(in.data(), static_cast<int>(in.size())),
             "DecodeTensor accepts what protobuf refuses");
  FUZZ_CHECK(p.dtype() == static_cast<int>(t->dtype));
  FUZZ_CHECK(p.tensor_shape().dim_size() == static_cast<int>(t->shape.size()));
  for (size_t i = 0; i < t->shape.size(); ++i) {
    FUZZ_CHECK(p.tensor_shape().dim(static_cast<int>(i)).size() == t->shape[i]);
  }
  if (t->data_in_input) FUZZ_CHECK(p.tensor_content() == data);
  auto again = tensor::EncodeTensor(t->dtype, t->shape, data);
  FUZZ_CHECK(again.ok(), again.status().ToString());
  auto round = tensor::DecodeTensor(*again);
  FUZZ_CHECK(round.ok(), round.status().ToString());
  FUZZ_CHECK(round->dtype == t->dtype && round->shape == t->shape && round->data(*again) == data,
             "encode/decode round trip changed the array");
}

}  // namespace
}  // namespace tfrecordfs::fuzz

TFRFS_FUZZ_ENTRY(tfrecordfs::fuzz::Check, 1u << 20)
