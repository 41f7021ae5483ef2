// Staging records through a real mount and packing them on unmount: records
// made with mkdir / echo / printf / cp and `cp -r` of a mounted record, read
// back from the new shards with the project's reader and checked feature by
// feature; kinds (the mounted shards' kind wins); numeric files that do not
// parse (written all the same and flagged; the record stays staged,
// `tfrecordfs unmount` says why and exits 1); shard names and
// shard_size splitting; a remount showing the new shards; the offline
// `tfrecordfs pack`.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "staging_util.h"
#include "tfrecordfs/record/writer.h"
#include "tfrecordfs/staging/layout.h"

namespace tfrecordfs::mount_test::staging_test {
namespace {

const std::string kJpeg = std::string("\xFF\xD8\xFF\xE0", 4) + std::string("\x00\x10JFIF\x00", 7) +
                          std::string(300, '\x7f') + "\xFF\xD9";
const std::string kPng = std::string("\x89PNG\r\n\x1a\n", 8) + std::string(40, '\x01');
const std::string kBlob = std::string("\x00\x01\x02\xff\xfe", 5) + "binary\n";

// The source shard every test mounts: features with known kinds.
std::vector<std::string> BasePayloads() {
  std::vector<std::string> out;
  for (int i = 0; i < 3; ++i) {
    out.push_back(ExamplePayload({
        Int64Feature("label", {i, -i}),
        FloatFeature("scores", {0.5f * static_cast<float>(i), -1.25f}),
        // A float feature whose values are all integers.
        FloatFeature("weights", {1.0f, 2.0f, -3.0f, 0.0f, -0.0f}),
        BytesFeature("caption", {"a photo", "of " + std::to_string(i)}),
        BytesFeature("image/encoded", {kJpeg}),
        Int64Feature("image/height", {480}),
        BytesFeature("frames", {kBlob, kPng}),
    }));
  }
  return out;
}

class StagingPackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TFRFS_SKIP_WITHOUT_FUSE();
    base_ = BasePayloads();
    test::WriteShard(s_.src + "/base.tfrecord", base_);
    // Inputs for cp, outside the mount.
    std::filesystem::create_directories(s_.tmp.path() + "/in");
    WriteWholeFile(In("photo.jpg"), kJpeg);
    WriteWholeFile(In("mask.png"), kPng);
    WriteWholeFile(In("blob"), kBlob);
  }

  MountConfig Config(const std::string& prefix, const std::string& shard_size = "") const {
    MountConfig c = PackConfig(s_, {s_.src}, prefix, shard_size);
    return c;
  }

  std::string M(const std::string& rel) const { return s_.mnt + "/" + rel; }
  std::string In(const std::string& name) const { return s_.tmp.path() + "/in/" + name; }
  std::string Q(const std::string& rel) const { return ShellQuote(M(rel)); }

  Scratch s_;
  std::vector<std::string> base_;
};

