// The stored-deflate PNG view: whole files decode (libpng, and PIL when
// installed) to exactly the tensor's pixels, any byte range equals the same
// slice of the whole file; DecodePng of every PNG flavour libpng writes;
// FitPngToFeature.
#include <png.h>
#include <zlib.h>

#include <csetjmp>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/tensor/png.h"

namespace tfrecordfs::tensor {
namespace {

using ::testing::HasSubstr;

std::string RandomPixels(const PngGeometry& g, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string p(g.PixelBytes(), '\0');
  for (char& c : p) c = static_cast<char>(rng());
  return p;
}

PngGeometry Geo(DataType dt, std::vector<int64_t> shape) {
  auto g = PngGeometryOf(dt, shape);
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

struct Shape {
  DataType dt;
  std::vector<int64_t> shape;
};
const std::vector<Shape> kShapes = {
    {DataType::kUint8, {1, 1}},        {DataType::kUint8, {3, 5, 3}},
    {DataType::kUint8, {7, 2, 1}},     {DataType::kUint8, {4, 9, 2}},
    {DataType::kUint16, {2, 3, 4}},    {DataType::kUint16, {1000, 70}},
    {DataType::kUint8, {300, 257, 4}}, {DataType::kUint16, {130, 200, 3}},
    {DataType::kUint8, {1, 70000, 1}},  // one row longer than a stored block
};

TEST(PngGeometryOf, Shapes) {
  EXPECT_FALSE(PngGeometryOf(DataType::kFloat, {2, 2}).ok());
  EXPECT_FALSE(PngGeometryOf(DataType::kUint8, {2}).ok());
  EXPECT_FALSE(PngGeometryOf(DataType::kUint8, {2, 2, 5}).ok());
  EXPECT_FALSE(PngGeometryOf(DataType::kUint8, {0, 2}).ok());
  EXPECT_FALSE(PngGeometryOf(DataType::kUint8, {2, 0, 3}).ok());
  EXPECT_FALSE(PngGeometryOf(DataType::kUint8, {int64_t{1} << 31, 1}).ok());
  EXPECT_TRUE(PngGeometryOf(DataType::kUint8, {2, 2}).value().rank2);
  EXPECT_FALSE(PngGeometryOf(DataType::kUint8, {2, 2, 1}).value().rank2);
}

TEST(PngSize, FormulaForASmallImage) {
  // 1x1 gray8: raw 2 bytes, one block: zlib 2+5+2+4 = 13; one chunk.
  EXPECT_EQ(PngSize(Geo(DataType::kUint8, {1, 1})), 8u + 25 + 12 + 13 + 12);
}

TEST(EncodePng, DecodesToThePixels) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(absl::StrCat(InfoOf(s.dt).name, " ", s.shape[0], "x", s.shape[1]));
    const PngGeometry g = Geo(s.dt, s.shape);
    const std::string pixels = RandomPixels(g, 1);
    auto png = EncodePng(g, pixels);
    ASSERT_TRUE(png.ok()) << png.status();
    EXPECT_EQ(png->size(), PngSize(g));
    auto t = DecodePng(*png);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->dtype, s.dt);
    EXPECT_EQ(t->shape, (std::vector<int64_t>{s.shape[0], s.shape[1], g.channels}));
    EXPECT_TRUE(t->materialized == pixels);
    auto fit = FitPngToFeature(*t, s.dt, s.shape);
    ASSERT_TRUE(fit.ok()) << fit.status();
    EXPECT_EQ(fit->shape, s.shape);
  }
}

