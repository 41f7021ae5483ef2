// .npy headers byte for byte against hand-checked literals and, when
// python3-numpy is installed (scripts/setup installs it), against np.save;
// ParseNpy of what numpy writes (versions 1.0, 2.0, 3.0) and of bad files.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/tensor/npy.h"

namespace tfrecordfs::tensor {
namespace {

using ::testing::HasSubstr;

std::string Header(absl::string_view text) {
  std::string h("\x93NUMPY\x01\x00", 8);
  h.push_back(static_cast<char>(text.size() & 0xff));
  h.push_back(static_cast<char>(text.size() >> 8));
  return h + std::string(text);
}

TEST(NpyHeader, HandCheckedLiterals) {
  // np.save of np.zeros((2, 3), np.float32): 21 - 1 growth spaces, padded to 128.
  std::string text = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  text += std::string(128 - 10 - text.size() - 1, ' ') + "\n";
  EXPECT_EQ(NpyHeader(DataType::kFloat, {2, 3}), Header(text));
  text = "{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }";
  text += std::string(128 - 10 - text.size() - 1, ' ') + "\n";
  EXPECT_EQ(NpyHeader(DataType::kUint8, {5}), Header(text));
  text = "{'descr': '|b1', 'fortran_order': False, 'shape': (), }";
  text += std::string(128 - 10 - text.size() - 1, ' ') + "\n";
  EXPECT_EQ(NpyHeader(DataType::kBool, {}), Header(text));
  for (int rank = 0; rank < 40; ++rank) {
    const std::string h = NpyHeader(DataType::kInt64, std::vector<int64_t>(rank, 123456));
    EXPECT_EQ(h.size() % 64, 0u);
    EXPECT_EQ(h.back(), '\n');
  }
}

// A python3 that can import numpy, or "" (then the numpy tests skip).
std::string NumpyPython() {
  for (const char* py : {"/usr/bin/python3", "python3"}) {
    const std::string cmd = absl::StrCat(py, " -c 'import numpy' >/dev/null 2>&1");
    if (std::system(cmd.c_str()) == 0) return py;
  }
  return "";
}

class NumpyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    python_ = NumpyPython();
    if (python_.empty()) GTEST_SKIP() << "python3-numpy not installed (scripts/setup installs it)";
    tmp_.emplace("npy_test");
    ASSERT_FALSE(tmp_->path().empty());
    dir_ = tmp_->path();
  }
  // Runs a numpy script with `d` bound to the temp dir.
  void Run(const std::string& script) {
    const std::string path = dir_ + "/script.py";
    ASSERT_TRUE(
        WriteFileAtomically(path, "import numpy as np\nd = '" + dir_ + "'\n" + script).ok());
    ASSERT_EQ(std::system((python_ + " " + path).c_str()), 0) << script;
  }
  std::string Read(const std::string& name) {
    auto s = ReadFileToString(dir_ + "/" + name);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : "";
  }
  std::string python_;
  std::optional<test::TempDir> tmp_;  // made only when numpy is there
  std::string dir_;
};

struct Case {
  DataType dtype;
  const char* np;  // numpy dtype
  std::vector<int64_t> shape;
};

const std::vector<Case>& Cases() {
  static const auto* cases = new std::vector<Case>{
      {DataType::kFloat, "float32", {2, 3}},
      {DataType::kDouble, "float64", {}},
      {DataType::kInt32, "int32", {5}},
      {DataType::kUint8, "uint8", {4, 4, 3}},
      {DataType::kInt16, "int16", {0}},
      {DataType::kInt8, "int8", {1, 0, 7}},
      {DataType::kInt64, "int64", {3, 1}},
      {DataType::kBool, "bool_", {9}},
      {DataType::kUint16, "uint16", {2, 2, 2, 2}},
      {DataType::kHalf, "float16", {7}},
      {DataType::kUint32, "uint32", {1}},
      {DataType::kUint64, "uint64", {2, 5}},
      {DataType::kFloat, "float32", {123456789012, 0}},
      {DataType::kUint8, "uint8", std::vector<int64_t>(30, 1)},
      {DataType::kUint8, "uint8", std::vector<int64_t>(32, 1)},  // numpy 1.x: at most 32 dims
  };
  return *cases;
}

std::string PyShape(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (int64_t d : shape) absl::StrAppend(&s, d, ",");
  return s + ")";
}

