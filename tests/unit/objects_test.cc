// Object sources without a server: URL parsing, name@N, ListObjectsV2
// parsing (expat) and SigV4 against AWS's published examples. The requests
// themselves are tested against servers the test starts (tests/objstore).
#include "tfrecordfs/scan/objects.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tfrecordfs/source/sigv4.h"

namespace tfrecordfs {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ObjectUrlTest, Schemes) {
  EXPECT_TRUE(scan::IsObjectUrl("s3://b/p"));
  EXPECT_TRUE(scan::IsObjectUrl("gs://b"));
  EXPECT_TRUE(scan::IsObjectUrl("https://h/x"));
  EXPECT_TRUE(scan::IsObjectUrl("http://127.0.0.1:8/x"));
  EXPECT_FALSE(scan::IsObjectUrl("/data/s3://x"));
  EXPECT_FALSE(scan::IsObjectUrl("s3:/b"));
  EXPECT_FALSE(scan::IsObjectUrl("relative/dir"));

  auto s3 = scan::ParseObjectUrl("s3://bucket/train/x-00000-of-00002");
  ASSERT_TRUE(s3.ok()) << s3.status();
  EXPECT_EQ(s3->scheme, scan::ObjectUrl::Scheme::kS3);
  EXPECT_EQ(s3->bucket, "bucket");
  EXPECT_EQ(s3->key, "train/x-00000-of-00002");
  auto gs = scan::ParseObjectUrl("gs://tfds-data");
  ASSERT_TRUE(gs.ok());
  EXPECT_EQ(gs->scheme, scan::ObjectUrl::Scheme::kGcs);
  EXPECT_EQ(gs->bucket, "tfds-data");
  EXPECT_EQ(gs->key, "");
  auto http = scan::ParseObjectUrl("https://host:8443/a/b.tfrecord");
  ASSERT_TRUE(http.ok());
  EXPECT_EQ(http->scheme, scan::ObjectUrl::Scheme::kHttp);
  EXPECT_EQ(http->url, "https://host:8443/a/b.tfrecord");
}

TEST(ObjectUrlTest, RefusesWhatWouldLeakOrMeansNothing) {
  EXPECT_FALSE(scan::ParseObjectUrl("s3:///key").ok());
  EXPECT_FALSE(scan::ParseObjectUrl("https:///x").ok());
  EXPECT_FALSE(scan::ParseObjectUrl("ftp://h/x").ok());
  // Credentials in a URL would end up in logs and in /proc/mounts.
  auto cred = scan::ParseObjectUrl("https://user:secret@host/x");
  ASSERT_FALSE(cred.ok());
  EXPECT_THAT(std::string(cred.status().message()), ::testing::Not(HasSubstr("secret")));
}

TEST(ExpandShardSpecTest, TfdsNames) {
  auto one = scan::ExpandShardSpec("https://h/d/mnist-train.tfrecord@3");
  ASSERT_TRUE(one.ok());
  EXPECT_THAT(*one, ElementsAre("https://h/d/mnist-train.tfrecord-00000-of-00003",
                                "https://h/d/mnist-train.tfrecord-00001-of-00003",
                                "https://h/d/mnist-train.tfrecord-00002-of-00003"));
  auto wide = scan::ExpandShardSpec("https://h/x@100000");
  ASSERT_TRUE(wide.ok());
  EXPECT_EQ(wide->back(), "https://h/x-099999-of-100000");
  auto plain = scan::ExpandShardSpec("https://h/x.tfrecord");
  ASSERT_TRUE(plain.ok());
  EXPECT_THAT(*plain, ElementsAre("https://h/x.tfrecord"));
  // An '@' before the last '/' is not a shard count.
  auto dir = scan::ExpandShardSpec("https://h/v@2/x");
  ASSERT_TRUE(dir.ok());
  EXPECT_THAT(*dir, ElementsAre("https://h/v@2/x"));
  for (const char* bad : {"https://h/x@0", "https://h/x@", "https://h/x@-1", "https://h/x@3a",
                          "https://h/x@100001", "https://h/x@+3"}) {
    EXPECT_FALSE(scan::ExpandShardSpec(bad).ok()) << bad;
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
  auto page = scan::ParseListObjectsV2(kPage);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "train/a & b.tfrecord");
  EXPECT_EQ(page->objects[0].size, 434234u);
  EXPECT_EQ(page->objects[0].etag, "\"fba9dede5f27731c9771645a39863328\"");
  EXPECT_EQ(page->objects[1].etag, "\"abc-2\"");
  EXPECT_EQ(page->objects[1].size, 0u);
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
  EXPECT_EQ(scan::ParseObjectTime(page->objects[0].last_modified), 1255369830);
  EXPECT_EQ(scan::ParseObjectTime("Mon, 12 Oct 2009 17:50:30 GMT"), 1255369830);
  EXPECT_EQ(scan::ParseObjectTime("yesterday"), 0);
}

