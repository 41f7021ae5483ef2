// tfrecordfs-gen: writes TFRecord datasets with the project's own writer, for
// the demo, the tests and the benchmarks.
//
//   tfrecordfs-gen sample OUTDIR [--records N] [--shards S]
//       object-detection-like records with real JPEG images (libjpeg):
//       image/encoded, image/height, image/width, image/object/bbox/*,
//       image/object/class/{label,text}, label, class_name, and
//       image/thumbnail (a tf.io.serialize_tensor uint8 [24,32,3] tensor).
//   tfrecordfs-gen synthetic OUTDIR --records N --shards S [--bytes B]
//       [--prefix NAME]: N records across S shards; each record holds
//       image_raw (B random bytes behind a JPEG magic), label, height, width.
//   tfrecordfs-gen hostile OUTDIR [--records N]
//       the damaged and strange inputs the mount must survive (truncations,
//       stray bytes, CRC mismatches, a length near 2^64, empty and non-TFRecord
//       files, non-Example payloads, malformed protobuf, wire-format variants,
//       awkward feature names, a record too wide to show, and a shard of N
//       tiny records, default 1000000, 0 for none), each case built with the
//       project's writer plus byte edits. OUTDIR/MANIFEST.txt states what each
//       record really is, for tests/mount/hostile.
//   tfrecordfs-gen tensors OUTDIR [--records N]
//       records whose bytes features are tf.io.serialize_tensor values of
//       every dtype and shape class (.png and .npy views), a list of two
//       tensors, a DT_STRING tensor; OUTDIR/MANIFEST.txt lists each array
//       file with its dtype, shape and bytes (default 12 records).
//   tfrecordfs-gen sequence OUTDIR [--records N]
//       tf.train.SequenceExamples (see SequencePayload; default 14 records).
//   sample and synthetic also take [--compression none|gzip|zlib] (shards
//       named .tfrecord.gz / .tfrecord.zlib, written by ShardWriter as one
//       stream with a full flush every MiB) and, for gzip, [--members M]:
//       each shard is M GZIP members concatenated.
//   tfrecordfs-gen fuzz-seeds OUTDIR
//       small seed inputs for the fuzz targets: OUTDIR/<target>/<name>.
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <zlib.h>

