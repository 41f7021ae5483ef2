// One staged file (staging/staged_file.h): where it sits in its record
// (ClassifyStagedFile), the kind tag, what the unfinished last line of a
// numeric file can still become, and the names of steps and list items.
#include <fcntl.h>
#include <sys/xattr.h>

#include <cerrno>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/staging/staged_file.h"
#include "tfrecordfs/tensor/tensor.h"

namespace tfrecordfs::staging {
namespace {

using example::Kind;
using tensor::DataType;
using tensor::TensorType;

TEST(ClassifyStagedFile, ExampleAndSequencePlaces) {
  using R = StagedFile::Role;
  struct Case {
    const char* rel;
    bool sequence;
    R role;
    const char* key;
    const char* ext;
  };
  const Case cases[] = {
      {"rec/label", false, R::kNumeric, "label", ""},
      {"rec/image/encoded.png", false, R::kArray, "image/encoded", ".png"},
      {"rec/emb.npy", false, R::kArray, "emb", ".npy"},
      {"rec/photo.jpg", false, R::kOther, "", ""},
      {"rec/names.txt", false, R::kOther, "", ""},
      {"rec/frames/1.npy", false, R::kArray, "frames", ".npy"},
      {"rec/frames/1.jpg", false, R::kOther, "", ""},
      {"rec/frames/3", false, R::kOther, "", ""},  // a list item, not numeric
      {"rec/.label.swp", false, R::kOther, "", ""},
      {"loose", false, R::kOther, "", ""},  // not in a record folder
      {"rec/context/label", false, R::kNumeric, "context/label", ""},
      {"rec/context/label", true, R::kNumeric, "label", ""},
      {"rec/context/img.png", true, R::kArray, "img", ".png"},
      {"rec/feature_lists/rgb/07", false, R::kNumeric, "feature_lists/rgb", ""},
      {"rec/feature_lists/rgb/07", true, R::kNumeric, "feature_lists/rgb", ""},
      {"rec/feature_lists/frame/mask/3.png", true, R::kArray, "feature_lists/frame/mask", ".png"},
      {"rec/feature_lists/mask/03/1.npy", true, R::kArray, "feature_lists/mask", ".npy"},
      {"rec/feature_lists/%37/2", true, R::kNumeric, "feature_lists/7", ""},
      {"rec/feature_lists/tok/2.txt", true, R::kOther, "", ""},
      {"rec/feature_lists/tok/2.none", true, R::kOther, "", ""},
      {"rec/feature_lists/07", true, R::kOther, "", ""},  // a step outside a list
  };
  for (const Case& c : cases) {
    const StagedFile f = ClassifyStagedFile(c.rel, c.sequence);
    EXPECT_EQ(f.role, c.role) << c.rel;
    if (c.role == R::kOther) continue;
    EXPECT_EQ(f.feature, c.key) << c.rel;
    EXPECT_EQ(f.extension, c.ext) << c.rel;
  }
}

TEST(KindTag, RoundTripsAndRefusesUnknownText) {
  for (const TensorType& t :
       {TensorType{DataType::kUint8, {4, 5, 3}}, TensorType{DataType::kFloat, {}},
        TensorType{DataType::kUint16, {0, 7}}, TensorType{DataType::kBool, {2}}}) {
    const naming::FeatureType h = ParseKindTag(TensorTag(t));
    EXPECT_EQ(h.kind, Kind::kBytes) << TensorTag(t);
    EXPECT_EQ(h.tensors, std::vector<TensorType>{t}) << TensorTag(t);
  }
  EXPECT_EQ(TensorTag({DataType::kUint8, {4, 5, 3}}), "tensor:uint8:4,5,3");
  EXPECT_EQ(ParseKindTag("int64").kind, Kind::kInt64);
  EXPECT_EQ(ParseKindTag("float").kind, Kind::kFloat);
  for (const char* bad : {"", "bytes", "tensor:", "tensor:string:1", "tensor:uint8:1,,2",
                          "tensor:uint8:-1", "tensor:uint8", "tensor:uint8:x"}) {
    EXPECT_EQ(ParseKindTag(bad), naming::FeatureType{}) << bad;
  }
}

TEST(StepNames, IndexAndExtension) {
  EXPECT_EQ(StepIndex("07"), 7u);
  EXPECT_EQ(StepIndex("3.png"), 3u);
  EXPECT_EQ(StepIndex("000000000000000012"), 12u);
  EXPECT_EQ(StepIndex("0000000000000000012"), std::nullopt) << "more than 18 digits";
  EXPECT_EQ(StepIndex("x3"), std::nullopt);
  EXPECT_EQ(StepIndex(".png"), std::nullopt);
  EXPECT_EQ(ItemExtension("3.png"), ".png");
  EXPECT_EQ(ItemExtension("3.tar.gz"), ".tar.gz");
  EXPECT_EQ(ItemExtension("07"), "");
  EXPECT_TRUE(IsArrayExtension(".png"));
  EXPECT_TRUE(IsArrayExtension(".npy"));
  EXPECT_FALSE(IsArrayExtension(".jpg"));
}

TEST(KindTag, ReadFromTheFilesAttribute) {
  test::TempDir tmp("staging_staged_file_test");
  ASSERT_FALSE(tmp.path().empty());
  const std::string path = JoinPath(tmp.path(), "label");
  ASSERT_TRUE(WriteFileAtomically(path, "3\n").ok());
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  EXPECT_EQ(KindTagAt(path), naming::FeatureType{}) << "no tag yet";
  EXPECT_EQ(KindTagOf(fd.get()), naming::FeatureType{});
  const std::string tag = TensorTag({DataType::kUint8, {4, 5, 3}});
  if (::setxattr(path.c_str(), kKindXattr, tag.data(), tag.size(), 0) != 0) {
    ASSERT_EQ(errno, ENOTSUP);
    GTEST_SKIP() << "no user xattrs under " << tmp.path();
  }
  const naming::FeatureType want = ParseKindTag(tag);
  EXPECT_EQ(want.kind, Kind::kBytes);
  EXPECT_EQ(KindTagAt(path), want);
  EXPECT_EQ(KindTagOf(fd.get()), want);
}

}  // namespace
}  // namespace tfrecordfs::staging
