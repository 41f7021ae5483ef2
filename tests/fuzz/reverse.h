// The reverse layout in memory: a naming::Layout read back into features with
// the naming module's reverse functions, following the same steps as the
// staging parser (staging/record_folder.cc) does on disk. Used by the naming
// fuzz target to check that every table survives forward + reverse.
#ifndef TFRECORDFS_TESTS_FUZZ_REVERSE_H_
#define TFRECORDFS_TESTS_FUZZ_REVERSE_H_

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "testing/canon.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/naming/feature_type.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/staging/record_folder.h"
#include "tfrecordfs/staging/staged_file.h"
#include "tfrecordfs/tensor/tensor.h"

namespace tfrecordfs::fuzz {

// Features that own their values, floats as bits so NaNs compare exactly
// (tests/testing/canon.h); kindless ones too (a layout shows them as
// `<name>.none`).
using test::Canon;
using test::CanonTable;
using test::FromTable;
using test::ToCanon;

// A bytes value as the reverse gives it back: a tensor (DecodeTensor
// accepts it) as EncodeTensor writes it (the forward shows the array, and
// the reverse writes the canonical TensorProto of it), anything else as is.
inline std::string CanonicalValue(absl::string_view v) {
  auto t = tensor::DecodeTensor(v);
  if (!t.ok()) return std::string(v);
  return tensor::EncodeTensor(t->dtype, t->shape, t->data(v)).value();
}

inline CanonTable CanonicalValues(CanonTable t) {
  for (auto& [name, c] : t) {
    for (std::string& b : c.bytes) b = CanonicalValue(b);
  }
  return t;
}

// False for the features whose copy is documented as lossy
// (staging/record_folder.h): a feature holding tensors and also raw bytes
// that show as .png/.npy (those come back as tensors), more tensor classes
// than naming::FeatureType keeps, or [H,W] beside [H,W,1] tensors of one dtype
// (the same gray PNG).
inline bool ArraysRoundTrip(const example::Feature& f) {
  const naming::FeatureType h = naming::FeatureTypeOf(f);
  if (h.tensors.empty()) return true;
  for (absl::string_view v : f.bytes) {
    auto t = tensor::DecodeTensorType(v);
    if (!t.ok()) {
      const absl::string_view ext = naming::SniffExtension(v);
      if (ext == naming::kPngExtension || ext == naming::kNpyExtension) return false;
      continue;
    }
    bool kept = false;
    for (const auto& k : h.tensors) {
      kept |= k.dtype == t->dtype && k.shape.size() == t->shape.size() &&
              (k.shape.size() != 3 || k.shape[2] == t->shape[2]);
    }
    if (!kept) return false;
  }
  for (const auto& a : h.tensors) {
    for (const auto& b : h.tensors) {
      if (a.dtype == b.dtype && a.shape.size() == 2 && b.shape.size() == 3 && b.shape[2] == 1) {
        return false;
      }
    }
  }
  return true;
}

inline bool ArraysRoundTrip(const example::FeatureTable& t) {
  for (const auto& f : t.features) {
    if (!ArraysRoundTrip(f)) return false;
  }
  return true;
}

// The feature types the mount would learn from `t`: each feature's kind and
// tensor types (the first feature of a name).
inline naming::FeatureTypeMap TypesOf(const example::FeatureTable& t) {
  absl::flat_hash_map<std::string, naming::FeatureType> types;
  for (const auto& f : t.features) types.try_emplace(f.name, naming::FeatureTypeOf(f));
  return naming::FeatureTypeMap(std::move(types));
}

inline std::string Describe(const CanonTable& t) {
  std::string s;
  for (const auto& [name, c] : t) {
    absl::StrAppend(&s, "'", absl::CEscape(name), "':", example::KindName(c.kind), "[",
                    c.bytes.size() + c.float_bits.size() + c.int64s.size(), "] ");
  }
  return s;
}

class LayoutReverser {
 public:
  // `types` is borrowed: it must outlive the reverser.
  LayoutReverser(const naming::Layout& layout, absl::string_view payload,
                 naming::FeatureTypes& types)
      : l_(layout), payload_(payload), types_(types) {}

  // Errors name the entry that could not be read back.
  absl::StatusOr<CanonTable> Run() {
    const naming::Entry& root = l_.entries[0];
    if (root.num_children == 1 && !l_.entries[root.first_child].is_dir &&
        l_.entries[root.first_child].name == naming::kRawRecordName) {
      return absl::InvalidArgumentError("an Example lays out as a raw record.bin");
    }
    std::vector<std::string> dirs;
    if (auto s = Walk(0, &dirs); !s.ok()) return s;
    return out_;
  }