#include <fcntl.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <cstdio>
#include <cstring>
#include <deque>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/sequence.h"
#include "tfrecordfs/tensor/tensor.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/writer.h"
#include "tfrecordfs/repack/pack.h"
#include "tfrecordfs/index/index_file.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/source/inflate.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs {
namespace {

using example::Feature;
using example::FeatureTable;
using example::Kind;

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
    const int x1 = x0 + width / 8 + bx(rng) % (width / 4), y1 = y0 + height / 8 + by(rng) % (height / 4);
    const unsigned char r = static_cast<unsigned char>(col(rng)), g = static_cast<unsigned char>(col(rng)),
                        bl = static_cast<unsigned char>(col(rng));
    for (int y = y0; y < std::min(y1, height); ++y) {
      for (int x = x0; x < std::min(x1, width); ++x) {
        unsigned char* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
        p[0] = r;
        p[1] = g;
        p[2] = bl;
      }
    }
    boxes->push_back({static_cast<float>(x0) / width, static_cast<float>(std::min(x1, width)) / width,
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

Feature Int64s(std::string name, std::vector<int64_t> v) {
  Feature f;
  f.name = std::move(name);
  f.kind = Kind::kInt64;
  f.int64s = std::move(v);
  return f;
}

Feature Floats(std::string name, std::vector<float> v) {
  Feature f;
  f.name = std::move(name);
  f.kind = Kind::kFloat;
  f.floats = std::move(v);
  return f;
}

Feature Bytes(std::string name, std::vector<absl::string_view> v) {
  Feature f;
  f.name = std::move(name);
  f.kind = Kind::kBytes;
  f.bytes = std::move(v);
  return f;
}

void Sort(FeatureTable* t) {
  std::sort(t->features.begin(), t->features.end(),
            [](const Feature& a, const Feature& b) { return a.name < b.name; });
}

// How shards are stored (--compression, --members).
struct Storage {
  source::Codec codec = source::Codec::kNone;
  // GZIP: members per shard (records split evenly, as `cat a.gz b.gz`
  // would join them). Must be 1 for the other codecs.
  uint64_t members = 1;
};

absl::Status WriteShards(const std::string& dir, const std::string& prefix, uint64_t records,
                         uint64_t shards, const Storage& storage,
                         const std::function<std::string(uint64_t)>& make_payload) {
  ::mkdir(dir.c_str(), 0755);
  uint64_t next = 0;
  for (uint64_t s = 0; s < shards; ++s) {
    const uint64_t count = records / shards + (s < records % shards ? 1 : 0);
    // The pack's names: the suffix says the codec (.tfrecord.gz, .tfrecord.zlib).
    const std::string path =
        absl::StrCat(dir, "/", repack::ShardName(prefix, s, shards, storage.codec));
    auto fd = OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!fd.ok()) return fd.status();
    // Each member gets its own writer on a dup of the descriptor: they share
    // the file offset, so the members follow each other.
    const uint64_t members = std::max<uint64_t>(1, storage.members);
    for (uint64_t m = 0; m < members; ++m) {
      const uint64_t in_member = count / members + (m < count % members ? 1 : 0);
      UniqueFd member_fd(::dup(fd->get()));
      if (member_fd.get() < 0) return ErrnoError(errno, absl::StrCat("dup ", path));
      record::ShardWriter w(std::move(member_fd), path, {.codec = storage.codec});
      for (uint64_t i = 0; i < in_member; ++i) {
        if (auto st = w.Append(make_payload(next++)); !st.ok()) return st;
      }
      if (auto st = w.Close(false); !st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

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
  if (!s.ok()) {
    std::cerr << "tfrecordfs-gen: " << s.message() << "\n";
    return 1;
  }
  const std::string info = absl::StrCat(
      "{\n  \"name\": \"tfrecordfs-sample\",\n  \"records\": ", records, ",\n  \"shards\": ", shards,
      ",\n  \"features\": [\"image/encoded\", \"image/height\", \"image/width\", "
      "\"image/object/bbox/*\", \"image/object/class/*\", \"image/thumbnail\", \"label\", "
      "\"class_name\"]\n}\n");
  if (auto st = WriteFileAtomically(dir + "/dataset_info.json", info); !st.ok()) {
    std::cerr << "tfrecordfs-gen: " << st.message() << "\n";
    return 1;
  }
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
  if (!s.ok()) {
    std::cerr << "tfrecordfs-gen: " << s.message() << "\n";
    return 1;
  }
  return 0;
}

// ---- tensors / sequence: serialize_tensor values and SequenceExamples --------

// Deterministic element bytes of feature `salt` of record `r`.
std::string TensorBytes(size_t n, uint64_t r, uint64_t salt) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 31 + r * 7 + salt * 13) & 0xff);
  return s;
}

struct TensorSpec {
  const char* name;
  tensor::DataType dtype;
  std::vector<int64_t> shape;
  const char* ext;  // what the mount shows
};

// Every dtype, and every shape class of the PNG/NPY rule.
std::vector<TensorSpec> TensorSpecs(uint64_t r) {
  const int64_t h = 2 + static_cast<int64_t>(r % 3), w = 3 + static_cast<int64_t>(r % 4);
  using D = tensor::DataType;
  return {
      {"image/rgb", D::kUint8, {h, w, 3}, ".png"},
      {"image/rgba", D::kUint8, {h, w, 4}, ".png"},
      {"image/gray", D::kUint8, {h, w}, ".png"},
      {"image/gray1", D::kUint8, {h, w, 1}, ".png"},
      {"image/gray_alpha", D::kUint8, {h, w, 2}, ".png"},
      {"image/depth16", D::kUint16, {h, w}, ".png"},
      {"image/rgb16", D::kUint16, {h, w, 3}, ".png"},
      {"arr/f32", D::kFloat, {3, 4}, ".npy"},
      {"arr/f64", D::kDouble, {2}, ".npy"},
      {"arr/f16", D::kHalf, {5}, ".npy"},
      {"arr/i8", D::kInt8, {2, 2}, ".npy"},
      {"arr/i16", D::kInt16, {3}, ".npy"},
      {"arr/i32", D::kInt32, {2, 1, 2}, ".npy"},
      {"arr/i64", D::kInt64, {2}, ".npy"},
      {"arr/u32", D::kUint32, {1}, ".npy"},
      {"arr/u64", D::kUint64, {2}, ".npy"},
      {"arr/bool", D::kBool, {4}, ".npy"},
      {"arr/scalar", D::kFloat, {}, ".npy"},
      {"arr/zero_size", D::kInt32, {0, 3}, ".npy"},
      {"arr/u8_rank1", D::kUint8, {6}, ".npy"},
      {"arr/u8_5ch", D::kUint8, {2, 2, 5}, ".npy"},
      {"arr/u16_zero_w", D::kUint16, {2, 0}, ".npy"},
  };
}

std::string Hex(absl::string_view s) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (char c : s) {
    out.push_back(kDigits[(static_cast<uint8_t>(c) >> 4) & 15]);
    out.push_back(kDigits[static_cast<uint8_t>(c) & 15]);
  }
  return out.empty() ? "-" : out;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i) absl::StrAppend(&out, i ? "," : "", shape[i]);
  return out.empty() ? "scalar" : out;
}

int Tensors(const std::string& dir, uint64_t records) {
  // MANIFEST.txt: one line per array file the mount must show,
  //   <record> <path in the record folder> <numpy descr> <shape|scalar> <hex bytes|->
  // so a test can check the files with numpy and PIL, independently of us.
  std::string manifest;
  absl::Status s = WriteShards(dir, "tensors", records, 1, Storage{}, [&](uint64_t r) {
    std::deque<std::string> keep;
    FeatureTable t;
    uint64_t salt = 0;
    for (const TensorSpec& spec : TensorSpecs(r)) {
      const std::string data =
          TensorBytes(tensor::NumBytes(spec.dtype, spec.shape).value(), r, ++salt);
      keep.push_back(tensor::EncodeTensor(spec.dtype, spec.shape, data).value());
      t.features.push_back(Bytes(spec.name, {keep.back()}));
      absl::StrAppend(&manifest, r, " ", spec.name, spec.ext, " ", tensor::InfoOf(spec.dtype).descr,
                      " ", ShapeText(spec.shape), " ", Hex(data), "\n");
    }
    // Several tensors in one list: a folder of 0.png, 1.npy.
    const std::string a = TensorBytes(4 * 5 * 3, r, 100), b = TensorBytes(2 * 4, r, 101);
    keep.push_back(tensor::EncodeTensor(tensor::DataType::kUint8, {4, 5, 3}, a).value());
    keep.push_back(tensor::EncodeTensor(tensor::DataType::kFloat, {2}, b).value());
    t.features.push_back(Bytes("frames", {keep[keep.size() - 2], keep.back()}));
    absl::StrAppend(&manifest, r, " frames/0.png |u1 4,5,3 ", Hex(a), "\n");
    absl::StrAppend(&manifest, r, " frames/1.npy <f4 2 ", Hex(b), "\n");
    // A DT_STRING tensor (no numpy equivalent): its bytes, unchanged.
    t.features.push_back(
        Bytes("strings", {absl::string_view("\x08\x07\x12\x04\x12\x02\x08\x01\x42\x03" "abc", 13)}));
    t.features.push_back(Int64s("label", {static_cast<int64_t>(r % 10)}));
    Sort(&t);
    return example::EncodeExample(t);
  });
  if (s.ok()) s = WriteFileAtomically(dir + "/MANIFEST.txt", manifest);
  if (!s.ok()) {
    std::cerr << "tfrecordfs-gen: " << s.message() << "\n";
    return 1;
  }
  return 0;
}