TEST(ListObjectsV2Test, LastPageAndEmptyBucket) {
  auto page = scan::ParseListObjectsV2(
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
    EXPECT_FALSE(scan::ParseListObjectsV2(bad).ok()) << bad;
  }
}

// AWS's published examples ("Examples: Signature Calculations in AWS
// Signature Version 4", Amazon S3 API reference): the same credentials,
// time and bucket, with the signatures AWS gives.
const source::AwsCredentials kExampleKey = {"AKIAIOSFODNN7EXAMPLE",
                                            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
constexpr char kExampleDate[] = "20130524T000000Z";

TEST(SigV4Test, AwsExampleGetObject) {
  source::SigV4Request r;
  r.method = "GET";
  r.host = "examplebucket.s3.amazonaws.com";
  r.path = "/test.txt";
  r.headers = {{"Range", "bytes=0-9"},
               {"x-amz-content-sha256", std::string(source::kEmptySha256)},
               {"x-amz-date", kExampleDate}};
  EXPECT_EQ(source::CanonicalRequest(r),
            "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
            "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
            "\nx-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(source::StringToSign(r, kExampleDate, "us-east-1", "s3"),
            "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  EXPECT_EQ(source::SigV4Authorization(kExampleKey, r, kExampleDate, "us-east-1", "s3"),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
            "aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature="
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4Test, AwsExampleListObjects) {
  source::SigV4Request r;
  r.method = "GET";
  r.host = "examplebucket.s3.amazonaws.com";
  r.path = "/";
  r.query = "prefix=J&max-keys=2";  // sorted by the signer
  r.headers = {{"x-amz-content-sha256", std::string(source::kEmptySha256)},
               {"x-amz-date", kExampleDate}};
  EXPECT_THAT(
      source::SigV4Authorization(kExampleKey, r, kExampleDate, "us-east-1", "s3"),
      HasSubstr("Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"));
}

TEST(SigV4Test, AwsExampleGetBucketLifecycle) {
  source::SigV4Request r;
  r.method = "GET";
  r.host = "examplebucket.s3.amazonaws.com";
  r.path = "/";
  r.query = "lifecycle";
  r.headers = {{"x-amz-content-sha256", std::string(source::kEmptySha256)},
               {"x-amz-date", kExampleDate}};
  EXPECT_THAT(
      source::SigV4Authorization(kExampleKey, r, kExampleDate, "us-east-1", "s3"),
      HasSubstr("Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"));
}

TEST(SigV4Test, UriEncodingAndSignerHeaders) {
  EXPECT_EQ(source::AwsUriEncode("a b/c~d_e.f-g+h=&?", false), "a%20b/c~d_e.f-g%2Bh%3D%26%3F");
  EXPECT_EQ(source::AwsUriEncode("a/b", true), "a%2Fb");
  EXPECT_EQ(source::Sha256Hex(""), source::kEmptySha256);
  source::SigV4Signer signer({"AKID", "SECRET", "TOKEN"}, "eu-west-1");
  auto headers = signer.Sign("GET", "http://127.0.0.1:9000/bucket/key?list-type=2");
  ASSERT_TRUE(headers.ok()) << headers.status();
  std::string all;
  for (const std::string& h : *headers) all += h + "\n";
  EXPECT_THAT(all, HasSubstr("x-amz-security-token: TOKEN\n"));
  EXPECT_THAT(all, HasSubstr("Credential=AKID/"));
  EXPECT_THAT(all, HasSubstr("/eu-west-1/s3/aws4_request,SignedHeaders=host;x-amz-content-sha256;"
                             "x-amz-date;x-amz-security-token,Signature="));
  EXPECT_THAT(all, ::testing::Not(HasSubstr("SECRET")));
  EXPECT_FALSE(signer.Sign("GET", "s3://bucket/key").ok());
}

}  // namespace
}  // namespace tfrecordfs
