// Hostile input through a real mount: the damaged corpus of
// `tfrecordfs-gen hostile` (truncations, stray bytes, CRC mismatches, a length
// near 2^64, empty and non-TFRecord files, non-Example payloads, malformed
// protobuf, wire-format variants, awkward names, a record too wide to show and
// a million tiny records) is mounted once, and every record must tell the
// truth: intact records read exactly as a direct read lays them out, damaged
// ones fail with EIO and the log names shard, record and byte offset,
// non-Examples show their payload as record.bin, names are escaped as
// naming.h says, and the daemon stays up with bounded memory throughout.
//
// The manifest (OUTDIR/MANIFEST.txt) is the generator's statement of what it
// wrote; the expected names below are written out by hand from the rules in
// naming.h, not computed by the naming code.
//
// $TFRECORDFS_HOSTILE_TINY_RECORDS overrides the size of the tiny-records
// shard (default 1000000).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "expectations.h"
#include "gtest/gtest.h"
#include "mount_harness.h"
#include "testing/shard.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/example/record.h"
#include "tfrecordfs/example/sequence.h"
#include "tfrecordfs/record/writer.h"

namespace tfrecordfs::mount_test {
namespace {

struct ManifestRecord {
  uint64_t index = 0;
  bool intact = true;
  bool example = true;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t crc = 0;
};
struct ManifestShard {
  uint64_t count = 0;
  std::vector<ManifestRecord> records;
};
struct Manifest {
  std::map<std::string, ManifestShard> shards;
  std::map<std::string, uint64_t> plain;  // name -> size
  std::string tiny_name;
  uint64_t tiny_count = 0;
};

Manifest ParseManifest(const std::string& text) {
  Manifest m;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (line[0] == '#') continue;
    std::vector<std::string> f = absl::StrSplit(line, '\t');
    if (f[0] == "shard" && f.size() == 3) {
      EXPECT_TRUE(absl::SimpleAtoi(f[2], &m.shards[f[1]].count)) << line;
    } else if (f[0] == "record" && f.size() == 8) {
      ManifestRecord r;
      EXPECT_TRUE(absl::SimpleAtoi(f[2], &r.index));
      r.intact = f[3] == "ok";
      r.example = f[4] == "example";
      EXPECT_TRUE(absl::SimpleAtoi(f[5], &r.offset));
      EXPECT_TRUE(absl::SimpleAtoi(f[6], &r.size));
      EXPECT_TRUE(absl::SimpleHexAtoi(f[7], &r.crc));
      m.shards[f[1]].records.push_back(r);
    } else if (f[0] == "plain" && f.size() == 3) {
      EXPECT_TRUE(absl::SimpleAtoi(f[2], &m.plain[f[1]]));
    } else if (f[0] == "tiny" && f.size() == 3) {
      m.tiny_name = f[1];
      EXPECT_TRUE(absl::SimpleAtoi(f[2], &m.tiny_count));
    } else {
      ADD_FAILURE() << "bad manifest line: " << line;
    }
  }
  return m;
}

// The daemon's VmRSS limit for the whole corpus, a million records included.
constexpr long kRssLimitKiB = (kSanitized ? 1024 : 256) * 1024;

// Lists a directory; *err gets the errno of opendir/readdir (0 if fine).
std::vector<std::string> List(const std::string& dir, int* err) {
  std::vector<std::string> names;
  *err = 0;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    *err = errno;
    return names;
  }
  for (;;) {
    errno = 0;
    dirent* e = ::readdir(d);
    if (e == nullptr) {
      *err = errno;
      break;
    }
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  return names;
}

int StatErrno(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? 0 : errno;
}

int ReadErrno(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buf[4096];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  const int err = n < 0 ? errno : 0;
  ::close(fd);
  return err;
}

uint64_t TinyCount() {
  const char* e = std::getenv("TFRECORDFS_HOSTILE_TINY_RECORDS");
  uint64_t n = 1000000;
  if (e != nullptr && *e != '\0' && !absl::SimpleAtoi(e, &n)) n = 1000000;
  return n;
}

class HostileMountTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!FuseUnavailableReason().empty()) return;
    tmp_ = new TempDir();
    src_ = std::filesystem::canonical(tmp_->Subdir("src")).string();
    const char* gen = std::getenv("TFRECORDFS_GEN");
    ASSERT_NE(gen, nullptr) << "$TFRECORDFS_GEN (the tfrecordfs-gen binary) is not set";
    CommandResult r =
        mount_test::Run({gen, "hostile", src_, "--records", std::to_string(TinyCount())});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    manifest_ = new Manifest(ParseManifest(ReadWholeFile(src_ + "/MANIFEST.txt")));
    mount_ = new Mount();
    const absl::Status err = mount_->Start({src_}, {"-o", "staging_dir=" + tmp_->Subdir("store")});
    ASSERT_TRUE(err.ok()) << err;
    start_rss_ = RssKiB(mount_->pid());
  }

  static void TearDownTestSuite() {
    if (mount_ != nullptr && mount_->pid() > 0) {
      std::string err;
      EXPECT_EQ(mount_->Stop(&err), 0) << err << "\nstderr:\n" << mount_->Stderr();
    }
    delete mount_;
    delete manifest_;
    delete tmp_;
    mount_ = nullptr;
    manifest_ = nullptr;
    tmp_ = nullptr;
  }

  void SetUp() override {
    TFRFS_SKIP_WITHOUT_FUSE();
    ASSERT_NE(mount_, nullptr);
    ASSERT_GT(mount_->pid(), 0);
  }

  // After every test: the daemon is alive and still serves the root.
  void TearDown() override {
    if (mount_ == nullptr || mount_->pid() <= 0) return;
    EXPECT_EQ(::kill(mount_->pid(), 0), 0) << "daemon died; stderr:\n" << mount_->Stderr();
    EXPECT_TRUE(IsMounted(mount_->mountpoint(), "fuse.tfrecordfs"));
    EXPECT_EQ(StatErrno(mount_->mountpoint()), 0);
  }

  static std::string M(const std::string& rel) { return mount_->path(rel); }
  static std::string S(const std::string& rel) { return src_ + "/" + rel; }
  static std::string Rec(const std::string& shard, uint64_t i) {
    return shard + "/" + RecordDirName(i, manifest_->shards.at(shard).count);
  }
  // File paths of a record directory (relative to it, "a/b"), sorted.
  static std::set<std::string> Files(const std::string& rec) {
    std::set<std::string> out;
    for (const auto& [rel, node] : WalkTree(M(rec), false)) {
      EXPECT_EQ(node.error, 0) << rec << "/" << rel;
      out.insert(S_ISDIR(node.mode) ? rel + "/" : rel);
    }
    return out;
  }

  static TempDir* tmp_;
  static std::string src_;
  static Manifest* manifest_;
  static Mount* mount_;
  static long start_rss_;
};

