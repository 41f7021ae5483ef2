// Editing records of mounted shards through a real mount (issue 23), with
// the tools users use: bash redirections, `sed -i`, an editor's
// write-then-rename save, `truncate`, `rm`, `mv` and `cp` inside a record,
// Python's open(), `mkdir` / `cp -r` of new records into a shard folder,
// `rm -r` of a record. Checked through the mount before and after a kill -9
// and a remount (`tfrecordfs status` lists the edits), then committed by
// `tfrecordfs unmount` in the shard's own codec; an independent reader
// (tests/cli/tfrecord_check.py: framing, GZIP/ZLIB and tf.train.Example by
// hand) reads the result; the untouched shard keeps its inode and mtime.
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
#include "staging_util.h"

namespace tfrecordfs::mount_test::staging_test {
namespace {

constexpr int kRecords = 12;

// Each record of `shard` as the independent reader describes it (one line
// per record: tfrecord_check.describe_example), after a first line naming
// the codec.
// Runs `body` under /usr/bin/python3 with tests/cli/tfrecord_check.py
// imported as `t` and `arg` as sys.argv[1]; its stdout.
std::string WithChecker(const std::string& body, const std::string& arg) {
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  EXPECT_NE(root, nullptr);
  if (root == nullptr) return "";
  CommandResult r = RunCommand({"/usr/bin/python3", "-c",
                                absl::StrCat("import sys; sys.path.insert(0, '", root,
                                             "/tests/cli'); import tfrecord_check as t\n", body),
                                arg});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

std::vector<std::string> IndependentRead(const std::string& shard) {
  return absl::StrSplit(
      WithChecker("raw = open(sys.argv[1], 'rb').read(); print(t.codec_of(raw))\n"
                  "for p in t.read_records(sys.argv[1]): print(t.describe_example(p))\n",
                  shard),
      '\n', absl::SkipEmpty());
}

std::string Described(int id, const std::string& text, const std::string& score) {
  return absl::StrCat("id:int64:", id, " score:float:", score, " text:bytes:", text);
}

class RecordEditTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    TFRFS_SKIP_WITHOUT_FUSE();
    if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
    std::vector<std::string>& payloads = payloads_;
    for (int i = 0; i < kRecords; ++i) {
      payloads.push_back(ExamplePayload({Int64Feature("id", {i}),
                                         BytesFeature("text", {absl::StrCat("record ", i)}),
                                         FloatFeature("score", {i + 0.5f})}));
    }
    test::WriteShard(s_.src + "/b.tfrecord", {payloads[0], payloads[1]});
    shard_name_ = WriteShardWithCodec(s_.src, "a.tfrecord", payloads, GetParam());
    ASSERT_FALSE(HasFailure());
    shard_ = s_.src + "/" + shard_name_;
  }

  MountConfig Config(bool read_only = false) const {
    MountConfig c = PackConfig(s_, {s_.src}, "edit");
    if (read_only) c.options.push_back("ro");
    return c;
  }

  // MNT/<shard>/<rel>
  std::string R(const std::string& rel) const {
    return absl::StrCat(s_.mnt, "/", shard_name_, "/", rel);
  }
  // `cd MNT/<shard> && script` in bash.
  CommandResult InShard(const std::string& script) const {
    return RunCommand(
        {"bash", "-c",
         absl::StrCat("set -e; cd ", ShellQuote(s_.mnt + "/" + shard_name_), "; ", script)});
  }