TEST_F(NumpyTest, HeaderIsWhatNpSaveWritesAndParsesBack) {
  std::string script;
  for (size_t i = 0; i < Cases().size(); ++i) {
    const Case& c = Cases()[i];
    absl::StrAppend(&script, "a = (np.arange(max(1, int(np.prod(", PyShape(c.shape),
                    ", dtype=object))) if 0 not in ", PyShape(c.shape), " else 0) % 251)",
                    ".astype(np.", c.np, ")\n", "np.save(d + '/", i, ".npy', a.reshape(",
                    PyShape(c.shape), ") if 0 not in ", PyShape(c.shape), " else np.zeros(",
                    PyShape(c.shape), ", np.", c.np, "))\n");
  }
  Run(script);
  for (size_t i = 0; i < Cases().size(); ++i) {
    const Case& c = Cases()[i];
    SCOPED_TRACE(absl::StrCat(c.np, " rank ", c.shape.size()));
    const std::string file = Read(absl::StrCat(i, ".npy"));
    const std::string header = NpyHeader(c.dtype, c.shape);
    ASSERT_GE(file.size(), header.size());
    EXPECT_EQ(file.substr(0, header.size()), header);
    auto t = ParseNpy(file);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->dtype, c.dtype);
    EXPECT_EQ(t->shape, c.shape);
    EXPECT_EQ(t->data_offset, header.size());
    EXPECT_EQ(t->data_size, *NumBytes(c.dtype, c.shape));
  }
}

TEST_F(NumpyTest, OurFilesLoadInNumpy) {
  // header + little-endian bytes is a file np.load reads back exactly.
  std::string data;
  for (int i = 0; i < 6; ++i) data += std::string("\x01\x00\x00\x00\x00\x00\x00\x00", 8);
  data[8] = 2;
  ASSERT_TRUE(
      WriteFileAtomically(dir_ + "/ours.npy", NpyHeader(DataType::kInt64, {2, 3}) + data).ok());
  Run("a = np.load(d + '/ours.npy')\n"
      "assert a.dtype == np.int64 and a.shape == (2, 3), (a.dtype, a.shape)\n"
      "assert a.tolist() == [[1, 2, 1], [1, 1, 1]], a.tolist()\n");
}

