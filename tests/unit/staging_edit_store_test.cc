// The edit store's disk work (staging/edit_store.h): a check-out is whole
// or absent whatever fails, keeps the times it is given, a drop is one
// rename, and a move out of the store is finished or rolled back after a
// crash at either point between its steps.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/files.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/staging/edit_store.h"
#include "tfrecordfs/staging/edits.h"

namespace tfrecordfs::staging {
namespace {

using test::ReadFile;
using test::SortedNames;
using test::TempDir;
using test::WriteFile;

const std::vector<EditStore::Entry> kEntries = {
    {"label", false}, {"image", true}, {"image/encoded.jpg", false}, {"image/format.txt", false}};

std::string Content(size_t i) { return absl::StrCat("bytes of ", kEntries[i].rel, "\n"); }

TEST(EditStoreTest, CheckOutWritesTheWholeFolderWithTheGivenTimes) {
  TempDir tmp;
  const EditStore store(tmp.Subdir("records"));
  const std::string folder = EditedFolderName(ShardKey("/data/a.tfrecord"), 42);
  const struct timespec when = {1500000000, 123456789};
  ASSERT_TRUE(store
                  .CheckOut(
                      folder, kEntries, [](size_t i) { return Content(i); }, when)
                  .ok());
  EXPECT_EQ(SortedNames(store.records_dir()), std::vector<std::string>{folder});
  for (size_t i = 0; i < kEntries.size(); ++i) {
    const std::string path = store.PathOf(folder) + "/" + kEntries[i].rel;
    struct stat st;
    ASSERT_EQ(::lstat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(S_ISDIR(st.st_mode), kEntries[i].is_dir) << path;
    if (!kEntries[i].is_dir) {
      EXPECT_EQ(ReadFile(path), Content(i));
    }
    EXPECT_EQ(st.st_mtim.tv_sec, when.tv_sec) << path;
    EXPECT_EQ(st.st_mtim.tv_nsec, when.tv_nsec) << path;
  }
  struct stat top;
  ASSERT_EQ(::lstat(store.PathOf(folder).c_str(), &top), 0);
  EXPECT_EQ(top.st_mtim.tv_sec, when.tv_sec) << "the folder's own time";
  // A second check-out of the same record is refused, the first kept.
  absl::Status again = store.CheckOut(
      folder, kEntries, [](size_t) { return "x"; }, when);
  EXPECT_TRUE(absl::IsAlreadyExists(again)) << again;
  EXPECT_EQ(ReadFile(store.PathOf(folder) + "/label"), Content(0));
}

TEST(EditStoreTest, ACheckOutThatFailsLeavesNothing) {
  TempDir tmp;
  const EditStore store(tmp.Subdir("records"));
  const std::string folder = EditedFolderName(ShardKey("/data/a.tfrecord"), 7);
  // A stale temp of an earlier crash is replaced, and removed with the
  // failed attempt.
  ASSERT_EQ(::mkdir((store.records_dir() + "/." + folder + ".tmp").c_str(), 0755), 0);
  WriteFile(store.records_dir() + "/." + folder + ".tmp/junk", "old");
  for (size_t fail_at : {size_t{0}, size_t{2}, size_t{3}}) {
    SCOPED_TRACE(fail_at);
    absl::Status s = store.CheckOut(folder, kEntries,
                                    [&](size_t i) -> absl::StatusOr<std::string> {
                                      if (i == fail_at)
                                        return absl::DataLossError("damaged record");
                                      return Content(i);
                                    },
                                    {0, 0});
    EXPECT_TRUE(absl::IsDataLoss(s)) << s;
    EXPECT_EQ(SortedNames(store.records_dir()), std::vector<std::string>{}) << "half a record left";
  }
}

TEST(EditStoreTest, DropRemovesTheFolderInOneRename) {
  TempDir tmp;
  const EditStore store(tmp.Subdir("records"));
  const std::string folder = EditedFolderName(ShardKey("/data/a.tfrecord"), 3);
  ASSERT_TRUE(store.CheckOut(folder, kEntries, [](size_t i) { return Content(i); }, {0, 0}).ok());
  absl::Status leftover = absl::UnknownError("not set");
  ASSERT_TRUE(store.Drop(folder, &leftover).ok());
  EXPECT_TRUE(leftover.ok()) << leftover;
  EXPECT_EQ(SortedNames(store.records_dir()), std::vector<std::string>{});
  // Nothing there: an error, and nothing changed.
  EXPECT_FALSE(store.Drop(folder).ok());
}

// A move whose process dies after step 1 or after step 2 (fork + _exit in
// the hook), then recovered as the next mount does.
TEST(EditStoreTest, AnInterruptedMoveIsFinishedOrRolledBack) {
  for (const bool deleted : {false, true}) {
    SCOPED_TRACE(deleted ? "killed after the record was deleted" : "killed before the delete");
    TempDir tmp;
    const EditStore store(tmp.Subdir("records"));
    const std::string staging = tmp.Subdir("staging");
    const std::string key = ShardKey("/data/a.tfrecord");
    const std::string folder = EditedFolderName(key, 12);
    ASSERT_TRUE(store.CheckOut(folder, kEntries, [](size_t i) { return Content(i); }, {0, 0}).ok());
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      (void)store.MoveOut(
          folder, staging, "moved-12", [] { return absl::OkStatus(); },
          [&] {
            if (!deleted) ::_exit(9);
          },
          [&] {
            if (deleted) ::_exit(9);
          });
      ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 9);
    EXPECT_EQ(SortedNames(store.records_dir()), std::vector<std::string>{});
    auto moves = EditStore::FindInterruptedMoves(staging);
    ASSERT_EQ(moves.size(), 1u);
    EXPECT_EQ(moves[0].key, key);
    EXPECT_EQ(moves[0].record, 12u);
    EXPECT_EQ(moves[0].dest_name, "moved-12");
    EXPECT_TRUE(EditStore::FindInterruptedMoves(store.records_dir()).empty());
    auto to = store.ResolveMove(moves[0], deleted);
    ASSERT_TRUE(to.ok()) << to.status();
    if (deleted) {
      EXPECT_EQ(*to, staging + "/moved-12");
      EXPECT_EQ(SortedNames(staging), std::vector<std::string>{"moved-12"});
      EXPECT_EQ(SortedNames(store.records_dir()), std::vector<std::string>{});
    } else {
      EXPECT_EQ(*to, store.PathOf(folder));
      EXPECT_EQ(SortedNames(staging), std::vector<std::string>{});
      EXPECT_EQ(SortedNames(store.records_dir()), std::vector<std::string>{folder});
    }
    EXPECT_EQ(ReadFile(*to + "/image/format.txt"), Content(3)) << "the files moved with it";
  }
}

TEST(EditStoreTest, AMoveWhoseDeleteFailsPutsTheFolderBack) {
  TempDir tmp;
  const EditStore store(tmp.Subdir("records"));
  const std::string staging = tmp.Subdir("staging");
  const std::string folder = EditedFolderName(ShardKey("/data/a.tfrecord"), 5);
  ASSERT_TRUE(store.CheckOut(folder, kEntries, [](size_t i) { return Content(i); }, {0, 0}).ok());
  absl::Status s = store.MoveOut(folder, staging, "r5",
                                 [] { return absl::ResourceExhaustedError("disk full"); });
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_EQ(SortedNames(store.records_dir()), std::vector<std::string>{folder});
  EXPECT_EQ(SortedNames(staging), std::vector<std::string>{});
  // A taken destination is refused before anything moves.
  ASSERT_EQ(::mkdir((staging + "/r5").c_str(), 0755), 0);
  s = store.MoveOut(folder, staging, "r5", [] { return absl::OkStatus(); });
  EXPECT_TRUE(absl::IsAlreadyExists(s)) << s;
  EXPECT_EQ(SortedNames(store.records_dir()), std::vector<std::string>{folder});
  // Done: the folder is at its destination, nothing left behind.
  ASSERT_TRUE(store.MoveOut(folder, staging, "r5b", [] { return absl::OkStatus(); }).ok());
  EXPECT_EQ(SortedNames(staging), (std::vector<std::string>{"r5", "r5b"}));
  EXPECT_EQ(SortedNames(store.records_dir()), std::vector<std::string>{});
}

}  // namespace
}  // namespace tfrecordfs::staging
