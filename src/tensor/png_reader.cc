// PNG files -> image tensors, through libpng's classic API.
//
// libpng reports errors by longjmp. The only function that calls setjmp,
// RunLibpng, keeps no C++ objects with destructors in its own frame: all
// state lives in a ReadState owned by the caller, whose destructor frees the
// libpng structs whether or not a longjmp happened, so nothing leaks and no
// destructor is skipped.
#include <png.h>

#include <csetjmp>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tfrecordfs/tensor/png.h"

namespace tfrecordfs::tensor {
namespace {

struct ReadState {
  ~ReadState() {
    if (png != nullptr) png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr);
  }

  png_structp png = nullptr;
  png_infop info = nullptr;
  absl::string_view file;
  size_t pos = 0;
  uint64_t max_pixel_bytes = 0;
  std::string error;
  // Filled by RunLibpng.
  uint32_t width = 0, height = 0, channels = 0, depth = 0;
  std::string pixels;
  std::vector<png_bytep> rows;
};

void OnError(png_structp png, png_const_charp message) {
  auto* st = static_cast<ReadState*>(png_get_error_ptr(png));
  st->error = message != nullptr ? message : "unknown libpng error";
  png_longjmp(png, 1);
}

void OnWarning(png_structp, png_const_charp) {}  // ancillary-chunk trouble: not fatal

void OnRead(png_structp png, png_bytep out, size_t n) {
  auto* st = static_cast<ReadState*>(png_get_io_ptr(png));
  if (n > st->file.size() - st->pos) png_error(png, "file truncated");
  std::memcpy(out, st->file.data() + st->pos, n);
  st->pos += n;
}

// Returns false after a libpng error (st->error says why). Only trivially
// destructible locals below the setjmp.
bool RunLibpng(ReadState* st) {
  if (setjmp(png_jmpbuf(st->png))) return false;
  png_set_read_fn(st->png, st, OnRead);
  png_read_info(st->png, st->info);
  const png_byte color = png_get_color_type(st->png, st->info);
  const png_byte bit_depth = png_get_bit_depth(st->png, st->info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(st->png);
  if (color == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(st->png);
  if (png_get_valid(st->png, st->info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(st->png);
  if (bit_depth == 16) png_set_swap(st->png);  // little-endian samples
  png_set_interlace_handling(st->png);
  png_read_update_info(st->png, st->info);
  st->width = png_get_image_width(st->png, st->info);
  st->height = png_get_image_height(st->png, st->info);
  st->channels = png_get_channels(st->png, st->info);
  st->depth = png_get_bit_depth(st->png, st->info);
  const size_t rowbytes = png_get_rowbytes(st->png, st->info);
  if (st->depth != 8 && st->depth != 16) png_error(st->png, "unexpected depth after expansion");
  if (rowbytes != size_t{st->width} * st->channels * (st->depth / 8)) {
    png_error(st->png, "unexpected row size after expansion");
  }
  if (st->height != 0 && rowbytes > st->max_pixel_bytes / st->height) {
    png_error(st->png, "image larger than the decode limit");
  }
  st->pixels.resize(rowbytes * st->height);
  st->rows.resize(st->height);
  for (uint32_t y = 0; y < st->height; ++y) {
    st->rows[y] = reinterpret_cast<png_bytep>(st->pixels.data() + y * rowbytes);
  }
  png_read_image(st->png, st->rows.data());
  png_read_end(st->png, nullptr);
  return true;
}

std::string ShapeText(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

}  // namespace

absl::StatusOr<Tensor> DecodePng(absl::string_view file, const PngDecodeOptions& options) {
  if (file.size() < 8 || png_sig_cmp(reinterpret_cast<png_const_bytep>(file.data()), 0, 8) != 0) {
    return absl::InvalidArgumentError("not a PNG file: no PNG signature");
  }
  ReadState st;
  st.file = file;
  st.max_pixel_bytes = options.max_pixel_bytes;
  st.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &st, OnError, OnWarning);
  if (st.png == nullptr) return absl::ResourceExhaustedError("png_create_read_struct failed");
  st.info = png_create_info_struct(st.png);
  if (st.info == nullptr) return absl::ResourceExhaustedError("png_create_info_struct failed");
  if (!RunLibpng(&st)) {
    return absl::InvalidArgumentError(absl::StrCat("not a valid PNG file: ", st.error));
  }
  Tensor t;
  t.dtype = st.depth == 16 ? DataType::kUint16 : DataType::kUint8;
  t.shape = {st.height, st.width, st.channels};
  t.materialized = std::move(st.pixels);
  return t;
}

absl::StatusOr<Tensor> FitPngToFeature(Tensor png, DataType want_dtype,
                                       absl::Span<const int64_t> want_shape) {
  const auto mismatch = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the PNG (", InfoOf(png.dtype).name, " ", ShapeText(png.shape), ") does not fit the feature (",
        InfoOf(want_dtype).name, " ", ShapeText(want_shape), "): ", why));
  };
  if (png.shape.size() != 3 || png.data_in_input) return mismatch("not a DecodePng result");
  if (png.dtype != want_dtype) {
    return mismatch(want_dtype == DataType::kUint16 ? "the feature needs a 16-bit PNG"
                    : want_dtype == DataType::kUint8 ? "the feature needs an 8-bit PNG"
                                                     : "the feature has no PNG form");
  }
  int64_t want_c;
  if (want_shape.size() == 2) {
    want_c = 1;
  } else if (want_shape.size() == 3) {
    want_c = want_shape[2];
  } else {
    return mismatch("the feature is not an image");
  }
  int64_t c = png.shape[2];
  if ((c == 2 || c == 4) && want_c == c - 1) {
    // Drop an alpha channel that is opaque everywhere.
    const size_t item = InfoOf(png.dtype).itemsize;
    const size_t px = png.materialized.size() / (c * item);
    const std::string opaque(item, '\xff');
    for (size_t i = 0; i < px; ++i) {
      if (png.materialized.compare((i * c + c - 1) * item, item, opaque) != 0) {
        return mismatch("its alpha channel is not fully opaque");
      }
    }
    std::string out;
    out.reserve(px * (c - 1) * item);
    for (size_t i = 0; i < px; ++i) out.append(png.materialized, i * c * item, (c - 1) * item);
    png.materialized = std::move(out);
    png.shape[2] = --c;
  }
  if (c != want_c) return mismatch(absl::StrCat(c, " channels, the feature has ", want_c));
  if (want_shape.size() == 2) png.shape.pop_back();
  return png;
}

}  // namespace tfrecordfs::tensor
