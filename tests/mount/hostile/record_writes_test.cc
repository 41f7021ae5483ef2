// Writable opens of the mounted records (issue 21, item 19). On a `-o ro`
// mount a record's files are read-only (mode 0444; a read-write mount shows
// 0644: they take edits), but root ignores mode bits, and where the kernel
// opens files without asking the daemon (FUSE_CAP_NO_OPEN_SUPPORT) nothing
// stops open(O_RDWR): a shared writable mapping of it (numpy's
// `np.load(mmap_mode='r+')`) then changes the page cache that every later
// reader of the file sees, though the daemon refuses the write-back. So a
// writable open of a record file must fail with EROFS on `-o ro` mounts
// (on read-write ones it edits the record: record_edit_test.cc), after a
// read has already been served (the first OPEN
// of a mount always reached the daemon), and the bytes read back afterwards
// must still be the shard's. write_records.py makes the attempts, with the
// /usr/bin/python3 that has numpy (skipped without it).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "expectations.h"
#include "gtest/gtest.h"
#include "mount_harness.h"
#include "testing/shard.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/tensor/npy.h"
#include "tfrecordfs/tensor/tensor.h"

namespace tfrecordfs::mount_test {
namespace {

constexpr float kValues[] = {1.5f, -2.0f, 3.25f, 0.0f, 8.0f, -0.5f};

class RecordWritesTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    TFRFS_SKIP_WITHOUT_FUSE();
    if (::access("/usr/bin/python3", X_OK) != 0 ||
        RunCommand({"/usr/bin/python3", "-c", "import numpy"}).exit_code != 0) {
      GTEST_SKIP() << "/usr/bin/python3 with numpy not found";
    }
    const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
    ASSERT_NE(root, nullptr) << "TFRECORDFS_SOURCE_ROOT is set by meson";
    script_ = std::string(root) + "/tests/mount/hostile/write_records.py";
    const std::string data(reinterpret_cast<const char*>(kValues), sizeof kValues);
    std::vector<OwnedFeature> features(2);
    features[0].name = "arr";
    features[0].kind = example::Kind::kBytes;
    features[0].bytes = {tensor::EncodeTensor(tensor::DataType::kFloat, {2, 3}, data).value()};
    features[1].name = "label";
    features[1].kind = example::Kind::kInt64;
    features[1].int64s = {7};
    ASSERT_NO_FATAL_FAILURE(
        test::WriteShard(src_ + "/rec.tfrecord", {example::EncodeExample(ToTable(features))}));
    npy_ = tensor::NpyHeader(tensor::DataType::kFloat, {2, 3}) + data;
  }

  TempDir tmp_;
  const std::string src_ = tmp_.Subdir("src");
  std::string script_;
  std::string npy_;  // what rec.tfrecord/0/arr.npy holds
};

TEST_P(RecordWritesTest, WritableOpensOfRecordFilesFailAndTheBytesStay) {
  const bool read_only = GetParam();
  Mount m;
  std::vector<std::string> opts = {
      "-o", "staging_dir=" + tmp_.Subdir("store") + ",output_dir=" + tmp_.Subdir("out")};
  if (read_only) opts.insert(opts.end(), {"-o", "ro"});
  ASSERT_EQ(m.Start({src_}, opts), absl::OkStatus());
  const std::string npy = m.path("rec.tfrecord/0/arr.npy");
  const std::string label = m.path("rec.tfrecord/0/label");
  // Read first, as a user would: the mount's first OPEN has been answered.
  ASSERT_EQ(ReadWholeFile(npy), npy_);
  ASSERT_EQ(ReadWholeFile(label), "7\n");

  const int fd = ::open(label.c_str(), O_RDWR);
  EXPECT_LT(fd, 0) << "open(O_RDWR) of a record file succeeded";
  if (fd >= 0) {
    ::close(fd);
  } else {
    EXPECT_EQ(errno, EROFS) << std::strerror(errno);
  }
  const CommandResult py = RunCommand({"/usr/bin/python3", script_, npy, label});
  EXPECT_EQ(py.exit_code, 0) << py.out << py.err;
  EXPECT_NE(py.out.find("open O_RDWR text: refused: EROFS"), std::string::npos) << py.out;
  EXPECT_NE(py.out.find("open O_RDWR npy: refused: EROFS"), std::string::npos) << py.out;
  EXPECT_NE(py.out.find("np.load mmap_mode=r+: refused: EROFS"), std::string::npos) << py.out;
  EXPECT_NE(py.out.find("mmap MAP_SHARED PROT_WRITE of an O_RDONLY descriptor: refused: EACCES"),
            std::string::npos)
      << py.out;

  // What every later reader sees: the page cache, then the daemon.
  EXPECT_EQ(ReadWholeFile(npy), npy_);
  EXPECT_EQ(ReadWholeFile(label), "7\n");
  const CommandResult load =
      RunCommand({"/usr/bin/python3", "-c",
                  "import sys, numpy; print(numpy.load(sys.argv[1]).tolist())", npy});
  EXPECT_EQ(load.out, "[[1.5, -2.0, 3.25], [0.0, 8.0, -0.5]]\n") << load.err;
  std::string stop_err;
  EXPECT_EQ(m.Stop(&stop_err), 0) << stop_err;
}

