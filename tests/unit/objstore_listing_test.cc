// Object sources without a server: URL parsing, name@N, ListObjectsV2
// parsing (expat) and SigV4 against AWS's published examples. The requests
// themselves are tested against servers the test starts (tests/objstore).
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

// AWS's published examples ("Examples: Signature Calculations in AWS
// Signature Version 4", Amazon S3 API reference): the same credentials,
// time and bucket, with the signatures AWS gives.
const objstore::AwsCredentials kExampleKey = {"AKIAIOSFODNN7EXAMPLE",
                                              "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
constexpr char kExampleDate[] = "20130524T000000Z";

TEST(SigV4Test, AwsExampleGetObject) {
  objstore::SigV4Request r;
  r.method = "GET";
  r.host = "examplebucket.s3.amazonaws.com";
  r.path = "/test.txt";
  r.headers = {{"Range", "bytes=0-9"},
               {"x-amz-content-sha256", std::string(objstore::kEmptySha256)},
               {"x-amz-date", kExampleDate}};
  EXPECT_EQ(objstore::CanonicalRequest(r),
            "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
            "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
            "\nx-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(objstore::StringToSign(r, kExampleDate, "us-east-1", "s3"),
            "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  EXPECT_EQ(objstore::SigV4Authorization(kExampleKey, r, kExampleDate, "us-east-1", "s3"),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
            "aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature="
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4Test, AwsExampleListObjects) {
  objstore::SigV4Request r;
  r.method = "GET";
  r.host = "examplebucket.s3.amazonaws.com";
  r.path = "/";
  r.query = "prefix=J&max-keys=2";  // sorted by the signer
  r.headers = {{"x-amz-content-sha256", std::string(objstore::kEmptySha256)},
               {"x-amz-date", kExampleDate}};
  EXPECT_THAT(
      objstore::SigV4Authorization(kExampleKey, r, kExampleDate, "us-east-1", "s3"),
      HasSubstr("Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"));
}

TEST(SigV4Test, AwsExampleGetBucketLifecycle) {
  objstore::SigV4Request r;
  r.method = "GET";
  r.host = "examplebucket.s3.amazonaws.com";
  r.path = "/";
  r.query = "lifecycle";
  r.headers = {{"x-amz-content-sha256", std::string(objstore::kEmptySha256)},
               {"x-amz-date", kExampleDate}};
  EXPECT_THAT(
      objstore::SigV4Authorization(kExampleKey, r, kExampleDate, "us-east-1", "s3"),
      HasSubstr("Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"));
}

TEST(SigV4Test, UriEncodingAndSignerHeaders) {
  EXPECT_EQ(objstore::AwsUriEncode("a b/c~d_e.f-g+h=&?", false), "a%20b/c~d_e.f-g%2Bh%3D%26%3F");
  EXPECT_EQ(objstore::AwsUriEncode("a/b", true), "a%2Fb");
  EXPECT_EQ(objstore::Sha256Hex(""), objstore::kEmptySha256);
  objstore::SigV4Signer signer({"AKID", "SECRET", "TOKEN"}, "eu-west-1");
  auto headers =
      signer.Sign("GET", "http://127.0.0.1:9000/bucket/key?list-type=2", objstore::kEmptySha256);
  ASSERT_TRUE(headers.ok()) << headers.status();
  std::string all;
  for (const std::string& h : *headers) all += h + "\n";
  EXPECT_THAT(all, HasSubstr("x-amz-security-token: TOKEN\n"));
  EXPECT_THAT(all, HasSubstr("Credential=AKID/"));
  EXPECT_THAT(all, HasSubstr("/eu-west-1/s3/aws4_request,SignedHeaders=host;x-amz-content-sha256;"
                             "x-amz-date;x-amz-security-token,Signature="));
  EXPECT_THAT(all, ::testing::Not(HasSubstr("SECRET")));
  EXPECT_FALSE(signer.Sign("GET", "s3://bucket/key", objstore::kEmptySha256).ok());
}

TEST(SigV4Test, AwsExamplePutObjectSignsThePayload) {
  const std::string body = "Welcome to Amazon S3.";
  EXPECT_EQ(objstore::Sha256Hex(body),
            "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  objstore::SigV4Request r;
  r.method = "PUT";
  r.host = "examplebucket.s3.amazonaws.com";
  r.path = "/test%24file.text";
  r.payload_hash = objstore::Sha256Hex(body);
  r.headers = {{"date", "Fri, 24 May 2013 00:00:00 GMT"},
               {"x-amz-date", kExampleDate},
               {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
               {"x-amz-content-sha256", r.payload_hash}};
  EXPECT_THAT(
      objstore::SigV4Authorization(kExampleKey, r, kExampleDate, "us-east-1", "s3"),
      HasSubstr("Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"));
  // The signer sends the payload hash it signs.
  objstore::SigV4Signer signer({"AKID", "SECRET", ""}, "us-east-1");
  auto headers = signer.Sign("PUT", "http://127.0.0.1:9000/b/k.tfri", r.payload_hash);
  ASSERT_TRUE(headers.ok());
  EXPECT_THAT(*headers, ::testing::Contains("x-amz-content-sha256: " + r.payload_hash));
}

// ---- objstore/access.h: the environment and the AWS shared files ----

class AccessTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = tmp_.Join(name);
    std::ofstream(path) << text;
    return path;
  }
  objstore::Getenv Env() const {
    return [vars = vars_](const char* name) -> std::string {
      auto it = vars.find(name);
      return it == vars.end() ? "" : it->second;
    };
  }
  test::TempDir tmp_;
  // NO_GCE_CHECK: the same answers on a Compute Engine VM.
  std::map<std::string, std::string> vars_ = {{"HOME", tmp_.path()}, {"NO_GCE_CHECK", "true"}};
};

TEST_F(AccessTest, NothingConfiguredIsAnonymousAws) {
  auto a = objstore::ResolveS3Access({}, Env());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->signer, nullptr);
  EXPECT_EQ(a->region, "us-east-1");
  EXPECT_EQ(a->endpoint, "");
  EXPECT_THAT(a->signing, HasSubstr("anonymous"));
}

TEST_F(AccessTest, ProfilesFromTheSharedFiles) {
  tmp_.Subdir(".aws");
  Write(".aws/credentials",
        "[default]\naws_access_key_id = DEFAULTKEY\naws_secret_access_key = DEFAULTSECRET\n"
        "[dev]\naws_access_key_id = DEVKEY\naws_secret_access_key = DEVSECRET\n"
        "aws_session_token = DEVTOKEN\n");
  Write(".aws/config",
        "[default]\nregion = eu-west-1\n"
        "[profile dev]\nregion = eu-north-1\ns3 =\n  endpoint_url = http://127.0.0.1:9000/\n"
        "[profile cfgkeys]\naws_access_key_id = CFGKEY\naws_secret_access_key = CFGSECRET\n"
        "endpoint_url = https://r2.example\n");
  auto d = objstore::LoadAwsProfile(Env());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->name, "default");
  EXPECT_EQ(d->credentials.access_key_id, "DEFAULTKEY");
  EXPECT_EQ(d->region, "eu-west-1");
  EXPECT_THAT(d->credentials_from, HasSubstr(".aws/credentials"));

  vars_["AWS_PROFILE"] = "dev";
  auto a = objstore::ResolveS3Access({}, Env());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_NE(a->signer, nullptr);
  EXPECT_EQ(a->region, "eu-north-1");
  EXPECT_EQ(a->endpoint, "http://127.0.0.1:9000");  // the nested s3 endpoint_url
  EXPECT_THAT(a->signing, HasSubstr("[dev]"));
  EXPECT_THAT(a->signing, Not(HasSubstr("DEVSECRET")));
  auto headers = a->signer->Sign("GET", "http://127.0.0.1:9000/b/k", objstore::kEmptySha256);
  ASSERT_TRUE(headers.ok());
  EXPECT_THAT(*headers, ::testing::Contains("x-amz-security-token: DEVTOKEN"));

  // Keys in the config file, and its top-level endpoint_url.
  vars_["AWS_PROFILE"] = "cfgkeys";
  auto p = objstore::LoadAwsProfile(Env());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->credentials.access_key_id, "CFGKEY");
  EXPECT_EQ(p->s3_endpoint_url, "https://r2.example");

  // The environment wins over the profile, as with the AWS CLI.
  vars_["AWS_PROFILE"] = "dev";
  vars_["AWS_ACCESS_KEY_ID"] = "ENVKEY";
  vars_["AWS_SECRET_ACCESS_KEY"] = "ENVSECRET";
  vars_["AWS_REGION"] = "sa-east-1";
  vars_["AWS_ENDPOINT_URL"] = "127.0.0.1:7000";
  a = objstore::ResolveS3Access({}, Env());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->region, "sa-east-1");
  EXPECT_EQ(a->endpoint, "http://127.0.0.1:7000");
  EXPECT_THAT(a->signing, HasSubstr("AWS_ACCESS_KEY_ID"));
  headers = a->signer->Sign("GET", "http://127.0.0.1:7000/b/k", objstore::kEmptySha256);
  ASSERT_TRUE(headers.ok());
  EXPECT_THAT(*headers, Not(::testing::Contains("x-amz-security-token: DEVTOKEN")));

  // no_sign_request: anonymous, the profile's region and endpoint kept.
  vars_.erase("AWS_ACCESS_KEY_ID");
  vars_.erase("AWS_REGION");
  vars_.erase("AWS_ENDPOINT_URL");
  a = objstore::ResolveS3Access({.no_sign_request = true, .gcs_token_file = ""}, Env());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->signer, nullptr);
  EXPECT_EQ(a->region, "eu-north-1");
  EXPECT_THAT(a->signing, HasSubstr("no_sign_request"));
  vars_["AWS_NO_SIGN_REQUEST"] = "true";  // the variable still works
  a = objstore::ResolveS3Access({}, Env());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->signer, nullptr);
}

