// Rewriting an existing object in a bucket with as few bytes crossing the
// network as S3 allows: the new object is described as a layout of pieces,
// each either a range of the old object (kept) or new bytes (from the
// caller), and PlanRewriteParts cuts it into the parts of a multipart
// upload: a part that is one long kept range is an UploadPartCopy (copied
// by the store, server-side: its bytes never cross the network), any other
// part is uploaded (its new bytes, and the kept ranges merged into it,
// which the caller reads from the old object first). S3's rules hold for
// every plan: parts but the last of at least min_part bytes (5 MiB), at
// most max_part (5 GiB), at most kMaxParts parts; a copied range only from
// an object larger than min_part (smaller objects are one PutObject).
// The requests are BucketWriter's (objstore/upload.h); the final write is
// conditional on the old object's ETag (WriteConditionHeader).
//
// Thread-safety: pure functions.
#ifndef TFRECORDFS_OBJSTORE_REWRITE_H_
#define TFRECORDFS_OBJSTORE_REWRITE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tfrecordfs/objstore/upload.h"

namespace tfrecordfs::objstore {

// S3's part sizes: every part but the last at least 5 MiB, each at most 5 GiB.
inline constexpr uint64_t kMinPartSize = uint64_t{5} << 20;
inline constexpr uint64_t kMaxPartSize = uint64_t{5} << 30;

// "If-None-Match: *" for `replaces` empty (no object may be there), else
// "If-Match: <replaces>" (the object must still be the one with that ETag),
// or, for `replaces` made by GenerationCondition(G),
// "x-goog-if-generation-match: G" (Cloud Storage: the object must still be
// generation G).
std::string WriteConditionHeader(const std::string& replaces);
// The `replaces` of a write conditional on a gs:// object's generation.
std::string GenerationCondition(const std::string& generation);

// The x-amz-copy-source header's value for `key` in the target's bucket:
// "BUCKET/KEY", each segment URL-encoded (slashes kept).
std::string CopySource(const UploadTarget& target, const std::string& key);

// A piece of the new object.
struct RewritePiece {
  enum class From { kOld, kNew };
  From from = From::kNew;
  // kOld: the offset in the old object; kNew: the offset in the caller's
  // stream of new bytes (the pieces' new bytes, in order).
  uint64_t offset = 0;
  uint64_t size = 0;  // > 0
  bool operator==(const RewritePiece&) const = default;
};

// A part of the upload, in order.
struct RewritePart {
  // True: one kOld piece, sent as UploadPartCopy. False: uploaded, its
  // pieces' bytes concatenated (kOld ones read from the old object).
  bool copy = false;
  std::vector<RewritePiece> pieces;
  uint64_t size = 0;
};

struct RewritePlanOptions {
  uint64_t min_part = kMinPartSize;  // >= 1
  uint64_t max_part = kMaxPartSize;  // >= 2 * min_part
  // Uploaded parts are cut at this size (>= min_part, <= max_part).
  uint64_t upload_part = kPartSize;
};

// The parts of an upload that writes `layout` (pieces in order; adjacent
// pieces may be of either kind). Copied parts are the kept ranges of at
// least min_part bytes, cut to max_part; a shorter kept range, and the
// first bytes of a long one where the uploaded part before it would
// otherwise be under min_part, are uploaded: at most min_part bytes are
// read back from the old object per changed range. Errors:
// InvalidArgument for an empty layout or one that needs more than
// kMaxParts parts.
absl::StatusOr<std::vector<RewritePart>> PlanRewriteParts(const std::vector<RewritePiece>& layout,
                                                          const RewritePlanOptions& options = {});

}  // namespace tfrecordfs::objstore

#endif  // TFRECORDFS_OBJSTORE_REWRITE_H_
