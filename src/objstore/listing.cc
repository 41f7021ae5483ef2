#include "tfrecordfs/objstore/listing.h"

#include <limits.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/hash.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/objstore/sigv4.h"
#include "tfrecordfs/objstore/xml.h"

namespace tfrecordfs::objstore {
namespace {

// A listing page is refused beyond this (S3 pages hold at most 1000 keys:
// about 400 KiB).
constexpr size_t kMaxListBody = size_t{16} << 20;

// The suffixes of the index files a listing may hold beside an object.
constexpr absl::string_view kBesideSuffixes[] = {".tfri"};

// How a log line names a key the server sent: escaped (no newline nor
// terminal control reaches the log), at most 200 bytes of it.
std::string QuoteKey(absl::string_view key) {
  std::string out = absl::StrCat("'", absl::CHexEscape(key.substr(0, 200)), "'");
  if (key.size() > 200) absl::StrAppend(&out, " (", key.size(), " bytes)");
  return out;
}

absl::string_view BaseName(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

// ---- ListObjectsV2 (xml.h) ----

absl::string_view LocalName(absl::string_view name) {
  // With namespace processing off, a prefixed name is "ns:Name".
  const size_t colon = name.rfind(':');
  return colon == absl::string_view::npos ? name : name.substr(colon + 1);
}

class ListParser final : public XmlHandler {
 public:
  void Start(absl::string_view name) override {
    path.emplace_back(LocalName(name));
    text.clear();
    text_cut = false;
    if (path.size() == 1) saw_root = path[0] == "ListBucketResult";
    if (path.size() == 2 && path[1] == "Contents") current = ListedObject();
  }

  void Text(absl::string_view s) override {
    const size_t room = kMaxListText - text.size();
    if (s.size() > room) text_cut = true;
    text.append(s.data(), std::min(s.size(), room));
  }

  void End(absl::string_view) override {
    if (path.empty()) return;
    const std::string name = path.back();
    const size_t depth = path.size();
    if (depth == 3 && path[1] == "Contents") {
      if (name == "Key") {
        current.key = text;
      } else if (name == "Size") {
        if (!absl::SimpleAtoi(text, &current.size) && error.empty()) {
          error = absl::StrCat("<Size> is not a number: ", text.substr(0, 40));
        }
      } else if (name == "ETag") {
        current.etag = text;
      } else if (name == "LastModified") {
        current.last_modified = text;
      }
    } else if (depth == 2 && name == "Contents") {
      page.objects.push_back(std::move(current));
    } else if (depth == 2 && name == "IsTruncated") {
      page.truncated = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text)) == "true";
    } else if (depth == 2 && name == "NextContinuationToken") {
      page.next_token = text;
      if (text_cut && error.empty()) {
        error = absl::StrCat("<NextContinuationToken> is longer than ", kMaxListText, " bytes");
      }
    }
    text.clear();
    text_cut = false;
    path.pop_back();
  }

  ListPage page;
  std::vector<std::string> path;  // open elements (local names)
  std::string text;
  bool text_cut = false;  // `text` lost bytes beyond kMaxListText
  ListedObject current;
  bool saw_root = false;
  std::string error;
};

}  // namespace

bool IsObjectUrl(absl::string_view source) {
  for (absl::string_view scheme : {"s3://", "gs://", "http://", "https://"}) {
    if (absl::StartsWith(source, scheme)) return true;
  }
  return false;
}

absl::StatusOr<ObjectUrl> ParseObjectUrl(absl::string_view source) {
  ObjectUrl u;
  absl::string_view rest = source;
  if (absl::ConsumePrefix(&rest, "s3://")) {
    u.scheme = ObjectUrl::Scheme::kS3;
  } else if (absl::ConsumePrefix(&rest, "gs://")) {
    u.scheme = ObjectUrl::Scheme::kGcs;
  } else if (absl::ConsumePrefix(&rest, "http://") || absl::ConsumePrefix(&rest, "https://")) {
    u.scheme = ObjectUrl::Scheme::kHttp;
    const absl::string_view host = rest.substr(0, rest.find('/'));
    if (host.empty()) return absl::InvalidArgumentError(absl::StrCat(source, ": no host"));
    if (absl::StrContains(host, '@')) {
      return absl::InvalidArgumentError(
          absl::StrCat("a URL with user:password@ is not taken (it would be logged): give "
                       "credentials in the environment"));
    }
    u.url = std::string(source);
    return u;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not an s3://, gs:// or http(s):// URL"));
  }
  const size_t slash = rest.find('/');
  u.bucket = std::string(rest.substr(0, slash));
  if (slash != absl::string_view::npos) u.key = std::string(rest.substr(slash + 1));
  if (u.bucket.empty()) return absl::InvalidArgumentError(absl::StrCat(source, ": no bucket"));
  if (absl::StrContains(u.bucket, '@')) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": '@' in a bucket name"));
  }
  return u;
}

