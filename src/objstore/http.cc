#include "tfrecordfs/objstore/http.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/objstore/curl_api.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/objstore/sigv4.h"

namespace tfrecordfs::objstore {
namespace {

using internal::CurlApi;

constexpr size_t kMaxReservedBody = size_t{64} << 20;
constexpr long kReceiveBuffer = 128 << 10;

struct Transfer {
  const CurlApi* api;
  HttpResponse* response;
  size_t max_body;
  CURL* curl;
  char* into;  // null: the body goes to response->body
  // The most response->body may hold (an error document, or the whole
  // object from a server that ignored Range, beyond max_body).
  size_t body_cap;
  enum class Sink { kUndecided, kInto, kBody } sink = Sink::kUndecided;
  long status = 0;  // the status of the answer whose body arrives
  bool too_large = false;
};

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  if (t->sink == Transfer::Sink::kUndecided) {
    // The status line is in: a partial answer's bytes are the range asked for.
    t->api->easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &t->status);
    t->sink =
        t->into != nullptr && t->status == 206 ? Transfer::Sink::kInto : Transfer::Sink::kBody;
  }
  if (t->sink == Transfer::Sink::kInto) {
    HttpResponse& r = *t->response;
    if (r.into_bytes + bytes > t->max_body) {
      t->too_large = true;
      return 0;
    }
    std::memcpy(t->into + r.into_bytes, data, bytes);
    r.into_bytes += bytes;
    return bytes;
  }
  if (t->response->body.size() + bytes > t->body_cap) {
    t->too_large = true;
    return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
  }
  t->response->body.append(data, bytes);
  return bytes;
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  absl::string_view line(data, bytes);
  if (absl::StartsWith(line, "HTTP/")) {
    // A new response (after a redirect or a 100 Continue): forget the last.
    HttpResponse& r = *t->response;
    r.etag.clear();
    r.last_modified.clear();
    r.content_range.clear();
    r.generation.clear();
    r.content_length = -1;
    return bytes;
  }
  const size_t colon = line.find(':');
  if (colon == absl::string_view::npos) return bytes;
  const std::string name = absl::AsciiStrToLower(line.substr(0, colon));
  const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
  HttpResponse& r = *t->response;
  if (name == "etag") {
    r.etag = std::string(value);
  } else if (name == "x-goog-generation") {
    r.generation = std::string(value);
  } else if (name == "last-modified") {
    r.last_modified = std::string(value);
  } else if (name == "content-range") {
    r.content_range = std::string(value);
  } else if (name == "content-length") {
    int64_t v;
    if (absl::SimpleAtoi(value, &v)) r.content_length = v;
  }
  return bytes;
}

// The text between <tag> and </tag> in `xml`, or "" (for error bodies only:
// listings and replies are parsed with xml.h; an error body is searched as
// text, so one cut at max_body or not well-formed still gives its message).
absl::string_view Between(absl::string_view xml, absl::string_view tag) {
  const std::string open = absl::StrCat("<", tag, ">"), close = absl::StrCat("</", tag, ">");
  const size_t a = xml.find(open);
  if (a == absl::string_view::npos) return "";
  const size_t b = xml.find(close, a + open.size());
  if (b == absl::string_view::npos) return "";
  return xml.substr(a + open.size(), std::min<size_t>(b - a - open.size(), 300));
}

}  // namespace

std::string RedactUrl(absl::string_view url) {
  return std::string(url.substr(0, url.find_first_of("?#")));
}

struct HttpClient::Handle {
  const CurlApi* api;
  CURL* curl = nullptr;
  explicit Handle(const CurlApi* a) : api(a), curl(a->easy_init()) {}
  ~Handle() {
    if (curl != nullptr) api->easy_cleanup(curl);
  }
};

HttpClient::HttpClient(HttpOptions options) : options_(options) {}

HttpClient::~HttpClient() = default;

