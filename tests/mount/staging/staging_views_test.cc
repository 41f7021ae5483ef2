// Views that must list, read and come back through real mounts (issue 21):
//   * item 14: a record whose feature names all want the name record.bin
//     (`record`, `record.bin`, `record.bin/x`) aborted the daemon; it lists
//     with `ls -R`, the rest of the mount stays up, and `cp -r` packs it back;
//   * item 17: tensors given as one *_val value broadcast over a big shape
//     are listed without expanding them (the daemon's peak RSS), and a slice
//     of their files reads the right bytes;
//   * item 21: empty feature lists `a` beside `a/b` (and `x` beside `x/y/z`)
//     all survive `cp -r` and the pack, read back by an independent Python
//     reader of the packed shard;
//   * item 22: a uint8 [1, 1000001] image comes back through staging; numpy
//     loads every .npy a mount shows (tensors of rank 40 or shape
//     [0, 2^62, 2^62] show their bytes instead).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "staging_util.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/sequence.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/tensor/npy.h"
#include "tfrecordfs/tensor/png.h"
#include "tfrecordfs/tensor/tensor.h"

namespace tfrecordfs::mount_test::staging_test {
namespace {

// Peak resident set size of a process in KiB (VmHWM), or -1.
long PeakRssKiB(pid_t pid) {
  std::string status;
  if (!ReadProcFile(absl::StrCat("/proc/", pid, "/status"), &status)) return -1;
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (!absl::ConsumePrefix(&line, "VmHWM:")) continue;
    long kib = -1;
    if (absl::SimpleAtoi(absl::StripSuffix(absl::StripAsciiWhitespace(line), " kB"), &kib)) {
      return kib;
    }
  }
  return -1;
}

std::string Tensor(tensor::DataType dtype, const std::vector<int64_t>& shape,
                   const std::string& data) {
  return tensor::EncodeTensor(dtype, shape, data).value();
}

void PutVarint(std::string* out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out->push_back(static_cast<char>((v & 0x7f) | 0x80));
  out->push_back(static_cast<char>(v));
}

// A TensorProto whose int_val (field 7) holds the one value `v`, broadcast
// over `shape`, as make_tensor_proto writes tf.fill-like constants.
std::string BroadcastTensor(tensor::DataType dtype, const std::vector<int64_t>& shape, int v) {
  std::string shape_msg;
  for (int64_t d : shape) {
    std::string dim = "\x08";
    PutVarint(&dim, static_cast<uint64_t>(d));
    shape_msg += "\x12";
    PutVarint(&shape_msg, dim.size());
    shape_msg += dim;
  }
  std::string out = "\x08";
  PutVarint(&out, static_cast<uint64_t>(dtype));
  out += "\x12";
  PutVarint(&out, shape_msg.size());
  out += shape_msg;
  out.push_back(static_cast<char>(7 << 3));
  PutVarint(&out, static_cast<uint64_t>(v));
  return out;
}

bool HavePython(const std::string& modules) {
  return ::access("/usr/bin/python3", X_OK) == 0 &&
         RunCommand({"/usr/bin/python3", "-c", "import " + modules}).exit_code == 0;
}

TEST(StagingViewsTest, NamesThatAllWantRecordBinListAndPackBack) {
  TFRFS_SKIP_WITHOUT_FUSE();
  Scratch s;
  const std::string clash =
      ExamplePayload({BytesFeature("record", {std::string("\x00\x01\xfe", 3)}),
                      BytesFeature("record.bin", {std::string("\x00\x02", 2), "\xff\xd8\xff"}),
                      Int64Feature("record.bin/x", {5})});
  const std::string plain = ExamplePayload({Int64Feature("label", {3})});
  test::WriteShard(s.src + "/clash.tfrecord", {plain, clash, plain});
  {
    MountConfig c = PackConfig(s, {s.src}, "v");
    Mount d(c);
    ASSERT_EQ(d.Start(), absl::OkStatus());
    CommandResult ls = Shell("ls -R " + ShellQuote(s.mnt + "/clash.tfrecord"));
    EXPECT_EQ(ls.exit_code, 0) << ls.err << "\ndaemon:\n" << d.Stderr();
    EXPECT_NE(ls.out.find("%-%-record.bin"), std::string::npos) << ls.out;
    EXPECT_NE(ls.out.find("%-record.bin"), std::string::npos) << ls.out;
    // The mount is still up: the records beside it read.
    EXPECT_EQ(ReadWholeFile(s.mnt + "/clash.tfrecord/2/label"), "3\n");
    EXPECT_EQ(ReadWholeFile(s.mnt + "/clash.tfrecord/1/record.bin/x"), "5\n");
    int status = 0;
    CommandResult u = d.TfrUnmount(&status);
    EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  }
  Scratch s2;
  test::WriteShard(s2.src + "/clash.tfrecord", {plain, clash});
  const std::vector<std::string> packed = CopyAndPack(s2, {s2.src}, {"clash.tfrecord/1"}, "c");
  ASSERT_EQ(packed.size(), 1u);
  ExpectSameRecord(clash, packed[0], "the clash record");
}

TEST(StagingViewsTest, BroadcastTensorsListWithoutExpandingAndReadRight) {
  TFRFS_SKIP_WITHOUT_FUSE();
  Scratch s;
  std::vector<OwnedFeature> features;
  constexpr int kImages = 8;
  for (int i = 0; i < kImages; ++i) {
    features.push_back(
        BytesFeature(absl::StrCat("image", i),
                     {BroadcastTensor(tensor::DataType::kUint8, {4096, 4096}, 7 + i)}));
  }
  features.push_back(
      BytesFeature("ints", {BroadcastTensor(tensor::DataType::kInt32, {1024, 1024}, 5)}));
  const std::string payload = ExamplePayload(std::move(features));
  ASSERT_LT(payload.size(), 1024u);  // a few hundred bytes of record
  test::WriteShard(s.src + "/b.tfrecord", {payload});
  MountConfig c = PackConfig(s, {s.src}, "b");
  Mount d(c);
  ASSERT_EQ(d.Start(), absl::OkStatus());
  const long before = PeakRssKiB(d.pid());
  ASSERT_GT(before, 0);
  CommandResult ls = Shell("ls -l " + ShellQuote(s.mnt + "/b.tfrecord/0"));
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.out.find("image7.png"), std::string::npos) << ls.out;
  const long after = PeakRssKiB(d.pid());
  // Expanded, the eight images alone are 128 MiB (and their PNGs as much
  // again); made on demand, listing holds neither.
  EXPECT_LT(after - before, 16 * 1024)
      << "peak RSS grew from " << before << " to " << after << " KiB to list one record";
  // A slice from the middle of a PNG and of the .npy: the right bytes.
  auto g = tensor::PngGeometryOf(tensor::DataType::kUint8, {4096, 4096});
  ASSERT_TRUE(g.ok());
  const uint64_t size = tensor::PngSize(*g);
  const uint64_t at = size / 2 + 12345;
  std::string want(70000, '\0');
  const tensor::PixelSource tens = [](uint64_t, char* buf, size_t n) {
    std::memset(buf, 10, n);
    return absl::OkStatus();
  };
  ASSERT_TRUE(tensor::ReadPngRange(*g, tens, at, want.data(), want.size()).ok());
  const int fd = ::open((s.mnt + "/b.tfrecord/0/image3.png").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::string got(want.size(), '\0');
  EXPECT_EQ(::pread(fd, got.data(), got.size(), static_cast<off_t>(at)),
            static_cast<ssize_t>(got.size()));
  ::close(fd);
  EXPECT_TRUE(got == want) << "image3.png differs at [" << at << ", +" << want.size() << ")";
  const std::string npy = ReadWholeFile(s.mnt + "/b.tfrecord/0/ints.npy");
  const std::string header = tensor::NpyHeader(tensor::DataType::kInt32, {1024, 1024});
  ASSERT_EQ(npy.size(), header.size() + 4u * 1024 * 1024);
  EXPECT_EQ(npy.substr(0, header.size()), header);
  EXPECT_EQ(npy.substr(header.size() + 4 * 777, 8), std::string("\x05\0\0\0\x05\0\0\0", 8));
  if (HavePython("numpy")) {
    CommandResult py = RunCommand(
        {"/usr/bin/python3", "-c",
         "import numpy, sys\n"
         "a = numpy.load(sys.argv[1])\n"
         "assert a.shape == (1024, 1024) and a.dtype == numpy.int32 and (a == 5).all(), a\n",
         s.mnt + "/b.tfrecord/0/ints.npy"});
    EXPECT_EQ(py.exit_code, 0) << py.err;
  }
  int status = 0;
  d.TfrUnmount(&status);
}

// Lists the feature_lists keys of every SequenceExample in a TFRecord file,
// parsing the wire format by hand (no generated code of this project).
constexpr char kListNames[] = R"PY(
import struct, sys
def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1; v |= (c & 0x7f) << s; s += 7
        if c < 0x80: return v, i
def fields(b):
    i = 0
    while i < len(b):
        tag, i = varint(b, i)
        if tag & 7 == 2:
            n, i = varint(b, i); yield tag >> 3, b[i:i + n]; i += n
        elif tag & 7 == 0:
            v, i = varint(b, i); yield tag >> 3, v
        else: raise SystemExit("unexpected wire type")
data = open(sys.argv[1], "rb").read()
at = 0
while at < len(data):
    (n,) = struct.unpack_from("<Q", data, at); rec = data[at + 12:at + 12 + n]; at += 12 + n + 4
    for f, lists in fields(rec):
        if f != 2: continue
        for g, entry in fields(lists):
            kv = dict(fields(entry))
            steps = len([1 for h, _ in fields(kv.get(2, b"")) if h == 1])
            print(kv[1].decode(), steps)
)PY";

