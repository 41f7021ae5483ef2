// The pack engine: record folders on disk -> shards read back and decoded;
// shard splitting and naming; invalid records left staged; refusals and I/O
// failures (missing, read-only and full output directories) that must leave
// staging intact and no temp files; the journal format and recovery; and
// crash tests that fork, kill the child with SIGKILL at every fault point
// (TFRECORDFS_FAULT), recover, pack again and check exactly-once.
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/cli/commands.h"
#include "src/repack/check_shard.h"
#include "testing/files.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/naming/feature_type.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/reference/zlib_codec.h"
#include "tfrecordfs/repack/journal.h"
#include "tfrecordfs/repack/pack.h"
#include "tfrecordfs/source/shard_source.h"
#include "tfrecordfs/staging/layout.h"
#include "tfrecordfs/staging/record_folder.h"

namespace tfrecordfs::repack {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// ---- Helpers: folders on disk, shards read back ----

using test::WriteFile;

std::string Jpeg(int seed, size_t size) {
  std::string s = "\xff\xd8\xff\xe0";
  std::mt19937 rng(static_cast<uint32_t>(seed));
  while (s.size() < size) s.push_back(static_cast<char>(rng() & 0xff));
  return s;
}

// A typical record: int64 label, text name, one image, a bytes list, a
// nested feature (meta/source).
void MakeRecord(const std::string& dir, const std::string& name, int label,
                size_t image_size = 300) {
  const std::string r = absl::StrCat(dir, "/", name);
  WriteFile(r + "/label", absl::StrCat(label, "\n"));
  WriteFile(r + "/name.txt", name + "\n");
  WriteFile(r + "/image.jpg", Jpeg(label, image_size));
  WriteFile(r + "/frames/0.bin", absl::StrCat("frame0-", name));
  WriteFile(r + "/frames/1.bin", absl::StrCat("frame1-", name));
  WriteFile(r + "/meta/source.txt", "camera-" + name + "\n");
}

void MakeInvalidRecord(const std::string& dir, const std::string& name) {
  WriteFile(absl::StrCat(dir, "/", name, "/label"), "three\n");
}

// One record read back from an output shard.
struct ReadBack {
  std::string shard;  // file name
  std::string payload;
};

std::vector<std::string> ShardFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name[0] != '.' &&
        (absl::EndsWith(name, ".tfrecord") || absl::EndsWith(name, ".tfrecord.gz") ||
         absl::EndsWith(name, ".tfrecord.zlib"))) {
      out.push_back(name);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

using reference::zlib::InflateOneStream;

// Every record of every shard in `dir`, CRCs checked by ForEachRecordInBuffer
// (compressed shards decompressed by zlib first).
std::vector<ReadBack> ReadShards(const std::string& dir) {
  std::vector<ReadBack> out;
  for (const std::string& name : ShardFiles(dir)) {
    auto contents = ReadFileToString(dir + "/" + name);
    EXPECT_TRUE(contents.ok()) << contents.status();
    if (!contents.ok()) continue;
    if (!absl::EndsWith(name, ".tfrecord")) {
      EXPECT_EQ(source::DetectCodec(*contents),
                absl::EndsWith(name, ".gz") ? source::Codec::kGzip : source::Codec::kZlib)
          << name;
      auto plain = InflateOneStream(*contents);
      EXPECT_TRUE(plain.has_value()) << name << " does not decompress";
      if (!plain) continue;
      *contents = std::move(*plain);
    }
    absl::Status s =
        record::ForEachRecordInBuffer(*contents, [&](uint64_t, absl::string_view data) {
          out.push_back({name, std::string(data.data(), data.size())});
        });
    EXPECT_TRUE(s.ok()) << name << ": " << s;
  }
  return out;
}

const example::Feature* Find(const example::FeatureTable& t, absl::string_view name) {
  for (const auto& f : t.features) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// The `name` feature of a packed record built by MakeRecord.
std::string RecordName(const std::string& payload) {
  auto table = example::DecodeExample(payload);
  if (!table.ok()) return "<not an example>";
  const example::Feature* f = Find(*table, "name");
  if (!f || f->bytes.size() != 1) return "<no name>";
  return std::string(f->bytes[0].data(), f->bytes[0].size());
}

// Names of the record folders (non-hidden directories) in `dir`.
std::vector<std::string> Folders(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string()[0] != '.') {
      out.push_back(e.path().filename().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Anything in `dir` that is not a finished shard (temp files, journals).
std::vector<std::string> StrayFiles(const std::string& dir) {
  const std::vector<std::string> shards = ShardFiles(dir);
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (!e.is_directory() && std::find(shards.begin(), shards.end(), n) == shards.end()) {
      out.push_back(n);
    }
  }
  return out;
}

uint64_t FramedSize(const std::string& folder) {
  auto payload = staging::PayloadFromFolder(folder, naming::NoFeatureTypes());
  EXPECT_TRUE(payload.ok()) << payload.status();
  return payload.ok() ? payload->size() + record::kFramingOverhead : 0;
}

class PackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    root_ = tmp_.path();
    staging_ = root_ + "/staging";
    out_ = root_ + "/out";
    fs::create_directories(staging::RecordsDir(staging_));
    fs::create_directories(out_);
    records_ = staging::RecordsDir(staging_);
    journal_ = staging::PackJournalFile(staging_);
  }

  // The tmpfs mounts go before tmp_ removes the tree (it would leave a tree
  // with a mount in it in place).
  void TearDown() override {
    for (const std::string& m : mounts_) ::umount2(m.c_str(), MNT_DETACH);
  }

  PackOptions Options() const {
    PackOptions o;
    o.records_dir = records_;
    o.output_dir = out_;
    o.prefix = "t";
    o.journal_path = journal_;
    return o;
  }

  // Mounts a tmpfs at a fresh directory; "" when mounting is not possible.
  std::string MountTmpfs(const std::string& name, unsigned long flags, const char* data) {
    const std::string dir = root_ + "/" + name;
    fs::create_directories(dir);
    if (::mount("tmpfs", dir.c_str(), "tmpfs", flags, data) != 0) return "";
    mounts_.push_back(dir);
    return dir;
  }

  bool JournalExists() const { return fs::exists(journal_); }

  // A journal in `state` for this fixture's records and output folders
  // (canonical paths, as a pack writes them), with no shards yet.
  Journal JournalIn(Journal::State state) const {
    Journal j;
    j.state = state;
    j.records_dir = fs::canonical(records_).string();
    j.output_dir = fs::canonical(out_).string();
    return j;
  }

  // Five staged records of 30000 bytes and a 64 KiB tmpfs to pack them
  // into ("" when no tmpfs can be mounted here).
  std::string FiveRecordsAndAFullDisk() {
    const std::string full = MountTmpfs("full", 0, "size=64k");
    if (full.empty()) return "";
    for (int i = 0; i < 5; ++i) MakeRecord(records_, absl::StrCat("r", i), i, 30000);
    return full;
  }
  // After a pack that failed: nothing in `out`, every folder still staged,
  // no journal.
  void ExpectNothingPacked(const std::string& out) {
    EXPECT_TRUE(fs::is_empty(out)) << StrayFiles(out).size();
    EXPECT_EQ(Folders(records_).size(), 5u);
    EXPECT_FALSE(JournalExists());
  }

  test::TempDir tmp_{"repack_test"};
  std::string root_, staging_, records_, out_, journal_;
  std::vector<std::string> mounts_;
};

// ---- The happy path ----

TEST_F(PackTest, PacksEveryFeatureInNameOrder) {
  MakeRecord(records_, "b", 2);
  MakeRecord(records_, "a", 1);
  MakeRecord(records_, "c", 3);
  WriteFile(records_ + "/raw/record.bin", std::string("\x00\x01raw payload\xff", 15));
  MakeInvalidRecord(records_, "bad");
  WriteFile(records_ + "/.hidden/label", "1\n");        // skipped: hidden
  WriteFile(records_ + "/backup~/label", "1\n");        // skipped: backup
  WriteFile(records_ + "/stray-file", "not a record");  // kept, named: not a folder

  PackReport report = Pack(Options());
  ASSERT_TRUE(report.status.ok()) << report.status;
  ASSERT_EQ(report.shards.size(), 1u);
  EXPECT_EQ(report.shards[0].path, fs::canonical(out_).string() + "/t-00000-of-00001.tfrecord");
  EXPECT_EQ(report.shards[0].records, 4u);
  EXPECT_EQ(report.shards[0].bytes, fs::file_size(report.shards[0].path));
  ASSERT_EQ(report.left.size(), 2u);
  EXPECT_EQ(report.left[0].record, "bad");
  EXPECT_THAT(report.left[0].reason, HasSubstr("label"));
  EXPECT_EQ(report.left[1].record, "stray-file");
  EXPECT_THAT(report.left[1].reason, HasSubstr("not in a record folder"));
  EXPECT_THAT(report.Summary(), HasSubstr("t-00000-of-00001.tfrecord: 4 records"));
  EXPECT_THAT(report.Summary(), HasSubstr("bad: "));

  std::vector<ReadBack> back = ReadShards(out_);
  ASSERT_EQ(back.size(), 4u);
  // Name order: a, b, c, raw.
  EXPECT_EQ(RecordName(back[0].payload), "a");
  EXPECT_EQ(RecordName(back[1].payload), "b");
  EXPECT_EQ(RecordName(back[2].payload), "c");
  EXPECT_EQ(back[3].payload, std::string("\x00\x01raw payload\xff", 15));

  for (int i = 0; i < 3; ++i) {
    const std::string name(1, static_cast<char>('a' + i));
    auto table = example::DecodeExample(back[i].payload);
    ASSERT_TRUE(table.ok()) << table.status();
    const example::Feature* label = Find(*table, "label");
    ASSERT_NE(label, nullptr);
    EXPECT_EQ(label->kind, example::Kind::kInt64);
    EXPECT_THAT(label->int64s, ElementsAre(i + 1));
    const example::Feature* image = Find(*table, "image");
    ASSERT_NE(image, nullptr);
    ASSERT_EQ(image->bytes.size(), 1u);
    EXPECT_EQ(image->bytes[0], Jpeg(i + 1, 300));
    const example::Feature* frames = Find(*table, "frames");
    ASSERT_NE(frames, nullptr);
    ASSERT_EQ(frames->bytes.size(), 2u);
    EXPECT_EQ(frames->bytes[0], "frame0-" + name);
    EXPECT_EQ(frames->bytes[1], "frame1-" + name);
    const example::Feature* source = Find(*table, "meta/source");
    ASSERT_NE(source, nullptr);
    ASSERT_EQ(source->bytes.size(), 1u);
    EXPECT_EQ(source->bytes[0], "camera-" + name);
    EXPECT_EQ(table->features.size(), 5u);
  }

  // Packed folders are gone, the invalid one (and skipped names) stay.
  EXPECT_THAT(Folders(records_), ElementsAre("backup~", "bad"));
  EXPECT_TRUE(fs::exists(records_ + "/.hidden"));
  EXPECT_TRUE(fs::exists(records_ + "/stray-file"));
  EXPECT_FALSE(JournalExists());
  EXPECT_TRUE(StrayFiles(out_).empty());
}

TEST_F(PackTest, SplitsByFramedSizeAndNamesShards) {
  for (int i = 0; i < 5; ++i) MakeRecord(records_, absl::StrCat("r", i), i, 1000);
  const uint64_t framed = FramedSize(records_ + "/r0");
  for (int i = 1; i < 5; ++i) ASSERT_EQ(FramedSize(absl::StrCat(records_, "/r", i)), framed);

  PackOptions o = Options();
  o.shard_size = 2 * framed + framed / 2;  // two records fit, three do not
  PackReport report = Pack(o);
  ASSERT_TRUE(report.status.ok()) << report.status;
  EXPECT_THAT(ShardFiles(out_),
              ElementsAre("t-00000-of-00003.tfrecord", "t-00001-of-00003.tfrecord",
                          "t-00002-of-00003.tfrecord"));
  ASSERT_EQ(report.shards.size(), 3u);
  EXPECT_EQ(report.shards[0].records, 2u);
  EXPECT_EQ(report.shards[1].records, 2u);
  EXPECT_EQ(report.shards[2].records, 1u);
  for (const ShardWritten& s : report.shards) {
    EXPECT_EQ(s.bytes, s.records * framed);
    EXPECT_EQ(fs::file_size(s.path), s.bytes);
    EXPECT_LE(s.bytes, o.shard_size);
  }
  std::vector<ReadBack> back = ReadShards(out_);
  ASSERT_EQ(back.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(RecordName(back[i].payload), absl::StrCat("r", i));
    EXPECT_EQ(back[i].shard, ShardName("t", i / 2, 3));
  }
}

TEST_F(PackTest, PacksCompressedShards) {
  // Incompressible images, over 1 MiB per shard: several full flushes.
  // Names and labels of equal width: equal framed sizes, name order = i.
  for (int i = 10; i < 22; ++i) MakeRecord(records_, absl::StrCat("r", i), i, 300 << 10);
  const uint64_t framed = FramedSize(records_ + "/r10");
  for (source::Codec codec : {source::Codec::kGzip, source::Codec::kZlib}) {
    SCOPED_TRACE(source::CodecName(codec));
    const std::string out = absl::StrCat(out_, "/", source::CodecName(codec));
    fs::create_directories(out);
    PackOptions o = Options();
    o.output_dir = out;
    o.remove_packed = false;
    o.compression = codec;
    o.shard_size = 8 * framed;  // shards of 8 and 4 records: shard_size bounds framed bytes
    PackReport report = Pack(o);
    ASSERT_TRUE(report.status.ok()) << report.status;
    const std::string suffix = codec == source::Codec::kGzip ? ".tfrecord.gz" : ".tfrecord.zlib";
    EXPECT_THAT(ShardFiles(out),
                ElementsAre("t-00000-of-00002" + suffix, "t-00001-of-00002" + suffix));
    ASSERT_EQ(report.shards.size(), 2u);
    EXPECT_EQ(report.shards[0].records, 8u);
    EXPECT_EQ(report.shards[1].records, 4u);
    for (const ShardWritten& s : report.shards) {
      EXPECT_EQ(s.codec, codec);
      EXPECT_EQ(s.bytes, s.records * framed);
      EXPECT_EQ(s.file_bytes, fs::file_size(s.path));
      EXPECT_NE(s.file_bytes, s.bytes);
    }
    EXPECT_THAT(report.Summary(),
                HasSubstr(absl::StrCat("t-00000-of-00002", suffix, ": 8 records, ",
                                       report.shards[0].file_bytes, " bytes (",
                                       source::CodecName(codec), " of ", 8 * framed, ")")));
    std::vector<ReadBack> back = ReadShards(out);
    ASSERT_EQ(back.size(), 12u);
    for (int i = 0; i < 12; ++i) EXPECT_EQ(RecordName(back[i].payload), absl::StrCat("r", 10 + i));
    EXPECT_THAT(StrayFiles(out), ElementsAre());
    EXPECT_FALSE(fs::exists(out + "/.tfrecordfs-pack.journal"));
  }
  EXPECT_EQ(Folders(records_).size(), 12u);
}

TEST(ShardNameTest, SuffixPerCodec) {
  EXPECT_EQ(ShardName("p", 1, 12), "p-00001-of-00012.tfrecord");
  EXPECT_EQ(ShardName("p", 1, 12, source::Codec::kGzip), "p-00001-of-00012.tfrecord.gz");
  // TFDS's names when the prefix is TFDS's "<dataset>-<split>.tfrecord".
  EXPECT_EQ(ShardName("mnist-train.tfrecord", 3, 12), "mnist-train.tfrecord-00003-of-00012");
  EXPECT_EQ(ShardName("p", 1, 12, source::Codec::kZlib), "p-00001-of-00012.tfrecord.zlib");
}

TEST_F(PackTest, ExactFitAndOversizedRecords) {
  for (int i = 0; i < 4; ++i) MakeRecord(records_, absl::StrCat("r", i), i, 500);
  const uint64_t framed = FramedSize(records_ + "/r0");
  PackOptions o = Options();
  o.shard_size = 2 * framed;  // exactly two
  o.remove_packed = false;
  PackReport report = Pack(o);
  ASSERT_TRUE(report.status.ok()) << report.status;
  EXPECT_THAT(ShardFiles(out_),
              ElementsAre("t-00000-of-00002.tfrecord", "t-00001-of-00002.tfrecord"));

  // A shard size below one record still packs, one record per shard.
  o.prefix = "tiny";
  o.shard_size = 1;
  report = Pack(o);
  ASSERT_TRUE(report.status.ok()) << report.status;
  ASSERT_EQ(report.shards.size(), 4u);
  for (const ShardWritten& s : report.shards) EXPECT_EQ(s.records, 1u);
  EXPECT_TRUE(fs::exists(out_ + "/tiny-00003-of-00004.tfrecord"));
}

TEST_F(PackTest, RemovePackedFalseKeepsInput) {
  MakeRecord(records_, "a", 1);
  MakeRecord(records_, "b", 2);
  PackOptions o = Options();
  o.remove_packed = false;
  PackReport report = Pack(o);
  ASSERT_TRUE(report.status.ok()) << report.status;
  EXPECT_THAT(Folders(records_), ElementsAre("a", "b"));
  EXPECT_EQ(ReadShards(out_).size(), 2u);
  EXPECT_FALSE(JournalExists());
}

// `cp -r` from the read-only mount leaves 0555 folders and 0444 files; the
// pack must still remove them for their (non-root) owner. Runs the pack in a
// child that drops to an unprivileged uid, since root ignores mode bits.
TEST_F(PackTest, RemovesReadOnlyFoldersForANonRootOwner) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch to an unprivileged uid";
  constexpr uid_t kUid = 65534;
  MakeRecord(records_, "a", 1);
  for (const auto& e : fs::recursive_directory_iterator(root_)) {
    ASSERT_EQ(::lchown(e.path().c_str(), kUid, kUid), 0) << e.path();
  }
  ASSERT_EQ(::chown(root_.c_str(), kUid, kUid), 0);
  for (const auto& e : fs::recursive_directory_iterator(records_ + "/a")) {
    ::chmod(e.path().c_str(), e.is_directory() ? 0555 : 0444);
  }
  ::chmod((records_ + "/a").c_str(), 0555);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::setgid(kUid) != 0 || ::setuid(kUid) != 0) ::_exit(3);
    PackReport report = Pack(Options());
    ::_exit(report.status.ok() && report.left.empty() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(Folders(records_).empty());
  EXPECT_EQ(ReadShards(out_).size(), 1u);
}

