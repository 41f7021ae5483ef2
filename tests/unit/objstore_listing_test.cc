// Object sources without a server (objstore/listing.h): URL parsing, name@N,
// ListObjectsV2 parsing (objstore/xml.h), the listing's budget, where keys
// show, redacted names. The requests themselves are tested against servers
// the test starts (tests/objstore).
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/objstore/bearer.h"
#include "tfrecordfs/objstore/http.h"
#include "tfrecordfs/objstore/listing.h"
#include "tfrecordfs/objstore/sigv4.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(ObjectUrlTest, Schemes) {
  EXPECT_TRUE(objstore::IsObjectUrl("s3://b/p"));
  EXPECT_TRUE(objstore::IsObjectUrl("gs://b"));
  EXPECT_TRUE(objstore::IsObjectUrl("https://h/x"));
  EXPECT_TRUE(objstore::IsObjectUrl("http://127.0.0.1:8/x"));
  EXPECT_FALSE(objstore::IsObjectUrl("/data/s3://x"));
  EXPECT_FALSE(objstore::IsObjectUrl("s3:/b"));
  EXPECT_FALSE(objstore::IsObjectUrl("relative/dir"));

  auto s3 = objstore::ParseObjectUrl("s3://bucket/train/x-00000-of-00002");
  ASSERT_TRUE(s3.ok()) << s3.status();
  EXPECT_EQ(s3->scheme, objstore::ObjectUrl::Scheme::kS3);
  EXPECT_EQ(s3->bucket, "bucket");
  EXPECT_EQ(s3->key, "train/x-00000-of-00002");
  auto gs = objstore::ParseObjectUrl("gs://tfds-data");
  ASSERT_TRUE(gs.ok());
  EXPECT_EQ(gs->scheme, objstore::ObjectUrl::Scheme::kGcs);
  EXPECT_EQ(gs->bucket, "tfds-data");
  EXPECT_EQ(gs->key, "");
  auto http = objstore::ParseObjectUrl("https://host:8443/a/b.tfrecord");
  ASSERT_TRUE(http.ok());
  EXPECT_EQ(http->scheme, objstore::ObjectUrl::Scheme::kHttp);
  EXPECT_EQ(http->url, "https://host:8443/a/b.tfrecord");
}

TEST(ObjectUrlTest, RefusesWhatWouldLeakOrMeansNothing) {
  EXPECT_FALSE(objstore::ParseObjectUrl("s3:///key").ok());
  EXPECT_FALSE(objstore::ParseObjectUrl("https:///x").ok());
  EXPECT_FALSE(objstore::ParseObjectUrl("ftp://h/x").ok());
  // Credentials in a URL would end up in logs and in /proc/mounts.
  auto cred = objstore::ParseObjectUrl("https://user:secret@host/x");
  ASSERT_FALSE(cred.ok());
  EXPECT_THAT(std::string(cred.status().message()), ::testing::Not(HasSubstr("secret")));
}

// Object sources count as remote storage: their mounts read ahead and walk
// in parts read ahead (issue 25).
TEST(ObjectUrlTest, ObjectSourcesAreRemoteStorage) {
  for (const char* url :
       {"s3://b/data", "gs://b", "https://h/x/shard-00000-of-00001", "http://127.0.0.1:9/b/k"}) {
    EXPECT_TRUE(source::OnRemoteStorage(std::string(url))) << url;
  }
  EXPECT_FALSE(source::OnRemoteStorage(std::string("/nonexistent/s3://b")));
}

TEST(ExpandShardSpecTest, TfdsNames) {
  auto one = objstore::ExpandShardSpec("https://h/d/mnist-train.tfrecord@3");
  ASSERT_TRUE(one.ok());
  EXPECT_THAT(*one, ElementsAre("https://h/d/mnist-train.tfrecord-00000-of-00003",
                                "https://h/d/mnist-train.tfrecord-00001-of-00003",
                                "https://h/d/mnist-train.tfrecord-00002-of-00003"));
  auto wide = objstore::ExpandShardSpec("https://h/x@100000");
  ASSERT_TRUE(wide.ok());
  EXPECT_EQ(wide->back(), "https://h/x-099999-of-100000");
  auto plain = objstore::ExpandShardSpec("https://h/x.tfrecord");
  ASSERT_TRUE(plain.ok());
  EXPECT_THAT(*plain, ElementsAre("https://h/x.tfrecord"));
  // An '@' before the last '/' is not a shard count.
  auto dir = objstore::ExpandShardSpec("https://h/v@2/x");
  ASSERT_TRUE(dir.ok());
  EXPECT_THAT(*dir, ElementsAre("https://h/v@2/x"));
  for (const char* bad : {"https://h/x@0", "https://h/x@", "https://h/x@-1", "https://h/x@3a",
                          "https://h/x@100001", "https://h/x@+3"}) {
    EXPECT_FALSE(objstore::ExpandShardSpec(bad).ok()) << bad;
  }
}

