// The staging store: a real directory on disk behind MOUNT/staging/ (its
// files and folders: staging/layout.h).
//
// Because the bytes live on disk, a daemon that dies loses nothing: the next
// mount shows the same staging contents.
//
// The store serves the staging subtree much like libfuse's passthrough_ll,
// with a bounded number of descriptors: all operations are *at() calls
// relative to O_PATH descriptors of the nodes with single-component names,
// so nothing can reach outside the store: "." / ".." / names with '/' are
// refused, symlinks and hard links are refused (EPERM), existing symlinks are
// never followed.
//
// The store's jobs live in classes of their own: which nodes the kernel
// knows and the bounded descriptors that reach them (NodeTable,
// node_table.h: a node's inode number is not reused for another file while
// the kernel knows the node, as long as files in the store are changed only
// through it, and the lock makes the daemon the only writer); what is
// written and checked (StagedFileChecker, staged_file_checker.h: checker());
// a record folder -> its payload (record_folder.h).
//
// Thread-safety: thread-safe (NodeTable and StagedFileChecker each guard
// their state with a lock of their own; the two are never nested).
#ifndef TFRECORDFS_STAGING_STORE_H_
#define TFRECORDFS_STAGING_STORE_H_

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/naming/feature_type.h"
#include "tfrecordfs/staging/layout.h"
#include "tfrecordfs/staging/node_table.h"
#include "tfrecordfs/staging/owner.h"
#include "tfrecordfs/staging/staged_file_checker.h"

namespace tfrecordfs::staging {

// Which fields SetAttr changes.
enum SetAttrBits : int {
  kSetMode = 1,
  kSetSize = 2,
  kSetAtime = 4,
  kSetMtime = 8,
  kSetAtimeNow = 16,
  kSetMtimeNow = 32,
};

struct OpenOptions {
  // Read-only (a `-o ro` mount): the store is neither created nor locked
  // nor written, so any number of read-only openers can share it with one
  // read-write owner. A missing store is NotFound. The caller must not call
  // the mutating methods (the kernel refuses writes on a read-only mount).
  bool read_only = false;
  // O_PATH descriptors of nodes kept open at once (node_table.h); 0: an
  // eighth of the soft RLIMIT_NOFILE, between 16 and 1024.
  size_t node_fds = 0;
  // Set journal.reserve aside (layout.h); false for a store that is never
  // packed (the edit store, staging/edits.h).
  bool reserve_journal = true;
};

class Store {
 public:
  // Creates the layout if needed and takes the exclusive lock; fails with
  // EBUSY when another read-write daemon owns the store. Then (re)allocates
  // journal.reserve; a file system too full for it only gets a warning.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& dir,
                                                     OpenOptions options = {});
  ~Store();

  const std::string& dir() const { return dir_; }
  // RecordsDir(dir()) (layout.h).
  std::string records_dir() const { return RecordsDir(dir_); }

  // The node of records/ (the staging root). Never forgotten.
  uint64_t root() const { return nodes_.root(); }

  // Each successful Lookup/Mkdir/Create adds one kernel reference to the
  // returned node; Forget drops n (the last one runs
  // StagedFileChecker::CheckWritten).
  absl::StatusOr<struct stat> Lookup(uint64_t parent, absl::string_view name);
  void Forget(uint64_t node, uint64_t n, naming::FeatureTypes& types);
  absl::StatusOr<struct stat> GetAttr(uint64_t node);
  // `fd` >= 0: an open handle of the node to use (ftruncate on it).
  absl::StatusOr<struct stat> SetAttr(uint64_t node, int fd, const struct stat& to, int bits);
  // Mkdir, Create and SetAttr (kSetMode) give the mode StagedMode says.
  // `owner`: see Owner (none: the daemon's own ids).
  absl::StatusOr<struct stat> Mkdir(uint64_t parent, absl::string_view name, mode_t mode,
                                    std::optional<Owner> owner = std::nullopt);
  // Returns the new node's attributes and an open descriptor (caller owns).
  // Without O_EXCL an existing file is opened, and keeps its owner.
  absl::StatusOr<std::pair<struct stat, int>> Create(uint64_t parent, absl::string_view name,
                                                     mode_t mode, int flags,
                                                     std::optional<Owner> owner = std::nullopt);
  absl::StatusOr<int> Open(uint64_t node, int flags) { return nodes_.Open(node, flags); }
  absl::Status Unlink(uint64_t parent, absl::string_view name);
  absl::Status Rmdir(uint64_t parent, absl::string_view name);
  // A regular file renamed onto a name whose content is checked is first
  // checked under that name (StagedFileChecker::CheckRenamed), and flagged
  // when it does not pass; the rename goes ahead. With RENAME_EXCHANGE both
  // files are checked.
  absl::Status Rename(uint64_t parent, absl::string_view name, uint64_t new_parent,
                      absl::string_view new_name, unsigned flags, naming::FeatureTypes& types);
  // A descriptor to list the directory with (caller owns; use fdopendir).
  absl::StatusOr<int> OpenDir(uint64_t node);