TEST_F(AccessTest, OverriddenFilesMissingProfilesAndWhatWeDoNotRun) {
  vars_["AWS_SHARED_CREDENTIALS_FILE"] = Write("creds", "[other]\naws_access_key_id = K\n");
  vars_["AWS_CONFIG_FILE"] =
      Write("conf",
            "[profile sso]\nsso_session = corp\nregion = us-west-1\n[services local]\n"
            "s3 =\n  endpoint_url = http://127.0.0.1:1234\n[profile svc]\nservices = local\n");
  vars_["AWS_PROFILE"] = "nope";
  auto missing = objstore::ResolveS3Access({}, Env());
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("'nope'"));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr(tmp_.Join("creds")));

  vars_["AWS_PROFILE"] = "sso";
  auto sso = objstore::ResolveS3Access({}, Env());
  ASSERT_FALSE(sso.ok());
  EXPECT_THAT(std::string(sso.status().message()), HasSubstr("sso_session"));
  EXPECT_THAT(std::string(sso.status().message()), HasSubstr("export-credentials"));
  auto anonymous =
      objstore::ResolveS3Access({.no_sign_request = true, .gcs_token_file = ""}, Env());
  ASSERT_TRUE(anonymous.ok()) << anonymous.status();
  EXPECT_EQ(anonymous->region, "us-west-1");

  vars_["AWS_PROFILE"] = "svc";
  auto svc = objstore::ResolveS3Access({}, Env());
  ASSERT_TRUE(svc.ok()) << svc.status();
  EXPECT_EQ(svc->endpoint, "http://127.0.0.1:1234");

  // A file that does not parse fails, naming it and the line only.
  vars_["AWS_CONFIG_FILE"] = Write("bad", "[profile svc]\naws_secret_access_key SECRETX\n");
  auto bad = objstore::ResolveS3Access({}, Env());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr(tmp_.Join("bad") + ":2"));
  EXPECT_THAT(std::string(bad.status().message()), Not(HasSubstr("SECRETX")));
}