TempDir* HostileMountTest::tmp_ = nullptr;
std::string HostileMountTest::src_;
Manifest* HostileMountTest::manifest_ = nullptr;
Mount* HostileMountTest::mount_ = nullptr;
long HostileMountTest::start_rss_ = -1;

TEST_F(HostileMountTest, RootShowsEveryCaseShardsAsDirectoriesOthersAsPlainFiles) {
  int err;
  std::vector<std::string> names = List(mount_->mountpoint(), &err);
  ASSERT_EQ(err, 0);
  std::set<std::string> want = {"MANIFEST.txt", "staging"};
  for (const auto& [name, s] : manifest_->shards) want.insert(name);
  for (const auto& [name, size] : manifest_->plain) want.insert(name);
  if (!manifest_->tiny_name.empty()) want.insert(manifest_->tiny_name);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), want);

  for (const auto& [name, s] : manifest_->shards) {
    struct stat st;
    ASSERT_EQ(::stat(M(name).c_str(), &st), 0) << name;
    EXPECT_TRUE(S_ISDIR(st.st_mode)) << name << " should show as a shard directory";
  }
  // Files that are not shards, two of them named like one: byte for byte.
  for (const auto& [name, size] : manifest_->plain) {
    struct stat st;
    ASSERT_EQ(::stat(M(name).c_str(), &st), 0) << name;
    EXPECT_EQ(st.st_mode, S_IFREG | 0444u) << name;
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), size) << name;
    EXPECT_TRUE(ReadWholeFile(M(name)) == ReadWholeFile(S(name))) << name;
  }
  const std::string log = mount_->Stderr();
  for (const char* shard_like : {"not_a_tfrecord.tfrecord", "part-00000-of-00004"}) {
    EXPECT_NE(log.find(S(shard_like) + ": named like a TFRecord shard"), std::string::npos)
        << shard_like << "\n"
        << log;
  }
  // A GZIP header over garbage: compressed, but no TFRecord inside.
  EXPECT_NE(log.find(S("compressed.tfrecord.gz") + ": a gzip stream whose first 12 decompressed "
                                                   "bytes are not a record header"),
            std::string::npos)
      << log;
}

