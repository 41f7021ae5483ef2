// Compressed pack output through a real mount: a record staged on a mount of
// GZIP shards is packed to a `.tfrecord.gz` shard by default (the sources'
// codec), or as -o compression= says. The output is read back three ways:
// Python's gzip / zlib modules (/usr/bin/python3, an independent reader of
// both the compression and the TFRecord framing), the project's own reader
// (zlib + record::ForEachRecordInBuffer, via ReadPackedShards), and a new
// mount of the output directory, whose record folder must equal the staged
// copy's source file by file.
//
// (No JavaScript TFRecord reader exists in this repository's tests, so none
// is run here.)
#include <fcntl.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "staging_util.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/record/writer.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::mount_test::staging_test {
namespace {

constexpr char kPython[] = "/usr/bin/python3";

// Prints one line per record: its length and its bytes in hex, reading the
// file with Python's gzip (any number of members) or zlib module and
// checking each record's framing lengths; also prints "members N" for GZIP
// (counted with zlib.decompressobj) so the test can check there is one.
constexpr char kPythonReader[] = R"PY(
import gzip, struct, sys, zlib
path, codec = sys.argv[1], sys.argv[2]
raw = open(path, 'rb').read()
if codec == 'gzip':
    data = gzip.decompress(raw)
    members, rest = 0, raw
    while rest:
        d = zlib.decompressobj(31)
        d.decompress(rest)
        assert d.eof, 'truncated member'
        members += 1
        rest = d.unused_data
    print('members', members)
else:
    d = zlib.decompressobj(15)
    data = d.decompress(raw)
    assert d.eof and not d.unused_data, 'not exactly one ZLIB stream'
    print('members', 1)
pos = 0
while pos < len(data):
    (n,) = struct.unpack_from('<Q', data, pos)
    payload = data[pos + 12:pos + 12 + n]
    assert len(payload) == n, 'truncated record'
    print(n, payload.hex())
    pos += 12 + n + 4
)PY";

struct PythonRead {
  int members = 0;
  std::vector<std::string> payloads;
};

PythonRead ReadWithPython(const std::string& path, const std::string& codec) {
  PythonRead out;
  struct stat st;
  if (::stat(kPython, &st) != 0) return out;
  CommandResult r = RunCommand({kPython, "-c", kPythonReader, path, codec});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (absl::string_view line : absl::StrSplit(r.out, '\n', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(line, ' ');
    if (parts.size() != 2) continue;
    if (parts[0] == "members") {
      out.members = std::stoi(parts[1]);
      continue;
    }
    std::string bytes;
    for (size_t i = 0; i + 1 < parts[1].size(); i += 2) {
      bytes.push_back(static_cast<char>(std::stoi(parts[1].substr(i, 2), nullptr, 16)));
    }
    EXPECT_EQ(std::to_string(bytes.size()), parts[0]);
    out.payloads.push_back(std::move(bytes));
  }
  return out;
}

// A shard of `payloads` written as `codec` by the project's writer.
void WriteCompressedShard(const std::string& path, const std::vector<std::string>& payloads,
                          source::Codec codec) {
  auto fd = OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_TRUE(fd.ok()) << fd.status();
  record::ShardWriter w(std::move(*fd), path, {.codec = codec});
  for (const std::string& p : payloads) ASSERT_TRUE(w.Append(p).ok());
  ASSERT_TRUE(w.Close(false).ok());
}

class StagingCompressedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TFRFS_SKIP_WITHOUT_FUSE();
    for (int i = 0; i < 5; ++i) {
      payloads_.push_back(ExamplePayload({Int64Feature("id", {i}),
                                          BytesFeature("blob", {std::string(2000 + i, 'a' + i)}),
                                          FloatFeature("score", {0.5f * i})}));
    }
  }

  // Mounts `sources` with `options` (plus the scratch's pack options),
  // copies record `record` of shard `shard` into staging/, unmounts (which
  // packs) and returns the output shard names.
  std::vector<std::string> StageCopyAndPack(const std::vector<std::string>& sources,
                                            const std::string& shard, int record,
                                            std::vector<std::string> options = {}) {
    MountConfig c;
    c.sources = sources;
    c.mountpoint = s_.mnt;
    c.options = PackOptions(s_, "new");
    c.options.insert(c.options.end(), options.begin(), options.end());
    c.log_dir = s_.logs;
    Mount d(c);
    EXPECT_EQ(d.Start(), absl::OkStatus());
    CommandResult cp = Shell(
        absl::StrCat("cp -r ", ShellQuote(s_.mnt + "/" + shard + "/" + std::to_string(record)), " ",
                     ShellQuote(s_.mnt + "/staging/copy")));
    EXPECT_EQ(cp.exit_code, 0) << cp.err;
    int status = 0;
    CommandResult u = d.TfrUnmount(&status);
    EXPECT_EQ(u.exit_code, 0) << u.out << u.err << d.Stderr();
    std::vector<std::string> out;
    for (const std::string& n : ListDir(s_.out)) {
      if (absl::StartsWith(n, "new-")) out.push_back(n);
    }
    return out;
  }

  Scratch s_;
  std::vector<std::string> payloads_;
};

