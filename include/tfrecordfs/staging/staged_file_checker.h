// StagedFileChecker: what is written into the staging store and what is
// checked, in one place. It owns the checks of whole staged files, the files
// written without a handle still to be checked, the flags (kErrorXattr) and
// the kind tags (kKindXattr) they leave, and the count of flags. What a
// file's content must be is staged_file.h's; where a file sits, the store's
// NodeTable says.
//
// One rule, for staging/ and for the edit store alike (the records of the
// mounted shards being edited): a write, a close or a rename never fails
// because of what a file holds. A file's name is final only after a tool's
// rename (`sed -i` writes `sedXXXXXX`, vim `x~`, Python `tmpXXXXXXXX`) and a
// new feature's kind is known only to the pack, so no refusal of bytes as
// they arrive could hold for every name. Each file is checked once it is
// whole, and a file that does not pass is flagged (kErrorXattr: the
// reason), which `getfattr`, `tfrecordfs status`, the log, and the pack and
// the commit (which leave its record out, naming the file) all say.
//
// The checks need the types the mounted shards give feature names, which
// only the caller knows: each method that checks takes the
// naming::FeatureTypes to check against (naming::NoFeatureTypes(): none
// known, every feature kNone), so staging depends on nothing above it.
//
// Thread-safety: thread-safe; mu_ guards only the set of nodes and is never
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
  // are checked), made when the file is complete: at FLUSH (`-o open`) or
  // the RELEASE of a handle, else, for a file written without a handle,
  // when it looks whole, at the kernel's last FORGET, or before the pack
  // and the commit (NoteWritten):
  //   * a numeric feature file or numeric sequence step whose feature (or
  //     list) `types` knows must parse, with that kind;
  //   * a `.png`/`.npy` of a feature whose type (or, when `types` does not
  //     know the name, whose tag) is a tensor must convert (TensorFromFile).
  // A file that passes loses its flag and gets its kind in kKindXattr; one
  // that does not is flagged (kErrorXattr holds the reason) and logged with
  // its path, and its record is left out by the pack (and its shard by the
  // commit) until it is written again and passes. Either way OK: only an
  // I/O error is returned. A file under `<record>/context/` of a record
  // folder without feature_lists/ (yet: `cp -r` copies context/ first) is
  // checked as the feature `context/<x>` when the shards know that name,
  // else as the context feature `<x>`. A numeric name `types` does not know
  // is not judged here (it may be a tool's temporary file, `sedXXXXXX`,
  // about to be renamed): CheckRenamed judges it under its final name, the
  // pack by its content, and ErrorOf as the pack would.
  absl::Status ValidateOnClose(uint64_t node, int fd, naming::FeatureTypes& types);
  // Files over this many bytes are not judged whole by a look at their end
  // (NoteWritten): their check waits for the release or the pack.
  static constexpr uint64_t kMaxCheckedOnWrite = uint64_t{1} << 20;

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
  // that file, as ValidateOnClose would, and flagged when it does not pass:
  // what an editor or tool wrote under a temporary name (`sedXXXXXX`,
  // `x.tmp`, `.x.swp`, `x~`) is judged once its name is final. Any other
  // file loses its flag (the pack judges it by its content). OK but for
  // I/O errors: the rename goes ahead.
  absl::Status CheckRenamed(int parent_fd, const std::string& name, const std::string& to_rel,
                            naming::FeatureTypes& types);

  // Why the pack would leave `node` staged, for `getfattr -n
  // user.tfrecordfs.error` (and `tfrecordfs status`): for a file in a record
  // folder, its flag, else what checking its content as the pack does says
  // (the names `types` does not know included); for a record
  // folder, why PayloadFromFolder refuses it (the whole folder is read);
  // for a file directly in records/, kLooseFileReason. NotFound when
  // nothing is wrong (and for other nodes).
  absl::StatusOr<std::string> ErrorOf(uint64_t node, naming::FeatureTypes& types);
  // Whether `node` carries a flag (one fgetxattr; for listxattr).
  bool HasRefusalMark(uint64_t node);
  // Files flagged so far (at close and at rename), for tests.
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
  // Flags the file open as `fd` (at `rel`) with `why`, and logs it.
  void Flag(int fd, const std::string& rel, absl::string_view why);
  // Logs a flag (info: what still holds is said by the reports, `status`
  // and the file's attribute); the first of the mount also says where the
  // reasons can be read.
  void LogRefusal(absl::string_view what);

  NodeTable& nodes_;
  const std::string records_dir_;
  Mutex mu_;
  absl::flat_hash_set<uint64_t> written_ ABSL_GUARDED_BY(mu_);  // NoteWritten, unchecked
  std::atomic<uint64_t> refusals_{0};
};

// Why pack leaves out a regular file at the top of the records directory.
inline constexpr char kLooseFileReason[] =
    "not in a record folder (a file directly in staging/ is not a record; move it into one)";

}  // namespace tfrecordfs::staging

#endif  // TFRECORDFS_STAGING_STAGED_FILE_CHECKER_H_
