#include "tfrecordfs/repack/bucket_rewrite.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/log.h"

namespace tfrecordfs::repack {

using objstore::RewritePiece;

absl::StatusOr<ObjectLayout> LayoutAfterEdits(
    const std::vector<uint64_t>& offsets,
    const std::map<uint64_t, std::optional<std::string>>& changes,
    const std::vector<std::string>& appended) {
  if (offsets.empty()) return absl::InvalidArgumentError("no record offsets");
  const uint64_t records = offsets.size() - 1;
  ObjectLayout out;
  const auto add_new = [&](const std::string& bytes) {
    if (bytes.empty()) return;
    RewritePiece p{RewritePiece::From::kNew, out.new_bytes.size(), bytes.size()};
    out.new_bytes += bytes;
    if (!out.pieces.empty() && out.pieces.back().from == p.from &&
        out.pieces.back().offset + out.pieces.back().size == p.offset) {
      out.pieces.back().size += p.size;
    } else {
      out.pieces.push_back(p);
    }
  };
  const auto keep = [&](uint64_t from, uint64_t to) {
    if (to > from) out.pieces.push_back({RewritePiece::From::kOld, from, to - from});
  };
  uint64_t kept_from = offsets.front();
  for (const auto& [record, bytes] : changes) {
    if (record >= records) {
      return absl::InvalidArgumentError(
          absl::StrCat("record ", record, " changed, but the object has ", records));
    }
    keep(kept_from, offsets[record]);
    if (bytes) add_new(*bytes);
    kept_from = offsets[record + 1];
  }
  keep(kept_from, offsets.back());
  for (const std::string& a : appended) add_new(a);
  for (const RewritePiece& p : out.pieces) out.size += p.size;
  return out;
}

namespace {

// The bytes of an uploaded part: its new bytes and the kept ranges read back.
absl::StatusOr<std::string> PartBytes(const objstore::RewritePart& part, const ObjectLayout& layout,
                                      const ReadOldBytes& read_old, ObjectRewriteStats* stats) {
  std::string bytes;
  bytes.reserve(part.size);
  std::string old;
  for (const RewritePiece& p : part.pieces) {
    if (p.from == RewritePiece::From::kNew) {
      bytes.append(layout.new_bytes, p.offset, p.size);
      continue;
    }
    old.clear();
    if (auto s = read_old(p.offset, p.size, &old); !s.ok()) return s;
    if (old.size() != p.size) {
      return absl::DataLossError(absl::StrCat("read ", old.size(), " bytes of the object at ",
                                              p.offset, ", not ", p.size));
    }
    stats->read_back += p.size;
    bytes += old;
  }
  return bytes;
}

}  // namespace

absl::StatusOr<ObjectRewriteStats> RewriteObject(const objstore::BucketWriter& writer,
                                                 const ObjectRewrite& object,
                                                 const ObjectLayout& layout,
                                                 const ReadOldBytes& read_old,
                                                 const objstore::RewritePlanOptions& options) {
  if (object.etag.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        writer.Name(object.key), ": the store gave no ETag; cannot rewrite it conditionally"));
  }
  ObjectRewriteStats stats;
  if (layout.size == 0) {
    // Every record deleted: an empty object, conditionally.
    if (auto s = writer.PutWhole(object.key, "", object.etag); !s.ok()) return s;
    return stats;
  }
  auto parts = objstore::PlanRewriteParts(layout.pieces, options);
  if (!parts.ok()) return parts.status();
  // A small object (ranged copies need a source larger than a part) or a
  // single uploaded part: one conditional PUT.
  if (object.size <= options.min_part || (parts->size() == 1 && !(*parts)[0].copy)) {
    objstore::RewritePart whole;
    for (const RewritePiece& p : layout.pieces) whole.pieces.push_back(p);
    whole.size = layout.size;
    auto bytes = PartBytes(whole, layout, read_old, &stats);
    if (!bytes.ok()) return bytes.status();
    if (auto s = writer.PutWhole(object.key, *bytes, object.etag); !s.ok()) return s;
    stats.uploaded = bytes->size();
    return stats;
  }
  auto id = writer.CreateMultipart(object.key);
  if (!id.ok()) return id.status();
  std::vector<std::string> etags;
  absl::Status status;
  for (const objstore::RewritePart& part : *parts) {
    const int number = static_cast<int>(etags.size()) + 1;
    absl::StatusOr<std::string> etag;
    if (part.copy) {
      const RewritePiece& p = part.pieces.front();
      etag = writer.UploadPartCopy(object.key, *id, number, object.key, p.offset,
                                   p.offset + p.size - 1, object.etag);
      if (etag.ok()) stats.copied += p.size;
    } else {
      auto bytes = PartBytes(part, layout, read_old, &stats);
      etag = bytes.ok() ? writer.UploadPart(object.key, *id, number, *bytes) : bytes.status();
      if (etag.ok()) stats.uploaded += bytes->size();
    }
    if (!etag.ok()) {
      status = etag.status();
      break;
    }
    etags.push_back(*std::move(etag));
  }
  if (status.ok()) status = writer.Complete(object.key, *id, etags, object.etag);
  if (!status.ok()) {
    // Nothing shows under the key until a completion: the parts go.
    if (auto a = writer.Abort(object.key, *id); !a.ok()) {
      log::Warning(a.message(),
                   " (the store removes it by its lifecycle rules, or the next "
                   "mount aborts it)");
    }
    return status;
  }
  stats.parts = etags.size();
  return stats;
}

absl::StatusOr<std::vector<std::string>> AbortLeftUploads(const objstore::BucketWriter& writer,
                                                          const std::string& prefix,
                                                          const std::vector<std::string>& keys) {
  auto uploads = writer.ListUploads(prefix);
  if (!uploads.ok()) return uploads.status();
  const absl::flat_hash_set<std::string> ours(keys.begin(), keys.end());
  std::vector<std::string> lines;
  for (const objstore::BucketWriter::InFlight& u : *uploads) {
    if (!ours.contains(u.key)) continue;
    if (auto s = writer.Abort(u.key, u.id); !s.ok()) {
      lines.push_back(absl::StrCat("cannot abort an interrupted rewrite of ", writer.Name(u.key),
                                   ": ", s.message()));
      continue;
    }
    lines.push_back(absl::StrCat("aborted an interrupted rewrite of ", writer.Name(u.key),
                                 " (upload ", u.id, "): the object is as it was"));
  }
  return lines;
}

}  // namespace tfrecordfs::repack
