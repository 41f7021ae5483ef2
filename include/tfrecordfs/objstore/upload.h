// The upload protocol of a bucket (s3://, and gs:// through the same XML
// API): the requests that put a new object under a key, whole or in parts,
// and the ones that settle what an interrupted upload left. What to upload,
// in which order and what survives a crash (the upload journal) is
// repack/upload.h's; this header only speaks to the store.
//
//   HEAD KEY                        is an object there, and how large
//   GET KEY (Range, part by part)   does it hold exactly a local file's bytes
//   PUT KEY, If-None-Match: *       a whole object (SIZE <= multipart_threshold)
//   POST KEY?uploads                CreateMultipartUpload -> UploadId
//   PUT KEY?partNumber=N&uploadId=  UploadPart -> ETag (parts of part_size bytes,
//                                   MultipartPartSize: at most kMaxParts)
//   POST KEY?uploadId=              CompleteMultipartUpload (If-None-Match: *)
//   DELETE KEY?uploadId=            AbortMultipartUpload
//   GET ?list-type=2&max-keys=1     is any key under a prefix
//   GET ?list-type=2&prefix=        the keys under a prefix (paged)
//   DELETE KEY                      DeleteObject (parts' intermediates)
//
// Rewriting an existing object (objstore/rewrite.h plans the parts; the
// requests are defined in src/objstore/rewrite.cc):
//   PUT KEY?partNumber=N&uploadId=  UploadPartCopy: x-amz-copy-source BUCKET/KEY,
//                                   x-amz-copy-source-range bytes=A-B and
//                                   x-amz-copy-source-if-match ETAG (server-side)
//   PUT KEY / POST KEY?uploadId=    with If-Match: ETAG (the object the mount listed)
//   GET ?uploads&prefix=            ListMultipartUploads (what a crash left)
//
// A write made with If-None-Match: * that the store answers 412 (someone
// else's object took the name) is EEXIST; an object is never overwritten.
// A write made with If-Match: ETAG answered 412 (or 404: gone) is ESTALE:
// the object is no longer the one listed, and is left as it is.
// The replies' XML is read with xml.h.
//
// Thread-safety: UploadTarget is a value; a BucketWriter is immutable and
// its requests may be sent from any thread (HttpClient is thread-safe).
#ifndef TFRECORDFS_OBJSTORE_UPLOAD_H_
#define TFRECORDFS_OBJSTORE_UPLOAD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/objstore/access.h"
#include "tfrecordfs/objstore/http.h"
#include "tfrecordfs/objstore/listing.h"

namespace tfrecordfs::objstore {

// What the aws CLI uses by default (multipart_threshold, multipart_chunksize).
inline constexpr uint64_t kMultipartThreshold = uint64_t{8} << 20;
inline constexpr uint64_t kPartSize = uint64_t{8} << 20;

// S3 takes at most 10000 parts: the part size an object of `size` bytes is
// uploaded in, `wanted` (>= 1) or, for an object that would need more
// parts, the next whole MiB that makes 10000 enough.
inline constexpr uint64_t kMaxParts = 10000;
uint64_t MultipartPartSize(uint64_t size, uint64_t wanted);

// Where new objects go.
struct UploadTarget {
  // Object URLs are `base + "/" + AwsUriEncode(key)`: path-style
  // "ENDPOINT/BUCKET", or "https://BUCKET.s3.REGION.amazonaws.com"
  // (BucketBase, access.h).
  std::string base;
  // How messages name the bucket: "s3://BUCKET" (no trailing '/').
  std::string name;
  // Prepended to a shard's file name to make its key ("train/"; may be "").
  std::string key_prefix;
  std::shared_ptr<const RequestSigner> signer;  // null: anonymous
  std::shared_ptr<const HttpClient> client;     // not null
  uint64_t multipart_threshold = kMultipartThreshold;
  uint64_t part_size = kPartSize;  // >= 1
};

// The target for new objects under `bucket_source` (s3://BUCKET/PREFIX or
// gs://BUCKET/PREFIX; PREFIX taken as a folder, "" for a whole bucket),
// reached as `options` and `env` say (access.h), with parts of
// options.multipart_bytes. Errors: not an s3:// or gs:// URL, and
// Resolve*Access's, naming the source.
absl::StatusOr<UploadTarget> ResolveUploadTarget(const std::string& bucket_source,
                                                 const ObjectOptions& options, const Getenv& env);

// The object's key for a file named `name`.
std::string ObjectKey(const UploadTarget& target, const std::string& name);

// The requests above, for one target. Errors name the object ("s3://B/KEY"),
// the request and, for an answer refused, the HTTP status and the server's
// message: PermissionDenied for 401 and 403, Unavailable for other statuses,
// DataLoss for an answer that lacks what it must hold.
class BucketWriter {
 public:
  // `target` must outlive the writer.
  explicit BucketWriter(const UploadTarget& target) : t_(target) {}

  std::string Url(const std::string& key) const;
  // How messages name the object: "s3://BUCKET/KEY".
  std::string Name(const std::string& key) const;

