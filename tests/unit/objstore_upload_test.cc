// The upload protocol's pure parts (objstore/upload.h): keys and part
// sizes. The requests themselves are tested against a server the test
// starts (tests/objstore: the pack into a bucket at unmount).
#include <cstdint>

#include "gtest/gtest.h"
#include "tfrecordfs/objstore/upload.h"

namespace tfrecordfs::objstore {
namespace {

TEST(ObjectKeyTest, IsThePrefixAndTheName) {
  UploadTarget t;
  t.key_prefix = "train/";
  EXPECT_EQ(ObjectKey(t, "a.tfrecord"), "train/a.tfrecord");
  t.key_prefix = "";
  EXPECT_EQ(ObjectKey(t, "a.tfrecord"), "a.tfrecord");
}

TEST(MultipartPartSizeTest, TheWantedSizeUnlessS3sTenThousandPartsWouldNotHoldTheObject) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  EXPECT_EQ(MultipartPartSize(100 * kMiB, 8 * kMiB), 8 * kMiB);
  EXPECT_EQ(MultipartPartSize(kMaxParts * 8 * kMiB, 8 * kMiB), 8 * kMiB);  // exactly 10000
  // One byte more would take 10001 parts: the next whole MiB.
  EXPECT_EQ(MultipartPartSize(kMaxParts * 8 * kMiB + 1, 8 * kMiB), 9 * kMiB);
  const uint64_t huge = uint64_t{200} << 30;  // 200 GiB in 5 MiB parts: 40960 parts
  const uint64_t part = MultipartPartSize(huge, 5 * kMiB);
  EXPECT_EQ(part % kMiB, 0u);
  EXPECT_LE((huge + part - 1) / part, kMaxParts);
  EXPECT_GT((huge + part - kMiB - 1) / (part - kMiB), kMaxParts);  // the least that fits
  EXPECT_EQ(MultipartPartSize(10, 0), 1u);
}

}  // namespace
}  // namespace tfrecordfs::objstore