TEST(ReadPngRange, AnyRangeIsTheSliceOfTheWholeFile) {
  std::mt19937 rng(5);
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(absl::StrCat(InfoOf(s.dt).name, " ", s.shape[0], "x", s.shape[1]));
    const PngGeometry g = Geo(s.dt, s.shape);
    const std::string pixels = RandomPixels(g, 2);
    const std::string whole = *EncodePng(g, pixels);
    uint64_t fetched = 0;
    PixelSource source = [&](uint64_t off, char* buf, size_t n) {
      EXPECT_LE(off + n, pixels.size());
      fetched += n;
      std::memcpy(buf, pixels.data() + off, n);
      return absl::OkStatus();
    };
    for (int i = 0; i < 300; ++i) {
      const uint64_t off = rng() % whole.size();
      const size_t n = i % 3 == 0 ? std::min<size_t>(1 + rng() % 16, whole.size() - off)
                                  : rng() % (whole.size() - off + 1);
      std::string got(n, '\x55');
      ASSERT_EQ(ReadPngRange(g, source, off, got.data(), n), absl::OkStatus()) << off << "+" << n;
      ASSERT_TRUE(got == whole.substr(off, n)) << off << "+" << n;
    }
    // A short read in the middle of the first chunk's data reads only its pixels.
    if (whole.size() > 2 * kIdatPayload) {
      fetched = 0;
      char buf[100];
      ASSERT_TRUE(ReadPngRange(g, source, 33 + 1000, buf, sizeof buf).ok());
      EXPECT_LE(fetched, sizeof buf + 2);
      // Touching the first chunk's CRC costs that chunk, not the image.
      fetched = 0;
      ASSERT_TRUE(ReadPngRange(g, source, 33 + 8 + kIdatPayload, buf, 4).ok());
      EXPECT_LE(fetched, kIdatPayload + 2);
      EXPECT_TRUE(absl::string_view(buf, 4) == whole.substr(33 + 8 + kIdatPayload, 4));
    }
    char x;
    EXPECT_TRUE(absl::IsOutOfRange(ReadPngRange(g, source, whole.size(), &x, 1)));
    EXPECT_TRUE(ReadPngRange(g, source, whole.size(), &x, 0).ok());
  }
}

TEST(ReadPngRange, SourceErrorsPassThrough) {
  const PngGeometry g = Geo(DataType::kUint8, {4, 4});
  PixelSource failing = [](uint64_t, char*, size_t) { return absl::DataLossError("shard gone"); };
  std::string out(PngSize(g), '\0');
  EXPECT_TRUE(absl::IsDataLoss(ReadPngRange(g, failing, 0, out.data(), out.size())));
  EXPECT_TRUE(ReadPngRange(g, failing, 0, out.data(), 33).ok());  // header needs no pixels
}

// Decodes with PIL, if installed, and compares a digest of the pixels.
TEST(EncodePng, PilAgrees) {
  if (std::system("/usr/bin/python3 -c 'import PIL' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3-pil not installed (scripts/setup installs it)";
  }
  const test::TempDir tmp("png_test");
  ASSERT_FALSE(tmp.path().empty());
  const std::string& dir = tmp.path();
  for (const Shape& s : {kShapes[1], kShapes[3], kShapes[6], kShapes[5]}) {
    const PngGeometry g = Geo(s.dt, s.shape);
    const std::string pixels = RandomPixels(g, 3);
    ASSERT_TRUE(WriteFileAtomically(dir + "/a.png", *EncodePng(g, pixels)).ok());
    ASSERT_TRUE(WriteFileAtomically(dir + "/a.raw", pixels).ok());
    // PIL reads 16-bit gray as mode I (32-bit ints) and verifies CRCs.
    const std::string script =
        absl::StrCat("from PIL import Image\n", "im = Image.open('", dir, "/a.png'); im.load()\n",
                     "raw = open('", dir, "/a.raw', 'rb').read()\n", "assert im.size == (", g.width,
                     ", ", g.height, "), im.size\n", "got = im.tobytes()\n",
                     "if im.mode == 'I':\n  import struct\n  got = struct.pack('<%dH' % (len(raw) "
                     "// 2), *im.getdata())\n",
                     "assert got == raw, (im.mode, len(got), len(raw))\n");
    ASSERT_TRUE(WriteFileAtomically(dir + "/t.py", script).ok());
    if (g.depth == 16 && g.channels != 1) continue;  // PIL has no 16-bit RGB(A) mode
    EXPECT_EQ(std::system(("/usr/bin/python3 " + dir + "/t.py").c_str()), 0)
        << s.shape[0] << "x" << s.shape[1];
  }
}

// ---------------------------------------------------------------------------
// DecodePng of what other writers produce: libpng's classic writer.

struct WriteSpec {
  WriteSpec(uint32_t w, uint32_t h, int color, int depth, bool interlace = false)
      : w(w), h(h), color(color), depth(depth), interlace(interlace) {}
  uint32_t w, h;
  int color, depth;
  bool interlace = false;
  std::vector<png_color> palette;
  std::string trns;  // palette alpha entries, or a 2/6-byte gray/RGB key
  std::string rows;  // packed rows as PNG stores them (big-endian 16-bit)
};

void OnWriteData(png_structp png, png_bytep data, size_t n) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<char*>(data), n);
}
void OnFlush(png_structp) {}

