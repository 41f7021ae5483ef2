// Fuzz target: the PNG reader (libpng behind tensor/png.h). The input is a
// PNG file. Invariants:
//   * DecodePng, PngTypeOf, CheckPngFitsFeature and PngToTensorProto never
//     crash and fail only with InvalidArgument (FailedPrecondition: an alpha
//     to drop that is not opaque);
//   * PngTypeOf says what DecodePng gives;
//   * for each feature type, the streaming check and the straight-into-the-
//     proto conversion agree with DecodePng + FitPngToFeature + EncodeTensor;
//   * a decoded image, shown again as the stored-deflate view (EncodePng),
//     decodes to the same pixels.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_check.h"
#include "tfrecordfs/tensor/png.h"
#include "tfrecordfs/tensor/tensor.h"

namespace tfrecordfs::fuzz {
namespace {

bool Expected(const absl::Status& s) {
  return absl::IsInvalidArgument(s) || absl::IsFailedPrecondition(s);
}

void Check(absl::string_view in) {
  tensor::PngDecodeOptions options;
  options.max_pixel_bytes = 1u << 22;  // keeps each run fast
  auto decoded = tensor::DecodePng(in, options);
  auto type = tensor::PngTypeOf(in, options);
  if (!decoded.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(decoded.status()), decoded.status().ToString());
  } else {
    FUZZ_CHECK(type.ok(), type.status().ToString());
    FUZZ_CHECK(type->dtype == decoded->dtype && type->shape == decoded->shape,
               "PngTypeOf disagrees with DecodePng");
  }
  if (!type.ok()) FUZZ_CHECK(absl::IsInvalidArgument(type.status()), type.status().ToString());
  const std::vector<std::pair<tensor::DataType, std::vector<int64_t>>> features = {
      {tensor::DataType::kUint8, {1, 1}},     {tensor::DataType::kUint8, {1, 1, 3}},
      {tensor::DataType::kUint8, {1, 1, 4}},  {tensor::DataType::kUint16, {1, 1}},
      {tensor::DataType::kUint16, {1, 1, 2}}, {tensor::DataType::kUint8, {1, 1, 1}}};
  for (const auto& [dtype, shape] : features) {
    const absl::Status check = tensor::CheckPngFitsFeature(in, dtype, shape, options);
    auto proto = tensor::PngToTensorProto(in, dtype, shape, options);
    FUZZ_CHECK(check.ok() || Expected(check), check.ToString());
    FUZZ_CHECK(proto.ok() || Expected(proto.status()), proto.status().ToString());
    FUZZ_CHECK(check.ok() == proto.ok(), "check ", check.ToString(), " but convert ",
               proto.status().ToString());
    if (!decoded.ok()) {
      FUZZ_CHECK(!check.ok(), "a PNG DecodePng refuses passes the check");
      continue;
    }
    auto fit = tensor::FitPngToFeature(*decoded, dtype, shape);
    FUZZ_CHECK(fit.ok() == check.ok(), "fit ", fit.status().ToString(), " check ",
               check.ToString());
    if (!fit.ok()) continue;
    FUZZ_CHECK(*proto == tensor::EncodeTensor(fit->dtype, fit->shape, fit->materialized).value(),
               "PngToTensorProto differs from decode + fit + encode");
  }
  if (decoded.ok()) {
    auto g = tensor::PngGeometryOf(decoded->dtype, decoded->shape);
    if (g.ok()) {
      auto again = tensor::DecodePng(tensor::EncodePng(*g, decoded->materialized).value());
      FUZZ_CHECK(again.ok(), again.status().ToString());
      FUZZ_CHECK(again->materialized == decoded->materialized, "the view changes the pixels");
    }
  }
}

}  // namespace
}  // namespace tfrecordfs::fuzz

TFRFS_FUZZ_ENTRY(tfrecordfs::fuzz::Check, 1u << 20)