absl::StatusOr<std::unique_ptr<HttpClient::Handle>> HttpClient::Acquire() const {
  {
    MutexLock lock(&mu_);
    if (!idle_.empty()) {
      auto h = std::move(idle_.back());
      idle_.pop_back();
      return h;
    }
  }
  // libcurl is loaded and started (OpenSSL's configuration and tables) at
  // the first request, not when a client is made: a scan of local SOURCEs
  // makes one (ObjectLister) and never sends anything (curl_api.h).
  auto api = internal::LoadCurl();
  if (!api.ok()) return api.status();
  return std::make_unique<Handle>(*api);
}

void HttpClient::Release(std::unique_ptr<Handle> handle) const {
  if (handle == nullptr || handle->curl == nullptr) return;
  MutexLock lock(&mu_);
  if (idle_.size() < options_.max_idle_handles) idle_.push_back(std::move(handle));
  // else: destroyed here (a leaf lock; curl_easy_cleanup closes its sockets)
}

absl::StatusOr<HttpResponse> HttpClient::SendOnce(std::unique_ptr<Handle>* handle,
                                                  absl::string_view method, const std::string& url,
                                                  const std::vector<std::string>& headers,
                                                  absl::string_view upload, size_t max_body,
                                                  char* into, long timeout_ms, bool* transient,
                                                  bool* timed_out, std::string* error) const {
  const CurlApi& api = *(*handle)->api;
  CURL* c = (*handle)->curl;
  if (c == nullptr) return absl::ResourceExhaustedError("curl_easy_init failed");
  api.easy_reset(c);
  HttpResponse response;
  const bool ranged = std::any_of(headers.begin(), headers.end(), [](const std::string& h) {
    return absl::StartsWith(h, "Range: ");
  });
  // Room for an error document beyond what a success may carry, and for a
  // small object sent whole by a server that ignores Range.
  const size_t body_cap = (ranged ? std::max(max_body, kWholeObjectBody) : max_body) + 65536;
  Transfer transfer{&api, &response, max_body, c, into, body_cap};
  // A ranged GET's body has the size asked for: one allocation, not a
  // doubling string's copies (a walk's parts are megabytes).
  if (into == nullptr && max_body <= kMaxReservedBody && ranged) response.body.reserve(max_body);
  char errbuf[CURL_ERROR_SIZE] = "";
  curl_slist* list = nullptr;
  for (const std::string& h : headers) list = api.slist_append(list, h.c_str());
  api.easy_setopt(c, CURLOPT_URL, url.c_str());
  api.easy_setopt(c, CURLOPT_HTTPHEADER, list);
  api.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for DNS timeouts
  api.easy_setopt(c, CURLOPT_CONNECTTIMEOUT, options_.connect_timeout_s);
  api.easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  api.easy_setopt(c, CURLOPT_LOW_SPEED_TIME, options_.low_speed_time_s);
  if (timeout_ms > 0) api.easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
  api.easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  api.easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  // Bodies in larger pieces than libcurl's 16 KiB: a 4 MiB part is 32
  // receives and callbacks, not 256. Below the daemon's mmap threshold
  // (256 KiB, cli/mount_cmd.cc): curl_easy_reset gives the buffer back and
  // this option allocates it again for every request, and at 256 KiB each
  // one was a fresh mapping, 65 page faults a GET (a fifth of the faults of
  // a `find` over a bucket); from the heap it is the same memory again.
  api.easy_setopt(c, CURLOPT_BUFFERSIZE, kReceiveBuffer);
  api.easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
  api.easy_setopt(c, CURLOPT_WRITEDATA, &transfer);
  api.easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
  api.easy_setopt(c, CURLOPT_HEADERDATA, &transfer);
  if (method == "HEAD") {
    api.easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (method == "PUT" || method == "POST") {
    // The body from memory (POSTFIELDS under a custom method: no read
    // callback, and libcurl sends it again on a retry).
    api.easy_setopt(c, CURLOPT_CUSTOMREQUEST, method == "PUT" ? "PUT" : "POST");
    api.easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(upload.size()));
    api.easy_setopt(c, CURLOPT_POSTFIELDS, upload.empty() ? "" : upload.data());
  } else if (method == "DELETE") {
    api.easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
  } else {
    api.easy_setopt(c, CURLOPT_HTTPGET, 1L);
  }
  requests_.fetch_add(1, std::memory_order_relaxed);
  const CURLcode rc = api.easy_perform(c);
  api.slist_free_all(list);
  if (transfer.too_large) {
    *transient = false;
    if (ranged && transfer.status == 200) {
      return absl::DataLossError(absl::StrCat(
          "the server ignored the Range header (HTTP 200 with a body of more than ",
          body_cap - 65536, " bytes, not 206 with the bytes asked for): objects larger than ",
          kWholeObjectBody, " bytes need a server that answers ranged GETs"));
    }
    return absl::DataLossError(
        absl::StrCat("the response is larger than the ", max_body, " bytes asked for"));
  }
  if (rc != CURLE_OK) {
    *transient = true;
    *timed_out = rc == CURLE_OPERATION_TIMEDOUT && timeout_ms > 0;
    *error = errbuf[0] != '\0' ? std::string(errbuf) : api.easy_strerror(rc);
    // A handle whose transfer failed may hold a broken connection: drop it.
    *handle = std::make_unique<Handle>(&api);
    return absl::UnavailableError(*error);
  }
  api.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
  *transient = response.status == 429 || response.status >= 500;
  return response;
}