// Every record of every shard: intact ones read exactly as the payload lays
// out, damaged ones are listed but fail with EIO, and the log says where.
TEST_F(HostileMountTest, EveryRecordTellsTheTruth) {
  for (const auto& [name, shard] : manifest_->shards) {
    SCOPED_TRACE(name);
    int err;
    std::vector<std::string> listed = List(M(name), &err);
    ASSERT_EQ(err, 0);
    ASSERT_EQ(listed.size(), shard.count);
    ASSERT_EQ(shard.records.size(), shard.count);
    std::vector<std::string> want_names;
    for (uint64_t i = 0; i < shard.count; ++i) want_names.push_back(RecordDirName(i, shard.count));
    std::sort(listed.begin(), listed.end());
    EXPECT_EQ(listed, want_names);

    const DirectShard direct = ReadShardDirectly(S(name));
    ASSERT_EQ(direct.error, "");
    ASSERT_EQ(direct.payloads.size(), shard.count) << "a direct walk disagrees with the manifest";
    for (const ManifestRecord& r : shard.records) {
      const std::string rec = Rec(name, r.index);
      SCOPED_TRACE(rec);
      EXPECT_EQ(direct.offsets[r.index], r.offset);
      if (!r.intact) {
        EXPECT_FALSE(direct.payloads[r.index].has_value());
        EXPECT_EQ(StatErrno(M(rec)), 0) << "a damaged record is still listed";
        List(M(rec), &err);
        EXPECT_EQ(err, EIO) << "listing a damaged record: " << std::strerror(err);
        EXPECT_EQ(StatErrno(M(rec + "/id")), EIO);
        const std::string where =
            absl::StrCat(S(name), ": record ", r.index, " at byte offset ", r.offset, ": ");
        EXPECT_NE(mount_->Stderr().find(where), std::string::npos)
            << "no log line starting '" << where << "'";
        continue;
      }
      ASSERT_TRUE(direct.payloads[r.index].has_value()) << direct.record_errors[r.index];
      const std::string& payload = *direct.payloads[r.index];
      EXPECT_EQ(payload.size(), r.size);
      EXPECT_EQ(crc32c::Value(payload), r.crc) << "the checked read changed the payload";
      // A SequenceExample (not an Example, so "other" in the manifest) shows
      // as context/ + feature_lists/ folders, laid out like the rest below.
      const bool sequence = example::DecodeSequenceExample(payload).ok();
      if (sequence) {
        EXPECT_EQ(Files(rec).count("feature_lists/"), 1u);
      }
      // So does an ExampleListWithContext, as context/ + examples/.
      const bool list = example::DecodeRecord(payload).kind == example::PayloadKind::kExampleList;
      if (list) {
        EXPECT_EQ(Files(rec).count("examples/"), 1u);
      }
      if (!r.example && !sequence && !list) {
        EXPECT_EQ(Files(rec), std::set<std::string>{"record.bin"});
        EXPECT_TRUE(ReadWholeFile(M(rec + "/record.bin")) == payload);
        continue;
      }
      ExpectedTree expected;
      expected[rec] = ExpectedNode{true, ""};
      AddRecordLayout(rec, payload, &expected);
      const auto walked = WalkTree(M(rec));
      EXPECT_EQ(CompareTrees(expected, walked, rec), 0u);
      // The layout of an Example never falls back to record.bin here.
      if (expected.size() == 2) {
        EXPECT_EQ(expected.count(rec + "/record.bin"), 0u);
      }
    }
  }
}