// SequenceExamples (video-like): record r has
//   context: label int64 [r], name bytes ["clip<r>"]
//   feature_lists:
//     frames/encoded  3 + r % 12 steps, each one JPEG-magic value
//                     "\xff\xd8\xff frame <r> <i>" (step 2: two values)
//     rgb             2 steps of floats [i / 2, r]
//     tokens          2 steps of text ["tok<i>"]
//     mask            1 step: a uint8 [2,2] tensor
//     sparse          3 steps, the middle one kindless (Feature{})
//     empty           no steps
std::string SequencePayload(uint64_t r) {
  std::deque<std::string> keep;
  example::SequenceTable t;
  keep.push_back(absl::StrCat("clip", r));
  t.context.features.push_back(Int64s("label", {static_cast<int64_t>(r)}));
  t.context.features.push_back(Bytes("name", {keep.back()}));
  auto list = [&](std::string name) -> example::FeatureList& {
    t.lists.emplace_back();
    t.lists.back().name = std::move(name);
    return t.lists.back();
  };
  list("empty");
  auto& frames = list("frames/encoded");
  for (uint64_t i = 0; i < 3 + r % 12; ++i) {
    keep.push_back(absl::StrCat("\xff\xd8\xff frame ", r, " ", i));
    Feature f = Bytes("", {keep.back()});
    if (i == 2) f.bytes.push_back(keep.back());
    frames.steps.push_back(std::move(f));
  }
  keep.push_back(tensor::EncodeTensor(tensor::DataType::kUint8, {2, 2}, TensorBytes(4, r, 7)).value());
  list("mask").steps.push_back(Bytes("", {keep.back()}));
  auto& rgb = list("rgb");
  for (int i = 0; i < 2; ++i) rgb.steps.push_back(Floats("", {i / 2.0f, static_cast<float>(r)}));
  auto& sparse = list("sparse");
  sparse.steps.push_back(Int64s("", {1}));
  sparse.steps.push_back(Feature{});
  sparse.steps.push_back(Int64s("", {3, 4}));
  auto& tokens = list("tokens");
  for (int i = 0; i < 2; ++i) {
    keep.push_back(absl::StrCat("tok", i));
    tokens.steps.push_back(Bytes("", {keep.back()}));
  }
  std::sort(t.lists.begin(), t.lists.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return example::EncodeSequenceExample(t);
}

int Sequence(const std::string& dir, uint64_t records) {
  absl::Status s = WriteShards(dir, "sequence", records, 1, Storage{}, SequencePayload);
  if (!s.ok()) {
    std::cerr << "tfrecordfs-gen: " << s.message() << "\n";
    return 1;
  }
  return 0;
}

// ---- hostile: the damaged-input corpus --------------------------------------
//
// Every case is built from the project's writer (record::AppendFramed) and
// then damaged with byte edits, the way leveldb's log_test does. The manifest
// states, per record, what the generator knows it wrote: intact or damaged,
// an Example or not, where its framing starts, and its payload's CRC.

// Protobuf wire-format pieces, for payloads no encoder would write.
void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
std::string Tag(uint32_t field, int wire) {
  std::string s;
  PutVarint(&s, (uint64_t{field} << 3) | static_cast<uint64_t>(wire));
  return s;
}
std::string Len(uint32_t field, absl::string_view body) {
  std::string s = Tag(field, 2);
  PutVarint(&s, body.size());
  s.append(body.data(), body.size());
  return s;
}
std::string VarintField(uint32_t field, uint64_t v) {
  std::string s = Tag(field, 0);
  PutVarint(&s, v);
  return s;
}
std::string FloatField(uint32_t field, float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  std::string s = Tag(field, 5);
  PutFixed32(&s, bits);
  return s;
}
std::string PackedInt64s(std::initializer_list<int64_t> vs) {
  std::string body;
  for (int64_t v : vs) PutVarint(&body, static_cast<uint64_t>(v));
  return Len(1, body);
}
std::string PackedFloats(std::initializer_list<float> vs) {
  std::string body;
  for (float f : vs) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    PutFixed32(&body, bits);
  }
  return Len(1, body);
}
// Feature{int64_list|float_list|bytes_list{<list>}}, from the list's fields.
std::string Int64Feature(absl::string_view list) { return Len(3, list); }
std::string FloatFeature(absl::string_view list) { return Len(2, list); }
std::string BytesFeature(absl::string_view list) { return Len(1, list); }
std::string BytesValues(std::initializer_list<absl::string_view> vs) {
  std::string s;
  for (absl::string_view v : vs) s += Len(1, v);
  return s;
}
// One Features map entry (Features.feature = 1) from its key and value.
std::string MapEntry(absl::string_view key, absl::string_view feature) {
  return Len(1, Len(1, key) + Len(2, feature));
}
// Example{features = 1 {entries...}}.
std::string ExampleOf(std::initializer_list<std::string> entries) {
  std::string body;
  for (const auto& e : entries) body += e;
  return Len(1, body);
}

// `levels` messages nested in field 1 around "x", built outside-in in
// linear time (wrapping one Len() around another would be quadratic).
std::string Nested(int levels) {
  std::vector<std::string> prefixes;
  uint64_t size = 1;
  for (int i = 0; i < levels; ++i) {
    std::string p = Tag(1, 2);
    PutVarint(&p, size);
    size += p.size();
    prefixes.push_back(std::move(p));
  }
  std::string out;
  out.reserve(size);
  for (auto it = prefixes.rbegin(); it != prefixes.rend(); ++it) out += *it;
  return out + "x";
}