TEST(StagingViewsTest, EmptyListsInsideEachOthersPathsSurviveTheRoundTrip) {
  TFRFS_SKIP_WITHOUT_FUSE();
  Scratch s;
  example::SequenceTable t;
  for (const char* name : {"a", "a/b", "x/y/z", "x"}) {
    example::FeatureList list;
    list.name = name;
    t.lists.push_back(list);
  }
  const std::string payload = example::EncodeSequenceExample(t);
  test::WriteShard(s.src + "/seq.tfrecord", {payload});
  const std::vector<std::string> packed = CopyAndPack(s, {s.src}, {"seq.tfrecord/0"}, "q");
  ASSERT_EQ(packed.size(), 1u);
  ExpectSameRecord(payload, packed[0], "the record of empty lists");
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  const std::vector<PackedShard> shards = ReadPackedShards(s.out, "q");
  ASSERT_EQ(shards.size(), 1u);
  CommandResult py =
      RunCommand({"/usr/bin/python3", "-c", kListNames, s.out + "/" + shards[0].name});
  ASSERT_EQ(py.exit_code, 0) << py.err;
  std::vector<std::string> lines = absl::StrSplit(py.out, '\n', absl::SkipEmpty());
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"a 0", "a/b 0", "x 0", "x/y/z 0"})) << py.out;
}