TEST_F(AccessTest, GcsTokensHmacKeysAndAnonymous) {
  auto a = objstore::ResolveGcsAccess({}, Env());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->endpoint, "https://storage.googleapis.com");
  EXPECT_EQ(a->signer, nullptr);

  vars_["STORAGE_EMULATOR_HOST"] = "127.0.0.1:4443";
  vars_["GS_ACCESS_KEY_ID"] = "GOOGHMAC";
  vars_["GS_SECRET_ACCESS_KEY"] = "HMACSECRET";
  a = objstore::ResolveGcsAccess({}, Env());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->endpoint, "http://127.0.0.1:4443");
  ASSERT_NE(a->signer, nullptr);
  auto h = a->signer->Sign("GET", "http://127.0.0.1:4443/b/k", objstore::kEmptySha256);
  ASSERT_TRUE(h.ok());
  EXPECT_THAT(absl::StrJoin(*h, "\n"), HasSubstr("Credential=GOOGHMAC/"));
  EXPECT_THAT(absl::StrJoin(*h, "\n"), HasSubstr("/auto/s3/aws4_request"));

  vars_["GOOGLE_OAUTH_ACCESS_TOKEN"] = "ya29.envtoken";  // a token wins over HMAC keys
  a = objstore::ResolveGcsAccess({}, Env());
  ASSERT_TRUE(a.ok()) << a.status();
  h = a->signer->Sign("GET", "http://127.0.0.1:4443/b/k", objstore::kEmptySha256);
  ASSERT_TRUE(h.ok());
  EXPECT_THAT(*h, ElementsAre("Authorization: Bearer ya29.envtoken"));
  EXPECT_THAT(a->signing, Not(HasSubstr("ya29")));

  const std::string file = Write("token", "ya29.filetoken\n");
  a = objstore::ResolveGcsAccess({.no_sign_request = false, .gcs_token_file = file},
                                 Env());  // the file wins over both
  ASSERT_TRUE(a.ok()) << a.status();
  h = a->signer->Sign("GET", "http://127.0.0.1:4443/b/k", objstore::kEmptySha256);
  ASSERT_TRUE(h.ok());
  EXPECT_THAT(*h, ElementsAre("Authorization: Bearer ya29.filetoken"));

  a = objstore::ResolveGcsAccess({.no_sign_request = true, .gcs_token_file = file}, Env());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->signer, nullptr);
  EXPECT_FALSE(objstore::ResolveGcsAccess(
                   {.no_sign_request = false, .gcs_token_file = tmp_.Join("absent")}, Env())
                   .ok());
}

