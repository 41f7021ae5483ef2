// StagedFileChecker: what is written into the staging store and what is
// checked, in one place. It owns the write-time and close-time checks of
// staged files, the files written without a handle still to be checked,
// the refusal marks (kErrorXattr) and the kind tags (kKindXattr) they leave,
// and the count of refusals. What a file's content must be is
// staged_file.h's; where a file sits, the store's NodeTable says.
//
// The checks need the types the mounted shards give feature names, which
// only the caller knows: each method that checks takes the
// naming::FeatureTypes to check against (naming::NoFeatureTypes(): none
// known, every feature kNone), so staging depends on nothing above it.
//
// Thread-safety: thread-safe; mu_ guards only the sets of nodes and is never
// held while a file is read or checked, nor while calling into the
// NodeTable (whose own lock it never nests with).
#ifndef TFRECORDFS_STAGING_STAGED_FILE_CHECKER_H_
#define TFRECORDFS_STAGING_STAGED_FILE_CHECKER_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/naming/feature_type.h"
#include "tfrecordfs/staging/node_table.h"
#include "tfrecordfs/staging/staged_file.h"

namespace tfrecordfs::staging {

class StagedFileChecker {
 public:
  // Checks the files of the store whose records/ is `records_dir`, whose
  // nodes `nodes` knows (which must outlive the checker).
  StagedFileChecker(NodeTable& nodes, std::string records_dir)
      : nodes_(nodes), records_dir_(std::move(records_dir)) {}

  // The whole-file check of a written file (ClassifyStagedFile says which
  // are checked), made when the file is complete: at FLUSH (`-o open`: its
  // error fails close()) or the RELEASE of a handle, else, for a file
  // written without a handle, when it looks whole, at the kernel's last
  // FORGET, or before the pack (NoteWritten); those errors are only logged,
  // and the pack refuses the record with the same reason:
  //   * a numeric feature file or numeric sequence step whose feature (or
  //     list) `types` knows must parse, with that kind;
  //   * a `.png`/`.npy` of a feature whose type (or, when `types` does not
  //     know the name, whose tag) is a tensor must convert (TensorFromFile);
  // else InvalidArgument (EINVAL), logged with the file's path; the file
  // stays staged. On success the kind is remembered in the file's
  // kKindXattr. A file under `<record>/context/` of a record folder without
  // feature_lists/ (yet: `cp -r` copies context/ first) is checked as the
  // feature `context/<x>` when the shards know that name, else as the
  // context feature `<x>`. A numeric name `types` does not know is not
  // judged here (it may be a tool's temporary file, `sedXXXXXX`, about to
  // be renamed): CheckRenamed judges it under its final name, the pack by
  // its content, and ErrorOf as the pack would.
  //
  // A file whose last write was refused (ValidateOnWrite) and not written
  // since keeps its kErrorXattr mark and fails here with it; a file written
  // since loses the mark here, whatever the verdict (its content is its
  // writer's again, and is judged as it is).
  absl::Status ValidateOnClose(uint64_t node, int fd, naming::FeatureTypes& types);

  // write() of `data` at `offset` to a file open as `fd`, checked *before*
  // the bytes are written, so that a bad file fails write() with EINVAL,
  // which the shell and cp report (the kernel sends no FLUSH by default, so
  // close() cannot fail; see fuse::OpsOptions::skip_open). Only names that
  // already are features the shards know are checked here: a temporary
  // name (`sedXXXXXX`, `tmpab12cd`) cannot be judged by its name, and is
  // judged when it gets its final one (CheckRenamed, the pack):
  //   * a numeric file of a feature `types` knows (the files
  //     ValidateOnClose checks): every complete line the file would then
  //     hold must parse, and the last, unterminated line must be the start
  //     of a value (CheckNumericPrefix: `printf 5x > label` fails,
  //     `printf -- -` is left to ValidateOnClose). Files over
  //     kMaxCheckedOnWrite bytes are left to ValidateOnClose;
  //   * a `.png`/`.npy` of a tensor feature: a write that lands in the
  //     header (the PNG signature and IHDR, the .npy header dict) is checked
  //     against the feature's types (CheckTensorFilePrefix); the pixels and
  //     data are left to ValidateOnClose.
  // Other files: always OK, nothing is read. A refusal marks the file
  // (kErrorXattr, with the reason) until it is written again and passes
  // ValidateOnClose: the bytes refused never landed, so whatever the file
  // holds is not what its writer meant, and its record stays staged.
  absl::Status ValidateOnWrite(uint64_t node, int fd, uint64_t offset, absl::string_view data,
                               naming::FeatureTypes& types);
  static constexpr uint64_t kMaxCheckedOnWrite = uint64_t{1} << 20;