TEST_F(PackTest, DefaultPrefixIsUtcTimestamp) {
  MakeRecord(records_, "a", 1);
  PackOptions o = Options();
  o.prefix.clear();
  PackReport report = Pack(o);
  ASSERT_TRUE(report.status.ok()) << report.status;
  std::vector<std::string> files = ShardFiles(out_);
  ASSERT_EQ(files.size(), 1u);
  // staged-yyyymmddThhmmss-00000-of-00001.tfrecord
  EXPECT_THAT(files[0],
              ::testing::MatchesRegex("staged-[0-9]{8}T[0-9]{6}-00000-of-00001\\.tfrecord"));
}

TEST_F(PackTest, NothingValidWritesNothing) {
  MakeInvalidRecord(records_, "bad");
  PackReport report = Pack(Options());
  EXPECT_TRUE(report.status.ok()) << report.status;
  EXPECT_TRUE(report.shards.empty());
  ASSERT_EQ(report.left.size(), 1u);
  EXPECT_THAT(report.Summary(), HasSubstr("nothing packed"));
  EXPECT_TRUE(fs::is_empty(out_));
  EXPECT_FALSE(JournalExists());

  fs::remove_all(records_ + "/bad");
  report = Pack(Options());
  EXPECT_TRUE(report.status.ok());
  EXPECT_TRUE(fs::is_empty(out_));
}