TEST_F(HostileMountTest, DamageIsLoggedWithShardPathAndByteOffset) {
  const std::string log = mount_->Stderr();
  const std::vector<std::pair<std::string, uint64_t>> damaged = {
      {"truncated_header.tfrecord", 159},   {"truncated_payload.tfrecord", 159},
      {"truncated_data_crc.tfrecord", 159}, {"stray_bytes_01.tfrecord", 106},
      {"stray_bytes_11.tfrecord", 106},     {"length_crc_mismatch.tfrecord", 106},
      {"huge_length.tfrecord", 106},        {"huge_length_last.tfrecord", 106},
  };
  for (const auto& [name, offset] : damaged) {
    const std::string want = absl::StrCat(S(name), ": byte offset ", offset, ": ");
    EXPECT_NE(log.find(want), std::string::npos) << "no warning '" << want << "'\n" << log;
  }
  for (int n = 1; n <= 11; ++n) {
    const std::string want = absl::StrFormat("%s: byte offset 106: %d stray byte(s)",
                                             S(absl::StrFormat("stray_bytes_%02d.tfrecord", n)), n);
    // Fewer than 12 bytes cannot even hold a header.
    EXPECT_NE(log.find(want), std::string::npos) << want;
  }
  // Intact shards log nothing.
  EXPECT_EQ(log.find(S("wire_variants.tfrecord")), std::string::npos);
  EXPECT_EQ(log.find(S("empty.tfrecord")), std::string::npos);
}

TEST_F(HostileMountTest, EmptyAndZeroLengthRecords) {
  int err;
  EXPECT_TRUE(List(M("empty.tfrecord"), &err).empty());
  EXPECT_EQ(err, 0);
  EXPECT_EQ(StatErrno(M("empty.tfrecord/0")), ENOENT);
  // A zero-length payload is an Example with no features: an empty folder.
  EXPECT_TRUE(Files("zero_length.tfrecord/1").empty());
  EXPECT_EQ(ReadWholeFile(M("zero_length.tfrecord/0/id")), "0\n");
  EXPECT_EQ(ReadWholeFile(M("zero_length.tfrecord/2/id")), "2\n");
}

// Wire-format variants, decoded as TensorFlow's parser decodes them.
TEST_F(HostileMountTest, WireVariantsDecodeLikeTensorFlow) {
  const std::string s = "wire_variants.tfrecord/";
  auto file = [&](const std::string& rel) { return ReadWholeFile(M(s + rel)); };
  EXPECT_EQ(Files(s + "00"), std::set<std::string>{"ids"});
  EXPECT_EQ(file("00/ids"), "1\n2\n3\n");                      // unpacked int64
  EXPECT_EQ(file("01/xs"), "1.5\n-2.0\n");                     // unpacked float
  EXPECT_EQ(file("02/ids"), "1\n2\n3\n");                      // two packed runs
  EXPECT_EQ(file("03/xs"), "0.5\n0.25\n8.0\n16.0\n");          // packed, unpacked, packed
  EXPECT_EQ(Files(s + "04"), std::set<std::string>{"k.txt"});  // duplicate key: last wins
  EXPECT_EQ(file("04/k.txt"), "last\n");
  EXPECT_EQ(Files(s + "05"), (std::set<std::string>{"b.txt", "f", "i"}));  // empty lists
  EXPECT_EQ(file("05/b.txt"), "");
  EXPECT_EQ(file("05/f"), "");
  EXPECT_EQ(file("05/i"), "");
  // Kindless (an empty Feature{}, an entry without a value): empty `.none` files.
  EXPECT_EQ(Files(s + "06"), (std::set<std::string>{"missing.none", "novalue.none", "present"}));
  EXPECT_EQ(file("06/missing.none"), "");
  EXPECT_EQ(file("06/present"), "7\n");
  EXPECT_EQ(Files(s + "07"), (std::set<std::string>{"a", "b"}));  // features merged
  EXPECT_EQ(Files(s + "08"), (std::set<std::string>{"m", "v.txt"}));
  EXPECT_EQ(file("08/m"), "1\n2\n");   // a value given twice merges
  EXPECT_EQ(file("08/v.txt"), "x\n");  // a later kind replaces (oneof)
  EXPECT_EQ(file("09/n"), "-1\n-9223372036854775808\n9223372036854775807\n");
  EXPECT_TRUE(Files(s + "10").empty());
  EXPECT_TRUE(Files(s + "11").empty());
}

