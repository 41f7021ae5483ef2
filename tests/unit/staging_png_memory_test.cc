// Memory of staged PNGs of tensor features (issue 21 item 23): an
// 18000x18000 RGB PNG cost 1.9 GB at validation and 2.95 GB at pack (the
// image decoded, copied to fit, copied again into the TensorProto). Measured
// here as bytes the heap holds at its peak while one call runs, through a
// replaced global operator new (libpng's own buffers are a few rows; zlib's
// window is fixed): validation holds a row, the pack one copy of the pixels.
#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tfrecordfs/staging/record_folder.h"
#include "tfrecordfs/staging/staged_file.h"
#include "tfrecordfs/tensor/png.h"
#include "tfrecordfs/tensor/tensor.h"

namespace {

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};

void Note(int64_t delta) {
  const int64_t now = g_live.fetch_add(delta) + delta;
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}

}  // namespace

void* operator new(size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  Note(static_cast<int64_t>(malloc_usable_size(p)));
  return p;
}
void operator delete(void* p) noexcept {
  if (p == nullptr) return;
  Note(-static_cast<int64_t>(malloc_usable_size(p)));
  std::free(p);
}
void operator delete(void* p, size_t) noexcept { operator delete(p); }

namespace tfrecordfs::staging {
namespace {

using tensor::DataType;

// The most bytes held at once while `fn` runs, above what was held before.
template <typename Fn>
int64_t PeakDuring(Fn fn) {
  const int64_t before = g_live.load();
  g_peak.store(before);
  fn();
  return g_peak.load() - before;
}

// A stored-deflate PNG (tensor::EncodePng): its file is as big as its
// pixels, which the input holds already; the test measures what the call
// adds to that.
std::string BigPng(uint32_t h, uint32_t w, uint32_t c, bool opaque_alpha) {
  std::string pixels(size_t{h} * w * c, '\0');
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<char>(i * 31 + i / 4099);
  if (opaque_alpha) {
    for (size_t i = c - 1; i < pixels.size(); i += c) pixels[i] = '\xff';
  }
  auto g = tensor::PngGeometryOf(DataType::kUint8, {h, w, c});
  return tensor::EncodePng(*g, pixels).value();
}

constexpr uint32_t kH = 1500, kW = 2000;

TEST(PngMemory, PackHoldsThePixelsOnce) {
  const std::string png = BigPng(kH, kW, 3, false);
  const int64_t pixels = int64_t{kH} * kW * 3;
  const std::vector<tensor::TensorType> rgb = {{DataType::kUint8, {1, 1, 3}}};
  int64_t proto_bytes = 0;
  const int64_t peak = PeakDuring([&] {
    auto file = TensorFromFile(".png", png, rgb);
    ASSERT_TRUE(file.ok()) << file.status();
    proto_bytes = static_cast<int64_t>(file->proto.size());
  });
  EXPECT_GE(proto_bytes, pixels);
  EXPECT_LT(peak, pixels + pixels / 8) << "the pack holds the pixels more than once";
}

TEST(PngMemory, PackDroppingAnOpaqueAlphaHoldsTheDecodedPixelsOnce) {
  const std::string png = BigPng(kH, kW, 4, true);
  const int64_t decoded = int64_t{kH} * kW * 4;
  const std::vector<tensor::TensorType> rgb = {{DataType::kUint8, {1, 1, 3}}};
  const int64_t peak = PeakDuring([&] {
    auto file = TensorFromFile(".png", png, rgb);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ(file->matched.shape.size(), 3u);
  });
  EXPECT_LT(peak, decoded + decoded / 8);
}

TEST(PngMemory, ValidationHoldsRowsNotTheImage) {
  const std::string png = BigPng(kH, kW, 4, true);
  const int64_t decoded = int64_t{kH} * kW * 4;
  const std::vector<tensor::TensorType> rgb = {{DataType::kUint8, {1, 1, 3}}};
  const int64_t peak = PeakDuring([&] {
    auto matched = CheckTensorFile(".png", png, rgb);
    ASSERT_TRUE(matched.ok()) << matched.status();
    EXPECT_EQ(matched->shape, rgb[0].shape);
  });
  EXPECT_LT(peak, decoded / 64) << "validation decoded the whole image";
}

}  // namespace
}  // namespace tfrecordfs::staging
