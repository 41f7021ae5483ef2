// Crash safety of the pack through the real daemon. For each fault point of
// repack/pack.h (TFRECORDFS_FAULT, set on the daemon only), records are
// staged across several output shards, the mount is unmounted with
// fusermount3 -u, and the daemon must die by SIGKILL at that point of the
// pack. The state left on disk is checked against the journal protocol
// (repack/journal.h); then a mount without the fault recovers, its unmount
// packs what is left, and every staged record must be in the output shards
// exactly once with staging empty (but for a record that never was valid).
#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "staging_util.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/repack/journal.h"
#include "tfrecordfs/staging/layout.h"

namespace tfrecordfs::mount_test::staging_test {
namespace {

constexpr int kRecords = 9;  // the last one with an awkward folder name
constexpr char kPrefix[] = "crash";

enum class Side { kRollBack, kRollForward };

struct FaultCase {
  const char* point;
  Side side;
  int shards_in_place;  // final shard files present at the crash (-1: all)
  int folders_deleted;  // packed folders already gone at the crash
  // -o compression=...: "" keeps the default (the plain source's: none).
  const char* compression = "";
};

// `cases` and then the compressed output's cases, which both suites run
// (the same protocol, with GZIP or ZLIB shards).
std::vector<FaultCase> WithCompressedCases(std::vector<FaultCase> cases) {
  for (const FaultCase& c : {
           FaultCase{"mid_shard", Side::kRollBack, 0, 0, "gzip"},
           FaultCase{"after_shard:1", Side::kRollBack, 1, 0, "gzip"},
           FaultCase{"after_commit", Side::kRollForward, -1, 0, "gzip"},
           FaultCase{"mid_shard", Side::kRollBack, 0, 0, "zlib"},
           FaultCase{"mid_delete", Side::kRollForward, -1, 1, "zlib"},
       }) {
    cases.push_back(c);
  }
  return cases;
}

// The shard name suffix for a case's compression.
std::string SuffixOf(const char* compression) {
  const std::string c = compression;
  return c == "gzip" ? ".tfrecord.gz" : c == "zlib" ? ".tfrecord.zlib" : ".tfrecord";
}

std::string CaseName(const ::testing::TestParamInfo<FaultCase>& info) {
  std::string n = info.param.point;
  for (char& c : n) {
    if (c == ':') c = '_';
  }
  if (*info.param.compression != '\0') n += std::string("_") + info.param.compression;
  return n;
}

class StagingCrashTest : public ::testing::TestWithParam<FaultCase> {
 protected:
  void SetUp() override {
    TFRFS_SKIP_WITHOUT_FUSE();
    test::WriteShard(s_.src + "/base.tfrecord",
                     {ExamplePayload({Int64Feature("id", {1000}), BytesFeature("blob", {"x"})})});
  }

  MountConfig Config(const std::string& fault) const {
    MountConfig c;
    c.sources = {s_.src};
    c.mountpoint = s_.mnt;
    c.options = PackOptions(s_, kPrefix, "1K");
    if (*GetParam().compression != '\0') {
      c.options.push_back(std::string("compression=") + GetParam().compression);
    }
    c.log_dir = s_.logs;
    c.fault = fault;
    return c;
  }

  // rec00..rec07 and "rec08 <awkward bytes>" (about 330 bytes each: two
  // to a 1K shard) and `zbad`, which never parses.
  void StageRecords() {
    std::string script = "set -e; cd " + ShellQuote(s_.mnt + "/staging") + "\n";
    for (int i = 0; i + 1 < kRecords; ++i) {
      const std::string dir = absl::StrFormat("rec%02d", i);
      script += absl::StrFormat(
          "mkdir %s && echo %d > %s/id && head -c 300 /dev/zero | tr '\\0' '%c' > %s/blob.bin\n",
          dir, i, dir, 'a' + i, dir);
    }
    // `note` is no feature of the shards: not checked before the pack.
    script += "mkdir zbad && printf 'x\\n' > zbad/note\n";
    CommandResult r = Shell(script);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // The journal escapes names: spaces, tabs, newlines, '%', UTF-8.
    const std::string odd = s_.mnt + "/staging/rec08 \xC3\xA9\t\n%2F x";
    ASSERT_EQ(::mkdir(odd.c_str(), 0755), 0) << std::strerror(errno);
    EXPECT_EQ(WriteAndClose(odd + "/id", "8\n").close_errno, 0);
    EXPECT_EQ(WriteAndClose(odd + "/blob.bin", std::string(300, 'a' + 8)).close_errno, 0);
    ASSERT_EQ(ListDir(s_.records()).size(), static_cast<size_t>(kRecords + 1));
  }