absl::StatusOr<std::vector<std::string>> ExpandShardSpec(absl::string_view url) {
  const size_t at = url.rfind('@');
  const size_t slash = url.rfind('/');
  if (at == absl::string_view::npos || (slash != absl::string_view::npos && at < slash)) {
    return std::vector<std::string>{std::string(url)};
  }
  const absl::string_view stem = url.substr(0, at), count = url.substr(at + 1);
  uint32_t n = 0;
  if (!absl::SimpleAtoi(count, &n) || n == 0 || n > 100000 ||
      !std::all_of(count.begin(), count.end(), absl::ascii_isdigit)) {
    return absl::InvalidArgumentError(
        absl::StrCat(url, ": 'name@N' needs a shard count N from 1 to 100000"));
  }
  const int width = std::max<int>(5, static_cast<int>(absl::StrCat(n).size()));
  std::vector<std::string> out;
  out.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    out.push_back(absl::StrFormat("%s-%0*u-of-%0*u", stem, width, i, width, n));
  }
  return out;
}

absl::StatusOr<ListPage> ParseListObjectsV2(absl::string_view xml) {
  ListParser p;
  if (absl::Status s = ParseXml(xml, p); !s.ok()) {
    if (!absl::IsDataLoss(s)) return s;
    return absl::DataLossError(absl::StrCat("the listing is not valid XML (", s.message(), ")"));
  }
  if (!p.saw_root) return absl::DataLossError("the listing is not a <ListBucketResult>");
  if (!p.error.empty()) return absl::DataLossError(absl::StrCat("the listing: ", p.error));
  if (p.page.truncated && p.page.next_token.empty()) {
    return absl::DataLossError("the listing is truncated but gives no NextContinuationToken");
  }
  return std::move(p.page);
}

absl::Status ListingBudget::Take(const ListPage& page) {
  ++pages_;
  keys_ += page.objects.size();
  for (const ListedObject& o : page.objects) key_bytes_ += o.key.size();
  const auto so_far = [&] { return absl::StrCat(" (", pages_, " pages, ", keys_, " keys)"); };
  if (keys_ > limits_.max_keys || key_bytes_ > limits_.max_key_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the listing holds more than ", limits_.max_keys, " keys or ", limits_.max_key_bytes >> 20,
        " MiB of key names", so_far(), "; list a narrower prefix"));
  }
  if (!page.truncated) return absl::OkStatus();
  if (pages_ >= limits_.max_pages) {
    return absl::ResourceExhaustedError(absl::StrCat("the listing goes on beyond ",
                                                     limits_.max_pages, " pages", so_far(),
                                                     "; list a narrower prefix"));
  }
  if (!tokens_.insert(page.next_token).second) {
    return absl::DataLossError(absl::StrCat("the server gave a continuation token it gave before",
                                            so_far(), ": the listing would never end"));
  }
  return absl::OkStatus();
}

KeyPlace PlaceListedKey(absl::string_view prefix, absl::string_view key) {
  KeyPlace place;
  if (!absl::StartsWith(key, prefix)) {
    place.why = "not under the prefix asked for";
    return place;
  }
  if (key.size() > kMaxKeyBytes) {
    place.why = absl::StrCat("longer than ", kMaxKeyBytes, " bytes (S3's limit)");
    return place;
  }
  // "PREFIX/" is a folder; "PREFIX" is the object of that key, or the
  // folder "PREFIX/" (listed together).
  absl::string_view relative;
  if (prefix.empty() || absl::EndsWith(prefix, "/")) {
    relative = key.substr(prefix.size());
  } else if (key == prefix) {
    relative = BaseName(key);
  } else if (key[prefix.size()] == '/') {
    relative = key.substr(prefix.size() + 1);
  } else {
    place.kind = KeyPlace::Kind::kElsewhere;  // "PREFIX2/...": another folder
    return place;
  }
  if (relative.empty() || absl::EndsWith(relative, "/")) {
    // A folder marker ("dir/", the console's "Create folder"), unless it
    // would climb.
    bool climbs = false;
    for (absl::string_view part : absl::StrSplit(relative, '/')) climbs |= part == "..";
    if (!climbs) {
      place.kind = KeyPlace::Kind::kElsewhere;
      return place;
    }
  }
  for (absl::string_view part : absl::StrSplit(relative, '/')) {
    if (part.empty() || part == "." || part == "..") {
      place.why = "an empty, '.' or '..' part in its name";
      return place;
    }
    if (part.size() > NAME_MAX) {
      place.why = absl::StrCat("a part of its name is longer than ", NAME_MAX, " bytes");
      return place;
    }
  }
  place.kind = KeyPlace::Kind::kShown;
  place.relative = std::string(relative);
  return place;
}

