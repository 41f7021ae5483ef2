// Readers racing a commit through a real mount: each read is one whole
// file, the old record's bytes or the new one's (issue 34, item 9).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "record_edit_util.h"
#include "staging_util.h"

namespace tfrecordfs::mount_test::staging_test {
namespace {

// Issue 34 item 9: readers racing a commit. A 20,000-record shard; each
// round deletes 29 records and edits 99 below the range read (so every
// record read is renumbered: name r then holds old record r + 29) while 3
// threads open, fstat and read (their page cache dropped first, so reads
// reach the daemon) the files of 300 records. Each read must be one whole
// file: as many bytes as fstat said, and the bytes of either the old record
// of that name or the new one, entirely. Before the fix a file opened
// before the commit and read after it got the renumbered record's bytes
// under the old size (same node id, new bytes). Bounded by iterations: the
// readers stop a fixed number of reads after the commit returns.
TEST(RecordEditRaceTest, ReadersRacingACommitSeeOneWholeFileOldOrNew) {
  TFRFS_SKIP_WITHOUT_FUSE();
  Scratch s;
  constexpr int kTotal = 20000, kDeleted = 29, kEdited = 99, kFirst = 10000, kRange = 300;
  constexpr int kRounds = 3, kReadsAfter = 600, kMaxReads = 400000;
  {
    std::vector<std::string> payloads;
    payloads.reserve(kTotal);
    for (int i = 0; i < kTotal; ++i) {
      // Files of one to three pages, of a different size in each record.
      std::string blob = absl::StrFormat("record %d:", i);
      blob.resize(100 + static_cast<size_t>(i * 37 % 9000), static_cast<char>('a' + i % 26));
      payloads.push_back(ExamplePayload({Int64Feature("id", {i}), BytesFeature("blob", {blob}),
                                         FloatFeature("score", {i + 0.5f})}));
    }
    ASSERT_NO_FATAL_FAILURE(test::WriteShard(s.src + "/a.tfrecord", payloads));
  }
  Mount d(PackConfig(s, {s.src}, "race"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  const std::string shard = s.mnt + "/a.tfrecord";
  auto path_of = [&](int record, const std::string& file) {
    return absl::StrFormat("%s/%05d/%s", shard, record, file);
  };
  const std::vector<std::string> files = ListDir(path_of(kFirst, ""));
  ASSERT_EQ(files.size(), 3u);
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    // What each name shows now (old) and will show (old of name + 29).
    // Each round writes its own value (7, 8, 9): a record already holding
    // the value written would be no edit at all (kept, issue 34 item 2).
    std::map<std::pair<int, std::string>, std::string> old;
    for (int r = kFirst; r < kFirst + kRange + kDeleted; ++r) {
      for (const std::string& f : files) old[{r, f}] = ReadWholeFile(path_of(r, f));
    }
    CommandResult edit = RunCommand(
        {"bash", "-c",
         absl::StrFormat("set -e; cd %s; rm -r $(seq -f %%05g 100 %d); "
                         "for i in $(seq 200 %d); do printf -v n %%05d $i; echo %d > $n/id; done",
                         ShellQuote(shard), 100 + kDeleted - 1, 200 + kEdited - 1, 7 + round)});
    ASSERT_EQ(edit.exit_code, 0) << edit.err;
    // An edited file held open across the commit: what it reads after is
    // its edit, whole, or an error (its old inode is stale), never the old
    // shard's bytes of that record under the edit's size.
    const int held = ::open(path_of(200, "id").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(held, 0);
    struct stat held_st;
    ASSERT_EQ(::fstat(held, &held_st), 0);
    ASSERT_EQ(held_st.st_size, 2);
    std::atomic<bool> committed{false};
    std::atomic<int> reads{0};
    std::vector<std::string> wrong[3];
    int errors[3] = {0, 0, 0};
    std::vector<std::thread> readers;
    for (int t = 0; t < 3; ++t) {
      readers.emplace_back([&, t] {
        int after = 0;
        std::string buf;
        for (int k = 0; k < kMaxReads && after < kReadsAfter; ++k) {
          if (committed.load()) ++after;
          const int r = kFirst + (k * 7 + t * 101) % kRange;
          const std::string& f = files[static_cast<size_t>(k) % files.size()];
          const std::string path = path_of(r, f);
          const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
          struct stat st;
          if (fd < 0 || ::fstat(fd, &st) != 0) {
            ++errors[t];
            if (fd >= 0) ::close(fd);
            continue;
          }
          ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
          buf.assign(static_cast<size_t>(st.st_size) + 4096, '\0');
          size_t got = 0;
          ssize_t n = 0;
          while ((n = ::pread(fd, buf.data() + got, buf.size() - got, static_cast<off_t>(got))) >
                 0) {
            got += static_cast<size_t>(n);
            if (got == buf.size()) buf.resize(buf.size() * 2);
          }
          ::close(fd);
          reads.fetch_add(1);
          if (n < 0) {
            ++errors[t];
            continue;
          }
          buf.resize(got);
          const bool whole_old = buf == old.at({r, f});
          const bool whole_new = buf == old.at({r + kDeleted, f});
          if (got != static_cast<size_t>(st.st_size) || (!whole_old && !whole_new)) {
            wrong[t].push_back(absl::StrFormat("%s: fstat size %d, read %d bytes, %s", path,
                                               st.st_size, got,
                                               whole_old   ? "the old bytes"
                                               : whole_new ? "the new bytes"
                                                           : "neither's bytes"));
          }
        }
      });
    }
    // The readers are reading before the commit starts.
    while (reads.load() < 100) std::this_thread::yield();
    CommandResult commit = RunCommand({BinaryPath(), "commit", s.mnt});
    committed.store(true);
    for (std::thread& t : readers) t.join();
    EXPECT_EQ(commit.exit_code, 0) << commit.out << commit.err;
    {
      char buf[64] = {};
      ::posix_fadvise(held, 0, 0, POSIX_FADV_DONTNEED);
      const ssize_t n = ::pread(held, buf, sizeof buf, 0);
      if (n >= 0) {
        EXPECT_EQ(std::string(buf, static_cast<size_t>(n)), absl::StrCat(7 + round, "\n"));
      }
      ::close(held);
    }
    EXPECT_NE(commit.out.find(absl::StrCat("changed ", kEdited, ", added 0, deleted ", kDeleted)),
              std::string::npos)
        << commit.out;
    for (int t = 0; t < 3; ++t) {
      EXPECT_EQ(errors[t], 0) << "reader " << t;
      EXPECT_TRUE(wrong[t].empty())
          << "reader " << t << " of " << reads.load() << " reads: " << wrong[t].size()
          << " wrong, first " << wrong[t][0];
    }
    // After the commit, the names show the renumbered records.
    for (int r = kFirst; r < kFirst + 3; ++r) {
      for (const std::string& f : files) {
        EXPECT_EQ(ReadWholeFile(path_of(r, f)), old.at({r + kDeleted, f})) << path_of(r, f);
      }
    }
  }
  int st = 0;
  CommandResult un = d.TfrUnmount(&st);
  EXPECT_EQ(un.exit_code, 0) << un.out << un.err;
}

}  // namespace
}  // namespace tfrecordfs::mount_test::staging_test