  Scratch s_;
  std::vector<std::string> payloads_;
  std::string shard_name_;
  std::string shard_;
};

TEST_P(RecordEditTest, ToolsEditRecordsThatSurviveACrashAndCommitInTheShardsCodec) {
  struct stat b_before;
  ASSERT_EQ(::stat((s_.src + "/b.tfrecord").c_str(), &b_before), 0);
  // An index beside the shard, which its rewrite makes stale.
  CommandResult index = RunCommand({BinaryPath(), "index", "--beside", shard_});
  ASSERT_EQ(index.exit_code, 0) << index.out << index.err;
  ASSERT_TRUE(Exists(shard_ + ".tfri"));
  {
    Mount d(Config());
    ASSERT_EQ(d.Start(), absl::OkStatus());
    CommandResult edit = InShard(
        "echo 70 > 00/id\n"
        "sed -i 's/record 1/record one/' 01/text.txt\n"
        // An editor's save: a swap file, the new text under a temporary
        // name, renamed over the file.
        "printf swap > 02/.text.txt.swp; printf 'record two\\n' > 02/text.txt.new\n"
        "mv 02/text.txt.new 02/text.txt; rm 02/.text.txt.swp\n"
        "truncate -s 0 03/text.txt\n"
        "rm 04/score\n"
        "mv 05/text.txt 05/note.txt\n"
        "cp 06/text.txt 06/copy.txt\n"
        "/usr/bin/python3 -c 'open(\"07/id\", \"w\").write(\"77\\n\")'\n"
        "mkdir new && cp -r 09/* new/ && echo 100 > new/id\n"
        "cp -r 10 copy10 && printf 'copied\\n' > copy10/text.txt\n"
        "rm -r 11\n");
    ASSERT_EQ(edit.exit_code, 0) << edit.out << edit.err;
    // A value the feature cannot take is written and flagged, as in
    // staging/ (issue 34, item 6), until the file is written again.
    CommandResult bad = InShard("echo hello > 08/id");
    EXPECT_EQ(bad.exit_code, 0) << bad.err;
    EXPECT_NE(RunCommand({"getfattr", "--only-values", "-n", "user.tfrecordfs.error", R("08/id")})
                  .out.find("'hello' is not an int64"),
              std::string::npos);
    ASSERT_EQ(InShard("echo 88 > 08/id").exit_code, 0);

    // The mount shows the edited state.
    EXPECT_EQ(ReadWholeFile(R("00/id")), "70\n");
    EXPECT_EQ(ReadWholeFile(R("01/text.txt")), "record one\n");
    EXPECT_EQ(ReadWholeFile(R("02/text.txt")), "record two\n");
    EXPECT_EQ(ReadWholeFile(R("03/text.txt")), "");
    EXPECT_EQ(RunCommand({"ls", R("04")}).out, "id\ntext.txt\n");
    EXPECT_EQ(RunCommand({"ls", R("05")}).out, "id\nnote.txt\nscore\n");
    EXPECT_EQ(ReadWholeFile(R("09/id")), "9\n");  // the copy's source is untouched
    CommandResult ls = RunCommand({"ls", s_.mnt + "/" + shard_name_});
    EXPECT_EQ(ls.out, "00\n01\n02\n03\n04\n05\n06\n07\n08\n09\n10\ncopy10\nnew\n") << ls.err;
    struct stat st;
    ASSERT_EQ(::stat(R("00/id").c_str(), &st), 0);
    EXPECT_EQ(st.st_size, 3);
    CommandResult status = RunCommand({BinaryPath(), "status", s_.mnt});
    EXPECT_EQ(status.exit_code, 0) << status.err;
    EXPECT_NE(status.out.find(absl::StrCat("edited: ", shard_, ": 9 record(s)")), std::string::npos)
        << status.out;
    EXPECT_NE(status.out.find(absl::StrCat("added: ", shard_, ": copy10 new")), std::string::npos)
        << status.out;
    EXPECT_NE(status.out.find(absl::StrCat("deleted: ", shard_, ": 1 record(s)")),
              std::string::npos)
        << status.out;
    d.KillHard();
  }
  // Nothing is written to the shards before the commit.
  EXPECT_EQ(IndependentRead(shard_).size(), 1u + kRecords);
  Mount d(Config());
  ASSERT_EQ(d.Start(), absl::OkStatus());
  EXPECT_EQ(ReadWholeFile(R("00/id")), "70\n");
  EXPECT_EQ(ReadWholeFile(R("new/id")), "100\n");
  EXPECT_FALSE(Exists(R("11")));
  int status = 0;
  CommandResult un = d.TfrUnmount(&status);
  EXPECT_EQ(un.exit_code, 0) << un.out << un.err;
  EXPECT_NE(un.out.find(absl::StrCat("rewrote ", shard_,
                                     ": kept 2, changed 9, added 2, deleted 1 record(s)")),
            std::string::npos)
      << un.out;

  const std::vector<std::string> expected = {
      GetParam(),
      Described(70, "record 0", "0.5"),
      Described(1, "record one", "1.5"),
      Described(2, "record two", "2.5"),
      "id:int64:3 score:float:3.5 text:bytes:",
      "id:int64:4 text:bytes:record 4",
      "id:int64:5 note:bytes:record 5 score:float:5.5",
      "copy:bytes:record 6 id:int64:6 score:float:6.5 text:bytes:record 6",
      Described(77, "record 7", "7.5"),
      Described(88, "record 8", "8.5"),
      Described(9, "record 9", "9.5"),
      Described(10, "record 10", "10.5"),
      Described(10, "copied", "10.5"),  // copy10, then new: name order
      Described(100, "record 9", "9.5"),
  };
  EXPECT_EQ(IndependentRead(shard_), expected);
  // The untouched shard was not rewritten; no temporary file is left.
  struct stat b_after;
  ASSERT_EQ(::stat((s_.src + "/b.tfrecord").c_str(), &b_after), 0);
  EXPECT_EQ(b_after.st_ino, b_before.st_ino);
  EXPECT_EQ(b_after.st_mtim.tv_nsec, b_before.st_mtim.tv_nsec);
  EXPECT_EQ(b_after.st_mtim.tv_sec, b_before.st_mtim.tv_sec);
  // The index beside the shard follows it: rewritten for a plain shard,
  // removed for a compressed one.
  std::vector<std::string> files = {shard_name_, "b.tfrecord"};
  if (std::string(GetParam()) == "none") files.push_back(shard_name_ + ".tfri");
  std::sort(files.begin(), files.end());
  EXPECT_EQ(ListDir(s_.src), files);
  EXPECT_EQ(ListDir(s_.store + "/edits/records"), std::vector<std::string>{});

  // A fresh mount shows the committed records, numbered afresh.
  Mount again(Config(/*read_only=*/true));
  ASSERT_EQ(again.Start(), absl::OkStatus());
  EXPECT_EQ(ReadWholeFile(R("00/id")), "70\n");
  EXPECT_EQ(ReadWholeFile(R("10/text.txt")), "record 10\n");
  EXPECT_EQ(ReadWholeFile(R("11/text.txt")), "copied\n");
  EXPECT_EQ(ReadWholeFile(R("12/id")), "100\n");
  // -o ro: EROFS, and nothing is checked out.
  CommandResult ro = InShard("echo 5 > 00/id");
  EXPECT_NE(ro.exit_code, 0);
  EXPECT_NE(ro.err.find("Read-only file system"), std::string::npos) << ro.err;
  CommandResult mk = RunCommand({"mkdir", R("more")});
  EXPECT_NE(mk.exit_code, 0);
  EXPECT_NE(mk.err.find("Read-only file system"), std::string::npos) << mk.err;
}

// What indexes a rewritten shard follows it within its commit, while
// mounted (`tfrecordfs commit`) and at unmount: a DALI index written by
// `index --dali-dir` is rewritten from the new shard's offsets (checked
// line by line against the new shard's framing by an independent Python
// walk); the index_dir entry (`index --index-dir`, mounted with -o
// index_dir) and the `.tfri` beside the shard are rewritten for a plain
// shard (`index` then finds them valid: nothing walked) and removed for a
// GZIP/ZLIB one (whose checkpoints only a walk gives).
TEST_P(RecordEditTest, IndexesFollowTheRewrittenShard) {
  const bool plain = std::string(GetParam()) == "none";
  const std::string idx_dir = s_.tmp.path() + "/idx";
  const std::string dali_dir = s_.tmp.path() + "/dali";
  const std::string dali = dali_dir + "/" + shard_name_ + ".idx";
  const std::string shared = idx_dir + "/" + shard_name_ + ".tfri";
  CommandResult made =
      RunCommand({BinaryPath(), "index", "--index-dir", idx_dir, "--dali-dir", dali_dir, s_.src});
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  ASSERT_EQ(RunCommand({BinaryPath(), "index", "--beside", shard_}).exit_code, 0);
  ASSERT_TRUE(Exists(shared));
  ASSERT_TRUE(Exists(shard_ + ".tfri"));
  ASSERT_EQ(Exists(dali), plain);
  // The DALI index DALI would need for the shard, from its bytes.
  auto dali_of_shard = [&] {
    return WithChecker(
        "raw = open(sys.argv[1], 'rb').read(); off = 0\n"
        "while off < len(raw):\n"
        "  n = int.from_bytes(raw[off:off + 8], 'little'); print(off, n + 16); off += n + 16\n",
        shard_);
  };
  auto index_again = [&](const std::vector<std::string>& how) {
    std::vector<std::string> argv = {BinaryPath(), "index"};
    argv.insert(argv.end(), how.begin(), how.end());
    argv.push_back(shard_);
    CommandResult r = RunCommand(argv);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return r.out;
  };
  MountConfig c = Config();
  c.options.push_back("index_dir=" + idx_dir);
  for (const bool mounted : {true, false}) {
    SCOPED_TRACE(mounted ? "tfrecordfs commit" : "unmount");
    Mount d(c);
    ASSERT_EQ(d.Start(), absl::OkStatus());
    ASSERT_EQ(
        InShard(mounted ? "echo 70 > 00/id; rm -r 01; mkdir zz; echo 9 > zz/id" : "rm -r 02 03")
            .exit_code,
        0);
    if (mounted) {
      CommandResult commit = RunCommand({BinaryPath(), "commit", s_.mnt});
      ASSERT_EQ(commit.exit_code, 0) << commit.out << commit.err;
      EXPECT_EQ(ReadWholeFile(R("0/id")), "70\n");
    }
    int st = 0;
    CommandResult un = d.TfrUnmount(&st);
    ASSERT_EQ(un.exit_code, 0) << un.out << un.err;
    EXPECT_EQ(IndependentRead(shard_).size(), 1u + (mounted ? kRecords : kRecords - 2));
    if (plain) {
      EXPECT_EQ(ReadWholeFile(dali), dali_of_shard());
      // Valid for the new shard: `index` walks nothing.
      EXPECT_NE(index_again({"--index-dir", idx_dir}).find("0 walked, 0 grown, 1 already valid"),
                std::string::npos);
      EXPECT_NE(index_again({"--beside"}).find("0 walked, 0 grown, 1 already valid"),
                std::string::npos);
    } else {
      EXPECT_FALSE(Exists(shared));
      EXPECT_FALSE(Exists(shard_ + ".tfri"));
      break;
    }
  }
}

TEST_P(RecordEditTest, AShardChangedBehindTheMountKeepsItsEditsPending) {
  {
    Mount d(Config());
    ASSERT_EQ(d.Start(), absl::OkStatus());
    ASSERT_EQ(InShard("echo 70 > 00/id").exit_code, 0);
    d.KillHard();
  }
  // Replaced behind the mount: its record indexes may mean other records.
  const std::string before = ReadWholeFile(shard_);
  ASSERT_EQ(::unlink(shard_.c_str()), 0);
  WriteWholeFile(shard_, before);
  Mount d(Config());
  ASSERT_EQ(d.Start(), absl::OkStatus());
  EXPECT_EQ(ReadWholeFile(R("00/id")), "0\n");  // the edit is not shown
  int status = 0;
  CommandResult un = d.TfrUnmount(&status);
  EXPECT_EQ(un.exit_code, 1) << un.out << un.err;
  EXPECT_NE(un.out.find(absl::StrCat("not rewritten ", shard_, ": ")), std::string::npos) << un.out;
  EXPECT_EQ(ReadWholeFile(shard_), before);
  EXPECT_EQ(IndependentRead(shard_).size(), 1u + kRecords);
  // Kept, not lost: the edit folder is still in the store.
  EXPECT_EQ(ListDir(s_.store + "/edits/records").size(), 1u);
}

TEST_P(RecordEditTest, CommitWhileMountedShowsTheNewShardAtOnce) {
  Mount d(Config());
  ASSERT_EQ(d.Start(), absl::OkStatus());
  // The kernel caches every name, attribute and page of the shard first.
  CommandResult warm = InShard("ls -lR . > /dev/null; cat */id */text.txt > /dev/null");
  ASSERT_EQ(warm.exit_code, 0) << warm.err;
  ASSERT_EQ(InShard("echo 70 > 00/id; rm -r 01 02; mkdir zz; echo 99 > zz/id").exit_code, 0);
  // A reader of the other shard keeps reading while the commit runs.
  const std::string b = s_.mnt + "/b.tfrecord/1/text.txt";
  CommandResult commit = RunCommand(
      {"bash", "-c",
       absl::StrCat("(for i in $(seq 200); do cat ", ShellQuote(b),
                    " > /dev/null || exit 1; done) & reader=$!; ", ShellQuote(BinaryPath()),
                    " commit ", ShellQuote(s_.mnt), "; rc=$?; wait $reader || exit 9; exit $rc")});
  EXPECT_EQ(commit.exit_code, 0) << commit.out << commit.err;
  EXPECT_NE(commit.out.find(absl::StrCat("rewrote ", shard_,
                                         ": kept 9, changed 1, added 1, deleted 2 record(s)")),
            std::string::npos)
      << commit.out;
  // At once, without a remount: 11 records renumbered 00..10, the new
  // values (not the cached ones), nothing pending.
  CommandResult ls = RunCommand({"ls", s_.mnt + "/" + shard_name_});
  EXPECT_EQ(ls.out, "00\n01\n02\n03\n04\n05\n06\n07\n08\n09\n10\n") << ls.err;
  EXPECT_EQ(ReadWholeFile(R("0/id")), "70\n");
  EXPECT_EQ(ReadWholeFile(R("1/id")), "3\n");
  EXPECT_EQ(ReadWholeFile(R("1/text.txt")), "record 3\n");
  EXPECT_EQ(ReadWholeFile(R("10/id")), "99\n");
  // The names the kernel cached before (padded), now other records.
  EXPECT_EQ(ReadWholeFile(R("01/id")), "3\n");
  EXPECT_EQ(ReadWholeFile(R("02/text.txt")), "record 4\n");
  EXPECT_FALSE(Exists(R("zz")));
  EXPECT_FALSE(Exists(R("11")));
  CommandResult status = RunCommand({BinaryPath(), "status", s_.mnt});
  EXPECT_EQ(status.out.find("edited:"), std::string::npos) << status.out;
  EXPECT_EQ(status.out.find("deleted:"), std::string::npos) << status.out;
  // Edits go on against the new numbering; nothing left: "nothing to commit".
  ASSERT_EQ(InShard("echo 11 > 1/id").exit_code, 0);
  CommandResult again = RunCommand({BinaryPath(), "commit", s_.mnt});
  EXPECT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_EQ(ReadWholeFile(R("1/id")), "11\n");
  CommandResult nothing = RunCommand({BinaryPath(), "commit", s_.mnt});
  EXPECT_EQ(nothing.exit_code, 0) << nothing.err;
  EXPECT_NE(nothing.out.find("nothing to commit"), std::string::npos) << nothing.out;
  int st = 0;
  CommandResult un = d.TfrUnmount(&st);
  EXPECT_EQ(un.exit_code, 0) << un.out << un.err;
  std::vector<std::string> expected = {GetParam(), Described(70, "record 0", "0.5"),
                                       Described(11, "record 3", "3.5")};
  for (int i = 4; i < kRecords; ++i) {
    expected.push_back(Described(i, absl::StrCat("record ", i), absl::StrCat(i, ".5")));
  }
  expected.push_back("id:int64:99");
  EXPECT_EQ(IndependentRead(shard_), expected);
  // A read-only mount has nothing to commit: exit 3.
  Mount ro(Config(/*read_only=*/true));
  ASSERT_EQ(ro.Start(), absl::OkStatus());
  CommandResult refused = RunCommand({BinaryPath(), "commit", s_.mnt});
  EXPECT_EQ(refused.exit_code, 3) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("read-only"), std::string::npos) << refused.err;
}