std::string RedactSource(absl::string_view source) {
  if (absl::StartsWith(source, "http://") || absl::StartsWith(source, "https://")) {
    return RedactUrl(source);
  }
  return std::string(source);
}

timespec EtagStamp(absl::string_view etag) {
  const uint64_t h = Fnv1a64(etag);
  timespec t{};
  t.tv_sec = static_cast<time_t>(h & 0x7fffffff);
  t.tv_nsec = static_cast<long>((h >> 32) % 1000000000u);
  return t;
}

int64_t ParseObjectTime(absl::string_view text) {
  const std::string s(absl::StripAsciiWhitespace(text));
  std::tm tm = {};
  const char* end = ::strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr) {
    tm = {};
    end = ::strptime(s.c_str(), "%a, %d %b %Y %H:%M:%S", &tm);
  }
  if (end == nullptr) return 0;
  return static_cast<int64_t>(::timegm(&tm));
}

ObjectLister::ObjectLister(std::shared_ptr<source::BlockCache> cache, ObjectOptions options,
                           Getenv env)
    : client_(std::make_shared<HttpClient>(HttpOptions{.deadline_s = options.request_timeout_s})),
      cache_(std::move(cache)),
      options_(std::move(options)),
      env_(std::move(env)) {}

absl::StatusOr<std::vector<FoundObject>> ObjectLister::List(const std::string& source) const {
  auto u = ParseObjectUrl(source);
  if (!u.ok()) return u.status();
  if (u->scheme != ObjectUrl::Scheme::kHttp) return ListBucket(source, *u);
  auto one = Head(u->url);
  if (!one.ok()) return one.status();
  return std::vector<FoundObject>{std::move(*one)};
}

absl::StatusOr<FoundObject> ObjectLister::Head(const std::string& url) const {
  // How messages, logs and the index cache name it: never its query string.
  const std::string name = RedactUrl(url);
  auto r = client_->Send("HEAD", url, {}, nullptr, 0, "HEAD");
  if (!r.ok()) return r.status();
  if (r->status == 404 || r->status == 403) {
    return absl::Status(
        r->status == 404 ? absl::StatusCode::kNotFound : absl::StatusCode::kPermissionDenied,
        absl::StrCat(name, ": ", DescribeHttpStatus(r->status, r->body)));
  }
  if (r->status != 200 || r->content_length < 0) {
    // Some servers answer HEAD badly: a one-byte ranged GET says the size
    // in Content-Range ("bytes 0-0/SIZE").
    r = client_->Send("GET", url, {"Range: bytes=0-0"}, nullptr, 1, "bytes 0-0");
    if (!r.ok()) return r.status();
    if (r->status == 206) {
      const size_t slash = r->content_range.rfind('/');
      int64_t size = -1;
      if (slash == std::string::npos ||
          !absl::SimpleAtoi(absl::string_view(r->content_range).substr(slash + 1), &size)) {
        return absl::DataLossError(absl::StrCat(name, ": no object size in Content-Range '",
                                                r->content_range.substr(0, 80), "'"));
      }
      r->content_length = size;
    } else if (r->status == 416) {
      r->content_length = 0;  // an empty object has no byte 0
    } else if (r->status != 200) {
      return absl::Status(r->status == 404   ? absl::StatusCode::kNotFound
                          : r->status == 403 ? absl::StatusCode::kPermissionDenied
                                             : absl::StatusCode::kUnavailable,
                          absl::StrCat(name, ": ", DescribeHttpStatus(r->status, r->body)));
    }
  }
  if (r->content_length < 0) return absl::DataLossError(absl::StrCat(name, ": no object size"));
  FoundObject f;
  f.relative = std::string(BaseName(name));
  f.mtime = ParseObjectTime(r->last_modified);
  HttpObject::Listed listed;
  listed.url = url;
  listed.name = name;
  listed.size = static_cast<uint64_t>(r->content_length);
  listed.etag = r->etag;
  // A weak ETag (W/"...") cannot pin a byte range (RFC 9110 8.8.3.2).
  if (absl::StartsWith(listed.etag, "W/")) listed.etag.clear();
  f.object = std::make_shared<HttpObject>(std::move(listed), client_, nullptr, cache_);
  return f;
}

