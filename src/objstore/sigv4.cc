#include "tfrecordfs/objstore/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <ctime>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tfrecordfs::objstore {
namespace {

std::string Hex(const unsigned char* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[p[i] >> 4];
    out[2 * i + 1] = kDigits[p[i] & 15];
  }
  return out;
}

std::string Hmac(absl::string_view key, absl::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

}  // namespace

std::string Sha256Hex(absl::string_view data) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), md);
  return Hex(md, sizeof md);
}

std::string AwsUriEncode(absl::string_view s, bool encode_slash) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (c == '/' && !encode_slash)) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kDigits[c >> 4]);
      out.push_back(kDigits[c & 15]);
    }
  }
  return out;
}

namespace {

// Signed headers: host and the request's, lower-cased, sorted.
std::vector<std::pair<std::string, std::string>> SignedHeaders(const SigV4Request& r) {
  std::vector<std::pair<std::string, std::string>> h;
  h.emplace_back("host", r.host);
  for (const auto& [name, value] : r.headers) {
    h.emplace_back(absl::AsciiStrToLower(name), std::string(absl::StripAsciiWhitespace(value)));
  }
  std::sort(h.begin(), h.end());
  return h;
}

std::string SignedHeaderNames(const SigV4Request& r) {
  std::vector<std::string> names;
  for (const auto& [name, value] : SignedHeaders(r)) names.push_back(name);
  return absl::StrJoin(names, ";");
}

std::string Scope(absl::string_view amz_date, absl::string_view region, absl::string_view service) {
  return absl::StrCat(amz_date.substr(0, 8), "/", region, "/", service, "/aws4_request");
}

}  // namespace

std::string CanonicalRequest(const SigV4Request& r) {
  // The query: its parameters sorted by name (then value), each "k=v".
  std::vector<std::pair<std::string, std::string>> params;
  if (!r.query.empty()) {
    for (absl::string_view part : absl::StrSplit(r.query, '&')) {
      if (part.empty()) continue;
      std::pair<std::string, std::string> kv = absl::StrSplit(part, absl::MaxSplits('=', 1));
      params.push_back(std::move(kv));
    }
  }
  std::sort(params.begin(), params.end());
  std::vector<std::string> query;
  for (const auto& [k, v] : params) query.push_back(absl::StrCat(k, "=", v));
  std::string headers;
  for (const auto& [name, value] : SignedHeaders(r))
    absl::StrAppend(&headers, name, ":", value, "\n");
  return absl::StrCat(r.method, "\n", r.path.empty() ? "/" : r.path, "\n",
                      absl::StrJoin(query, "&"), "\n", headers, "\n", SignedHeaderNames(r), "\n",
                      r.payload_hash);
}

std::string StringToSign(const SigV4Request& r, absl::string_view amz_date,
                         absl::string_view region, absl::string_view service) {
  return absl::StrCat("AWS4-HMAC-SHA256\n", amz_date, "\n", Scope(amz_date, region, service), "\n",
                      Sha256Hex(CanonicalRequest(r)));
}

std::string SigV4Authorization(const AwsCredentials& c, const SigV4Request& r,
                               absl::string_view amz_date, absl::string_view region,
                               absl::string_view service) {
  const std::string k_date = Hmac(absl::StrCat("AWS4", c.secret_access_key), amz_date.substr(0, 8));
  const std::string k_region = Hmac(k_date, region);
  const std::string k_service = Hmac(k_region, service);
  const std::string k_signing = Hmac(k_service, "aws4_request");
  const std::string mac = Hmac(k_signing, StringToSign(r, amz_date, region, service));
  return absl::StrCat(
      "AWS4-HMAC-SHA256 Credential=", c.access_key_id, "/", Scope(amz_date, region, service),
      ",SignedHeaders=", SignedHeaderNames(r),
      ",Signature=", Hex(reinterpret_cast<const unsigned char*>(mac.data()), mac.size()));
}

absl::StatusOr<std::vector<std::string>> SigV4Signer::Sign(absl::string_view method,
                                                           absl::string_view url,
                                                           absl::string_view payload_sha256) const {
  return SignWith(method, url, payload_sha256, {});
}

absl::StatusOr<std::vector<std::string>> SigV4Signer::SignWith(
    absl::string_view method, absl::string_view url, absl::string_view payload_sha256,
    const std::vector<std::string>& request_headers) const {
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "https://") && !absl::ConsumePrefix(&rest, "http://")) {
    return absl::InvalidArgumentError(absl::StrCat("cannot sign ", url, ": not an http(s) URL"));
  }
  SigV4Request r;
  r.method = std::string(method);
  const size_t slash = rest.find('/');
  r.host = std::string(rest.substr(0, slash));
  absl::string_view path = slash == absl::string_view::npos ? "/" : rest.substr(slash);
  const size_t q = path.find('?');
  if (q != absl::string_view::npos) {
    r.query = std::string(path.substr(q + 1));
    path = path.substr(0, q);
  }
  r.path = std::string(path);
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm;
  gmtime_r(&now, &tm);
  std::strftime(date, sizeof date, "%Y%m%dT%H%M%SZ", &tm);
  r.payload_hash = std::string(payload_sha256);
  r.headers = {{"x-amz-date", date}, {"x-amz-content-sha256", r.payload_hash}};
  if (!credentials_.session_token.empty()) {
    r.headers.emplace_back("x-amz-security-token", credentials_.session_token);
  }
  std::vector<std::string> out;
  for (const auto& [name, value] : r.headers) out.push_back(absl::StrCat(name, ": ", value));
  for (const std::string& h : request_headers) {
    const size_t colon = h.find(':');
    if (colon == std::string::npos) continue;
    const std::string name = absl::AsciiStrToLower(h.substr(0, colon));
    if (absl::StartsWith(name, "x-amz-")) r.headers.emplace_back(name, h.substr(colon + 1));
  }
  out.push_back(absl::StrCat("Authorization: ",
                             SigV4Authorization(credentials_, r, date, region_, service_)));
  return out;
}

}  // namespace tfrecordfs::objstore
