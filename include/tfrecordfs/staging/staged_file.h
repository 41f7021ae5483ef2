// One staged file: where it sits in the record it will be packed into, the
// kind tags and refusal marks kept in its extended attributes, and the checks
// of its content (numeric lines, .png/.npy of tensor features) that both the
// write-time checks (staged_file_checker.h) and the reverse layout
// (record_folder.h) apply, so the mount and the pack judge a file alike.
//
// Thread-safety: pure functions (KindTagAt/KindTagOf read one attribute).
#ifndef TFRECORDFS_STAGING_STAGED_FILE_H_
#define TFRECORDFS_STAGING_STAGED_FILE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/naming/feature_type.h"
#include "tfrecordfs/tensor/tensor.h"

namespace tfrecordfs::staging {

// The extended attribute in which the mount remembers, per staged file, the
// kind it was validated as, so the kind survives a daemon restart even if no
// mounted shard is read again: "int64" or "float" for a numeric file (or a
// numeric sequence step), "tensor:<dtype>:<d0>,<d1>,..." (TensorTag) for a
// `.png`/`.npy` written for a tensor feature. The shards' type wins over it:
// the tag is read only when they do not know the feature name (a file renamed
// from another feature keeps that feature's tag).
inline constexpr char kKindXattr[] = "user.tfrecordfs.kind";

// The extended attribute that flags a staged file (or a file of an edited
// record) whose content its last whole-file check did not accept
// (StagedFileChecker::ValidateOnClose, CheckRenamed): the write landed, and
// the flag says why the file cannot be packed ("line 1: 'hello' is not an
// int64 ..."). The next check that passes removes it; PayloadFromFolder
// refuses a record holding a flagged file with that reason, so the record
// stays staged (an edited record's shard uncommitted). Read through the
// mount as the same name (`getfattr -n user.tfrecordfs.error FILE`).
inline constexpr char kErrorXattr[] = "user.tfrecordfs.error";

// The tag text for a tensor type.
std::string TensorTag(const tensor::TensorType& type);
// The kind a tag's text says: kInt64, kFloat, kBytes with a tensor type, or
// kNone (no tag, or text this version does not know).
naming::FeatureType ParseKindTag(absl::string_view tag);
// ParseKindTag of the kKindXattr of the file at `path` (not followed if a
// symlink) or open as `fd`; kNone when it has none.
naming::FeatureType KindTagAt(const std::string& path);
naming::FeatureType KindTagOf(int fd);

// A staged file of a tensor feature, converted.
struct TensorFile {
  std::string proto;           // the serialized TensorProto
  tensor::TensorType matched;  // the feature type it was checked against
};

// The serialized TensorProto for a staged file of a tensor feature whose
// values have the types `feature_types` (naming::FeatureType::tensors, not empty):
// `extension` ".png" (tensor::DecodePng, then FitPngToFeature against the
// types with the PNG's channel count, then the others, each in order) or ".npy" (tensor::ParseNpy;
// dtype and rank of one of the types). Else InvalidArgument saying why (no message prefix).
absl::StatusOr<TensorFile> TensorFromFile(absl::string_view extension, absl::string_view content,
                                          absl::Span<const tensor::TensorType> feature_types);

// TensorFromFile's checks without building the TensorProto: the type the
// file matched, or the same InvalidArgument. A PNG is decoded a row at a
// time (tensor::CheckPngFitsFeature): memory O(width), not O(image).
absl::StatusOr<tensor::TensorType> CheckTensorFile(
    absl::string_view extension, absl::string_view content,
    absl::Span<const tensor::TensorType> feature_types);

// Where a staged file sits in the record it will be packed into, for the
// checks of whole files (StagedFileChecker).
struct StagedFile {
  enum class Role {
    kOther,    // checked by the pack only (text, other bytes, folders)
    kNumeric,  // a numeric feature file or a numeric sequence step
    kArray,    // a `.png`/`.npy` value: a tensor if its feature type says so
  };
  Role role = Role::kOther;
  std::string feature;    // the feature name, or `feature_lists/<list name>`
  std::string extension;  // kArray: ".png" or ".npy"
};

// Classifies the file at `rel` (relative to the records folder:
// `<record>/<path in the record>`). `sequence` says whether the record
// folder is a SequenceExample or a TF-Ranking list (it has a top-level
// feature_lists/, examples/ or serialized_examples/); only then is
// `context/<x>` (`serialized_context/<x>`) the context feature `x` (else the
// feature `context/x`), and `examples/<i>/<x>` (`serialized_examples/<i>/<x>`)
// the feature `x` of example i. Files under `<record>/feature_lists/` are steps
// whatever `sequence` says. A list item (`3.png` in a folder) is taken as an item of the folder's
// feature.
StagedFile ClassifyStagedFile(absl::string_view rel, bool sequence);

// Validates one numeric file's content as the mount does on close(). The
// returned kind is what the pack will write.
absl::StatusOr<example::Kind> ValidateNumeric(absl::string_view content, example::Kind hint);

// Whether `ext` is ".png" or ".npy" (a file that may hold a tensor).
bool IsArrayExtension(absl::string_view ext);
// The extension of a step or list item name: from its first '.' on.
absl::string_view ItemExtension(absl::string_view name);
// The name of a step entry: its index (leading zeros allowed: steps are
// zero-padded), or nullopt when `name` (up to its first '.') is not all digits.
std::optional<uint64_t> StepIndex(absl::string_view name);

}  // namespace tfrecordfs::staging

#endif  // TFRECORDFS_STAGING_STAGED_FILE_H_
