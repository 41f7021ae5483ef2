// Edits of ArrayRecord files on a real read-write mount (issue 38): the
// tools users use (echo >, sed -i, vim, cp over a file, rm -r, mv into
// staging), committed by `tfrecordfs commit` and at unmount, in the file's
// own format. Every committed file is read by an independent reader
// (tests/cli/arrayrecord_check.py: the riegeli wire walked by hand, brotli,
// zstd and snappy by Debian's Python modules), which must find: the footer's
// writer options string as it was, every chunk in the file's compression,
// every chunk but the last holding the first chunk's count (the reference
// reader's rule), every record's bytes as expected, and the chunks the
// commit did not touch byte for byte (header and data) as they were.
// Crash safety as for TFRecord shards: SIGKILL at the commit's fault points,
// then a remount: the file is wholly old or wholly new, and the next commit
// finishes. Staged records of a dataset of ArrayRecord files are packed into
// an ArrayRecord file of the same options.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "mount_harness.h"
#include "testing/bytes.h"
#include "tfrecordfs/arrayrecord/writer.h"
#include "tfrecordfs/reference/wire.h"

namespace tfrecordfs::mount_test {
namespace {

bool HavePython() { return ::access("/usr/bin/python3", X_OK) == 0; }

// What the independent reader says of a file.
struct Dumped {
  bool ok = false;
  std::string error;
  std::string options;
  uint64_t group = 0;
  struct Chunk {
    uint64_t offset = 0, records = 0;
    std::string compression, digest;
  };
  std::vector<Chunk> chunks;
  std::vector<std::string> records;
  std::map<uint64_t, std::string> examples;  // describe_example lines
  std::vector<std::string> digests() const {
    std::vector<std::string> out;
    for (const Chunk& c : chunks) out.push_back(c.digest);
    return out;
  }
};

Dumped Dump(const std::string& file) {
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  CommandResult r = RunCommand({"/usr/bin/python3",
                                absl::StrCat(root ? root : ".", "/tests/cli/arrayrecord_check.py"),
                                "dump", file});
  Dumped d;
  d.ok = r.exit_code == 0;
  d.error = r.out + r.err;
  for (absl::string_view line : absl::StrSplit(r.out, '\n', absl::SkipEmpty())) {
    std::vector<std::string> w = absl::StrSplit(line, absl::MaxSplits(' ', 2));
    if (w[0] == "options") {
      d.options = std::string(line.substr(8));
    } else if (w[0] == "group") {
      (void)absl::SimpleAtoi(w[1], &d.group);
    } else if (w[0] == "chunk") {
      std::vector<std::string> c = absl::StrSplit(line, ' ');
      Dumped::Chunk ch;
      (void)absl::SimpleAtoi(c[1], &ch.offset);
      (void)absl::SimpleAtoi(c[2], &ch.records);
      ch.compression = c[3];
      ch.digest = c[4];
      d.chunks.push_back(ch);
    } else if (w[0] == "record") {
      d.records.push_back(absl::HexStringToBytes(w.size() > 2 ? w[2] : ""));
    } else if (w[0] == "example") {
      uint64_t i = 0;
      (void)absl::SimpleAtoi(w[1], &i);
      d.examples[i] = w.size() > 2 ? w[2] : "";
    }
  }
  return d;
}

std::string Described(uint64_t label, const std::string& text) {
  return absl::StrCat("label:int64:", label, " text:bytes:", text);
}

// 30 records: Examples (label 11 i, "text of i"), every third a raw payload
// (record.bin), some of them over 64 KiB (chunks cross block headers).
std::vector<std::string> Payloads() {
  std::vector<std::string> out;
  for (int i = 0; i < 30; ++i) {
    if (i % 3 == 2) {
      std::string raw = absl::StrCat("\xff\xfe raw payload ", i, " ");
      raw.append(static_cast<size_t>(i * 4999 % 70000), static_cast<char>('a' + i % 26));
      out.push_back(raw);
    } else {
      out.push_back(
          test::LabelTextExample(static_cast<uint64_t>(i * 11), absl::StrCat("text of ", i)));
    }
  }
  return out;
}

std::vector<std::string> RecordDirs(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (!n.empty() &&
        std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      out.push_back(n);
    }
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    return std::stoull(a) < std::stoull(b);
  });
  return out;
}

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') out.push_back(e->d_name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