constexpr char kPage[] = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>bucket</Name><Prefix>train/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>
  <IsTruncated>true</IsTruncated>
  <Contents><Key>train/a &amp; b.tfrecord</Key><LastModified>2009-10-12T17:50:30.000Z</LastModified>
    <ETag>&quot;fba9dede5f27731c9771645a39863328&quot;</ETag><Size>434234</Size>
    <StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>train/c.tfrecord</Key><LastModified>2009-10-12T17:50:31.000Z</LastModified>
    <ETag>"abc-2"</ETag><Size>0</Size></Contents>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
</ListBucketResult>)";

TEST(ListObjectsV2Test, ParsesAPage) {
  auto page = objstore::ParseListObjectsV2(kPage);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "train/a & b.tfrecord");
  EXPECT_EQ(page->objects[0].size, 434234u);
  EXPECT_EQ(page->objects[0].etag, "\"fba9dede5f27731c9771645a39863328\"");
  EXPECT_EQ(page->objects[1].etag, "\"abc-2\"");
  EXPECT_EQ(page->objects[1].size, 0u);
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
  EXPECT_EQ(objstore::ParseObjectTime(page->objects[0].last_modified), 1255369830);
  EXPECT_EQ(objstore::ParseObjectTime("Mon, 12 Oct 2009 17:50:30 GMT"), 1255369830);
  EXPECT_EQ(objstore::ParseObjectTime("yesterday"), 0);
}

TEST(ListObjectsV2Test, LastPageAndEmptyBucket) {
  auto page = objstore::ParseListObjectsV2(
      "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_TRUE(page->objects.empty());
  EXPECT_FALSE(page->truncated);
}

TEST(ListObjectsV2Test, RefusesWhatItCannotTrust) {
  // Not XML, cut short, an error document, a size that is not a number, a
  // truncated page with no way to go on (we would list forever).
  for (const char* bad :
       {"", "not xml", "<ListBucketResult><Contents><Key>x</Key>",
        "<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>",
        "<ListBucketResult><Contents><Key>x</Key><Size>-1</Size></Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key>x</Key><Size>1e3</Size></Contents></ListBucketResult>",
        "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>"}) {
    EXPECT_FALSE(objstore::ParseListObjectsV2(bad).ok()) << bad;
  }
}

TEST(ListObjectsV2Test, LongKeysAreCutAndLongTokensRefused) {
  // A 15 MiB key is kept only up to kMaxListText bytes (and so refused by
  // PlaceListedKey); a continuation token that long cannot be sent back.
  const std::string huge(15 << 20, 'k');
  auto page = objstore::ParseListObjectsV2(
      absl::StrCat("<ListBucketResult><Contents><Key>ds/", huge, "</Key><Size>1</Size></Contents>",
                   "<Contents><Key>ds/ok</Key><Size>2</Size></Contents></ListBucketResult>"));
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key.size(), objstore::kMaxListText);
  EXPECT_EQ(objstore::PlaceListedKey("ds/", page->objects[0].key).kind,
            objstore::KeyPlace::Kind::kRefused);
  EXPECT_EQ(page->objects[1].key, "ds/ok");
  auto token = objstore::ParseListObjectsV2(absl::StrCat(
      "<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>",
      std::string(objstore::kMaxListText + 1, 't'), "</NextContinuationToken></ListBucketResult>"));
  EXPECT_FALSE(token.ok());
}

objstore::ListPage Page(size_t keys, absl::string_view token) {
  objstore::ListPage page;
  for (size_t k = 0; k < keys; ++k) page.objects.push_back({absl::StrCat("ds/", k), 1, "", ""});
  page.truncated = !token.empty();
  page.next_token = std::string(token);
  return page;
}

TEST(ListingBudgetTest, StopsAtARepeatedToken) {
  objstore::ListingBudget budget;
  EXPECT_TRUE(budget.Take(Page(2, "a")).ok());
  EXPECT_TRUE(budget.Take(Page(2, "b")).ok());
  const absl::Status again = budget.Take(Page(2, "a"));
  EXPECT_TRUE(absl::IsDataLoss(again)) << again;
  EXPECT_THAT(std::string(again.message()), HasSubstr("never end"));
  EXPECT_THAT(std::string(again.message()), HasSubstr("3 pages, 6 keys"));
  // The last page has no token to repeat.
  objstore::ListingBudget last;
  EXPECT_TRUE(last.Take(Page(1, "a")).ok());
  EXPECT_TRUE(last.Take(Page(1, "")).ok());
}