std::string SmallExample(uint64_t i) {
  const std::string name = absl::StrCat("record-", i);
  FeatureTable t;
  t.features.push_back(Int64s("id", {static_cast<int64_t>(i)}));
  t.features.push_back(Bytes("name", {name}));
  return example::EncodeExample(t);
}

struct HostileRecord {
  bool intact = true;
  bool example = true;  // the payload is a tf.train.Example the mount shows as files
  uint64_t offset = 0;  // byte offset of its framing
  std::string payload;
};

struct HostileShard {
  std::string name;
  std::string bytes;
  std::vector<HostileRecord> records;

  // Appends a framed record; returns its index.
  size_t Add(std::string payload, bool example = true) {
    records.push_back({true, example, bytes.size(), payload});
    record::AppendFramed(&bytes, payload);
    return records.size() - 1;
  }
  void AddGood(size_t n) {
    for (size_t i = 0; i < n; ++i) Add(SmallExample(records.size()));
  }
  uint64_t HeaderOf(size_t i) const { return records[i].offset; }
  uint64_t DataOf(size_t i) const { return records[i].offset + record::kHeaderSize; }
  void Flip(uint64_t offset) { bytes[offset] = static_cast<char>(bytes[offset] ^ 0x01); }
  // Sets record i's length field and gives it a matching length CRC, so the
  // header itself passes and only the length is wrong.
  void SetLengthWithCrc(size_t i, uint64_t len) {
    char* h = &bytes[HeaderOf(i)];
    EncodeFixed64(h, len);
    EncodeFixed32(h + record::kLengthSize,
                  crc32c::Mask(crc32c::Value(h, record::kLengthSize)));
    records[i].intact = false;
  }
};

struct HostileCorpus {
  std::vector<HostileShard> shards;
  std::vector<std::pair<std::string, std::string>> plain_files;  // name, bytes
};