// Awkward feature names, escaped as naming.h says (written out by hand).
TEST_F(HostileMountTest, AwkwardNamesAreEscapedAndReversible) {
  const std::string x200(200, 'x'), x100(100, 'x');
  std::string e100, e50;
  for (int i = 0; i < 100; ++i) e100 += "\xc3\xa9";
  for (int i = 0; i < 50; ++i) e50 += "\xc3\xa9";
  const std::vector<std::set<std::string>> want = {
      {"%-"},                               // ""
      {"%2E"},                              // "."
      {"%2E%2E"},                           // ".."
      {x200 + "%+/", x200 + "%+/" + x100},  // 300 x's: cut at 200
      {"%2Flead"},                          // "/lead": an empty component, not split
      {"trail%2F"},                         // "trail/"
      {"a%2F%2Fb"},                         // "a//b"
      {"nul%00byte"},                       // NUL
      {"ctl%01%7F"},                        // control bytes
      {"100%25"},                           // '%'
      {"a/", "a/b/", "a/b/c"},              // nested
      {"trailing%7E"},                      // a trailing '~' (backups are skipped)
      {"%2Ehidden/", "%2Ehidden/%2Ex"},     // leading dots of every component
      {"%30"},                              // all digits
      {"\xc3\xa9t\xc3\xa9/", "\xc3\xa9t\xc3\xa9/\xe6\x97\xa5"},  // UTF-8 stays
      {"record.bin"},                                            // invalid UTF-8: not an Example
      {"%-image", "image/", "image/encoded.jpg"},                // a file beside a same-named dir
      {"%-record.bin"},                             // a root feature that would be record.bin
      {e100 + "%+/", e100 + "%+/" + e50 + ".txt"},  // 300 bytes of UTF-8, cut whole
  };
  const auto& shard = manifest_->shards.at("names.tfrecord");
  ASSERT_EQ(shard.count, want.size());
  for (uint64_t i = 0; i < want.size(); ++i) {
    const std::string rec = Rec("names.tfrecord", i);
    EXPECT_EQ(Files(rec), want[i]) << rec;
    for (const std::string& f : want[i]) {
      for (absl::string_view part : absl::StrSplit(f, '/', absl::SkipEmpty())) {
        EXPECT_LE(part.size(), 255u) << f;
      }
    }
  }
  EXPECT_EQ(ReadWholeFile(M(Rec("names.tfrecord", 16) + "/%-image")), "3\n");
  EXPECT_EQ(ReadWholeFile(M(Rec("names.tfrecord", 17) + "/%-record.bin")),
            std::string("\x00\x01", 2));
  EXPECT_EQ(ReadWholeFile(M(Rec("names.tfrecord", 18) + "/" + e100 + "%+/" + e50 + ".txt")), "v\n");
}

TEST_F(HostileMountTest, TooWideRecordShowsRaw) {
  EXPECT_EQ(Files("wide.tfrecord/0"), std::set<std::string>{"record.bin"});
  struct stat st;
  ASSERT_EQ(::stat(M("wide.tfrecord/0/record.bin").c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size),
            manifest_->shards.at("wide.tfrecord").records[0].size);
  EXPECT_NE(mount_->Stderr().find(S("wide.tfrecord") + ": record 0 at byte offset 0: "),
            std::string::npos);
  EXPECT_EQ(ReadWholeFile(M("wide.tfrecord/1/id")), "1\n");
}

