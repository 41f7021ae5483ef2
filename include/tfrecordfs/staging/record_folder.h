// A staged record folder on disk -> a serialized tf.train.Example (or a raw
// payload), by the reverse of the read path's layout (naming/naming.h):
//
//   * a folder holding exactly one regular file `record.bin` is a raw
//     (non-Example) payload: the file's bytes, unchanged;
//   * extension-less file -> int64 list if every line is an integer, else a
//     float list, else invalid; `<name>.txt` -> bytes list, one value per
//     line; `<name><other ext>` -> one bytes value, the exact bytes;
//   * a directory of `0<ext>`, `1<ext>`, ... -> a bytes list in index order;
//     other directories -> '/' in the feature name; `%+` chunks join;
//   * escapes are undone; hidden names (leading '.') and backups ending in
//     '~' are skipped (editors leave them);
//   * a folder with a top-level `feature_lists/` folder is a
//     tf.train.SequenceExample (naming.h): `context/` read as an Example's
//     features, and under feature_lists/ every folder holding step entries
//     (names whose part before the first '.' is all digits) or nothing is a
//     list, other folders are '/' in list names. Steps must be numbered
//     0..n-1 (zero padding optional): `07` numeric, `07.txt` text, `07.none`
//     (empty) kindless, `07<other ext>` one bytes value, `07/` a bytes list.
//     Numeric steps of one list share a kind: the shards' kind for
//     `feature_lists/<name>` when `types` knows it, else float when any
//     step is not all integers, else int64. Anything else at the top of
//     such a folder makes it invalid;
//   * symlinks, devices, fifos and sockets make the record invalid, and so
//     does a feature name that is not valid UTF-8 once unescaped (map keys
//     are proto3 strings).
//
// Kinds: a numeric file's kind comes from `types.Lookup(feature_name)` when it
// returns kInt64 or kFloat (the kind the feature has in the mounted shards),
// else from the file's kKindXattr tag, else from its content. A sequence
// list's numeric steps ask `types.Lookup("feature_lists/<list name>")`, then the
// steps' tags.
//
// Tensors: a `.png` or `.npy` file (a single value `<name>.png`, a list item
// `<name>/3.npy`, a sequence step `07.png` or `07/0.png`) of a feature whose
// type is a tensor (naming::FeatureType::tensors; else whose tag is one,
// when `types` does not know the name) becomes the TensorProto tf.io.serialize_tensor
// writes for its array (TensorFromFile). For any other name, the exact bytes.
//
// Thread-safety: pure functions of the file system state.
#ifndef TFRECORDFS_STAGING_RECORD_FOLDER_H_
#define TFRECORDFS_STAGING_RECORD_FOLDER_H_

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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

// The extended attribute that marks a staged file whose content was refused
// by a write() (Store::ValidateOnWrite): the bytes of that write never
// landed, so the file holds less than its writer meant. Its value is the
// reason ("write refused: line 1: ..."). It stays until the file is written
// again (a write or truncation that is not refused, then a whole-file check
// that passes); PayloadFromFolder refuses a record holding such a file with
// that reason, so the record stays staged. Read through the mount as the
// same name (`getfattr -n user.tfrecordfs.error FILE`).
inline constexpr char kErrorXattr[] = "user.tfrecordfs.error";

// The tag text for a tensor type.
std::string TensorTag(const tensor::TensorType& type);
// The kind a tag's text says: kInt64, kFloat, kBytes with a tensor type, or
// kNone (no tag, or text this version does not know).
naming::FeatureType ParseKindTag(absl::string_view tag);

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

// The first bytes of a staged `.png`/`.npy` of a tensor feature (the file
// as written so far, from offset 0; a prefix of the final file): OK while
// they can still begin a file TensorFromFile accepts, else InvalidArgument
// saying why, as TensorFromFile words it. What is decided this early: the
// PNG signature, its IHDR chunk (length, CRC, geometry) and whether its bit
// depth and colour type can give one of the types; the .npy magic, version
// and header dict, and whether its dtype and rank are one of the types. The
// pixels, later chunks and the data size are left to TensorFromFile.
// `header_end` is set to how many bytes of the file this check reads (0
// while unknown: the whole prefix given).
absl::Status CheckTensorFilePrefix(absl::string_view extension, absl::string_view prefix,
                                   absl::Span<const tensor::TensorType> feature_types,
                                   uint64_t* header_end);

// Whether `tail` (the text after the last newline of a numeric file being
// written) can still become a valid line of a file ValidateNumeric accepts
// with kind `hint`: "5", "-", "1e", "in" (inf), "na" (nan) can; "5x", "hello"
// cannot. InvalidArgument saying why when it cannot.
absl::Status CheckNumericPrefix(absl::string_view tail, example::Kind hint);

// Where a staged file sits in the record it will be packed into, for the
// checks at write() and close() (Store::ValidateOnWrite/ValidateOnClose).
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
// folder is a SequenceExample (it has a top-level feature_lists/); only
// then is `context/<x>` the context feature `x` (else the feature
// `context/x`). Files under `<record>/feature_lists/` are steps whatever
// `sequence` says. A list item (`3.png` in a folder) is taken as an item of
// the folder's feature.
StagedFile ClassifyStagedFile(absl::string_view rel, bool sequence);

// Reads the record folder at `path` and returns the record payload. Errors
// are InvalidArgument with a message naming the offending file (relative to
// `path`) and, for numeric files, the line; a file marked with kErrorXattr
// is an error with the mark's reason, whatever it holds now.
absl::StatusOr<std::string> PayloadFromFolder(const std::string& path, naming::FeatureTypes& types);

// Validates one numeric file's content as the mount does on close(). The
// returned kind is what the pack will write.
absl::StatusOr<example::Kind> ValidateNumeric(absl::string_view content, example::Kind hint);

}  // namespace tfrecordfs::staging

#endif  // TFRECORDFS_STAGING_RECORD_FOLDER_H_
