// The one status -> errno mapping (fuse/errno.h), as a table.
#include <cerrno>

#include "gtest/gtest.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/fuse/errno.h"

namespace tfrecordfs::fuse {
namespace {

TEST(ToErrnoTest, EveryAbslCode) {
  struct Row {
    absl::StatusCode code;
    int err;
  };
  const Row kTable[] = {
      {absl::StatusCode::kOk, 0},
      {absl::StatusCode::kCancelled, EINTR},
      {absl::StatusCode::kUnknown, EIO},
      {absl::StatusCode::kInvalidArgument, EINVAL},
      {absl::StatusCode::kDeadlineExceeded, ETIMEDOUT},
      {absl::StatusCode::kNotFound, ENOENT},
      {absl::StatusCode::kAlreadyExists, EEXIST},
      {absl::StatusCode::kPermissionDenied, EACCES},
      {absl::StatusCode::kResourceExhausted, ENOSPC},
      {absl::StatusCode::kFailedPrecondition, EPERM},
      {absl::StatusCode::kAborted, EAGAIN},
      {absl::StatusCode::kOutOfRange, EINVAL},
      {absl::StatusCode::kUnimplemented, ENOSYS},
      {absl::StatusCode::kInternal, EIO},
      {absl::StatusCode::kUnavailable, EAGAIN},
      {absl::StatusCode::kDataLoss, EIO},
      {absl::StatusCode::kUnauthenticated, EIO},  // not listed: the default
  };
  for (const Row& row : kTable) {
    const absl::Status s(row.code, row.code == absl::StatusCode::kOk ? "" : "message");
    EXPECT_EQ(row.err, ToErrno(s)) << absl::StatusCodeToString(row.code);
  }
  EXPECT_EQ(0, ToErrno(absl::OkStatus()));
  // A code outside the enum still maps to an errno.
  EXPECT_EQ(EIO, ToErrno(absl::Status(static_cast<absl::StatusCode>(999), "odd")));
}

TEST(ToErrnoTest, PosixErrorCarriesItsExactErrno) {
  for (int err : {EROFS, ENOTDIR, EISDIR, EXDEV, EPERM, EACCES, ENOSPC, EDQUOT, ENAMETOOLONG,
                  ENOTEMPTY, EBADF, EIO, ENOENT, EEXIST, EINVAL, EMFILE, ELOOP, EOVERFLOW}) {
    const absl::Status s = PosixError(err, "context");
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(err, ErrnoOf(s)) << err;
    EXPECT_EQ(err, ToErrno(s)) << err;
    const absl::Status e = ErrnoError(err, "/some/path");
    EXPECT_EQ(err, ToErrno(e)) << err;
    EXPECT_NE(std::string::npos, e.message().find("/some/path"));
  }
}

TEST(ToErrnoTest, PayloadWinsOverCode) {
  // EROFS maps to FailedPrecondition (which alone would be EPERM).
  const absl::Status s = PosixError(EROFS, "read-only");
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, s.code());
  EXPECT_EQ(EROFS, ToErrno(s));
  // The payload survives a copy with the same code but a new message.
  absl::Status copy(s.code(), "rewritten");
  s.ForEachPayload([&](absl::string_view url, const absl::Cord& p) { copy.SetPayload(url, p); });
  EXPECT_EQ(EROFS, ToErrno(copy));
  // A status without the payload has no errno.
  EXPECT_EQ(0, ErrnoOf(absl::NotFoundError("x")));
  EXPECT_EQ(0, ErrnoOf(absl::OkStatus()));
}

}  // namespace
}  // namespace tfrecordfs::fuse
