// Ordinary tools in staging, through a real mount (issue 21, items 1, 2, 5
// and 13):
//   * content the checks do not accept (`echo hello > label` for an int64
//     feature, text into a tensor feature's .png) is written all the same
//     and flagged (issue 34, item 6), and keeps its record staged, with the
//     reason in the unmount report and `tfrecordfs unmount` exiting 1, until
//     the file is written again with something valid;
//   * the reason is reachable where the user is: `getfattr -n
//     user.tfrecordfs.error`, `tfrecordfs status MOUNTPOINT` (text and
//     --json), and the first refusal on the foreground daemon's stderr;
//   * tools that write a temporary file and rename it (sed -i, vim, rsync,
//     Python's os.replace) work on text and numeric files, and bad content
//     renamed onto a feature the shards know is flagged there;
//   * what `cp -r` of a mounted (read-only, 0444) record leaves in staging
//     is the user's to edit (owner write bits).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "staging_util.h"
#include "tfrecordfs/tensor/tensor.h"

namespace tfrecordfs::mount_test::staging_test {
namespace {

// A uint8 [2, 2] tensor as tf.io.serialize_tensor writes it: the mount
// shows `mask` as mask.png and checks staged .png files against it.
std::string MaskProto() {
  return tensor::EncodeTensor(tensor::DataType::kUint8, {2, 2}, std::string("\x00\x01\x02\x03", 4))
      .value();
}

class StagingToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TFRFS_SKIP_WITHOUT_FUSE();
    std::vector<std::string> payloads;
    for (int i = 0; i < 2; ++i) {
      payloads.push_back(ExamplePayload({
          Int64Feature("label", {i}),
          FloatFeature("scores", {0.5f, -1.0f}),
          BytesFeature("caption", {"a photo of " + std::to_string(i)}),
          BytesFeature("mask", {MaskProto()}),
      }));
    }
    test::WriteShard(s_.src + "/base.tfrecord", payloads);
  }