HostileCorpus BuildHostileCorpus() {
  HostileCorpus c;
  auto shard = [&](std::string name) -> HostileShard& {
    c.shards.emplace_back();
    c.shards.back().name = std::move(name);
    return c.shards.back();
  };

  // Truncated endings: the shard ends at the last good record.
  {
    HostileShard& s = shard("truncated_header.tfrecord");
    s.AddGood(3);
    std::string next;
    record::AppendFramed(&next, SmallExample(3));
    s.bytes += next.substr(0, 7);
  }
  {
    HostileShard& s = shard("truncated_payload.tfrecord");
    s.AddGood(3);
    std::string next;
    record::AppendFramed(&next, std::string(100, 'p'));
    s.bytes += next.substr(0, record::kHeaderSize + 40);
  }
  {
    HostileShard& s = shard("truncated_data_crc.tfrecord");
    s.AddGood(3);
    std::string next;
    record::AppendFramed(&next, SmallExample(3));
    s.bytes += next.substr(0, next.size() - 2);
  }
  for (int n = 1; n <= 11; ++n) {
    HostileShard& s = shard(absl::StrFormat("stray_bytes_%02d.tfrecord", n));
    s.AddGood(2);
    // Zeros look like the start of a header of a zero-length record.
    s.bytes += std::string(static_cast<size_t>(n), n % 2 ? '\0' : '\x5a');
  }
  // Damage in the middle costs only the damaged record.
  {
    HostileShard& s = shard("length_crc_mismatch.tfrecord");
    s.AddGood(5);
    s.Flip(s.HeaderOf(2) + record::kLengthSize + 1);
    s.records[2].intact = false;
  }
  {
    HostileShard& s = shard("data_crc_mismatch.tfrecord");
    s.AddGood(5);
    s.Flip(s.DataOf(2) + 3);
    s.records[2].intact = false;
  }
  {
    HostileShard& s = shard("huge_length.tfrecord");
    s.AddGood(5);
    s.SetLengthWithCrc(2, ~uint64_t{0} - 15);  // 2^64 - 16: would wrap any `offset + 16 + len`
  }
  {
    HostileShard& s = shard("huge_length_last.tfrecord");
    s.AddGood(2);
    std::string h(record::kHeaderSize, '\0');
    EncodeFixed64(&h[0], ~uint64_t{0});
    EncodeFixed32(&h[record::kLengthSize],
                  crc32c::Mask(crc32c::Value(h.data(), record::kLengthSize)));
    s.bytes += h + std::string(20, 'x');
  }
  shard("empty.tfrecord");
  {
    HostileShard& s = shard("zero_length.tfrecord");
    s.AddGood(1);
    s.Add("");  // an empty payload is an empty Example: no features
    s.AddGood(1);
  }

  // Files that are not TFRecord shards, two of them named like one.
  c.plain_files.emplace_back("not_a_tfrecord.tfrecord",
                             "This is a text file with a TFRecord-like name.\nIt has no records.\n");
  {
    std::mt19937 rng(1234);
    std::string junk(1000, '\0');
    for (char& ch : junk) ch = static_cast<char>(rng() & 0xff);
    c.plain_files.emplace_back("part-00000-of-00004", junk);
  }
  c.plain_files.emplace_back("compressed.tfrecord.gz",
                             std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10) +
                                 "not really deflate");

  // Payloads that are not Examples: one record.bin each.
  {
    HostileShard& s = shard("non_examples.tfrecord");
    s.Add("hello world", false);
    s.Add("12345", false);
    s.Add("success", false);
    // TensorBoard Event{wall_time = 1 (double), step = 2, file_version = 3}.
    std::string event = Tag(1, 1);
    PutFixed64(&event, 0x41d7d3f6c0000000ull);
    event += VarintField(2, 0) + Len(3, "brain.Event:2");
    s.Add(event, false);
    // Event{wall_time, step, summary = 5 {value = 1 {tag = 1, tensor = 8}}}.
    std::string summary = Tag(1, 1);
    PutFixed64(&summary, 0x41d7d3f6c1000000ull);
    summary += VarintField(2, 7) +
               Len(5, Len(1, Len(1, "AverageReturn") + Len(8, VarintField(1, 1) + FloatField(5, 2.5f))));
    s.Add(summary, false);
    // ExampleListWithContext{examples = 1 [...], context = 2}: the real shape.
    const std::string ex1 = ExampleOf({MapEntry("relevance", Int64Feature(PackedInt64s({1}))),
                                       MapEntry("document_tokens",
                                                BytesFeature(BytesValues({"a", "cat"})))});
    const std::string ex2 = ExampleOf({MapEntry("relevance", Int64Feature(PackedInt64s({0})))});
    const std::string ctx = ExampleOf({MapEntry("query_tokens", BytesFeature(BytesValues({"cats"})))});
    s.Add(Len(1, ex1) + Len(1, ex2) + Len(2, ctx), false);
    // ExampleListWithContext without a context: protobuf-wise this is an
    // Example whose "feature names" are serialized map entries (control
    // bytes) holding no kind of value.
    s.Add(Len(1, ex1) + Len(1, ex2), false);
    // SequenceExample{context = 1, feature_lists = 2}.
    const std::string lists = Len(1, Len(1, "frames") + Len(2, Len(1, Int64Feature(PackedInt64s({1, 2})))));
    s.Add(Len(1, Len(1, Len(1, "length") + Len(2, Int64Feature(PackedInt64s({2}))))) + Len(2, lists),
          false);
  }
  // Malformed protobuf: the decoder refuses it; the payload is shown raw.
  {
    HostileShard& s = shard("malformed_protobuf.tfrecord");
    s.Add(std::string(11, '\xff') + '\x01', false);            // varint longer than 10 bytes
    s.Add(std::string("\x0a\xff\xff", 3), false);              // truncated length varint
    s.Add(std::string("\x0a\x7f") + "short", false);           // length past the end
    s.Add(Nested(100000), false);                              // 100000 levels of field 1
    s.Add(VarintField(1, 5), false);                           // Example.features as a varint
    s.Add(ExampleOf({MapEntry("a", Len(3, FloatField(1, 1.0f)))}), false);  // int64 as fixed32
    s.Add(std::string("\x00\x01", 2), false);                  // field number 0
    s.Add(std::string("\x0b\x0c", 2), false);                  // group start / end
    s.Add(ExampleOf({MapEntry("f", FloatFeature(Len(1, "abc")))}), false);  // packed floats % 4
    s.Add(ExampleOf({MapEntry("f", FloatFeature(Tag(1, 5) + "ab"))}), false);  // cut fixed32
    s.Add(ExampleOf({MapEntry("bad\xff\xfe", Int64Feature(PackedInt64s({1})))}), false);  // key not UTF-8
    s.Add(ExampleOf({Len(1, Len(3, "k"))}), false);            // unknown field in a map entry
    s.Add(ExampleOf({MapEntry("k", Int64Feature(PackedInt64s({1})))}) + VarintField(9, 1),
          false);                                              // unknown field after features
  }
  // Wire-format variants TensorFlow's parser decodes: shown as files.
  {
    HostileShard& s = shard("wire_variants.tfrecord");
    // 0: unpacked int64 values.
    s.Add(ExampleOf({MapEntry("ids", Int64Feature(VarintField(1, 1) + VarintField(1, 2) +
                                                  VarintField(1, 3)))}));
    // 1: unpacked floats.
    s.Add(ExampleOf({MapEntry("xs", FloatFeature(FloatField(1, 1.5f) + FloatField(1, -2.0f)))}));
    // 2: two packed int64 runs.
    s.Add(ExampleOf({MapEntry("ids", Int64Feature(PackedInt64s({1, 2}) + PackedInt64s({3})))}));
    // 3: packed, unpacked, packed floats.
    s.Add(ExampleOf({MapEntry("xs", FloatFeature(PackedFloats({0.5f}) + FloatField(1, 0.25f) +
                                                 PackedFloats({8.0f, 16.0f})))}));
    // 4: duplicate keys, last wins (an int64 `k` replaced by a bytes `k`).
    s.Add(ExampleOf({MapEntry("k", Int64Feature(PackedInt64s({1}))),
                     MapEntry("k", BytesFeature(BytesValues({"last"})))}));
    // 5: empty lists of each kind.
    s.Add(ExampleOf({MapEntry("b", BytesFeature("")), MapEntry("f", FloatFeature("")),
                     MapEntry("i", Int64Feature(""))}));
    // 6: kindless features: Feature{} and an entry with no value at all.
    s.Add(ExampleOf({MapEntry("present", Int64Feature(PackedInt64s({7}))), MapEntry("missing", ""),
                     Len(1, Len(1, "novalue"))}));
    // 7: Example.features twice: the maps merge.
    s.Add(ExampleOf({MapEntry("a", Int64Feature(PackedInt64s({1})))}) +
          ExampleOf({MapEntry("b", Int64Feature(PackedInt64s({2})))}));
    // 8: a value given twice in one entry merges; a later kind replaces.
    s.Add(ExampleOf({Len(1, Len(1, "m") + Len(2, Int64Feature(PackedInt64s({1}))) +
                                Len(2, Int64Feature(PackedInt64s({2})))),
                     Len(1, Len(1, "v") + Len(2, Int64Feature(PackedInt64s({5})) +
                                                 BytesFeature(BytesValues({"x"}))))}));
    // 9: extreme int64s (10-byte varints).
    s.Add(ExampleOf({MapEntry("n", Int64Feature(PackedInt64s(
                                       {-1, std::numeric_limits<int64_t>::min(),
                                        std::numeric_limits<int64_t>::max()})))}));
    // 10: an empty Example (no features field at all) and 11: features {}.
    s.Add("");
    s.Add(Len(1, ""));
  }
  // Awkward feature names, one record each (see tests/mount/hostile for the
  // file names naming.h gives them).
  {
    HostileShard& s = shard("names.tfrecord");
    const std::string names[] = {
        std::string(""),           std::string("."),         std::string(".."),
        std::string(300, 'x'),     std::string("/lead"),     std::string("trail/"),
        std::string("a//b"),       std::string("nul\0byte", 8), std::string("ctl\x01\x7f"),
        std::string("100%"),       std::string("a/b/c"),     std::string("trailing~"),
        std::string(".hidden/.x"), std::string("0"),         std::string("\xc3\xa9t\xc3\xa9/\xe6\x97\xa5"),
    };
    for (const std::string& n : names) {
      s.Add(ExampleOf({MapEntry(n, Int64Feature(PackedInt64s({1})))}));
    }
    // Invalid UTF-8 in a name: not an Example by proto3's rules.
    s.Add(ExampleOf({MapEntry("bad\xc3(", Int64Feature(PackedInt64s({1})))}), false);
    // A numeric `image` beside `image/encoded`; a root feature that would be
    // record.bin; a long multi-byte name.
    s.Add(ExampleOf({MapEntry("image", Int64Feature(PackedInt64s({3}))),
                     MapEntry("image/encoded", BytesFeature(BytesValues({"\xff\xd8\xff\xe0jpeg"})))}));
    s.Add(ExampleOf({MapEntry("record", BytesFeature(BytesValues({std::string("\x00\x01", 2)})))}));
    std::string long_utf8;
    for (int i = 0; i < 150; ++i) long_utf8 += "\xc3\xa9";  // 300 bytes of 'é'
    s.Add(ExampleOf({MapEntry(long_utf8, BytesFeature(BytesValues({"v"})))}));
  }
  // More files than one record can show: record.bin, with a warning.
  {
    HostileShard& s = shard("wide.tfrecord");
    FeatureTable t;
    std::vector<std::string> names;
    for (int i = 0; i < 70000; ++i) names.push_back(absl::StrFormat("f%05d", i));
    for (const auto& n : names) t.features.push_back(Int64s(n, {1}));
    s.Add(example::EncodeExample(t), false);
    s.AddGood(1);
  }
  return c;
}

