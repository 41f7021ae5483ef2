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
//     `feature_lists/<name>` when the hint knows it, else float when any
//     step is not all integers, else int64. Anything else at the top of
//     such a folder makes it invalid;
//   * symlinks, devices, fifos and sockets make the record invalid, and so
//     does a feature name that is not valid UTF-8 once unescaped (map keys
//     are proto3 strings).
//
// Kinds: a numeric file's kind comes from `hint(feature_name)` when it
// returns kInt64 or kFloat (the kind the feature has in the mounted shards),
// else from its content.
//
// Thread-safety: pure functions of the file system state.
#ifndef TFRECORDFS_STAGING_RECORD_FOLDER_H_
#define TFRECORDFS_STAGING_RECORD_FOLDER_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/example/example.h"

namespace tfrecordfs::staging {

using KindHint = std::function<example::Kind(absl::string_view feature_name)>;

// The extended attribute in which the mount remembers, per numeric file,
// the kind it was validated as ("int64" or "float"), so the kind survives a
// daemon restart even if no mounted shard is read again. The hint wins over
// it: the tag is read only when the hint does not know the feature name (a
// file renamed from another feature keeps that feature's tag).
inline constexpr char kKindXattr[] = "user.tfrecordfs.kind";

// Reads the record folder at `path` and returns the record payload. Errors
// are InvalidArgument with a message naming the offending file (relative to
// `path`) and, for numeric files, the line.
absl::StatusOr<std::string> PayloadFromFolder(const std::string& path, const KindHint& hint);

// Validates one numeric file's content as the mount does on close(). The
// returned kind is what the pack will write.
absl::StatusOr<example::Kind> ValidateNumeric(absl::string_view content, example::Kind hint);

}  // namespace tfrecordfs::staging

#endif  // TFRECORDFS_STAGING_RECORD_FOLDER_H_
