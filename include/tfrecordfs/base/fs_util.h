// Filesystem helpers the modules share: canonical paths, existence checks,
// mkdir -p, rm -r that never follows a symlink, rename that never replaces,
// an RAII directory listing, and stat times in nanoseconds.
//
// Errors are ErrnoError statuses (base/file.h): the errno rides along as a
// payload (ErrnoOf), and the message names the path the call failed on, with
// the operation in front where the bare path would not say what failed
// ("mkdir P", "unlink P", "rmdir P", "readdir P", "rename A -> B").
//
// None of these resolve races with other processes changing the same tree:
// they behave like their shell counterparts (`mkdir -p`, `rm -r`, `mv -n`)
// run at the same moment.
//
// Thread-safety: the free functions keep no state and may run concurrently.
// A ListDir is not synchronised: use it from one thread at a time.
#ifndef TFRECORDFS_BASE_FS_UTIL_H_
#define TFRECORDFS_BASE_FS_UTIL_H_

#include <dirent.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/file.h"

namespace tfrecordfs {

// `dir` + "/" + `name`, without doubling a slash `dir` already ends with.
std::string JoinPath(absl::string_view dir, absl::string_view name);

// tfrecordfs's folder `sub` of the per-user cache:
// $XDG_CACHE_HOME/tfrecordfs/<sub> when XDG_CACHE_HOME is absolute, else
// $HOME/.cache/tfrecordfs/<sub>; "" when neither is set.
std::string UserCacheDir(absl::string_view sub);

// "/proc/self/fd/<fd>": a path that reopens (or reads the target of) the
// file open as `fd`, for a descriptor opened O_PATH or write-only.
std::string ProcFdPath(int fd);

// The canonical absolute path of `path` (realpath(3): symlinks, "." and ".."
// resolved). Fails when `path` or a component does not exist; the error names
// `path`. Callers that would rather keep the path as given use
// `RealPath(p).value_or(p)`.
absl::StatusOr<std::string> RealPath(const std::string& path);

// True when something of any type is at `path` (lstat: a dangling symlink
// exists). ENOENT is false, any other failure an error naming `path`.
absl::StatusOr<bool> Exists(const std::string& path);

// Unlinks a non-directory; a missing one is fine. Returns whether it was
// there. On a read-only file system a missing name is still "not there"
// (unlink says EROFS for it too).
absl::StatusOr<bool> UnlinkIfExists(const std::string& path);

// Unlinks `path` like UnlinkIfExists, then fsyncs its directory (even when
// nothing was there), so that the removal survives a crash: the counterpart
// of WriteFileAtomically (base/file.h).
absl::Status UnlinkDurably(const std::string& path);

// mkdir -p: creates `path` and any missing parents with `mode` (umask
// applies). An existing directory is fine; anything else already at `path`
// or above it fails (ENOTDIR, "File exists"...), naming the component that
// could not be made. "", "." and "/" are OK without a call.
absl::Status MakeDirs(const std::string& path, mode_t mode);

// rm -r without following symlinks: a symlink (to a directory or anywhere
// outside) is unlinked, never walked into. A missing `path` is fine.
// Directories the owner cannot write or search (0555 folders copied with
// `cp -r` from the read-only mount) are made owner-rwx first, which the
// owner may always do. Stops at the first failure.
absl::Status RemoveTree(const std::string& path);

// Renames `from` to `to` unless something is already at `to` (EEXIST,
// nothing changed): renameat2(RENAME_NOREPLACE), or, where the file system
// lacks it, a check then rename(2) (which a concurrent creator of `to` can
// still race). Errors name both paths.
absl::Status RenameNoReplace(const std::string& from, const std::string& to);

// An open directory stream (opendir / fdopendir) that closes itself. Lists
// names other than "." and "..", in readdir order (unsorted):
//
//   auto dir = ListDir::Open(path);
//   if (!dir.ok()) return dir.status();
//   for (absl::string_view name; dir->Next(&name);) { ... }
//   if (!dir->status().ok()) return dir->status();
class ListDir {
 public:
  // Error: ErrnoError naming `path` (ENOENT, ENOTDIR, EACCES...).
  static absl::StatusOr<ListDir> Open(const std::string& path);
  // Lists the directory open as `fd`, which the ListDir then owns (it is
  // closed on failure too). `path` only names it in messages.
  static absl::StatusOr<ListDir> Adopt(UniqueFd fd, std::string path);

  ListDir(ListDir&& o) noexcept;
  ListDir& operator=(ListDir&& o) noexcept;
  ListDir(const ListDir&) = delete;
  ListDir& operator=(const ListDir&) = delete;
  ~ListDir();

  // The next name other than "." and ".."; false at the end or on a readdir
  // error (see status()). *name stays valid until the next call.
  bool Next(absl::string_view* name);
  // OK unless a Next() failed: then "readdir <path>: <strerror>".
  const absl::Status& status() const { return status_; }

  // The stream's descriptor, for fstatat and other *at calls; owned here.
  int fd() const;
  // The stream itself, still owned here, for callers that keep readdir
  // positions (telldir / seekdir) across calls and so read it directly,
  // "." and ".." included.
  DIR* stream() const { return dir_; }
  const std::string& path() const { return path_; }

 private:
  ListDir(DIR* dir, std::string path) : dir_(dir), path_(std::move(path)) {}

  DIR* dir_ = nullptr;
  std::string path_;
  absl::Status status_;
};

// The names in `path` other than "." and "..", unsorted; errors as ListDir's.
absl::StatusOr<std::vector<std::string>> ListNames(const std::string& path);

// A stat time as nanoseconds since the epoch (how the index keeps them).
inline int64_t TimespecNs(const struct timespec& t) {
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}
inline int64_t MtimeNs(const struct stat& st) { return TimespecNs(st.st_mtim); }
inline int64_t CtimeNs(const struct stat& st) { return TimespecNs(st.st_ctim); }

}  // namespace tfrecordfs

#endif  // TFRECORDFS_BASE_FS_UTIL_H_
