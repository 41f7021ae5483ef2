#include "tfrecordfs/vfs/view.h"

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"

namespace tfrecordfs::vfs {

void AddXattr(XattrList* out, absl::string_view key, std::string value) {
  out->emplace_back(absl::StrCat(kXattrPrefix, key), std::move(value));
}

absl::Status ReadOnlyError() {
  return PosixError(EROFS, "read-only: only the staging area is writable");
}

bool EmitDots(const Attr& self, uint64_t* offset, const EmitFn& emit) {
  // ".." gets the directory's own attributes: the kernel ignores them.
  if (*offset == 0) {
    if (!emit(".", self, 1)) return false;
    *offset = 1;
  }
  if (*offset == 1) {
    if (!emit("..", self, 2)) return false;
    *offset = 2;
  }
  return true;
}

absl::StatusOr<uint64_t> View::OpenDir(uint64_t ino) {
  auto a = GetAttr(ino);
  if (!a.ok()) return a.status();
  if (!S_ISDIR(a->mode)) return PosixError(ENOTDIR, "not a directory");
  return uint64_t{0};
}

}  // namespace tfrecordfs::vfs
