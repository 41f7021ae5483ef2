// serialize_tensor values and SequenceExamples through real mounts:
//   * `tfrecordfs-gen tensors`: every array file the generator's MANIFEST.txt
//     lists is decoded (PNG with libpng, .npy with the NPY reader, and with
//     numpy/PIL in a separate process when /usr/bin/python3 has them) and
//     compared with the generator's own element bytes; every file's stat size
//     equals the bytes read; PNGs read in odd-sized pieces equal whole reads,
//     with splice and without;
//   * `tfrecordfs-gen sequence`: the mounted tree is compared file by file
//     with a tree written out here by hand from the generator's spec.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "expectations.h"
#include "gtest/gtest.h"
#include "mount_harness.h"
#include "tfrecordfs/tensor/npy.h"
#include "tfrecordfs/tensor/png.h"

namespace tfrecordfs::mount_test {
namespace {

std::string Gen(const TempDir& tmp, const std::string& mode, const std::string& records) {
  const char* gen = std::getenv("TFRECORDFS_GEN");
  EXPECT_NE(gen, nullptr) << "$TFRECORDFS_GEN (the tfrecordfs-gen binary) is not set";
  if (gen == nullptr) return "";
  const std::string src = std::filesystem::canonical(tmp.Subdir(mode)).string();
  CommandResult r = Run({gen, mode, src, "--records", records});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return src;
}

// Reads a file in pieces of `chunk` bytes with pread.
std::string ReadInPieces(const std::string& path, size_t chunk) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0) << path;
  std::string out;
  std::string buf(chunk, '\0');
  for (;;) {
    const ssize_t n = ::pread(fd, buf.data(), chunk, static_cast<off_t>(out.size()));
    EXPECT_GE(n, 0);
    if (n <= 0) break;
    out.append(buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

struct ManifestLine {
  std::string record, path, descr, shape, data;
};

std::vector<ManifestLine> ParseManifest(const std::string& text) {
  std::vector<ManifestLine> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    EXPECT_EQ(f.size(), 5u) << line;
    if (f.size() != 5) continue;
    ManifestLine m{f[0], f[1], f[2], f[3], ""};
    if (f[4] != "-") m.data = absl::HexStringToBytes(f[4]);
    out.push_back(std::move(m));
  }
  return out;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i) absl::StrAppend(&out, i ? "," : "", shape[i]);
  return out.empty() ? "scalar" : out;
}

class TensorMountTest : public ::testing::Test {
 protected:
  void SetUp() override { TFRFS_SKIP_WITHOUT_FUSE(); }
  TempDir tmp_;
};

constexpr char kTensorShard[] = "tensors-00000-of-00001.tfrecord";

TEST_F(TensorMountTest, EveryArrayFileDecodesToTheGeneratorsElements) {
  const std::string src = Gen(tmp_, "tensors", "12");
  ASSERT_FALSE(src.empty());
  const std::vector<ManifestLine> manifest = ParseManifest(ReadWholeFile(src + "/MANIFEST.txt"));
  ASSERT_EQ(manifest.size(), 12u * 24);
  for (const std::vector<std::string>& opts :
       {std::vector<std::string>{}, std::vector<std::string>{"-o", "nosplice"}}) {
    SCOPED_TRACE(opts.empty() ? "splice" : "nosplice");
    Mount mount;
    const absl::Status err = mount.Start({src + "/" + kTensorShard}, opts);
    ASSERT_TRUE(err.ok()) << err;
    // Every file (sizes, bytes) against the layout of a direct read.
    const DirectShard direct = ReadShardDirectly(src + "/" + kTensorShard);
    ASSERT_EQ(direct.payloads.size(), 12u);
    ExpectedTree expected;
    expected[kTensorShard] = ExpectedNode{true, ""};
    for (uint64_t r = 0; r < 12; ++r) {
      AddRecordLayout(absl::StrCat(kTensorShard, "/", RecordDirName(r, 12)), *direct.payloads[r],
                      &expected);
    }
    const auto walked = WalkTree(mount.path(kTensorShard));
    EXPECT_EQ(CompareTrees(expected, walked, kTensorShard), 0u);

    // Independently of naming: each array file holds the generator's elements.
    for (const ManifestLine& m : manifest) {
      const std::string rel =
          absl::StrCat(std::string(2 - m.record.size(), '0'), m.record, "/", m.path);
      SCOPED_TRACE(rel);
      auto it = walked.find(rel);
      ASSERT_NE(it, walked.end());
      const std::string& file = it->second.content;
      absl::StatusOr<tensor::Tensor> t = absl::UnknownError("");
      if (absl::EndsWith(m.path, ".png")) {
        t = tensor::DecodePng(file);
        ASSERT_TRUE(t.ok()) << t.status();
        EXPECT_EQ(m.data, t->materialized);
        // PNG's geometry: [H,W] and [H,W,1] both decode to one channel.
        std::vector<int64_t> want;
        for (absl::string_view d : absl::StrSplit(m.shape, ',')) {
          int64_t v;
          ASSERT_TRUE(absl::SimpleAtoi(d, &v));
          want.push_back(v);
        }
        if (want.size() == 2) want.push_back(1);
        EXPECT_EQ(ShapeText(want), ShapeText(t->shape));
        EXPECT_EQ(m.descr, t->info().descr);
        // Odd-sized reads cross IDAT chunk, CRC and adler32 boundaries.
        EXPECT_EQ(file, ReadInPieces(mount.path(absl::StrCat(kTensorShard, "/", rel)), 7));
      } else {
        t = tensor::ParseNpy(file);
        ASSERT_TRUE(t.ok()) << t.status();
        EXPECT_EQ(m.data, t->data(file));
        EXPECT_EQ(m.shape, ShapeText(t->shape));
        EXPECT_EQ(m.descr, t->info().descr);
        EXPECT_EQ(file, ReadInPieces(mount.path(absl::StrCat(kTensorShard, "/", rel)), 13));
      }
    }
    // A DT_STRING tensor keeps its bytes.
    EXPECT_EQ(walked.at("00/strings.bin").content,
              std::string("\x08\x07\x12\x04\x12\x02\x08\x01\x42\x03"
                          "abc",
                          13));
    std::string stop_err;
    EXPECT_EQ(mount.Stop(&stop_err), 0) << stop_err;
  }
}

TEST_F(TensorMountTest, NumpyAndPilReadTheArrays) {
  if (::access("/usr/bin/python3", X_OK) != 0 ||
      RunCommand({"/usr/bin/python3", "-c", "import numpy, PIL"}).exit_code != 0) {
    GTEST_SKIP() << "/usr/bin/python3 with numpy and PIL not found";
  }
  const std::string src = Gen(tmp_, "tensors", "12");
  ASSERT_FALSE(src.empty());
  Mount mount;
  const absl::Status err = mount.Start({src + "/" + kTensorShard});
  ASSERT_TRUE(err.ok()) << err;
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  ASSERT_NE(root, nullptr);
  CommandResult r =
      RunCommand({"/usr/bin/python3", std::string(root) + "/tests/mount/tensor/check_arrays.py",
                  mount.mountpoint(), src + "/MANIFEST.txt", kTensorShard});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("checked 288 bad 0"), std::string::npos) << r.out;
  std::string stop_err;
  EXPECT_EQ(mount.Stop(&stop_err), 0) << stop_err;
}