TEST(ListingBudgetTest, StopsAtThePageAndKeyCaps) {
  objstore::ListingBudget pages({.max_pages = 3, .max_keys = 1000, .max_key_bytes = 1 << 20});
  EXPECT_TRUE(pages.Take(Page(0, "1")).ok());
  EXPECT_TRUE(pages.Take(Page(0, "2")).ok());
  EXPECT_TRUE(absl::IsResourceExhausted(pages.Take(Page(0, "3"))));
  // A last page at the cap is fine: nothing more would be asked for.
  objstore::ListingBudget exact({.max_pages = 2, .max_keys = 1000, .max_key_bytes = 1 << 20});
  EXPECT_TRUE(exact.Take(Page(0, "1")).ok());
  EXPECT_TRUE(exact.Take(Page(0, "")).ok());
  objstore::ListingBudget keys({.max_pages = 100, .max_keys = 5, .max_key_bytes = 1 << 20});
  EXPECT_TRUE(keys.Take(Page(3, "1")).ok());
  EXPECT_TRUE(absl::IsResourceExhausted(keys.Take(Page(3, "2"))));
  objstore::ListingBudget bytes({.max_pages = 100, .max_keys = 100, .max_key_bytes = 10});
  EXPECT_TRUE(bytes.Take(Page(2, "1")).ok());  // "ds/0", "ds/1": 8 bytes
  EXPECT_TRUE(absl::IsResourceExhausted(bytes.Take(Page(1, "2"))));
}

TEST(PlaceListedKeyTest, ShowsKeysUnderThePrefixOnly) {
  using Kind = objstore::KeyPlace::Kind;
  const auto shown = [](absl::string_view prefix, absl::string_view key) {
    objstore::KeyPlace p = objstore::PlaceListedKey(prefix, key);
    return p.kind == Kind::kShown ? p.relative : absl::StrCat("<", int(p.kind), ">");
  };
  EXPECT_EQ(shown("ds/", "ds/train/a.tfrecord"), "train/a.tfrecord");
  EXPECT_EQ(shown("", "a/b"), "a/b");
  EXPECT_EQ(shown("ds", "ds"), "ds");
  EXPECT_EQ(shown("ds/x.tfrecord", "ds/x.tfrecord"), "x.tfrecord");
  EXPECT_EQ(shown("ds", "ds/a"), "a");
  // Another folder, and folder markers: not shown, not worth a word.
  EXPECT_EQ(objstore::PlaceListedKey("ds", "ds2/a").kind, Kind::kElsewhere);
  EXPECT_EQ(objstore::PlaceListedKey("ds/", "ds/sub/").kind, Kind::kElsewhere);
  EXPECT_EQ(objstore::PlaceListedKey("ds/", "ds/").kind, Kind::kElsewhere);
  // What a hostile listing sends: refused, with the reason.
  for (const auto& [prefix, key] : std::vector<std::pair<std::string, std::string>>{
           {"ds/", "zz/outside-prefix"},
           {"ds/", "../escape"},  // used to show as "escape", fetched as GET /escape
           {"ds/", "ds/../escape"},
           {"ds/", "ds/a/../../escape"},
           {"ds/", "ds/./a"},
           {"ds/", "ds/a//b"},
           {"ds/", "ds/../"},
           {"", "/a"},
           {"ds/", "ds/" + std::string(300, 'n')},
           {"ds/", "ds/" + std::string(1100, 'n')}}) {
    const objstore::KeyPlace p = objstore::PlaceListedKey(prefix, key);
    EXPECT_EQ(p.kind, Kind::kRefused) << key;
    EXPECT_FALSE(p.why.empty()) << key;
  }
  EXPECT_THAT(objstore::PlaceListedKey("ds/", "zz/outside-prefix").why, HasSubstr("prefix"));
  EXPECT_EQ(shown("ds/", "ds/" + std::string(255, 'n')), std::string(255, 'n'));
}

TEST(RedactTest, QueryStringsNeverReachNames) {
  const std::string presigned =
      "https://h.example/b/x.tfrecord?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Security-Token="
      "SECRETTOKEN&X-Amz-Signature=abcdef0123";
  EXPECT_EQ(objstore::RedactUrl(presigned), "https://h.example/b/x.tfrecord");
  EXPECT_EQ(objstore::RedactSource(presigned), "https://h.example/b/x.tfrecord");
  EXPECT_EQ(objstore::RedactUrl("http://h/a#frag"), "http://h/a");
  EXPECT_EQ(objstore::RedactUrl("http://h/a"), "http://h/a");
  // Not URLs: kept as they are (a local file may have a '?' in its name).
  EXPECT_EQ(objstore::RedactSource("/data/what?.tfrecord"), "/data/what?.tfrecord");
  EXPECT_EQ(objstore::RedactSource("s3://b/k"), "s3://b/k");
}

}  // namespace
}  // namespace tfrecordfs