// A tiny Example: {"i": int64[k]}.
std::string TinyPayload(uint64_t k) {
  return ExampleOf({MapEntry("i", Int64Feature(PackedInt64s({static_cast<int64_t>(k)})))});
}

int Hostile(const std::string& dir, uint64_t tiny_records) {
  ::mkdir(dir.c_str(), 0755);
  const HostileCorpus c = BuildHostileCorpus();
  std::string manifest =
      "# tfrecordfs-gen hostile: what each file really holds (tab-separated).\n"
      "# shard NAME RECORDS | record NAME INDEX ok|damaged example|raw OFFSET SIZE CRC32C |\n"
      "# plain NAME SIZE | tiny NAME RECORDS (record k is Example{i: int64[k]})\n";
  for (const HostileShard& s : c.shards) {
    if (auto st = WriteFileAtomically(absl::StrCat(dir, "/", s.name), s.bytes); !st.ok()) {
      std::cerr << "tfrecordfs-gen: " << st.message() << "\n";
      return 1;
    }
    absl::StrAppend(&manifest, "shard\t", s.name, "\t", s.records.size(), "\n");
    for (size_t i = 0; i < s.records.size(); ++i) {
      const HostileRecord& r = s.records[i];
      absl::StrAppendFormat(&manifest, "record\t%s\t%d\t%s\t%s\t%d\t%d\t%08x\n", s.name, i,
                            r.intact ? "ok" : "damaged", r.example ? "example" : "raw", r.offset,
                            r.payload.size(), crc32c::Value(r.payload));
    }
  }
  for (const auto& [name, bytes] : c.plain_files) {
    if (auto st = WriteFileAtomically(absl::StrCat(dir, "/", name), bytes); !st.ok()) {
      std::cerr << "tfrecordfs-gen: " << st.message() << "\n";
      return 1;
    }
    absl::StrAppend(&manifest, "plain\t", name, "\t", bytes.size(), "\n");
  }
  if (tiny_records > 0) {
    const std::string path = dir + "/tiny-records.tfrecord";
    auto fd = OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!fd.ok()) {
      std::cerr << "tfrecordfs-gen: " << fd.status().message() << "\n";
      return 1;
    }
    record::ShardWriter w(std::move(*fd), path);
    absl::Status st;
    for (uint64_t k = 0; k < tiny_records && st.ok(); ++k) st = w.Append(TinyPayload(k));
    if (st.ok()) st = w.Close(false);
    if (!st.ok()) {
      std::cerr << "tfrecordfs-gen: " << st.message() << "\n";
      return 1;
    }
    absl::StrAppend(&manifest, "tiny\ttiny-records.tfrecord\t", tiny_records, "\n");
  }
  if (auto st = WriteFileAtomically(dir + "/MANIFEST.txt", manifest); !st.ok()) {
    std::cerr << "tfrecordfs-gen: " << st.message() << "\n";
    return 1;
  }
  return 0;
}

// Seeds for tests/fuzz/corpus/<target>/: the small hostile shards (walker),
// their payloads (example), those payloads behind the naming and staging
// targets' mode bytes (see tests/fuzz/*_fuzzer.cc for the input formats).
// A small shard of text-like records: compresses well, so its checkpoint
// windows stay small.
std::string SmallTextShard(int records) {
  std::string out;
  for (int i = 0; i < records; ++i) {
    std::string payload;
    for (int k = 0; k < 4 + i % 7; ++k) absl::StrAppend(&payload, "feature ", i, " value ", k, ";");
    record::AppendFramed(&out, payload);
  }
  return out;
}

