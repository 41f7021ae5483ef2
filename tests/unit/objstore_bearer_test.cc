// OAuth bearer tokens (objstore/bearer.h): a token file read again when it
// changes.
#include <stdio.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/objstore/bearer.h"
#include "tfrecordfs/objstore/sigv4.h"

namespace tfrecordfs {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

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
