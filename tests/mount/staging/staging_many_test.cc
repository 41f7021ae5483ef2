// Many staged files under a small descriptor limit (issue 15, item 7): the
// daemon runs under `prlimit --nofile=256:256`, stages thousands of files
// through the mount, lists and stats them all (so the kernel holds a lookup
// of each), reads them back, and packs them on unmount. The store keeps a
// bounded number of descriptors (staging/node_table.h), so nothing fails with
// EMFILE and every record arrives.
#include <sys/stat.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "staging_util.h"

namespace tfrecordfs::mount_test::staging_test {
namespace {

constexpr int kRecords = 100;
constexpr int kFilesPerRecord = 30;  // 3,000 staged files

TEST(StagingManyTest, ThousandsOfStagedFilesUnderA256DescriptorLimit) {
  TFRFS_SKIP_WITHOUT_FUSE();
  Scratch s;
  test::WriteShard(s.src + "/base.tfrecord", {ExamplePayload({Int64Feature("label", {1})})});
  const std::string wrapper = s.tmp.path() + "/tfrecordfs-256";
  WriteWholeFile(wrapper,
                 "#!/bin/sh\nexec prlimit --nofile=256:256 -- '" + BinaryPath() + "' \"$@\"\n");
  ASSERT_EQ(::chmod(wrapper.c_str(), 0755), 0);
  const std::string real_bin = BinaryPath();
  MountConfig c = PackConfig(s, {s.src}, "many");
  Mount d(c);
  ::setenv("TFRECORDFS_BIN", wrapper.c_str(), 1);
  const absl::Status started = d.Start();
  ::setenv("TFRECORDFS_BIN", real_bin.c_str(), 1);
  ASSERT_TRUE(started.ok()) << started;

  // Value of file f of record r: r * kFilesPerRecord + f.
  const std::string staging = ShellQuote(s.mnt + "/staging");
  CommandResult made = Shell(absl::StrCat(
      "set -e; cd ", staging, "\n", "for r in $(seq 0 ", kRecords - 1, "); do\n", "  mkdir r$r\n",
      "  for f in $(seq 0 ", kFilesPerRecord - 1, "); do\n", "    echo $((r * ", kFilesPerRecord,
      " + f)) > r$r/f$f\n", "  done\n", "done\n"));
  ASSERT_EQ(made.exit_code, 0) << made.err << d.Stderr();
  // Every file looked up (and kept) by the kernel, then read back.
  CommandResult listed = Shell(absl::StrCat("cd ", staging, " && ls -lR . | grep -c '^-'"));
  ASSERT_EQ(listed.exit_code, 0) << listed.err << d.Stderr();
  EXPECT_EQ(listed.out, absl::StrCat(kRecords * kFilesPerRecord, "\n"));
  CommandResult stats =
      Shell(absl::StrCat("cd ", staging, " && find . -type f -exec stat -c %s {} + | sort -u"));
  ASSERT_EQ(stats.exit_code, 0) << stats.err << d.Stderr();
  CommandResult sum = Shell(absl::StrCat("cd ", staging,
                                         " && find . -type f -exec cat {} + | awk '{s+=$1} END "
                                         "{print NR, s}'"));
  ASSERT_EQ(sum.exit_code, 0) << sum.err << d.Stderr();
  constexpr int kN = kRecords * kFilesPerRecord;
  EXPECT_EQ(sum.out, absl::StrCat(kN, " ", int64_t{kN} * (kN - 1) / 2, "\n"));
  // Files renamed and removed while the kernel knows them all.
  CommandResult moved = Shell(absl::StrCat("set -e; cd ", staging,
                                           " && mv r0/f0 r0/g0 && mv r1 q1 && rm r2/f1 && "
                                           "cat r0/g0 q1/f5"));
  ASSERT_EQ(moved.exit_code, 0) << moved.err << d.Stderr();
  EXPECT_EQ(moved.out, absl::StrCat("0\n", kFilesPerRecord + 5, "\n"));

  int status = 0;
  CommandResult u = d.TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err << d.Stderr();
  EXPECT_NE(u.out.find(absl::StrCat("packed ", kRecords, " records")), std::string::npos) << u.out;
  EXPECT_EQ(d.Stderr().find("Too many open files"), std::string::npos) << d.Stderr();
  const auto payloads = AllPayloads(ReadPackedShards(s.out, "many"));
  ASSERT_EQ(payloads.size(), static_cast<size_t>(kRecords));
  int64_t total = 0, values = 0;
  for (const std::string& p : payloads) {
    const DecodedRecord rec = Decode(p);
    for (const auto& [name, f] : rec.features) {
      for (int64_t v : f.int64s) total += v, ++values;
    }
  }
  // All but r2/f1 (removed): its value is 2 * kFilesPerRecord + 1.
  EXPECT_EQ(values, kN - 1);
  EXPECT_EQ(total, int64_t{kN} * (kN - 1) / 2 - (2 * kFilesPerRecord + 1));
}

}  // namespace
}  // namespace tfrecordfs::mount_test::staging_test