struct Case {
  arrayrecord::Compression compression;
  int level;
  uint64_t group;
  bool pad;  // pad_to_block_boundary:true
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return absl::StrCat(arrayrecord::CompressionName(info.param.compression), "_group",
                      info.param.group, info.param.pad ? "_padded" : "");
}

constexpr char kName[] = "ds-train.array_record-00000-of-00001";

class ArrayRecordEditTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    TFRFS_SKIP_WITHOUT_FUSE();
    if (!HavePython()) GTEST_SKIP() << "no /usr/bin/python3";
    src_ = tmp_.Subdir("src");
    out_ = tmp_.Subdir("out");
    file_ = src_ + "/" + kName;
  }
  MountConfig Config(const std::string& fault = "") {
    MountConfig c;
    c.mountpoint = tmp_.Subdir("mnt");
    c.log_dir = tmp_.path();
    c.sources = {src_};
    c.options = {"staging_dir=" + tmp_.path() + "/store", "output_dir=" + out_};
    c.fault = fault;
    return c;
  }
  void Write(const std::vector<std::string>& payloads) {
    arrayrecord::WriterOptions o;
    o.compression = GetParam().compression;
    o.level = GetParam().level;
    o.group_size = GetParam().group;
    o.pad_to_block_boundary = GetParam().pad;
    if (GetParam().pad) {
      // As the reference spells its options (the rewrite keeps this string).
      o.options_text =
          absl::StrReplaceAll(arrayrecord::OptionsString(o),
                              {{"pad_to_block_boundary:false", "pad_to_block_boundary:true"}});
    }
    auto bytes = arrayrecord::WriteToString(payloads, o);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    WriteWholeFile(file_, *bytes);
  }
  // The file as the independent reader finds it, checked for the
  // invariants of every commit.
  Dumped Check(const std::string& file, const Dumped& before) {
    Dumped d = Dump(file);
    EXPECT_TRUE(d.ok) << file << ": " << d.error;
    EXPECT_EQ(d.options, before.options) << file;
    for (const auto& c : d.chunks) {
      EXPECT_EQ(c.compression, arrayrecord::CompressionName(GetParam().compression)) << c.offset;
    }
    if (d.chunks.size() > 1) {
      EXPECT_EQ(d.group, GetParam().group);
    }
    // pad_to_block_boundary:true: every chunk after the first begins a block.
    for (size_t k = 1; k < d.chunks.size(); ++k) {
      EXPECT_EQ(d.chunks[k].offset % 65536 == 0, GetParam().pad) << file << " chunk " << k;
    }
    return d;
  }

  TempDir tmp_;
  std::string src_, out_, file_;
};