// `mv shard/07/label staging/` leaves a loose file at the top of staging/:
// never packed, never deleted, and named in the summary.
TEST_F(PackTest, LooseFileIsReportedAndKept) {
  MakeRecord(records_, "a", 1);
  WriteFile(records_ + "/label", "7\n");
  PackReport report = Pack(Options());
  ASSERT_TRUE(report.status.ok()) << report.status;
  EXPECT_EQ(report.shards.size(), 1u);
  ASSERT_EQ(report.left.size(), 1u);
  EXPECT_EQ(report.left[0].record, "label");
  EXPECT_THAT(report.Summary(), HasSubstr("label: not in a record folder"));
  EXPECT_TRUE(fs::exists(records_ + "/label"));
}

// ---- Refusals and failures: staging intact, nothing left behind ----

TEST_F(PackTest, RefusesExistingShardName) {
  MakeRecord(records_, "a", 1);
  MakeRecord(records_, "b", 2);
  WriteFile(out_ + "/t-00000-of-00001.tfrecord", "precious");
  PackReport report = Pack(Options());
  EXPECT_EQ(report.status.code(), absl::StatusCode::kAlreadyExists) << report.status;
  EXPECT_THAT(report.status.message(), HasSubstr("t-00000-of-00001.tfrecord"));
  EXPECT_EQ(*ReadFileToString(out_ + "/t-00000-of-00001.tfrecord"), "precious");
  EXPECT_THAT(Folders(records_), ElementsAre("a", "b"));
  EXPECT_FALSE(JournalExists());
  EXPECT_THAT(StrayFiles(out_), ElementsAre());
}

