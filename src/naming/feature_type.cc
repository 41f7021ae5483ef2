#include "tfrecordfs/naming/feature_type.h"

#include <algorithm>

namespace tfrecordfs::naming {

using example::Kind;

namespace {

// Types that a staged file is checked against the same way
// (staging::TensorFromFile): dtype and rank, and a rank-3 shape's channel
// count.
bool SameClass(const tensor::TensorType& a, const tensor::TensorType& b) {
  return a.dtype == b.dtype && a.shape.size() == b.shape.size() &&
         (a.shape.size() != 3 || a.shape[2] == b.shape[2]);
}

class NoTypes final : public FeatureTypes {
 public:
  FeatureType Lookup(absl::string_view) override { return {}; }
};

}  // namespace

void MergeFeatureType(FeatureType* type, const example::Feature& f) {
  if (type->kind != Kind::kBytes || f.kind != Kind::kBytes) return;
  for (absl::string_view v : f.bytes) {
    if (type->tensors.size() >= kMaxTensorTypes) return;
    // The dtype field's tag opens everything tf.io.serialize_tensor writes; it
    // rules out JPEG, PNG, text and most other values before any decoding.
    if (v.empty() || v[0] != '\x08') continue;
    auto t = tensor::DecodeTensorType(v);
    if (!t.ok()) continue;
    if (std::none_of(type->tensors.begin(), type->tensors.end(),
                     [&](const tensor::TensorType& seen) { return SameClass(seen, *t); })) {
      type->tensors.push_back(std::move(*t));
    }
  }
}

FeatureType FeatureTypeOf(const example::Feature& f) {
  FeatureType type{f.kind, {}};
  MergeFeatureType(&type, f);
  return type;
}

FeatureTypes& NoFeatureTypes() {
  static NoTypes* const none = new NoTypes;
  return *none;
}

FeatureType FeatureTypeMap::Lookup(absl::string_view feature_name) {
  auto it = types_.find(feature_name);
  return it == types_.end() ? FeatureType{} : it->second;
}

}  // namespace tfrecordfs::naming
