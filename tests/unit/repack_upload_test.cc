// The upload journal (src/repack/upload.h): round trips of awkward names and
// upload ids, and every damage refused rather than guessed from.
#include <string>

#include "gtest/gtest.h"
#include "src/repack/upload.h"

namespace tfrecordfs::repack {
namespace {

UploadJournal Sample() {
  UploadJournal j;
  j.target = "s3://my bucket";
  j.objects.push_back({uint64_t{12} << 20, "VXBsb2FkIElE with space\n",
                       "train/new shard\n-0.tfrecord",
                       "staged-20261127T012905-00000-of-00002.tfrecord"});
  j.objects.push_back({7, "", "train/b", "b"});
  return j;
}

TEST(UploadJournal, RoundTrip) {
  const std::string text = EncodeUploadJournal(Sample());
  auto j = ParseUploadJournal(text, "/x/upload.journal");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->target, "s3://my bucket");
  ASSERT_EQ(j->objects.size(), 2u);
  EXPECT_EQ(j->objects[0].size, uint64_t{12} << 20);
  EXPECT_EQ(j->objects[0].upload_id, "VXBsb2FkIElE with space\n");
  EXPECT_EQ(j->objects[0].key, "train/new shard\n-0.tfrecord");
  EXPECT_EQ(j->objects[0].local, "staged-20261127T012905-00000-of-00002.tfrecord");
  EXPECT_EQ(j->objects[1].upload_id, "");
  EXPECT_EQ(j->objects[1].local, "b");
  EXPECT_EQ(EncodeUploadJournal(*j), text);
}

TEST(UploadJournal, NoObjects) {
  UploadJournal j;
  j.target = "gs://b";
  auto back = ParseUploadJournal(EncodeUploadJournal(j), "p");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->objects.empty());
}

TEST(UploadJournal, EveryFlippedByteAndEveryTruncationIsRefused) {
  const std::string text = EncodeUploadJournal(Sample());
  for (size_t i = 0; i < text.size(); ++i) {
    std::string bad = text;
    bad[i] ^= 0x01;
    auto j = ParseUploadJournal(bad, "/x/upload.journal");
    EXPECT_FALSE(j.ok()) << "byte " << i;
    if (!j.ok()) {
      EXPECT_EQ(j.status().code(), absl::StatusCode::kDataLoss) << "byte " << i;
    }
  }
  for (size_t n = 0; n < text.size(); ++n) {
    EXPECT_FALSE(ParseUploadJournal(text.substr(0, n), "p").ok()) << "length " << n;
  }
  auto j = ParseUploadJournal(text + "x", "/x/upload.journal");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("/x/upload.journal"), std::string::npos);
}

TEST(UploadJournal, ALocalNameThatIsAPathIsRefusedUnderAValidChecksum) {
  for (const char* local : {"../x", "a/b", "..", ""}) {
    UploadJournal j = Sample();
    j.objects[1].local = local;
    EXPECT_FALSE(ParseUploadJournal(EncodeUploadJournal(j), "p").ok()) << local;
  }
}

}  // namespace
}  // namespace tfrecordfs::repack