TEST_F(PackTest, RejectsBadOptions) {
  MakeRecord(records_, "a", 1);
  PackOptions o = Options();
  o.prefix = "a/b";
  EXPECT_EQ(Pack(o).status.code(), absl::StatusCode::kInvalidArgument);
  o.prefix = ".hidden";
  EXPECT_EQ(Pack(o).status.code(), absl::StatusCode::kInvalidArgument);
  o.prefix = std::string(300, 'p');
  EXPECT_EQ(Pack(o).status.code(), absl::StatusCode::kInvalidArgument);
  o = Options();
  o.shard_size = 0;
  EXPECT_EQ(Pack(o).status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Folders(records_), ElementsAre("a"));
  EXPECT_TRUE(fs::is_empty(out_));
}

TEST_F(PackTest, MissingOutputDirLeavesStagingIntact) {
  MakeRecord(records_, "a", 1);
  PackOptions o = Options();
  o.output_dir = root_ + "/does-not-exist";
  PackReport report = Pack(o);
  EXPECT_FALSE(report.status.ok());
  EXPECT_THAT(report.status.message(), HasSubstr("does-not-exist"));
  EXPECT_THAT(report.Summary(), HasSubstr("pack failed"));
  EXPECT_THAT(Folders(records_), ElementsAre("a"));
  EXPECT_FALSE(JournalExists());
}

TEST_F(PackTest, OutputUnderRegularFileLeavesStagingIntact) {
  MakeRecord(records_, "a", 1);
  WriteFile(root_ + "/plain", "x");
  PackOptions o = Options();
  o.output_dir = root_ + "/plain/out";
  PackReport report = Pack(o);
  EXPECT_FALSE(report.status.ok());
  EXPECT_THAT(report.status.message(), HasSubstr("plain/out"));
  EXPECT_THAT(Folders(records_), ElementsAre("a"));
  EXPECT_FALSE(JournalExists());
}

TEST_F(PackTest, ReadOnlyOutputDirLeavesStagingIntact) {
  const std::string ro = MountTmpfs("ro", MS_RDONLY, "size=64k");
  if (ro.empty()) GTEST_SKIP() << "cannot mount a read-only tmpfs here: " << std::strerror(errno);
  MakeRecord(records_, "a", 1);
  MakeRecord(records_, "b", 2);
  PackOptions o = Options();
  o.output_dir = ro;
  PackReport report = Pack(o);
  EXPECT_EQ(ErrnoOf(report.status), EROFS) << report.status;
  EXPECT_THAT(report.status.message(), HasSubstr("t-00000-of-00001.tfrecord"));
  EXPECT_TRUE(report.shards.empty());
  EXPECT_THAT(Folders(records_), ElementsAre("a", "b"));
  EXPECT_FALSE(JournalExists());
}