std::string WriteWithLibpng(const WriteSpec& s) {
  std::string out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    ADD_FAILURE() << "libpng write failed";
    return "";
  }
  png_set_write_fn(png, &out, OnWriteData, OnFlush);
  png_set_IHDR(png, info, s.w, s.h, s.depth, s.color,
               s.interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (!s.palette.empty()) png_set_PLTE(png, info, s.palette.data(), s.palette.size());
  png_color_16 key{};
  if (!s.trns.empty()) {
    if (s.color == PNG_COLOR_TYPE_PALETTE) {
      png_set_tRNS(png, info, reinterpret_cast<png_const_bytep>(s.trns.data()), s.trns.size(),
                   nullptr);
    } else {
      key.gray = static_cast<uint8_t>(s.trns[0]);
      png_set_tRNS(png, info, nullptr, 0, &key);
    }
  }
  png_write_info(png, info);
  const size_t rowbytes = s.rows.size() / s.h;
  std::vector<png_bytep> rows(s.h);
  for (uint32_t y = 0; y < s.h; ++y) {
    rows[y] = reinterpret_cast<png_bytep>(const_cast<char*>(s.rows.data()) + y * rowbytes);
  }
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

TEST(DecodePng, PaletteGrayLowDepthsAlphaInterlace) {
  // 2x2 palette image, 2-bit indices: rows 0b00011011 -> 0,1 / 2,3.
  WriteSpec pal{2, 2, PNG_COLOR_TYPE_PALETTE, 2};
  pal.palette = {{10, 20, 30}, {40, 50, 60}, {70, 80, 90}, {1, 2, 3}};
  pal.rows = std::string("\x10\xb0", 2);  // indices (0,1), (2,3)
  auto t = DecodePng(WriteWithLibpng(pal));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape, (std::vector<int64_t>{2, 2, 3}));
  EXPECT_EQ(t->materialized, std::string("\x0a\x14\x1e\x28\x32\x3c\x46\x50\x5a\x01\x02\x03", 12));
  // With tRNS: RGBA.
  pal.trns = std::string("\x00\x80", 2);
  t = DecodePng(WriteWithLibpng(pal));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape, (std::vector<int64_t>{2, 2, 4}));
  EXPECT_EQ(t->materialized.substr(0, 8), std::string("\x0a\x14\x1e\x00\x28\x32\x3c\x80", 8));
  EXPECT_EQ(t->materialized.substr(12, 4), std::string("\x01\x02\x03\xff", 4));

  // 1-bit gray, 3 wide: 101 -> 255 0 255 (scaled to 8 bits).
  WriteSpec gray1{3, 1, PNG_COLOR_TYPE_GRAY, 1};
  gray1.rows = "\xa0";
  t = DecodePng(WriteWithLibpng(gray1));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape, (std::vector<int64_t>{1, 3, 1}));
  EXPECT_EQ(t->materialized, std::string("\xff\x00\xff", 3));

  // Gray+alpha 8-bit: [H,W,2].
  WriteSpec ga{2, 1, PNG_COLOR_TYPE_GRAY_ALPHA, 8};
  ga.rows = "\x01\x02\x03\x04";
  t = DecodePng(WriteWithLibpng(ga));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape, (std::vector<int64_t>{1, 2, 2}));
  EXPECT_EQ(t->materialized, "\x01\x02\x03\x04");

  // Interlaced 16-bit RGB, 9x7: samples come back little-endian.
  WriteSpec rgb16{9, 7, PNG_COLOR_TYPE_RGB, 16, true};
  std::mt19937 rng(3);
  for (int i = 0; i < 9 * 7 * 6; ++i) rgb16.rows.push_back(static_cast<char>(rng()));
  t = DecodePng(WriteWithLibpng(rgb16));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype, DataType::kUint16);
  EXPECT_EQ(t->shape, (std::vector<int64_t>{7, 9, 3}));
  std::string le = rgb16.rows;
  for (size_t i = 0; i < le.size(); i += 2) std::swap(le[i], le[i + 1]);
  EXPECT_TRUE(t->materialized == le);
}