TEST_P(ArrayRecordEditTest, EditsAndDeletesCommitInTheSameFormatKeepingWhatTheyDidNotTouch) {
  std::vector<std::string> want = Payloads();
  ASSERT_NO_FATAL_FAILURE(Write(want));
  const Dumped original = Dump(file_);
  ASSERT_TRUE(original.ok) << original.error;
  ASSERT_EQ(original.records, want);
  const uint64_t g = GetParam().group;
  // TFDS's metadata beside the file: its split's record count and bytes
  // follow the commits.
  uint64_t bytes = 0;
  for (const std::string& p : want) bytes += p.size();
  WriteWholeFile(src_ + "/dataset_info.json",
                 absl::StrCat("{\"fileFormat\": \"array_record\", \"splits\": [{\"name\": "
                              "\"train\", \"numBytes\": \"",
                              bytes, "\", \"shardLengths\": [\"30\"]}]}"));

  Mount m(Config());
  ASSERT_EQ(m.Start(), absl::OkStatus());
  const std::string shard = m.path(kName);
  const auto recs = RecordDirs(shard);
  ASSERT_EQ(recs.size(), 30u);
  auto rec = [&](int i) { return ShellQuote(shard + "/" + recs[static_cast<size_t>(i)]); };
  const std::string copied = tmp_.path() + "/copied";
  WriteWholeFile(copied, "copied over a raw record\n");
  // Round 1: edits that delete nothing.
  CommandResult r =
      Shell(absl::StrCat("set -e\n", "echo 5 > ", rec(0), "/label\n", "sed -i s/33/34/ ", rec(3),
                         "/label\n", "vim -E -s -c '%s/44/45/' -c wq ", rec(4), "/label\n", "cp ",
                         ShellQuote(copied), " ", rec(2), "/record.bin\n"));
  ASSERT_EQ(r.exit_code, 0) << r.err << m.Stderr();
  CommandResult c = RunCommand({BinaryPath(), "commit", m.mountpoint()});
  ASSERT_EQ(c.exit_code, 0) << c.out << c.err << m.Stderr();
  EXPECT_NE(c.out.find("kept 26, changed 4, added 0, deleted 0"), std::string::npos) << c.out;
  const Dumped first = Check(file_, original);
  ASSERT_EQ(first.records.size(), 30u);
  want[2] = "copied over a raw record\n";
  for (size_t i = 0; i < 30; ++i) {
    if (i == 0 || i == 3 || i == 4) continue;
    EXPECT_TRUE(first.records[i] == want[i]) << "record " << i;
  }
  EXPECT_EQ(first.examples.at(0), Described(5, "text of 0"));
  EXPECT_EQ(first.examples.at(3), Described(34, "text of 3"));
  EXPECT_EQ(first.examples.at(4), Described(45, "text of 4"));
  // The edited records keep what was not edited byte for byte: the text
  // entry's bytes are in them as they were.
  for (int i : {0, 3, 4}) {
    const std::string text_entry = reference::wire::MapEntry(
        "text",
        reference::wire::BytesFeature(reference::wire::BytesValues({absl::StrCat("text of ", i)})));
    EXPECT_NE(first.records[static_cast<size_t>(i)].find(text_entry), std::string::npos) << i;
  }
  // No deletion: the same chunks, those without an edited record (0, 2, 3,
  // 4) as they were.
  ASSERT_EQ(first.chunks.size(), original.chunks.size());
  for (size_t k = 0; k < first.chunks.size(); ++k) {
    const uint64_t b = k * g, e = std::min<uint64_t>(b + g, 30);
    const bool edited = (b <= 0 && 0 < e) || (b <= 4 && 2 < e);
    EXPECT_EQ(first.chunks[k].digest == original.chunks[k].digest, !edited) << "chunk " << k;
  }
  for (size_t i = 0; i < 30; ++i) want[i] = first.records[i];

  // Round 2: rm -r a record, mv another into staging, cp -r a third into
  // a new record of the file (appended); committed at unmount.
  const auto recs2 = RecordDirs(shard);
  ASSERT_EQ(recs2.size(), 30u);
  r = Shell(absl::StrCat(
      "set -e\nrm -r ", ShellQuote(shard + "/" + recs2[20]), "\nmv ",
      ShellQuote(shard + "/" + recs2[23]), " ", ShellQuote(m.path("staging/moved")), "\ncp -r ",
      ShellQuote(shard + "/" + recs2[2]), " ", ShellQuote(shard + "/added"), "\n"));
  ASSERT_EQ(r.exit_code, 0) << r.err << m.Stderr();
  int status = 0;
  CommandResult u = m.TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  EXPECT_NE(u.out.find("kept 28, changed 0, added 1, deleted 2"), std::string::npos) << u.out;
  const Dumped second = Check(file_, original);
  std::vector<std::string> expect2;
  for (size_t i = 0; i < 30; ++i) {
    if (i != 20 && i != 23) expect2.push_back(want[i]);
  }
  expect2.push_back(want[2]);  // the copy, appended
  EXPECT_TRUE(second.records == expect2) << second.records.size() << " records";
  bytes = 0;
  for (const std::string& p : expect2) bytes += p.size();
  std::string info = ReadWholeFile(src_ + "/dataset_info.json");
  info.erase(std::remove_if(info.begin(), info.end(), [](char ch) { return std::isspace(ch); }),
             info.end());
  EXPECT_NE(info.find("\"shardLengths\":[\"29\"]"), std::string::npos) << info;
  EXPECT_NE(info.find(absl::StrCat("\"numBytes\":\"", bytes, "\"")), std::string::npos) << info;
  EXPECT_NE(info.find("\"fileFormat\":\"array_record\""), std::string::npos) << info;
  // Chunks wholly before the first deletion are kept; with one record a
  // chunk, every chunk but the deleted ones.
  std::vector<std::string> kept_digests;
  for (size_t k = 0; k < first.chunks.size(); ++k) {
    if (g == 1 ? (k != 20 && k != 23) : (k + 1) * g <= 20)
      kept_digests.push_back(first.chunks[k].digest);
  }
  const auto now = second.digests();
  for (size_t k = 0; k < kept_digests.size(); ++k) {
    if (g == 1) {
      ASSERT_LT(k, now.size());
      EXPECT_EQ(now[k], kept_digests[k]) << "chunk " << k;
    } else {
      EXPECT_EQ(now[k], first.chunks[k].digest) << "chunk " << k;
    }
  }
  // The moved record, packed into an ArrayRecord file like the dataset's.
  const auto packed = Files(out_);
  ASSERT_EQ(packed.size(), 1u) << u.out;
  EXPECT_NE(packed[0].find(".array_record-00000-of-00001"), std::string::npos) << packed[0];
  const Dumped staged = Check(out_ + "/" + packed[0], original);
  EXPECT_TRUE(staged.records == std::vector<std::string>{want[23]});
}

