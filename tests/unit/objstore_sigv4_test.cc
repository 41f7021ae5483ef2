// SigV4 (objstore/sigv4.h) against AWS's published examples, and the
// signer's headers.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tfrecordfs/objstore/sigv4.h"

namespace tfrecordfs {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

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

// S3 refuses x-amz-* headers that are not signed (UploadPartCopy's
// x-amz-copy-source, -range, -if-match): SignWith covers them, not others.
TEST(SigV4Test, SignWithSignsTheRequestsAmzHeaders) {
  objstore::SigV4Signer signer({"AKID", "SECRET", ""}, "us-east-1");
  auto headers = signer.SignWith(
      "PUT", "http://127.0.0.1:9000/b/k?partNumber=1&uploadId=U", objstore::kEmptySha256,
      {"x-amz-copy-source: b/k", "X-Amz-Copy-Source-Range: bytes=0-9", "If-Match: \"e\""});
  ASSERT_TRUE(headers.ok()) << headers.status();
  std::string all;
  for (const std::string& h : *headers) all += h + "\n";
  EXPECT_THAT(all, HasSubstr("SignedHeaders=host;x-amz-content-sha256;x-amz-copy-source;"
                             "x-amz-copy-source-range;x-amz-date,Signature="));
  // The request's own headers are sent by the caller, not returned again.
  EXPECT_THAT(all, ::testing::Not(HasSubstr("x-amz-copy-source:")));
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

}  // namespace
}  // namespace tfrecordfs