absl::StatusOr<HttpResponse> HttpClient::Send(absl::string_view method, const std::string& url,
                                              const std::vector<std::string>& headers,
                                              const RequestSigner* signer, size_t max_body,
                                              absl::string_view what, absl::string_view upload,
                                              char* into) const {
  std::vector<std::string> all = headers;
  if (method == "PUT" || method == "POST") {
    // POSTFIELDS would say a form; and no "Expect: 100-continue" round trip.
    // A POST's body is S3's XML (CompleteMultipartUpload) or empty.
    all.push_back(method == "PUT" ? "Content-Type: application/octet-stream"
                                  : "Content-Type: application/xml");
    all.push_back("Expect:");
  }
  const std::string payload_sha256 =
      signer != nullptr && !upload.empty() ? Sha256Hex(upload) : std::string(kEmptySha256);
  const std::vector<std::string> unsigned_headers = all;
  if (signer != nullptr) {
    auto signed_headers = signer->SignWith(method, url, payload_sha256, headers);
    if (!signed_headers.ok()) return signed_headers.status();
    all.insert(all.end(), signed_headers->begin(), signed_headers->end());
  }
  auto acquired = Acquire();
  if (!acquired.ok()) {
    return SetMessage(acquired.status(),
                      absl::StrCat(RedactUrl(url), ": ", what, ": ", acquired.status().message()));
  }
  std::unique_ptr<Handle> handle = std::move(*acquired);
  thread_local std::mt19937_64 jitter(std::random_device{}());
  absl::StatusOr<HttpResponse> last = absl::UnknownError("no attempt");
  std::string error;
  int attempts = 0;
  // The deadline covers every attempt and every wait between them.
  using Clock = std::chrono::steady_clock;
  const bool has_deadline = options_.deadline_s > 0 && method != "PUT" && upload.empty();
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(options_.deadline_s);
  const auto left_ms = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  };
  bool out_of_time = false;
  for (int attempt = 0;; ++attempt) {
    bool transient = false, timed_out = false;
    ++attempts;
    const long timeout_ms = has_deadline ? std::max<long>(1, left_ms()) : 0;
    last = SendOnce(&handle, method, url, all, upload, max_body, into, timeout_ms, &transient,
                    &timed_out, &error);
    if (timed_out) out_of_time = true;
    if (!transient || attempt >= options_.retries || out_of_time) break;
    const long base = options_.backoff_ms << attempt;
    const long wait = base + static_cast<long>(jitter() % static_cast<uint64_t>(base + 1));
    if (has_deadline && left_ms() <= wait) {
      out_of_time = true;
      break;
    }
    log::Debug(RedactUrl(url), ": ", what, ": ",
               last.ok() ? DescribeHttpStatus(last->status, last->body) : error, "; retry ",
               attempt + 1, " of ", options_.retries, " in ", wait, " ms");
    std::this_thread::sleep_for(std::chrono::milliseconds(wait));
    // Signatures carry a time: sign again for the next attempt.
    if (signer != nullptr) {
      auto signed_headers = signer->SignWith(method, url, payload_sha256, headers);
      if (!signed_headers.ok()) return signed_headers.status();
      all = unsigned_headers;
      all.insert(all.end(), signed_headers->begin(), signed_headers->end());
    }
  }
  Release(std::move(handle));
  const std::string tries = attempts > 1 ? absl::StrCat(" (after ", attempts, " attempts)") : "";
  if (out_of_time) {
    return absl::UnavailableError(absl::StrCat(
        RedactUrl(url), ": ", what, ": no complete answer within the ", options_.deadline_s,
        " s deadline (request_timeout)", tries, ": ",
        last.ok() ? DescribeHttpStatus(last->status, last->body) : last.status().message()));
  }
  if (!last.ok()) {
    return SetMessage(last.status(), absl::StrCat(RedactUrl(url), ": ", what, ": ",
                                                  last.status().message(), tries));
  }
  return last;
}