TEST_F(StagingCompressedTest, GzipSourcesPackToAGzipShardThatEveryReaderReads) {
  WriteCompressedShard(s_.src + "/data_tfrecord-00000-of-00001.gz", payloads_,
                       source::Codec::kGzip);
  ASSERT_FALSE(HasFatalFailure());
  const std::vector<std::string> out =
      StageCopyAndPack({s_.src}, "data_tfrecord-00000-of-00001.gz", 3);
  ASSERT_EQ(out, std::vector<std::string>{"new-00000-of-00001.tfrecord.gz"});
  const std::string path = s_.out + "/" + out[0];

  // Our reader (zlib, one member, framing and CRCs).
  const auto shards = ReadPackedShards(s_.out, "new");
  ASSERT_EQ(shards.size(), 1u);
  ASSERT_EQ(shards[0].payloads.size(), 1u);
  ExpectSameRecord(payloads_[3], shards[0].payloads[0], "packed copy of record 3");

  // Python's gzip module.
  struct stat st;
  if (::stat(kPython, &st) == 0) {
    const PythonRead py = ReadWithPython(path, "gzip");
    EXPECT_EQ(py.members, 1);
    ASSERT_EQ(py.payloads.size(), 1u);
    EXPECT_EQ(py.payloads[0], shards[0].payloads[0]);
  } else {
    std::printf("note: %s missing, Python read-back skipped\n", kPython);
  }

  // A new mount of the source and the output (directories are merged at the
  // root) shows the record exactly as the source did.
  Mount m;
  ASSERT_EQ(m.Start({s_.src, s_.out}), absl::OkStatus());
  const auto original = WalkTree(m.path("data_tfrecord-00000-of-00001.gz/3"));
  const auto packed = WalkTree(m.path("new-00000-of-00001.tfrecord.gz/0"));
  ASSERT_FALSE(original.empty());
  ASSERT_EQ(original.size(), packed.size());
  for (const auto& [rel, node] : original) {
    auto it = packed.find(rel);
    ASSERT_NE(it, packed.end()) << rel;
    EXPECT_EQ(it->second.mode, node.mode) << rel;
    EXPECT_EQ(it->second.content, node.content) << rel;
  }
  std::string err;
  EXPECT_EQ(m.Stop(&err), 0) << err;
}

TEST_F(StagingCompressedTest, CompressionOptionOverridesTheSources) {
  WriteCompressedShard(s_.src + "/a.tfrecord.gz", payloads_, source::Codec::kGzip);
  ASSERT_FALSE(HasFatalFailure());
  const std::vector<std::string> out =
      StageCopyAndPack({s_.src}, "a.tfrecord.gz", 1, {"compression=zlib"});
  ASSERT_EQ(out, std::vector<std::string>{"new-00000-of-00001.tfrecord.zlib"});
  const auto shards = ReadPackedShards(s_.out, "new");
  ASSERT_EQ(shards.size(), 1u);
  ASSERT_EQ(shards[0].payloads.size(), 1u);
  ExpectSameRecord(payloads_[1], shards[0].payloads[0], "packed copy of record 1");
  struct stat st;
  if (::stat(kPython, &st) == 0) {
    const PythonRead py = ReadWithPython(s_.out + "/" + out[0], "zlib");
    ASSERT_EQ(py.payloads.size(), 1u);
    EXPECT_EQ(py.payloads[0], shards[0].payloads[0]);
  }
}

TEST_F(StagingCompressedTest, MixedSourcesPackPlain) {
  WriteCompressedShard(s_.src + "/a.tfrecord.gz", payloads_, source::Codec::kGzip);
  test::WriteShard(s_.src + "/b.tfrecord", payloads_);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(StageCopyAndPack({s_.src}, "b.tfrecord", 0),
            std::vector<std::string>{"new-00000-of-00001.tfrecord"});
}

TEST_F(StagingCompressedTest, ZlibSourcesPackToZlib) {
  WriteCompressedShard(s_.src + "/a.tfr", payloads_, source::Codec::kZlib);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(StageCopyAndPack({s_.src}, "a.tfr", 2),
            std::vector<std::string>{"new-00000-of-00001.tfrecord.zlib"});
  const auto shards = ReadPackedShards(s_.out, "new");
  ASSERT_EQ(shards.size(), 1u);
  ASSERT_EQ(shards[0].payloads.size(), 1u);
  ExpectSameRecord(payloads_[2], shards[0].payloads[0], "packed copy of record 2");
}

TEST_F(StagingCompressedTest, BadCompressionOptionIsAUsageError) {
  test::WriteShard(s_.src + "/b.tfrecord", payloads_);
  MountConfig c;
  c.sources = {s_.src};
  c.mountpoint = s_.mnt;
  c.options = {"compression=lz4"};
  c.log_dir = s_.logs;
  Mount d(c);
  EXPECT_EQ(d.RunExpectingFailure(), 2);
  EXPECT_NE(d.Stderr().find("compression needs none, gzip or zlib"), std::string::npos)
      << d.Stderr();
}

}  // namespace
}  // namespace tfrecordfs::mount_test::staging_test
