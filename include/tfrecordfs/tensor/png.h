// Image tensors <-> PNG files.
//
// Writing: a uint8 or uint16 tensor of shape [H,W], [H,W,1], [H,W,2], [H,W,3]
// or [H,W,4] (H, W >= 1) is shown as a PNG of colour type 0 (gray), 0, 4
// (gray+alpha), 2 (RGB) or 6 (RGBA), bit depth 8 or 16, not interlaced,
// filter 0 (None) on every row and *stored* (uncompressed) deflate blocks, so
// that every byte of the file is a function of few pixel bytes and the file
// size is a function of the geometry alone:
//
//   offset 0   89 50 4E 47 0D 0A 1A 0A                     signature
//          8   00 00 00 0D "IHDR" W H depth ctype 0 0 0 CRC  25 bytes
//         33   IDAT chunks: len(BE) "IDAT" payload CRC     12 + payload each
//              every payload kIdatPayload bytes, the last one the rest;
//              the payloads, concatenated, are one zlib stream (Z bytes):
//                78 01                                    zlib header
//                per block of up to 65535 raw bytes:
//                  BFINAL(0/1) LEN(LE16) ~LEN(LE16) raw bytes
//                adler32 of the raw bytes (BE)
//              where the raw bytes are, per row, a filter byte 0 then the
//              row's samples (16-bit samples big-endian, as PNG wants: the
//              tensor's little-endian samples are byte-swapped)
//   size-12    00 00 00 00 "IEND" AE 42 60 82
//
//   R = H * (1 + W*C*depth/8); blocks = ceil(R / 65535);
//   Z = 2 + 5*blocks + R + 4; chunks = ceil(Z / kIdatPayload);
//   PngSize = 8 + 25 + 12*chunks + Z + 12.
//
// Costs of ReadPngRange, which produces any byte range on demand:
//   * bytes of the raw data cost reading the same pixel bytes from the
//     source (one PixelSource call per range);
//   * a range that touches an IDAT chunk's CRC costs reading that chunk's
//     pixels (at most kIdatPayload bytes): the CRC covers the whole chunk;
//   * a range that touches the adler32 (the last 4 bytes of the zlib stream)
//     or the last chunk's CRC costs reading every pixel once, O(image), in
//     bounded memory. Sequential readers hit this once, at the end.
//
// Reading: DecodePng decodes any valid PNG with libpng.
//
// Thread-safety: pure functions; ReadPngRange calls `source` from the calling
// thread only.
#ifndef TFRECORDFS_TENSOR_PNG_H_
#define TFRECORDFS_TENSOR_PNG_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "tfrecordfs/tensor/tensor.h"

namespace tfrecordfs::tensor {

// IDAT payload size of every chunk but the last (a bound on the pixels read
// to produce one CRC).
inline constexpr uint32_t kIdatPayload = 1u << 16;

struct PngGeometry {
  uint32_t height = 0;
  uint32_t width = 0;
  uint32_t channels = 0;  // 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA
  uint32_t depth = 0;     // bits per sample: 8 or 16
  // True for shape [H,W] (rank 2); DecodePng's result is always rank 3.
  bool rank2 = false;

  uint64_t RowBytes() const { return uint64_t{width} * channels * (depth / 8); }
  // Bytes of pixel data in the tensor: H * RowBytes().
  uint64_t PixelBytes() const { return uint64_t{height} * RowBytes(); }
};

// The geometry for a tensor that has a PNG view, or InvalidArgument saying
// why not (dtype other than uint8/uint16; shape not [H,W] or [H,W,1..4];
// a dim of 0; H or W above PNG's 2^31 - 1).
absl::StatusOr<PngGeometry> PngGeometryOf(DataType dtype, absl::Span<const int64_t> shape);

// The size of the PNG file, from the geometry alone.
uint64_t PngSize(const PngGeometry& g);

// Fetches `n` bytes at `offset` of the tensor's pixel data (C order,
// little-endian samples) into `buf`; offset + n <= PixelBytes().
using PixelSource = std::function<absl::Status(uint64_t offset, char* buf, size_t n)>;

// Writes bytes [offset, offset + n) of the PNG file into `out`. OutOfRange if
// the range extends past PngSize(g); a source error is returned as is.
absl::Status ReadPngRange(const PngGeometry& g, const PixelSource& source, uint64_t offset,
                          char* out, size_t n);

// The whole PNG of a tensor whose pixel data is in memory (tests, tools).
absl::StatusOr<std::string> EncodePng(const PngGeometry& g, absl::string_view pixels);

// Limits DecodePng enforces before allocating. (libpng's own default limit
// of 1,000,000 pixels a side is raised to PNG's 2^31 - 1, so that every PNG
// the writer above makes, [1, 1000001] included, reads back.)
struct PngDecodeOptions {
  // Largest decoded pixel data accepted (default 1 GiB).
  uint64_t max_pixel_bytes = uint64_t{1} << 30;
};

// Decodes any PNG libpng reads: gray, gray+alpha, RGB, RGBA, palette,
// interlaced or not, depths 1..16. Depths below 8 are expanded to 8,
// palettes to RGB (RGBA when the file has a tRNS chunk), a tRNS chunk on a
// gray or RGB image to an alpha channel; no gamma or colour conversion.
// Returns a tensor of dtype uint8 (depth <= 8) or uint16 (depth 16), shape
// [H,W,C] with C = 1, 2 (gray+alpha), 3 or 4, little-endian samples in
// `materialized`. A file that is not a valid PNG, is truncated, has a bad
// critical-chunk CRC, or exceeds the options' limits: InvalidArgument with
// libpng's reason.
absl::StatusOr<Tensor> DecodePng(absl::string_view file, const PngDecodeOptions& options = {});

// The first bytes of every PNG: the signature and the IHDR chunk.
inline constexpr uint64_t kPngHeaderBytes = 33;
// The last bytes of every PNG: the empty IEND chunk.
inline constexpr absl::string_view kPngTrailer("\0\0\0\0IEND\xae\x42\x60\x82", 12);

// What the IHDR chunk of a PNG says.
struct PngHeader {
  uint32_t width = 0;
  uint32_t height = 0;
  int bit_depth = 0;   // 1, 2, 4, 8 or 16, as the colour type allows
  int color_type = 0;  // 0 gray, 2 RGB, 3 palette, 4 gray+alpha, 6 RGBA
  bool interlaced = false;