absl::StatusOr<std::vector<FoundObject>> ObjectLister::ListBucket(const std::string& source,
                                                                  const ObjectUrl& u) const {
  auto access = u.scheme == ObjectUrl::Scheme::kS3 ? ResolveS3Access(options_, env_)
                                                   : ResolveGcsAccess(options_, env_, client_);
  if (!access.ok()) {
    return Annotate(access.status(), source);
  }
  const std::string base = BucketBase(*access, u.bucket);
  const std::shared_ptr<const RequestSigner> signer = access->signer;
  const absl::string_view scheme = u.scheme == ObjectUrl::Scheme::kS3 ? "s3://" : "gs://";
  std::vector<ListedObject> listed;
  ListingBudget budget;
  std::string token;
  do {
    std::string url = absl::StrCat(base, "/?list-type=2&prefix=", AwsUriEncode(u.key, true));
    if (!token.empty()) {
      absl::StrAppend(&url, "&continuation-token=", AwsUriEncode(token, true));
    }
    auto r = client_->Send("GET", url, {}, signer.get(), kMaxListBody, "ListObjectsV2");
    if (!r.ok()) return r.status();
    if (r->status != 200) {
      return absl::Status(
          r->status == 404   ? absl::StatusCode::kNotFound
          : r->status == 403 ? absl::StatusCode::kPermissionDenied
                             : absl::StatusCode::kUnavailable,
          absl::StrCat(source, ": listing failed: ", DescribeHttpStatus(r->status, r->body),
                       r->status == 401 || r->status == 403
                           ? absl::StrCat("; requests were sent ", access->signing)
                           : ""));
    }
    auto page = ParseListObjectsV2(r->body);
    if (!page.ok()) return absl::DataLossError(absl::StrCat(source, ": ", page.status().message()));
    if (absl::Status s = budget.Take(*page); !s.ok()) {
      return Annotate(s, absl::StrCat(source, ": listing stopped"));
    }
    for (ListedObject& o : page->objects) listed.push_back(std::move(o));
    token = page->truncated ? page->next_token : "";
  } while (!token.empty());
  absl::flat_hash_set<std::string> keys;
  for (const ListedObject& o : listed) keys.insert(o.key);
  std::vector<FoundObject> out;
  // Keys the mount cannot show are logged (the first few one by one, then
  // a count: a hostile listing must not flood the log).
  constexpr size_t kLoggedRefusals = 5;
  size_t refused = 0;
  for (ListedObject& o : listed) {
    KeyPlace place = PlaceListedKey(u.key, o.key);
    if (place.kind == KeyPlace::Kind::kElsewhere) continue;
    if (place.kind == KeyPlace::Kind::kRefused) {
      if (++refused <= kLoggedRefusals) {
        log::Warning(scheme, u.bucket, ": the listing of '", u.key, "' gave the key ",
                     QuoteKey(o.key), ": ", place.why, "; not shown");
      }
      continue;
    }
    std::string relative = std::move(place.relative);
    const std::string name = absl::StrCat(scheme, u.bucket, "/", o.key);
    FoundObject f;
    f.relative = std::move(relative);
    f.mtime = ParseObjectTime(o.last_modified);
    HttpObject::Listed object;
    object.url = absl::StrCat(base, "/", AwsUriEncode(o.key, false));
    object.name = name;
    object.size = o.size;
    object.etag = o.etag;
    object.neighbours_listed = true;
    for (absl::string_view suffix : kBesideSuffixes) {
      if (keys.contains(absl::StrCat(o.key, suffix))) object.beside.emplace_back(suffix);
    }
    f.object = std::make_shared<HttpObject>(std::move(object), client_, signer, cache_);
    out.push_back(std::move(f));
  }
  if (refused > kLoggedRefusals) {
    log::Warning(source, ": ", refused, " keys of the listing not shown in all (",
                 refused - kLoggedRefusals, " more than those above)");
  }
  if (out.empty()) return absl::NotFoundError(absl::StrCat(source, ": no objects there"));
  return out;
}

}  // namespace tfrecordfs::objstore