TEST_F(PackTest, DiskFullRemovesTempFileAndLeavesStagingIntact) {
  const std::string full = FiveRecordsAndAFullDisk();
  if (full.empty()) GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
  PackOptions o = Options();
  o.output_dir = full;
  PackReport report = Pack(o);
  EXPECT_EQ(report.status.code(), absl::StatusCode::kResourceExhausted) << report.status;
  EXPECT_EQ(ErrnoOf(report.status), ENOSPC);
  EXPECT_THAT(report.status.message(), HasSubstr("t-00000-of-00001.tfrecord"));
  EXPECT_TRUE(report.shards.empty());
  ExpectNothingPacked(full);
}

TEST_F(PackTest, DiskFullAfterSomeShardsRemovesThemToo) {
  const std::string full = FiveRecordsAndAFullDisk();
  if (full.empty()) GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
  PackOptions o = Options();
  o.output_dir = full;
  o.shard_size = 40000;  // one record per shard: the first fit, a later one does not
  PackReport report = Pack(o);
  EXPECT_EQ(ErrnoOf(report.status), ENOSPC) << report.status;
  EXPECT_THAT(report.status.message(), HasSubstr("-of-00005.tfrecord"));
  EXPECT_FALSE(absl::StrContains(report.status.message(), "t-00000-of-00005.tfrecord"))
      << "the first shard fits; the failure is a later one: " << report.status;
  ExpectNothingPacked(full);
}

TEST_F(PackTest, FolderChangedBetweenPassesFailsThePack) {
  // Pass 1 and pass 2 both build every payload; feature types that answer
  // differently the second time stand in for a folder edited in between.
  WriteFile(records_ + "/a/score", "1\n2\n");
  class ChangingTypes final : public naming::FeatureTypes {
   public:
    naming::FeatureType Lookup(absl::string_view) override {
      return ++calls_ == 1 ? example::Kind::kInt64 : example::Kind::kFloat;
    }

   private:
    int calls_ = 0;
  } types;
  PackOptions o = Options();
  o.types = &types;
  PackReport report = Pack(o);
  EXPECT_EQ(report.status.code(), absl::StatusCode::kFailedPrecondition) << report.status;
  EXPECT_THAT(report.status.message(), HasSubstr("record a changed during the pack"));
  EXPECT_THAT(Folders(records_), ElementsAre("a"));
  EXPECT_TRUE(fs::is_empty(out_));
  EXPECT_FALSE(JournalExists());
}

// ---- ParseSize (src/cli/commands.h: pack --shard-size) ----

TEST(ParseSizeTest, AcceptsBinaryMultiples) {
  EXPECT_EQ(*cli::ParseSize("123"), 123u);
  EXPECT_EQ(*cli::ParseSize("64K"), 64u << 10);
  EXPECT_EQ(*cli::ParseSize("64k"), 64u << 10);
  EXPECT_EQ(*cli::ParseSize("128M"), 128u << 20);
  EXPECT_EQ(*cli::ParseSize("2G"), uint64_t{2} << 30);
  EXPECT_EQ(*cli::ParseSize("1T"), uint64_t{1} << 40);
}

TEST(ParseSizeTest, RejectsZeroAndGarbage) {
  for (const char* bad : {"", "0", "0K", "K", "-1", "+5", "1.5M", "12MB", "M12", " 12", "12 ",
                          "abc", "99999999999999999999", "17179869184G"}) {
    EXPECT_FALSE(cli::ParseSize(bad).ok()) << "'" << bad << "'";
  }
}

// ---- Journal format ----

Journal SampleJournal() {
  Journal j;
  j.state = Journal::State::kPlanned;
  j.records_dir = "/staging/records";
  j.output_dir = "/data/with space";
  j.remove_packed = true;
  j.shards.push_back({"p q-00000-of-00002.tfrecord", 123, {"a", "b\nc", "sp ace"}});
  j.shards.push_back({"p q-00001-of-00002.tfrecord", 45, {"\xff\x01"}});
  return j;
}

TEST(JournalTest, RoundTrip) {
  const Journal j = SampleJournal();
  const std::string text = EncodeJournal(j);
  EXPECT_TRUE(absl::StartsWith(text, "tfrecordfs-pack-journal 1\nstate planned\n")) << text;
  auto back = ParseJournal(text, "j");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->state, Journal::State::kPlanned);
  EXPECT_EQ(back->records_dir, j.records_dir);
  EXPECT_EQ(back->output_dir, j.output_dir);
  EXPECT_TRUE(back->remove_packed);
  ASSERT_EQ(back->shards.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back->shards[i].name, j.shards[i].name);
    EXPECT_EQ(back->shards[i].bytes, j.shards[i].bytes);
    EXPECT_EQ(back->shards[i].records, j.shards[i].records);
  }
  Journal c = j;
  c.state = Journal::State::kCommitted;
  c.remove_packed = false;
  auto cb = ParseJournal(EncodeJournal(c), "j");
  ASSERT_TRUE(cb.ok());
  EXPECT_EQ(cb->state, Journal::State::kCommitted);
  EXPECT_FALSE(cb->remove_packed);
}

TEST(JournalTest, DetectsEveryTruncationAndByteFlip) {
  const std::string text = EncodeJournal(SampleJournal());
  for (size_t n = 0; n < text.size(); ++n) {
    auto r = ParseJournal(text.substr(0, n), "j");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << "truncated to " << n;
  }
  for (size_t i = 0; i < text.size(); ++i) {
    std::string bad = text;
    bad[i] ^= 0x01;
    EXPECT_FALSE(ParseJournal(bad, "j").ok()) << "flip at " << i;
  }
  EXPECT_FALSE(ParseJournal(text + "x\n", "j").ok());
}

TEST(JournalTest, NewerVersionIsRefused) {
  // A well-formed (checksummed) journal of version 2.
  std::string body = "tfrecordfs-pack-journal 2\nstate planned\n";
  char crc[16];
  std::snprintf(crc, sizeof crc, "%08x", crc32c::Value(body));
  auto r = ParseJournal(absl::StrCat(body, "crc32c ", crc, "\n"), "j");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
}

// ---- Recover ----

TEST_F(PackTest, RecoverWithoutJournalDoesNothing) {
  MakeRecord(records_, "a", 1);
  EXPECT_TRUE(Recover(journal_, records_).ok());
  EXPECT_THAT(Folders(records_), ElementsAre("a"));
}