  std::string M(const std::string& rel) const { return s_.mnt + "/" + rel; }
  std::string Q(const std::string& rel) const { return ShellQuote(M(rel)); }
  CommandResult Bash(const std::string& script) const { return RunCommand({"bash", "-c", script}); }
  CommandResult Status(const std::vector<std::string>& args) const {
    std::vector<std::string> argv{BinaryPath(), "status"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }
  std::string ErrorAttr(const std::string& rel) const {
    return RunCommand({"getfattr", "--only-values", "-n", "user.tfrecordfs.error", M(rel)}).out;
  }
  // Unmounts `d` with `tfrecordfs unmount`, which must pack everything
  // staged, and returns the payloads packed into shards named `prefix`.
  std::vector<std::string> UnmountAndReadPacked(Mount& d, const std::string& prefix) const {
    int wait_status = 0;
    CommandResult u = d.TfrUnmount(&wait_status);
    EXPECT_EQ(u.exit_code, 0) << u.out << u.err << d.Stderr();
    return AllPayloads(ReadPackedShards(s_.out, prefix));
  }
  // The same, when the pack must hold one record, `what`, whose only
  // feature is `label`.
  void ExpectPackedOnlyLabel(Mount& d, const std::string& prefix, int64_t label,
                             const std::string& what) const {
    const std::vector<std::string> payloads = UnmountAndReadPacked(d, prefix);
    ASSERT_EQ(payloads.size(), 1u);
    ExpectSameRecord(ExamplePayload({Int64Feature("label", {label})}), payloads[0], what);
  }

  Scratch s_;
};

// Items 1 and 5 of issue 21, with issue 34's item 6: `echo hello > label`
// succeeds, and `label` is flagged (before: write() failed with EINVAL and
// left an empty `label`; before that, the empty file packed as an empty
// int64 list and the unmount said `result: ok`).
TEST_F(StagingToolsTest, FlaggedFileKeepsItsRecordStagedWithTheReason) {
  Mount d(PackConfig(s_, {s_.src}, "refused"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  ASSERT_EQ(Bash("mkdir " + Q("staging/oops") + " " + Q("staging/img") + " " + Q("staging/fixed") +
                 " " + Q("staging/ok"))
                .exit_code,
            0);
  CommandResult echo = Bash("echo hello > " + Q("staging/oops/label"));
  EXPECT_EQ(echo.exit_code, 0) << echo.err;
  EXPECT_EQ(ReadWholeFile(M("staging/oops/label")), "hello\n");
  // The tensor path: text is no PNG for the uint8 [2, 2] feature `mask`.
  CommandResult png = Bash("echo hello > " + Q("staging/img/mask.png"));
  EXPECT_EQ(png.exit_code, 0) << png.err;
  // Flagged, then written again with a valid value: packed.
  EXPECT_EQ(Bash("echo hello > " + Q("staging/fixed/label")).exit_code, 0);
  EXPECT_NE(ErrorAttr("staging/fixed/label"), "");
  EXPECT_EQ(Bash("echo 3 > " + Q("staging/fixed/label")).exit_code, 0);
  EXPECT_EQ(Bash("echo 1 > " + Q("staging/ok/label")).exit_code, 0);

  // The reason, from where the user is; `getfattr -d` lists the flag.
  const std::string why = ErrorAttr("staging/oops/label");
  EXPECT_NE(why.find("line 1: 'hello' is not an int64"), std::string::npos) << why;
  EXPECT_NE(ErrorAttr("staging/img/mask.png").find("not a PNG"), std::string::npos);
  EXPECT_NE(ErrorAttr("staging/oops").find("label: line 1: 'hello'"), std::string::npos);
  EXPECT_EQ(ErrorAttr("staging/fixed/label"), "");
  EXPECT_EQ(ErrorAttr("staging/ok"), "");
  CommandResult dump = RunCommand({"getfattr", "-d", M("staging/oops/label")});
  EXPECT_NE(dump.out.find("user.tfrecordfs.error"), std::string::npos) << dump.out;
  CommandResult status = Status({s_.mnt});
  EXPECT_EQ(status.exit_code, 1) << status.out << status.err;
  EXPECT_NE(status.out.find("staged: 4 record(s)"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("  oops: refused: label: line 1: 'hello'"), std::string::npos)
      << status.out;
  EXPECT_NE(status.out.find("  img: refused: mask.png: "), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("  fixed: ok\n"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("staging: " + s_.mnt + "/staging (store "), std::string::npos)
      << status.out;
  CommandResult json = Status({"--json", s_.mnt});
  EXPECT_EQ(json.exit_code, 1) << json.err;
  const std::string check = absl::StrCat(
      "import json, sys; d = json.load(sys.stdin); ", "r = {x['name']: x for x in d['records']}; ",
      "assert d['staged'] == 4 and d['refused'] == 2, d; ",
      "assert not r['oops']['ok'] and 'hello' in r['oops']['reason'], r; ",
      "assert r['ok']['ok'] and r['ok']['reason'] is None, r; ",
      "assert d['mountpoint'] == sys.argv[1] and d['read_only'] is False, d");
  CommandResult parsed = Shell("printf '%s' " + ShellQuote(json.out) + " | python3 -c " +
                               ShellQuote(check) + " " + ShellQuote(s_.mnt));
  EXPECT_EQ(parsed.exit_code, 0) << json.out << parsed.err;
  // The first flag reached the foreground daemon's terminal, saying where
  // to look; the later ones are only logged.
  const std::string err = d.Stderr();
  EXPECT_NE(err.find("staging/oops/label: line 1: 'hello'"), std::string::npos) << err;
  const size_t hint = err.find("getfattr -n user.tfrecordfs.error");
  EXPECT_NE(hint, std::string::npos) << err;
  EXPECT_EQ(err.find("getfattr -n user.tfrecordfs.error", hint + 1), std::string::npos) << err;

  int wait_status = 0;
  CommandResult u = d.TfrUnmount(&wait_status);
  EXPECT_EQ(u.exit_code, 1) << u.out << u.err;
  EXPECT_EQ(ExitCodeOfWait(wait_status), 1) << DescribeWait(wait_status);
  EXPECT_EQ(u.out.rfind("result: left\n", 0), 0u) << u.out;
  EXPECT_NE(u.out.find("oops: label: line 1: 'hello'"), std::string::npos) << u.out;
  EXPECT_NE(u.out.find("img: mask.png: "), std::string::npos) << u.out;
  EXPECT_EQ(ListDir(s_.records()), (std::vector<std::string>{"img", "oops"}));
  const auto payloads = AllPayloads(ReadPackedShards(s_.out, "refused"));
  ASSERT_EQ(payloads.size(), 2u);
  ExpectSameRecord(ExamplePayload({Int64Feature("label", {3})}), payloads[0], "fixed");
  ExpectSameRecord(ExamplePayload({Int64Feature("label", {1})}), payloads[1], "ok");

  // The flag is on the staged file itself: the next mount still refuses the
  // record until the file is written again.
  Mount again(PackConfig(s_, {s_.src}, "again"));
  ASSERT_EQ(again.Start(), absl::OkStatus());
  EXPECT_NE(ErrorAttr("staging/oops/label").find("'hello'"), std::string::npos);
  EXPECT_EQ(Bash("echo 7 > " + Q("staging/oops/label")).exit_code, 0);
  EXPECT_EQ(ErrorAttr("staging/oops/label"), "");
  EXPECT_EQ(Bash("rm -r " + Q("staging/img")).exit_code, 0);
  EXPECT_EQ(Status({s_.mnt}).exit_code, 0);
  ExpectPackedOnlyLabel(again, "again", 7, "oops");
}

// Item 2: tools that write a temporary file (no extension, or hidden) and
// rename it over the file they edit. sed's `sedXXXXXX` was checked as a
// numeric feature at write(): `sed -i` failed on every text file.
TEST_F(StagingToolsTest, EditorsAndToolsThatRenameWork) {
  Mount d(PackConfig(s_, {s_.src}, "tools"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  const std::string in = s_.tmp.Subdir("in");
  WriteWholeFile(in + "/label", "5\n");
  WriteWholeFile(in + "/scores", "0.25\n");
  ASSERT_EQ(Bash("cp -r " + Q("base.tfrecord/1") + " " + Q("staging/r")).exit_code, 0);
  // sed -i on a text and on a numeric file.
  CommandResult sed = Bash("cd " + Q("staging/r") +
                           " && sed -i 's/photo/cat/' caption.txt && sed -i 's/1/2/' label");
  EXPECT_EQ(sed.exit_code, 0) << sed.err;
  EXPECT_EQ(ReadWholeFile(M("staging/r/caption.txt")), "a cat of 1\n");
  EXPECT_EQ(ReadWholeFile(M("staging/r/label")), "2\n");
  // vim, in place and with a backup renamed over (backupcopy=no).
  CommandResult vim = Bash("cd " + Q("staging/r") +
                           " && vim -es -u NONE -c '%s/2/4/' -c wq label"
                           " && vim -es -u NONE -c 'set backupcopy=no' -c '%s/cat/dog/' -c wq "
                           "caption.txt");
  if (vim.exit_code == 127) {
    std::cerr << "vim not installed: vim not tried\n";
  } else {
    EXPECT_EQ(vim.exit_code, 0) << vim.out << vim.err;
    EXPECT_EQ(ReadWholeFile(M("staging/r/label")), "4\n");
    EXPECT_EQ(ReadWholeFile(M("staging/r/caption.txt")), "a dog of 1\n");
  }
  // A vim-style save done by hand: the new text written to a swap-like
  // hidden file and a backup-like `x~`, each renamed over the feature.
  CommandResult swap = Bash("cd " + Q("staging/r") +
                            " && printf '6\\n' > .label.swp && mv .label.swp label"
                            " && printf '1.5\\n2\\n' > scores~ && mv scores~ scores");
  EXPECT_EQ(swap.exit_code, 0) << swap.err;
  // cp, mv and rsync into a new record; Python's write-then-os.replace.
  ASSERT_EQ(Bash("command -v rsync").exit_code, 0) << "no rsync (scripts/setup installs it)";
  ASSERT_EQ(Bash("mkdir " + Q("staging/t")).exit_code, 0);
  CommandResult tools =
      Bash("set -e; cd " + Q("staging/t") + "; cp " + ShellQuote(in + "/label") + " label; " +
           "printf 'x\\n' > tmpfile.txt; mv tmpfile.txt caption.txt; " + "rsync " +
           ShellQuote(in + "/scores") + " scores; rsync " + ShellQuote(in + "/label") + " label");
  EXPECT_EQ(tools.exit_code, 0) << tools.err;
  CommandResult py = RunCommand({"python3", "-c",
                                 "import os, sys, tempfile\n"
                                 "fd, tmp = tempfile.mkstemp(dir=sys.argv[1])\n"
                                 "os.write(fd, b'8\\n'); os.close(fd)\n"
                                 "os.replace(tmp, os.path.join(sys.argv[1], 'label'))\n",
                                 M("staging/r")});
  EXPECT_EQ(py.exit_code, 0) << py.err;
  EXPECT_EQ(ListDir(M("staging/r")),
            (std::vector<std::string>{"caption.txt", "label", "mask.png", "scores"}));

  const std::vector<std::string> payloads = UnmountAndReadPacked(d, "tools");
  ASSERT_EQ(payloads.size(), 2u);
  const std::string caption = vim.exit_code == 127 ? "a cat of 1" : "a dog of 1";
  ExpectSameRecord(
      ExamplePayload({Int64Feature("label", {8}), FloatFeature("scores", {1.5f, 2}),
                      BytesFeature("caption", {caption}), BytesFeature("mask", {MaskProto()})}),
      payloads[0], "r");
  ExpectSameRecord(ExamplePayload({Int64Feature("label", {5}), FloatFeature("scores", {0.25f}),
                                   BytesFeature("caption", {"x"})}),
                   payloads[1], "t");
}

// Item 2 (issue 21), with issue 34's item 6: content a feature cannot take,
// written under a temporary name and renamed onto the feature's file, is
// renamed (sed, mv, Python's os.replace succeed) and flagged there (before:
// rename() failed with EINVAL, and mv said "cannot move ... to a
// subdirectory of itself"); written again with a value, the record packs.
TEST_F(StagingToolsTest, BadContentRenamedOntoAFeatureIsFlagged) {
  Mount d(PackConfig(s_, {s_.src}, "ren"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  ASSERT_EQ(Bash("mkdir " + Q("staging/r") + " && echo 3 > " + Q("staging/r/label")).exit_code, 0);
  CommandResult sed = Bash("sed -i 's/3/three/' " + Q("staging/r/label"));
  EXPECT_EQ(sed.exit_code, 0) << sed.err;
  EXPECT_EQ(ReadWholeFile(M("staging/r/label")), "three\n");
  EXPECT_NE(ErrorAttr("staging/r/label").find("line 1: 'three' is not an int64"), std::string::npos)
      << ErrorAttr("staging/r/label");
  CommandResult mv =
      Bash("cd " + Q("staging/r") + " && printf 'x\\n' > .label.swp" + " && mv .label.swp label");
  EXPECT_EQ(mv.exit_code, 0) << mv.err;
  EXPECT_NE(ErrorAttr("staging/r/label").find("line 1: 'x'"), std::string::npos);
  CommandResult py = RunCommand({"python3", "-c",
                                 "import os, sys, tempfile\n"
                                 "fd, tmp = tempfile.mkstemp(dir=sys.argv[1])\n"
                                 "os.write(fd, b'seven\\n'); os.close(fd)\n"
                                 "os.replace(tmp, os.path.join(sys.argv[1], 'label'))\n",
                                 M("staging/r")});
  EXPECT_EQ(py.exit_code, 0) << py.err;
  EXPECT_EQ(ReadWholeFile(M("staging/r/label")), "seven\n");
  EXPECT_NE(ErrorAttr("staging/r/label").find("'seven'"), std::string::npos);
  EXPECT_EQ(Status({s_.mnt}).exit_code, 1);
  // A value renamed over it: the flag goes.
  CommandResult fix = Bash("cd " + Q("staging/r") + " && printf '3\\n' > .l && mv .l label");
  EXPECT_EQ(fix.exit_code, 0) << fix.err;
  EXPECT_EQ(ErrorAttr("staging/r/label"), "");
  EXPECT_EQ(ListDir(M("staging/r")), std::vector<std::string>{"label"});
  ExpectPackedOnlyLabel(d, "ren", 3, "r");
}

// Item 13: `cp -r` of a mounted record asks for its 0444 files and 0555
// folders; staged, they get the owner's write (and search) bits.
TEST_F(StagingToolsTest, CopiedRecordsAreTheUsersToEdit) {
  Mount d(PackConfig(s_, {s_.src}, "modes"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  CommandResult cp = Bash("cp -r " + Q("base.tfrecord/1") + " " + Q("staging/"));
  ASSERT_EQ(cp.exit_code, 0) << cp.err;
  struct stat st;
  ASSERT_EQ(::stat(M("base.tfrecord/1/label").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u) << "a read-write mount's records take edits";
  ASSERT_EQ(::stat(M("staging/1").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  for (const char* f : {"label", "scores", "caption.txt", "mask.png"}) {
    ASSERT_EQ(::stat(M(std::string("staging/1/") + f).c_str(), &st), 0) << f;
    EXPECT_EQ(st.st_mode & 07777, 0644u) << f;
  }
  EXPECT_EQ(Bash("echo 3 > " + Q("staging/1/label")).exit_code, 0);
  // chmod keeps the owner's bits too; the others are as asked.
  EXPECT_EQ(
      Bash("chmod 0400 " + Q("staging/1/label") + " && chmod 0500 " + Q("staging/1")).exit_code, 0);
  ASSERT_EQ(::stat(M("staging/1/label").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(::stat(M("staging/1").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  int wait_status = 0;
  EXPECT_EQ(d.TfrUnmount(&wait_status).exit_code, 0);
}

// Issue 34, item 3: `cp -r` drops the kind xattr (`cp -a` keeps it), so a
// copied record's numeric files are packed by their text. A float file reads
// `-1.0`, not `-1` (before: `-1`, packed as int64 -1, exit 0), so the float
// list comes back a float list, offline (`tfrecordfs pack`) and through the
// staging folder of a mount whose shards do not know the feature; the report
// says which kinds were inferred.
TEST_F(StagingToolsTest, FloatsSurviveCpRWithoutTheKindXattr) {
  const std::string in = s_.tmp.Subdir("in");
  const std::string packed = s_.tmp.Subdir("packed");
  // A float list of whole numbers only (a bounding box corner at 1.0).
  test::WriteShard(s_.src + "/box.tfrecord", {ExamplePayload({FloatFeature("ymax", {1.0f})})});
  {
    Mount d(PackConfig(s_, {s_.src}, "unused"));
    ASSERT_EQ(d.Start(), absl::OkStatus());
    EXPECT_EQ(ReadWholeFile(M("base.tfrecord/0/scores")), "0.5\n-1.0\n");
    EXPECT_EQ(ReadWholeFile(M("box.tfrecord/0/ymax")), "1.0\n");
    ASSERT_EQ(Bash("cp -r " + Q("base.tfrecord/0") + " " + ShellQuote(in + "/r0")).exit_code, 0);
    ASSERT_EQ(Bash("cp -r " + Q("box.tfrecord/0") + " " + ShellQuote(in + "/s0")).exit_code, 0);
    int wait_status = 0;
    EXPECT_EQ(d.TfrUnmount(&wait_status).exit_code, 0);
  }
  // No kind attribute on the copy: what the pack reads is the text alone.
  CommandResult attrs = RunCommand({"getfattr", "-d", "-m", "-", in + "/r0/scores"});
  EXPECT_EQ(attrs.out.find("tfrecordfs"), std::string::npos) << attrs.out;

  CommandResult pack = RunCommand({BinaryPath(), "pack", "--prefix", "p", in, packed});
  EXPECT_EQ(pack.exit_code, 0) << pack.out << pack.err;
  EXPECT_NE(pack.out.find("kinds inferred from the files' text in 2 records"), std::string::npos)
      << pack.out;
  EXPECT_NE(pack.out.find("  scores: float (r0)\n"), std::string::npos) << pack.out;
  EXPECT_NE(pack.out.find("  label: int64 (r0)\n"), std::string::npos) << pack.out;
  EXPECT_NE(pack.out.find("  ymax: float (s0)\n"), std::string::npos) << pack.out;
  std::vector<std::string> got =
      ReadIndependently(packed + "/p-00000-of-00001.tfrecord",
                        "{k: v[0] for k, v in sorted(t.decode_example(p).items())}");
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[1], "{'caption': 'bytes', 'label': 'int64', 'mask': 'bytes', 'scores': 'float'}");
  EXPECT_EQ(got[2], "{'ymax': 'float'}");  // before: int64, the file read "1"
  got = ReadIndependently(
      packed + "/p-00000-of-00001.tfrecord",
      "[v for k, v in sorted(t.decode_example(p).items()) if k in ('scores', 'ymax')][0]");
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[1], "('float', [0.5, -1.0])");
  EXPECT_EQ(got[2], "('float', [1.0])");

  // The same copy staged on a mount whose shards have no `scores`: the
  // staging checks cannot know its kind either.
  Scratch other;
  test::WriteShard(other.src + "/other.tfrecord",
                   {ExamplePayload({BytesFeature("name", {"unrelated"})})});
  Mount d(PackConfig(other, {other.src}, "staged"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  ASSERT_EQ(Bash("cp -r " + ShellQuote(in + "/r0") + " " + ShellQuote(other.mnt + "/staging/r0"))
                .exit_code,
            0);
  int wait_status = 0;
  CommandResult u = d.TfrUnmount(&wait_status);
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  EXPECT_NE(u.out.find("  scores: float (r0)\n"), std::string::npos) << u.out;
  const std::vector<PackedShard> shards = ReadPackedShards(other.out, "staged");
  ASSERT_EQ(shards.size(), 1u);
  got = ReadIndependently(other.out + "/" + shards[0].name, "t.decode_example(p)['scores']");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1], "('float', [0.5, -1.0])");
}

// The same with a record TensorFlow wrote (od_raccoon_jpeg_bbox: the bbox
// corners are float lists holding whole numbers, ymax 1.0): every feature
// of the record packed from a `cp -r` copy is the original's, kinds
// included, as the independent reader decodes them.
TEST_F(StagingToolsTest, RealRecordCopiedWithCpRPacksToTheOriginal) {
  const std::string data = RealDataDir();
  if (data.empty()) GTEST_SKIP() << RealDataMissing();
  const std::string shard = data + "/od_raccoon_jpeg_bbox/test.record";
  const std::string in = s_.tmp.Subdir("in");
  const std::string packed = s_.tmp.Subdir("packed");
  Mount d;
  ASSERT_EQ(d.Start({data + "/od_raccoon_jpeg_bbox"}, {"-o", "ro"}), absl::OkStatus());
  EXPECT_EQ(ReadWholeFile(d.path("test.record/01/image/object/bbox/ymax")), "1.0\n");
  ASSERT_EQ(RunCommand({"cp", "-r", d.path("test.record/01"), in + "/r01"}).exit_code, 0);
  std::string err;
  EXPECT_EQ(d.Stop(&err), 0) << err;
  CommandResult pack = RunCommand({BinaryPath(), "pack", "--prefix", "p", in, packed});
  EXPECT_EQ(pack.exit_code, 0) << pack.out << pack.err;
  EXPECT_NE(pack.out.find("  image/object/bbox/ymax: float (r01)\n"), std::string::npos)
      << pack.out;
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  ASSERT_NE(root, nullptr);
  CommandResult same =
      RunCommand({"/usr/bin/python3", "-c",
                  absl::StrCat("import sys; sys.path.insert(0, '", root,
                               "/tests/cli'); import tfrecord_check as t\n"
                               "a = t.decode_example(list(t.read_records(sys.argv[1]))[1])\n"
                               "b = t.decode_example(list(t.read_records(sys.argv[2]))[0])\n"
                               "print(a['image/object/bbox/ymax'])\n"
                               "sys.exit(0 if a == b else 1)\n"),
                  shard, packed + "/p-00000-of-00001.tfrecord"});
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
  EXPECT_EQ(same.out, "('float', [1.0])\n");
}

TEST_F(StagingToolsTest, StatusUsageAndExitCodes) {
  CommandResult help = Status({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("Usage: tfrecordfs status [--json] MOUNTPOINT"), std::string::npos);
  EXPECT_EQ(Status({}).exit_code, 2);
  EXPECT_EQ(Status({"--bogus", s_.mnt}).exit_code, 2);
  CommandResult none = Status({s_.mnt});
  EXPECT_EQ(none.exit_code, 3) << none.out;
  EXPECT_NE(none.err.find("not a live tfrecordfs mount"), std::string::npos) << none.err;

  Mount d(PackConfig(s_, {s_.src}, "st"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  CommandResult empty = Status({s_.mnt});
  EXPECT_EQ(empty.exit_code, 0) << empty.out << empty.err;
  EXPECT_NE(empty.out.find("staged: 0 record(s)"), std::string::npos) << empty.out;
  WriteWholeFile(M("staging/README"), "notes\n");
  CommandResult loose = Status({s_.mnt});
  EXPECT_EQ(loose.exit_code, 1) << loose.out;
  EXPECT_NE(loose.out.find("README (file): refused: not in a record folder"), std::string::npos)
      << loose.out;
  ASSERT_EQ(::unlink(M("staging/README").c_str()), 0);
  int wait_status = 0;
  EXPECT_EQ(d.TfrUnmount(&wait_status).exit_code, 0);
}

}  // namespace
}  // namespace tfrecordfs::mount_test::staging_test