// `data` (any bytes, damaged framing included) as one `codec` stream, by
// zlib at level 1 with a full flush every KiB (byte-aligned boundaries).
std::string Compressed(absl::string_view data, source::Codec codec) {
  z_stream z;
  std::memset(&z, 0, sizeof z);
  if (deflateInit2(&z, 1, Z_DEFLATED, codec == source::Codec::kGzip ? 31 : 15, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    return "";
  }
  std::string out;
  for (size_t pos = 0;;) {
    const size_t take = std::min<size_t>(1024, data.size() - pos);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + pos));
    z.avail_in = static_cast<uInt>(take);
    pos += take;
    const int flush = pos == data.size() ? Z_FINISH : Z_FULL_FLUSH;
    char buf[4096];
    int ret;
    do {
      z.next_out = reinterpret_cast<Bytef*>(buf);
      z.avail_out = sizeof buf;
      ret = deflate(&z, flush);
      out.append(buf, sizeof buf - z.avail_out);
    } while (z.avail_out == 0 || (flush == Z_FINISH && ret != Z_STREAM_END));
    if (flush == Z_FINISH) break;
  }
  deflateEnd(&z);
  return out;
}

// An index file of a compressed shard with checkpoints every `span`
// compressed bytes, as the index store would save it.
std::string CompressedIndexFile(const std::string& file, source::Codec codec, uint64_t span) {
  const int raw = memfd_create("gen", MFD_CLOEXEC);
  if (raw < 0) return "";
  UniqueFd fd(raw);
  if (!WriteFull(fd.get(), file.data(), file.size(), "memfd").ok()) return "";
  auto walked = index::WalkShard(fd.get(), "/data/seed.tfrecord.gz", file.size(), codec, span);
  if (!walked.ok()) return "";
  index::IndexFile f;
  f.file_size = file.size();
  f.mtime_ns = 1700000000000000000;
  std::memcpy(f.first_header.data(), file.data(), std::min<size_t>(12, file.size()));
  if (file.size() >= 12) std::memcpy(f.last_header.data(), file.data() + file.size() - 12, 12);
  f.path = "/data/seed.tfrecord.gz";
  f.walk = walked->walk;
  f.codec = codec;
  f.data_size = walked->checkpoints->data_size;
  f.checkpoints = walked->checkpoints->points;
  f.windows = walked->windows_blob;
  return index::EncodeIndexFile(f);
}

// Seeds for the compressed-shard and index-file targets (tests/fuzz/
// inflate_fuzzer.cc, index_file_fuzzer.cc).
bool CompressedFuzzSeeds(
    const std::function<bool(absl::string_view, absl::string_view, absl::string_view)>& put) {
  bool ok = true;
  const std::string shard = SmallTextShard(12);
  const std::string gz = Compressed(shard, source::Codec::kGzip);
  const std::string zz = Compressed(shard, source::Codec::kZlib);
  auto seed = [](uint8_t mode, uint8_t a, uint8_t b, absl::string_view rest) {
    return absl::StrCat(
        std::string({static_cast<char>(mode), static_cast<char>(a), static_cast<char>(b)}), rest);
  };
  // [mode][a][b]: see inflate_fuzzer.cc.
  ok &= put("inflate", "gzip-file", seed(0x00, 0, 0, gz));
  ok &= put("inflate", "zlib-file", seed(0x01, 0, 0, zz));
  ok &= put("inflate", "gzip-two-members", seed(0x00, 0, 0, gz + gz));
  ok &= put("inflate", "gzip-then-garbage", seed(0x00, 0, 0, gz + "garbage"));
  ok &= put("inflate", "zlib-then-bytes", seed(0x01, 0, 0, zz + zz));
  ok &= put("inflate", "gzip-truncated", seed(0x00, 0, 0, gz.substr(0, gz.size() / 2)));
  ok &= put("inflate", "plain-shard-as-gzip", seed(0x00, 0, 0, shard));
  ok &= put("inflate", "compress-gzip", seed(0x02, 6, 255, shard));
  ok &= put("inflate", "compress-zlib-stored", seed(0x03, 0, 255, shard));
  ok &= put("inflate", "compress-gzip-cut", seed(0x02, 9, 140, shard));
  ok &= put("inflate", "compress-gzip-flip", seed(0x06, 77, 255, shard));
  ok &= put("inflate", "compress-gzip-2-members-span-1", seed(0x1a, 1, 255, shard));
  ok &= put("inflate", "compress-zlib-span-100", seed(0x23, 5, 255, shard));
  ok &= put("inflate", "empty-gzip", seed(0x02, 6, 255, ""));
  // Index files: a compressed shard with many checkpoints, one with only
  // the stream start, a ZLIB one, and a damaged shard's (problems).
  const std::string big = SmallTextShard(150);
  ok &= put("index_file", "gzip-checkpoints",
            CompressedIndexFile(Compressed(big, source::Codec::kGzip), source::Codec::kGzip, 1500));
  ok &= put("index_file", "gzip-start-only",
            CompressedIndexFile(gz, source::Codec::kGzip, source::kDefaultSpan));
  ok &= put("index_file", "zlib-checkpoints",
            CompressedIndexFile(Compressed(big, source::Codec::kZlib), source::Codec::kZlib, 2500));
  ok &= put("index_file", "gzip-truncated",
            CompressedIndexFile(gz.substr(0, gz.size() - 30), source::Codec::kGzip, 64));
  std::string damaged = SmallTextShard(20);
  damaged[200] ^= 1;
  damaged[5] ^= 1;
  ok &= put("index_file", "zlib-damaged-records",
            CompressedIndexFile(Compressed(damaged, source::Codec::kZlib) + "x",
                                source::Codec::kZlib, 128));
  return ok;
}

