#include "tfrecordfs/objstore/upload.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/objstore/listing.h"
#include "tfrecordfs/objstore/rewrite.h"
#include "tfrecordfs/objstore/sigv4.h"
#include "tfrecordfs/objstore/xml.h"

namespace tfrecordfs::objstore {
namespace {

// Replies we parse are small; anything larger is refused (HttpClient).
constexpr size_t kMaxReply = size_t{1} << 20;

}  // namespace

uint64_t MultipartPartSize(uint64_t size, uint64_t wanted) {
  wanted = std::max<uint64_t>(wanted, 1);
  if ((size + wanted - 1) / wanted <= kMaxParts) return wanted;
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  const uint64_t least = (size + kMaxParts - 1) / kMaxParts;
  return (least + kMiB - 1) / kMiB * kMiB;
}

absl::StatusOr<UploadTarget> ResolveUploadTarget(const std::string& bucket_source,
                                                 const ObjectOptions& options, const Getenv& env) {
  auto u = ParseObjectUrl(bucket_source);
  if (!u.ok()) return u.status();
  if (u->scheme == ObjectUrl::Scheme::kHttp) {
    return absl::InvalidArgumentError(
        absl::StrCat(RedactSource(bucket_source), ": not an s3:// or gs:// bucket"));
  }
  auto client = std::make_shared<HttpClient>();
  const bool s3 = u->scheme == ObjectUrl::Scheme::kS3;
  auto access = s3 ? ResolveS3Access(options, env) : ResolveGcsAccess(options, env, client);
  if (!access.ok()) {
    return Annotate(access.status(), bucket_source);
  }
  UploadTarget t;
  t.base = BucketBase(*access, u->bucket);
  t.name = absl::StrCat(s3 ? "s3://" : "gs://", u->bucket);
  t.key_prefix = u->key.empty() || absl::EndsWith(u->key, "/") ? u->key : u->key + "/";
  t.signer = access->signer;
  t.client = std::move(client);
  t.multipart_threshold = options.multipart_bytes;
  t.part_size = options.multipart_bytes;
  return t;
}

std::string ObjectKey(const UploadTarget& target, const std::string& name) {
  return absl::StrCat(target.key_prefix, name);
}

std::string BucketWriter::Url(const std::string& key) const {
  return absl::StrCat(t_.base, "/", AwsUriEncode(key, false));
}

std::string BucketWriter::Name(const std::string& key) const {
  return absl::StrCat(t_.name, "/", key);
}

absl::StatusOr<HttpResponse> BucketWriter::Send(absl::string_view method, const std::string& url,
                                                absl::string_view what,
                                                std::vector<std::string> headers,
                                                absl::string_view body) const {
  return t_.client->Send(method, url, headers, t_.signer.get(), kMaxReply, what, body);
}

// A write made with If-None-Match: * answered 412: someone else's object
// took the name meanwhile.
absl::Status BucketWriter::Appeared(const std::string& key) const {
  return PosixError(EEXIST, absl::StrCat(Name(key),
                                         ": an object appeared under this name during "
                                         "the upload; not overwritten"));
}

absl::Status BucketWriter::Failed(const std::string& key, absl::string_view what,
                                  const HttpResponse& r) const {
  return absl::Status(
      r.status == 401 || r.status == 403 ? absl::StatusCode::kPermissionDenied
                                         : absl::StatusCode::kUnavailable,
      absl::StrCat(Name(key), ": ", what, ": ", DescribeHttpStatus(r.status, r.body)));
}

absl::StatusOr<int64_t> BucketWriter::Head(const std::string& key, std::string* etag,
                                           std::string* generation, int64_t* mtime) const {
  auto r = Send("HEAD", Url(key), "HEAD");
  if (!r.ok()) return r.status();
  if (r->status == 404) return -1;
  if (r->status != 200) return Failed(key, "HEAD", *r);
  if (r->content_length < 0) {
    return absl::DataLossError(absl::StrCat(Name(key), ": HEAD gave no Content-Length"));
  }
  if (etag != nullptr) *etag = r->etag;
  if (generation != nullptr) *generation = r->generation;
  if (mtime != nullptr) *mtime = ParseObjectTime(r->last_modified);
  return r->content_length;
}

absl::StatusOr<bool> BucketWriter::SameBytes(const std::string& key, const std::string& path,
                                             uint64_t size) const {
  auto fd = OpenFile(path, O_RDONLY);
  if (!fd.ok()) return fd.status();
  std::string local;
  for (uint64_t at = 0; at < size; at += t_.part_size) {
    const uint64_t n = std::min<uint64_t>(t_.part_size, size - at);
    local.resize(n);
    if (auto s = PreadFull(fd->get(), local.data(), n, at, path); !s.ok()) return s;
    const std::string range = absl::StrCat("bytes=", at, "-", at + n - 1);
    auto r = t_.client->Send("GET", Url(key), {absl::StrCat("Range: ", range)}, t_.signer.get(), n,
                             range);
    if (!r.ok()) return r.status();
    if (r->status == 404 || r->status == 412 || r->status == 416) return false;
    if (r->status != 206 && !(r->status == 200 && at == 0 && n == size)) {
      return Failed(key, absl::StrCat("GET ", range), *r);
    }
    if (r->body != local) return false;
  }
  return true;
}

absl::Status BucketWriter::PutWhole(const std::string& key, absl::string_view bytes,
                                    const std::string& replaces, std::string* written) const {
  auto r = Send("PUT", Url(key), absl::StrCat("PUT of ", bytes.size(), " bytes"),
                {WriteConditionHeader(replaces)}, bytes);
  if (!r.ok()) return r.status();
  if (r->status == 412 || (r->status == 404 && !replaces.empty())) return Refused(key, replaces);
  if (r->status != 200) return Failed(key, "PUT", *r);
  if (written != nullptr) *written = r->etag;
  return absl::OkStatus();
}

absl::StatusOr<std::string> BucketWriter::CreateMultipart(const std::string& key) const {
  auto r = Send("POST", Url(key) + "?uploads", "CreateMultipartUpload");
  if (!r.ok()) return r.status();
  if (r->status != 200) return Failed(key, "CreateMultipartUpload", *r);
  auto x = FindXmlElement(r->body, "UploadId");
  if (!x.ok() || x->root != "InitiateMultipartUploadResult" || x->text.empty()) {
    return absl::DataLossError(
        absl::StrCat(Name(key), ": CreateMultipartUpload answered no UploadId"));
  }
  return x->text;
}

std::string BucketWriter::UploadUrl(const std::string& key, const std::string& id) const {
  return absl::StrCat(Url(key), "?uploadId=", AwsUriEncode(id, true));
}

absl::StatusOr<std::string> BucketWriter::UploadPart(const std::string& key, const std::string& id,
                                                     int number, absl::string_view bytes) const {
  auto r = Send(
      "PUT", absl::StrCat(Url(key), "?partNumber=", number, "&uploadId=", AwsUriEncode(id, true)),
      absl::StrCat("UploadPart ", number, " (", bytes.size(), " bytes)"), {}, bytes);
  if (!r.ok()) return r.status();
  if (r->status != 200) return Failed(key, absl::StrCat("UploadPart ", number), *r);
  if (r->etag.empty()) {
    return absl::DataLossError(
        absl::StrCat(Name(key), ": UploadPart ", number, " answered no ETag"));
  }
  return r->etag;
}

absl::Status BucketWriter::Complete(const std::string& key, const std::string& id,
                                    const std::vector<std::string>& etags,
                                    const std::string& replaces, std::string* written) const {
  std::string xml = "<CompleteMultipartUpload>";
  for (size_t i = 0; i < etags.size(); ++i) {
    std::string etag = etags[i];
    absl::StrReplaceAll({{"&", "&amp;"}, {"<", "&lt;"}, {"\"", "&quot;"}}, &etag);
    absl::StrAppend(&xml, "<Part><PartNumber>", i + 1, "</PartNumber><ETag>", etag,
                    "</ETag></Part>");
  }
  xml += "</CompleteMultipartUpload>";
  // If-None-Match on the completion: S3 takes it since 2024; a store
  // that ignores it is covered by the HEAD before the upload.
  auto r = Send("POST", UploadUrl(key, id), "CompleteMultipartUpload",
                {WriteConditionHeader(replaces)}, xml);
  if (!r.ok()) return r.status();
  if (r->status == 412 ||
      (r->status == 404 && !replaces.empty() &&
       FindXmlElement(r->body, "Code").value_or(XmlElement{}).text == "NoSuchKey")) {
    return Refused(key, replaces);
  }
  if (r->status != 200) return Failed(key, "CompleteMultipartUpload", *r);
  // S3 may answer 200 and then an <Error> in the body.
  auto x = FindXmlElement(r->body, "Code");
  if (!x.ok() || x->root != "CompleteMultipartUploadResult") {
    return absl::UnavailableError(absl::StrCat(
        Name(key), ": CompleteMultipartUpload failed: ", DescribeHttpStatus(200, r->body)));
  }
  if (written != nullptr) *written = FindXmlElement(r->body, "ETag").value_or(XmlElement{}).text;
  return absl::OkStatus();
}

absl::Status BucketWriter::Abort(const std::string& key, const std::string& id) const {
  auto r = Send("DELETE", UploadUrl(key, id), "AbortMultipartUpload");
  if (!r.ok()) return r.status();
  if (r->status != 204 && r->status != 200 && r->status != 404) {
    return Failed(key, absl::StrCat("AbortMultipartUpload ", id), *r);
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> BucketWriter::AnyKeyWithPrefix(const std::string& prefix) const {
  auto r = Send(
      "GET", absl::StrCat(t_.base, "/?list-type=2&max-keys=1&prefix=", AwsUriEncode(prefix, true)),
      "ListObjectsV2");
  if (!r.ok()) return r.status();
  if (r->status != 200) return Failed(prefix, "ListObjectsV2", *r);
  auto x = FindXmlElement(r->body, "Key");
  if (!x.ok() || x->root != "ListBucketResult") {
    return absl::DataLossError(absl::StrCat(Name(prefix), ": the listing is not a listing"));
  }
  return x->found;
}

absl::StatusOr<std::vector<ListedObject>> BucketWriter::ListKeys(const std::string& prefix) const {
  std::vector<ListedObject> out;
  ListingBudget budget;
  std::string token;
  for (;;) {
    std::string url = absl::StrCat(t_.base, "/?list-type=2&prefix=", AwsUriEncode(prefix, true));
    if (!token.empty()) absl::StrAppend(&url, "&continuation-token=", AwsUriEncode(token, true));
    auto r = t_.client->Send("GET", url, {}, t_.signer.get(), size_t{16} << 20, "ListObjectsV2");
    if (!r.ok()) return r.status();
    if (r->status != 200) return Failed(prefix, "ListObjectsV2", *r);
    auto page = ParseListObjectsV2(r->body);
    if (!page.ok()) return Annotate(page.status(), Name(prefix));
    if (auto s = budget.Take(*page); !s.ok()) return Annotate(s, Name(prefix));
    for (ListedObject& o : page->objects) {
      if (absl::StartsWith(o.key, prefix)) out.push_back(std::move(o));
    }
    if (!page->truncated) break;
    token = page->next_token;
  }
  std::sort(out.begin(), out.end(),
            [](const ListedObject& a, const ListedObject& b) { return a.key < b.key; });
  return out;
}

absl::StatusOr<std::string> BucketWriter::GetSmall(const std::string& key, size_t max_bytes) const {
  auto r = t_.client->Send("GET", Url(key), {}, t_.signer.get(), max_bytes, "GET");
  if (!r.ok()) return r.status();
  if (r->status == 404) return absl::NotFoundError(absl::StrCat(Name(key), ": no such object"));
  if (r->status != 200) return Failed(key, "GET", *r);
  return std::move(r->body);
}

absl::StatusOr<std::string> BucketWriter::GetRange(const std::string& key, uint64_t first,
                                                   uint64_t last) const {
  const std::string range = absl::StrCat("bytes=", first, "-", last);
  const uint64_t n = last - first + 1;
  auto r = t_.client->Send("GET", Url(key), {absl::StrCat("Range: ", range)}, t_.signer.get(), n,
                           absl::StrCat("GET ", range));
  if (!r.ok()) return r.status();
  if (r->status == 404) return absl::NotFoundError(absl::StrCat(Name(key), ": no such object"));
  if (r->status != 206 && r->status != 200) return Failed(key, absl::StrCat("GET ", range), *r);
  if (r->status == 200 && first == 0 && r->body.size() > n) r->body.resize(n);
  if (r->body.size() != n) {
    return absl::DataLossError(
        absl::StrCat(Name(key), ": GET ", range, " answered ", r->body.size(), " bytes, not ", n));
  }
  return std::move(r->body);
}

absl::Status BucketWriter::Delete(const std::string& key) const {
  auto r = Send("DELETE", Url(key), "DeleteObject");
  if (!r.ok()) return r.status();
  if (r->status != 204 && r->status != 200 && r->status != 404) {
    return Failed(key, "DeleteObject", *r);
  }
  return absl::OkStatus();
}

absl::Status BucketWriter::CopyWhole(const std::string& source_key, uint64_t size,
                                     const std::string& source_etag, const std::string& key) const {
  auto id = CreateMultipart(key);
  if (!id.ok()) return id.status();
  // S3 copies at most 5 GiB a part; parts of 1 GiB keep well inside that
  // and within 10000 parts up to 10 TiB (MultipartPartSize beyond).
  const uint64_t part = MultipartPartSize(size, uint64_t{1} << 30);
  std::vector<std::string> etags;
  absl::Status status;
  for (uint64_t at = 0; status.ok() && (at < size || (size == 0 && etags.empty())); at += part) {
    if (size == 0) {
      // An empty object: one empty part (a range of an empty source is
      // not satisfiable).
      auto etag = UploadPart(key, *id, 1, {});
      if (!etag.ok())
        status = etag.status();
      else
        etags.push_back(*etag);
      break;
    }
    const uint64_t last = part >= size ? kWholeSource : std::min(size, at + part) - 1;
    auto etag = UploadPartCopy(key, *id, static_cast<int>(etags.size() + 1), source_key, at, last,
                               source_etag);
    if (!etag.ok()) {
      status = etag.status();
      break;
    }
    etags.push_back(*etag);
  }
  if (status.ok()) status = Complete(key, *id, etags);
  if (!status.ok()) (void)Abort(key, *id);
  return status;
}

}  // namespace tfrecordfs::objstore
