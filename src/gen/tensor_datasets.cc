// tensors and sequence: datasets of serialize_tensor values and of
// tf.train.SequenceExamples (commands.h).
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "commands.h"
#include "feature_builders.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/wire.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/sequence.h"
#include "tfrecordfs/tensor/tensor.h"
#include "write_shards.h"

namespace tfrecordfs::gen {
namespace {

using example::Feature;
using example::FeatureTable;

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
  keep.push_back(
      tensor::EncodeTensor(tensor::DataType::kUint8, {2, 2}, TensorBytes(4, r, 7)).value());
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

// TF-Ranking ExampleListWithContext records (tensorflow_serving's
// input.proto), in the shapes the real eval_elwc.tfrecord lacks. Record r:
//   r % 4 == 0: an empty context (`12 00`) and 1 + r % 3 examples;
//   r % 4 == 1: no context field and 2 examples, the second with no feature;
//   r % 4 == 2: a context (query_id int64 [r], query text ["q<r>"]) and no
//               examples;
//   r % 4 == 3: that context and 3 examples, the context written first.
// Example i holds relevance int64 [i], score float [i / 4, r], doc text
// ["doc <r> <i>"], and, in turn, a kindless `missing` (Feature{}), a
// two-value bytes list `blobs` (JPEG magic, then raw bytes) or a uint8 [2,2]
// serialize_tensor value `mask`.
// TF-Ranking Example-in-Example records (tensorflow_ranking data.py): an
// Example of serialized_context (one serialized Example) and
// serialized_examples (serialized Examples). Record r:
//   r % 3 == 0: context (query_id [r]) and 2 examples;
//   r % 3 == 1: no serialized_context, 3 examples, the middle one "" (the
//               padding TF-Ranking writes: an Example with no feature);
//   r % 3 == 2: context and an empty serialized_examples list.
// Example i holds relevance int64 [i] and doc text ["eie <r> <i>"].
std::string EiePayload(uint64_t r) {
  std::deque<std::string> keep;
  FeatureTable outer;
  if (r % 3 != 1) {
    FeatureTable c;
    c.features.push_back(Int64s("query_id", {static_cast<int64_t>(r)}));
    keep.push_back(example::EncodeExample(c));
    outer.features.push_back(Bytes("serialized_context", {keep.back()}));
  }
  Feature examples = Bytes("serialized_examples", {});
  const uint64_t n = r % 3 == 0 ? 2 : r % 3 == 1 ? 3 : 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (r % 3 == 1 && i == 1) {
      keep.push_back("");
    } else {
      FeatureTable t;
      keep.push_back(absl::StrCat("eie ", r, " ", i));
      t.features.push_back(Bytes("doc", {keep.back()}));
      t.features.push_back(Int64s("relevance", {static_cast<int64_t>(i)}));
      keep.push_back(example::EncodeExample(t));
    }
    examples.bytes.push_back(keep.back());
  }
  outer.features.push_back(std::move(examples));
  Sort(&outer);
  return example::EncodeExample(outer);
}

std::string RankingPayload(uint64_t r) {
  std::deque<std::string> keep;
  auto context = [&] {
    FeatureTable c;
    c.features.push_back(Int64s("query_id", {static_cast<int64_t>(r)}));
    keep.push_back(absl::StrCat("q", r));
    c.features.push_back(Bytes("query", {keep.back()}));
    Sort(&c);
    return example::EncodeExample(c);
  };
  auto an_example = [&](uint64_t i) {
    FeatureTable t;
    t.features.push_back(Int64s("relevance", {static_cast<int64_t>(i)}));
    t.features.push_back(Floats("score", {i / 4.0f, static_cast<float>(r)}));
    keep.push_back(absl::StrCat("doc ", r, " ", i));
    t.features.push_back(Bytes("doc", {keep.back()}));
    switch (i % 3) {
      case 0:
        t.features.push_back(Feature{});
        t.features.back().name = "missing";
        break;
      case 1:
        keep.push_back(absl::StrCat("\xff\xd8\xff blob ", r, " ", i));
        keep.push_back(std::string("\x00\x01\x02\xfe", 4));
        t.features.push_back(Bytes("blobs", {keep[keep.size() - 2], keep.back()}));
        break;
      default:
        keep.push_back(
            tensor::EncodeTensor(tensor::DataType::kUint8, {2, 2}, TensorBytes(4, r, i)).value());
        t.features.push_back(Bytes("mask", {keep.back()}));
        break;
    }
    Sort(&t);
    return example::EncodeExample(t);
  };
  auto field = [](uint32_t number, const std::string& body) {
    std::string out;
    wire::PutVarint(&out, (uint64_t{number} << 3) | wire::kLen);
    wire::PutVarint(&out, body.size());
    return out + body;
  };
  std::string out;
  switch (r % 4) {
    case 0:
      for (uint64_t i = 0; i < 1 + r % 3; ++i) out += field(1, an_example(i));
      out += field(2, "");
      break;
    case 1:
      out += field(1, an_example(0));
      out += field(1, "");
      break;
    case 2:
      out += field(2, context());
      break;
    default:
      out += field(2, context());
      for (uint64_t i = 0; i < 3; ++i) out += field(1, an_example(i));
      break;
  }
  return out;
}

}  // namespace

int Ranking(const std::string& dir, uint64_t records) {
  absl::Status s = WriteShards(dir, "elwc", records, 1, Storage{}, RankingPayload);
  if (s.ok()) s = WriteShards(dir, "eie", records, 1, Storage{}, EiePayload);
  if (!s.ok()) return Fail(s);
  return 0;
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
        Bytes("strings", {absl::string_view("\x08\x07\x12\x04\x12\x02\x08\x01\x42\x03"
                                            "abc",
                                            13)}));
    t.features.push_back(Int64s("label", {static_cast<int64_t>(r % 10)}));
    Sort(&t);
    return example::EncodeExample(t);
  });
  if (s.ok()) s = WriteFileAtomically(dir + "/MANIFEST.txt", manifest);
  if (!s.ok()) return Fail(s);
  return 0;
}

int Sequence(const std::string& dir, uint64_t records) {
  absl::Status s = WriteShards(dir, "sequence", records, 1, Storage{}, SequencePayload);
  if (!s.ok()) return Fail(s);
  return 0;
}

}  // namespace tfrecordfs::gen