TEST_F(PackTest, RecoverRefusesATornJournalAndTouchesNothing) {
  MakeRecord(records_, "a", 1);
  MakeRecord(records_, "b", 2);
  Journal j = JournalIn(Journal::State::kCommitted);
  j.shards.push_back({"t-00000-of-00001.tfrecord", 10, {"a", "b"}});
  WriteFile(out_ + "/t-00000-of-00001.tfrecord", "0123456789");
  const std::string text = EncodeJournal(j);
  WriteFile(journal_, text.substr(0, text.size() - 20));
  absl::Status s = Recover(journal_, records_);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr(journal_));
  EXPECT_THAT(Folders(records_), ElementsAre("a", "b"));
  EXPECT_TRUE(JournalExists());
  // A pack refuses to start on top of it.
  PackReport report = Pack(Options());
  EXPECT_EQ(report.status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Folders(records_), ElementsAre("a", "b"));

  // Intact, it rolls forward.
  WriteFile(journal_, text);
  EXPECT_TRUE(Recover(journal_, records_).ok());
  EXPECT_THAT(Folders(records_), ElementsAre());
  EXPECT_FALSE(JournalExists());
}

TEST_F(PackTest, RecoverRefusesCommittedJournalWithMissingShard) {
  MakeRecord(records_, "a", 1);
  Journal j = JournalIn(Journal::State::kCommitted);
  j.shards.push_back({"t-00000-of-00001.tfrecord", 10, {"a"}});
  WriteFile(journal_, EncodeJournal(j));
  absl::Status s = Recover(journal_, records_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(Folders(records_), ElementsAre("a"));
}

TEST_F(PackTest, RecoverRefusesAnotherRecordsDir) {
  MakeRecord(records_, "a", 1);
  fs::create_directories(root_ + "/other");
  Journal j;
  j.state = Journal::State::kCommitted;
  j.records_dir = root_ + "/other";
  j.output_dir = fs::canonical(out_).string();
  j.shards.push_back({"t-00000-of-00001.tfrecord", 10, {"a"}});
  WriteFile(out_ + "/t-00000-of-00001.tfrecord", "0123456789");
  WriteFile(journal_, EncodeJournal(j));
  EXPECT_EQ(Recover(journal_, records_).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Folders(records_), ElementsAre("a"));
}

// Recovery deletes what a journal names: a journal with a valid checksum
// that names a record "../victim" or a shard "../../x" (no pack writes
// those) is refused as damaged, and nothing outside the store is touched.
TEST_F(PackTest, RecoverRefusesNamesThatLeaveTheirDirectory) {
  MakeRecord(records_, "a", 1);
  fs::create_directories(root_ + "/victim");
  WriteFile(root_ + "/victim/keep", "x");
  WriteFile(root_ + "/outside.tfrecord", "y");
  const std::string canon_out = fs::canonical(out_).string();
  const std::string rel_out = fs::relative(fs::canonical(root_), canon_out).string();
  for (const auto& [state, shard, record] :
       std::vector<std::tuple<Journal::State, std::string, std::string>>{
           {Journal::State::kCommitted, "t-00000-of-00001.tfrecord", "../victim"},
           {Journal::State::kCommitted, "t-00000-of-00001.tfrecord", ".."},
           {Journal::State::kPlanned, rel_out + "/outside.tfrecord", "a"},
           {Journal::State::kPlanned, ".", "a"}}) {
    SCOPED_TRACE(shard + " " + record);
    Journal j;
    j.state = state;
    j.records_dir = fs::canonical(records_).string();
    j.output_dir = canon_out;
    j.shards.push_back({shard, 10, {"a", record}});
    WriteFile(out_ + "/t-00000-of-00001.tfrecord", "0123456789");
    WriteFile(journal_, EncodeJournal(j));  // checksummed: only the names are wrong
    absl::Status s = Recover(journal_, records_);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_THAT(s.message(), HasSubstr("not one path component"));
    EXPECT_THAT(s.message(), HasSubstr(journal_));
    EXPECT_TRUE(fs::exists(root_ + "/victim/keep"));
    EXPECT_TRUE(fs::exists(root_ + "/outside.tfrecord"));
    EXPECT_THAT(Folders(records_), ElementsAre("a"));
    EXPECT_TRUE(JournalExists());
  }
  Journal j;  // a relative directory is refused the same way
  j.records_dir = "records";
  j.output_dir = canon_out;
  WriteFile(journal_, EncodeJournal(j));
  absl::Status s = Recover(journal_, records_);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("not an absolute path"));
}

TEST_F(PackTest, RecoverRemovesStaleJournalTempFiles) {
  WriteFile(journal_ + ".tmp.12345", "half a journal");
  EXPECT_TRUE(Recover(journal_, records_).ok());
  EXPECT_FALSE(fs::exists(journal_ + ".tmp.12345"));
}

// ---- Crash tests: SIGKILL at every fault point, then recover ----

struct CrashCase {
  const char* fault;
  bool remove_packed;
  source::Codec codec = source::Codec::kNone;
};

class CrashTest : public PackTest, public ::testing::WithParamInterface<CrashCase> {
 protected:
  static constexpr int kRecords = 7;

  void SetUp() override {
    PackTest::SetUp();
    for (int i = 0; i < kRecords; ++i) MakeRecord(records_, absl::StrCat("r", i), i, 2000);
    MakeInvalidRecord(records_, "zz-invalid");
    framed_ = FramedSize(records_ + "/r0");
  }

  PackOptions CrashOptions() const {
    PackOptions o = Options();
    o.shard_size = 3 * framed_;  // shards of 3, 3, 1 records
    o.remove_packed = GetParam().remove_packed;
    o.compression = GetParam().codec;
    if (!o.remove_packed) o.journal_path = out_ + "/.tfrecordfs-pack.journal";
    return o;
  }

  // Runs Pack in a child with TFRECORDFS_FAULT set; returns the wait status.
  int PackAndDie(const PackOptions& o) {
    std::fflush(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("TFRECORDFS_FAULT", GetParam().fault, 1);
      PackReport report = Pack(o);
      ::_exit(report.status.ok() ? 10 : 11);  // not reached when the fault fires
    }
    int status = 0;
    EXPECT_EQ(::waitpid(pid, &status, 0), pid);
    return status;
  }

  uint64_t framed_ = 0;
};

