// Annotate and SetMessage (base/file.h): they change a status's message only,
// keeping its code and every payload (the errno the FUSE layer answers with),
// and leave an OK status OK.
#include <cerrno>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tfrecordfs/base/file.h"

namespace tfrecordfs {
namespace {

TEST(AnnotateTest, PrefixesTheContextAndKeepsCodeAndErrno) {
  const absl::Status s = ErrnoError(ENOSPC, "/data/a.tfrecord");
  const absl::Status a = Annotate(s, "writing shard a");
  EXPECT_EQ(a.code(), s.code());
  EXPECT_EQ(a.message(), absl::StrCat("writing shard a: ", s.message()));
  EXPECT_EQ(ErrnoOf(a), ENOSPC);
}

TEST(AnnotateTest, KeepsEveryPayload) {
  absl::Status s = PosixError(EIO, "read failed");
  s.SetPayload("example.com/shard", absl::Cord("a.tfrecord"));
  s.SetPayload("example.com/offset", absl::Cord("4096"));
  const absl::Status a = Annotate(Annotate(s, "inner"), "outer");
  EXPECT_EQ(a.message(), "outer: inner: read failed");
  EXPECT_EQ(ErrnoOf(a), EIO);
  ASSERT_TRUE(a.GetPayload("example.com/shard").has_value());
  EXPECT_EQ(*a.GetPayload("example.com/shard"), "a.tfrecord");
  ASSERT_TRUE(a.GetPayload("example.com/offset").has_value());
  EXPECT_EQ(*a.GetPayload("example.com/offset"), "4096");
  // The original is untouched.
  EXPECT_EQ(s.message(), "read failed");
}

TEST(AnnotateTest, OkStaysOk) {
  EXPECT_TRUE(Annotate(absl::OkStatus(), "context").ok());
  EXPECT_EQ(Annotate(absl::OkStatus(), "context").message(), "");
  EXPECT_TRUE(SetMessage(absl::OkStatus(), "message").ok());
}

TEST(AnnotateTest, EmptyContextLeavesTheStatus) {
  const absl::Status s = ErrnoError(ENOENT, "/x");
  EXPECT_EQ(Annotate(s, ""), s);
}

TEST(SetMessageTest, ReplacesTheMessageAndKeepsCodeAndPayloads) {
  absl::Status s = ErrnoError(EACCES, "/store/records");
  s.SetPayload("example.com/extra", absl::Cord("x"));
  const absl::Status m = SetMessage(s, "no staging store at /store");
  EXPECT_EQ(m.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(m.message(), "no staging store at /store");
  EXPECT_EQ(ErrnoOf(m), EACCES);
  EXPECT_EQ(*m.GetPayload("example.com/extra"), "x");
}

TEST(SetMessageTest, AStatusWithoutPayloadsStaysWithout) {
  const absl::Status m = SetMessage(absl::DataLossError("bad crc"), "bad crc at byte 12");
  EXPECT_EQ(m, absl::DataLossError("bad crc at byte 12"));
  EXPECT_EQ(ErrnoOf(m), 0);
}

}  // namespace
}  // namespace tfrecordfs
