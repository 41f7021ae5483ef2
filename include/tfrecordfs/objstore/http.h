// Shards held on web servers and in buckets, read with ranged GETs (libcurl).
//
// libcurl is not linked: it is loaded (dlopen of libcurl.so.4) and started
// at the first request a process sends, so commands over local files never
// map it and its ~29 libraries. Without it, every request fails with
// FailedPrecondition naming libcurl.so.4 and the package that holds it.
//
// HttpClient sends requests through a bounded pool of libcurl handles (each
// keeps its connections open, so consecutive requests to one server reuse a
// connection); every request has a connect timeout, a low-speed timeout and
// a total deadline (HttpOptions::deadline_s: all its attempts and the waits
// between them; a server trickling 2 bytes a second passes the low-speed
// rule, not the deadline), so nothing waits forever. Requests that fail in
// transit, or that the server answers 429 or 5xx, are retried a bounded
// number of times with exponential backoff and jitter, within the deadline;
// then the error names the URL, the byte range and the HTTP status (and the
// server's message, when it gave one) and, when the deadline ended it, the
// deadline.
//
// HttpObject is one object (its URL, size and ETag as listed once at mount)
// as an ObjectReader (source/stored_bytes.h): ShardFile wraps it, and
// PlainSource, InflateSource and SnappySource read it as they read a file.
// Every GET is pinned to the listed object with If-Match on its ETag: an
// object replaced behind the mount answers 412, which is DataLoss ("changed
// since it was listed") and one error logged naming the URL, never bytes of
// another object. A 206 answer must say (Content-Range) that it holds the
// range asked for: a server that answers another range (every range from
// byte 0) is DataLoss, never bytes of another offset. A server that ignores
// Range (HTTP 200 and the whole object, as `python3 -m http.server`) serves
// objects of up to kWholeObjectBody bytes (the body is taken whole and the
// range cut from it); a larger one fails, saying that the server ignored
// the Range header. Bytes fetched are kept in a BlockCache (the mount's one
// byte budget, shared with decompressed blocks) in source::kBlockSize
// blocks; a read fetches the blocks it misses in one GET, at least
// kMinObjectFetch bytes (a record read after the header walk is one round
// trip, not one per block).
//
// Secrets: a RequestSigner's headers (Authorization) are never logged; a
// URL's query string (a presigned URL's X-Amz-Security-Token and
// X-Amz-Signature) is never put in a message, a log line or a name:
// RedactUrl() is what they say instead.
//
// Thread-safety: HttpClient and HttpObject are safe to use from any number
// of threads (the handle pool is behind a leaf mutex; a handle is used by one
// request at a time).
#ifndef TFRECORDFS_OBJSTORE_HTTP_H_
#define TFRECORDFS_OBJSTORE_HTTP_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/source/block_cache.h"
#include "tfrecordfs/source/stored_bytes.h"