  std::vector<std::string> FinalShards() const {
    std::vector<std::string> out;
    for (const std::string& n : ListDir(s_.out)) {
      if (absl::StartsWith(n, std::string(kPrefix) + "-")) out.push_back(n);
    }
    return out;
  }

  // Every id 0..kRecords-1 exactly once in the output; nothing else there.
  void ExpectExactlyOnce() {
    const auto shards = ReadPackedShards(s_.out, kPrefix);
    EXPECT_GE(shards.size(), 2u);
    for (size_t i = 0; i < shards.size(); ++i) {
      EXPECT_EQ(shards[i].name, absl::StrFormat("%s-%05d-of-%05d%s", kPrefix, i, shards.size(),
                                                SuffixOf(GetParam().compression)));
    }
    std::map<int64_t, int> seen;
    for (const std::string& p : AllPayloads(shards)) {
      const DecodedRecord r = Decode(p);
      auto id = SingleInt(r, "id");
      ASSERT_TRUE(id.has_value()) << "a packed record without an id";
      ++seen[*id];
      const int i = static_cast<int>(*id);
      EXPECT_EQ(r.features.at("blob").bytes, std::vector<std::string>{std::string(300, 'a' + i)});
    }
    for (int i = 0; i < kRecords; ++i) {
      EXPECT_EQ(seen[i], 1) << "record " << i << " packed " << seen[i] << " times";
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(kRecords));
    // No temp shards, journals or other debris in the output directory.
    EXPECT_EQ(ListDir(s_.out).size(), shards.size());
    EXPECT_FALSE(Exists(staging::PackJournalFile(s_.store)));
    EXPECT_EQ(ListDir(s_.records()), std::vector<std::string>{"zbad"});
  }