TEST(DecodePng, BadFiles) {
  const PngGeometry g = Geo(DataType::kUint8, {20, 30, 3});
  const std::string good = *EncodePng(g, RandomPixels(g, 4));
  EXPECT_THAT(DecodePng("GIF89a....").status().message(), HasSubstr("signature"));
  for (size_t n : {size_t{0}, size_t{8}, size_t{20}, size_t{40}, good.size() / 2, good.size() - 13,
                   good.size() - 1}) {
    auto t = DecodePng(good.substr(0, n));
    EXPECT_TRUE(absl::IsInvalidArgument(t.status())) << n << " " << t.status();
  }
  std::string bad_crc = good;
  bad_crc[29] ^= 1;  // IHDR CRC
  EXPECT_THAT(DecodePng(bad_crc).status().message(), HasSubstr("CRC"));
  std::string bad_adler = good;
  bad_adler[good.size() - 12 - 4 - 1] ^= 1;  // last byte of the adler32
  EXPECT_FALSE(DecodePng(bad_adler).ok());
  PngDecodeOptions small;
  small.max_pixel_bytes = 100;
  EXPECT_THAT(DecodePng(good, small).status().message(), HasSubstr("limit"));
}

TEST(ParsePngHeader, PrefixesAndDamage) {
  const PngGeometry g = Geo(DataType::kUint16, {20, 30, 4});
  const std::string good = *EncodePng(g, RandomPixels(g, 5));
  for (size_t n = 0; n < kPngHeaderBytes; ++n) {
    auto h = ParsePngHeader(good.substr(0, n));
    ASSERT_TRUE(h.ok()) << n << ": " << h.status();
    EXPECT_FALSE(h->has_value()) << n;
  }
  for (size_t n : {size_t{kPngHeaderBytes}, good.size()}) {
    auto h = ParsePngHeader(good.substr(0, n));
    ASSERT_TRUE(h.ok()) << h.status();
    ASSERT_TRUE(h->has_value());
    EXPECT_EQ((*h)->width, 30u);
    EXPECT_EQ((*h)->height, 20u);
    EXPECT_EQ((*h)->bit_depth, 16);
    EXPECT_EQ((*h)->color_type, 6);
    EXPECT_FALSE((*h)->interlaced);
    EXPECT_EQ((*h)->dtype(), DataType::kUint16);
    EXPECT_EQ((*h)->channels(), 4);
  }
  EXPECT_TRUE(absl::EndsWith(good, kPngTrailer));
  EXPECT_THAT(ParsePngHeader("GIF89a").status().message(), HasSubstr("no PNG signature"));
  std::string bad = good;
  bad[29] ^= 1;
  EXPECT_THAT(ParsePngHeader(bad).status().message(), HasSubstr("IHDR CRC mismatch"));
  bad = good;
  bad[12] = 'X';  // the first chunk's type
  EXPECT_THAT(ParsePngHeader(bad).status().message(), HasSubstr("not a 13-byte IHDR"));
  // A bit depth the colour type does not allow, with a CRC that matches.
  bad = good;
  bad[24] = 4;
  const uint32_t crc =
      static_cast<uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(bad.data() + 12), 17));
  for (int i = 0; i < 4; ++i) bad[29 + i] = static_cast<char>(crc >> (24 - 8 * i));
  EXPECT_THAT(ParsePngHeader(bad).status().message(), HasSubstr("bit depth 4 with colour type 6"));
}