TEST_P(ArrayRecordEditTest, SigkillDuringTheCommitLeavesTheFileWhollyOldOrWhollyNew) {
  const std::vector<std::string> payloads = Payloads();
  ASSERT_NO_FATAL_FAILURE(Write(payloads));
  const std::string before = ReadWholeFile(file_);
  const Dumped original = Dump(file_);
  ASSERT_TRUE(original.ok) << original.error;
  std::vector<std::string> after;
  for (size_t i = 0; i < payloads.size(); ++i) {
    if (i == 5) continue;
    after.push_back(i == 8 ? std::string("new eight") : payloads[i]);
  }
  for (const char* fault : {"rewrite_mid_shard", "rewrite_before_rename", "rewrite_after_rename"}) {
    SCOPED_TRACE(fault);
    WriteWholeFile(file_, before);
    {
      Mount m(Config(fault));
      ASSERT_EQ(m.Start(), absl::OkStatus());
      const auto recs = RecordDirs(m.path(kName));
      ASSERT_EQ(recs.size(), 30u);
      CommandResult r =
          Shell(absl::StrCat("set -e\nprintf 'new eight' > ",
                             ShellQuote(m.path(kName) + "/" + recs[8] + "/record.bin"), "\nrm -r ",
                             ShellQuote(m.path(kName) + "/" + recs[5]), "\n"));
      ASSERT_EQ(r.exit_code, 0) << r.err;
      CommandResult c = RunCommand({BinaryPath(), "commit", "--timeout", "60", m.mountpoint()});
      EXPECT_EQ(c.exit_code, 1) << c.out << c.err;
      int status = 0;
      ASSERT_TRUE(m.WaitExit(&status)) << m.Stderr();
      ASSERT_TRUE(KilledBySigkill(status)) << m.Stderr();
      CleanStaleMount(m.mountpoint());
    }
    const bool renamed = std::string(fault) == "rewrite_after_rename";
    const Dumped crashed = Check(file_, original);
    EXPECT_TRUE(crashed.records == (renamed ? after : payloads)) << crashed.records.size();
    if (!renamed) {
      EXPECT_TRUE(ReadWholeFile(file_) == before);
    }
    {
      Mount m(Config());
      ASSERT_EQ(m.Start(), absl::OkStatus());
      EXPECT_EQ(RecordDirs(m.path(kName)).size(), 29u) << m.Stderr();
      int status = 0;
      CommandResult u = m.TfrUnmount(&status);
      EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
    }
    EXPECT_TRUE(Check(file_, original).records == after);
    EXPECT_EQ(Files(src_), std::vector<std::string>{kName}) << "a temp file left";
  }
}

