// PNG files -> image tensors, through libpng's classic API.
//
// libpng reports errors by longjmp. The functions that call setjmp
// (ReadHeader, ReadImageInto, ReadRows) keep no C++ objects with destructors
// in their own frames: all state lives in a ReadState owned by the caller,
// whose destructor frees the libpng structs whether or not a longjmp
// happened, so nothing leaks and no destructor is skipped.
#include <png.h>
#include <zlib.h>

#include <algorithm>
#include <csetjmp>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
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
  // Whether libpng assembles interlaced rows (it then needs every row of the
  // image at hand on every pass).
  bool interlace_handling = true;
  std::string error;
  // Filled by ReadHeader.
  uint32_t width = 0, height = 0, channels = 0, depth = 0;
  size_t rowbytes = 0;
  int passes = 1;
  bool interlaced = false;
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

// Each function below that calls libpng sets its own setjmp (a longjmp
// must land in a frame still on the stack) and returns false after a libpng
// error (st->error says why). Only trivially destructible locals below a
// setjmp.

// Reads the header and sets the transforms DecodePng documents.
bool ReadHeader(ReadState* st) {
  if (setjmp(png_jmpbuf(st->png))) return false;
  png_set_read_fn(st->png, st, OnRead);
  // libpng refuses more than 1,000,000 pixels a side by default; the
  // writer makes up to PNG's 2^31 - 1 ([1, 1000001] must come back), and
  // max_pixel_bytes bounds the memory.
  png_set_user_limits(st->png, 0x7fffffff, 0x7fffffff);
  png_read_info(st->png, st->info);
  const png_byte color = png_get_color_type(st->png, st->info);
  const png_byte bit_depth = png_get_bit_depth(st->png, st->info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(st->png);
  if (color == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(st->png);
  if (png_get_valid(st->png, st->info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(st->png);
  if (bit_depth == 16) png_set_swap(st->png);  // little-endian samples
  st->interlaced = png_get_interlace_type(st->png, st->info) == PNG_INTERLACE_ADAM7;
  if (st->interlace_handling) st->passes = png_set_interlace_handling(st->png);
  png_read_update_info(st->png, st->info);
  st->width = png_get_image_width(st->png, st->info);
  st->height = png_get_image_height(st->png, st->info);
  st->channels = png_get_channels(st->png, st->info);
  st->depth = png_get_bit_depth(st->png, st->info);
  st->rowbytes = png_get_rowbytes(st->png, st->info);
  if (st->depth != 8 && st->depth != 16) png_error(st->png, "unexpected depth after expansion");
  if (st->rowbytes != size_t{st->width} * st->channels * (st->depth / 8)) {
    png_error(st->png, "unexpected row size after expansion");
  }
  if (st->height != 0 && st->rowbytes > st->max_pixel_bytes / st->height) {
    png_error(st->png, "image larger than the decode limit");
  }
  return true;
}

// Decodes the whole image (interlace handling on) into `base`, row y at
// base + y * rowbytes.
bool ReadImageInto(ReadState* st, char* base) {
  if (setjmp(png_jmpbuf(st->png))) return false;
  for (int pass = 0; pass < st->passes; ++pass) {
    for (uint32_t y = 0; y < st->height; ++y) {
      png_read_row(st->png, reinterpret_cast<png_bytep>(base + size_t{y} * st->rowbytes), nullptr);
    }
  }
  png_read_end(st->png, nullptr);
  return true;
}

// Decodes row after row into `row` (rowbytes), without interlace handling:
// an interlaced image comes as its passes' rows, each of fewer pixels.
// `fn(ctx, row, pixels)` sees each; it returns false to stop (and says why
// in st->error).
using RowFn = bool (*)(void* ctx, ReadState* st, const char* row, uint32_t pixels);
bool ReadRows(ReadState* st, char* row, RowFn fn, void* ctx) {
  if (setjmp(png_jmpbuf(st->png))) return false;
  for (int pass = 0; pass < (st->interlaced ? 7 : 1); ++pass) {
    const uint32_t cols = st->interlaced ? PNG_PASS_COLS(st->width, pass) : st->width;
    const uint32_t rows = st->interlaced ? PNG_PASS_ROWS(st->height, pass) : st->height;
    if (cols == 0) continue;  // libpng skips a pass without pixels
    for (uint32_t y = 0; y < rows; ++y) {
      png_read_row(st->png, reinterpret_cast<png_bytep>(row), nullptr);
      if (!fn(ctx, st, row, cols)) return false;
    }
  }
  png_read_end(st->png, nullptr);
  return true;
}

std::string ShapeText(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

absl::Status Failed(const ReadState& st) {
  return absl::InvalidArgumentError(absl::StrCat("not a valid PNG file: ", st.error));
}

absl::Status Start(absl::string_view file, const PngDecodeOptions& options, bool interlace_handling,
                   ReadState* st) {
  if (file.size() < 8 || png_sig_cmp(reinterpret_cast<png_const_bytep>(file.data()), 0, 8) != 0) {
    return absl::InvalidArgumentError("not a PNG file: no PNG signature");
  }
  st->file = file;
  st->max_pixel_bytes = options.max_pixel_bytes;
  st->interlace_handling = interlace_handling;
  st->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, st, OnError, OnWarning);
  if (st->png == nullptr) return absl::ResourceExhaustedError("png_create_read_struct failed");
  st->info = png_create_info_struct(st->png);
  if (st->info == nullptr) return absl::ResourceExhaustedError("png_create_info_struct failed");
  if (!ReadHeader(st)) return Failed(*st);
  return absl::OkStatus();
}

// How a decoded PNG of `dtype` and shape [H,W,C] becomes a feature's tensor
// (the rules of FitPngToFeature).
struct Fit {
  bool drop_alpha = false;     // C 2 -> 1, 4 -> 3 (the alpha must be opaque)
  std::vector<int64_t> shape;  // the tensor's
};

absl::Status Mismatch(DataType png_dtype, absl::Span<const int64_t> png_shape, DataType want_dtype,
                      absl::Span<const int64_t> want_shape, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("the PNG (", InfoOf(png_dtype).name, " ", ShapeText(png_shape),
                   ") does not fit the feature (", InfoOf(want_dtype).name, " ",
                   ShapeText(want_shape), "): ", why));
}

absl::Status NotOpaque(DataType png_dtype, absl::Span<const int64_t> png_shape, DataType want_dtype,
                       absl::Span<const int64_t> want_shape) {
  return absl::FailedPreconditionError(Mismatch(png_dtype, png_shape, want_dtype, want_shape,
                                                "its alpha channel is not fully opaque")
                                           .message());
}

absl::StatusOr<Fit> PlanFit(DataType dtype, absl::Span<const int64_t> shape, DataType want_dtype,
                            absl::Span<const int64_t> want_shape) {
  const auto mismatch = [&](absl::string_view why) {
    return Mismatch(dtype, shape, want_dtype, want_shape, why);
  };
  if (shape.size() != 3) return mismatch("not a DecodePng result");
  if (dtype != want_dtype) {
    return mismatch(want_dtype == DataType::kUint16  ? "the feature needs a 16-bit PNG"
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
  Fit fit;
  int64_t c = shape[2];
  if ((c == 2 || c == 4) && want_c == c - 1) {
    fit.drop_alpha = true;
    --c;
  }
  if (c != want_c) return mismatch(absl::StrCat(c, " channels, the feature has ", want_c));
  fit.shape = {shape[0], shape[1]};
  if (want_shape.size() == 3) fit.shape.push_back(c);
  return fit;
}

// The type of the PNG `st` has started reading: its dtype and [H, W, C].
TensorType TypeOf(const ReadState& st) {
  return {st.depth == 16 ? DataType::kUint16 : DataType::kUint8,
          {st.height, st.width, st.channels}};
}

// Starts reading `file` into *st and plans how it fits the feature.
absl::StatusOr<Fit> StartFit(absl::string_view file, const PngDecodeOptions& options,
                             bool interlace_handling, DataType want_dtype,
                             absl::Span<const int64_t> want_shape, ReadState* st) {
  if (auto s = Start(file, options, interlace_handling, st); !s.ok()) return s;
  const TensorType png = TypeOf(*st);
  return PlanFit(png.dtype, png.shape, want_dtype, want_shape);
}

// True when every pixel's last sample (of `item` bytes) of `pixels` pixels
// of `c` samples is all ones (opaque).
bool Opaque(const char* p, size_t pixels, size_t c, size_t item) {
  for (size_t i = 0; i < pixels; ++i) {
    const char* a = p + (i * c + c - 1) * item;
    for (size_t k = 0; k < item; ++k) {
      if (a[k] != '\xff') return false;
    }
  }
  return true;
}

// Moves pixels of `c` samples to `c - 1` (dropping the last), in place.
void DropLastSample(char* p, size_t pixels, size_t c, size_t item) {
  const size_t keep = (c - 1) * item;
  for (size_t i = 0; i < pixels; ++i) std::memmove(p + i * keep, p + i * c * item, keep);
}

}  // namespace

absl::StatusOr<Tensor> DecodePng(absl::string_view file, const PngDecodeOptions& options) {
  ReadState st;
  if (auto s = Start(file, options, /*interlace_handling=*/true, &st); !s.ok()) return s;
  Tensor t;
  t.materialized.resize(st.rowbytes * st.height);
  if (!ReadImageInto(&st, t.materialized.data())) return Failed(st);
  TensorType type = TypeOf(st);
  t.dtype = type.dtype;
  t.shape = std::move(type.shape);
  return t;
}

absl::StatusOr<TensorType> PngTypeOf(absl::string_view file, const PngDecodeOptions& options) {
  ReadState st;
  if (auto s = Start(file, options, /*interlace_handling=*/true, &st); !s.ok()) return s;
  return TypeOf(st);
}

absl::Status PngTypeFits(const TensorType& png, DataType want_dtype,
                         absl::Span<const int64_t> want_shape) {
  return PlanFit(png.dtype, png.shape, want_dtype, want_shape).status();
}

absl::Status CheckPngFitsFeature(absl::string_view file, DataType want_dtype,
                                 absl::Span<const int64_t> want_shape,
                                 const PngDecodeOptions& options) {
  ReadState st;
  auto fit = StartFit(file, options, /*interlace_handling=*/false, want_dtype, want_shape, &st);
  if (!fit.ok()) return fit.status();
  struct Ctx {
    bool drop_alpha;
    bool transparent = false;
  } ctx{fit->drop_alpha};
  const RowFn check = [](void* c, ReadState* s, const char* row, uint32_t pixels) {
    auto* x = static_cast<Ctx*>(c);
    if (x->drop_alpha && !Opaque(row, pixels, s->channels, s->depth / 8)) {
      x->transparent = true;
      s->error = "alpha";
      return false;
    }
    return true;
  };
  std::string row(st.rowbytes, '\0');
  if (!ReadRows(&st, row.data(), check, &ctx)) {
    if (ctx.transparent) {
      const TensorType png = TypeOf(st);
      return NotOpaque(png.dtype, png.shape, want_dtype, want_shape);
    }
    return Failed(st);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> PngToTensorProto(absl::string_view file, DataType want_dtype,
                                             absl::Span<const int64_t> want_shape,
                                             const PngDecodeOptions& options) {
  ReadState st;
  auto fit = StartFit(file, options, /*interlace_handling=*/true, want_dtype, want_shape, &st);
  if (!fit.ok()) return fit.status();
  const TensorType png = TypeOf(st);
  auto header = EncodeTensorHeader(png.dtype, fit->shape);
  if (!header.ok()) return header.status();
  // The rows land after the header as decoded (all channels), then an
  // opaque alpha is squeezed out in place: one buffer, never a second copy.
  std::string out = std::move(*header);
  const size_t at = out.size();
  const size_t pixels = size_t{st.width} * st.height;
  out.resize(at + st.rowbytes * st.height);
  if (!ReadImageInto(&st, out.data() + at)) return Failed(st);
  if (fit->drop_alpha) {
    const size_t item = st.depth / 8;
    if (!Opaque(out.data() + at, pixels, st.channels, item)) {
      return NotOpaque(png.dtype, png.shape, want_dtype, want_shape);
    }
    DropLastSample(out.data() + at, pixels, st.channels, item);
    out.resize(at + pixels * (st.channels - 1) * item);
  }
  return out;
}

absl::StatusOr<Tensor> FitPngToFeature(Tensor png, DataType want_dtype,
                                       absl::Span<const int64_t> want_shape) {
  if (png.data_in_input) {
    return Mismatch(png.dtype, png.shape, want_dtype, want_shape, "not a DecodePng result");
  }
  auto fit = PlanFit(png.dtype, png.shape, want_dtype, want_shape);
  if (!fit.ok()) return fit.status();
  if (fit->drop_alpha) {
    const size_t c = static_cast<size_t>(png.shape[2]);
    const size_t item = InfoOf(png.dtype).itemsize;
    const size_t px = png.materialized.size() / (c * item);
    if (!Opaque(png.materialized.data(), px, c, item)) {
      return Mismatch(png.dtype, png.shape, want_dtype, want_shape,
                      "its alpha channel is not fully opaque");
    }
    DropLastSample(png.materialized.data(), px, c, item);
    png.materialized.resize(px * (c - 1) * item);
  }
  png.shape = fit->shape;
  return png;
}

namespace {

uint32_t BigEndian32(absl::string_view b, size_t at) {
  return static_cast<uint32_t>(static_cast<uint8_t>(b[at])) << 24 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 1])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 2])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 3]));
}