// Read-write mounts take these writes as edits (record_edit_test.cc).
INSTANTIATE_TEST_SUITE_P(Mounts, RecordWritesTest, ::testing::Values(true),
                         [](const auto& info) { return info.param ? "ReadOnly" : "ReadWrite"; });

// A read-write mount opens files without the daemon (issue 36), so root's
// open(O_RDWR) of a plain file of the sources succeeds there, and a shared
// writable mapping of it changes the kernel's page cache; its write-back is
// refused (EROFS, which msync() reports). The kernel would keep the
// changed page for every later reader (issue 21, item 19); the daemon drops
// the file's cached pages once it has refused the write-back, so the bytes
// read back are the source's again. (The drop follows the refusal's reply
// on the daemon's invalidation thread: the read-back waits for it, up to
// the harness's limit.)
TEST(PlainFileWritesTest, ARefusedWriteBackOfASharedMappingLeavesNoChangedPage) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (::geteuid() != 0) GTEST_SKIP() << "only root opens a 0444 file O_RDWR";
  TempDir tmp;
  const std::string src = tmp.Subdir("src");
  ASSERT_NO_FATAL_FAILURE(test::WriteShard(src + "/rec.tfrecord", {std::string()}));
  const std::string notes(5000, 'n');
  WriteWholeFile(src + "/notes.txt", notes);
  Mount m;
  ASSERT_EQ(m.Start({src}, {"-o", "staging_dir=" + tmp.Subdir("store") +
                                      ",output_dir=" + tmp.Subdir("out")}),
            absl::OkStatus());
  const std::string plain = m.path("notes.txt");
  ASSERT_EQ(ReadWholeFile(plain), notes);  // in the page cache
  const CommandResult py = RunCommand(
      {"python3", "-c",
       "import errno, mmap, os, sys\n"
       "fd = os.open(sys.argv[1], os.O_RDWR)\n"
       "m = mmap.mmap(fd, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)\n"
       "os.close(fd)\n"
       "m[0:1] = b'X'\n"
       "try:\n"
       "    m.flush()\n"
       "    print('written back')\n"
       "except OSError as e:\n"
       "    print('refused:', errno.errorcode.get(e.errno, e.errno))\n",
       plain});
  ASSERT_EQ(py.exit_code, 0) << py.out << py.err;
  EXPECT_EQ(py.out, "refused: EROFS\n") << py.err;
  std::string seen;
  EXPECT_TRUE(WaitUntil([&] { return (seen = ReadWholeFile(plain)) == notes; }))
      << "the refused byte stayed in the page cache: " << seen.substr(0, 8);
  EXPECT_EQ(ReadWholeFile(src + "/notes.txt"), notes);
  std::string stop_err;
  EXPECT_EQ(m.Stop(&stop_err), 0) << stop_err;
}

}  // namespace
}  // namespace tfrecordfs::mount_test