TEST_P(ArrayRecordEditTest, AWrittenFileThatDoesNotCheckIsNotRenamedAndItsEditsStayPending) {
  ASSERT_NO_FATAL_FAILURE(Write(Payloads()));
  const std::string before = ReadWholeFile(file_);
  Mount m(Config("rewrite_flip_written_byte"));
  ASSERT_EQ(m.Start(), absl::OkStatus());
  const auto recs = RecordDirs(m.path(kName));
  CommandResult r =
      Shell("printf changed > " + ShellQuote(m.path(kName) + "/" + recs[2] + "/record.bin"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  CommandResult c = RunCommand({BinaryPath(), "commit", m.mountpoint()});
  EXPECT_NE(c.exit_code, 0) << c.out;
  EXPECT_NE((c.out + c.err).find("not rewritten"), std::string::npos) << c.out << c.err;
  EXPECT_TRUE(ReadWholeFile(file_) == before);
  EXPECT_EQ(ReadWholeFile(m.path(kName) + "/" + recs[2] + "/record.bin"), "changed");
  EXPECT_EQ(Files(src_), std::vector<std::string>{kName}) << "a temp file left";
}

// Grain's reference-writer file (tests/unit/testdata/arrayrecord), a
// record deleted and one replaced through the mount: the committed file is
// byte for byte what the reference writer writes for the records left
// (our writer writes the reference's bytes for these options:
// arrayrecord_test's OurWriterWritesTheReferenceWritersBytes), and the
// independent reader finds them.
TEST(ArrayRecordGrainEditTest, ACommittedGrainFileIsWhatTheReferenceWriterWrites) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (!HavePython()) GTEST_SKIP() << "no /usr/bin/python3";
  TempDir tmp;
  const std::string dir = tmp.Subdir("grain");
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  const std::string name = "digits.array_record-00000-of-00002";
  WriteWholeFile(
      dir + "/" + name,
      ReadWholeFile(absl::StrCat(root ? root : ".", "/tests/unit/testdata/arrayrecord/", name)));
  Mount m;
  ASSERT_EQ(m.Start({dir}), absl::OkStatus());
  const auto recs = RecordDirs(m.path(name));
  ASSERT_EQ(recs.size(), 5u);
  CommandResult r = Shell(
      absl::StrCat("set -e\nrm -r ", ShellQuote(m.path(name) + "/" + recs[2]), "\nprintf 7 > ",
                   ShellQuote(m.path(name) + "/" + recs[3] + "/record.bin"), "\n"));
  ASSERT_EQ(r.exit_code, 0) << r.err << m.Stderr();
  int status = 0;
  CommandResult u = m.TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  arrayrecord::WriterOptions o;
  o.group_size = 1;
  o.compression = arrayrecord::Compression::kNone;
  auto reference = arrayrecord::WriteToString({"0", "1", "7", "4"}, o);
  ASSERT_TRUE(reference.ok()) << reference.status();
  EXPECT_TRUE(ReadWholeFile(dir + "/" + name) == *reference);
  const Dumped d = Dump(dir + "/" + name);
  EXPECT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.records, (std::vector<std::string>{"0", "1", "7", "4"}));
  EXPECT_EQ(d.options,
            "group_size:1,transpose:false,pad_to_block_boundary:false,uncompressed,"
            "max_parallelism:1");
}

INSTANTIATE_TEST_SUITE_P(Formats, ArrayRecordEditTest,
                         ::testing::Values(Case{arrayrecord::Compression::kNone, 0, 1, false},
                                           Case{arrayrecord::Compression::kZstd, 3, 7, false},
                                           Case{arrayrecord::Compression::kBrotli, 6, 1, false},
                                           Case{arrayrecord::Compression::kSnappy, 0, 4, true}),
                         CaseName);

}  // namespace
}  // namespace tfrecordfs::mount_test
