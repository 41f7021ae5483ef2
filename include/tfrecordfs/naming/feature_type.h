// What the mounted shards say about a feature: its kind, and for a bytes
// feature holding serialized tensors the types of those tensors. The reverse
// direction of the layout (staging's checks and the pack) holds a staged file
// to it: a staged `label` must parse as the kind `label` has in the shards, a
// staged `image.png` must convert to one of the tensor types of `image`.
//
// A sequence list is asked under `feature_lists/<list name>`
// (naming::kFeatureListsDir), its context features by their own names.
//
// FeatureType is a value computed from decoded features (FeatureTypeOf,
// MergeFeatureType). FeatureTypes is the lookup the staging checks ask: the
// mount's implementation learns from the records it reads
// (vfs::FeatureTypeSampler); FeatureTypeMap answers from a fixed table (tests,
// tools); NoFeatureTypes() knows nothing. The checks depend only on this
// interface, so staging knows nothing of the mount that feeds it.
//
// Thread-safety: FeatureTypeOf and MergeFeatureType are pure (MergeFeatureType
// writes only *type); every FeatureTypes implementation must allow
// concurrent Lookup calls from any thread (FeatureTypeMap and NoFeatureTypes
// are immutable).
#ifndef TFRECORDFS_NAMING_FEATURE_TYPE_H_
#define TFRECORDFS_NAMING_FEATURE_TYPE_H_

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/tensor/tensor.h"

namespace tfrecordfs::naming {

struct FeatureType {
  FeatureType() = default;
  // NOLINTNEXTLINE(google-explicit-constructor): a kind alone is a type
  FeatureType(example::Kind kind, std::vector<tensor::TensorType> tensors = {})
      : kind(kind), tensors(std::move(tensors)) {}

  example::Kind kind = example::Kind::kNone;  // kNone: the shards do not know it
  // For kBytes features holding serialized tensors: the types of the
  // tensors seen, one per class (dtype, rank, and for rank 3 the channel
  // count; the first shape seen of each class), at most kMaxTensorTypes.
  // Empty otherwise. A staged `.png`/`.npy` must take one of them: its dtype
  // and rank (and, for a PNG, the channel count: tensor::FitPngToFeature);
  // other dims may differ (each record has its own).
  std::vector<tensor::TensorType> tensors;

  bool operator==(const FeatureType&) const = default;
};

inline constexpr size_t kMaxTensorTypes = 8;

// The type a decoded feature gives: its kind, and for bytes the types of
// those values tensor::DecodeTensorType accepts. Cheap: only values starting
// with the dtype field's tag (0x08) are decoded, and only their headers.
FeatureType FeatureTypeOf(const example::Feature& f);
// Adds the tensor types of `f`'s values that `type` has no class of yet
// (both kBytes; else nothing). The same costs as FeatureTypeOf.
void MergeFeatureType(FeatureType* type, const example::Feature& f);

// The feature types of the mounted shards, by feature name.
class FeatureTypes {
 public:
  virtual ~FeatureTypes() = default;
  // The type of `feature_name` (kind kNone when unknown). May block while it
  // reads records to learn (vfs::FeatureTypeSampler states its costs); an
  // answer may grow over time (a name learnt, a tensor class added), but a
  // known kind never changes. Called concurrently (see the top).
  virtual FeatureType Lookup(absl::string_view feature_name) = 0;
};

// Knows no feature: every Lookup is kNone.
FeatureTypes& NoFeatureTypes();

// A fixed table of feature types.
class FeatureTypeMap final : public FeatureTypes {
 public:
  FeatureTypeMap() = default;
  explicit FeatureTypeMap(absl::flat_hash_map<std::string, FeatureType> types)
      : types_(std::move(types)) {}
  FeatureType Lookup(absl::string_view feature_name) override;

 private:
  absl::flat_hash_map<std::string, FeatureType> types_;
};

}  // namespace tfrecordfs::naming

#endif  // TFRECORDFS_NAMING_FEATURE_TYPE_H_
