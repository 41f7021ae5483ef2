// An edit changes only what the user touched (issue 34, items 1 and 2),
// through real mounts and the tools users use (bash `echo >`, `sed -i`, vim,
// `cp -r`), on the real TFX data (../shared/data/real, skipped with a message
// when absent) and on generated shards:
//   * kindless features (an empty Feature{}: TFX's missing values) show as
//     empty `<name>.none` files and survive an edit of another file of the
//     record, in an Example and in a SequenceExample's context, and a
//     `cp -r` into staging and its pack;
//   * a record whose folder says what the record says (a value written over
//     with itself, a refused write then restored, sed or vim changing
//     nothing) is committed byte for byte and counted as kept;
//   * in a changed record, every map entry the edit did not touch keeps its
//     bytes and its place; a changed entry is re-encoded where it was, a
//     removed one is dropped, a new one appended.
// The committed shards are read by an independent reader
// (tests/cli/tfrecord_check.py and the hand-written wire walk below: no
// tfrecordfs code) and compared with a copy of the original shard.
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "staging_util.h"
#include "tfrecordfs/reference/wire.h"

namespace tfrecordfs::mount_test::staging_test {
namespace {

namespace w = reference::wire;

// Compares shard argv[2] (committed) with argv[1] (the original, copied
// before the mount), record by record, by the wire alone. One line per
// record:
//   <i> same
//   <i> changed order:<same | the new keys in order> gone:<entries of the
//     original not in the new record, byte for byte> new:<entries of the
//     new record not in the original, key=value> untouched:<in order |
//     REORDERED> kindless-lost:<kindless keys of the original missing>
// where a key is <field>/<name> (field 1: an Example's features or a
// SequenceExample's context; 2: its feature lists), a value kind:v1,v2 (a
// feature list: steps:kind,kind,...), then a last line
//   records <n> same <s> changed <c>
constexpr char kCompare[] = R"PY(
def walk(buf):
    """(field number, whole field bytes, body) of a message of LEN fields."""
    i = 0
    while i < len(buf):
        start = i
        key, i = t._varint(buf, i)
        if key & 7 != 2:
            raise ValueError('wire type %d' % (key & 7))
        n, i = t._varint(buf, i)
        yield key >> 3, buf[start:i + n], buf[i:i + n]
        i += n

def entries(payload):
    out = []
    for top, _, body in walk(payload):
        for _, raw, entry in walk(body):
            name, value = '', b''
            for f, _, v in walk(entry):
                if f == 1:
                    name = bytes(v).decode('utf-8')
                else:
                    value = v
            out.append(('%d/%s' % (top, name), raw, value))
    return out

def show(key, value):
    if key.startswith('2/'):
        return 'steps:' + ','.join(t._feature(s)[0] for _, _, s in walk(value))
    kind, values = t._feature(value)
    if kind == 'bytes':
        values = [v.decode('utf-8', 'backslashreplace') for v in values]
    elif kind == 'float':
        values = ['%g' % v for v in values]
    return kind + ':' + ','.join(str(v) for v in values)

old = t.read_records(sys.argv[1])
new = t.read_records(sys.argv[2])
if len(old) != len(new):
    raise SystemExit('%d records, %d before' % (len(new), len(old)))
same = 0
for i, (a, b) in enumerate(zip(old, new)):
    if a == b:
        same += 1
        print(i, 'same')
        continue
    ea, eb = entries(a), entries(b)
    pa = [(k, raw) for k, raw, _ in ea]
    pb = [(k, raw) for k, raw, _ in eb]
    order = 'same' if [k for k, _ in pa] == [k for k, _ in pb] else ' '.join(k for k, _ in pb)
    gone = [k for k, raw in pa if (k, raw) not in pb]
    added = [k + '=' + show(k, v) for k, raw, v in eb if (k, raw) not in pa]
    untouched = 'in order' if [e for e in pa if e in pb] == [e for e in pb if e in pa] else 'REORDERED'
    before = {k for k, _, v in ea if k.startswith('1/') and t._feature(v)[0] == 'none'}
    lost = sorted(before - {k for k, _, _ in eb})
    print(i, 'changed', 'order:' + order, 'gone:' + ' '.join(gone), 'new:' + ' '.join(added),
          'untouched:' + untouched, 'kindless-lost:' + ' '.join(lost))
print('records', len(old), 'same', same, 'changed', len(old) - same)
)PY";

// Runs `body` under /usr/bin/python3 with tests/cli/tfrecord_check.py as
// `t`, and `args` as sys.argv[1:]; its stdout lines.
std::vector<std::string> Python(const std::string& body, const std::vector<std::string>& args) {
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  EXPECT_NE(root, nullptr) << "$TFRECORDFS_SOURCE_ROOT is not set";
  if (root == nullptr) return {};
  std::vector<std::string> argv = {
      "/usr/bin/python3", "-c",
      absl::StrCat("import sys; sys.path.insert(0, '", root,
                   "/tests/cli'); import tfrecord_check as t\n", body)};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult r = RunCommand(argv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return absl::StrSplit(r.out, '\n', absl::SkipEmpty());
}

std::vector<std::string> Compare(const std::string& before, const std::string& after) {
  return Python(kCompare, {before, after});
}

// The records the comparison says are not "<i> same", and its last line.
std::vector<std::string> NotSame(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (const std::string& l : lines) {
    if (!absl::EndsWith(l, " same")) out.push_back(l);
  }
  return out;
}

void CopyFile(const std::string& from, const std::string& to) {
  CommandResult cp = RunCommand({"cp", from, to});
  ASSERT_EQ(cp.exit_code, 0) << cp.err;
}

// `tfrecordfs commit MNT`; its stdout (the rewrite report).
std::string Commit(const Scratch& s) {
  CommandResult c = RunCommand({BinaryPath(), "commit", s.mnt});
  EXPECT_EQ(c.exit_code, 0) << c.out << c.err;
  return c.out;
}

// `set -e; cd DIR; script` in bash.
CommandResult InDir(const std::string& dir, const std::string& script) {
  return RunCommand({"bash", "-c", absl::StrCat("set -e; cd ", ShellQuote(dir), "; ", script)});
}

// vim in Ex mode, no vimrc, no swap file: `vim -E -s -c CMD... FILE`.
std::string Vim(const std::vector<std::string>& commands, const std::string& file) {
  std::string out = "vim -u NONE -i NONE -n -E -s";
  for (const std::string& c : commands) absl::StrAppend(&out, " -c ", ShellQuote(c));
  return absl::StrCat(out, " ", ShellQuote(file));
}

bool HaveTools() { return ::access("/usr/bin/python3", X_OK) == 0; }

// ---------------------------------------------------------------------------
// Real data: TFX's CsvExampleGen shard (SOURCES.md 2: missing values are
// kindless), as the issue's report did it.

TEST(RecordEditKeepRealTest, TfxEditsKeepKindlessFeaturesAndUntouchedBytes) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (!HaveTools()) GTEST_SKIP() << "no /usr/bin/python3";
  const std::string real = RealDataDir();
  if (real.empty()) GTEST_SKIP() << RealDataMissing();
  Scratch s;
  const std::string name = "data_tfrecord-00000-of-00012.gz";
  const std::string shard = s.src + "/" + name, before = s.tmp.path() + "/before.gz";
  CopyFile(real + "/tfx_csv_example_gen_gzip_12shards/Split-eval/" + name, shard);
  CopyFile(shard, before);
  Mount d(PackConfig(s, {s.src}, "edit"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  const std::string dir = s.mnt + "/" + name;
  // Record 0's company and pickup_census_tract are kindless: shown, empty.
  EXPECT_EQ(ReadWholeFile(dir + "/000/company.none"), "");
  EXPECT_EQ(ReadWholeFile(dir + "/000/pickup_census_tract.none"), "");
  CommandResult xattr = RunCommand(
      {"getfattr", "--only-values", "-n", "user.tfrecordfs.kind", dir + "/000/company.none"});
  if (xattr.exit_code != 127) {
    EXPECT_EQ(xattr.out, "none") << xattr.err;
  }
  CommandResult edit = InDir(dir,
                             "echo 13.5 > 000/fare\n"
                             // Record 1 already says Cash: a no-op through sed -i.
                             "sed -i 's/Credit Card/Cash/' 001/payment_type.txt\n"
                             "sed -i 's/Credit Card/Cash/' 002/payment_type.txt\n"
                             // The same value written again, by the shell and by vim.
                             "cat 003/fare > /tmp/tfrfs-fare.$$; cat /tmp/tfrfs-fare.$$ > "
                             "003/fare; rm /tmp/tfrfs-fare.$$\n" +
                                 Vim({"wq!"}, "004/payment_type.txt") + " || true\n");
  ASSERT_EQ(edit.exit_code, 0) << edit.out << edit.err;
  EXPECT_EQ(ReadWholeFile(dir + "/000/fare"), "13.5\n");
  // A copy into staging keeps the kindless keys too.
  CommandResult cp = RunCommand({"cp", "-r", dir + "/000", s.mnt + "/staging/copy0"});
  ASSERT_EQ(cp.exit_code, 0) << cp.err;
  EXPECT_EQ(ReadWholeFile(s.mnt + "/staging/copy0/company.none"), "");

  const std::string report = Commit(s);
  const std::vector<std::string> lines = NotSame(Compare(before, shard));
  ASSERT_EQ(lines.size(), 3u) << absl::StrJoin(lines, "\n");
  EXPECT_EQ(lines[0],
            "0 changed order:same gone:1/fare new:1/fare=float:13.5 untouched:in order "
            "kindless-lost:");
  EXPECT_EQ(lines[1],
            "2 changed order:same gone:1/payment_type new:1/payment_type=bytes:Cash "
            "untouched:in order kindless-lost:");
  EXPECT_EQ(lines[2], "records 424 same 422 changed 2");
  EXPECT_TRUE(absl::StrContains(
      report, absl::StrCat("rewrote ", shard, ": kept 422, changed 2, added 0, deleted 0")))
      << report;
  int status = 0;
  CommandResult un = d.TfrUnmount(&status);
  EXPECT_EQ(un.exit_code, 0) << un.out << un.err;
  // The packed copy of record 0 (as it was before the commit) has every key,
  // the kindless ones kindless.
  const auto packed = AllPayloads(ReadPackedShards(s.out, "edit"));
  ASSERT_EQ(packed.size(), 1u) << un.out;
  const DecodedRecord copy = Decode(packed[0]);
  ASSERT_EQ(copy.features.size(), 18u);
  EXPECT_EQ(copy.features.at("company").kind, example::Kind::kNone);
  EXPECT_EQ(copy.features.at("pickup_census_tract").kind, example::Kind::kNone);
  EXPECT_EQ(copy.features.at("fare").floats, std::vector<float>{13.5f});
}

// TFX's SequenceExamples (SOURCES.md 3): record 0's context is {i: empty,
// f: empty}; an edit of a step keeps it, and the other list entries' bytes.
TEST(RecordEditKeepRealTest, TfxSequenceExampleEditKeepsItsKindlessContext) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (!HaveTools()) GTEST_SKIP() << "no /usr/bin/python3";
  const std::string real = RealDataDir();
  if (real.empty()) GTEST_SKIP() << RealDataMissing();
  Scratch s;
  const std::string name = "data_tfrecord_eval.gz";
  const std::string shard = s.src + "/" + name, before = s.tmp.path() + "/before.gz";
  CopyFile(real + "/tfx_sequence_example_gzip/" + name, shard);
  CopyFile(shard, before);
  Mount d(PackConfig(s, {s.src}, "edit"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  const std::string dir = s.mnt + "/" + name;
  EXPECT_EQ(ListDir(dir + "/0000/context"), (std::vector<std::string>{"f.none", "i.none"}));
  CommandResult edit = InDir(dir,
                             "sed -i 's/10500/10599/' 0000/feature_lists/s/0.txt\n"
                             "sed -i 's/nothing/here/' 0001/feature_lists/s/0.txt\n");
  ASSERT_EQ(edit.exit_code, 0) << edit.out << edit.err;
  const std::string report = Commit(s);
  const std::vector<std::string> lines = NotSame(Compare(before, shard));
  ASSERT_EQ(lines.size(), 2u) << absl::StrJoin(lines, "\n");
  EXPECT_EQ(lines[0],
            "0 changed order:same gone:2/s new:2/s=steps:bytes,bytes untouched:in order "
            "kindless-lost:");
  EXPECT_EQ(lines[1], "records 4500 same 4499 changed 1");
  EXPECT_TRUE(absl::StrContains(report, ": kept 4499, changed 1, added 0, deleted 0")) << report;
  // The new step's value, by the independent reader.
  const std::vector<std::string> step = Python(
      "p = t.read_records(sys.argv[1])[0]\n"
      "fl = [v for f, _, v in t._fields(p) if f == 2][0]\n"
      "entry = [v for f, _, v in t._fields(fl) if f == 1][0]\n"
      "lst = [v for f, _, v in t._fields(entry) if f == 2][0]\n"
      "print([t._feature(v) for f, _, v in t._fields(lst)])\n",
      {shard});
  ASSERT_EQ(step.size(), 1u);
  EXPECT_EQ(step[0], "[('bytes', [b'10599']), ('bytes', [b'10501'])]");
  // A copy into staging packs with the kindless context (record 10: {i, f}
  // empty too).
  CommandResult cp = RunCommand({"cp", "-r", dir + "/0010", s.mnt + "/staging/seq10"});
  ASSERT_EQ(cp.exit_code, 0) << cp.err;
  int status = 0;
  CommandResult un = d.TfrUnmount(&status);
  EXPECT_EQ(un.exit_code, 0) << un.out << un.err;
  const auto packed = AllPayloads(ReadPackedShards(s.out, "edit"));
  ASSERT_EQ(packed.size(), 1u) << un.out;
  const std::vector<std::string> original =
      Python("import binascii\nprint(binascii.hexlify(t.read_records(sys.argv[1])[10]).decode())\n",
             {before});
  ASSERT_EQ(original.size(), 1u);
  const std::string original_payload = absl::HexStringToBytes(original[0]);
  auto want = example::DecodeSequenceExample(original_payload);
  auto got = example::DecodeSequenceExample(packed[0]);
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(SequenceText(*got), SequenceText(*want));
  EXPECT_FALSE(got->context.features.empty());
}

// tf.Transform's SequenceExample (SOURCES.md 3): list string_feature's
// second step is an empty BytesList, not a kindless step; an edit of its
// first step keeps it an empty bytes list, and int_feature (a context
// feature and a list of one name) keeps both entries' bytes.
TEST(RecordEditKeepRealTest, TftEmptyBytesListStepStaysABytesList) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (!HaveTools()) GTEST_SKIP() << "no /usr/bin/python3";
  const std::string real = RealDataDir();
  if (real.empty()) GTEST_SKIP() << RealDataMissing();
  Scratch s;
  const std::string name = "data_tfrecord.gz";
  const std::string shard = s.src + "/" + name, before = s.tmp.path() + "/before.gz";
  CopyFile(real + "/tft_sequence_example_gzip/" + name, shard);
  CopyFile(shard, before);
  Mount d(PackConfig(s, {s.src}, "edit"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  const std::string dir = s.mnt + "/" + name;
  CommandResult edit = InDir(dir, "sed -i 's/Hello/Hallo/' 0/feature_lists/string_feature/0.txt");
  ASSERT_EQ(edit.exit_code, 0) << edit.out << edit.err;
  const std::string report = Commit(s);
  EXPECT_EQ(NotSame(Compare(before, shard)),
            (std::vector<std::string>{
                "0 changed order:same gone:2/string_feature new:2/string_feature=steps:bytes,bytes "
                "untouched:in order kindless-lost:",
                "records 3 same 2 changed 1"}));
  EXPECT_TRUE(absl::StrContains(report, ": kept 2, changed 1, added 0, deleted 0")) << report;
  EXPECT_EQ(ReadWholeFile(dir + "/0/feature_lists/string_feature/1.txt"), "");
  int status = 0;
  EXPECT_EQ(d.TfrUnmount(&status).exit_code, 0);
}

// ---------------------------------------------------------------------------
// Generated data.

// Records written by hand as no encoder of ours would: keys out of name
// order, a float given unpacked, an int64 list as two packed runs, a
// kindless Feature{} and an entry without a value.
const std::string kLabel2 = w::MapEntry("label", w::Int64Feature(w::PackedVarints({2})));
const std::string kText = w::MapEntry("text", w::BytesFeature(w::BytesValues({"hello"})));
const std::string kMissing = w::MapEntry("missing", "");
const std::string kNoValue = w::Len(1, w::Len(1, "novalue"));
const std::string kScore = w::MapEntry("score", w::FloatFeature(w::Float(1, 0.5f)));
const std::string kIds =
    w::MapEntry("ids", w::Int64Feature(w::PackedVarints({1, 2}) + w::PackedVarints({3})));

std::string HandWritten() {
  return w::ExampleOf({kText, kLabel2, kMissing, kScore, kNoValue, kIds});
}

class RecordEditKeepTest : public ::testing::TestWithParam<const char*> {};

TEST_P(RecordEditKeepTest, OnlyWhatTheUserTouchedChanges) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (!HaveTools()) GTEST_SKIP() << "no /usr/bin/python3";
  Scratch s;
  const std::vector<std::string> payloads(10, HandWritten());
  const std::string name = WriteShardWithCodec(s.src, "a.tfrecord", payloads, GetParam());
  ASSERT_FALSE(HasFailure());
  const std::string shard = s.src + "/" + name, before = s.tmp.path() + "/before";
  CopyFile(shard, before);
  Mount d(PackConfig(s, {s.src}, "edit"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  const std::string dir = s.mnt + "/" + name;
  EXPECT_EQ(ListDir(dir + "/0"), (std::vector<std::string>{"ids", "label", "missing.none",
                                                           "novalue.none", "score", "text.txt"}));
  CommandResult edit = InDir(dir,
                             // README's example: the label already is 2.
                             "echo 2 > 0/label\n"
                             "echo 3 > 1/label\n"
                             // A value the label cannot take (written and
                             // flagged: issue 34, item 6), then the value
                             // restored.
                             "echo abc > 2/label\n"
                             "echo 2 > 2/label\n"
                             "rm 3/text.txt; echo 9 > 3/added\n" +
                                 Vim({"%s/hello/howdy/", "wq!"}, "4/text.txt") + "\n" +
                                 // vim writing the file back unchanged (or failing to: either way
                                 // nothing changes).
                                 Vim({"wq"}, "5/text.txt") + " || true\n" +
                                 "rm 6/missing.none\n"
                                 "sed -i 's/0.5/0.5/' 7/score\n"
                                 "echo 0.25 > 8/score\n");
  ASSERT_EQ(edit.exit_code, 0) << edit.out << edit.err;
  EXPECT_EQ(ReadWholeFile(dir + "/4/text.txt"), "howdy\n");
  const std::string report = Commit(s);
  const std::vector<std::string> lines = NotSame(Compare(before, shard));
  const std::vector<std::string> want = {
      "1 changed order:same gone:1/label new:1/label=int64:3 untouched:in order kindless-lost:",
      "3 changed order:1/label 1/missing 1/score 1/novalue 1/ids 1/added gone:1/text "
      "new:1/added=int64:9 untouched:in order kindless-lost:",
      "4 changed order:same gone:1/text new:1/text=bytes:howdy untouched:in order "
      "kindless-lost:",
      "6 changed order:1/text 1/label 1/score 1/novalue 1/ids gone:1/missing new: "
      "untouched:in order kindless-lost:1/missing",
      "8 changed order:same gone:1/score new:1/score=float:0.25 untouched:in order "
      "kindless-lost:",
      "records 10 same 5 changed 5",
  };
  EXPECT_EQ(lines, want);
  EXPECT_TRUE(absl::StrContains(
      report, absl::StrCat("rewrote ", shard, ": kept 5, changed 5, added 0, deleted 0")))
      << report;
  int status = 0;
  CommandResult un = d.TfrUnmount(&status);
  EXPECT_EQ(un.exit_code, 0) << un.out << un.err;
}

// tfrecordfs-gen's SequenceExamples: the list `sparse` has a kindless middle
// step, `empty` no steps, and `tokens` steps of text.
TEST(RecordEditKeepGeneratedTest, SequenceExampleListsAndContext) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (!HaveTools()) GTEST_SKIP() << "no /usr/bin/python3";
  const char* gen = std::getenv("TFRECORDFS_GEN");
  ASSERT_NE(gen, nullptr) << "$TFRECORDFS_GEN is not set";
  Scratch s;
  ASSERT_EQ(0, RunCommand({gen, "sequence", s.src, "--records", "4"}).exit_code);
  const std::string name = "sequence-00000-of-00001.tfrecord";
  const std::string shard = s.src + "/" + name, before = s.tmp.path() + "/before";
  CopyFile(shard, before);
  Mount d(PackConfig(s, {s.src}, "edit"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  const std::string dir = s.mnt + "/" + name;
  EXPECT_EQ(ListDir(dir + "/0/feature_lists/sparse"),
            (std::vector<std::string>{"0", "1.none", "2"}));
  CommandResult edit = InDir(dir,
                             "echo 5 > 0/context/label\n"
                             "echo 1 > 1/context/label\n" +  // already 1
                                 Vim({"wq"}, "2/feature_lists/tokens/0.txt") +
                                 " || true\n" + "echo 9 > 3/feature_lists/sparse/0\n");
  ASSERT_EQ(edit.exit_code, 0) << edit.out << edit.err;
  const std::string report = Commit(s);
  const std::vector<std::string> lines = NotSame(Compare(before, shard));
  const std::vector<std::string> want = {
      "0 changed order:same gone:1/label new:1/label=int64:5 untouched:in order kindless-lost:",
      // The kindless middle step stays kindless.
      "3 changed order:same gone:2/sparse new:2/sparse=steps:int64,none,int64 untouched:in order "
      "kindless-lost:",
      "records 4 same 2 changed 2",
  };
  EXPECT_EQ(lines, want);
  EXPECT_TRUE(absl::StrContains(report, ": kept 2, changed 2, added 0, deleted 0")) << report;
  int status = 0;
  EXPECT_EQ(d.TfrUnmount(&status).exit_code, 0);
}

INSTANTIATE_TEST_SUITE_P(Codecs, RecordEditKeepTest, ::testing::Values("none", "gzip"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace tfrecordfs::mount_test::staging_test