 private:
  std::string Content(const naming::Entry& e) const {
    return naming::FileContent(e, payload_).value();
  }

  absl::Status Add(std::string name, Canon c, absl::string_view file) {
    if (!out_.emplace(name, std::move(c)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("two files map to feature '", absl::CEscape(name), "' (", file, ")"));
    }
    return absl::OkStatus();
  }

  absl::Status Walk(uint32_t dir, std::vector<std::string>* dirs) {
    const naming::Entry& d = l_.entries[dir];
    for (uint32_t c = d.first_child; c < d.first_child + d.num_children; ++c) {
      const naming::Entry& e = l_.entries[c];
      if (naming::IsIgnoredName(e.name)) {
        return absl::InvalidArgumentError(
            absl::StrCat("entry '", absl::CEscape(e.name), "' is skipped by the reverse"));
      }
      if (e.is_dir) {
        std::vector<std::pair<std::string, bool>> kids;
        for (uint32_t k = e.first_child; k < e.first_child + e.num_children; ++k) {
          kids.emplace_back(l_.entries[k].name, !l_.entries[k].is_dir);
        }
        if (!naming::IsContinuation(e.name) && naming::IsListDirectory(kids)) {
          const std::string name = naming::FeatureNameFromPath(*dirs, e.name);
          std::vector<std::pair<uint64_t, std::string>> items;
          for (uint32_t k = e.first_child; k < e.first_child + e.num_children; ++k) {
            const std::string& item = l_.entries[k].name;
            auto value = Value(name, item.substr(std::min(item.find('.'), item.size())),
                               Content(l_.entries[k]));
            if (!value.ok()) return value.status();
            items.emplace_back(*naming::ListItemIndex(item), std::move(*value));
          }
          std::sort(items.begin(), items.end());
          Canon canon;
          canon.kind = example::Kind::kBytes;
          for (auto& [i, b] : items) canon.bytes.push_back(std::move(b));
          if (auto s = Add(name, std::move(canon), e.name); !s.ok()) return s;
          continue;
        }
        dirs->push_back(e.name);
        absl::Status s = Walk(c, dirs);
        dirs->pop_back();
        if (!s.ok()) return s;
        continue;
      }
      const naming::LeafName leaf = naming::ParseLeafName(e.name);
      const std::string name = naming::FeatureNameFromPath(*dirs, leaf.stem_escaped);
      const std::string content = Content(e);
      Canon canon;
      switch (leaf.role) {
        case naming::FileRole::kNumeric: {
          auto f = naming::ParseNumeric(content, types_.Lookup(name).kind);
          if (!f.ok()) {
            return absl::InvalidArgumentError(
                absl::StrCat("'", absl::CEscape(e.name), "': ", f.status().message()));
          }
          canon = ToCanon(*f);
          break;
        }
        case naming::FileRole::kText:
          canon.kind = example::Kind::kBytes;
          for (absl::string_view v : naming::ParseText(content)) canon.bytes.emplace_back(v);
          break;
        case naming::FileRole::kSingleBytes: {
          auto value = Value(name, e.name.substr(leaf.stem_escaped.size()), content);
          if (!value.ok()) return value.status();
          canon.kind = example::Kind::kBytes;
          canon.bytes.push_back(std::move(*value));
          break;
        }
        case naming::FileRole::kKindless:
          if (!content.empty()) {
            return absl::InvalidArgumentError(absl::StrCat(
                "'", absl::CEscape(e.name), "': a kindless feature's file holds bytes"));
          }
          break;  // kind kNone, no values
      }
      if (auto s = Add(name, std::move(canon), e.name); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // A bytes value back from a file, as record_folder.cc's BytesValue does.
  absl::StatusOr<std::string> Value(const std::string& feature, absl::string_view ext,
                                    std::string content) const {
    if (ext != naming::kPngExtension && ext != naming::kNpyExtension) return content;
    const naming::FeatureType h = types_.Lookup(feature);
    if (h.tensors.empty()) return content;
    auto file = staging::TensorFromFile(ext, content, h.tensors);
    if (!file.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", absl::CEscape(feature), ext, "': ", file.status().message()));
    }
    return std::move(file->proto);
  }

  const naming::Layout& l_;
  absl::string_view payload_;
  naming::FeatureTypes& types_;
  CanonTable out_;
};

}  // namespace tfrecordfs::fuzz

#endif  // TFRECORDFS_TESTS_FUZZ_REVERSE_H_
