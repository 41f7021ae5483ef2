// The pack run by an ordinary user on what `cp -r MNT/<shard>/<record>
// MNT/staging/` leaves: read-only (0555) folders of 0444 files, since cp
// keeps the mount's mode bits. Deleting them after the commit point must
// work for their non-root owner, or the COMMITTED journal stays and every
// later mount fails in Recover. The mount tests run as root (which bypasses
// the permission check), so this test calls the pack and Recover directly in
// a child process that drops to an unprivileged uid.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "gtest/gtest.h"
#include "staging_util.h"
#include "tfrecordfs/repack/pack.h"

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
  const std::string records = tmp.Subdir("store/records");
  const std::string out = tmp.Subdir("out");
  ChownTree(store);
  ChownTree(out);
  MakeReadOnlyRecord(records, "r0", 0);

  repack::PackOptions o;
  o.records_dir = records;
  o.output_dir = out;
  o.prefix = "ro";
  o.journal_path = store + "/pack.journal";
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

}  // namespace
}  // namespace tfrecordfs::mount_test::staging_test