  // -1: no object under `key`; else its size (and, with `etag`, its ETag
  // into *etag, quotes included; with `generation`, Cloud Storage's
  // x-goog-generation into *generation, "" from a store without one; with
  // `mtime`, its Last-Modified in seconds, ParseObjectTime's: as a listing
  // shows it).
  absl::StatusOr<int64_t> Head(const std::string& key, std::string* etag = nullptr,
                               std::string* generation = nullptr, int64_t* mtime = nullptr) const;
  // True when the object under `key` holds exactly the bytes of the local
  // file `path` (`size` bytes, which its HEAD said), compared part by part
  // with ranged GETs (ETags differ between stores and between PUT and
  // multipart). False when it is gone or changed meanwhile.
  absl::StatusOr<bool> SameBytes(const std::string& key, const std::string& path,
                                 uint64_t size) const;
  // One PUT with If-None-Match: * or, with `replaces` (an ETag, quotes
  // included), If-Match: `replaces`, or, with `replaces` made by
  // GenerationCondition (a gs:// object), x-goog-if-generation-match.
  // With `written`: the new object's ETag, as the store answered ("" when
  // it gave none).
  absl::Status PutWhole(const std::string& key, absl::string_view bytes,
                        const std::string& replaces = {}, std::string* written = nullptr) const;
  // The new multipart upload's id.
  absl::StatusOr<std::string> CreateMultipart(const std::string& key) const;
  // Part `number` (from 1); its ETag.
  absl::StatusOr<std::string> UploadPart(const std::string& key, const std::string& id, int number,
                                         absl::string_view bytes) const;
  // Part `number` of upload `id` copied server-side from bytes [first,
  // last] (inclusive) of the object under `source_key` in the same bucket,
  // as long as its ETag is still `source_etag` (else ESTALE); its ETag.
  // `last` kWholeSource: the whole source, sent without a range (S3 takes
  // a range only of a source larger than 5 MiB).
  static constexpr uint64_t kWholeSource = ~uint64_t{0};
  absl::StatusOr<std::string> UploadPartCopy(const std::string& key, const std::string& id,
                                             int number, const std::string& source_key,
                                             uint64_t first, uint64_t last,
                                             const std::string& source_etag) const;
  // Completes upload `id` from its parts' ETags, in order, with
  // If-None-Match: * or, with `replaces`, If-Match: `replaces` (or
  // x-goog-if-generation-match, as PutWhole's). With `written`: the new
  // object's ETag from the answer's <ETag> ("" when it gave none).
  absl::Status Complete(const std::string& key, const std::string& id,
                        const std::vector<std::string>& etags, const std::string& replaces = {},
                        std::string* written = nullptr) const;
  // The multipart uploads in flight whose keys start with `prefix` (one
  // page: at most 1000), as {key, upload id}.
  struct InFlight {
    std::string key, id;
  };
  absl::StatusOr<std::vector<InFlight>> ListUploads(const std::string& prefix) const;
  // OK when the upload is gone (aborted now, or completed or aborted before).
  absl::Status Abort(const std::string& key, const std::string& id) const;
  // True when some key starts with `prefix`.
  absl::StatusOr<bool> AnyKeyWithPrefix(const std::string& prefix) const;

  // ---- what parts in a bucket use (reshape/bucket_parts.h) ----
  // Every object whose key starts with `prefix` (ListObjectsV2, paged,
  // within ListingBudget's default limits), in key order.
  absl::StatusOr<std::vector<ListedObject>> ListKeys(const std::string& prefix) const;
  // The whole object under `key` (at most `max_bytes`: larger is
  // ResourceExhausted); NotFound when there is none.
  absl::StatusOr<std::string> GetSmall(const std::string& key, size_t max_bytes) const;
  // Bytes [first, last] (inclusive) of the object under `key`: a ranged GET
  // (NotFound when there is no object, DataLoss for a short answer).
  absl::StatusOr<std::string> GetRange(const std::string& key, uint64_t first, uint64_t last) const;
  // DeleteObject: OK when the key is gone (deleted now, or never there).
  absl::Status Delete(const std::string& key) const;
  // A server-side copy of the object `source_key` (`size` bytes, ETag
  // `source_etag` or "" for any) to `key`, which must not exist: a
  // multipart upload of UploadPartCopy parts of at most 1 GiB (one part
  // for smaller objects), completed with If-None-Match: * (EEXIST when
  // the name is taken), aborted on any failure. No byte crosses the
  // network; the copy appears whole or not at all.
  absl::Status CopyWhole(const std::string& source_key, uint64_t size,
                         const std::string& source_etag, const std::string& key) const;

 private:
  absl::StatusOr<HttpResponse> Send(absl::string_view method, const std::string& url,
                                    absl::string_view what, std::vector<std::string> headers = {},
                                    absl::string_view body = {}) const;
  std::string UploadUrl(const std::string& key, const std::string& id) const;
  absl::Status Appeared(const std::string& key) const;
  absl::Status Changed(const std::string& key, const std::string& etag) const;
  // What a write answered 412 (or, with `replaces`, 404) means.
  absl::Status Refused(const std::string& key, const std::string& replaces) const;
  absl::Status Failed(const std::string& key, absl::string_view what, const HttpResponse& r) const;

  const UploadTarget& t_;
};

}  // namespace tfrecordfs::objstore

#endif  // TFRECORDFS_OBJSTORE_UPLOAD_H_