TEST(PngHeaderMayFit, ChannelsATrnsChunkMayAddOrFitMayDrop) {
  PngHeader rgb;
  rgb.bit_depth = 8;
  rgb.color_type = 2;
  EXPECT_TRUE(PngHeaderMayFit(rgb, {DataType::kUint8, {5, 5, 3}}));
  EXPECT_TRUE(PngHeaderMayFit(rgb, {DataType::kUint8, {5, 5, 4}}));  // tRNS
  EXPECT_FALSE(PngHeaderMayFit(rgb, {DataType::kUint8, {5, 5}}));
  EXPECT_FALSE(PngHeaderMayFit(rgb, {DataType::kUint16, {5, 5, 3}}));
  PngHeader gray_alpha;
  gray_alpha.bit_depth = 16;
  gray_alpha.color_type = 4;
  EXPECT_TRUE(PngHeaderMayFit(gray_alpha, {DataType::kUint16, {5, 5}}));  // opaque alpha dropped
  EXPECT_TRUE(PngHeaderMayFit(gray_alpha, {DataType::kUint16, {5, 5, 2}}));
  EXPECT_FALSE(PngHeaderMayFit(gray_alpha, {DataType::kUint16, {5, 5, 3}}));
  EXPECT_FALSE(PngHeaderMayFit(gray_alpha, {DataType::kUint16, {5}}));
}

