#include "tfrecordfs/staging/staged_file.h"

#include <sys/xattr.h>

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/tensor/npy.h"
#include "tfrecordfs/tensor/png.h"

namespace tfrecordfs::staging {

using example::Kind;
using naming::FeatureType;

bool IsArrayExtension(absl::string_view ext) {
  return ext == naming::kPngExtension || ext == naming::kNpyExtension;
}

absl::string_view ItemExtension(absl::string_view name) {
  const size_t dot = name.find('.');
  return dot == absl::string_view::npos ? absl::string_view() : name.substr(dot);
}

std::optional<uint64_t> StepIndex(absl::string_view name) {
  absl::string_view digits = name.substr(0, name.find('.'));
  if (digits.empty() || digits.size() > 18) return std::nullopt;
  uint64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

namespace {
constexpr absl::string_view kTensorTagPrefix = "tensor:";

std::string ShapeText(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

std::string TypeText(const tensor::TensorType& t) {
  return absl::StrCat(tensor::InfoOf(t.dtype).name, " ", ShapeText(t.shape));
}
}  // namespace

std::string TensorTag(const tensor::TensorType& type) {
  return absl::StrCat(kTensorTagPrefix, tensor::InfoOf(type.dtype).name, ":",
                      absl::StrJoin(type.shape, ","));
}

FeatureType ParseKindTag(absl::string_view tag) {
  if (tag == "int64") return {Kind::kInt64, {}};
  if (tag == "float") return {Kind::kFloat, {}};
  if (!absl::ConsumePrefix(&tag, kTensorTagPrefix)) return {};
  const size_t colon = tag.find(':');
  if (colon == absl::string_view::npos) return {};
  const absl::string_view name = tag.substr(0, colon), dims = tag.substr(colon + 1);
  tensor::TensorType type;
  bool found = false;
  for (int64_t n = 0; n < 32 && !found; ++n) {
    const tensor::DTypeInfo* info = tensor::FindDType(n);
    if (info != nullptr && name == info->name) {
      type.dtype = info->dtype;
      found = true;
    }
  }
  if (!found) return {};
  if (!dims.empty()) {
    for (absl::string_view d : absl::StrSplit(dims, ',')) {
      int64_t v;
      if (!absl::SimpleAtoi(d, &v) || v < 0 || type.shape.size() >= tensor::kMaxRank) return {};
      type.shape.push_back(v);
    }
  }
  return {Kind::kBytes, {std::move(type)}};
}

namespace {

std::string FeatureText(absl::Span<const tensor::TensorType> feature_types) {
  std::string feature = "the feature holds ";
  for (size_t i = 0; i < feature_types.size(); ++i) {
    absl::StrAppend(&feature, i ? " or " : "", TypeText(feature_types[i]));
  }
  absl::StrAppend(&feature, " tensors");
  return feature;
}

}  // namespace

namespace {

absl::StatusOr<TensorFile> ConvertTensorFile(absl::string_view extension, absl::string_view content,
                                             absl::Span<const tensor::TensorType> feature_types,
                                             bool check_only) {
  TensorFile out;
  const std::string feature = FeatureText(feature_types);
  absl::StatusOr<tensor::Tensor> t = absl::InvalidArgumentError("no array");
  size_t matched = 0;
  if (extension == naming::kPngExtension) {
    // The PNG's pixels go straight into the TensorProto (or, to check only,
    // through one row at a time): never decoded, fitted and encoded in turn.
    auto png = tensor::PngTypeOf(content);
    if (!png.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("not a PNG that can be read (", png.status().message(), "); ", feature));
    }
    // Types with the PNG's own channel count first: an RGBA image whose
    // alpha is opaque is an RGBA tensor when the feature has those, not an
    // RGB one with the alpha dropped.
    const int64_t channels = png->shape[2];
    auto exact = [&](const tensor::TensorType& w) {
      return w.shape.size() == 3 ? w.shape[2] == channels : channels == 1;
    };
    absl::Status why = absl::InvalidArgumentError("no type");
    bool fitted = false;
    for (int pass = 0; pass < 2 && !fitted; ++pass) {
      for (matched = 0; matched < feature_types.size(); ++matched) {
        const tensor::TensorType& want = feature_types[matched];
        if (exact(want) != (pass == 0)) continue;
        why = tensor::PngTypeFits(*png, want.dtype, want.shape);
        if (!why.ok()) continue;
        if (check_only) {
          why = tensor::CheckPngFitsFeature(content, want.dtype, want.shape);
        } else if (auto proto = tensor::PngToTensorProto(content, want.dtype, want.shape);
                   proto.ok()) {
          out.proto = std::move(*proto);
        } else {
          why = proto.status();
        }
        if (why.ok()) {
          fitted = true;
          break;
        }
        if (!absl::IsFailedPrecondition(why)) {  // libpng refuses the pixels
          return absl::InvalidArgumentError(
              absl::StrCat("not a PNG that can be read (", why.message(), "); ", feature));
        }
      }
    }
    if (!fitted) {
      if (feature_types.size() == 1) return absl::InvalidArgumentError(why.message());
      return absl::InvalidArgumentError(
          absl::StrCat("a ", tensor::InfoOf(png->dtype).name, " ", ShapeText(png->shape),
                       " PNG that fits none of the types: ", feature));
    }
    out.matched = feature_types[matched];
    return out;
  } else if (extension == naming::kNpyExtension) {
    t = tensor::ParseNpy(content);
    if (!t.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("not a .npy file that can be read (", t.status().message(), "); ", feature));
    }
    while (matched < feature_types.size() &&
           (t->dtype != feature_types[matched].dtype ||
            t->shape.size() != feature_types[matched].shape.size())) {
      ++matched;
    }
    if (matched == feature_types.size()) {
      bool dtype_known = false;
      for (const auto& w : feature_types) dtype_known |= w.dtype == t->dtype;
      return absl::InvalidArgumentError(absl::StrCat(
          "the array is ", TypeText({t->dtype, t->shape}), ", ", feature,
          dtype_known ? std::string(" (a different rank)")
                      : absl::StrCat(" (save it with .astype('",
                                     tensor::InfoOf(feature_types.front().dtype).descr, "'))")));
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat("'", extension, "' is not .png or .npy"));
  }
  // bool elements other than 0/1 pass as they are: shards hold them (the
  // read path shows them), and a copy must give back the same bytes.
  out.matched = feature_types[matched];
  if (check_only) return out;
  const absl::string_view data = t->data(content);
  auto proto = tensor::EncodeTensor(t->dtype, t->shape, data);
  if (!proto.ok()) return proto.status();
  out.proto = std::move(*proto);
  return out;
}

}  // namespace

absl::StatusOr<TensorFile> TensorFromFile(absl::string_view extension, absl::string_view content,
                                          absl::Span<const tensor::TensorType> feature_types) {
  return ConvertTensorFile(extension, content, feature_types, /*check_only=*/false);
}

absl::StatusOr<tensor::TensorType> CheckTensorFile(
    absl::string_view extension, absl::string_view content,
    absl::Span<const tensor::TensorType> feature_types) {
  auto file = ConvertTensorFile(extension, content, feature_types, /*check_only=*/true);
  if (!file.ok()) return file.status();
  return file->matched;
}

StagedFile ClassifyStagedFile(absl::string_view rel, bool sequence) {
  std::vector<std::string> parts = absl::StrSplit(rel, '/');
  if (parts.size() < 2 || naming::IsIgnoredName(parts.back())) return {};
  // The path inside the record folder.
  std::vector<std::string> comps(parts.begin() + 1, parts.end());
  StagedFile out;
  if (comps.size() >= 2 && comps[0] == naming::kFeatureListsDir) {
    // feature_lists/<list path>/<step>[/<item>]: list folders never look
    // like steps (their all-digit components are escaped), so the first
    // step-like component is the step.
    size_t j = 1;
    while (j < comps.size() && !StepIndex(comps[j])) ++j;
    if (j == 1 || j >= comps.size() || j + 2 < comps.size()) return {};
    std::vector<std::string> dirs(comps.begin() + 1, comps.begin() + static_cast<ptrdiff_t>(j) - 1);
    out.feature = absl::StrCat(naming::kFeatureListsDir, "/",
                               naming::FeatureNameFromPath(dirs, comps[j - 1]));
    const std::string& file = comps.back();
    const absl::string_view ext = ItemExtension(file);
    if (j + 1 == comps.size() && ext.empty()) {
      out.role = StagedFile::Role::kNumeric;
    } else if (IsArrayExtension(ext) && (j + 1 == comps.size() || naming::ListItemIndex(file))) {
      out.role = StagedFile::Role::kArray;
      out.extension = std::string(ext);
    } else {
      return {};
    }
    return out;
  }
  if (sequence && (comps[0] == naming::kContextDir || comps[0] == naming::kEieContextDir)) {
    comps.erase(comps.begin());
  }
  if (sequence && comps.size() >= 3 &&
      (comps[0] == naming::kExamplesDir || comps[0] == naming::kEieExamplesDir) &&
      std::all_of(comps[1].begin(), comps[1].end(), absl::ascii_isdigit)) {
    comps.erase(comps.begin(), comps.begin() + 2);  // examples/<i>/: one Example's features
  }
  if (comps.empty()) return {};
  const std::string file = comps.back();
  comps.pop_back();  // the folders leading to the file
  if (!comps.empty() && !naming::IsContinuation(comps.back()) && naming::ListItemIndex(file)) {
    // An item of a bytes list: the folder is the feature.
    const absl::string_view ext = ItemExtension(file);
    if (!IsArrayExtension(ext)) return {};
    const std::string list = comps.back();
    comps.pop_back();
    out.role = StagedFile::Role::kArray;
    out.feature = naming::FeatureNameFromPath(comps, list);
    out.extension = std::string(ext);
    return out;
  }
  const naming::LeafName leaf = naming::ParseLeafName(file);
  const absl::string_view ext = absl::string_view(file).substr(leaf.stem_escaped.size());
  if (leaf.role == naming::FileRole::kNumeric) {
    out.role = StagedFile::Role::kNumeric;
  } else if (leaf.role == naming::FileRole::kSingleBytes && IsArrayExtension(ext)) {
    out.role = StagedFile::Role::kArray;
    out.extension = std::string(ext);
  } else {
    return {};
  }
  out.feature = naming::FeatureNameFromPath(comps, leaf.stem_escaped);
  return out;
}

absl::StatusOr<Kind> ValidateNumeric(absl::string_view content, Kind hint) {
  auto f = naming::ParseNumeric(content, hint);
  if (!f.ok()) return f.status();
  return f->kind;
}

FeatureType KindTagAt(const std::string& path) {
  char buf[4096];
  const ssize_t n = ::lgetxattr(path.c_str(), kKindXattr, buf, sizeof buf);
  if (n <= 0) return {};
  return ParseKindTag(absl::string_view(buf, static_cast<size_t>(n)));
}

FeatureType KindTagOf(int fd) {
  char buf[4096];
  const ssize_t n = ::fgetxattr(fd, kKindXattr, buf, sizeof buf);
  if (n <= 0) return {};
  return ParseKindTag(absl::string_view(buf, static_cast<size_t>(n)));
}

}  // namespace tfrecordfs::staging