// A million tiny records: listed in full, any one readable, memory bounded.
TEST_F(HostileMountTest, MillionTinyRecords) {
  if (manifest_->tiny_count == 0) GTEST_SKIP() << "TFRECORDFS_HOSTILE_TINY_RECORDS=0";
  const uint64_t n = manifest_->tiny_count;
  const std::string shard = manifest_->tiny_name;
  int err;
  const std::vector<std::string> names = List(M(shard), &err);
  ASSERT_EQ(err, 0);
  ASSERT_EQ(names.size(), n);
  const size_t width = std::to_string(n - 1).size();
  EXPECT_EQ(names.front(), std::string(width, '0'));
  EXPECT_EQ(names.back(), std::to_string(n - 1));
  for (const std::string& name : names) {
    if (name.size() != width) {
      ADD_FAILURE() << "record name '" << name << "' is not " << width << " digits";
      break;
    }
  }
  for (uint64_t k : {uint64_t{0}, uint64_t{1}, n / 2, n - 1}) {
    EXPECT_EQ(ReadWholeFile(M(shard + "/" + RecordDirName(k, n) + "/i")), absl::StrCat(k, "\n"));
    EXPECT_EQ(ReadWholeFile(M(shard + "/" + std::to_string(k) + "/i")), absl::StrCat(k, "\n"));
  }
  EXPECT_EQ(StatErrno(M(shard + "/" + std::to_string(n))), ENOENT);
  EXPECT_EQ(StatErrno(M(shard + "/" + std::string(width + 1, '0'))), ENOENT);
  // 8 bytes of index per record, and no per-record state for a listing:
  // generous bound for a 1M-record shard plus the rest of the corpus.
  const long rss = RssKiB(mount_->pid());
  EXPECT_GT(rss, 0);
  std::printf("daemon VmRSS %ld KiB after listing %llu records\n", rss,
              static_cast<unsigned long long>(n));
  EXPECT_LT(rss, kRssLimitKiB) << "daemon VmRSS " << rss << " KiB after listing " << n
                               << " records";
}

// The length near 2^64 allocates nothing: the daemon's memory stays small
// after every damaged record has been read.
TEST_F(HostileMountTest, HugeLengthAllocatesNothing) {
  for (int round = 0; round < 20; ++round) {
    EXPECT_EQ(ReadErrno(M("huge_length.tfrecord/2/id")), EIO);
    int err;
    List(M("huge_length.tfrecord/2"), &err);
    EXPECT_EQ(err, EIO);
  }
  EXPECT_EQ(ReadWholeFile(M("huge_length.tfrecord/3/id")), "3\n");
  EXPECT_EQ(Files("huge_length_last.tfrecord/1"), (std::set<std::string>{"id", "name.txt"}));
  const long rss = RssKiB(mount_->pid());
  EXPECT_GT(rss, 0);
  EXPECT_LT(rss, kRssLimitKiB) << "daemon VmRSS " << rss << " KiB";
}

TEST_F(HostileMountTest, BogusNamesAreNotFound) {
  for (const char* rel :
       {"nope", "wire_variants.tfrecord/12", "wire_variants.tfrecord/-1",
        "wire_variants.tfrecord/00000000000000000000000000001", "wire_variants.tfrecord/1e3",
        "wire_variants.tfrecord/ 1", "wire_variants.tfrecord/01/nope", "names.tfrecord/00/..%2F",
        "wire_variants.tfrecord/18446744073709551616"}) {
    EXPECT_EQ(StatErrno(M(rel)), ENOENT) << rel;
  }
  EXPECT_EQ(StatErrno(M("wire_variants.tfrecord/00/ids/x")), ENOTDIR);
}

