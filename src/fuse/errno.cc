#include "tfrecordfs/fuse/errno.h"

#include <cerrno>

#include "tfrecordfs/base/file.h"

namespace tfrecordfs::fuse {

int ToErrno(const absl::Status& status) {
  if (status.ok()) return 0;
  if (int err = ErrnoOf(status); err > 0) return err;
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 0;
    case absl::StatusCode::kNotFound:
      return ENOENT;
    case absl::StatusCode::kAlreadyExists:
      return EEXIST;
    case absl::StatusCode::kPermissionDenied:
      return EACCES;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return EINVAL;
    case absl::StatusCode::kDataLoss:
      return EIO;
    case absl::StatusCode::kResourceExhausted:
      return ENOSPC;
    case absl::StatusCode::kFailedPrecondition:
      return EPERM;
    case absl::StatusCode::kUnimplemented:
      return ENOSYS;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kAborted:
      return EAGAIN;
    case absl::StatusCode::kCancelled:
      return EINTR;
    case absl::StatusCode::kDeadlineExceeded:
      return ETIMEDOUT;
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    default:
      return EIO;
  }
}

}  // namespace tfrecordfs::fuse