std::string DescribeHttpStatus(long status, absl::string_view body) {
  std::string out = absl::StrCat("HTTP ", status);
  const absl::string_view code = Between(body, "Code"), message = Between(body, "Message");
  if (!code.empty() || !message.empty()) {
    absl::StrAppend(&out, " (", code, code.empty() || message.empty() ? "" : ": ", message, ")");
  }
  return out;
}

// ---- HttpObject ----

HttpObject::HttpObject(Listed listed, std::shared_ptr<const HttpClient> client,
                       std::shared_ptr<const RequestSigner> signer,
                       std::shared_ptr<source::BlockCache> cache)
    : listed_(std::move(listed)),
      client_(std::move(client)),
      signer_(std::move(signer)),
      cache_(std::move(cache)),
      id_(cache_ ? cache_->NewSourceId() : 0) {}

absl::Status HttpObject::Fetch(uint64_t begin, uint64_t end, char* buf) const {
  const std::string range = absl::StrCat("bytes ", begin, "-", end - 1);
  std::vector<std::string> headers = {absl::StrCat("Range: bytes=", begin, "-", end - 1)};
  if (!listed_.etag.empty()) headers.push_back(absl::StrCat("If-Match: ", listed_.etag));
  auto r = client_->Send("GET", listed_.url, headers, signer_.get(), end - begin, range, {}, buf);
  if (!r.ok()) {
    // A read that keeps failing is an I/O error for that read (not EAGAIN,
    // which readers would retry at once).
    log::Error(listed_.name, ": ", r.status().message());
    return PosixError(EIO, absl::StrCat(listed_.name, ": ", r.status().message()));
  }
  const uint64_t want = end - begin;
  if (r->status == 412 || r->status == 404 ||
      (!listed_.etag.empty() && !r->etag.empty() && r->etag != listed_.etag)) {
    const std::string why =
        r->status == 404 ? "it is gone"
                         : absl::StrCat("its ETag is no longer ", listed_.etag,
                                        r->etag.empty() ? "" : absl::StrCat(" but ", r->etag));
    if (!change_logged_.exchange(true)) {
      log::Error(listed_.name, ": the object changed since it was listed (", why,
                 "); its reads fail with EIO: remount to list it again");
    }
    return absl::DataLossError(absl::StrCat(listed_.name, ": ", range,
                                            ": the object changed since it was listed (", why,
                                            "); remount to list it again"));
  }
  if (r->status == 206) {
    // The bytes are those asked for only if the server says so: one that
    // answers another range (every range from byte 0) must not have its
    // bytes taken for ours.
    const std::string expect = absl::StrCat("bytes ", begin, "-", end - 1, "/");
    if (!absl::StartsWith(r->content_range, expect)) {
      const std::string why =
          absl::StrCat(listed_.name, ": ", range, ": the server answered HTTP 206 with ",
                       r->content_range.empty()
                           ? "no Content-Range"
                           : absl::StrCat("Content-Range '", r->content_range.substr(0, 80), "'"),
                       ", not the range asked for");
      log::Error(why);
      return absl::DataLossError(why);
    }
    if (r->into_bytes == want) return absl::OkStatus();
  }
  if (r->status == 200 && r->body.size() == listed_.size && end <= listed_.size) {
    // A server that ignores Range sent the whole (small) object: the range
    // is cut from it (HttpClient::Send takes up to kWholeObjectBody bytes).
    std::copy_n(r->body.data() + begin, want, buf);
    return absl::OkStatus();
  }
  if (r->status == 200) {
    const std::string why = absl::StrCat(
        listed_.name, ": ", range, ": the server ignored the Range header (HTTP 200 with ",
        r->body.size(), " bytes, not the object's ", listed_.size, ")");
    log::Error(why);
    return absl::DataLossError(why);
  }
  if (r->status == 206) {
    return absl::DataLossError(absl::StrCat(listed_.name, ": ", range, ": HTTP 206 with ",
                                            r->into_bytes, " byte(s) instead of ", want));
  }
  return PosixError(
      EIO, absl::StrCat(listed_.name, ": ", range, ": ", DescribeHttpStatus(r->status, r->body)));
}