TEST_P(CrashTest, RecoverThenPackGivesEveryRecordExactlyOnce) {
  const PackOptions o = CrashOptions();
  const int status = PackAndDie(o);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the child was not killed at " << GetParam().fault << " (status " << status << ")";

  // What a crash leaves is never a partial shard under a final name: each
  // one decompresses (if compressed) to whole, clean records.
  for (const std::string& name : ShardFiles(out_)) {
    EXPECT_TRUE(absl::EndsWith(name, ShardSuffix(o.compression))) << name;
    auto contents = ReadFileToString(out_ + "/" + name);
    ASSERT_TRUE(contents.ok());
    if (o.compression != source::Codec::kNone) {
      auto plain = InflateOneStream(*contents);
      ASSERT_TRUE(plain.has_value()) << name << " is a partial compressed stream";
      *contents = std::move(*plain);
    }
    EXPECT_TRUE(record::ForEachRecordInBuffer(*contents, [](uint64_t, absl::string_view) {}).ok())
        << name;
  }

  ASSERT_TRUE(Recover(o.journal_path, o.records_dir).ok());
  ASSERT_TRUE(Recover(o.journal_path, o.records_dir).ok());  // idempotent
  EXPECT_FALSE(fs::exists(o.journal_path));

  const bool committed = absl::StrContains(GetParam().fault, "commit") &&
                         std::string(GetParam().fault) != "before_commit";
  const bool done = committed || std::string(GetParam().fault) == "mid_delete";
  if (!(done && !o.remove_packed)) {
    // Offline input is never removed, so packing again after a committed
    // pack would pack it twice, as a second `pack` run would.
    PackReport report = Pack(o);
    ASSERT_TRUE(report.status.ok()) << report.status;
    ASSERT_EQ(report.left.size(), 1u);
    if (done) {
      EXPECT_TRUE(report.shards.empty()) << report.Summary();
    }
  }

  std::multiset<std::string> packed;
  for (const ReadBack& r : ReadShards(out_)) packed.insert(RecordName(r.payload));
  std::multiset<std::string> expected;
  for (int i = 0; i < kRecords; ++i) expected.insert(absl::StrCat("r", i));
  EXPECT_EQ(packed, expected);
  EXPECT_THAT(ShardFiles(out_),
              ElementsAre(ShardName("t", 0, 3, o.compression), ShardName("t", 1, 3, o.compression),
                          ShardName("t", 2, 3, o.compression)));
  EXPECT_THAT(StrayFiles(out_), ElementsAre());
  if (o.remove_packed) {
    EXPECT_THAT(Folders(records_), ElementsAre("zz-invalid"));
  } else {
    EXPECT_EQ(Folders(records_).size(), kRecords + 1u);
  }
  EXPECT_FALSE(fs::exists(o.journal_path));
}

INSTANTIATE_TEST_SUITE_P(
    FaultPoints, CrashTest,
    ::testing::Values(CrashCase{"after_journal", true}, CrashCase{"mid_shard", true},
                      CrashCase{"after_shard:1", true}, CrashCase{"after_shard:2", true},
                      CrashCase{"after_shard:3", true}, CrashCase{"before_commit", true},
                      CrashCase{"after_commit", true}, CrashCase{"mid_delete", true},
                      CrashCase{"mid_shard", false}, CrashCase{"after_shard:2", false},
                      CrashCase{"after_commit", false},
                      // Compressed output: the same protocol, other names.
                      CrashCase{"mid_shard", true, source::Codec::kGzip},
                      CrashCase{"after_shard:1", true, source::Codec::kGzip},
                      CrashCase{"before_commit", true, source::Codec::kGzip},
                      CrashCase{"mid_delete", true, source::Codec::kGzip},
                      CrashCase{"mid_shard", true, source::Codec::kZlib},
                      CrashCase{"after_shard:2", false, source::Codec::kZlib},
                      CrashCase{"after_commit", true, source::Codec::kZlib}),
    [](const ::testing::TestParamInfo<CrashCase>& info) {
      std::string name = info.param.fault;
      std::replace(name.begin(), name.end(), ':', '_');
      if (info.param.codec != source::Codec::kNone) {
        name += "_" + std::string(source::CodecName(info.param.codec));
      }
      return name + (info.param.remove_packed ? "" : "_offline");
    });

// ---- The `tfrecordfs pack` command ----

class PackCommandTest : public PackTest {
 protected:
  int Run(std::vector<std::string> args, std::string* out = nullptr) {
    args.insert(args.begin(), "pack");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::testing::internal::CaptureStdout();
    int rc = cli::PackMain(static_cast<int>(args.size()), argv.data());
    std::string captured = ::testing::internal::GetCapturedStdout();
    if (out) *out = captured;
    return rc;
  }
};

TEST_F(PackCommandTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Run({}), 2);
  EXPECT_EQ(Run({records_}), 2);
  EXPECT_EQ(Run({records_, out_, "extra"}), 2);
  EXPECT_EQ(Run({"--bogus", records_, out_}), 2);
  EXPECT_EQ(Run({"--shard-size", "0", records_, out_}), 2);
  EXPECT_EQ(Run({"--shard-size=12Q", records_, out_}), 2);
  EXPECT_EQ(Run({"--prefix", "a/b", records_, out_}), 2);
  EXPECT_EQ(Run({records_, out_, "--prefix"}), 2);
  EXPECT_EQ(Run({"--compression", "gz", records_, out_}), 2);
  EXPECT_EQ(Run({"--compression=GZIP", records_, out_}), 2);
  EXPECT_EQ(Run({records_, out_, "--compression"}), 2);
  EXPECT_TRUE(fs::is_empty(out_));
}

TEST_F(PackCommandTest, HelpExitsZero) {
  std::string out;
  EXPECT_EQ(Run({"--help"}, &out), 0);
  EXPECT_THAT(out, HasSubstr("Usage: tfrecordfs pack"));
}