TEST(StagingViewsTest, AnImageWiderThanAMillionPixelsComesBack) {
  TFRFS_SKIP_WITHOUT_FUSE();
  Scratch s;
  std::string pixels(1000001, '\0');
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<char>(i * 13 + i / 251);
  const std::string payload = ExamplePayload(
      {BytesFeature("wide", {Tensor(tensor::DataType::kUint8, {1, 1000001}, pixels)}),
       Int64Feature("label", {1})});
  test::WriteShard(s.src + "/wide.tfrecord", {payload});
  const std::vector<std::string> packed = CopyAndPack(s, {s.src}, {"wide.tfrecord/0"}, "w");
  ASSERT_EQ(packed.size(), 1u);
  EXPECT_TRUE(packed[0] == payload) << "the packed record differs from the original";
}

TEST(StagingViewsTest, NumpyLoadsEveryNpyTheMountShows) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (!HavePython("numpy")) GTEST_SKIP() << "/usr/bin/python3 with numpy not found";
  Scratch s;
  const std::vector<int64_t> rank40(40, 1), rank32(32, 1);
  const std::string deep = Tensor(tensor::DataType::kUint8, rank40, "\x07");
  const std::string payload = ExamplePayload(
      {BytesFeature("deep", {deep}),
       BytesFeature(
           "huge", {Tensor(tensor::DataType::kFloat, {0, int64_t{1} << 62, int64_t{1} << 62}, "")}),
       BytesFeature("rank32", {Tensor(tensor::DataType::kUint8, rank32, "\x07")}),
       BytesFeature("empty", {Tensor(tensor::DataType::kInt64, {0, 1 << 20, 1 << 20}, "")}),
       BytesFeature("floats", {Tensor(tensor::DataType::kFloat, {2, 3}, std::string(24, '\x01'))}),
       BytesFeature("fill", {BroadcastTensor(tensor::DataType::kInt16, {3, 0x10001}, 9)})});
  test::WriteShard(s.src + "/n.tfrecord", {payload});
  MountConfig c = PackConfig(s, {s.src}, "n");
  Mount d(c);
  ASSERT_EQ(d.Start(), absl::OkStatus());
  CommandResult py = RunCommand({"/usr/bin/python3", "-c",
                                 "import numpy, os, sys\n"
                                 "n = 0\n"
                                 "for root, dirs, files in os.walk(sys.argv[1]):\n"
                                 "    for f in files:\n"
                                 "        if f.endswith('.npy'):\n"
                                 "            numpy.load(os.path.join(root, f)); n += 1\n"
                                 "print(n)\n",
                                 s.mnt + "/n.tfrecord"});
  EXPECT_EQ(py.exit_code, 0) << py.err;
  EXPECT_EQ(py.out, "4\n");  // rank32, empty, floats, fill
  // The tensors numpy cannot load show their exact bytes.
  EXPECT_TRUE(ReadWholeFile(s.mnt + "/n.tfrecord/0/deep.bin") == deep);
  EXPECT_EQ(::access((s.mnt + "/n.tfrecord/0/huge.bin").c_str(), F_OK), 0);
  int status = 0;
  d.TfrUnmount(&status);
}

}  // namespace
}  // namespace tfrecordfs::mount_test::staging_test
