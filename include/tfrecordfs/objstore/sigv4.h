// AWS Signature Version 4 for S3 and S3-compatible stores (GCS's XML API
// takes the same signature with HMAC keys), with OpenSSL's HMAC and SHA-256.
//
// libcurl signs SigV4 itself since 7.75 (CURLOPT_AWS_SIGV4), but Debian 12's
// 7.88 neither takes a session token for it nor lets us check its output
// against AWS's published examples; this is the algorithm as AWS documents
// it ("Signature Calculations for the Authorization Header"), with the
// signed headers limited to host and x-amz-* (Range and If-Match travel
// unsigned, which S3 accepts).
//
// Secrets: nothing here logs; a key's secret is only ever an HMAC input.
//
// Thread-safety: the functions are pure; SigV4Signer is immutable after
// construction and safe to share.
#ifndef TFRECORDFS_OBJSTORE_SIGV4_H_
#define TFRECORDFS_OBJSTORE_SIGV4_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/objstore/http.h"

namespace tfrecordfs::objstore {

// SHA-256 of nothing: the payload hash of a GET.
inline constexpr absl::string_view kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // optional (x-amz-security-token)
};

// A request as SigV4 sees it.
struct SigV4Request {
  std::string method;  // "GET"
  std::string host;    // the Host header (with :port when not the default)
  std::string path;    // the URI path as sent (already percent-encoded)
  std::string query;   // the query string as sent ("a=1&b=2"), any order
  // Headers to sign besides host (names in any case; values trimmed).
  std::vector<std::pair<std::string, std::string>> headers;
  std::string payload_hash = std::string(kEmptySha256);
};

// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(absl::string_view data);
// RFC 3986 percent-encoding as AWS wants it: A-Z a-z 0-9 - _ . ~ kept,
// '/' kept unless `encode_slash`, everything else %XX (upper-case hex).
std::string AwsUriEncode(absl::string_view s, bool encode_slash);
// The canonical request and the string to sign (exposed for tests).
std::string CanonicalRequest(const SigV4Request& request);
std::string StringToSign(const SigV4Request& request, absl::string_view amz_date,
                         absl::string_view region, absl::string_view service);
// The Authorization header's value for `request` at `amz_date`
// ("20130524T000000Z").
std::string SigV4Authorization(const AwsCredentials& credentials, const SigV4Request& request,
                               absl::string_view amz_date, absl::string_view region,
                               absl::string_view service);

// Signs requests with fixed credentials (objstore/access.h finds them
// when the bucket is opened) at the current time. The payload hash is
// signed and sent as x-amz-content-sha256 (a PUT's body is thus checked by
// the store).
class SigV4Signer final : public RequestSigner {
 public:
  SigV4Signer(AwsCredentials credentials, std::string region, std::string service = "s3")
      : credentials_(std::move(credentials)),
        region_(std::move(region)),
        service_(std::move(service)) {}
  absl::StatusOr<std::vector<std::string>> Sign(absl::string_view method, absl::string_view url,
                                                absl::string_view payload_sha256) const override;
  // Also signs the request's x-amz-* headers (S3 refuses x-amz-* headers
  // that are not signed); they are sent as given, not returned.
  absl::StatusOr<std::vector<std::string>> SignWith(
      absl::string_view method, absl::string_view url, absl::string_view payload_sha256,
      const std::vector<std::string>& request_headers) const override;

 private:
  const AwsCredentials credentials_;
  const std::string region_, service_;
};

}  // namespace tfrecordfs::objstore

#endif  // TFRECORDFS_OBJSTORE_SIGV4_H_