TEST(BearerTest, TokenFileIsReadAgainWhenItChanges) {
  test::TempDir tmp;
  const std::string path = tmp.Join("token");
  std::ofstream(path) << "  first-token\n";
  auto signer = objstore::BearerTokenSigner::FromFile(path);
  ASSERT_TRUE(signer.ok()) << signer.status();
  const auto sign = [&]() -> std::string {
    auto h = (*signer)->Sign("GET", "https://storage.googleapis.com/b/k", objstore::kEmptySha256);
    EXPECT_TRUE(h.ok()) << h.status();
    return h.ok() && h->size() == 1 ? h->front() : "";
  };
  EXPECT_EQ(sign(), "Authorization: Bearer first-token");
  // Replaced by rename, as a refresh writing a temp file does.
  std::ofstream(path + ".new") << "second-token\n";
  ASSERT_EQ(::rename((path + ".new").c_str(), path.c_str()), 0);
  EXPECT_EQ(sign(), "Authorization: Bearer second-token");
  // Rewritten in place with a longer token.
  std::ofstream(path, std::ios::trunc) << "third-token-longer\n";
  EXPECT_EQ(sign(), "Authorization: Bearer third-token-longer");
  // Truncated by a refresh in progress: the last token goes on.
  std::ofstream(path, std::ios::trunc).flush();
  EXPECT_EQ(sign(), "Authorization: Bearer third-token-longer");
  // Gone: an error naming the file, never a token.
  ASSERT_EQ(::unlink(path.c_str()), 0);
  auto gone = (*signer)->Sign("GET", "https://x/b/k", objstore::kEmptySha256);
  ASSERT_FALSE(gone.ok());
  EXPECT_THAT(std::string(gone.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(gone.status().message()), Not(HasSubstr("token-longer")));
  // Empty, or two words, from the start: refused.
  std::ofstream(path) << "\n";
  EXPECT_FALSE(objstore::BearerTokenSigner::FromFile(path).ok());
  std::ofstream(path, std::ios::trunc) << "two words\n";
  EXPECT_FALSE(objstore::BearerTokenSigner::FromFile(path).ok());
}

}  // namespace
}  // namespace tfrecordfs
