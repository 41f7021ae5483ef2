// TempDir: a private scratch directory for one test (or one test suite),
// removed with everything below it when the TempDir goes away.
//
// Contract:
//   * made with mkdtemp under $TMPDIR (or /tmp when unset), as
//     <root>/<stem>-XXXXXX; path() is canonical (symlinks in the root
//     resolved), so tests may compare it with realpath()s;
//   * when it cannot be made, the current test gets a failure and path() is
//     "" (the destructor then does nothing);
//   * the destructor first makes every directory below it owner-writable
//     (tests chmod folders read-only), then removes the tree, never following
//     symlinks. If anything is still mounted at or below path(), it leaves the
//     whole tree in place and says so on stderr instead of walking into a
//     mount.
//
// Thread-safety: none; the object is owned by one test.
#ifndef TFRECORDFS_TESTS_TESTING_TEMP_DIR_H_
#define TFRECORDFS_TESTS_TESTING_TEMP_DIR_H_

#include <string>

#include "absl/strings/string_view.h"

namespace tfrecordfs::test {

class TempDir {
 public:
  explicit TempDir(absl::string_view stem = "tfrfs");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + rel, not created.
  std::string Join(absl::string_view rel) const;
  // Creates (mkdir -p) path()/rel and returns the full path; a failure to
  // create it fails the current test.
  std::string Subdir(absl::string_view rel) const;

 private:
  std::string path_;
};

// The directory temp files go in: $TMPDIR, or /tmp, made canonical.
std::string TempRoot();

// True when `path` is a mount point listed in /proc/self/mountinfo, with the
// given fstype if `fstype` is non-empty.
bool IsMounted(const std::string& path, const std::string& fstype = "");

}  // namespace tfrecordfs::test

#endif  // TFRECORDFS_TESTS_TESTING_TEMP_DIR_H_