TEST(FitPngToFeature, Rules) {
  Tensor gray;
  gray.dtype = DataType::kUint8;
  gray.shape = {2, 2, 1};
  gray.materialized = "abcd";
  EXPECT_EQ(FitPngToFeature(gray, DataType::kUint8, {5, 5}).value().shape,
            (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(FitPngToFeature(gray, DataType::kUint8, {5, 5, 1}).value().shape,
            (std::vector<int64_t>{2, 2, 1}));  // a [H,W,1] feature stays rank 3
  EXPECT_THAT(FitPngToFeature(gray, DataType::kUint16, {5, 5}).status().message(),
              HasSubstr("16-bit"));
  EXPECT_THAT(FitPngToFeature(gray, DataType::kUint8, {5, 5, 3}).status().message(),
              HasSubstr("1 channels, the feature has 3"));
  Tensor rgba;
  rgba.dtype = DataType::kUint8;
  rgba.shape = {1, 2, 4};
  rgba.materialized = std::string("\x01\x02\x03\xff\x04\x05\x06\xff", 8);
  auto rgb = FitPngToFeature(rgba, DataType::kUint8, {1, 1, 3});
  ASSERT_TRUE(rgb.ok()) << rgb.status();
  EXPECT_EQ(rgb->shape, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(rgb->materialized, "\x01\x02\x03\x04\x05\x06");
  EXPECT_TRUE(FitPngToFeature(rgba, DataType::kUint8, {1, 1, 4}).ok());
  rgba.materialized[7] = 0x7f;
  EXPECT_THAT(FitPngToFeature(rgba, DataType::kUint8, {1, 1, 3}).status().message(),
              HasSubstr("opaque"));
}

TEST(DecodePng, WiderThanLibpngsDefaultLimitComesBack) {
  // Issue 21 item 22: a uint8 [1, 1000001] tensor shows as a PNG that libpng
  // refused by default (1,000,000 pixels a side).
  const PngGeometry g = Geo(DataType::kUint8, {1, 1000001});
  const std::string pixels = RandomPixels(g, 9);
  auto t = DecodePng(EncodePng(g, pixels).value());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape, (std::vector<int64_t>{1, 1000001, 1}));
  EXPECT_TRUE(t->materialized == pixels);
  const PngGeometry tall = Geo(DataType::kUint8, {1000001, 1});
  auto proto = PngToTensorProto(EncodePng(tall, pixels).value(), DataType::kUint8, {1, 1});
  ASSERT_TRUE(proto.ok()) << proto.status();
  EXPECT_TRUE(*proto == EncodeTensor(DataType::kUint8, {1000001, 1}, pixels).value());
}

// The streaming checks and the straight-into-the-proto conversion agree with
// DecodePng + FitPngToFeature + EncodeTensor on every flavour and feature.
TEST(PngToTensorProto, AgreesWithDecodeFitEncode) {
  std::mt19937 rng(11);
  auto random_rows = [&](size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    return s;
  };
  std::vector<std::string> files;
  for (bool interlace : {false, true}) {
    WriteSpec rgba{13, 9, PNG_COLOR_TYPE_RGB_ALPHA, 8, interlace};
    rgba.rows = random_rows(13 * 9 * 4);
    files.push_back(WriteWithLibpng(rgba));
    for (size_t i = 3; i < rgba.rows.size(); i += 4) rgba.rows[i] = '\xff';  // opaque
    files.push_back(WriteWithLibpng(rgba));
    WriteSpec ga16{7, 5, PNG_COLOR_TYPE_GRAY_ALPHA, 16, interlace};
    ga16.rows = std::string(7 * 5 * 4, '\xff');
    ga16.rows[0] = 3;
    files.push_back(WriteWithLibpng(ga16));
    WriteSpec gray{1, 1, PNG_COLOR_TYPE_GRAY, 8, interlace};
    gray.rows = "\x42";
    files.push_back(WriteWithLibpng(gray));
  }
  const std::vector<std::pair<DataType, std::vector<int64_t>>> features = {
      {DataType::kUint8, {1, 1, 3}}, {DataType::kUint8, {1, 1, 4}},  {DataType::kUint8, {1, 1}},
      {DataType::kUint16, {1, 1}},   {DataType::kUint16, {1, 1, 1}}, {DataType::kUint8, {1}}};
  for (size_t f = 0; f < files.size(); ++f) {
    auto decoded = DecodePng(files[f]);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    auto type = PngTypeOf(files[f]);
    ASSERT_TRUE(type.ok()) << type.status();
    EXPECT_EQ(type->dtype, decoded->dtype);
    EXPECT_EQ(type->shape, decoded->shape);
    for (const auto& [dtype, shape] : features) {
      SCOPED_TRACE(
          absl::StrCat("file ", f, " feature ", InfoOf(dtype).name, " rank ", shape.size()));
      auto fit = FitPngToFeature(*decoded, dtype, shape);
      auto check = CheckPngFitsFeature(files[f], dtype, shape);
      auto proto = PngToTensorProto(files[f], dtype, shape);
      EXPECT_EQ(fit.ok(), check.ok()) << fit.status() << " / " << check;
      EXPECT_EQ(fit.ok(), proto.ok()) << fit.status() << " / " << proto.status();
      if (!fit.ok()) {
        EXPECT_EQ(fit.status().message(), check.message());
        EXPECT_EQ(absl::IsFailedPrecondition(check),
                  fit.status().message().find("opaque") != absl::string_view::npos);
        EXPECT_EQ(PngTypeFits(*type, dtype, shape).ok(), absl::IsFailedPrecondition(check));
        continue;
      }
      EXPECT_TRUE(PngTypeFits(*type, dtype, shape).ok());
      EXPECT_TRUE(*proto == EncodeTensor(fit->dtype, fit->shape, fit->materialized).value());
    }
  }
  // Damaged pixels: every form refuses.
  const PngGeometry g = Geo(DataType::kUint8, {20, 30, 3});
  std::string bad = *EncodePng(g, RandomPixels(g, 4));
  bad[bad.size() - 12 - 4 - 1] ^= 1;  // the adler32
  EXPECT_TRUE(absl::IsInvalidArgument(CheckPngFitsFeature(bad, DataType::kUint8, {1, 1, 3})));
  EXPECT_TRUE(absl::IsInvalidArgument(PngToTensorProto(bad, DataType::kUint8, {1, 1, 3}).status()));
}

}  // namespace
}  // namespace tfrecordfs::tensor
