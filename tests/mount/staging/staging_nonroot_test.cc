// The pack run by an ordinary user on what `cp -r MNT/<shard>/<record>
// MNT/staging/` leaves: read-only (0555) folders of 0444 files, since cp
// keeps the mount's mode bits. Deleting them after the commit point must
// work for their non-root owner, or the COMMITTED journal stays and every
// later mount fails in Recover. The mount tests run as root (which bypasses
// the permission check), so this test calls the pack and Recover directly in
// a child process that drops to an unprivileged uid. And, through an
// allow_other mount, what another user makes in staging/ is theirs.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "gtest/gtest.h"
#include "staging_util.h"
#include "tfrecordfs/repack/pack.h"
#include "tfrecordfs/staging/layout.h"

namespace tfrecordfs::mount_test::staging_test {
namespace {

constexpr uid_t kNobody = 65534;

// Runs `fn` in a child process as an unprivileged user (when we are root)
// and returns its exit code.
template <typename Fn>
int AsOrdinaryUser(Fn fn) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::geteuid() == 0 && (::setgid(kNobody) != 0 || ::setuid(kNobody) != 0)) ::_exit(99);
    ::_exit(fn());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void ChownTree(const std::string& root) {
  if (::geteuid() != 0) return;
  ASSERT_EQ(::lchown(root.c_str(), kNobody, kNobody), 0);
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    ASSERT_EQ(::lchown(e.path().c_str(), kNobody, kNobody), 0);
  }
}

// What `cp -r MNT/shard/0 MNT/staging/<name>` leaves: 0555 folders, 0444
// files, owned by the (ordinary) user.
void MakeReadOnlyRecord(const std::string& records, const std::string& name, int id) {
  const std::string r = records + "/" + name;
  std::filesystem::create_directories(r + "/image");
  WriteWholeFile(r + "/id", std::to_string(id) + "\n");
  WriteWholeFile(r + "/image/encoded.jpg", "\xFF\xD8\xFFjpeg");
  ASSERT_EQ(::chmod((r + "/id").c_str(), 0444), 0);
  ASSERT_EQ(::chmod((r + "/image/encoded.jpg").c_str(), 0444), 0);
  ASSERT_EQ(::chmod((r + "/image").c_str(), 0555), 0);
  ASSERT_EQ(::chmod(r.c_str(), 0555), 0);
  ChownTree(r);
}

TEST(StagingNonRootTest, PackAndRecoverRemoveReadOnlyFoldersAsAnOrdinaryUser) {
  TempDir tmp;
  ASSERT_EQ(::chmod(tmp.path().c_str(), 0755), 0);
  const std::string store = tmp.Subdir("store");
  const std::string records = tmp.Subdir(staging::RecordsDir("store"));
  const std::string out = tmp.Subdir("out");
  ChownTree(store);
  ChownTree(out);
  MakeReadOnlyRecord(records, "r0", 0);

  repack::PackOptions o;
  o.records_dir = records;
  o.output_dir = out;
  o.prefix = "ro";
  o.journal_path = staging::PackJournalFile(store);
  o.remove_packed = true;
  const int packed = AsOrdinaryUser([&] {
    const repack::PackReport r = repack::Pack(o);
    std::fprintf(stderr, "%s", r.Summary().c_str());
    return r.status.ok() ? 0 : 1;
  });
  EXPECT_EQ(packed, 0) << "the pack failed for an ordinary user (see its summary above)";
  EXPECT_TRUE(Exists(out + "/ro-00000-of-00001.tfrecord"));
  EXPECT_EQ(ListDir(records), std::vector<std::string>{}) << "the packed folder is still staged";
  EXPECT_FALSE(Exists(o.journal_path));

  // A pack killed after its commit point leaves the folders to Recover,
  // which the next mount runs first: it must be able to finish the job.
  MakeReadOnlyRecord(records, "r1", 1);
  o.prefix = "ro2";
  const int killed = AsOrdinaryUser([&] {
    ::setenv("TFRECORDFS_FAULT", "after_commit", 1);
    repack::Pack(o);
    return 0;  // not reached
  });
  EXPECT_EQ(killed, -1) << "the fault hook did not kill the pack";
  ASSERT_TRUE(Exists(o.journal_path));
  EXPECT_EQ(ListDir(records), std::vector<std::string>{"r1"});
  const int recovered = AsOrdinaryUser([&] {
    const absl::Status s = repack::Recover(o.journal_path, records);
    std::fprintf(stderr, "Recover: %s\n", s.ToString().c_str());
    return s.ok() ? 0 : 1;
  });
  EXPECT_EQ(recovered, 0) << "Recover fails: every later mount of this store would fail";
  EXPECT_EQ(ListDir(records), std::vector<std::string>{});
  EXPECT_FALSE(Exists(o.journal_path));
  EXPECT_TRUE(Exists(out + "/ro2-00000-of-00001.tfrecord"));
}

