// Rewriting an object in place (objstore/rewrite.h): the parts plan keeps
// S3's rules (parts but the last of at least 5 MiB, at most 5 GiB, copies
// only of long kept ranges) while uploading as little as it can, and the
// headers of the conditional writes and the copies. The requests
// themselves run against tests/objstore/object_server.py (objstore tests).
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "tfrecordfs/objstore/rewrite.h"

namespace tfrecordfs::objstore {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
using From = RewritePiece::From;

RewritePiece Old(uint64_t offset, uint64_t size) { return {From::kOld, offset, size}; }
RewritePiece New(uint64_t offset, uint64_t size) { return {From::kNew, offset, size}; }

// Checks S3's rules and that the parts hold exactly `layout`'s bytes in
// order; returns the bytes uploaded (new and read back from the old object).
uint64_t CheckPlan(const std::vector<RewritePiece>& layout, const std::vector<RewritePart>& parts,
                   const RewritePlanOptions& o = {}) {
  std::vector<RewritePiece> flat;
  uint64_t uploaded = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const RewritePart& p = parts[i];
    if (i + 1 < parts.size()) {
      EXPECT_GE(p.size, o.min_part) << "part " << i + 1;
    }
    EXPECT_LE(p.size, o.max_part);
    uint64_t sum = 0;
    for (const RewritePiece& piece : p.pieces) {
      sum += piece.size;
      // Pieces merge back into the layout's, in order.
      if (!flat.empty() && flat.back().from == piece.from &&
          flat.back().offset + flat.back().size == piece.offset) {
        flat.back().size += piece.size;
      } else {
        flat.push_back(piece);
      }
    }
    EXPECT_EQ(sum, p.size);
    if (p.copy) {
      EXPECT_EQ(p.pieces.size(), 1u);
      EXPECT_EQ(p.pieces[0].from, From::kOld);
    } else {
      uploaded += p.size;
    }
  }
  std::vector<RewritePiece> merged;
  for (const RewritePiece& piece : layout) {
    if (!merged.empty() && merged.back().from == piece.from &&
        merged.back().offset + merged.back().size == piece.offset) {
      merged.back().size += piece.size;
    } else {
      merged.push_back(piece);
    }
  }
  EXPECT_EQ(flat, merged);
  return uploaded;
}

TEST(PlanRewritePartsTest, OneLabelInTheMiddleCopiesAllButAboutOnePart) {
  // 2 GiB object, 40 bytes replaced by 41 at 1 GiB.
  const uint64_t size = uint64_t{2} << 30, at = uint64_t{1} << 30;
  const std::vector<RewritePiece> layout = {Old(0, at), New(0, 41), Old(at + 40, size - at - 40)};
  auto parts = PlanRewriteParts(layout);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 3u);
  EXPECT_TRUE((*parts)[0].copy);
  EXPECT_FALSE((*parts)[1].copy);
  EXPECT_TRUE((*parts)[2].copy);
  // The new bytes and 5 MiB of the old object after them: no more.
  EXPECT_EQ(CheckPlan(layout, *parts), kMinPartSize);
  EXPECT_EQ((*parts)[1].pieces,
            (std::vector<RewritePiece>{New(0, 41), Old(at + 40, kMinPartSize - 41)}));
}

TEST(PlanRewritePartsTest, KeptRangesShorterThanAPartAreUploaded) {
  const std::vector<RewritePiece> layout = {Old(0, 3 * kMiB), New(0, 10), Old(3 * kMiB + 5, kMiB),
                                            New(10, 7), Old(4 * kMiB + 9, 100)};
  auto parts = PlanRewriteParts(layout);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_FALSE((*parts)[0].copy);
  CheckPlan(layout, *parts);
}

TEST(PlanRewritePartsTest, AnEditAtTheEndIsASmallLastPart) {
  const uint64_t size = 100 * kMiB;
  const std::vector<RewritePiece> layout = {Old(0, size - 30), New(0, 12)};
  auto parts = PlanRewriteParts(layout);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_TRUE((*parts)[0].copy);
  EXPECT_EQ((*parts)[1].pieces, std::vector<RewritePiece>{New(0, 12)});
  EXPECT_EQ(CheckPlan(layout, *parts), 12u);
}

TEST(PlanRewritePartsTest, ADeletionAtTheStartCopiesTheRest) {
  const std::vector<RewritePiece> layout = {Old(500, 40 * kMiB)};
  auto parts = PlanRewriteParts(layout);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_TRUE((*parts)[0].copy);
  EXPECT_EQ(CheckPlan(layout, *parts), 0u);
}

TEST(PlanRewritePartsTest, LongRangesAreCutAtTheLargestPartAndLongNewBytesAtTheUploadPart) {
  RewritePlanOptions o;
  o.min_part = 5;
  o.max_part = 12;
  o.upload_part = 8;
  const std::vector<RewritePiece> layout = {Old(0, 25), New(0, 20), Old(30, 6), New(20, 3),
                                            Old(40, 4)};
  auto parts = PlanRewriteParts(layout, o);
  ASSERT_TRUE(parts.ok()) << parts.status();
  CheckPlan(layout, *parts, o);
  // 25 bytes kept: three copies of 9, 9 and 7 (each within 5..12).
  EXPECT_TRUE((*parts)[0].copy);
  EXPECT_EQ((*parts)[0].size, 9u);
  EXPECT_EQ((*parts)[2].size, 7u);
  EXPECT_FALSE((*parts)[3].copy);
  EXPECT_EQ((*parts)[3].size, 8u);
}

TEST(PlanRewritePartsTest, ManyEditsNeverMakeASmallPartButTheLast) {
  RewritePlanOptions o;
  o.min_part = 50;
  o.max_part = 200;
  o.upload_part = 80;
  std::vector<RewritePiece> layout;
  uint64_t old = 0, fresh = 0;
  for (int i = 0; i < 200; ++i) {  // kept ranges of 1 to 120 bytes between edits
    const uint64_t keep = 1 + (i * 37) % 120, edit = 1 + (i * 11) % 9;
    layout.push_back(Old(old, keep));
    old += keep + 3;
    layout.push_back(New(fresh, edit));
    fresh += edit;
  }
  auto parts = PlanRewriteParts(layout, o);
  ASSERT_TRUE(parts.ok()) << parts.status();
  CheckPlan(layout, *parts, o);
}

TEST(PlanRewritePartsTest, RefusesAnEmptyObjectAndTooManyParts) {
  EXPECT_FALSE(PlanRewriteParts({}).ok());
  RewritePlanOptions o;
  o.min_part = 1;
  o.max_part = 2;
  o.upload_part = 1;
  EXPECT_EQ(PlanRewriteParts({New(0, kMaxParts + 1)}, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(PlanRewriteParts({New(0, kMaxParts)}, o).ok());
}

TEST(RewriteHeadersTest, ConditionsAndCopySource) {
  EXPECT_EQ(WriteConditionHeader(""), "If-None-Match: *");
  EXPECT_EQ(WriteConditionHeader("\"abc-2\""), "If-Match: \"abc-2\"");
  EXPECT_EQ(WriteConditionHeader(GenerationCondition("1700000000123456")),
            "x-goog-if-generation-match: 1700000000123456");
  UploadTarget t;
  t.name = "s3://my-bucket";
  EXPECT_EQ(CopySource(t, "train/a b+c.tfrecord"), "my-bucket/train/a%20b%2Bc.tfrecord");
}

}  // namespace
}  // namespace tfrecordfs::objstore