absl::StatusOr<size_t> HttpObject::ReadAt(uint64_t offset, char* buf, size_t n) const {
  const uint64_t size = listed_.size;
  if (offset >= size || n == 0) return size_t{0};
  n = static_cast<size_t>(std::min<uint64_t>(n, size - offset));
  const uint64_t end = offset + n;
  if (n >= kUncachedFetch) {
    // A walk's part (PrefetchReader) or a readahead block: the reader
    // keeps what it needs, so the bytes go around the block cache, where
    // they would be kept twice and evict the blocks of record reads. Its
    // leading blocks that the cache holds (the probe's first MiB, before a
    // walk's first part) are taken from there: no GET of them again.
    size_t done = 0;
    while (cache_ && done < n) {
      const uint64_t at = offset + done;
      const uint64_t b = at / source::kBlockSize;
      auto hit = cache_->Get(id_, b);
      if (!hit) break;
      const size_t skip = static_cast<size_t>(at - b * source::kBlockSize);
      if (skip >= hit->size()) break;
      const size_t k = std::min(n - done, hit->size() - skip);
      std::copy_n(hit->data() + skip, k, buf + done);
      done += k;
    }
    if (done < n) {
      if (absl::Status s = Fetch(offset + done, end, buf + done); !s.ok()) return s;
    }
    return n;
  }
  const uint64_t first = offset / source::kBlockSize, last = (end - 1) / source::kBlockSize;
  size_t done = 0;
  uint64_t b = first;
  // Copies the part of block `b` (its bytes `bytes`) that [offset, end) needs.
  const auto take = [&](uint64_t block, absl::string_view bytes) {
    const uint64_t block_begin = block * source::kBlockSize;
    const uint64_t from = std::max(offset, block_begin);
    const uint64_t to = std::min<uint64_t>(end, block_begin + bytes.size());
    if (to <= from) return;
    std::copy_n(bytes.data() + (from - block_begin), to - from, buf + (from - offset));
    done += static_cast<size_t>(to - from);
  };
  while (b <= last) {
    if (cache_) {
      if (auto hit = cache_->Get(id_, b)) {
        take(b, *hit);
        ++b;
        continue;
      }
    }
    // Fetch from block b through the last block missing in a row, at least
    // kMinObjectFetch bytes.
    uint64_t miss_end = b + 1;
    while (miss_end <= last && !(cache_ && cache_->Get(id_, miss_end))) ++miss_end;
    const uint64_t fetch_begin = b * source::kBlockSize;
    uint64_t fetch_end =
        std::max<uint64_t>(miss_end * source::kBlockSize, fetch_begin + kMinObjectFetch);
    fetch_end = std::min<uint64_t>(fetch_end, size);
    if (!cache_) fetch_end = std::min<uint64_t>(miss_end * source::kBlockSize, size);
    auto bytes = std::make_unique<std::string>(fetch_end - fetch_begin, '\0');
    if (absl::Status s = Fetch(fetch_begin, fetch_end, bytes->data()); !s.ok()) return s;
    for (uint64_t k = b; k * source::kBlockSize < fetch_end; ++k) {
      const uint64_t at = k * source::kBlockSize - fetch_begin;
      const size_t len =
          static_cast<size_t>(std::min<uint64_t>(source::kBlockSize, bytes->size() - at));
      auto block = std::make_shared<const std::string>(bytes->substr(at, len));
      if (k <= last) take(k, *block);
      if (cache_) cache_->Put(id_, k, std::move(block));
    }
    b = std::max<uint64_t>(miss_end, (fetch_end + source::kBlockSize - 1) / source::kBlockSize);
  }
  return done;
}

