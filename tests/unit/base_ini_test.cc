// The INI reader of the AWS shared files (base/ini.h): configparser's
// rules as botocore uses them, nested values, long lines, and errors that
// name the line but never echo it (these files hold secrets).
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tfrecordfs/base/ini.h"

namespace tfrecordfs {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(IniTest, SectionsKeysAndComments) {
  auto ini = ParseIni(
      "# comment\n"
      "; another\n"
      "[default]\n"
      "aws_access_key_id = AKID\n"
      "Region=eu-west-1\r\n"
      "output : json\n"
      "\n"
      "[profile dev]\n"
      "  region = us-west-2  \n"
      "region = ap-south-1 ; not a comment\n",
      "config");
  ASSERT_TRUE(ini.ok()) << ini.status();
  EXPECT_EQ(ini->at("default").at("aws_access_key_id"), "AKID");
  EXPECT_EQ(ini->at("default").at("region"), "eu-west-1");  // keys lower-cased, CR dropped
  EXPECT_EQ(ini->at("default").at("output"), "json");
  // The last of a key given twice wins; no inline comments (configparser).
  EXPECT_EQ(ini->at("profile dev").at("region"), "ap-south-1 ; not a comment");
  EXPECT_EQ(ini->size(), 2u);
}

TEST(IniTest, NestedValuesAsTheAwsFilesWriteThem) {
  auto ini = ParseIni(
      "[profile minio]\n"
      "s3 =\n"
      "  endpoint_url = http://127.0.0.1:9000\n"
      "  addressing_style = path\n"
      "region = local\n",
      "config");
  ASSERT_TRUE(ini.ok()) << ini.status();
  const IniSection& p = ini->at("profile minio");
  EXPECT_EQ(p.at("region"), "local");
  const IniSection nested = ParseNestedIni(p.at("s3"));
  EXPECT_EQ(nested.at("endpoint_url"), "http://127.0.0.1:9000");
  EXPECT_EQ(nested.at("addressing_style"), "path");
}

TEST(IniTest, LongLinesAreKeptWhole) {
  // Session tokens run past a thousand bytes (Debian's libinih cuts at 200).
  const std::string token(3000, 'T');
  auto ini = ParseIni("[default]\naws_session_token = " + token + "\nregion = x\n", "credentials");
  ASSERT_TRUE(ini.ok()) << ini.status();
  EXPECT_EQ(ini->at("default").at("aws_session_token"), token);
  EXPECT_EQ(ini->at("default").at("region"), "x");
}

TEST(IniTest, ErrorsNameTheLineButNotItsText) {
  auto before = ParseIni("aws_secret_access_key = SECRETVALUE\n", "creds");
  ASSERT_FALSE(before.ok());
  EXPECT_THAT(std::string(before.status().message()), HasSubstr("creds:1"));
  EXPECT_THAT(std::string(before.status().message()), Not(HasSubstr("SECRETVALUE")));
  auto garbage = ParseIni("[default]\n\nSECRETVALUE\n", "creds");
  ASSERT_FALSE(garbage.ok());
  EXPECT_THAT(std::string(garbage.status().message()), HasSubstr("creds:3"));
  EXPECT_THAT(std::string(garbage.status().message()), Not(HasSubstr("SECRETVALUE")));
  EXPECT_FALSE(ParseIni("[default\n", "x").ok());
}

TEST(IniTest, MissingFileIsNotFound) {
  EXPECT_TRUE(absl::IsNotFound(ReadIniFile("/nonexistent/tfrecordfs/ini").status()));
}

}  // namespace
}  // namespace tfrecordfs