int FuzzSeeds(const std::string& dir) {
  const HostileCorpus c = BuildHostileCorpus();
  for (const char* t : {"walker", "example", "naming", "staging", "inflate", "index_file"}) {
    ::mkdir(dir.c_str(), 0755);
    ::mkdir(absl::StrCat(dir, "/", t).c_str(), 0755);
  }
  auto put = [&](absl::string_view target, absl::string_view name, absl::string_view bytes) {
    absl::Status st = WriteFileAtomically(absl::StrCat(dir, "/", target, "/", name), bytes);
    if (!st.ok()) std::cerr << "tfrecordfs-gen: " << st.message() << "\n";
    return st.ok();
  };
  constexpr size_t kMaxSeed = 4096;
  bool ok = true;
  for (const HostileShard& s : c.shards) {
    std::string stem = s.name;
    if (const size_t dot = stem.find('.'); dot != std::string::npos) stem.resize(dot);
    if (s.bytes.size() <= kMaxSeed) ok &= put("walker", stem, s.bytes);
    for (size_t i = 0; i < s.records.size(); ++i) {
      const std::string& p = s.records[i].payload;
      if (p.size() > kMaxSeed) continue;
      const std::string name = absl::StrCat(stem, "-", i);
      ok &= put("example", name, p);
      // naming: mode 1 (decode the rest as an Example), no escape bytes.
      ok &= put("naming", name, std::string("\x01\x00", 2) + p);
    }
  }
  // Structured programs (table_gen.h): mode byte, then features of
  // [how=0 (dictionary), word, kind, count, values...].
  const std::string table =
      std::string("\x03", 1) +                                  // 3 features
      std::string("\x00\x09\x03\x02", 4) + std::string(16, '\x01') +  // "image" int64 x2
      std::string("\x00\x0a\x01\x01\x00\x08", 6) + "\xff\xd8\xff" +   // image/encoded bytes
      std::string("\x00\x0c\x02\x01", 4) + std::string(4, '\x3f');     // "record" float
  ok &= put("naming", "table-image", std::string("\x00\x00", 2) + table);
  ok &= put("staging", "table-image", std::string("\x01", 1) + table);
  // staging mode 0: [ops, (op, component...)...]: mkdir "a", create files.
  const std::string folder = std::string("\x06", 1) +
                             std::string("\x00\x01\x06", 3) +               // mkdir "a"
                             std::string("\x01\x01\x01\x03", 4) + "1\n2" +  // a/0 = "1\n2"
                             std::string("\x01\x01\x02\x02", 4) + "x\n" +   // a/1
                             std::string("\x05", 1) +                        // up
                             std::string("\x02\x01\x00\x04", 4) + "raw!" +  // record.bin
                             std::string("\x04\x01\x0e", 3);                 // symlink "label"
  ok &= put("staging", "folder-basic", std::string("\x00", 1) + folder);
  ok &= put("staging", "folder-raw",
            std::string("\x00\x01\x02\x01\x00\x05", 6) + "bytes");  // only record.bin
  ok &= CompressedFuzzSeeds(put);
  return ok ? 0 : 1;
}

int Main(int argc, char** argv) {
  constexpr char kUsage[] =
      "Usage: tfrecordfs-gen sample OUTDIR [--records N] [--shards S]\n"
      "       tfrecordfs-gen synthetic OUTDIR --records N --shards S [--bytes B] [--prefix P]\n"
      "         (sample, synthetic: [--compression none|gzip|zlib] [--members M])\n"
      "       tfrecordfs-gen hostile OUTDIR [--records N]\n"
      "       tfrecordfs-gen tensors OUTDIR [--records N]\n"
      "       tfrecordfs-gen sequence OUTDIR [--records N]\n"
      "       tfrecordfs-gen fuzz-seeds OUTDIR\n";
  if (argc < 3) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string mode = argv[1], dir = argv[2];
  uint64_t records = 0, shards = 0, bytes = 0;
  bool records_given = false;
  std::string prefix = "data";
  Storage storage;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    bool ok = true;
    if (flag == "--records") ok = records_given = absl::SimpleAtoi(value, &records);
    else if (flag == "--shards") ok = absl::SimpleAtoi(value, &shards);
    else if (flag == "--bytes") ok = absl::SimpleAtoi(value, &bytes);
    else if (flag == "--prefix") prefix = value;
    else if (flag == "--members") ok = absl::SimpleAtoi(value, &storage.members) && storage.members > 0;
    else if (flag == "--compression") {
      auto codec = source::ParseCodecName(value);
      ok = codec.has_value();
      if (ok) storage.codec = *codec;
    } else ok = false;
    if (!ok) {
      std::cerr << "tfrecordfs-gen: bad flag " << flag << "\n" << kUsage;
      return 2;
    }
  }
  if (storage.members > 1 && storage.codec != source::Codec::kGzip) {
    std::cerr << "tfrecordfs-gen: --members needs --compression gzip (ZLIB is one stream)\n";
    return 2;
  }
  if (mode == "hostile") return Hostile(dir, records_given ? records : 1000000);
  if (mode == "fuzz-seeds") return FuzzSeeds(dir);
  if (mode == "tensors") return Tensors(dir, records_given ? records : 12);
  if (mode == "sequence") return Sequence(dir, records_given ? records : 14);
  if (mode == "sample") return Sample(dir, records ? records : 40, shards ? shards : 2, storage);
  if (mode == "synthetic" && records > 0 && shards > 0) {
    return Synthetic(dir, records, shards, bytes, prefix, storage);
  }
  std::cerr << kUsage;
  return 2;
}

}  // namespace
}  // namespace tfrecordfs

int main(int argc, char** argv) { return tfrecordfs::Main(argc, argv); }
