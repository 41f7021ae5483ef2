// Tensors and SequenceExamples staged through real mounts (issue 10, reverse):
//   * `cp -r` of every `tfrecordfs-gen tensors` record (every dtype and shape
//     class, .png and .npy views, a list of two tensors of different dtypes)
//     packs to the same bytes;
//   * arrays written into staging/ with numpy and PIL pack to the
//     TensorProtos of those arrays (skipped without /usr/bin/python3 with
//     numpy and PIL);
//   * bad arrays and bad numeric sequence steps are written and flagged
//     (issue 34, item 6) until written again; the kinds the mount checked
//     them as survive a restart with shards that no longer know the names;
//   * `cp -r` of `tfrecordfs-gen sequence` records packs feature by feature
//     to the same SequenceExamples.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "staging_util.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/sequence.h"
#include "tfrecordfs/tensor/npy.h"
#include "tfrecordfs/tensor/png.h"
#include "tfrecordfs/tensor/tensor.h"

namespace tfrecordfs::mount_test::staging_test {
namespace {

constexpr char kTensorShard[] = "tensors-00000-of-00001.tfrecord";
constexpr char kSequenceShard[] = "sequence-00000-of-00001.tfrecord";

// Runs `tfrecordfs-gen MODE` into a new folder of `s.src`; returns it.
std::string Gen(const Scratch& s, const std::string& mode, const std::string& records) {
  const char* gen = std::getenv("TFRECORDFS_GEN");
  EXPECT_NE(gen, nullptr) << "$TFRECORDFS_GEN (the tfrecordfs-gen binary) is not set";
  if (gen == nullptr) return "";
  const std::string dir = s.src + "/" + mode;
  std::filesystem::create_directories(dir);
  CommandResult r = Run({gen, mode, dir, "--records", records});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return dir;
}

struct Element {
  std::string record, feature;
  std::string item;  // "-" for a single value
};

std::string Hex(absl::string_view s) { return s.empty() ? "-" : absl::BytesToHexString(s); }

// "descr shape hex" of a serialized tensor, as write_arrays.py notes arrays.
std::string TensorText(absl::string_view proto) {
  auto t = tensor::DecodeTensor(proto);
  if (!t.ok()) return absl::StrCat("not a tensor: ", t.status().message());
  std::string shape;
  for (size_t i = 0; i < t->shape.size(); ++i) absl::StrAppend(&shape, i ? "," : "", t->shape[i]);
  return absl::StrCat(t->info().descr, " ", shape.empty() ? "scalar" : shape, " ",
                      Hex(t->data(proto)));
}

// Generates `n` records of tfrecordfs-gen's `kind` dataset (whose shard is
// `shard`), copies every record folder back through a mount and packs them
// with `prefix`, then calls `check` with each record as generated (read
// straight from the shard), as packed, and the folder it was copied from,
// and expects the two byte for byte equal (the generator's tensors come
// from tf.io.serialize_tensor, which is deterministic, and so is the
// Example encoding). Fails the test (fatally) when a count is off.
void CopyEveryRecordBack(
    Scratch& s, const std::string& kind, const std::string& shard, size_t n,
    const std::string& prefix,
    const std::function<void(const std::string& generated, const std::string& packed,
                             const std::string& from)>& check) {
  const std::string src = Gen(s, kind, absl::StrCat(n));
  ASSERT_FALSE(src.empty());
  const DirectShard direct = ReadShardDirectly(src + "/" + shard);
  ASSERT_EQ(direct.error, "");
  ASSERT_EQ(direct.payloads.size(), n);
  std::vector<std::string> froms;
  for (size_t i = 0; i < n; ++i) {
    froms.push_back(absl::StrCat(kind, "/", shard, "/", RecordDirName(i, n)));
  }
  const std::vector<std::string> packed = CopyAndPack(s, {s.src}, froms, prefix);
  ASSERT_EQ(packed.size(), n);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(direct.payloads[i]) << froms[i];
    check(*direct.payloads[i], packed[i], froms[i]);
    EXPECT_TRUE(*direct.payloads[i] == packed[i]) << froms[i] << ": bytes differ";
  }
}

TEST(StagingArraysTest, GeneratedTensorRecordsCopyBackByteExact) {
  TFRFS_SKIP_WITHOUT_FUSE();
  Scratch s;
  CopyEveryRecordBack(s, "tensors", kTensorShard, 12, "t", ExpectSameRecord);
}

TEST(StagingArraysTest, NumpyAndPilArraysPackToTheirTensors) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (::access("/usr/bin/python3", X_OK) != 0 ||
      RunCommand({"/usr/bin/python3", "-c", "import numpy, PIL"}).exit_code != 0) {
    GTEST_SKIP() << "/usr/bin/python3 with numpy and PIL not found";
  }
  Scratch s;
  ASSERT_FALSE(Gen(s, "tensors", "3").empty());
  MountConfig c = PackConfig(s, {s.src}, "np");
  Mount d(c);
  ASSERT_EQ(d.Start(), absl::OkStatus());
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  ASSERT_NE(root, nullptr);
  const std::string manifest = s.logs + "/arrays.txt";
  CommandResult py =
      RunCommand({"/usr/bin/python3", std::string(root) + "/tests/mount/staging/write_arrays.py",
                  s.mnt + "/staging", manifest});
  ASSERT_EQ(py.exit_code, 0) << py.out << py.err << "\ndaemon:\n" << d.Stderr();
  int status = 0;
  CommandResult u = d.TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err << "\ndaemon:\n" << d.Stderr();
  const auto payloads = AllPayloads(ReadPackedShards(s.out, "np"));
  ASSERT_EQ(payloads.size(), 2u);  // np, pal (in name order)

