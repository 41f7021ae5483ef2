// The one XML reader of object storage (objstore/xml.h): what handlers see,
// the first element of a name in the small replies, and documents refused.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tfrecordfs/objstore/xml.h"

namespace tfrecordfs::objstore {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Records every callback, text pieces joined per element.
class Recorder final : public XmlHandler {
 public:
  void Start(absl::string_view name) override { events.push_back(absl::StrCat("<", name)); }
  void Text(absl::string_view text) override {
    if (!events.empty() && events.back()[0] == '=') {
      events.back().append(text.data(), text.size());
    } else {
      events.push_back(absl::StrCat("=", text));
    }
  }
  void End(absl::string_view name) override { events.push_back(absl::StrCat(">", name)); }
  std::vector<std::string> events;
};

TEST(ParseXmlTest, HandlersSeeElementsAndTheirTextInOrder) {
  Recorder r;
  ASSERT_TRUE(ParseXml("<a><b>x &amp; y</b><s3:c/></a>", r).ok());
  // Names as written (a prefix kept), entities decoded.
  EXPECT_THAT(r.events, ElementsAre("<a", "<b", "=x & y", ">b", "<s3:c", ">s3:c", ">a"));
}

TEST(ParseXmlTest, ADocumentThatIsNotXmlIsDataLossNamingTheLine) {
  Recorder r;
  const absl::Status s = ParseXml("<a>\n<b></a>", r);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("line 2"));
  EXPECT_TRUE(absl::IsDataLoss(ParseXml("", r)));
  EXPECT_TRUE(absl::IsDataLoss(ParseXml("not xml", r)));
}

TEST(FindXmlElementTest, TheRootAndTheFirstElementOfAName) {
  auto x = FindXmlElement(
      "<InitiateMultipartUploadResult><Bucket>b</Bucket><UploadId>id-1</UploadId>"
      "<UploadId>id-2</UploadId></InitiateMultipartUploadResult>",
      "UploadId");
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_EQ(x->root, "InitiateMultipartUploadResult");
  EXPECT_TRUE(x->found);
  EXPECT_EQ(x->text, "id-1");
  // Absent: found is false, and the root is still known (an <Error> reply).
  auto none = FindXmlElement("<Error><Code>NoSuchUpload</Code></Error>", "UploadId");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->root, "Error");
  EXPECT_FALSE(none->found);
  EXPECT_FALSE(FindXmlElement("<Error>", "Code").ok());
}

TEST(FindXmlElementTest, ALongTextIsKeptUpToItsBound) {
  const std::string big(3 * XmlElement::kMaxText, 'k');
  auto x = FindXmlElement(absl::StrCat("<r><Key>", big, "</Key></r>"), "Key");
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_TRUE(x->found);
  // Pieces are appended while under the bound: at most one piece beyond it.
  EXPECT_GE(x->text.size(), XmlElement::kMaxText);
  EXPECT_LT(x->text.size(), big.size() + 1);
}

}  // namespace
}  // namespace tfrecordfs::objstore
