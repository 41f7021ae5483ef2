// One regression test per bug the fuzz targets and the hostile corpus found
// in the core (see tests/fuzz/README.md for the list). The inputs that
// found them are also replayed from regressions/<target>/.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/naming/feature_type.h"
#include "tfrecordfs/reference/wire.h"
#include "tfrecordfs/staging/record_folder.h"

namespace tfrecordfs {
namespace {

// Hand-built protobuf wire bytes (tfrecordfs/reference/wire.h).
using reference::wire::Len;
using reference::wire::MapEntry;
using reference::wire::VarintBytes;

// example_fuzzer (UBSan): an empty packed float run memcpy'd into the empty
// vector's null data().
TEST(FoundBugs, EmptyPackedFloatRun) {
  const std::string one_float = std::string("\x0d\x00\x00\x80\x3f", 5);  // unpacked 1.0f
  auto t =
      example::DecodeExample(Len(1, MapEntry("xs", Len(2, Len(1, "") + one_float + Len(1, "")))));
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->features.size(), 1u);
  EXPECT_EQ(t->features[0].kind, example::Kind::kFloat);
  EXPECT_EQ(t->features[0].floats, std::vector<float>{1.0f});
  t = example::DecodeExample(Len(1, MapEntry("xs", Len(2, Len(1, "")))));
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->features[0].floats.empty());
}

// hostile corpus: an ExampleListWithContext without its context parsed as an
// Example of kindless features named by serialized map entries (an empty
// record folder); it is shown raw now.
// example_fuzzer (issue 15, item 9): a length varint of 6 bytes, which
// protobuf refuses, decoded as an empty Example, so the mount showed an
// empty record folder instead of record.bin.
TEST(FoundBugs, SixByteLengthVarintIsNotAnExample) {
  auto t = example::DecodeExample(std::string("\x0a\x80\x80\x80\x80\x80\x00", 7));
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(absl::StrContains(t.status().message(), "length longer than 5 bytes")) << t.status();
  // Five bytes is protobuf's limit: an empty Features, as protobuf reads it.
  EXPECT_TRUE(example::DecodeExample(std::string("\x0a\x80\x80\x80\x80\x00", 6)).ok());
}

TEST(FoundBugs, ExampleListWithoutContextIsNotAnExample) {
  const std::string inner = Len(1, MapEntry("relevance", Len(3, Len(1, VarintBytes(1)))));
  auto t = example::DecodeExample(Len(1, inner) + Len(1, inner));
  EXPECT_FALSE(t.ok());
  EXPECT_TRUE(absl::StrContains(t.status().message(), "only kindless features")) << t.status();
  // Real Examples keep decoding: kindless values beside real ones (TFX), a
  // control byte in a name that has a value, all-kindless plain names.
  EXPECT_TRUE(
      example::DecodeExample(Len(1, MapEntry("a\x01", Len(3, "")) + MapEntry("b", ""))).ok());
  EXPECT_TRUE(
      example::DecodeExample(Len(1, MapEntry("missing", "") + MapEntry("tab\tname", ""))).ok());
  EXPECT_TRUE(example::DecodeExample(Len(1, MapEntry("", ""))).ok());
}

// staging_fuzzer: a staged file whose name is not UTF-8 once unescaped
// packed into a record no protobuf parser accepts as an Example.
TEST(FoundBugs, StagedNameThatIsNotUtf8IsRefused) {
  const test::TempDir tmp("tfrfs-found-bugs");
  ASSERT_FALSE(tmp.path().empty());
  const std::string& dir = tmp.path();
  for (const std::string& name : {std::string("%FF"), std::string("bad\xc3(.txt")}) {
    const std::string rec = dir + "/rec";
    ASSERT_EQ(::mkdir(rec.c_str(), 0755), 0);
    ASSERT_TRUE(WriteFileAtomically(rec + "/" + name, "1\n").ok());
    auto payload = staging::PayloadFromFolder(rec, naming::NoFeatureTypes());
    EXPECT_FALSE(payload.ok()) << name;
    EXPECT_TRUE(absl::StrContains(payload.status().message(), "not valid UTF-8"))
        << payload.status();
    ASSERT_EQ(::unlink((rec + "/" + name).c_str()), 0);
    // An escaped valid UTF-8 name is fine.
    ASSERT_TRUE(WriteFileAtomically(rec + "/%C3%A9t%C3%A9", "1\n").ok());
    auto ok = staging::PayloadFromFolder(rec, naming::NoFeatureTypes());
    ASSERT_TRUE(ok.ok()) << ok.status();
    auto t = example::DecodeExample(*ok);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t->features[0].name, "\xc3\xa9t\xc3\xa9");
    ASSERT_EQ(::unlink((rec + "/%C3%A9t%C3%A9").c_str()), 0);
    ASSERT_EQ(::rmdir(rec.c_str()), 0);
  }
}

}  // namespace
}  // namespace tfrecordfs