  // The checks of what is written into the store (ValidateOnClose,
  // NoteWritten, ErrorOf...).
  StagedFileChecker& checker() { return checker_; }
  // checker().CheckAllWritten (before a pack, at unmount).
  void CheckAllWritten(naming::FeatureTypes& types) { checker_.CheckAllWritten(types); }

  // A writable descriptor of `node`, for writes that come without a handle
  // (the kernel opened the file itself): the descriptor Create opened, if
  // still cached, else the file opened O_WRONLY. Cached, at most
  // max(node_fds / 2, 8) at once (LRU), until the node is forgotten: a file
  // made with mode 0444 (as `cp -r` of a mounted record does) stays writable
  // for its writer while cached, though an unprivileged daemon could not
  // reopen it for writing.
  absl::StatusOr<std::shared_ptr<const UniqueFd>> WritableFd(uint64_t node) {
    return nodes_.WritableFd(node);
  }

  // Path of a node relative to records/ ("" for the root), or NotFound if it
  // was deleted.
  absl::StatusOr<std::string> RelativePath(uint64_t node) { return nodes_.RelativePath(node); }
  // How errors and log lines name a path relative to records/ (default
  // "staging/<rel>"). Set before the store is used from other threads.
  void SetDisplay(std::function<std::string(absl::string_view rel)> display) {
    nodes_.SetDisplay(std::move(display));
  }
  std::string Shown(absl::string_view rel) const { return nodes_.Shown(rel); }

  // For tests: descriptors cached now, and reopens so far.
  size_t cached_fds() { return nodes_.cached_fds(); }
  uint64_t reopens() { return nodes_.reopens(); }

 private:
  Store(std::string dir, UniqueFd lock_fd, UniqueFd root_fd, const struct stat& root,
        size_t node_fds);

  // Unlink / Rmdir (`flags` AT_REMOVEDIR).
  absl::Status Remove(uint64_t parent, absl::string_view name, int flags);

  const std::string dir_;
  UniqueFd lock_fd_;
  NodeTable nodes_;
  StagedFileChecker checker_;  // uses nodes_
};

// The mode a staged file or folder gets for the mode its creator asked
// (create, mkdir, chmod; the kernel has applied the caller's umask): that
// mode with the owner's read and write bits, and for a folder the owner's
// search bit, added. Staged files are the user's to edit: `cp -r` of a
// mounted record asks for the record's 0444 files and 0555 folders, which
// would leave a copy its owner cannot change (and an unprivileged daemon
// could not reopen for writing); the other bits (group, others, execute)
// stay as asked, so `cp` keeps what it copies otherwise.
mode_t StagedMode(mode_t requested, bool directory);

// Checks a single path component given by the kernel or a user.
absl::Status CheckName(absl::string_view name);

// Removes the store at `dir` if it holds nothing staged and no pack journal
// or report: for a mount that failed after creating it, so that a failed
// mount leaves nothing behind. Best effort; never removes staged bytes.
void RemoveIfEmpty(const std::string& dir);

}  // namespace tfrecordfs::staging

#endif  // TFRECORDFS_STAGING_STORE_H_