TEST_F(StagingPackTest, StageWithShellToolsPackAndReadBack) {
  Mount d(Config("made"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  // Record a: every file kind, made with the shell.
  const std::string script = absl::StrCat(
      "set -e; cd ", Q("staging"), "\n", "mkdir a && cd a\n", "echo 42 > label\n",
      "printf '0.5\\n-2.25\\n1e-3\\n' > scores\n", "echo 'hello world' > caption.txt\n",
      "printf 'x\\n\\ny z\\n' > tags.txt\n", "mkdir image && cp ", ShellQuote(In("photo.jpg")),
      " image/encoded.jpg\n", "mkdir frames && cp ", ShellQuote(In("blob")), " frames/0.bin && cp ",
      ShellQuote(In("mask.png")), " frames/1.png\n",
      "mkdir -p tokens/a && printf '1\\n-2\\n9223372036854775807\\n' > tokens/a/b\n", "cp ",
      ShellQuote(In("blob")), " raw.bin\n",
      "touch .hidden.swp notes~\n",  // editor leftovers are skipped
      "cd ..\n",
      // Record b: kinds.
      "mkdir b && cd b\n",
      ": > label\n",                   // empty, int64 in the shards: stays int64
      "printf '1\\n2\\n' > scores\n",  // integers, float in the shards: stays float
      ": > weights\n",                 // empty, float in the shards: stays float
      "printf '7\\n' > fresh_int\n",   // unknown name: the content decides
      "printf '2.5\\n' > fresh_float\n", ": > fresh_empty\n", "cd ..\n",
      // Record d: a raw (non-Example) payload.
      "mkdir d && cp ", ShellQuote(In("blob")), " d/record.bin\n");
  CommandResult sh = Shell(script);
  ASSERT_EQ(sh.exit_code, 0) << sh.err;
  // Record c: a mounted record copied in.
  CommandResult cp = Shell("cp -r " + Q("base.tfrecord/1") + " " + Q("staging/c"));
  ASSERT_EQ(cp.exit_code, 0) << cp.err;

  int status = 0;
  CommandResult u = d.TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  EXPECT_EQ(u.out.rfind("result: ok\n", 0), 0u) << u.out;
  EXPECT_NE(u.out.find("packed 4 records into 1 shard"), std::string::npos) << u.out;
  EXPECT_EQ(ExitCodeOfWait(status), 0) << DescribeWait(status) << "\n" << d.Stderr();

  const auto shards = ReadPackedShards(s_.out, "made");
  ASSERT_EQ(shards.size(), 1u);
  EXPECT_EQ(shards[0].name, "made-00000-of-00001.tfrecord");
  ASSERT_EQ(shards[0].payloads.size(), 4u);
  ExpectSameRecord(ExamplePayload({
                       Int64Feature("label", {42}),
                       FloatFeature("scores", {0.5f, -2.25f, 1e-3f}),
                       BytesFeature("caption", {"hello world"}),
                       BytesFeature("tags", {"x", "", "y z"}),
                       BytesFeature("image/encoded", {kJpeg}),
                       BytesFeature("frames", {kBlob, kPng}),
                       Int64Feature("tokens/a/b", {1, -2, INT64_MAX}),
                       BytesFeature("raw", {kBlob}),
                   }),
                   shards[0].payloads[0], "a");
  ExpectSameRecord(ExamplePayload({
                       Int64Feature("label", {}),
                       FloatFeature("scores", {1.0f, 2.0f}),
                       FloatFeature("weights", {}),
                       Int64Feature("fresh_int", {7}),
                       FloatFeature("fresh_float", {2.5f}),
                       Int64Feature("fresh_empty", {}),
                   }),
                   shards[0].payloads[1], "b");
  ExpectSameRecord(base_[1], shards[0].payloads[2], "c (cp -r of base.tfrecord/1)");
  EXPECT_EQ(shards[0].payloads[3], kBlob) << "d (record.bin)";
  // `weights` is all integers in the copy and came back float.
  const DecodedRecord c = Decode(shards[0].payloads[2]);
  ASSERT_TRUE(c.features.count("weights"));
  EXPECT_EQ(c.features.at("weights").kind, example::Kind::kFloat);

  // Packed records leave staging; the store keeps no journal.
  EXPECT_EQ(ListDir(s_.records()), std::vector<std::string>{});
  EXPECT_FALSE(Exists(staging::PackJournalFile(s_.store)));
  EXPECT_TRUE(Exists(staging::PackReportFile(s_.store)));
}

// Issue 15, item 8: a staging store whose file system filled up (writes
// through the mount failing with ENOSPC) is still packed on unmount. The
// journal used to be written into the full store: unmount exited 1 and the
// records stayed staged until space was freed.
TEST_F(StagingPackTest, StoreOnAFullFileSystemIsStillPacked) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs for the store needs root";
  const std::string small = s_.tmp.Subdir("small");
  CommandResult mt =
      RunCommand({"mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tfrecordfs-test", small});
  if (mt.exit_code != 0) GTEST_SKIP() << "cannot mount a tmpfs here: " << mt.err;
  struct Unmounter {
    std::string dir;
    ~Unmounter() { RunCommand({"umount", "-l", dir}); }
  } unmounter{small};

  MountConfig c = Config("full");
  c.options = {"staging_dir=" + small + "/store", "output_dir=" + s_.out, "prefix=full"};
  Mount d(c);
  ASSERT_EQ(d.Start(), absl::OkStatus());
  CommandResult sh = Shell(absl::StrCat(
      "cd ", Q("staging"), " && mkdir a b big && echo 1 > a/label && echo 2 > b/label"));
  ASSERT_EQ(sh.exit_code, 0) << sh.err;
  // Fill the store's file system through the mount until a write fails.
  CommandResult fill = Shell(
      absl::StrCat("dd if=/dev/zero of=", Q("staging/big/blob.bin"), " bs=64k count=1000 2>&1"));
  EXPECT_NE(fill.exit_code, 0) << "the 8 MiB tmpfs did not fill up: " << fill.out;
  EXPECT_NE(fill.out.find("No space left"), std::string::npos) << fill.out;
  struct statvfs vfs;
  ASSERT_EQ(::statvfs(small.c_str(), &vfs), 0);
  EXPECT_LT(vfs.f_bavail * vfs.f_bsize, 64u * 1024) << "the tmpfs is not full";

  int status = 0;
  CommandResult u = d.TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err << "\n" << d.Stderr();
  EXPECT_EQ(u.out.rfind("result: ok\n", 0), 0u) << u.out;
  EXPECT_EQ(ExitCodeOfWait(status), 0) << DescribeWait(status) << "\n" << d.Stderr();
  const auto shards = ReadPackedShards(s_.out, "full");
  ASSERT_EQ(shards.size(), 1u);
  EXPECT_EQ(shards[0].payloads.size(), 3u);
  EXPECT_EQ(ListDir(staging::RecordsDir(small + "/store")), std::vector<std::string>{});
  EXPECT_FALSE(Exists(staging::PackJournalFile(small + "/store")));
}

TEST_F(StagingPackTest, BadNumericFilesAreFlaggedAndStayStaged) {
  auto d = std::make_unique<Mount>(Config("bad1"));
  ASSERT_EQ(d->Start(), absl::OkStatus());
  ASSERT_EQ(::mkdir(M("staging/bad").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(M("staging/good").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(M("staging/kind").c_str(), 0755), 0);

  // Issue 34, item 6: what a feature cannot take lands (write() and close()
  // succeed, and so the shell and cp say nothing), and the file is flagged
  // with the reason (before: write() failed with EINVAL and left the file
  // empty); the pack leaves the record staged, naming the file.
  auto flag = [&](const std::string& rel) {
    return RunCommand({"getfattr", "--only-values", "-n", "user.tfrecordfs.error", M(rel)}).out;
  };
  ASSERT_EQ(::mkdir(M("staging/w").c_str(), 0755), 0);
  CommandResult echo = Shell("bash -c " + ShellQuote("echo hello > " + Q("staging/w/label")));
  EXPECT_EQ(echo.exit_code, 0) << echo.err;
  EXPECT_EQ(ReadWholeFile(M("staging/w/label")), "hello\n");
  EXPECT_NE(flag("staging/w/label").find("line 1: 'hello' is not an int64"), std::string::npos)
      << flag("staging/w/label");
  WriteOutcome early = WriteAndClose(M("staging/w/scores"), "12\nabc\n");
  EXPECT_EQ(early.write_errno, 0);
  EXPECT_EQ(ReadWholeFile(M("staging/w/scores")), "12\nabc\n");
  EXPECT_NE(flag("staging/w/scores").find("line 2: 'abc' is not a number"), std::string::npos)
      << flag("staging/w/scores");
  ASSERT_EQ(::unlink(M("staging/w/scores").c_str()), 0);
  ASSERT_EQ(::unlink(M("staging/w/label").c_str()), 0);
  ASSERT_EQ(::rmdir(M("staging/w").c_str()), 0);

  // A last line without its newline: the same, once the file is whole.
  WriteOutcome w = WriteAndClose(M("staging/bad/scores"), "12\nabc");
  EXPECT_EQ(w.open_errno, 0);
  EXPECT_EQ(w.write_errno, 0);
  EXPECT_EQ(w.close_errno, 0);
  EXPECT_EQ(ReadWholeFile(M("staging/bad/scores")), "12\nabc");
  ASSERT_EQ(::unlink(M("staging/bad/scores").c_str()), 0);
  // A name the shards do not know is not judged by its name (it may be a
  // tool's temporary file, renamed later): the pack judges it.
  w = WriteAndClose(M("staging/bad/count"), "12\nabc");
  EXPECT_EQ(w.write_errno, 0);
  EXPECT_EQ(ReadWholeFile(M("staging/bad/count")), "12\nabc");
  // A value the shards' kind cannot hold: `label` is int64 there.
  w = WriteAndClose(M("staging/kind/label"), "1.5");
  EXPECT_EQ(w.write_errno, 0);
  // Numeric files in nested feature folders too.
  ASSERT_EQ(::mkdir(M("staging/bad/image").c_str(), 0755), 0);
  w = WriteAndClose(M("staging/bad/image/height"), "tall");
  EXPECT_EQ(w.write_errno, 0);
  // Rewritten in place (open without O_CREAT: no handle of the daemon's).
  w = WriteAndClose(M("staging/bad/image/height"), "5x");
  EXPECT_EQ(w.write_errno, 0);
  // The pack refuses a lone "-" too, and keeps the record staged.
  w = WriteAndClose(M("staging/bad/count"), "12\n-");
  EXPECT_EQ(w.write_errno, 0);
  EXPECT_EQ(w.close_errno, 0);
  EXPECT_EQ(ReadWholeFile(s_.records() + "/bad/count"), "12\n-");
  EXPECT_EQ(WriteAndClose(M("staging/kind/label"), "-").close_errno, 0);
  // Files that are not numeric are never flagged.
  EXPECT_EQ(WriteAndClose(M("staging/good/notes.txt"), "abc\n").close_errno, 0);
  EXPECT_EQ(WriteAndClose(M("staging/good/label"), " 3 \n4").close_errno, 0);
  EXPECT_EQ(WriteAndClose(M("staging/good/scores"), "nan\n-inf\n1e38\n").close_errno, 0);
  // A file at the staging root is not in a record folder: not checked.
  EXPECT_EQ(WriteAndClose(M("staging/README"), "free text\n").close_errno, 0);

  // cp copies what it is given; the file is flagged.
  WriteWholeFile(In("bad_scores"), "0.5\nnope");
  ASSERT_EQ(::mkdir(M("staging/bad2").c_str(), 0755), 0);
  CommandResult cp = Shell("cp " + ShellQuote(In("bad_scores")) + " " + Q("staging/bad2/scores"));
  EXPECT_EQ(cp.exit_code, 0) << cp.err;
  EXPECT_EQ(ReadWholeFile(M("staging/bad2/scores")), "0.5\nnope");
  EXPECT_EQ(WriteAndClose(M("staging/bad2/scores"), "0.5\n+").write_errno, 0);

  int status = 0;
  CommandResult u = d->TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 1) << u.out << u.err;
  EXPECT_EQ(ExitCodeOfWait(status), 1) << DescribeWait(status);
  EXPECT_EQ(u.out.rfind("result: left\n", 0), 0u) << u.out;
  EXPECT_NE(u.out.find("packed 1 record into 1 shard"), std::string::npos) << u.out;
  // The three bad records, and README: a loose file is no record, but it is
  // reported rather than silently kept.
  EXPECT_NE(u.out.find("4 records left staged"), std::string::npos) << u.out;
  EXPECT_NE(u.out.find("README: not in a record folder"), std::string::npos) << u.out;
  EXPECT_NE(u.out.find("bad: count: line 2"), std::string::npos) << u.out;
  EXPECT_NE(u.out.find("bad2: scores: line 2"), std::string::npos) << u.out;
  EXPECT_NE(u.out.find("kind: label: line 1"), std::string::npos) << u.out;
  // The bad records stay staged, bytes and all; the good one is packed.
  EXPECT_EQ(ListDir(s_.records()), (std::vector<std::string>{"README", "bad", "bad2", "kind"}));
  EXPECT_EQ(ReadWholeFile(s_.records() + "/bad/count"), "12\n-");
  auto payloads = AllPayloads(ReadPackedShards(s_.out, "bad1"));
  ASSERT_EQ(payloads.size(), 1u);
  ExpectSameRecord(ExamplePayload({BytesFeature("notes", {"abc"}), Int64Feature("label", {3, 4}),
                                   FloatFeature("scores", {NAN, -INFINITY, 1e38f})}),
                   payloads[0], "good");

  // The next mount shows them; fixed, they pack.
  d = std::make_unique<Mount>(Config("bad2"));
  ASSERT_EQ(d->Start(), absl::OkStatus());
  EXPECT_EQ(ReadWholeFile(M("staging/bad/count")), "12\n-");
  EXPECT_EQ(WriteAndClose(M("staging/bad/count"), "12\n13\n").close_errno, 0);
  EXPECT_EQ(WriteAndClose(M("staging/bad/image/height"), "100\n").close_errno, 0);
  EXPECT_EQ(WriteAndClose(M("staging/bad2/scores"), "0.5\n").close_errno, 0);
  EXPECT_EQ(WriteAndClose(M("staging/kind/label"), "1\n").close_errno, 0);
  ASSERT_EQ(::unlink(M("staging/README").c_str()), 0);
  u = d->TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  payloads = AllPayloads(ReadPackedShards(s_.out, "bad2"));
  ASSERT_EQ(payloads.size(), 3u);
  ExpectSameRecord(
      ExamplePayload({Int64Feature("count", {12, 13}), Int64Feature("image/height", {100})}),
      payloads[0], "bad");
  ExpectSameRecord(ExamplePayload({FloatFeature("scores", {0.5f})}), payloads[1], "bad2");
  ExpectSameRecord(ExamplePayload({Int64Feature("label", {1})}), payloads[2], "kind");
  EXPECT_EQ(ListDir(s_.records()), std::vector<std::string>{});
}

TEST_F(StagingPackTest, ShardNameClashRefusesThePackAndKeepsRecords) {
  auto d = std::make_unique<Mount>(Config("same"));
  ASSERT_EQ(d->Start(), absl::OkStatus());
  ASSERT_EQ(Shell("mkdir " + Q("staging/r1") + " && echo 1 > " + Q("staging/r1/id")).exit_code, 0);
  int status = 0;
  EXPECT_EQ(d->TfrUnmount(&status).exit_code, 0);
  ASSERT_TRUE(Exists(s_.out + "/same-00000-of-00001.tfrecord"));
  const std::string first = ReadWholeFile(s_.out + "/same-00000-of-00001.tfrecord");

  // Same prefix again: the shard name exists; nothing is overwritten.
  d = std::make_unique<Mount>(Config("same"));
  ASSERT_EQ(d->Start(), absl::OkStatus());
  ASSERT_EQ(Shell("mkdir " + Q("staging/r2") + " && echo 2 > " + Q("staging/r2/id")).exit_code, 0);
  CommandResult u = d->TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 1) << u.out;
  EXPECT_EQ(ExitCodeOfWait(status), 1);
  EXPECT_NE(u.out.find("same-00000-of-00001.tfrecord"), std::string::npos) << u.out;
  EXPECT_EQ(ReadWholeFile(s_.out + "/same-00000-of-00001.tfrecord"), first);
  EXPECT_EQ(ListDir(s_.records()), std::vector<std::string>{"r2"});

  d = std::make_unique<Mount>(Config("other"));
  ASSERT_EQ(d->Start(), absl::OkStatus());
  EXPECT_EQ(d->TfrUnmount(&status).exit_code, 0);
  const auto payloads = AllPayloads(ReadPackedShards(s_.out, "other"));
  ASSERT_EQ(payloads.size(), 1u);
  EXPECT_EQ(SingleInt(Decode(payloads[0]), "id"), 2);
}

TEST_F(StagingPackTest, ShardSizeSplitsInNameOrder) {
  constexpr uint64_t kShardSize = 1024;
  Mount d(Config("split", "1K"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  // Eleven records of growing size; one bigger than a shard on its own.
  std::vector<std::string> expected;
  for (int i = 0; i < 11; ++i) {
    const std::string name = absl::StrFormat("staging/r%02d", i);
    const std::string blob(i == 6 ? 1500 : 100 + 40 * i, static_cast<char>('a' + i));
    ASSERT_EQ(::mkdir(M(name).c_str(), 0755), 0);
    EXPECT_EQ(WriteAndClose(M(name + "/id"), std::to_string(i) + "\n").close_errno, 0);
    EXPECT_EQ(WriteAndClose(M(name + "/blob.bin"), std::string(1, '\0') + blob).close_errno, 0);
    expected.push_back(ExamplePayload(
        {Int64Feature("id", {i}), BytesFeature("blob", {std::string(1, '\0') + blob})}));
  }
  int status = 0;
  CommandResult u = d.TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;

  const auto shards = ReadPackedShards(s_.out, "split");
  ASSERT_GE(shards.size(), 3u);
  // Names: <prefix>-<i>-of-<N>.tfrecord, five digits; nothing else written.
  for (size_t i = 0; i < shards.size(); ++i) {
    EXPECT_EQ(shards[i].name, absl::StrFormat("split-%05d-of-%05d.tfrecord", i, shards.size()));
  }
  EXPECT_EQ(ListDir(s_.out).size(), shards.size());
  // Sizes: at most shard_size unless a single record; a shard closes only
  // when the next record would not fit.
  for (size_t i = 0; i < shards.size(); ++i) {
    ASSERT_FALSE(shards[i].payloads.empty());
    if (shards[i].payloads.size() > 1) {
      EXPECT_LE(shards[i].file_size, kShardSize) << i;
    }
    if (i + 1 < shards.size()) {
      const uint64_t next = shards[i + 1].payloads[0].size() + 16;
      EXPECT_GT(shards[i].file_size + next, kShardSize) << "shard " << i << " closed early";
    }
  }
  // Name order, each record once.
  const auto payloads = AllPayloads(shards);
  ASSERT_EQ(payloads.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    ExpectSameRecord(expected[i], payloads[i], "r" + std::to_string(i));
  }
}

TEST_F(StagingPackTest, RemountShowsTheNewShards) {
  // Default output_dir: the source directory itself.
  MountConfig c = Config("");
  c.options = {"staging_dir=" + s_.store, "prefix=fresh"};
  auto d = std::make_unique<Mount>(c);
  ASSERT_EQ(d->Start(), absl::OkStatus());
  ASSERT_EQ(Shell(absl::StrCat("cd ", Q("staging"),
                               " && mkdir a_one b_two && echo 42 > a_one/label && echo hi > "
                               "a_one/caption.txt && printf '1.5\\n' > b_two/scores"))
                .exit_code,
            0);
  ASSERT_EQ(Shell("cp -r " + Q("base.tfrecord/2") + " " + Q("staging/c_three")).exit_code, 0);
  int status = 0;
  EXPECT_EQ(d->TfrUnmount(&status).exit_code, 0);
  ASSERT_TRUE(Exists(s_.src + "/fresh-00000-of-00001.tfrecord"));

  d = std::make_unique<Mount>(c);
  ASSERT_EQ(d->Start(), absl::OkStatus());
  EXPECT_EQ(ListDir(s_.mnt), (std::vector<std::string>{
                                 "base.tfrecord", "fresh-00000-of-00001.tfrecord", "staging"}));
  const std::string shard = "fresh-00000-of-00001.tfrecord";
  ASSERT_TRUE(IsDir(M(shard)));
  EXPECT_EQ(ListDir(M(shard)), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(ListDir(M(shard + "/0")), (std::vector<std::string>{"caption.txt", "label"}));
  EXPECT_EQ(ReadWholeFile(M(shard + "/0/label")), "42\n");
  EXPECT_EQ(ReadWholeFile(M(shard + "/0/caption.txt")), "hi\n");
  EXPECT_EQ(ReadWholeFile(M(shard + "/1/scores")), "1.5\n");
  // The copied record shows exactly as the original does.
  const auto orig = WalkTree(M("base.tfrecord/2"));
  const auto copy = WalkTree(M(shard + "/2"));
  ASSERT_EQ(orig.size(), copy.size());
  for (const auto& [rel, node] : orig) {
    auto it = copy.find(rel);
    ASSERT_NE(it, copy.end()) << rel;
    EXPECT_EQ(it->second.content, node.content) << rel;
    EXPECT_EQ(it->second.mode, node.mode) << rel;
  }
  EXPECT_EQ(ListDir(M("staging")), std::vector<std::string>{});
  EXPECT_EQ(d->TfrUnmount(&status).exit_code, 0);
}

TEST_F(StagingPackTest, KindLearnedAtCloseSurvivesARestart) {
  // `ratio` is a float list only in record 1 of its shard, so a fresh
  // daemon (which samples the first record of each shard) does not know it;
  // the kind validated at close() must survive a SIGKILL all the same.
  test::WriteShard(s_.src + "/late.tfrecord",
                   {ExamplePayload({Int64Feature("n", {0})}),
                    ExamplePayload({Int64Feature("n", {1}), FloatFeature("ratio", {2.0f, 4.0f})})});
  auto d = std::make_unique<Mount>(Config("late1"));
  ASSERT_EQ(d->Start(), absl::OkStatus());
  ASSERT_EQ(Shell("cp -r " + Q("late.tfrecord/1") + " " + Q("staging/copy")).exit_code, 0);
  EXPECT_EQ(ReadWholeFile(M("staging/copy/ratio")), "2.0\n4.0\n");
  d->KillHard();

  d = std::make_unique<Mount>(Config("late2"));
  ASSERT_EQ(d->Start(), absl::OkStatus());
  int status = 0;
  CommandResult u = d->TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  const auto payloads = AllPayloads(ReadPackedShards(s_.out, "late2"));
  ASSERT_EQ(payloads.size(), 1u);
  ExpectSameRecord(ExamplePayload({Int64Feature("n", {1}), FloatFeature("ratio", {2.0f, 4.0f})}),
                   payloads[0], "copy of late.tfrecord/1");
}

TEST_F(StagingPackTest, RenamedNumericFileTakesItsNewFeaturesKind) {
  // `weights` is a float list in the shards, `label` an int64 list. A file
  // validated (and tagged) as `weights`, then renamed to `label`, must pack
  // as what `label` is in the shards: the shards' kind wins over the tag the
  // file kept from its old name. (Whole numbers: the float file shows them
  // as 1.0, which no int64 list takes; written as 1, a float list too.)
  Mount d(Config("ren"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  ASSERT_EQ(
      Shell("cp -r " + Q("base.tfrecord/0") + " " + Q("staging/x") + " && cd " + Q("staging/x") +
            " && printf '1\\n2\\n-3\\n0\\n-0\\n' > weights" + " && rm label && mv weights label")
          .exit_code,
      0);
  EXPECT_EQ(ReadWholeFile(M("staging/x/label")), "1\n2\n-3\n0\n-0\n");
  int status = 0;
  CommandResult u = d.TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  const auto payloads = AllPayloads(ReadPackedShards(s_.out, "ren"));
  ASSERT_EQ(payloads.size(), 1u);
  const DecodedRecord r = Decode(payloads[0]);
  ASSERT_TRUE(r.features.count("label"));
  EXPECT_TRUE(SameFeature(r.features.at("label"), Int64Feature("label", {1, 2, -3, 0, 0})))
      << Describe(r.features.at("label"));
  EXPECT_FALSE(r.features.count("weights"));
}

// A feature that exists in the shards but in no shard's first record (a
// TFX-style missing value there) still gives a hand-made file its kind:
// `ratio` ("3") packs as the float list the shards hold, not as int64. The
// daemon learns kinds from the records it parsed and, on a miss, samples
// further records round-robin across the shards within a budget
// (vfs::Filesystem::feature_types).
TEST_F(StagingPackTest, TypeOfAFeatureOnlyInLaterRecordsWins) {
  test::WriteShard(s_.src + "/late.tfrecord",
                   {ExamplePayload({Int64Feature("n", {0})}),
                    ExamplePayload({Int64Feature("n", {1}), FloatFeature("ratio", {2.5f})})});
  Mount d(Config("later"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  ASSERT_EQ(Shell("mkdir " + Q("staging/r") + " && echo 3 > " + Q("staging/r/ratio")).exit_code, 0);
  int status = 0;
  EXPECT_EQ(d.TfrUnmount(&status).exit_code, 0);
  const auto payloads = AllPayloads(ReadPackedShards(s_.out, "later"));
  ASSERT_EQ(payloads.size(), 1u);
  const DecodedRecord r = Decode(payloads[0]);
  ASSERT_TRUE(r.features.count("ratio"));
  EXPECT_TRUE(SameFeature(r.features.at("ratio"), FloatFeature("ratio", {3.0f})))
      << Describe(r.features.at("ratio"));
}

TEST_F(StagingPackTest, FailedPackKeepsEverythingStaged) {
  MountConfig c = Config("");
  // An output directory that cannot be made (a missing one is created):
  // its parent is a file.
  WriteWholeFile(s_.tmp.path() + "/missing", "a file\n");
  c.options = {"staging_dir=" + s_.store, "output_dir=" + s_.tmp.path() + "/missing/out",
               "prefix=miss"};
  auto d = std::make_unique<Mount>(c);
  ASSERT_EQ(d->Start(), absl::OkStatus());
  ASSERT_EQ(Shell("cp -r " + Q("base.tfrecord/0") + " " + Q("staging/r0")).exit_code, 0);
  int status = 0;
  CommandResult u = d->TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 1) << u.out << u.err;
  EXPECT_EQ(u.out.rfind("result: failed\n", 0), 0u) << u.out;
  EXPECT_NE(u.out.find("missing"), std::string::npos) << u.out;
  EXPECT_EQ(ExitCodeOfWait(status), 1);
  EXPECT_EQ(ListDir(s_.records()), std::vector<std::string>{"r0"});
  EXPECT_FALSE(Exists(staging::PackJournalFile(s_.store)));

  d = std::make_unique<Mount>(Config("found"));
  ASSERT_EQ(d->Start(), absl::OkStatus());
  EXPECT_EQ(ListDir(M("staging")), std::vector<std::string>{"r0"});
  u = d->TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  const auto payloads = AllPayloads(ReadPackedShards(s_.out, "found"));
  ASSERT_EQ(payloads.size(), 1u);
  ExpectSameRecord(base_[0], payloads[0], "r0");
}

TEST_F(StagingPackTest, InvalidFoldersStayStagedWithTheirReason) {
  Mount d(Config("inv"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  ASSERT_EQ(Shell(absl::StrCat("cd ", Q("staging"),
                               " && mkdir dup link fifo ok"
                               " && echo 1 > dup/label && echo one > dup/label.txt"
                               " && echo 1 > link/label && echo 1 > fifo/label"
                               " && echo 2 > ok/label"))
                .exit_code,
            0);
  // Things the mount refuses to make, put straight into the store.
  ASSERT_EQ(::symlink("/etc/passwd", (s_.records() + "/link/secret.txt").c_str()), 0);
  ASSERT_EQ(::mkfifo((s_.records() + "/fifo/pipe.bin").c_str(), 0644), 0);
  // ... and never shown.
  EXPECT_EQ(ListDir(M("staging/link")), std::vector<std::string>{"label"});
  EXPECT_EQ(ListDir(M("staging/fifo")), std::vector<std::string>{"label"});

  int status = 0;
  CommandResult u = d.TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 1) << u.out << u.err;
  EXPECT_NE(u.out.find("dup: "), std::string::npos) << u.out;
  EXPECT_NE(u.out.find("feature 'label'"), std::string::npos) << u.out;
  EXPECT_NE(u.out.find("link: secret.txt"), std::string::npos) << u.out;
  EXPECT_NE(u.out.find("fifo: pipe.bin"), std::string::npos) << u.out;
  EXPECT_EQ(ListDir(s_.records()), (std::vector<std::string>{"dup", "fifo", "link"}));
  const auto payloads = AllPayloads(ReadPackedShards(s_.out, "inv"));
  ASSERT_EQ(payloads.size(), 1u);
  EXPECT_EQ(SingleInt(Decode(payloads[0]), "label"), 2);
  for (const std::string& p : payloads) EXPECT_EQ(p.find("root:"), std::string::npos);
}

TEST_F(StagingPackTest, DefaultStoreOutputDirAndPrefix) {
  // No staging options: the store goes under $XDG_STATE_HOME, the shards
  // into the (first) source directory, named staged-<UTC time>-....
  const std::string state = s_.tmp.Subdir("state");
  MountConfig c = Config("");
  c.options.clear();
  c.env = {"XDG_STATE_HOME=" + state};
  auto d = std::make_unique<Mount>(c);
  ASSERT_EQ(d->Start(), absl::OkStatus());
  ASSERT_EQ(Shell("mkdir " + Q("staging/r") + " && echo 7 > " + Q("staging/r/label")).exit_code, 0);
  const std::vector<std::string> stores = ListDir(state + "/tfrecordfs/staging");
  ASSERT_EQ(stores.size(), 1u);
  EXPECT_EQ(stores[0].rfind("src-", 0), 0u) << stores[0];
  const std::string store = state + "/tfrecordfs/staging/" + stores[0];
  EXPECT_EQ(ReadWholeFile(staging::RecordsDir(store) + "/r/label"), "7\n");
  int status = 0;
  CommandResult u = d->TfrUnmount(&status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  std::vector<std::string> made;
  for (const std::string& n : ListDir(s_.src)) {
    if (n != "base.tfrecord") made.push_back(n);
  }
  ASSERT_EQ(made.size(), 1u);
  // staged-yyyymmddThhmmss-00000-of-00001.tfrecord
  const std::string& n = made[0];
  ASSERT_EQ(n.size(), std::string("staged-20240102T030405-00000-of-00001.tfrecord").size()) << n;
  EXPECT_EQ(n.substr(0, 7), "staged-");
  EXPECT_EQ(n[15], 'T') << n;
  EXPECT_EQ(n.substr(22), "-00000-of-00001.tfrecord");
  const auto payloads = AllPayloads(ReadPackedShards(s_.src, n.substr(0, 22)));
  ASSERT_EQ(payloads.size(), 1u);
  EXPECT_EQ(SingleInt(Decode(payloads[0]), "label"), 7);
  EXPECT_EQ(ListDir(staging::RecordsDir(store)), std::vector<std::string>{});
}

TEST_F(StagingPackTest, DetachedDaemonWithRelativeDirectories) {
  // Without -f the daemon detaches (and changes to "/") once the mount is
  // ready; relative staging_dir / output_dir still mean the directory the
  // mount was started from, and `tfrecordfs unmount` waits for its pack.
  DetachedGuard guard(s_.mnt);
  CommandResult m =
      Shell("cd " + ShellQuote(s_.tmp.path()) + " && " + ShellQuote(BinaryPath()) +
            " -o staging_dir=store,output_dir=out,prefix=bg src " + ShellQuote(s_.mnt));
  ASSERT_EQ(m.exit_code, 0) << m.err;
  ASSERT_TRUE(WaitUntil([&] { return IsMounted(s_.mnt, "fuse.tfrecordfs"); }));
  ASSERT_EQ(FindDaemons(s_.mnt).size(), 1u);
  ASSERT_EQ(Shell("cp -r " + Q("base.tfrecord/0") + " " + Q("staging/r")).exit_code, 0);
  EXPECT_TRUE(IsDir(s_.records() + "/r"));  // store/ under the start directory

  CommandResult u = mount_test::Run({BinaryPath(), "unmount", s_.mnt});
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  EXPECT_NE(u.out.find("wrote " + s_.out + "/bg-00000-of-00001.tfrecord"), std::string::npos)
      << u.out;
  const auto payloads = AllPayloads(ReadPackedShards(s_.out, "bg"));
  ASSERT_EQ(payloads.size(), 1u);
  ExpectSameRecord(base_[0], payloads[0], "r");
  EXPECT_TRUE(WaitUntil([&] { return FindDaemons(s_.mnt).empty(); }));
}

TEST_F(StagingPackTest, OfflinePackOfAPlainDirectory) {
  // No mount: `tfrecordfs pack DIR OUT` on folders made directly.
  const std::string dir = s_.tmp.Subdir("plain");
  const std::string out = s_.tmp.Subdir("plain-out");
  for (int i = 0; i < 4; ++i) {
    const std::string r = absl::StrCat(dir, "/rec", i);
    std::filesystem::create_directories(r + "/image");
    WriteWholeFile(r + "/id", std::to_string(i) + "\n");
    WriteWholeFile(r + "/image/encoded.jpg", kJpeg + std::string(200, static_cast<char>(i)));
  }
  WriteWholeFile(dir + "/rec3/id", "three\n");  // invalid
  std::filesystem::create_directories(dir + "/.hidden");
  WriteWholeFile(dir + "/.hidden/id", "99\n");
  WriteWholeFile(dir + "/plain-file", "ignored\n");

  CommandResult r =
      mount_test::Run({BinaryPath(), "pack", "--shard-size", "1K", "--prefix", "off", dir, out});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("rec3: id: line 1"), std::string::npos) << r.out;
  auto shards = ReadPackedShards(out, "off");
  ASSERT_GE(shards.size(), 2u);  // 3 records of ~560 bytes at 1K a shard
  auto payloads = AllPayloads(shards);
  ASSERT_EQ(payloads.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    ExpectSameRecord(
        ExamplePayload(
            {Int64Feature("id", {i}),
             BytesFeature("image/encoded", {kJpeg + std::string(200, static_cast<char>(i))})}),
        payloads[i], "rec" + std::to_string(i));
  }
  // The input is never modified; no journal is left.
  EXPECT_EQ(ListDir(dir),
            (std::vector<std::string>{".hidden", "plain-file", "rec0", "rec1", "rec2", "rec3"}));
  EXPECT_FALSE(Exists(out + "/.tfrecordfs-pack.journal"));

  WriteWholeFile(dir + "/rec3/id", "3\n");
  std::filesystem::remove_all(dir + "/rec0");
  std::filesystem::remove_all(dir + "/rec1");
  std::filesystem::remove_all(dir + "/rec2");
  r = mount_test::Run({BinaryPath(), "pack", "--prefix=off2", dir, out});
  // plain-file is not in a record folder: reported, so the exit says so.
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("plain-file: not in a record folder"), std::string::npos) << r.out;
  payloads = AllPayloads(ReadPackedShards(out, "off2"));
  ASSERT_EQ(payloads.size(), 1u);
  EXPECT_EQ(SingleInt(Decode(payloads[0]), "id"), 3);

  // Usage errors.
  EXPECT_EQ(mount_test::Run({BinaryPath(), "pack", dir}).exit_code, 2);
  EXPECT_EQ(mount_test::Run({BinaryPath(), "pack", "--shard-size", "0", dir, out}).exit_code, 2);
}

}  // namespace
}  // namespace tfrecordfs::mount_test::staging_test
