// The reverse layout: a staged record folder on disk -> a serialized
// tf.train.Example (or a raw payload), by the reverse of the read path's
// layout (naming/naming.h). The checks of one staged file (its place in the
// record, kind tags, tensor and numeric content) are staged_file.h's:
//
//   * a folder holding exactly one regular file `record.bin` is a raw
//     (non-Example) payload: the file's bytes, unchanged;
//   * extension-less file -> int64 list if every line is an integer, else a
//     float list, else invalid; `<name>.txt` -> bytes list, one value per
//     line; `<name>.none` -> a kindless feature (Feature{}; the file must be
//     empty; beside another file of the same feature, that file gives the
//     value and the `.none` is ignored); `<name><other ext>` -> one bytes
//     value, the exact bytes;
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
//   * a folder with a top-level `examples/` folder (and no feature_lists/)
//     is a TF-Ranking ExampleListWithContext (naming.h): `context/`, when
//     present (even empty), is its context, read as an Example's features;
//     every entry of examples/ must be a folder named by its index (zero
//     padding optional), read as one Example's features, the examples in
//     index order; gaps are allowed (a removed example folder drops that
//     example). Anything else at the top of such a folder makes it invalid;
//   * likewise a folder with a top-level `serialized_examples/` holding only
//     folders (or nothing; a bytes list's folder holds files) is a
//     TF-Ranking Example-in-Example, with `serialized_context/` as its
//     context;
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
// writes for its array (TensorFromFile, staged_file.h). For any other name,
// the exact bytes.
//
// Thread-safety: pure functions of the file system state.
#ifndef TFRECORDFS_STAGING_RECORD_FOLDER_H_
#define TFRECORDFS_STAGING_RECORD_FOLDER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/naming/feature_type.h"

namespace tfrecordfs::staging {

// A numeric file (or sequence list) whose kind came from its content alone:
// neither `types` nor a kKindXattr tag said (a folder copied without its
// extended attributes by `cp -r`, or a feature the shards do not have).
// Every line an integer: int64; else float (floats read back as floats:
// naming.h writes `1.0`, never `1`).
struct InferredKind {
  std::string file;  // relative to the record folder; a list's folder ends in '/'
  example::Kind kind = example::Kind::kNone;
};

// Reads the record folder at `path` and returns the record payload. Errors
// are InvalidArgument with a message naming the offending file (relative to
// `path`) and, for numeric files, the line; a file marked with kErrorXattr
// is an error with the mark's reason, whatever it holds now. `inferred`
// (may be null) gets the numeric files whose kind was inferred, in file
// order (a record that fails leaves it unspecified).
absl::StatusOr<std::string> PayloadFromFolder(const std::string& path, naming::FeatureTypes& types,
                                              std::vector<InferredKind>* inferred = nullptr);

}  // namespace tfrecordfs::staging

#endif  // TFRECORDFS_STAGING_RECORD_FOLDER_H_