TEST_F(NumpyTest, OtherVersionsAndRejections) {
  Run("from numpy.lib import format as f\n"
      "a = np.arange(6, dtype='<u2').reshape(2, 3)\n"
      "for v in [(1, 0), (2, 0), (3, 0)]:\n"
      "  with open(d + '/v%d.npy' % v[0], 'wb') as fp: f.write_array(fp, a, version=v)\n"
      "np.save(d + '/be.npy', a.astype('>u2'))\n"
      "np.save(d + '/fortran.npy', np.asfortranarray(a))\n"
      "np.save(d + '/object.npy', np.array([1, 'x'], dtype=object), allow_pickle=True)\n"
      "np.save(d + '/complex.npy', np.zeros(2, np.complex64))\n"
      "np.save(d + '/structured.npy', np.zeros(2, dtype=[('x', '<i4')]))\n"
      "np.save(d + '/be1.npy', np.zeros(3, '>u1'))\n");
  for (const char* v : {"v1.npy", "v2.npy", "v3.npy"}) {
    const std::string file = Read(v);
    auto t = ParseNpy(file);
    ASSERT_TRUE(t.ok()) << v << ": " << t.status();
    EXPECT_EQ(t->dtype, DataType::kUint16);
    EXPECT_EQ(t->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(t->data(file), absl::string_view("\0\0\1\0\2\0\3\0\4\0\5\0", 12));
  }
  EXPECT_THAT(ParseNpy(Read("be.npy")).status().message(), HasSubstr("big-endian"));
  EXPECT_THAT(ParseNpy(Read("fortran.npy")).status().message(), HasSubstr("fortran_order"));
  EXPECT_THAT(ParseNpy(Read("object.npy")).status().message(), HasSubstr("pickled"));
  EXPECT_THAT(ParseNpy(Read("complex.npy")).status().message(), HasSubstr("'<c8'"));
  EXPECT_THAT(ParseNpy(Read("structured.npy")).status().message(), HasSubstr("structured"));
  EXPECT_TRUE(ParseNpy(Read("be1.npy")).ok());  // one-byte items have no byte order
}

TEST(ParseNpy, BadFiles) {
  const std::string good = NpyHeader(DataType::kInt16, {2}) + "abcd";
  ASSERT_TRUE(ParseNpy(good).ok());
  for (size_t n = 0; n < good.size(); ++n) EXPECT_FALSE(ParseNpy(good.substr(0, n)).ok()) << n;
  EXPECT_THAT(ParseNpy(good + "x").status().message(), HasSubstr("the file has 5"));
  auto with = [](absl::string_view dict, absl::string_view data = "") {
    return ParseNpy(Header(dict) + std::string(data));
  };
  EXPECT_TRUE(with("{'descr': '<i2', 'fortran_order': False, 'shape': (1,)}\n", "ab").ok());
  EXPECT_TRUE(
      with("{\"shape\": (1L, 2L), \"descr\": \"<i2\", \"fortran_order\": False}", "abcd").ok());
  EXPECT_FALSE(with("{'descr': '<i2', 'fortran_order': False, 'shape': (1)}", "ab").ok());
  EXPECT_FALSE(with("{'descr': '<i2', 'fortran_order': False}", "ab").ok());
  EXPECT_FALSE(
      with("{'descr': '<i2', 'descr': '<i2', 'fortran_order': False, 'shape': ()}", "ab").ok());
  EXPECT_FALSE(with("{'descr': '<i2', 'fortran_order': 0, 'shape': ()}", "ab").ok());
  EXPECT_FALSE(with("{'descr': '<i2', 'fortran_order': False, 'shape': (-1,)}").ok());
  EXPECT_FALSE(with("{'descr': '<i2', 'fortran_order': False, 'shape': (), 'x': 1}", "ab").ok());
  EXPECT_FALSE(with("{'descr': '<i2', 'fortran_order': False, 'shape': ()} x", "ab").ok());
  EXPECT_FALSE(
      with("{'descr': '<i2', 'fortran_order': False, 'shape': (99999999999999999999,)}").ok());
  EXPECT_FALSE(
      with("{'descr': '<i8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}").ok());
  EXPECT_FALSE(with("{'descr': '|O', 'fortran_order': False, 'shape': ()}", "abcdefgh").ok());
  std::string v9 = good;
  v9[6] = 9;
  EXPECT_THAT(ParseNpy(v9).status().message(), HasSubstr("version 9.0"));
}

// The header as its bytes arrive: every prefix of a good header is
// undecided, the whole one says dtype, shape and where the data starts; a
// wrong byte fails as soon as it is there.
TEST(ParseNpyHeader, PrefixesOfAFile) {
  const std::string header = NpyHeader(DataType::kUint16, {2, 3});
  for (size_t n = 0; n < header.size(); ++n) {
    auto h = ParseNpyHeader(header.substr(0, n));
    ASSERT_TRUE(h.ok()) << n << ": " << h.status();
    EXPECT_FALSE(h->has_value()) << n;
  }
  auto h = ParseNpyHeader(header + "xx");
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_TRUE(h->has_value());
  EXPECT_EQ((*h)->dtype, DataType::kUint16);
  EXPECT_EQ((*h)->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ((*h)->data_offset, header.size());
  EXPECT_EQ((*h)->data_bytes, 12u);
  EXPECT_FALSE(ParseNpyHeader("\x93NUMPZ").ok());
  EXPECT_FALSE(ParseNpyHeader("PK").ok());
  EXPECT_FALSE(ParseNpyHeader(std::string("\x93NUMPY\x09\x00", 8)).ok()) << "version 9.0";
  std::string big_endian = NpyHeader(DataType::kFloat, {1});
  big_endian[big_endian.find("<f4")] = '>';
  EXPECT_FALSE(ParseNpyHeader(big_endian).ok());
}

TEST(NpyDataOffset, KnownFromTheLengthFieldOn) {
  const std::string v1 = NpyHeader(DataType::kUint16, {2, 3});
  for (size_t n = 0; n < 10; ++n) EXPECT_EQ(NpyDataOffset(v1.substr(0, n)), 0u) << n;
  for (size_t n : {size_t{10}, size_t{11}, v1.size(), v1.size() + 5}) {
    EXPECT_EQ(NpyDataOffset((v1 + "12345").substr(0, n)), v1.size()) << n;
  }
  // Version 2.0: a 4-byte length, the dict from offset 12.
  const std::string v2 = std::string("\x93NUMPY\x02\x00", 8) + std::string("\x05\x01\x00\x00", 4);
  EXPECT_EQ(NpyDataOffset(v2.substr(0, 11)), 0u);
  EXPECT_EQ(NpyDataOffset(v2), 12u + 0x105);
  EXPECT_EQ(NpyDataOffset(std::string("\x93NUMPY\x09\x00\x10\x00\x00\x00", 12)), 0u)
      << "version 9.0";
  EXPECT_EQ(NpyDataOffset("PK\x03\x04 a zip file"), 0u);
}

}  // namespace
}  // namespace tfrecordfs::tensor
