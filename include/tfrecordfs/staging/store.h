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
// Descriptors are bounded (issue 15): passthrough_ll pins every node the
// kernel knows with a descriptor, so 16k staged files known to the kernel
// exhaust RLIMIT_NOFILE. Here a node the kernel knows is remembered as its
// parent node and name (kept current by Rename, dropped by Unlink, Rmdir and
// Forget), and at most `node_fds` O_PATH descriptors are kept open, least
// recently used dropped first (OpenOptions::node_fds; by default an eighth of
// the soft RLIMIT_NOFILE, between 16 and 1024). A node whose descriptor was
// dropped is reopened from its parent's with openat(O_PATH | O_NOFOLLOW), and
// the inode it finds must be the node's: a name now naming another file (or a
// symlink, or nothing) gives ESTALE or ENOENT, never the other file. What
// stays open besides the budget: records/ itself; the descriptors a call is
// using; one per node removed (Unlink, Rmdir, a Rename over it) while the
// kernel still knows it (an open file after rm, until its FORGET), so that
// its inode number is not reused while the kernel may still use it; and the
// per-open descriptors of open files (Open/Create: the caller's). So a node's
// inode number cannot be reused for another file while the kernel knows the
// node, as long as files in the store are changed only through it (the lock
// makes the daemon the only writer).
//
// The checks of staged files (ValidateOnWrite, ValidateOnClose and the
// deferred ones of NoteWritten, CheckWritten, CheckAllWritten and the last
// Forget) need the types the mounted shards give feature names, which only
// the caller knows: each such method takes the naming::FeatureTypes to check
// against (naming::NoFeatureTypes(): none known, every feature kNone), so the
// store depends on nothing above it.
//
// Memory per known node: its name and two table entries.
#ifndef TFRECORDFS_STAGING_STORE_H_
#define TFRECORDFS_STAGING_STORE_H_