// The tree `tfrecordfs-gen sequence` records must show (src/gen/tensor_datasets.cc,
// SequencePayload), written out from its spec.
void AddSequenceRecord(const std::string& dir, uint64_t r, ExpectedTree* out) {
  auto d = [&](const std::string& rel) { (*out)[dir + rel] = ExpectedNode{true, ""}; };
  auto f = [&](const std::string& rel, std::string content) {
    (*out)[dir + rel] = ExpectedNode{false, std::move(content)};
  };
  d("");
  d("/context");
  f("/context/label", absl::StrCat(r, "\n"));
  f("/context/name.txt", absl::StrCat("clip", r, "\n"));
  d("/feature_lists");
  d("/feature_lists/empty");
  d("/feature_lists/frames");
  d("/feature_lists/frames/encoded");
  const uint64_t n = 3 + r % 12;
  for (uint64_t i = 0; i < n; ++i) {
    std::string step = absl::StrCat(i);
    if (n > 10 && i < 10) step = "0" + step;
    const std::string frame = absl::StrCat("\xff\xd8\xff frame ", r, " ", i);
    if (i == 2) {
      d("/feature_lists/frames/encoded/" + step);
      f("/feature_lists/frames/encoded/" + step + "/0.jpg", frame);
      f("/feature_lists/frames/encoded/" + step + "/1.jpg", frame);
    } else {
      f("/feature_lists/frames/encoded/" + step + ".jpg", frame);
    }
  }
  d("/feature_lists/mask");
  std::string mask(4, '\0');
  for (size_t i = 0; i < 4; ++i) mask[i] = static_cast<char>((i * 31 + r * 7 + 7 * 13) & 0xff);
  f("/feature_lists/mask/0.png",
    tensor::EncodePng(tensor::PngGeometryOf(tensor::DataType::kUint8, {2, 2}).value(), mask)
        .value());
  d("/feature_lists/rgb");
  // Float steps: whole numbers keep their decimal point (naming.h).
  f("/feature_lists/rgb/0", absl::StrCat("0.0\n", r, ".0\n"));
  f("/feature_lists/rgb/1", absl::StrCat("0.5\n", r, ".0\n"));
  d("/feature_lists/sparse");
  f("/feature_lists/sparse/0", "1\n");
  f("/feature_lists/sparse/1.none", "");
  f("/feature_lists/sparse/2", "3\n4\n");
  d("/feature_lists/tokens");
  f("/feature_lists/tokens/0.txt", "tok0\n");
  f("/feature_lists/tokens/1.txt", "tok1\n");
}

TEST_F(TensorMountTest, SequenceExamplesMatchTheirSpecFileByFile) {
  const std::string src = Gen(tmp_, "sequence", "14");
  ASSERT_FALSE(src.empty());
  const std::string shard = "sequence-00000-of-00001.tfrecord";
  Mount mount;
  const absl::Status err = mount.Start({src + "/" + shard});
  ASSERT_TRUE(err.ok()) << err;
  ExpectedTree expected;
  expected[shard] = ExpectedNode{true, ""};
  for (uint64_t r = 0; r < 14; ++r) {
    AddSequenceRecord(absl::StrCat(shard, "/", RecordDirName(r, 14)), r, &expected);
  }
  const auto walked = WalkTree(mount.path(shard));
  EXPECT_EQ(CompareTrees(expected, walked, shard), 0u);
  std::string stop_err;
  EXPECT_EQ(mount.Stop(&stop_err), 0) << stop_err;
}

}  // namespace
}  // namespace tfrecordfs::mount_test