  Scratch s_;
};

TEST_P(StagingCrashTest, SigkillMidPackThenRemountPacksExactlyOnce) {
  const FaultCase fc = GetParam();
  {
    Mount d(Config(fc.point));
    ASSERT_EQ(d.Start(), absl::OkStatus());
    StageRecords();
    ASSERT_FALSE(HasFatalFailure());
    int status = 0;
    std::string err;
    ASSERT_TRUE(d.Unmount(&status, &err)) << err << "\n" << d.Stderr();
    ASSERT_TRUE(KilledBySigkill(status)) << "the daemon ended with " << DescribeWait(status)
                                         << ", not SIGKILL at " << fc.point << "\n"
                                         << d.Stderr();
    EXPECT_NE(d.Stderr().find(std::string("TFRECORDFS_FAULT=") + fc.point), std::string::npos)
        << d.Stderr();
    CleanStaleMount(s_.mnt);
  }

  // What the crash left, per the journal protocol.
  auto journal_text = ReadFileToString(staging::PackJournalFile(s_.store));
  ASSERT_TRUE(journal_text.ok()) << "no journal after a crash at " << fc.point;
  auto journal = repack::ParseJournal(*journal_text, "pack.journal");
  ASSERT_TRUE(journal.ok()) << journal.status();
  const size_t planned = journal->shards.size();
  ASSERT_GE(planned, 3u) << "want records spread over several shards";
  EXPECT_EQ(journal->state, fc.side == Side::kRollBack ? repack::Journal::State::kPlanned
                                                       : repack::Journal::State::kCommitted);
  const size_t in_place =
      fc.shards_in_place < 0 ? planned : static_cast<size_t>(fc.shards_in_place);
  EXPECT_EQ(FinalShards().size(), in_place) << fc.point;
  EXPECT_EQ(ListDir(s_.records()).size(), static_cast<size_t>(kRecords + 1 - fc.folders_deleted));
  EXPECT_FALSE(Exists(staging::PackReportFile(s_.store)));

  // Mount again without the fault: recovery runs before anything is served.
  {
    Mount d(Config(""));
    ASSERT_EQ(d.Start(), absl::OkStatus());
    EXPECT_FALSE(Exists(staging::PackJournalFile(s_.store)));
    const std::vector<std::string> staged = ListDir(s_.mnt + "/staging");
    if (fc.side == Side::kRollBack) {
      EXPECT_EQ(staged.size(), static_cast<size_t>(kRecords + 1)) << "records lost";
      EXPECT_EQ(FinalShards(), std::vector<std::string>{}) << "partial output kept";
    } else {
      EXPECT_EQ(staged, std::vector<std::string>{"zbad"}) << "packed records still staged";
      EXPECT_EQ(FinalShards().size(), planned);
    }
    int status = 0;
    CommandResult u = d.TfrUnmount(&status);
    EXPECT_EQ(u.exit_code, 1) << u.out << u.err;  // zbad stays
    EXPECT_NE(u.out.find("zbad: note: line 1"), std::string::npos) << u.out;
    EXPECT_EQ(ExitCodeOfWait(status), 1) << DescribeWait(status) << "\n" << d.Stderr();
  }
  ExpectExactlyOnce();
}

INSTANTIATE_TEST_SUITE_P(FaultPoints, StagingCrashTest,
                         ::testing::ValuesIn(WithCompressedCases({
                             FaultCase{"after_journal", Side::kRollBack, 0, 0},
                             FaultCase{"mid_shard", Side::kRollBack, 0, 0},
                             FaultCase{"after_shard:1", Side::kRollBack, 1, 0},
                             FaultCase{"after_shard:2", Side::kRollBack, 2, 0},
                             FaultCase{"before_commit", Side::kRollBack, -1, 0},
                             FaultCase{"after_commit", Side::kRollForward, -1, 0},
                             FaultCase{"mid_delete", Side::kRollForward, -1, 1},
                         })),
                         CaseName);

// With the shards written into the source directory (the default), the
// mount after a crash recovers before it indexes anything: it never shows a
// partial pack, and a committed one shows once, not also in staging.
class StagingCrashInSourceTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(StagingCrashInSourceTest, RemountNeverShowsARecordTwiceOrAPartialShard) {
  TFRFS_SKIP_WITHOUT_FUSE();
  const FaultCase fc = GetParam();
  Scratch s;
  test::WriteShard(s.src + "/base.tfrecord", {ExamplePayload({Int64Feature("id", {100})})});
  MountConfig c;
  c.sources = {s.src};
  c.mountpoint = s.mnt;
  c.options = {"staging_dir=" + s.store, "prefix=in", "shard_size=1K"};
  c.log_dir = s.logs;
  c.fault = fc.point;
  {
    Mount d(c);
    ASSERT_EQ(d.Start(), absl::OkStatus());
    std::string script = "set -e; cd " + ShellQuote(s.mnt + "/staging") + "\n";
    for (int i = 0; i < 6; ++i) {
      script += absl::StrFormat(
          "mkdir r%d && echo %d > r%d/id && head -c 400 /dev/zero > r%d/pad.bin\n", i, i, i, i);
    }
    ASSERT_EQ(Shell(script).exit_code, 0);
    int status = 0;
    std::string err;
    ASSERT_TRUE(d.Unmount(&status, &err)) << err;
    ASSERT_TRUE(KilledBySigkill(status)) << DescribeWait(status) << "\n" << d.Stderr();
    CleanStaleMount(s.mnt);
  }
  c.fault = "";
  Mount d(c);
  ASSERT_EQ(d.Start(), absl::OkStatus());
  // Count the ids the mount shows: in its shards and in staging.
  std::map<int64_t, int> shown;
  for (const std::string& top : ListDir(s.mnt)) {
    if (top == "staging" || top == "base.tfrecord") continue;
    ASSERT_EQ(top.rfind("in-", 0), 0u) << "unexpected entry " << top;
    for (const std::string& rec : ListDir(s.mnt + "/" + top)) {
      ++shown[std::stoll(ReadWholeFile(s.mnt + "/" + top + "/" + rec + "/id"))];
    }
  }
  for (const std::string& rec : ListDir(s.mnt + "/staging")) {
    ++shown[std::stoll(ReadWholeFile(s.mnt + "/staging/" + rec + "/id"))];
  }
  for (int i = 0; i < 6; ++i) EXPECT_EQ(shown[i], 1) << "record " << i;
  EXPECT_EQ(shown.size(), 6u);
  int status = 0;
  EXPECT_EQ(d.TfrUnmount(&status).exit_code, 0);
  std::map<int64_t, int> packed;
  for (const std::string& p : AllPayloads(ReadPackedShards(s.src, "in"))) {
    ++packed[SingleInt(Decode(p), "id").value_or(-1)];
  }
  for (int i = 0; i < 6; ++i) EXPECT_EQ(packed[i], 1) << "record " << i;
  EXPECT_EQ(packed.size(), 6u);
}

INSTANTIATE_TEST_SUITE_P(FaultPoints, StagingCrashInSourceTest,
                         ::testing::ValuesIn(WithCompressedCases({
                             FaultCase{"after_shard:1", Side::kRollBack, 1, 0},
                             FaultCase{"mid_delete", Side::kRollForward, -1, 1},
                         })),
                         CaseName);

// SIGTERM / SIGINT (Ctrl-C on a foreground mount) end the mount like an
// unmount: the daemon packs and exits 0.
TEST(StagingSignalTest, SigtermAndSigintPackBeforeExiting) {
  TFRFS_SKIP_WITHOUT_FUSE();
  Scratch s;
  for (int sig : {SIGTERM, SIGINT}) {
    const std::string prefix = sig == SIGTERM ? "term" : "int";
    MountConfig c = PackConfig(s, {s.src}, prefix);
    Mount d(c);
    ASSERT_EQ(d.Start(), absl::OkStatus());
    ASSERT_EQ(Shell("mkdir " + ShellQuote(s.mnt + "/staging/r") + " && echo " +
                    std::to_string(sig) + " > " + ShellQuote(s.mnt + "/staging/r/id"))
                  .exit_code,
              0);
    ASSERT_EQ(::kill(d.pid(), sig), 0);
    int status = 0;
    ASSERT_TRUE(d.WaitExit(&status));
    EXPECT_EQ(ExitCodeOfWait(status), 0) << DescribeWait(status) << "\n" << d.Stderr();
    EXPECT_FALSE(IsMounted(s.mnt));
    const auto payloads = AllPayloads(ReadPackedShards(s.out, prefix));
    ASSERT_EQ(payloads.size(), 1u) << d.Stderr();
    EXPECT_EQ(SingleInt(Decode(payloads[0]), "id"), sig);
    EXPECT_EQ(ListDir(s.records()), std::vector<std::string>{});
  }
}

// `tfrecordfs unmount` notices a daemon that died in the pack, and a plain
// mount afterwards finishes the job.
TEST(StagingCrashUnmountTest, UnmountCommandReportsACrashedPack) {
  TFRFS_SKIP_WITHOUT_FUSE();
  Scratch s;
  MountConfig c = PackConfig(s, {s.src}, "crashed");
  c.fault = "before_commit";
  {
    Mount d(c);
    ASSERT_EQ(d.Start(), absl::OkStatus());
    ASSERT_EQ(Shell("mkdir " + ShellQuote(s.mnt + "/staging/r") + " && echo 1 > " +
                    ShellQuote(s.mnt + "/staging/r/id"))
                  .exit_code,
              0);
    int status = 0;
    CommandResult u = d.TfrUnmount(&status);
    EXPECT_EQ(u.exit_code, 1) << u.out << u.err;
    EXPECT_NE(u.err.find("did it crash?"), std::string::npos) << u.err;
    EXPECT_TRUE(KilledBySigkill(status)) << DescribeWait(status);
    CleanStaleMount(s.mnt);
  }
  EXPECT_EQ(ListDir(s.records()), std::vector<std::string>{"r"});
  c.fault = "";
  Mount d(c);
  ASSERT_EQ(d.Start(), absl::OkStatus());
  int status = 0;
  CommandResult u = d.TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  const auto payloads = AllPayloads(ReadPackedShards(s.out, "crashed"));
  ASSERT_EQ(payloads.size(), 1u);
  EXPECT_EQ(SingleInt(Decode(payloads[0]), "id"), 1);
  EXPECT_EQ(ListDir(s.records()), std::vector<std::string>{});
}

}  // namespace
}  // namespace tfrecordfs::mount_test::staging_test
