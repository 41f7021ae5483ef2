// Where bucket requests go and how they are signed (objstore/access.h):
// the environment, the AWS shared files, GCS tokens and HMAC keys.
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
#include "tfrecordfs/objstore/access.h"
#include "tfrecordfs/objstore/sigv4.h"

namespace tfrecordfs {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

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

}  // namespace
}  // namespace tfrecordfs