  std::map<std::string, std::map<std::string, example::Feature>> records;
  std::vector<example::FeatureTable> tables;  // views into payloads
  const char* names[] = {"np", "pal"};
  for (size_t i = 0; i < payloads.size(); ++i) {
    auto t = example::DecodeExample(payloads[i]);
    ASSERT_TRUE(t.ok()) << t.status();
    for (const auto& f : t->features) records[names[i]][f.name] = f;
  }
  size_t checked = 0;
  for (absl::string_view line : absl::StrSplit(ReadWholeFile(manifest), '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    ASSERT_EQ(f.size(), 6u) << line;
    const auto& rec = records[f[0]];
    auto it = rec.find(f[1]);
    ASSERT_NE(it, rec.end()) << line;
    ASSERT_EQ(it->second.kind, example::Kind::kBytes) << line;
    const size_t item = f[2] == "-" ? 0 : std::stoul(f[2]);
    ASSERT_LT(item, it->second.bytes.size()) << line;
    EXPECT_EQ(TensorText(it->second.bytes[item]), absl::StrCat(f[3], " ", f[4], " ", f[5]))
        << f[0] << " " << f[1] << " " << f[2];
    ++checked;
  }
  EXPECT_EQ(checked, 26u);  // 24 in np, 2 in pal
  ASSERT_TRUE(records["np"].count("label"));
  EXPECT_EQ(records["np"]["label"].int64s, std::vector<int64_t>{7});
}

// A uint8 [H,W] PNG of `pixels` (row-major).
std::string GrayPng(uint32_t h, uint32_t w, const std::string& pixels) {
  auto g = tensor::PngGeometryOf(tensor::DataType::kUint8, {h, w});
  return tensor::EncodePng(*g, pixels).value();
}

TEST(StagingArraysTest, BadArraysAndStepsFailAndKindsSurviveARestart) {
  TFRFS_SKIP_WITHOUT_FUSE();
  Scratch s;
  ASSERT_FALSE(Gen(s, "tensors", "2").empty());
  ASSERT_FALSE(Gen(s, "sequence", "2").empty());
  const std::string r = s.mnt + "/staging/r", q = s.mnt + "/staging/q";
  const std::string mask = std::string("\x01\x02\x03\x04", 4);
  {
    MountConfig c = PackConfig(s, {s.src}, "bad");
    Mount d(c);
    ASSERT_EQ(d.Start(), absl::OkStatus());
    // An Example record with tensor features.
    ASSERT_EQ(::mkdir(q.c_str(), 0755), 0);
    ASSERT_EQ(::mkdir((q + "/image").c_str(), 0755), 0);
    ASSERT_EQ(::mkdir((q + "/arr").c_str(), 0755), 0);
    // What the features cannot take is written, and flagged once whole.
    auto flag = [](const std::string& path) {
      return RunCommand({"getfattr", "--only-values", "-n", "user.tfrecordfs.error", path}).out;
    };
    WriteOutcome bad = WriteAndClose(q + "/image/gray.png", "not a png");
    EXPECT_EQ(bad.write_errno, 0);
    EXPECT_EQ(bad.close_errno, 0);
    EXPECT_EQ(WriteAndClose(q + "/image/rgb.png", GrayPng(2, 2, mask)).write_errno, 0);
    EXPECT_NE(flag(q + "/image/rgb.png"), "");  // a gray PNG for an RGB feature
    // cp copies it all the same.
    WriteWholeFile(s.tmp.path() + "/gray.png", GrayPng(2, 2, mask));
    CommandResult cp = Shell("cp " + ShellQuote(s.tmp.path() + "/gray.png") + " " +
                             ShellQuote(q + "/image/rgb.png"));
    EXPECT_EQ(cp.exit_code, 0) << cp.err;
    const std::string npy =
        tensor::NpyHeader(tensor::DataType::kDouble, {1}) + std::string(8, '\0');
    EXPECT_EQ(WriteAndClose(q + "/arr/f32.npy", npy).write_errno, 0);  // float64 for float32
    EXPECT_NE(flag(q + "/arr/f32.npy"), "");
    EXPECT_TRUE(Exists(q + "/image/gray.png"));
    const WriteOutcome good = WriteAndClose(q + "/image/gray.png", GrayPng(2, 2, mask));
    EXPECT_EQ(good.close_errno, 0);
    EXPECT_EQ(WriteAndClose(q + "/photo.npy", "exact bytes").close_errno, 0);  // unknown name
    ASSERT_EQ(::unlink((q + "/image/rgb.png").c_str()), 0);
    ASSERT_EQ(::unlink((q + "/arr/f32.npy").c_str()), 0);

    // A SequenceExample record: context/ first, as `cp -r` writes it (so
    // context/label is checked as the context feature `label`, int64,
    // before feature_lists/ exists).
    ASSERT_EQ(::mkdir(r.c_str(), 0755), 0);
    ASSERT_EQ(::mkdir((r + "/context").c_str(), 0755), 0);
    EXPECT_EQ(WriteAndClose(r + "/context/label", "1.5\n").write_errno, 0);
    EXPECT_NE(flag(r + "/context/label").find("'1.5' is not an int64"), std::string::npos);
    EXPECT_EQ(WriteAndClose(r + "/context/label", "4\n").close_errno, 0);
    EXPECT_EQ(flag(r + "/context/label"), "");
    for (const char* dir :
         {"/feature_lists", "/feature_lists/rgb", "/feature_lists/sparse", "/feature_lists/mask"}) {
      ASSERT_EQ(::mkdir((r + dir).c_str(), 0755), 0) << dir;
    }
    EXPECT_EQ(WriteAndClose(r + "/feature_lists/rgb/0", "abc\n").write_errno, 0);
    EXPECT_EQ(WriteAndClose(r + "/feature_lists/sparse/07", "1.5\n").write_errno, 0);
    EXPECT_NE(flag(r + "/feature_lists/sparse/07").find("'1.5' is not an int64"),
              std::string::npos);
    EXPECT_EQ(WriteAndClose(r + "/feature_lists/mask/0.png", "junk").write_errno, 0);
    // float list: integers stay floats; int64 list; a uint8 [2,2] mask.
    EXPECT_EQ(WriteAndClose(r + "/feature_lists/rgb/0", "1\n2\n").close_errno, 0);
    EXPECT_EQ(WriteAndClose(r + "/feature_lists/rgb/1", "3\n").close_errno, 0);
    ASSERT_EQ(::unlink((r + "/feature_lists/sparse/07").c_str()), 0);
    EXPECT_EQ(WriteAndClose(r + "/feature_lists/sparse/0", "5\n").close_errno, 0);
    EXPECT_EQ(WriteAndClose(r + "/feature_lists/mask/0.png", GrayPng(2, 2, mask)).close_errno, 0);
    // Killed: nothing packed; the files and their tags stay in the store.
    d.KillHard();
  }
  EXPECT_EQ(ListDir(s.records()), (std::vector<std::string>{"q", "r"}));
  // Restart on shards that know none of these names: the tags decide.
  const std::string other = s.tmp.Subdir("other");
  test::WriteShard(other + "/x.tfrecord", {ExamplePayload({Int64Feature("x", {1})})});
  MountConfig c = PackConfig(s, {other}, "after");
  Mount d(c);
  ASSERT_EQ(d.Start(), absl::OkStatus());
  int status = 0;
  CommandResult u = d.TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err << "\ndaemon:\n" << d.Stderr();
  const auto payloads = AllPayloads(ReadPackedShards(s.out, "after"));
  ASSERT_EQ(payloads.size(), 2u);
  const std::string mask_proto =
      tensor::EncodeTensor(tensor::DataType::kUint8, {2, 2}, mask).value();
  auto ex = example::DecodeExample(payloads[0]);  // q
  ASSERT_TRUE(ex.ok()) << ex.status();
  std::map<std::string, example::Feature> qf;
  for (const auto& f : ex->features) qf[f.name] = f;
  ASSERT_EQ(qf.size(), 2u);
  EXPECT_EQ(std::string(qf["image/gray"].bytes.at(0)), mask_proto);
  EXPECT_EQ(std::string(qf["photo"].bytes.at(0)), "exact bytes");
  auto seq = example::DecodeSequenceExample(payloads[1]);  // r
  ASSERT_TRUE(seq.ok()) << seq.status();
  ASSERT_EQ(seq->context.features.size(), 1u);
  EXPECT_EQ(seq->context.features[0].int64s, std::vector<int64_t>{4});
  std::map<std::string, example::FeatureList> lists;
  for (const auto& l : seq->lists) lists[l.name] = l;
  ASSERT_EQ(lists.size(), 3u);
  ASSERT_EQ(lists["rgb"].steps.size(), 2u);
  EXPECT_EQ(lists["rgb"].steps[0].kind, example::Kind::kFloat);
  EXPECT_EQ(lists["rgb"].steps[0].floats, (std::vector<float>{1, 2}));
  EXPECT_EQ(lists["rgb"].steps[1].floats, (std::vector<float>{3}));
  EXPECT_EQ(lists["sparse"].steps.at(0).int64s, std::vector<int64_t>{5});
  EXPECT_EQ(std::string(lists["mask"].steps.at(0).bytes.at(0)), mask_proto);
}

// The SequenceExamples `generated` and `packed` hold the same features.
void ExpectSameSequence(const std::string& generated, const std::string& packed,
                        const std::string& from) {
  auto want = example::DecodeSequenceExample(generated);
  auto got = example::DecodeSequenceExample(packed);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << from << ": " << got.status();
  EXPECT_EQ(SequenceText(*got), SequenceText(*want)) << from;
}

TEST(StagingArraysTest, SequenceRecordsCopyBackFeatureByFeature) {
  TFRFS_SKIP_WITHOUT_FUSE();
  Scratch s;
  CopyEveryRecordBack(s, "sequence", kSequenceShard, 14, "seq", ExpectSameSequence);
}

}  // namespace
}  // namespace tfrecordfs::mount_test::staging_test