TEST_F(PackCommandTest, PacksOfflineWithoutTouchingInput) {
  MakeRecord(records_, "a", 1, 1000);
  MakeRecord(records_, "b", 2, 1000);
  std::string out;
  EXPECT_EQ(Run({"--shard-size", "1K", "--prefix=x", records_, out_}, &out), 0);
  EXPECT_THAT(out, HasSubstr("x-00000-of-00002.tfrecord: 1 record"));
  EXPECT_THAT(out, HasSubstr("packed 2 records into 2 shards"));
  EXPECT_THAT(ShardFiles(out_),
              ElementsAre("x-00000-of-00002.tfrecord", "x-00001-of-00002.tfrecord"));
  EXPECT_THAT(Folders(records_), ElementsAre("a", "b"));
  EXPECT_THAT(StrayFiles(out_), ElementsAre());

  // Same names again: refused, exit 1, nothing changed.
  // The error is said once, on stderr (ToolboxTest.PackSaysItsErrorOnceOnStderr).
  EXPECT_EQ(Run({"--shard-size", "1K", "--prefix=x", records_, out_}, &out), 1);
  EXPECT_THAT(out, Not(HasSubstr("already exists")));
}

TEST_F(PackCommandTest, CompressionFlag) {
  MakeRecord(records_, "a", 1, 1000);
  std::string out;
  EXPECT_EQ(Run({"--compression", "gzip", "--prefix=g", records_, out_}, &out), 0);
  EXPECT_EQ(Run({"--compression=zlib", "--prefix=z", records_, out_}, &out), 0);
  EXPECT_THAT(out, HasSubstr("(zlib of "));
  EXPECT_EQ(Run({"--compression=none", "--prefix=n", records_, out_}, &out), 0);
  EXPECT_THAT(ShardFiles(out_),
              ElementsAre("g-00000-of-00001.tfrecord.gz", "n-00000-of-00001.tfrecord",
                          "z-00000-of-00001.tfrecord.zlib"));
  std::vector<ReadBack> back = ReadShards(out_);
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[0].payload, back[1].payload);
  EXPECT_EQ(back[0].payload, back[2].payload);
}

TEST_F(PackCommandTest, InvalidRecordExitsOne) {
  MakeRecord(records_, "a", 1);
  MakeInvalidRecord(records_, "bad");
  std::string out;
  EXPECT_EQ(Run({"--prefix", "y", records_, out_}, &out), 1);
  EXPECT_THAT(out, HasSubstr("1 record left staged"));
  EXPECT_THAT(out, HasSubstr("bad: "));
  EXPECT_THAT(ShardFiles(out_), ElementsAre("y-00000-of-00001.tfrecord"));
}

TEST_F(PackCommandTest, RecoversAnInterruptedOfflinePack) {
  MakeRecord(records_, "a", 1);
  // A leftover of a killed run: planned journal, a temp file, a shard.
  Journal j = JournalIn(Journal::State::kPlanned);
  j.remove_packed = false;
  j.shards.push_back({"z-00000-of-00002.tfrecord", 10, {"a"}});
  j.shards.push_back({"z-00001-of-00002.tfrecord", 10, {"b"}});
  WriteFile(out_ + "/z-00000-of-00002.tfrecord", "0123456789");
  WriteFile(out_ + "/.z-00001-of-00002.tfrecord.tmp", "01234");
  WriteFile(out_ + "/.tfrecordfs-pack.journal", EncodeJournal(j));
  EXPECT_EQ(Run({"--prefix", "z", records_, out_}), 0);
  EXPECT_THAT(ShardFiles(out_), ElementsAre("z-00000-of-00001.tfrecord"));
  EXPECT_THAT(StrayFiles(out_), ElementsAre());
}

// One record framed by hand (TFRecord's format), its data CRC wrong when
// `bad_crc`.
std::string FrameByHand(absl::string_view data, bool bad_crc = false) {
  std::string out(record::kHeaderSize, '\0');
  EncodeFixed64(out.data(), data.size());
  EncodeFixed32(out.data() + 8, crc32c::Mask(crc32c::Value(out.data(), 8)));
  out.append(data.data(), data.size());
  char footer[4];
  EncodeFixed32(footer, crc32c::Mask(crc32c::Value(data)) ^ (bad_crc ? 1u : 0u));
  out.append(footer, sizeof footer);
  return out;
}

// The check after write of a compressed shard checks both CRCs of every
// record in the one inflate pass of its scan (it read every record back
// through a second inflate pass before): a clean GZIP or ZLIB stream with
// an empty record and one larger than the scan's 1 MiB chunks passes; the
// same stream with one record's data CRC wrong (its GZIP CRC-32 right, so
// only the record check can see it) fails, naming the file, the record and
// its offset.
TEST(CheckWrittenShardTest, ChecksEveryRecordsCrcsInTheScansPass) {
  test::TempDir dir("check_shard");
  const std::string big(1500000, 'q');
  for (const bool gzip : {true, false}) {
    const source::Codec codec = gzip ? source::Codec::kGzip : source::Codec::kZlib;
    const auto wrap = gzip ? reference::zlib::Wrap::kGzip : reference::zlib::Wrap::kZlib;
    const std::string good =
        FrameByHand("first") + FrameByHand("") + FrameByHand(big) + FrameByHand("last");
    const std::string path = dir.Join(gzip ? "good.tfrecord.gz" : "good.tfrecord.zz");
    test::WriteFile(path, reference::zlib::Deflate(good, wrap));
    EXPECT_EQ(CheckWrittenShard(path, good.size(), 4, codec), absl::OkStatus());

    for (const int bad_at : {2, 3}) {
      const std::string bad = FrameByHand("first") + FrameByHand("") +
                              FrameByHand(big, bad_at == 2) + FrameByHand("last", bad_at == 3);
      const std::string bad_path = dir.Join(absl::StrCat("bad", bad_at, gzip ? ".gz" : ".zz"));
      test::WriteFile(bad_path, reference::zlib::Deflate(bad, wrap));
      const absl::Status s = CheckWrittenShard(bad_path, bad.size(), 4, codec);
      EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
      const uint64_t offset = bad_at == 2 ? 2 * record::kFramingOverhead + 5
                                          : 3 * record::kFramingOverhead + 5 + big.size();
      EXPECT_THAT(
          std::string(s.message()),
          ::testing::AllOf(::testing::HasSubstr(bad_path),
                           ::testing::HasSubstr(absl::StrCat("data CRC of record ", bad_at)),
                           ::testing::HasSubstr(absl::StrCat("byte offset ", offset))))
          << s;
    }
  }
}

}  // namespace
}  // namespace tfrecordfs::repack