// The channel counts DecodePng may give for a colour type, without a tRNS
// chunk first; then with one (it adds alpha), or with an opaque alpha that
// FitPngToFeature drops. Empty for an unknown colour type.
std::vector<int64_t> ChannelsOf(int color_type) {
  switch (color_type) {
    case 0:
      return {1, 2};
    case 2:
    case 3:
      return {3, 4};
    case 4:
      return {2, 1};
    case 6:
      return {4, 3};
  }
  return {};
}

}  // namespace

DataType PngHeader::dtype() const { return bit_depth == 16 ? DataType::kUint16 : DataType::kUint8; }

int PngHeader::channels() const {
  const std::vector<int64_t> c = ChannelsOf(color_type);
  return c.empty() ? 0 : static_cast<int>(c.front());
}

absl::StatusOr<std::optional<PngHeader>> ParsePngHeader(absl::string_view prefix) {
  static constexpr absl::string_view kSignature("\x89PNG\r\n\x1a\n", 8);
  const size_t n = std::min(prefix.size(), kSignature.size());
  if (prefix.substr(0, n) != kSignature.substr(0, n)) {
    return absl::InvalidArgumentError("no PNG signature");
  }
  if (prefix.size() < kPngHeaderBytes) return std::optional<PngHeader>();  // not all there yet
  if (BigEndian32(prefix, 8) != 13 || prefix.substr(12, 4) != "IHDR") {
    return absl::InvalidArgumentError("the first chunk is not a 13-byte IHDR");
  }
  const uint32_t crc =
      static_cast<uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(prefix.data() + 12), 17));
  if (crc != BigEndian32(prefix, 29)) return absl::InvalidArgumentError("IHDR CRC mismatch");
  PngHeader h;
  h.width = BigEndian32(prefix, 16);
  h.height = BigEndian32(prefix, 20);
  h.bit_depth = static_cast<uint8_t>(prefix[24]);
  h.color_type = static_cast<uint8_t>(prefix[25]);
  if (h.width == 0 || h.height == 0 || h.width > 0x7fffffffu || h.height > 0x7fffffffu) {
    return absl::InvalidArgumentError("image width or height is 0 or too large");
  }
  const int depth = h.bit_depth;
  bool depth_ok = false;
  switch (h.color_type) {
    case 0:
      depth_ok = depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16;
      break;
    case 3:
      depth_ok = depth == 1 || depth == 2 || depth == 4 || depth == 8;
      break;
    case 2:
    case 4:
    case 6:
      depth_ok = depth == 8 || depth == 16;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown colour type ", h.color_type));
  }
  if (!depth_ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("bit depth ", depth, " with colour type ", h.color_type));
  }
  if (prefix[26] != 0 || prefix[27] != 0 || static_cast<uint8_t>(prefix[28]) > 1) {
    return absl::InvalidArgumentError("unknown compression, filter or interlace method");
  }
  h.interlaced = prefix[28] == 1;
  return std::optional<PngHeader>(h);
}

bool PngHeaderMayFit(const PngHeader& header, const TensorType& want) {
  if (want.dtype != header.dtype()) return false;
  const std::vector<int64_t> channels = ChannelsOf(header.color_type);
  auto may_give = [&](int64_t c) {
    return std::find(channels.begin(), channels.end(), c) != channels.end();
  };
  if (want.shape.size() == 2) return may_give(1);
  if (want.shape.size() == 3) return may_give(want.shape[2]);
  return false;
}

}  // namespace tfrecordfs::tensor