// Issue 34 item 10: a commit keeps what the shard's file was. A 0600 shard
// owned by 1234:2345, mounted through a symlink, stays 0600 1234:2345 and
// the symlink stays a symlink (its target gets the new records); a
// hard-linked shard is replaced under its mounted name, its other name
// keeps the old records, and the report says so. Before the fix the commit
// made both 0644 root:root files and replaced the symlink by a regular file.
TEST_P(RecordEditTest, CommitKeepsModeOwnerAndSymlinksAndSaysWhatHardLinksKeep) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving files to other users needs root";
  const std::string elsewhere = s_.tmp.Subdir("elsewhere");
  const std::string target = elsewhere + "/" + shard_name_;
  ASSERT_EQ(::rename(shard_.c_str(), target.c_str()), 0);
  ASSERT_EQ(::symlink(target.c_str(), shard_.c_str()), 0);
  ASSERT_EQ(::chown(target.c_str(), 1234, 2345), 0);
  ASSERT_EQ(::chmod(target.c_str(), 0600), 0);
  const std::string b = s_.src + "/b.tfrecord", b_link = elsewhere + "/b-link.tfrecord";
  ASSERT_EQ(::link(b.c_str(), b_link.c_str()), 0);
  ASSERT_EQ(::chown(b.c_str(), 4321, 5432), 0);
  ASSERT_EQ(::chmod(b.c_str(), 0640), 0);
  const std::vector<std::string> b_before = IndependentRead(b);
  {
    Mount d(Config());
    ASSERT_EQ(d.Start(), absl::OkStatus());
    ASSERT_EQ(InShard("echo 70 > 00/id").exit_code, 0);
    ASSERT_EQ(
        RunCommand({"bash", "-c", "echo 5 > \"$1\"", "-", s_.mnt + "/b.tfrecord/0/id"}).exit_code,
        0);
    CommandResult commit = RunCommand({BinaryPath(), "commit", s_.mnt});
    EXPECT_EQ(commit.exit_code, 0) << commit.out << commit.err;
    EXPECT_NE(commit.out.find(absl::StrCat(
                  "rewrote ", b, ": kept 1, changed 1, added 0, deleted 0 record(s) in ")),
              std::string::npos)
        << commit.out;
    EXPECT_NE(commit.out.find("its 1 other hard link(s) keep the old records"), std::string::npos)
        << commit.out;
    // The mount shows the new records through the symlink at once.
    EXPECT_EQ(ReadWholeFile(R("00/id")), "70\n");
    int st = 0;
    CommandResult un = d.TfrUnmount(&st);
    EXPECT_EQ(un.exit_code, 0) << un.out << un.err;
  }
  struct stat link_st, st;
  ASSERT_EQ(::lstat(shard_.c_str(), &link_st), 0);
  EXPECT_TRUE(S_ISLNK(link_st.st_mode)) << "the symlinked shard was replaced by a file";
  char to[4096] = {};
  EXPECT_EQ(std::string(to, ::readlink(shard_.c_str(), to, sizeof to - 1)), target);
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, 1234u);
  EXPECT_EQ(st.st_gid, 2345u);
  std::vector<std::string> expected = {GetParam(), Described(70, "record 0", "0.5")};
  for (int i = 1; i < kRecords; ++i) {
    expected.push_back(Described(i, absl::StrCat("record ", i), absl::StrCat(i, ".5")));
  }
  EXPECT_EQ(IndependentRead(target), expected);
  ASSERT_EQ(::stat(b.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(st.st_uid, 4321u);
  EXPECT_EQ(st.st_gid, 5432u);
  EXPECT_EQ(st.st_nlink, 1u);
  EXPECT_EQ(IndependentRead(b),
            (std::vector<std::string>{"none", Described(5, "record 0", "0.5"), b_before[2]}));
  EXPECT_EQ(IndependentRead(b_link), b_before);
  // No temporary file left in either folder.
  std::vector<std::string> left = {"b-link.tfrecord", shard_name_};
  std::sort(left.begin(), left.end());
  EXPECT_EQ(ListDir(elsewhere), left);
}

// `mv SHARD/03 staging/` and `mv SHARD/04 OTHER/name`: the record leaves
// its shard and is staged / added there, exactly once, through a kill -9 and
// a remount; and a SIGKILL inside the move (before and after its deletion
// is durable) is rolled back or finished by the next mount.
TEST_P(RecordEditTest, MvMovesARecordOutOfItsShardExactlyOnce) {
  const std::string b = s_.src + "/b.tfrecord";
  {
    Mount d(Config());
    ASSERT_EQ(d.Start(), absl::OkStatus());
    CommandResult mv = InShard("mv 03 ../staging/moved3 && mv 04 ../b.tfrecord/from-a");
    ASSERT_EQ(mv.exit_code, 0) << mv.err;
    EXPECT_FALSE(Exists(R("03")));
    EXPECT_FALSE(Exists(R("04")));
    EXPECT_EQ(ReadWholeFile(s_.mnt + "/staging/moved3/id"), "3\n");
    EXPECT_EQ(ReadWholeFile(s_.mnt + "/b.tfrecord/from-a/id"), "4\n");
    // The name a record is moved to must be free; records keep their place.
    CommandResult taken = InShard("mv 05 ../b.tfrecord/from-a");
    EXPECT_NE(taken.exit_code, 0);
    CommandResult same = InShard("mv 05 five");
    EXPECT_NE(same.exit_code, 0);
    EXPECT_NE(same.err.find("Operation not permitted"), std::string::npos) << same.err;
    d.KillHard();
  }
  for (const char* fault : {"move_before_delete", "move_after_delete"}) {
    MountConfig c = Config();
    c.fault = fault;
    Mount d(c);
    ASSERT_EQ(d.Start(), absl::OkStatus());
    if (std::string(fault) == "move_after_delete") {
      // The crash before the deletion was durable: rolled back.
      EXPECT_EQ(ReadWholeFile(R("06/id")), "6\n");
      EXPECT_FALSE(Exists(s_.mnt + "/staging/move_before_delete"));
    }
    EXPECT_NE(InShard(absl::StrCat("mv 06 ../staging/", fault)).exit_code, 0);
    int status = 0;
    ASSERT_TRUE(d.WaitExit(&status));
    EXPECT_NE(d.Stderr().find(absl::StrCat("TFRECORDFS_FAULT=", fault)), std::string::npos)
        << d.Stderr();
    CleanStaleMount(s_.mnt);
  }
  Mount d(Config());
  ASSERT_EQ(d.Start(), absl::OkStatus());
  // The crash after the deletion: finished (06 is staged, once).
  EXPECT_FALSE(Exists(R("06")));
  EXPECT_FALSE(Exists(s_.mnt + "/staging/move_before_delete"));
  EXPECT_EQ(ReadWholeFile(s_.mnt + "/staging/move_after_delete/id"), "6\n");
  EXPECT_EQ(ReadWholeFile(s_.mnt + "/staging/moved3/id"), "3\n");
  int status = 0;
  CommandResult un = d.TfrUnmount(&status);
  // The second crash moved 06 too (its deletion was durable): it is staged.
  EXPECT_EQ(un.exit_code, 0) << un.out << un.err;
  std::vector<std::string> a = IndependentRead(shard_);
  std::vector<std::string> want = {GetParam()};
  for (int i = 0; i < kRecords; ++i) {
    if (i == 3 || i == 4 || i == 6) continue;
    want.push_back(Described(i, absl::StrCat("record ", i), absl::StrCat(i, ".5")));
  }
  EXPECT_EQ(a, want);
  EXPECT_EQ(IndependentRead(b), (std::vector<std::string>{"none", Described(0, "record 0", "0.5"),
                                                          Described(1, "record 1", "1.5"),
                                                          Described(4, "record 4", "4.5")}));
  // The staged records: 3 and 6, packed into a new shard in the output folder.
  const auto packed = AllPayloads(ReadPackedShards(s_.out, "edit"));
  ASSERT_EQ(packed.size(), 2u) << un.out;
  std::set<int64_t> ids;
  for (const std::string& p : packed) ids.insert(SingleInt(Decode(p), "id").value_or(-1));
  EXPECT_EQ(ids, (std::set<int64_t>{3, 6}));
  EXPECT_EQ(ListDir(s_.store + "/edits/records"), std::vector<std::string>{});
}

TEST_P(RecordEditTest, TfdsMetadataFollowsTheRewrittenShard) {
  // TFDS's layout: <dataset>-<split>.<format>-NNNNN-of-MMMMM beside a
  // dataset_info.json that lists each shard's record count.
  const std::string tfds = s_.tmp.Subdir("tfds");
  const std::string name = absl::StrCat("ds-train.tfrecord-00000-of-00002");
  ASSERT_EQ(::rename(shard_.c_str(), (tfds + "/" + name).c_str()), 0);
  ASSERT_EQ(::rename((s_.src + "/b.tfrecord").c_str(),
                     (tfds + "/ds-train.tfrecord-00001-of-00002").c_str()),
            0);
  WriteWholeFile(tfds + "/dataset_info.json",
                 R"({"name": "ds", "splits": [{"name": "train", "numBytes": "10000", )"
                 R"("shardLengths": ["12", "2"]}], "version": "1.0.0"})");
  // A private file of another user stays so (issue 34 item 10).
  const bool root = ::geteuid() == 0;
  if (root) {
    ASSERT_EQ(::chown((tfds + "/dataset_info.json").c_str(), 1234, 2345), 0);
  }
  ASSERT_EQ(::chmod((tfds + "/dataset_info.json").c_str(), 0600), 0);
  MountConfig c = PackConfig(s_, {tfds}, "edit");
  Mount d(c);
  ASSERT_EQ(d.Start(), absl::OkStatus());
  const std::string dir = s_.mnt + "/" + name;
  CommandResult rm = RunCommand({"rm", "-r", dir + "/00", dir + "/01"});
  ASSERT_EQ(rm.exit_code, 0) << rm.err;
  int status = 0;
  CommandResult un = d.TfrUnmount(&status);
  EXPECT_EQ(un.exit_code, 0) << un.out << un.err;
  const std::string info = ReadWholeFile(tfds + "/dataset_info.json");
  // Records 0 and 1 held 2 x (id, text "record N", score) payloads.
  const CommandResult py =
      RunCommand({"/usr/bin/python3", "-c",
                  "import json, sys; s = json.load(open(sys.argv[1]))['splits'][0]; "
                  "print(s['shardLengths'], s['numBytes'])",
                  tfds + "/dataset_info.json"});
  EXPECT_EQ(py.exit_code, 0) << py.err << info;
  const size_t removed = payloads_[0].size() + payloads_[1].size();
  EXPECT_EQ(py.out, absl::StrCat("['10', '2'] ", 10000 - removed, "\n")) << info;
  struct stat st;
  ASSERT_EQ(::stat((tfds + "/dataset_info.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  if (root) {
    EXPECT_EQ(st.st_uid, 1234u);
    EXPECT_EQ(st.st_gid, 2345u);
  }
}

// Editing what the generated datasets hold (tfrecordfs-gen): a
// SequenceExample's context values, an image replaced by `cp`; everything
// else of an edited record survives its round trip through the folder
// (compared with `tfrecordfs show` before and after), and untouched
// records stay byte for byte (the independent reader).
TEST(RecordEditGeneratedTest, SequenceExamplesAndImages) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  const char* gen = std::getenv("TFRECORDFS_GEN");
  ASSERT_NE(gen, nullptr) << "$TFRECORDFS_GEN is not set";
  Scratch s;
  const std::string seq = s.src + "/seq", sample = s.src + "/sample";
  ASSERT_EQ(0, RunCommand({gen, "sequence", seq, "--records", "3"}).exit_code);
  ASSERT_EQ(0, RunCommand({gen, "sample", sample, "--records", "4", "--shards", "1"}).exit_code);
  const std::string seq_shard = seq + "/sequence-00000-of-00001.tfrecord";
  const std::string img_shard = sample + "/train-00000-of-00001.tfrecord";
  auto show = [&](const std::string& shard, const std::string& record) {
    CommandResult r = RunCommand({BinaryPath(), "show", shard, record});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
    lines.erase(lines.begin());  // "# record N of ...: <size> bytes at <offset>"
    return lines;
  };
  const std::vector<std::string> seq0 = show(seq_shard, "0");
  const std::vector<std::string> seq_before = IndependentRead(seq_shard);
  MountConfig c = PackConfig(s, {s.src}, "edit");
  Mount d(c);
  ASSERT_EQ(d.Start(), absl::OkStatus());
  const std::string m0 = s.mnt + "/seq/sequence-00000-of-00001.tfrecord/0";
  const std::string jpeg =
      ReadWholeFile(s.mnt + "/sample/train-00000-of-00001.tfrecord/1/image/encoded.jpg");
  CommandResult edit = RunCommand(
      {"bash", "-c",
       absl::StrCat(
           "set -e; echo 5 > ", ShellQuote(m0 + "/context/label"), "; sed -i 's/.*/renamed/' ",
           ShellQuote(m0 + "/context/name.txt"), "; cp ",
           ShellQuote(s.mnt + "/sample/train-00000-of-00001.tfrecord/1/image/encoded.jpg"), " ",
           ShellQuote(s.mnt + "/sample/train-00000-of-00001.tfrecord/0/image/encoded.jpg"))});
  ASSERT_EQ(edit.exit_code, 0) << edit.err;
  int status = 0;
  CommandResult un = d.TfrUnmount(&status);
  EXPECT_EQ(un.exit_code, 0) << un.out << un.err;
  // The edited SequenceExample: only the two context values changed.
  std::vector<std::string> want = seq0, got = show(seq_shard, "0");
  // `show` prints the context's features as "  label  int64[1]  0".
  for (std::string& line : want) {
    if (absl::StartsWith(line, "  label ") || absl::StartsWith(line, "  name ")) line = "";
  }
  std::vector<std::string> got_rest = got;
  for (std::string& line : got_rest) {
    if (absl::StartsWith(line, "  label ")) {
      EXPECT_TRUE(absl::StrContains(line, " 5")) << line;
      line = "";
    }
    if (absl::StartsWith(line, "  name ")) {
      EXPECT_TRUE(absl::StrContains(line, "\"renamed\"")) << line;
      line = "";
    }
  }
  EXPECT_EQ(got_rest, want);
  // Untouched records: the same bytes.
  const std::vector<std::string> seq_after = IndependentRead(seq_shard);
  ASSERT_EQ(seq_after.size(), seq_before.size());
  EXPECT_NE(seq_after[1], seq_before[1]);
  EXPECT_EQ(seq_after[2], seq_before[2]);
  EXPECT_EQ(seq_after[3], seq_before[3]);
  // The image replaced by cp: its exact bytes, read by the independent reader.
  const std::string img = WithChecker(
      "p = next(iter(t.read_records(sys.argv[1])))\n"
      "sys.stdout.buffer.write(t.decode_example(p)['image/encoded'][1][0])\n",
      img_shard);
  EXPECT_TRUE(img == jpeg) << "record 0's image is not the copied JPEG";
}

// Issue 36: a commit of one label in a compressed shard of many deflate
// blocks (8 MiB of framing: eight blocks the writer deflates at once,
// record/deflate.h), through `echo >` and `tfrecordfs commit` on a real
// mount. Python's gzip module reads the result whole (its CRC-32 and size
// checked), zlib finds exactly one GZIP member (ZLIB: one stream, nothing
// after it), and the independent reader finds every record: the edited one
// with its new label, every other one byte for byte as before.
class CompressedCommitTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CompressedCommitTest, OneLabelOfAManyBlockShard) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  const std::string codec = GetParam();
  Scratch s;
  constexpr int kCount = 80;
  std::vector<std::string> payloads;
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < kCount; ++i) {
    // 100 KiB that deflates to about half: words drawn at random.
    std::string blob;
    while (blob.size() < (100 << 10)) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      blob += absl::StrCat("w", x % 4096, " ");
    }
    payloads.push_back(ExamplePayload({Int64Feature("label", {i}), BytesFeature("blob", {blob})}));
  }
  const std::string name = WriteShardWithCodec(s.src, "a.tfrecord", payloads, codec);
  ASSERT_FALSE(HasFailure());
  const std::string shard = s.src + "/" + name;
  // One line per record: its label and the SHA-256 of its payload; first,
  // the stream's own check (Python's gzip / zlib modules).
  auto read = [&] {
    return std::vector<std::string>(absl::StrSplit(
        WithChecker(
            absl::StrCat("import gzip, hashlib, zlib\n"
                         "raw = open(sys.argv[1], 'rb').read()\n",
                         codec == "gzip" ? "data = gzip.decompress(raw)\n"
                                           "d = zlib.decompressobj(31); d.decompress(raw)\n"
                                         : "d = zlib.decompressobj(15); data = d.decompress(raw)\n",
                         "print('one stream', d.eof and not d.unused_data, len(data))\n"
                         "for p in t.read_records(sys.argv[1]):\n"
                         "  print(t.decode_example(p)['label'][1][0], "
                         "hashlib.sha256(p).hexdigest())\n"),
            shard),
        '\n', absl::SkipEmpty()));
  };
  const std::vector<std::string> before = read();
  ASSERT_EQ(before.size(), 1u + kCount);
  Mount d(PackConfig(s, {s.src}, "edit"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  CommandResult edit = RunCommand(
      {"bash", "-c", absl::StrCat("echo 7000 > ", ShellQuote(s.mnt + "/" + name + "/37/label"))});
  ASSERT_EQ(edit.exit_code, 0) << edit.err;
  CommandResult commit = RunCommand({BinaryPath(), "commit", s.mnt});
  ASSERT_EQ(commit.exit_code, 0) << commit.out << commit.err;
  EXPECT_NE(commit.out.find(absl::StrCat("rewrote ", shard, ": kept 79, changed 1")),
            std::string::npos)
      << commit.out;
  EXPECT_EQ(ReadWholeFile(s.mnt + "/" + name + "/37/label"), "7000\n");
  const std::vector<std::string> after = read();
  ASSERT_EQ(after.size(), before.size());
  EXPECT_TRUE(absl::StartsWith(after[0], "one stream True ")) << after[0];
  for (int i = 0; i < kCount; ++i) {
    if (i == 37) {
      EXPECT_TRUE(absl::StartsWith(after[1 + i], "7000 ")) << after[1 + i];
    } else {
      EXPECT_EQ(after[1 + i], before[1 + i]) << "record " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, CompressedCommitTest, ::testing::Values("gzip", "zlib"));

// Issue 34, items 5 and 7, on a plain shard of six records.
class RecordModesTest : public ::testing::Test {
 protected:
  static constexpr int kCount = 6;
  void SetUp() override {
    TFRFS_SKIP_WITHOUT_FUSE();
    if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
    if (::access("/usr/bin/vim", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/vim";
    std::vector<std::string> payloads;
    for (int i = 0; i < kCount; ++i) {
      payloads.push_back(ExamplePayload({Int64Feature("id", {i}),
                                         BytesFeature("text", {absl::StrCat("record ", i)}),
                                         FloatFeature("score", {i + 0.5f})}));
    }
    test::WriteShard(s_.src + "/a.tfrecord", payloads);
    shard_ = s_.src + "/a.tfrecord";
  }
  MountConfig Config(bool read_only = false) const {
    MountConfig c = PackConfig(s_, {s_.src}, "edit");
    // A log file: `tfrecordfs unmount` repeats its errors and warnings.
    c.options.push_back("log=" + s_.logs + "/daemon.log");
    if (read_only) c.options.push_back("ro");
    return c;
  }
  std::string R(const std::string& rel) const { return s_.mnt + "/a.tfrecord/" + rel; }
  // The mode column of `ls -ld PATH`.
  static std::string LsMode(const std::string& path) {
    CommandResult ls = RunCommand({"ls", "-ld", path});
    EXPECT_EQ(ls.exit_code, 0) << ls.err;
    return ls.out.substr(0, ls.out.find(' '));
  }
  CommandResult InShard(const std::string& script) const {
    return RunCommand(
        {"bash", "-c", absl::StrCat("cd ", ShellQuote(s_.mnt + "/a.tfrecord"), "; ", script)});
  }
  CommandResult Status(bool json = false) const {
    if (json) return RunCommand({BinaryPath(), "status", "--json", s_.mnt});
    return RunCommand({BinaryPath(), "status", s_.mnt});
  }

  Scratch s_;
  std::string shard_;
};

// Item 5: a read-write mount shows a record's files writable by the mount's
// owner (before: -r--r--r--, and vim stopped with "E45: 'readonly' option
// is set" while its swap file had already checked the record out), so vim
// saves the first edit of a record, by :wq and by :w. Attempts that leave a
// record as it was (vim quit without a save, `echo` of the value a file
// holds, `sed -i` that matches nothing) leave no edit: the commit finds
// nothing to do and the shard is not rewritten (before: "rewrote ...").
TEST_F(RecordModesTest, RecordsAreWritableAndVimSavesTheFirstEdit) {
  Mount d(Config());
  ASSERT_EQ(d.Start(), absl::OkStatus());
  EXPECT_EQ(LsMode(R("1/text.txt")), "-rw-r--r--");
  EXPECT_EQ(LsMode(R("1/id")), "-rw-r--r--");
  EXPECT_EQ(LsMode(R("1")), "drwxr-xr-x");
  EXPECT_EQ(LsMode(s_.mnt + "/a.tfrecord"), "drwxr-xr-x");

  struct stat before;
  ASSERT_EQ(::stat(shard_.c_str(), &before), 0);
  CommandResult quit = RunCommand({"vim", "-E", "-s", "-c", "q", R("3/text.txt")});
  EXPECT_EQ(quit.exit_code, 0) << quit.out << quit.err;
  CommandResult same = InShard("set -e; echo 0 > 0/id; sed -i 's/nothing/here/' 4/text.txt");
  EXPECT_EQ(same.exit_code, 0) << same.err;
  CommandResult nothing = RunCommand({BinaryPath(), "commit", s_.mnt});
  EXPECT_EQ(nothing.exit_code, 0) << nothing.out << nothing.err;
  EXPECT_NE(nothing.out.find("nothing to commit"), std::string::npos) << nothing.out;
  struct stat after;
  ASSERT_EQ(::stat(shard_.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  EXPECT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  CommandResult status = Status();
  EXPECT_EQ(status.out.find("edited:"), std::string::npos) << status.out;
  EXPECT_EQ(ReadWholeFile(R("3/text.txt")), "record 3\n");
  EXPECT_EQ(ReadWholeFile(R("0/id")), "0\n");

  CommandResult wq =
      RunCommand({"vim", "-E", "-s", "-c", "%s/record/entry/", "-c", "wq", R("1/text.txt")});
  EXPECT_EQ(wq.exit_code, 0) << wq.out << wq.err;
  EXPECT_EQ(ReadWholeFile(R("1/text.txt")), "entry 1\n");
  CommandResult w =
      RunCommand({"vim", "-E", "-s", "-c", "%s/2/22/", "-c", "w", "-c", "q", R("2/id")});
  EXPECT_EQ(w.exit_code, 0) << w.out << w.err;
  EXPECT_EQ(ReadWholeFile(R("2/id")), "22\n");
  // Still writable once edited (the copies in the edit store).
  EXPECT_EQ(LsMode(R("1/text.txt")), "-rw-r--r--");
  status = Status();
  EXPECT_NE(status.out.find(
                absl::StrCat("edited: ", shard_, ": 2 record(s) (rewritten at unmount): 1 2\n")),
            std::string::npos)
      << status.out;
  CommandResult commit = RunCommand({BinaryPath(), "commit", s_.mnt});
  EXPECT_EQ(commit.exit_code, 0) << commit.out << commit.err;
  EXPECT_NE(commit.out.find(absl::StrCat("rewrote ", shard_,
                                         ": kept 4, changed 2, added 0, deleted 0 record(s)")),
            std::string::npos)
      << commit.out;
  int st = 0;
  CommandResult un = d.TfrUnmount(&st);
  EXPECT_EQ(un.exit_code, 0) << un.out << un.err;
  std::vector<std::string> expected = {"none"};
  for (int i = 0; i < kCount; ++i) {
    expected.push_back(Described(i == 2 ? 22 : i, i == 1 ? "entry 1" : absl::StrCat("record ", i),
                                 absl::StrCat(i, ".5")));
  }
  EXPECT_EQ(IndependentRead(shard_), expected);
}

// `-o ro` mounts stay read-only.
TEST_F(RecordModesTest, ReadOnlyMountsShowReadOnlyRecords) {
  Mount d(Config(/*read_only=*/true));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  EXPECT_EQ(LsMode(R("1/text.txt")), "-r--r--r--");
  EXPECT_EQ(LsMode(R("1")), "dr-xr-xr-x");
  EXPECT_EQ(LsMode(s_.mnt + "/a.tfrecord"), "dr-xr-xr-x");
}

// Item 7: `status` names an edited record the commit would refuse, with the
// file and the reason (before: "refused: none", exit 0, while the commit
// failed on it), and exits 1; once it is fixed and committed, `tfrecordfs
// unmount` does not repeat the failure the commit had fixed (before: "the
// mount logged 1 error(s)", the old "not rewritten" line).
TEST_F(RecordModesTest, StatusNamesRefusedEditsAndUnmountOnlyWhatStillHolds) {
  Mount d(Config());
  ASSERT_EQ(d.Start(), absl::OkStatus());
  // Written and flagged (issue 34, item 6): the record cannot commit.
  ASSERT_EQ(InShard("echo abc > 1/id").exit_code, 0);
  ASSERT_EQ(InShard("echo 'record one' > 1/text.txt").exit_code, 0);
  CommandResult status = Status();
  EXPECT_EQ(status.exit_code, 1) << status.out << status.err;
  const size_t at = status.out.find(absl::StrCat("  ", shard_, "/1: refused: "));
  ASSERT_NE(at, std::string::npos) << status.out;
  const std::string line = status.out.substr(at, status.out.find('\n', at) - at);
  EXPECT_NE(line.find("id: "), std::string::npos) << line;
  EXPECT_NE(line.find("'abc' is not an int64"), std::string::npos) << line;
  EXPECT_NE(status.out.find("refused: 1 edited record(s) keep 1 shard(s) from being committed"),
            std::string::npos)
      << status.out;
  EXPECT_EQ(status.out.find("refused: none"), std::string::npos) << status.out;
  CommandResult json = Status(/*json=*/true);
  EXPECT_EQ(json.exit_code, 1) << json.err;
  EXPECT_NE(json.out.find(absl::StrCat("\"refused_edits\":[{\"shard\":\"", shard_,
                                       "\",\"record\":\"1\",\"reason\":")),
            std::string::npos)
      << json.out;
  CommandResult failed = RunCommand({BinaryPath(), "commit", s_.mnt});
  EXPECT_EQ(failed.exit_code, 1) << failed.out << failed.err;
  EXPECT_NE(failed.out.find("not rewritten"), std::string::npos) << failed.out;

  ASSERT_EQ(InShard("echo 11 > 1/id").exit_code, 0);
  status = Status();
  EXPECT_EQ(status.exit_code, 0) << status.out << status.err;
  EXPECT_NE(status.out.find("refused: none (the unmount would commit every edit)"),
            std::string::npos)
      << status.out;
  CommandResult commit = RunCommand({BinaryPath(), "commit", s_.mnt});
  EXPECT_EQ(commit.exit_code, 0) << commit.out << commit.err;
  int st = 0;
  CommandResult un = d.TfrUnmount(&st);
  EXPECT_EQ(un.exit_code, 0) << un.out << un.err;
  EXPECT_EQ(un.err.find("not rewritten"), std::string::npos) << un.err;
  EXPECT_EQ(un.err.find("the mount logged"), std::string::npos) << un.err;
  std::vector<std::string> expected = {"none"};
  for (int i = 0; i < kCount; ++i) {
    expected.push_back(Described(i == 1 ? 11 : i,
                                 i == 1 ? "record one" : absl::StrCat("record ", i),
                                 absl::StrCat(i, ".5")));
  }
  EXPECT_EQ(IndependentRead(shard_), expected);
}

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

INSTANTIATE_TEST_SUITE_P(Codecs, RecordEditTest, ::testing::Values("none", "gzip", "zlib"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace tfrecordfs::mount_test::staging_test