absl::StatusOr<std::string> HttpObject::ReadBeside(absl::string_view suffix,
                                                   uint64_t max_bytes) const {
  const std::string name = absl::StrCat(listed_.name, suffix);
  if (listed_.neighbours_listed &&
      std::find(listed_.beside.begin(), listed_.beside.end(), suffix) == listed_.beside.end()) {
    return absl::NotFoundError(absl::StrCat(name, ": not listed"));
  }
  // Beside the object's path: a query string (a presigned URL's
  // credentials) signs that object only.
  const std::string url = absl::StrCat(RedactUrl(listed_.url), suffix);
  auto r = client_->Send("GET", url, {}, signer_.get(), static_cast<size_t>(max_bytes), "GET");
  if (!r.ok()) {
    if (absl::IsDataLoss(r.status())) {
      return absl::FailedPreconditionError(
          absl::StrCat(name, ": larger than ", max_bytes, " bytes; not read"));
    }
    return r.status();
  }
  if (r->status == 404 || (r->status == 403 && !listed_.neighbours_listed)) {
    return absl::NotFoundError(absl::StrCat(name, ": ", DescribeHttpStatus(r->status, r->body)));
  }
  if (r->status != 200) {
    return absl::UnavailableError(
        absl::StrCat(name, ": GET: ", DescribeHttpStatus(r->status, r->body)));
  }
  if (r->body.size() > max_bytes) {
    return absl::FailedPreconditionError(
        absl::StrCat(name, ": larger than ", max_bytes, " bytes; not read"));
  }
  return std::move(r->body);
}

absl::Status HttpObject::WriteBeside(absl::string_view suffix, absl::string_view bytes) const {
  const std::string url = absl::StrCat(RedactUrl(listed_.url), suffix);
  auto r = client_->Send("PUT", url, {}, signer_.get(), 0,
                         absl::StrCat("PUT of ", bytes.size(), " bytes"), bytes);
  if (!r.ok()) return r.status();
  if (r->status == 200 || r->status == 201 || r->status == 204) return absl::OkStatus();
  const absl::StatusCode code = r->status == 401 || r->status == 403
                                    ? absl::StatusCode::kPermissionDenied
                                : r->status >= 500 ? absl::StatusCode::kUnavailable
                                                   : absl::StatusCode::kFailedPrecondition;
  // The URL, not the s3:// name: it says which endpoint refused.
  return absl::Status(code,
                      absl::StrCat("PUT ", url, ": ", DescribeHttpStatus(r->status, r->body)));
}

}  // namespace tfrecordfs::objstore