#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/lru.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/naming/feature_type.h"
#include "tfrecordfs/staging/layout.h"
#include "tfrecordfs/staging/owner.h"
#include "tfrecordfs/staging/record_folder.h"

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
  // O_PATH descriptors of nodes kept open at once (see the top of this
  // file); 0: an eighth of the soft RLIMIT_NOFILE, between 16 and 1024.
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
  uint64_t root() const { return root_ino_; }

  // Each successful Lookup/Mkdir/Create adds one kernel reference to the
  // returned node; Forget drops n (the last one runs CheckWritten).
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
  absl::StatusOr<int> Open(uint64_t node, int flags);
  absl::Status Unlink(uint64_t parent, absl::string_view name);
  absl::Status Rmdir(uint64_t parent, absl::string_view name);
  // A regular file renamed onto a name whose content is checked
  // (ClassifyStagedFile) and whose feature `types` knows (or, for a
  // `.png`/`.npy`, whose tag says it is a tensor) is first checked as that
  // file, as ValidateOnClose would: what an editor or tool wrote under a
  // temporary name (`sedXXXXXX`, `x.tmp`, `.x.swp`, `x~`) is judged once its
  // name is final. A refusal is InvalidArgument (EINVAL), logged, and the
  // rename is not done (the temporary file stays; the pack judges it by its
  // own name). With RENAME_EXCHANGE both files are checked.
  absl::Status Rename(uint64_t parent, absl::string_view name, uint64_t new_parent,
                      absl::string_view new_name, unsigned flags, naming::FeatureTypes& types);
  // A descriptor to list the directory with (caller owns; use fdopendir).
  absl::StatusOr<int> OpenDir(uint64_t node);

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
  // be renamed): Rename judges it under its final name, the pack by its
  // content, and ErrorOf as the pack would.
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
  // judged when it gets its final one (Rename, the pack):
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
  // A write or truncation of `node` was done (not refused): the content is
  // its writer's again, so the next ValidateOnClose drops a refusal mark.
  void NoteRewritten(uint64_t node);

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
  static constexpr uint64_t kMaxCheckedOnWrite = uint64_t{1} << 20;

  // A writable descriptor of `node`, for writes that come without a handle
  // (the kernel opened the file itself): the descriptor Create opened, if
  // still cached, else the file opened O_WRONLY. Cached, at most
  // max(node_fds / 2, 8) at once (LRU), until the node is forgotten: a file
  // made with mode 0444 (as `cp -r` of a mounted record does) stays writable
  // for its writer while cached, though an unprivileged daemon could not
  // reopen it for writing.
  absl::StatusOr<std::shared_ptr<const UniqueFd>> WritableFd(uint64_t node);

  // A write (or truncation) of `node` through no handle of the caller's (the
  // kernel opened the file itself: no RELEASE will follow). The file gets
  // ValidateOnClose's check (a refusal logged, the kind remembered) at once
  // when it looks whole (`fd` >= 0 open on it: a numeric file ending in a
  // newline, a PNG ending in IEND, a .npy of the size its header says), else
  // at CheckWritten, at the node's last Forget, or at CheckAllWritten.
  void NoteWritten(uint64_t node, naming::FeatureTypes& types, int fd = -1);
  // ValidateOnClose of `node` through a descriptor of its own if NoteWritten
  // marked it since its last check; else OK.
  absl::Status CheckWritten(uint64_t node, naming::FeatureTypes& types);
  // CheckWritten of every marked node (before a pack, at unmount).
  void CheckAllWritten(naming::FeatureTypes& types);

  // Path of a node relative to records/ ("" for the root), or NotFound if it
  // was deleted.
  absl::StatusOr<std::string> RelativePath(uint64_t node);
  // How errors and log lines name a path relative to records/ (default
  // "staging/<rel>"). Set before the store is used from other threads.
  void SetDisplay(std::function<std::string(absl::string_view rel)> display);
  std::string Shown(absl::string_view rel) const;

 private:
  explicit Store(std::string dir) : dir_(std::move(dir)) {}

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
  // Logs a refusal of `rel` (a warning); the first of the mount also says
  // where the reasons can be read.
  void LogRefusal(absl::string_view what);
  // The rename check of a file `name` under `parent` to be named `to_rel`.
  absl::Status CheckRenamed(int parent_fd, const std::string& name, const std::string& to_rel,
                            naming::FeatureTypes& types);

  using NodeFdRef = std::shared_ptr<const UniqueFd>;
  struct Node {
    uint64_t parent = 0;  // 0: removed (or records/ itself)
    std::string name;
    uint64_t nlookup = 0;   // the kernel's references
    uint64_t children = 0;  // known nodes whose parent this is
    NodeFdRef pinned;       // held while removed but still known
  };
  // An open O_PATH descriptor of `node` (cached, or reopened and checked).
  absl::StatusOr<NodeFdRef> NodeFd(uint64_t node);
  // Looks `name` up under `parent` and registers it with one more reference.
  absl::StatusOr<struct stat> Register(uint64_t parent, int parent_fd, absl::string_view name);
  // Caches `fd` as `node`'s descriptor and drops the least recently used
  // ones over the budget.
  void CacheFd(uint64_t node, NodeFdRef fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Unlinks `node` from its parent (Unlink, Rmdir, replaced by Rename),
  // keeping `fd` open while the kernel still knows it.
  void Detach(uint64_t node, NodeFdRef fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The known node named `name` in `parent`, if any, with its descriptor in
  // *keep, taken before a removal or a rename over it: a node keeps a
  // descriptor while the kernel still knows it (the top of this file).
  std::optional<uint64_t> KnownNode(uint64_t parent, const std::string& name, NodeFdRef* keep)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Unlink / Rmdir (`flags` AT_REMOVEDIR).
  absl::Status Remove(uint64_t parent, absl::string_view name, int flags);
  // Drops `node` if neither the kernel nor a child needs it.
  void MaybeErase(uint64_t node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  struct stat Present(struct stat st) const;
  static std::pair<uint64_t, std::string> Key(uint64_t parent, absl::string_view name) {
    return {parent, std::string(name)};
  }

  const std::string dir_;
  std::function<std::string(absl::string_view rel)> display_;
  UniqueFd lock_fd_;
  uint64_t root_ino_ = 0;
  dev_t dev_ = 0;
  UniqueFd root_fd_;
  Mutex mu_;
  absl::flat_hash_map<uint64_t, Node> nodes_ ABSL_GUARDED_BY(mu_);
  // (parent, name) -> node, for the known nodes that are not removed.
  absl::flat_hash_map<std::pair<uint64_t, std::string>, uint64_t> by_name_ ABSL_GUARDED_BY(mu_);
  // node -> its O_PATH descriptor, at most node_fds of them (Open sets the
  // budget). An evicted descriptor closes once no call uses it.
  LruMap<uint64_t, NodeFdRef> fds_ ABSL_GUARDED_BY(mu_);
  uint64_t reopens_ ABSL_GUARDED_BY(mu_) = 0;
  // WritableFd's cache: node -> writable descriptor, at most
  // max(node_fds / 2, 8) of them.
  LruMap<uint64_t, NodeFdRef> write_fds_ ABSL_GUARDED_BY(mu_);
  void CacheWritable(uint64_t node, NodeFdRef fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::flat_hash_set<uint64_t> written_ ABSL_GUARDED_BY(mu_);  // NoteWritten, unchecked
  // Nodes whose last write was refused and that were not written since
  // (their kErrorXattr mark must survive the next check).
  absl::flat_hash_set<uint64_t> refused_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> refusals_{0};

 public:
  // For tests: descriptors cached now, and reopens so far.
  size_t cached_fds();
  uint64_t reopens();
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

// Why pack leaves out a regular file at the top of the records directory.
inline constexpr char kLooseFileReason[] =
    "not in a record folder (a file directly in staging/ is not a record; move it into one)";

}  // namespace tfrecordfs::staging

#endif  // TFRECORDFS_STAGING_STORE_H_