namespace tfrecordfs::objstore {

// The least one GET of an object fetches (when the object has that many
// bytes left): a record read costs one round trip.
inline constexpr size_t kMinObjectFetch = size_t{1} << 20;
// A read of at least this many bytes is one GET straight into the reader's
// buffer, around the block cache: a header walk's parts (read once) and the
// readahead's blocks (source/readahead.h, kept in the readahead's own
// budget: the same bytes are not kept twice).
inline constexpr size_t kUncachedFetch = kMinObjectFetch;
// The largest whole body a ranged GET may be answered with (HTTP 200: a
// server that ignores Range): objects up to this size are read from such
// servers, larger ones fail naming the cause.
inline constexpr size_t kWholeObjectBody = kMinObjectFetch;

// `url` as messages, logs and file names give it: without its query string
// and fragment (a presigned URL's credentials are there). Anything else
// (no '?' nor '#') is returned as it is.
std::string RedactUrl(absl::string_view url);

// Adds authentication to a request (S3 SigV4: objstore/sigv4.h). Thread-safe.
class RequestSigner {
 public:
  virtual ~RequestSigner() = default;
  // The headers ("Name: value") to add to a `method` request of `url` whose
  // body has the SHA-256 `payload_sha256` (lower-case hex; kEmptySha256 of
  // sigv4.h for no body). Errors: the URL cannot be signed (not http(s)),
  // the credentials cannot be had now (a token file unreadable).
  virtual absl::StatusOr<std::vector<std::string>> Sign(absl::string_view method,
                                                        absl::string_view url,
                                                        absl::string_view payload_sha256) const = 0;
  // As Sign, for a request that also carries `request_headers` ("Name:
  // value", sent as they are): a signer that must cover some of them (SigV4
  // signs every x-amz-* header, as S3 requires: x-amz-copy-source) does so
  // here. By default, Sign.
  virtual absl::StatusOr<std::vector<std::string>> SignWith(
      absl::string_view method, absl::string_view url, absl::string_view payload_sha256,
      const std::vector<std::string>& request_headers) const {
    (void)request_headers;
    return Sign(method, url, payload_sha256);
  }
};

struct HttpOptions {
  // Idle libcurl handles (and so open connections) kept for reuse; more
  // requests than this in flight open handles that are closed after use.
  size_t max_idle_handles = 16;
  long connect_timeout_s = 10;
  // A transfer slower than 1 byte/s for this long is abandoned (and retried).
  long low_speed_time_s = 30;
  // Attempts after the first, for transport errors, 429 and 5xx.
  int retries = 4;
  // Backoff before retry k (0-based): base << k, plus up to as much jitter.
  long backoff_ms = 100;
  // The most a request without a body (GET, HEAD, a listing) may take, all
  // its attempts and backoffs together; then it fails (Unavailable, "no
  // complete answer within N s"; HttpObject's reads log it). 0: no deadline
  // (only the low-speed rule). A request with a body (an upload's PUT) has
  // none: its time grows with its size.
  long deadline_s = 120;
};

struct HttpResponse {
  long status = 0;
  std::string body;
  // Header values (empty when absent). etag keeps its quotes.
  std::string etag, last_modified, content_range;
  // Cloud Storage's x-goog-generation (the object's generation; empty
  // from S3).
  std::string generation;
  // Content-Length, when given (-1 when not).
  int64_t content_length = -1;
  // Bytes of a 206 answer's body written to Send's `into` (body then stays
  // empty).
  size_t into_bytes = 0;
};

class HttpClient {
 public:
  explicit HttpClient(HttpOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends `method` ("GET", "HEAD", "PUT", "POST" or "DELETE") to `url`
  // with `headers` ("Name: value") and, for PUT and POST, `upload` as the
  // body (a POST's as application/xml: S3's multipart requests), signed by `signer`
  // when given, retrying as the options say.
  // The body is refused beyond `max_body` bytes (a hostile server cannot
  // make us allocate more). Returns the last response, whatever its status
  // (the caller decides what a 404 or 412 means); errors are transport
  // failures that outlasted the retries (Unavailable, naming the URL and
  // `what`, e.g. "bytes 0-1048575"). With `into` (room for max_body bytes),
  // a 206 answer's body is written there (HttpResponse::into_bytes) rather
  // than to HttpResponse::body: a ranged GET lands in the reader's buffer,
  // with no copy and no allocation of its size; any other answer's body
  // (an error document) still goes to body.
  absl::StatusOr<HttpResponse> Send(absl::string_view method, const std::string& url,
                                    const std::vector<std::string>& headers,
                                    const RequestSigner* signer, size_t max_body,
                                    absl::string_view what, absl::string_view upload = {},
                                    char* into = nullptr) const;

  // Requests sent (attempts, retries included), for tests and statistics.
  uint64_t requests() const { return requests_.load(std::memory_order_relaxed); }

 private:
  struct Handle;
  // An idle handle, or a new one (libcurl loaded at the first: errors are
  // those of objstore's LoadCurl, the library missing).
  absl::StatusOr<std::unique_ptr<Handle>> Acquire() const;
  void Release(std::unique_ptr<Handle> handle) const;
  absl::StatusOr<HttpResponse> SendOnce(std::unique_ptr<Handle>* handle, absl::string_view method,
                                        const std::string& url,
                                        const std::vector<std::string>& headers,
                                        absl::string_view upload, size_t max_body, char* into,
                                        long timeout_ms, bool* transient, bool* timed_out,
                                        std::string* error) const;

  const HttpOptions options_;
  mutable Mutex mu_;  // leaf lock: never held across a request
  mutable std::vector<std::unique_ptr<Handle>> idle_ ABSL_GUARDED_BY(mu_);
  mutable std::atomic<uint64_t> requests_{0};
};

// "HTTP 404 (Not Found)"-style text for `status`, with the server's
// message when the body is an S3/GCS XML error (<Code>, <Message>).
std::string DescribeHttpStatus(long status, absl::string_view body);

// One object, as listed. Thread-safe.
class HttpObject final : public source::ObjectReader {
 public:
  struct Listed {
    std::string url;   // http(s) URL of the object (what GETs go to)
    std::string name;  // how messages name it (s3://bucket/key, or the URL)
    uint64_t size = 0;
    std::string etag;  // with its quotes; empty: the server gave none (reads are not pinned)
    // A bucket listing saw every neighbour: `beside` holds the suffixes of
    // the objects named like this one plus a suffix (".tfri") that it
    // listed, and ReadBeside sends no request for any other. False (a URL
    // given alone): ReadBeside asks the server.
    bool neighbours_listed = false;
    std::vector<std::string> beside;
  };
  // `signer` and `cache` may be null (a null cache: each read fetches
  // what it needs, rounded to blocks).
  HttpObject(Listed listed, std::shared_ptr<const HttpClient> client,
             std::shared_ptr<const RequestSigner> signer,
             std::shared_ptr<source::BlockCache> cache);

  const std::string& url() const override { return listed_.name; }
  uint64_t size() const override { return listed_.size; }
  const std::string& etag() const override { return listed_.etag; }
  absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const override;
  // GET of the URL plus `suffix` (signed as this object's reads). A 404
  // (403 too, for a URL given alone: buckets that deny listing answer
  // that for a missing key) is NotFound.
  absl::StatusOr<std::string> ReadBeside(absl::string_view suffix,
                                         uint64_t max_bytes) const override;
  // PUT of the URL plus `suffix`, signed as this object's reads. Errors:
  // PermissionDenied (401, 403), Unavailable or FailedPrecondition for any
  // other status, naming that URL, the status and the server's message.
  absl::Status WriteBeside(absl::string_view suffix, absl::string_view bytes) const override;

 private:
  // Bytes [begin, end) of the object (within size()), in one GET, into
  // `buf` (end - begin bytes).
  absl::Status Fetch(uint64_t begin, uint64_t end, char* buf) const;

  const Listed listed_;
  std::shared_ptr<const HttpClient> client_;
  std::shared_ptr<const RequestSigner> signer_;
  std::shared_ptr<source::BlockCache> cache_;
  uint64_t id_;
  mutable std::atomic<bool> change_logged_{false};
};

}  // namespace tfrecordfs::objstore

#endif  // TFRECORDFS_OBJSTORE_HTTP_H_
