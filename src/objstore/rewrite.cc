// Rewriting an existing object: the plan (objstore/rewrite.h) and the
// requests BucketWriter sends for it (objstore/upload.h): UploadPartCopy,
// ListMultipartUploads, and what a conditional write refused means.
#include "tfrecordfs/objstore/rewrite.h"

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/objstore/sigv4.h"
#include "tfrecordfs/objstore/xml.h"

namespace tfrecordfs::objstore {
namespace {

constexpr size_t kMaxReply = size_t{1} << 20;

// Appends `p` to `part`, extending its last piece when `p` continues it.
void Append(RewritePart& part, const RewritePiece& p) {
  if (!part.pieces.empty()) {
    RewritePiece& last = part.pieces.back();
    if (last.from == p.from && last.offset + last.size == p.offset) {
      last.size += p.size;
      part.size += p.size;
      return;
    }
  }
  part.pieces.push_back(p);
  part.size += p.size;
}

}  // namespace

namespace {
// No ETag starts so (they are quoted): GenerationCondition's mark.
constexpr absl::string_view kGeneration = "generation ";
}  // namespace

std::string GenerationCondition(const std::string& generation) {
  return absl::StrCat(kGeneration, generation);
}

std::string WriteConditionHeader(const std::string& replaces) {
  if (absl::StartsWith(replaces, kGeneration)) {
    return absl::StrCat("x-goog-if-generation-match: ", replaces.substr(kGeneration.size()));
  }
  return replaces.empty() ? "If-None-Match: *" : absl::StrCat("If-Match: ", replaces);
}

std::string CopySource(const UploadTarget& target, const std::string& key) {
  absl::string_view bucket = target.name;
  if (const size_t at = bucket.find("://"); at != absl::string_view::npos) {
    bucket.remove_prefix(at + 3);
  }
  return absl::StrCat(AwsUriEncode(bucket, true), "/", AwsUriEncode(key, false));
}

absl::StatusOr<std::vector<RewritePart>> PlanRewriteParts(const std::vector<RewritePiece>& layout,
                                                          const RewritePlanOptions& o) {
  if (layout.empty()) return absl::InvalidArgumentError("an empty object has no parts");
  std::vector<RewritePart> parts;
  RewritePart cur;  // the uploaded part being filled
  const auto flush = [&] {
    if (cur.size > 0) parts.push_back(std::move(cur));
    cur = RewritePart{};
  };
  // Uploads `p`, cutting parts at upload_part bytes.
  const auto upload = [&](RewritePiece p) {
    while (p.size > 0) {
      const uint64_t take = std::min(o.upload_part - cur.size, p.size);
      Append(cur, RewritePiece{p.from, p.offset, take});
      p.offset += take;
      p.size -= take;
      if (cur.size == o.upload_part) flush();
    }
  };
  for (const RewritePiece& piece : layout) {
    if (piece.size == 0) continue;
    if (piece.from == RewritePiece::From::kNew) {
      upload(piece);
      continue;
    }
    RewritePiece kept = piece;
    if (cur.size > 0 && cur.size < o.min_part) {
      // The uploaded part before this range is too small to stand alone:
      // it takes the range's first bytes.
      const uint64_t steal = std::min(o.min_part - cur.size, kept.size);
      upload(RewritePiece{kept.from, kept.offset, steal});
      kept.offset += steal;
      kept.size -= steal;
    }
    if (kept.size == 0) continue;
    if (kept.size < o.min_part) {
      upload(kept);
      continue;
    }
    flush();  // empty, or at least min_part bytes
    const uint64_t n = (kept.size + o.max_part - 1) / o.max_part;
    const uint64_t chunk = (kept.size + n - 1) / n;
    for (uint64_t at = 0; at < kept.size; at += chunk) {
      RewritePart copy;
      copy.copy = true;
      Append(copy, RewritePiece{kept.from, kept.offset + at, std::min(chunk, kept.size - at)});
      parts.push_back(std::move(copy));
    }
  }
  flush();
  if (parts.size() > kMaxParts) {
    return absl::InvalidArgumentError(
        absl::StrCat("the rewrite needs ", parts.size(), " parts; S3 takes at most ", kMaxParts));
  }
  return parts;
}

absl::Status BucketWriter::Changed(const std::string& key, const std::string& etag) const {
  return PosixError(ESTALE, absl::StrCat(Name(key), ": the object changed since it was listed (",
                                         absl::StartsWith(etag, kGeneration) ? "" : "ETag then ",
                                         etag, "); not overwritten, the edits are kept"));
}

absl::Status BucketWriter::Refused(const std::string& key, const std::string& replaces) const {
  return replaces.empty() ? Appeared(key) : Changed(key, replaces);
}

absl::StatusOr<std::string> BucketWriter::UploadPartCopy(const std::string& key,
                                                         const std::string& id, int number,
                                                         const std::string& source_key,
                                                         uint64_t first, uint64_t last,
                                                         const std::string& source_etag) const {
  // kWholeSource: no range (S3 copies ranges only of sources over 5 MiB).
  const std::string range = last == kWholeSource ? "all" : absl::StrCat("bytes=", first, "-", last);
  std::vector<std::string> headers = {
      absl::StrCat("x-amz-copy-source: ", CopySource(t_, source_key))};
  if (last != kWholeSource) headers.push_back(absl::StrCat("x-amz-copy-source-range: ", range));
  if (!source_etag.empty()) {
    headers.push_back(absl::StrCat("x-amz-copy-source-if-match: ", source_etag));
  }
  const std::string what =
      absl::StrCat("UploadPartCopy ", number, " (", range, " of ", Name(source_key), ")");
  auto r = Send(
      "PUT", absl::StrCat(Url(key), "?partNumber=", number, "&uploadId=", AwsUriEncode(id, true)),
      what, std::move(headers));
  if (!r.ok()) return r.status();
  if (r->status == 412 || (r->status == 404 && !source_etag.empty())) {
    return Changed(source_key, source_etag);
  }
  if (r->status != 200) return Failed(key, what, *r);
  // S3 may answer 200 and then an <Error> in the body.
  auto x = FindXmlElement(r->body, "ETag");
  if (!x.ok() || x->root != "CopyPartResult" || x->text.empty()) {
    return absl::UnavailableError(
        absl::StrCat(Name(key), ": ", what, " failed: ", DescribeHttpStatus(200, r->body)));
  }
  return x->text;
}

namespace {

// ListMultipartUploadsResult's <Upload><Key/><UploadId/></Upload>s.
class UploadsHandler : public XmlHandler {
 public:
  void Start(absl::string_view name) override {
    if (depth_++ == 0) root = std::string(name);
    text_.clear();
    if (name == "Upload") uploads.emplace_back();
  }
  void Text(absl::string_view text) override {
    if (text_.size() < 4096) text_.append(text.data(), text.size());
  }
  void End(absl::string_view name) override {
    --depth_;
    if (!uploads.empty() && (name == "Key" || name == "UploadId")) {
      (name == "Key" ? uploads.back().key : uploads.back().id) = text_;
    }
    text_.clear();
  }
  std::string root;
  std::vector<BucketWriter::InFlight> uploads;

 private:
  int depth_ = 0;
  std::string text_;
};

}  // namespace

absl::StatusOr<std::vector<BucketWriter::InFlight>> BucketWriter::ListUploads(
    const std::string& prefix) const {
  auto r = Send("GET", absl::StrCat(t_.base, "/?uploads&prefix=", AwsUriEncode(prefix, true)),
                "ListMultipartUploads");
  if (!r.ok()) return r.status();
  if (r->status != 200) return Failed(prefix, "ListMultipartUploads", *r);
  UploadsHandler h;
  if (auto s = ParseXml(r->body, h); !s.ok() || h.root != "ListMultipartUploadsResult") {
    return absl::DataLossError(
        absl::StrCat(Name(prefix), ": ListMultipartUploads answered no upload list"));
  }
  std::vector<InFlight> out;
  for (InFlight& u : h.uploads) {
    if (!u.key.empty() && !u.id.empty()) out.push_back(std::move(u));
  }
  return out;
}

}  // namespace tfrecordfs::objstore