  // The dtype DecodePng gives: uint16 for bit depth 16, else uint8.
  DataType dtype() const;
  // The channel count DecodePng gives without a tRNS chunk.
  int channels() const;
};

// Parses the signature and IHDR chunk at the start of `prefix` (the first
// bytes of a file, possibly all of it): nullopt while fewer than
// kPngHeaderBytes are there and they can still begin a PNG; the header once
// they are there; else InvalidArgument saying what is wrong ("no PNG
// signature", "the first chunk is not a 13-byte IHDR", "IHDR CRC mismatch",
// a width or height of 0 or above 2^31 - 1, an unknown colour type, a bit
// depth the colour type does not allow, an unknown compression, filter or
// interlace method). Later chunks and the pixels are not looked at.
absl::StatusOr<std::optional<PngHeader>> ParsePngHeader(absl::string_view prefix);

// Whether a PNG whose IHDR is `header` can become a tensor of `want`'s dtype
// and rank (and, for rank 3, channel count) through DecodePng and
// FitPngToFeature, as far as the header tells: a tRNS chunk may add an
// alpha channel, and FitPngToFeature may drop an opaque one.
bool PngHeaderMayFit(const PngHeader& header, const TensorType& want);

// Fits a decoded PNG (DecodePng's result) to the dtype and shape the feature
// had in the shard, for writing it back:
//   * the dtype must match (an 8-bit PNG for a uint8 feature, 16-bit for
//     uint16): no silent rescaling;
//   * `want_shape` rank 2 ([H,W]) takes a gray image (C = 1) and drops the
//     channel axis; rank 3 keeps rank 3 ("a [H,W,1] feature stays rank 3")
//     with want_shape[2] channels;
//   * an alpha channel that is fully opaque (a common addition by image
//     editors) is dropped when the feature has no alpha (C 2 -> 1, 4 -> 3);
//   * H and W may change (each record has its own shape).
// Anything else is InvalidArgument naming both shapes.
absl::StatusOr<Tensor> FitPngToFeature(Tensor png, DataType want_dtype,
                                       absl::Span<const int64_t> want_shape);

// What DecodePng would give, from the header alone (dtype uint8/uint16,
// shape [H,W,C]): no pixels are decoded. The errors of DecodePng that the
// header shows (the limits included).
absl::StatusOr<TensorType> PngTypeOf(absl::string_view file, const PngDecodeOptions& options = {});

// The part of FitPngToFeature the types decide: OK when a PNG that
// DecodePng gives as `png` (PngTypeOf) can fit a feature of `want_dtype` and
// `want_shape`, leaving only an alpha channel to drop, which the pixels must
// show opaque. Else FitPngToFeature's InvalidArgument.
absl::Status PngTypeFits(const TensorType& png, DataType want_dtype,
                         absl::Span<const int64_t> want_shape);

// FitPngToFeature(DecodePng(file), want_dtype, want_shape) without holding
// the image: the rows are decoded one at a time (memory O(width), not
// O(image); interlaced files pass by pass), checked (an alpha channel to
// drop must be opaque) and dropped. OK when it would succeed; else
// DecodePng's and PngTypeFits' InvalidArgument, or FailedPrecondition when
// the alpha channel to drop is not opaque.
absl::Status CheckPngFitsFeature(absl::string_view file, DataType want_dtype,
                                 absl::Span<const int64_t> want_shape,
                                 const PngDecodeOptions& options = {});

// EncodeTensor of FitPngToFeature(DecodePng(file), ...), with the rows
// decoded straight into the TensorProto being built: the pixels are held
// once (DecodePng, FitPngToFeature and EncodeTensor in turn would hold them
// two or three times). The errors of CheckPngFitsFeature.
absl::StatusOr<std::string> PngToTensorProto(absl::string_view file, DataType want_dtype,
                                             absl::Span<const int64_t> want_shape,
                                             const PngDecodeOptions& options = {});

}  // namespace tfrecordfs::tensor

#endif  // TFRECORDFS_TENSOR_PNG_H_