  // A write or truncation of `node` was done (not refused): the content is
  // its writer's again, so the next ValidateOnClose drops a refusal mark.
  void NoteRewritten(uint64_t node);

  // A write (or truncation) of `node` through no handle of the caller's (the
  // kernel opened the file itself: no RELEASE will follow). The file gets
  // ValidateOnClose's check (a refusal logged, the kind remembered) at once
  // when it looks whole (`fd` >= 0 open on it: a numeric file ending in a
  // newline, a PNG ending in IEND, a .npy of the size its header says), else
  // at CheckWritten, at the node's last Forget, or at CheckAllWritten.
  void NoteWritten(uint64_t node, naming::FeatureTypes& types, int fd = -1);
  // Whether NoteWritten marked `node` since its last check.
  bool IsWritten(uint64_t node);
  // ValidateOnClose of `node` through a descriptor of its own if NoteWritten
  // marked it since its last check; else OK.
  absl::Status CheckWritten(uint64_t node, naming::FeatureTypes& types);
  // CheckWritten of every marked node (before a pack, at unmount).
  void CheckAllWritten(naming::FeatureTypes& types);

  // The rename check of the regular file `name` in the folder open as
  // `parent_fd`, to be named `to_rel` (relative to records/): a file whose
  // content is checked (ClassifyStagedFile) and whose feature `types` knows
  // (or, for a `.png`/`.npy`, whose tag says it is a tensor) is checked as
  // that file, as ValidateOnClose would: what an editor or tool wrote under
  // a temporary name (`sedXXXXXX`, `x.tmp`, `.x.swp`, `x~`) is judged once
  // its name is final. A refusal is InvalidArgument (EINVAL), logged; the
  // caller then does not rename.
  absl::Status CheckRenamed(int parent_fd, const std::string& name, const std::string& to_rel,
                            naming::FeatureTypes& types);

  // Why the pack would leave `node` staged, for `getfattr -n
  // user.tfrecordfs.error` (and `tfrecordfs status`): for a file in a record
  // folder, its refusal mark, else what checking its content as the pack
  // does says (the names `types` does not know included); for a record
  // folder, why PayloadFromFolder refuses it (the whole folder is read);
  // for a file directly in records/, kLooseFileReason. NotFound when
  // nothing is wrong (and for other nodes).
  absl::StatusOr<std::string> ErrorOf(uint64_t node, naming::FeatureTypes& types);
  // Whether `node` carries a refusal mark (one fgetxattr; for listxattr).
  bool HasRefusalMark(uint64_t node);
  // Refusals so far (write, close and rename), for tests and `status`.
  uint64_t refusals() const { return refusals_.load(std::memory_order_relaxed); }

 private:
  // Where the file at `rel` (relative to records/) sits, and what `types`
  // says about its feature (ValidateOnClose's rules).
  struct Placed {
    StagedFile file;
    naming::FeatureType type;
  };
  Placed Place(const std::string& rel, naming::FeatureTypes& types);
  // The whole-file check of the file open as `fd` as the file `placed`:
  // `judged` false when no check applies (not a checked file; a name
  // `types` does not know, unless `unknown_too`: then judged as the pack
  // does); else `status` says why not (InvalidArgument, no path prefix) and
  // `tag` what kKindXattr should then hold ("" none; nullopt leave it).
  struct Verdict {
    bool judged = false;
    absl::Status status;
    std::optional<std::string> tag;
  };
  static Verdict Judge(const Placed& placed, int fd, bool unknown_too);
  // Logs a refusal (a warning); the first of the mount also says where the
  // reasons can be read.
  void LogRefusal(absl::string_view what);

  NodeTable& nodes_;
  const std::string records_dir_;
  Mutex mu_;
  absl::flat_hash_set<uint64_t> written_ ABSL_GUARDED_BY(mu_);  // NoteWritten, unchecked
  // Nodes whose last write was refused and that were not written since
  // (their kErrorXattr mark must survive the next check).
  absl::flat_hash_set<uint64_t> refused_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> refusals_{0};
};

// Why pack leaves out a regular file at the top of the records directory.
inline constexpr char kLooseFileReason[] =
    "not in a record folder (a file directly in staging/ is not a record; move it into one)";

}  // namespace tfrecordfs::staging

#endif  // TFRECORDFS_STAGING_STAGED_FILE_CHECKER_H_
