// The image views' pure parts: which files of a layout are images and what
// the gallery calls them (naming/gallery.h), the class folder of a record
// and its escape, and the stored class grouping's encoding (class_groups.h).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/make_feature.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/record.h"
#include "tfrecordfs/example/sequence.h"
#include "tfrecordfs/naming/gallery.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/tensor/tensor.h"
#include "tfrecordfs/vfs/class_groups.h"

namespace tfrecordfs {
namespace {

using example::Feature;
using example::FeatureTable;
using example::Kind;
using ::testing::ElementsAre;

const std::string kJpeg = std::string("\xff\xd8\xff\xe0", 4) + std::string(60, 'j');
const std::string kPng = std::string("\x89PNG\r\n\x1a\n", 8) + std::string(40, '\x01');
const std::string kGif = "GIF89a" + std::string(20, 'g');

Feature Bytes(std::string name, std::vector<absl::string_view> values) {
  return test::MakeFeature(std::move(name), std::move(values));
}
Feature Int64s(std::string name, std::vector<int64_t> values) {
  return test::MakeFeature(std::move(name), std::move(values));
}
Feature Floats(std::string name, std::vector<float> values) {
  return test::MakeFeature(std::move(name), std::move(values));
}

// Encodes `features` as an Example and names its images after `stem`, as
// the gallery does (decoded again, so spans point into the payload).
std::vector<std::string> ImageNames(std::vector<Feature> features, absl::string_view stem) {
  FeatureTable t;
  t.features = std::move(features);
  std::sort(t.features.begin(), t.features.end(),
            [](const Feature& a, const Feature& b) { return a.name < b.name; });
  const std::string payload = example::EncodeExample(t);
  const example::DecodedRecord d = example::DecodeRecord(payload);
  EXPECT_EQ(d.kind, example::PayloadKind::kExample);
  const naming::Layout layout = naming::LayoutExample(d.example, payload);
  std::vector<std::string> out;
  for (const naming::GalleryImage& image : naming::GalleryImages(layout, stem)) {
    EXPECT_TRUE(naming::IsImageEntry(layout.entries[image.entry])) << image.name;
    out.push_back(image.name);
  }
  return out;
}

TEST(GalleryNamesTest, OneImageIsTheRecordsName) {
  EXPECT_THAT(ImageNames({Bytes("image/encoded", {kJpeg}), Int64s("label", {3}),
                          Bytes("image/format", {"jpeg"}), Floats("box", {0.5f})},
                         "0042"),
              ElementsAre("0042.jpg"));
}

TEST(GalleryNamesTest, NonImagesAreLeftOut) {
  EXPECT_THAT(ImageNames({Bytes("blob", {std::string("\x00\x01\x02", 3)}), Int64s("label", {3}),
                          Bytes("text", {"hello"})},
                         "7"),
              ElementsAre());
}

TEST(GalleryNamesTest, SeveralFeaturesAreNamedByFeatureWithSlashEscaped) {
  EXPECT_THAT(
      ImageNames(
          {Bytes("image/encoded", {kJpeg}), Bytes("image/segmentation/class/encoded", {kPng})},
          "002"),
      ElementsAre("002-image%2Fencoded.jpg", "002-image%2Fsegmentation%2Fclass%2Fencoded.png"));
}

TEST(GalleryNamesTest, ListValuesAreZeroPaddedSoNameOrderIsListOrder) {
  std::vector<absl::string_view> eleven(11, kGif);
  eleven[10] = kPng;
  const std::vector<std::string> names = ImageNames({Bytes("frames", eleven)}, "0009");
  ASSERT_EQ(names.size(), 11u);
  EXPECT_EQ(names[0], "0009-frames-00.gif");
  EXPECT_EQ(names[9], "0009-frames-09.gif");
  EXPECT_EQ(names[10], "0009-frames-10.png");
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

TEST(GalleryNamesTest, ATensorShownAsPngIsAnImage) {
  auto t = tensor::EncodeTensor(tensor::DataType::kUint8, {2, 3}, std::string(6, '\x10'));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(ImageNames({Bytes("image", {*t}), Bytes("mask", {kPng})}, "1"),
              ElementsAre("1-image.png", "1-mask.png"));
}

TEST(GalleryNamesTest, SequenceStepsArePadded) {
  example::SequenceTable seq;
  seq.context.features.push_back(Bytes("poster", {kJpeg}));
  example::FeatureList list;
  list.name = "frames";
  for (int i = 0; i < 3; ++i) list.steps.push_back(Bytes("", {kPng}));
  seq.lists.push_back(list);
  const std::string payload = example::EncodeSequenceExample(seq);
  const example::DecodedRecord d = example::DecodeRecord(payload);
  ASSERT_EQ(d.kind, example::PayloadKind::kSequenceExample);
  std::vector<std::string> names;
  for (const auto& image :
       naming::GalleryImages(naming::LayoutSequence(d.sequence, payload), "05")) {
    names.push_back(image.name);
  }
  EXPECT_THAT(
      names, ElementsAre("05-frames-0.png", "05-frames-1.png", "05-frames-2.png", "05-poster.jpg"));
}

TEST(EscapeNamePartTest, ReversibleWithUnescape) {
  for (const std::string& raw :
       {std::string("cat"), std::string("a/b"), std::string("100%"), std::string(".hidden"),
        std::string("tab\there"), std::string("x~"), std::string(""), std::string("\xff\xfe"),
        std::string("caf\xc3\xa9"), std::string("-3"), std::string("%none")}) {
    const std::string escaped = naming::EscapeNamePart(raw);
    EXPECT_EQ(escaped.find('/'), std::string::npos) << escaped;
    EXPECT_FALSE(escaped.empty());
    EXPECT_NE(escaped[0], '.');
    EXPECT_EQ(naming::Unescape(escaped), raw) << escaped;
  }
  EXPECT_EQ(naming::EscapeNamePart("a/b"), "a%2Fb");
  EXPECT_EQ(naming::EscapeNamePart(""), "%-");
}

TEST(EscapeNamePartTest, LongNamesAreCutWithAHash) {
  const std::string a(300, 'a'), b = std::string(299, 'a') + "b";
  const std::string ea = naming::EscapeNamePart(a), eb = naming::EscapeNamePart(b);
  EXPECT_LE(ea.size(), naming::kMaxNameBytes);
  EXPECT_NE(ea, eb);
  EXPECT_NE(ea.find("%~"), std::string::npos);
  // Cut never splits an escape.
  const std::string slashes(200, '/');
  const std::string es = naming::EscapeNamePart(slashes);
  EXPECT_LE(es.size(), naming::kMaxNameBytes);
  EXPECT_EQ(es.substr(0, es.find("%~")).size() % 3, 0u) << es;
}

std::string FolderOf(std::vector<Feature> features, absl::string_view feature) {
  FeatureTable t;
  t.features = std::move(features);
  const std::string payload = example::EncodeExample(t);
  return naming::ClassFolder(example::DecodeRecord(payload), feature);
}

TEST(ClassFolderTest, OneValueNamesTheFolder) {
  EXPECT_EQ(FolderOf({Int64s("label", {-3})}, "label"), "-3");
  EXPECT_EQ(FolderOf({Bytes("label", {"golden retriever"})}, "label"), "golden retriever");
  EXPECT_EQ(FolderOf({Bytes("label", {"a/b"})}, "label"), "a%2Fb");
  EXPECT_EQ(FolderOf({Bytes("label", {".."})}, "label"), "%2E.");
  EXPECT_EQ(FolderOf({Bytes("label", {""})}, "label"), "%-");
  EXPECT_EQ(FolderOf({Bytes("label", {"%none"})}, "label"), "%25none");
  EXPECT_EQ(FolderOf({Floats("label", {0.5f})}, "label"), "0.5");
}

TEST(ClassFolderTest, NoneAndSeveral) {
  EXPECT_EQ(FolderOf({Int64s("other", {1})}, "label"), naming::kNoValueFolder);
  EXPECT_EQ(FolderOf({Int64s("label", {})}, "label"), naming::kNoValueFolder);
  EXPECT_EQ(FolderOf({Int64s("label", {1, 2})}, "label"), naming::kSeveralValuesFolder);
  EXPECT_EQ(naming::ClassFolder(example::DecodeRecord("hello world"), "label"),
            naming::kNoValueFolder);
}

TEST(ClassFolderTest, SequenceExamplesUseTheirContext) {
  example::SequenceTable seq;
  seq.context.features.push_back(Int64s("label", {7}));
  example::FeatureList list;
  list.name = "frames";
  list.steps.push_back(Int64s("", {1}));
  seq.lists.push_back(list);
  const std::string payload = example::EncodeSequenceExample(seq);
  EXPECT_EQ(naming::ClassFolder(example::DecodeRecord(payload), "label"), "7");
}

index::ShardGrouping SampleGrouping() {
  index::ShardGrouping g;
  g.feature = "image/class/label";
  g.real_path = "/data/train-00000-of-00001";
  g.file_size = 123456;
  g.mtime_ns = 1700000000123456789;
  g.ctime_ns = 1700000000987654321;
  g.inode = 42;
  g.index_digest = 0x0123456789abcdef;
  g.folders = {"cat", "dog", "%none"};
  g.folder_of = {0, 1, 1, index::kNotGrouped, 2, 0};
  return g;
}

TEST(GroupingFileTest, RoundTrip) {
  const index::ShardGrouping g = SampleGrouping();
  auto back = index::DecodeGrouping(index::EncodeGrouping(g));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->feature, g.feature);
  EXPECT_EQ(back->real_path, g.real_path);
  EXPECT_EQ(back->file_size, g.file_size);
  EXPECT_EQ(back->mtime_ns, g.mtime_ns);
  EXPECT_EQ(back->ctime_ns, g.ctime_ns);
  EXPECT_EQ(back->inode, g.inode);
  EXPECT_EQ(back->index_digest, g.index_digest);
  EXPECT_EQ(back->folders, g.folders);
  EXPECT_EQ(back->folder_of, g.folder_of);
}

TEST(GroupingFileTest, EveryFlippedByteAndEveryCutIsRefused) {
  const std::string bytes = index::EncodeGrouping(SampleGrouping());
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] ^= 0x20;
    EXPECT_TRUE(absl::IsDataLoss(index::DecodeGrouping(bad).status())) << "byte " << i;
    EXPECT_FALSE(index::DecodeGrouping(bytes.substr(0, i)).ok()) << "cut at " << i;
  }
}

}  // namespace
}  // namespace tfrecordfs
