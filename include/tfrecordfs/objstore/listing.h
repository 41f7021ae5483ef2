// SOURCEs that are objects rather than local paths: s3://BUCKET/PREFIX,
// gs://BUCKET/PREFIX, and http(s)://HOST/PATH (one object; `name@N` is the
// N shards name-00000-of-0000N ... as TFDS names them).
//
// Listing happens once (at mount, or when a toolbox command starts): a
// bucket prefix with ListObjectsV2 (paged; GCS's XML API answers the same
// request), an http(s) object with one HEAD (or, where HEAD gives no
// length, a one-byte ranged GET). Each object keeps its size and ETag; no
// LIST or HEAD is sent afterwards (objstore/http.h: reads are ranged GETs
// pinned to the ETag).
//
// Where requests go, and how they are signed: objstore/access.h (the
// environment, the AWS shared files, ObjectOptions), resolved at each
// List() of a bucket.
//
// A bucket listing also tells each object which objects are named like it
// plus a suffix (`X.tfri` beside `X`: HttpObject::Listed::beside), so that
// the index store reads an index kept beside an object without a request
// for the objects that have none.
//
// Thread-safety: the functions are pure or read the environment once per
// call; an ObjectLister is safe to use from several threads.
#ifndef TFRECORDFS_OBJSTORE_LISTING_H_
#define TFRECORDFS_OBJSTORE_LISTING_H_

#include <time.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/objstore/access.h"
#include "tfrecordfs/objstore/http.h"
#include "tfrecordfs/source/block_cache.h"

namespace tfrecordfs::objstore {

// True for a SOURCE that names objects: s3://, gs://, http://, https://.
bool IsObjectUrl(absl::string_view source);

struct ObjectUrl {
  enum class Scheme { kHttp, kS3, kGcs };
  Scheme scheme = Scheme::kHttp;
  std::string bucket;  // s3, gs
  std::string key;     // s3, gs: the key or prefix (no leading '/'); may be ""
  std::string url;     // http(s): the URL as given
};
// InvalidArgument naming the source for an unknown scheme, an empty bucket
// or host, or a URL with user:password@ (credentials come from the
// environment, never from a URL that would be logged).
absl::StatusOr<ObjectUrl> ParseObjectUrl(absl::string_view source);

// `.../name@N` (N >= 1): the N URLs .../name-00000-of-0000N (five digits,
// or more when N needs them); any other URL: itself. InvalidArgument for
// an `@` followed by something other than a positive count up to 100000.
absl::StatusOr<std::vector<std::string>> ExpandShardSpec(absl::string_view url);

struct ListedObject {
  std::string key;
  uint64_t size = 0;
  std::string etag;           // with its quotes
  std::string last_modified;  // as the server wrote it
};
struct ListPage {
  std::vector<ListedObject> objects;
  bool truncated = false;
  std::string next_token;  // NextContinuationToken
};
// Parses a ListObjectsV2 response body (xml.h). DataLoss for XML that
// does not parse or lacks <ListBucketResult>; a truncated page without a
// continuation token is DataLoss too (we would loop), as is a token longer
// than kMaxListText. A <Key> is kept up to kMaxListText bytes (a longer one
// is cut there, and so refused by PlaceListedKey: S3 keys have at most
// kMaxKeyBytes).
absl::StatusOr<ListPage> ParseListObjectsV2(absl::string_view xml);
inline constexpr size_t kMaxListText = 4096;
inline constexpr size_t kMaxKeyBytes = 1024;

// What a listing may cost before it is stopped with an error: a server
// cannot make us list forever (a continuation token that repeats, tokens
// that keep changing) nor hold unbounded keys.
struct ListingLimits {
  size_t max_pages = 10000;
  size_t max_keys = 500000;
  uint64_t max_key_bytes = uint64_t{128} << 20;
};
// Counts the pages of one listing. Not thread-safe (one listing's loop).
class ListingBudget {
 public:
  explicit ListingBudget(ListingLimits limits = {}) : limits_(limits) {}
  // Takes the page just parsed, before its objects are kept. Errors (naming
  // the pages and keys so far): DataLoss for a page whose continuation
  // token an earlier page gave (the listing would never end),
  // ResourceExhausted beyond a limit.
  absl::Status Take(const ListPage& page);
  size_t pages() const { return pages_; }
  size_t keys() const { return keys_; }

 private:
  const ListingLimits limits_;
  size_t pages_ = 0, keys_ = 0;
  uint64_t key_bytes_ = 0;
  absl::flat_hash_set<std::string> tokens_;  // given so far
};

// Where a key of a listing of `prefix` (ObjectUrl::key) shows below the
// SOURCE, or why it does not. A "PREFIX" that is not a folder ("" or
// ending in '/') lists the object of that key (shown by its base name) and
// the folder "PREFIX/".
struct KeyPlace {
  enum class Kind {
    kShown,      // at `relative`
    kElsewhere,  // under a sibling of the prefix ("PREFIX2/..."), or a folder marker ("dir/")
    kRefused,    // `why`: not under the prefix asked for, longer than kMaxKeyBytes, an
                 // empty, "." or ".." part, a part longer than NAME_MAX
  };
  Kind kind = Kind::kRefused;
  std::string relative;
  std::string why;
};
KeyPlace PlaceListedKey(absl::string_view prefix, absl::string_view key);

// How messages and logs name a SOURCE: an http(s) URL without its query
// string (RedactUrl: a presigned URL's credentials are there), any
// other SOURCE as it is.
std::string RedactSource(absl::string_view source);

// Seconds since the epoch of an ISO 8601 time ("2009-10-12T17:50:30.000Z",
// listings) or an HTTP date ("Wed, 21 Oct 2015 07:28:00 GMT", HEAD); 0 when
// it is neither.
int64_t ParseObjectTime(absl::string_view text);

// The ctime an object is shown with (st_ctim): a fingerprint of its ETag
// (FNV-1a), by which a stored index of an object (the cache, index_dir,
// beside it) is tied to that object: another ETag, another stamp.
timespec EtagStamp(absl::string_view etag);

// An object found under a SOURCE, named relative to it.
struct FoundObject {
  // Where a mount shows it below the SOURCE's place ("train/x.tfrecord"; a
  // single object: its base name).
  std::string relative;
  int64_t mtime = 0;  // seconds
  std::shared_ptr<const HttpObject> object;
};

class ObjectLister {
 public:
  // `cache` (may be null) keeps the fetched bytes of every object listed;
  // `options` and `env` say how buckets are reached (access.h).
  explicit ObjectLister(std::shared_ptr<source::BlockCache> cache, ObjectOptions options = {},
                        Getenv env = ProcessEnv);

  // Lists `source` (IsObjectUrl). Errors name the source and, for a failed
  // request, the HTTP status and the server's message (and, for 401 and
  // 403, how the requests were signed); NotFound when nothing is there;
  // the errors of Resolve*Access (a missing AWS profile...).
  absl::StatusOr<std::vector<FoundObject>> List(const std::string& source) const;

 private:
  absl::StatusOr<std::vector<FoundObject>> ListBucket(const std::string& source,
                                                      const ObjectUrl& url) const;
  absl::StatusOr<FoundObject> Head(const std::string& url) const;

  std::shared_ptr<const HttpClient> client_;
  std::shared_ptr<source::BlockCache> cache_;
  const ObjectOptions options_;
  const Getenv env_;
};

}  // namespace tfrecordfs::objstore

#endif  // TFRECORDFS_OBJSTORE_LISTING_H_
