// sample and synthetic: image-like datasets (commands.h).

// jpeglib.h uses size_t and FILE without including their headers: they come
// first, in an order clang-format must keep.
// clang-format off
#include <cstddef>
#include <cstdio>
#include <jpeglib.h>
// clang-format on

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "commands.h"
#include "feature_builders.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/tensor/tensor.h"
#include "write_shards.h"

namespace tfrecordfs::gen {
namespace {

using example::FeatureTable;

constexpr const char* kClasses[] = {"cat", "dog", "raccoon", "bicycle", "teapot"};

// Encodes a synthetic RGB scene (gradient sky, ground, a few coloured boxes)
// as a baseline JPEG. Returns the boxes drawn, normalised to [0, 1].
std::string MakeJpeg(int width, int height, std::mt19937& rng,
                     std::vector<std::array<float, 4>>* boxes, std::vector<int>* labels) {
  std::vector<unsigned char> rgb(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      unsigned char* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
      if (y < height * 2 / 3) {
        p[0] = static_cast<unsigned char>(90 + 100 * y / height);
        p[1] = static_cast<unsigned char>(140 + 80 * y / height);
        p[2] = 230;
      } else {
        p[0] = 60;
        p[1] = static_cast<unsigned char>(120 + 40 * std::sin(x * 0.1));
        p[2] = 50;
      }
    }
  }
  std::uniform_int_distribution<int> nboxes(1, 3), cls(0, 4), col(0, 255);
  const int n = nboxes(rng);
  for (int b = 0; b < n; ++b) {
    std::uniform_int_distribution<int> bx(0, width - width / 4), by(0, height - height / 4);
    const int x0 = bx(rng), y0 = by(rng);
    const int x1 = x0 + width / 8 + bx(rng) % (width / 4),
              y1 = y0 + height / 8 + by(rng) % (height / 4);
    const unsigned char r = static_cast<unsigned char>(col(rng)),
                        g = static_cast<unsigned char>(col(rng)),
                        bl = static_cast<unsigned char>(col(rng));
    for (int y = y0; y < std::min(y1, height); ++y) {
      for (int x = x0; x < std::min(x1, width); ++x) {
        unsigned char* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
        p[0] = r;
        p[1] = g;
        p[2] = bl;
      }
    }
    boxes->push_back(
        {static_cast<float>(x0) / width, static_cast<float>(std::min(x1, width)) / width,
         static_cast<float>(y0) / height, static_cast<float>(std::min(y1, height)) / height});
    labels->push_back(cls(rng));
  }

  jpeg_compress_struct cinfo;
  jpeg_error_mgr jerr;
  cinfo.err = jpeg_std_error(&jerr);
  jpeg_create_compress(&cinfo);
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  jpeg_mem_dest(&cinfo, &out, &out_size);
  cinfo.image_width = static_cast<JDIMENSION>(width);
  cinfo.image_height = static_cast<JDIMENSION>(height);
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, 85, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = &rgb[static_cast<size_t>(cinfo.next_scanline) * width * 3];
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::string jpeg(reinterpret_cast<char*>(out), out_size);
  jpeg_destroy_compress(&cinfo);
  std::free(out);
  return jpeg;
}

}  // namespace

int Sample(const std::string& dir, uint64_t records, uint64_t shards, const Storage& storage) {
  std::mt19937 rng(42);
  absl::Status s = WriteShards(dir, "train", records, shards, storage, [&](uint64_t i) {
    const int width = 160 + static_cast<int>(i % 5) * 32,
              height = 120 + static_cast<int>(i % 3) * 24;
    std::vector<std::array<float, 4>> boxes;
    std::vector<int> labels;
    const std::string jpeg = MakeJpeg(width, height, rng, &boxes, &labels);
    std::vector<float> xmin, xmax, ymin, ymax;
    std::vector<int64_t> label_ids;
    std::vector<absl::string_view> texts;
    for (size_t b = 0; b < boxes.size(); ++b) {
      xmin.push_back(boxes[b][0]);
      xmax.push_back(boxes[b][1]);
      ymin.push_back(boxes[b][2]);
      ymax.push_back(boxes[b][3]);
      label_ids.push_back(labels[b]);
      texts.push_back(kClasses[labels[b]]);
    }
    const std::string filename = absl::StrFormat("img_%05d.jpg", i);
    // A small RGB thumbnail stored the way tf.io.serialize_tensor stores an
    // image tensor (uint8 [24, 32, 3]): the mount shows it as a PNG.
    std::string thumb(24 * 32 * 3, '\0');
    for (size_t p = 0; p < thumb.size(); ++p) {
      const size_t y = p / (32 * 3), x = p / 3 % 32, c = p % 3;
      thumb[p] = static_cast<char>(c == 0 ? x * 8 : c == 1 ? y * 10 : (i * 37) & 0xff);
    }
    const std::string thumbnail =
        tensor::EncodeTensor(tensor::DataType::kUint8, {24, 32, 3}, thumb).value();
    FeatureTable t;
    t.features.push_back(Bytes("image/encoded", {jpeg}));
    t.features.push_back(Bytes("image/filename", {filename}));
    t.features.push_back(Bytes("image/format", {"jpeg"}));
    t.features.push_back(Bytes("image/thumbnail", {thumbnail}));
    t.features.push_back(Int64s("image/height", {height}));
    t.features.push_back(Int64s("image/width", {width}));
    t.features.push_back(Floats("image/object/bbox/xmin", xmin));
    t.features.push_back(Floats("image/object/bbox/xmax", xmax));
    t.features.push_back(Floats("image/object/bbox/ymin", ymin));
    t.features.push_back(Floats("image/object/bbox/ymax", ymax));
    t.features.push_back(Int64s("image/object/class/label", label_ids));
    t.features.push_back(Bytes("image/object/class/text", texts));
    t.features.push_back(Int64s("label", {labels[0]}));
    t.features.push_back(Bytes("class_name", {kClasses[labels[0]]}));
    Sort(&t);
    return example::EncodeExample(t);
  });
  if (!s.ok()) return Fail(s);
  const std::string info = absl::StrCat(
      "{\n  \"name\": \"tfrecordfs-sample\",\n  \"records\": ", records,
      ",\n  \"shards\": ", shards,
      ",\n  \"features\": [\"image/encoded\", \"image/height\", \"image/width\", "
      "\"image/object/bbox/*\", \"image/object/class/*\", \"image/thumbnail\", \"label\", "
      "\"class_name\"]\n}\n");
  if (auto st = WriteFileAtomically(dir + "/dataset_info.json", info); !st.ok()) return Fail(st);
  return 0;
}

int Synthetic(const std::string& dir, uint64_t records, uint64_t shards, uint64_t bytes,
              const std::string& prefix, const Storage& storage) {
  std::mt19937_64 rng(7);
  std::string image(bytes, '\0');
  absl::Status s = WriteShards(dir, prefix, records, shards, storage, [&](uint64_t i) {
    for (size_t k = 0; k + 8 <= image.size(); k += 8) {
      uint64_t v = rng();
      std::memcpy(&image[k], &v, 8);
    }
    if (image.size() >= 3) image.replace(0, 3, "\xff\xd8\xff");
    FeatureTable t;
    if (bytes > 0) t.features.push_back(Bytes("image_raw", {image}));
    t.features.push_back(Int64s("label", {static_cast<int64_t>(i % 1000)}));
    t.features.push_back(Int64s("height", {224}));
    t.features.push_back(Int64s("width", {224}));
    Sort(&t);
    return example::EncodeExample(t);
  });
  if (!s.ok()) return Fail(s);
  return 0;
}

}  // namespace tfrecordfs::gen