// The real file damaged by a CRLF->LF conversion (see SOURCES.md): intact
// records show, broken ones fail with EIO and are located in the log.
TEST(HostileRealDataTest, CrlfStrippedShardShowsIntactRecordsAndEioForTheRest) {
  TFRFS_SKIP_WITHOUT_FUSE();
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  const std::string dir =
      root ? std::string(root) + "/../shared/data/real/corrupt_crlf_stripped" : "";
  if (dir.empty() || ::access((dir + "/pets_examples.record").c_str(), R_OK) != 0) {
    GTEST_SKIP() << "real damaged shard not found at '" << dir << "'";
  }
  const std::string canon = std::filesystem::canonical(dir).string();
  TempDir tmp;
  Mount mount;
  ASSERT_EQ(mount.Start({canon}, {"-o", "staging_dir=" + tmp.Subdir("store")}), absl::OkStatus());
  const std::string shard = canon + "/pets_examples.record";
  const DirectShard direct = ReadShardDirectly(shard);
  ASSERT_EQ(direct.error, "");
  const uint64_t n = direct.payloads.size();
  std::set<uint64_t> intact;
  for (uint64_t r = 0; r < n; ++r) {
    const std::string rec = mount.path("pets_examples.record/" + RecordDirName(r, n));
    int err;
    if (direct.payloads[r]) {
      intact.insert(r);
      ExpectedTree expected;
      const std::string rel = "pets_examples.record/" + RecordDirName(r, n);
      expected[rel] = ExpectedNode{true, ""};
      AddRecordLayout(rel, *direct.payloads[r], &expected);
      EXPECT_EQ(CompareTrees(expected, WalkTree(rec), rel), 0u);
      EXPECT_EQ(ReadWholeFile(rec + "/image/encoded.jpg").substr(0, 3), "\xff\xd8\xff");
    } else {
      List(rec, &err);
      EXPECT_EQ(err, EIO) << rec;
      EXPECT_NE(mount.Stderr().find(absl::StrCat(shard, ": record ", r, " at byte offset ",
                                                 direct.offsets[r], ": ")),
                std::string::npos)
          << r;
    }
  }
  // SOURCES.md: 10 headers, 6 records shortened; the walk resynchronises at
  // each, keeps the 4 intact records and drops the truncated last one.
  EXPECT_EQ(n, 9u);
  EXPECT_EQ(intact, (std::set<uint64_t>{2, 3, 4, 7}));
  std::string err;
  EXPECT_EQ(mount.Stop(&err), 0) << err;
}

// A GZIP bomb of empty records (16 bytes each, about 1000:1) must not cost
// the mount its memory: a shard over -o max_shard_records is not indexed,
// shows as the plain file it is, the log says why, and the other shards
// mount as usual.
TEST(HostileLimitTest, ShardOverTheRecordLimitIsAPlainFileAndTheRestMounts) {
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  const std::string src = tmp.Subdir("src");
  ASSERT_NO_FATAL_FAILURE(test::WriteShard(src + "/good.tfrecord", {"a", "b", "c"}));
  const std::string bomb = src + "/bomb.tfrecord.gz";
  {
    auto fd = OpenFile(bomb, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_TRUE(fd.ok()) << fd.status();
    record::ShardWriter w(std::move(*fd), bomb, {.codec = source::Codec::kGzip});
    for (int i = 0; i < 200000; ++i) ASSERT_TRUE(w.Append("").ok());
    ASSERT_TRUE(w.Close(false).ok());
  }
  Mount mount;
  ASSERT_EQ(mount.Start({src}, {"-o", "max_shard_records=1000"}), absl::OkStatus());
  struct stat st;
  ASSERT_EQ(0, ::stat(mount.path("bomb.tfrecord.gz").c_str(), &st));
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(ReadWholeFile(mount.path("bomb.tfrecord.gz")), ReadWholeFile(bomb));
  ASSERT_EQ(0, ::stat(mount.path("good.tfrecord").c_str(), &st));
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  int err = 0;
  EXPECT_EQ(List(mount.path("good.tfrecord"), &err).size(), 3u);
  EXPECT_NE(mount.Stderr().find(bomb + ": more than 1000 records (record 1000 at uncompressed "
                                       "byte offset 16000); not indexed"),
            std::string::npos)
      << mount.Stderr();
  EXPECT_NE(mount.Stderr().find("; shown as a plain file"), std::string::npos);
  std::string stop_err;
  EXPECT_EQ(mount.Stop(&stop_err), 0) << stop_err;

  // Usage errors: the limit is a positive number the mount can show.
  for (const char* bad :
       {"max_shard_records=0", "max_shard_records=268435457", "max_shard_records=x"}) {
    Mount refused;
    EXPECT_NE(refused.Start({src}, {"-o", bad}), absl::OkStatus()) << bad;
  }
}

}  // namespace
}  // namespace tfrecordfs::mount_test