// With allow_other (which brings default_permissions, so the kernel checks
// the mode bits and owners the mount shows), what another user makes in
// staging/ must be that user's (issue 21, item 23): shown, and on disk, with
// the caller's uid and gid. Before, every staged node showed (and was) the
// daemon's, so the user could make a folder in a staging/ opened to everyone
// but not write into it. Root daemon only (see the man page: an unprivileged
// daemon cannot give files away); the user is `setpriv` to nobody.
TEST(StagingNonRootTest, AllowOtherStagesWhatAUserMakesAsTheirs) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (::geteuid() != 0) GTEST_SKIP() << "acting as another user needs root";
  Scratch s;
  ASSERT_EQ(::chmod(s.tmp.path().c_str(), 0755), 0);
  ASSERT_EQ(::chmod(s.mnt.c_str(), 0755), 0);
  test::WriteShard(s.src + "/base.tfrecord", {ExamplePayload({Int64Feature("label", {1})})});
  MountConfig c = PackConfig(s, {s.src}, "other");
  c.options.push_back("allow_other");
  Mount d(c);
  ASSERT_EQ(d.Start(), absl::OkStatus());
  const std::string staging = s.mnt + "/staging";
  // The mounting user opens staging/ to everyone, as an admin would.
  ASSERT_EQ(::chmod(staging.c_str(), 01777), 0) << std::strerror(errno);

  auto as_nobody = [&](const std::string& script) {
    return RunCommand({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c",
                       "cd \"$1\" && " + script, "sh", staging});
  };
  const CommandResult made = as_nobody(
      "mkdir r && echo 5 > r/label && mkdir r/notes && echo hi > r/notes/0.txt && "
      "stat -c '%u:%g %n' r r/label r/notes r/notes/0.txt");
  EXPECT_EQ(made.exit_code, 0) << made.err;
  EXPECT_EQ(made.out,
            "65534:65534 r\n65534:65534 r/label\n65534:65534 r/notes\n"
            "65534:65534 r/notes/0.txt\n");
  // On disk too: the store's files are the user's.
  for (const char* rel : {"r", "r/label", "r/notes", "r/notes/0.txt"}) {
    struct stat st {};
    ASSERT_EQ(::lstat((s.records() + "/" + rel).c_str(), &st), 0) << rel;
    EXPECT_EQ(st.st_uid, kNobody) << rel;
    EXPECT_EQ(st.st_gid, kNobody) << rel;
  }
  // Theirs to change: rewrite, remove, chown to themselves (cp -p does).
  const CommandResult changed =
      as_nobody("echo 6 > r/label && rm -r r/notes && chown 65534:65534 r/label && cat r/label");
  EXPECT_EQ(changed.exit_code, 0) << changed.err;
  EXPECT_EQ(changed.out, "6\n");
  // Root's own files stay root's.
  ASSERT_EQ(::mkdir((staging + "/mine").c_str(), 0755), 0) << std::strerror(errno);
  WriteWholeFile(staging + "/mine/label", "7\n");
  struct stat mine {};
  ASSERT_EQ(::stat((staging + "/mine/label").c_str(), &mine), 0);
  EXPECT_EQ(mine.st_uid, 0u);
  EXPECT_EQ(mine.st_gid, 0u);
  // Another user's folder is not nobody's to write into.
  EXPECT_NE(as_nobody("echo 8 > mine/label").exit_code, 0);

  int status = 0;
  const CommandResult u = d.TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  const std::vector<std::string> packed = AllPayloads(ReadPackedShards(s.out, "other"));
  ASSERT_EQ(packed.size(), 2u);
  ExpectSameRecord(ExamplePayload({Int64Feature("label", {7})}), packed[0], "mine");
  ExpectSameRecord(ExamplePayload({Int64Feature("label", {6})}), packed[1], "r");
}

}  // namespace
}  // namespace tfrecordfs::mount_test::staging_test
