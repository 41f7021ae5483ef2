// The one place absl::Status becomes an errno for a FUSE reply.
//
// A status made by PosixError/ErrnoError carries its exact errno; any
// other maps by code:
//   OK 0, NotFound ENOENT, AlreadyExists EEXIST, PermissionDenied EACCES,
//   InvalidArgument EINVAL, OutOfRange EINVAL, DataLoss EIO,
//   ResourceExhausted ENOSPC, FailedPrecondition EPERM, Unimplemented ENOSYS,
//   Unavailable EAGAIN, Aborted EAGAIN, Cancelled EINTR,
//   DeadlineExceeded ETIMEDOUT, Internal/Unknown EIO.
// Pure, thread-safe.
#ifndef TFRECORDFS_FUSE_ERRNO_H_
#define TFRECORDFS_FUSE_ERRNO_H_

#include "absl/status/status.h"

namespace tfrecordfs::fuse {

int ToErrno(const absl::Status& status);

}  // namespace tfrecordfs::fuse

#endif  // TFRECORDFS_FUSE_ERRNO_H_
