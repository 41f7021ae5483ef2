// TF-Ranking ExampleListWithContext (ELWC) records as folders (issue 38,
// "ELWC and Example-in-Example records"), through real mounts and the tools
// users use (bash `echo >`, `sed -i`, `rm -r`, `cp -r`, `tfrecordfs commit`):
//   * every record of the real eval_elwc.tfrecord (SOURCES.md 9; skipped
//     with a message when ../shared/data/real is absent) and of
//     `tfrecordfs-gen ranking` data (empty context, no context, no
//     examples, kindless features, bytes lists, tensors) shows `context/`
//     and `examples/<i>/` holding exactly the files its features make, as
//     an independent wire walk (elwc_check.py, no tfrecordfs code) computes
//     them;
//   * an edit of one example's feature or of the context, committed, leaves
//     every other example, the context and the other map entries byte for
//     byte where they were (fields kept in wire order, context first or
//     last); `rm -r examples/<i>` drops that example;
//   * `cp -r` of a record folder into staging/ packs an ELWC again;
//   * show, schema, count and verify read ELWC records as such.
// Before ELWC recognition every one of these records showed as one
// `record.bin`, so each test here fails on that code.
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
#include "staging/staging_util.h"

namespace tfrecordfs::mount_test::staging_test {
namespace {

bool HaveTools() { return ::access("/usr/bin/python3", X_OK) == 0; }

// tests/mount/ranking/elwc_check.py with `args`; its stdout lines.
std::vector<std::string> Check(const std::vector<std::string>& args) {
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  EXPECT_NE(root, nullptr) << "$TFRECORDFS_SOURCE_ROOT is not set";
  if (root == nullptr) return {};
  std::vector<std::string> argv = {"/usr/bin/python3",
                                   absl::StrCat(root, "/tests/mount/ranking/elwc_check.py")};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult r = RunCommand(argv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return absl::StrSplit(r.out, '\n', absl::SkipEmpty());
}

// The payloads of a shard as hex, read by tests/cli/tfrecord_check.py.
std::vector<std::string> PayloadsIndependently(const std::string& shard) {
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  if (root == nullptr) return {};
  CommandResult r = RunCommand(
      {"/usr/bin/python3", "-c",
       absl::StrCat("import sys, binascii; sys.path.insert(0, '", root,
                    "/tests/cli'); import tfrecord_check as t\n"
                    "for p in t.read_records(sys.argv[1]): print(binascii.hexlify(p).decode())\n"),
       shard});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(r.out, '\n', absl::SkipEmpty())) {
    out.push_back(absl::HexStringToBytes(line));
  }
  return out;
}

// elwc_check.py's verdict on whether payloads `a` and `b` say the same as
// ELWCs ("same"), through a two-record shard written by tfrecord_check.py.
std::string SameMeaning(const Scratch& s, const std::string& a, const std::string& b) {
  const std::string tmp = s.tmp.path() + "/pair.tfrecord";
  CommandResult w = RunCommand(
      {"/usr/bin/python3", "-c",
       absl::StrCat("import sys, binascii; sys.path.insert(0, '",
                    std::getenv("TFRECORDFS_SOURCE_ROOT"),
                    "/tests/cli'); import tfrecord_check as t\n"
                    "open(sys.argv[1], 'wb').write(t.frame(binascii.unhexlify(sys.argv[2])) + "
                    "t.frame(binascii.unhexlify(sys.argv[3])))\n"),
       tmp, absl::BytesToHexString(a), absl::BytesToHexString(b)});
  EXPECT_EQ(w.exit_code, 0) << w.err;
  const std::vector<std::string> out = Check({"same", tmp});
  return out.size() == 1 ? out[0] : absl::StrJoin(out, "\n");
}

void CopyFile(const std::string& from, const std::string& to) {
  CommandResult cp = RunCommand({"cp", from, to});
  ASSERT_EQ(cp.exit_code, 0) << cp.err;
}

CommandResult InDir(const std::string& dir, const std::string& script) {
  return RunCommand({"bash", "-c", absl::StrCat("set -e; cd ", ShellQuote(dir), "; ", script)});
}

std::string Commit(const Scratch& s) {
  CommandResult c = RunCommand({BinaryPath(), "commit", s.mnt});
  EXPECT_EQ(c.exit_code, 0) << c.out << c.err;
  return c.out;
}

constexpr char kRealName[] = "eval_elwc.tfrecord";

std::string RealShard() {
  const std::string real = RealDataDir();
  return real.empty() ? "" : real + "/non_example_ranking_elwc/" + kRealName;
}

// ---------------------------------------------------------------------------
// The real file: 10 records, each 2 examples (relevance int64[1],
// document_tokens bytes[5|2]) and a context (query_tokens bytes[5]).

TEST(RankingRealTest, EveryRecordShowsContextAndExamplesAsItsWireSays) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (!HaveTools()) GTEST_SKIP() << "no /usr/bin/python3";
  if (RealDataDir().empty()) GTEST_SKIP() << RealDataMissing();
  Scratch s;
  CopyFile(RealShard(), s.src + "/" + kRealName);
  Mount d(PackConfig(s, {s.src}, "out"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  const std::string dir = s.mnt + "/" + kRealName;
  EXPECT_EQ(ListDir(dir + "/0"), (std::vector<std::string>{"context", "examples"}));
  EXPECT_EQ(ListDir(dir + "/0/examples"), (std::vector<std::string>{"000", "001"}));
  EXPECT_EQ(ListDir(dir + "/0/examples/001"),
            (std::vector<std::string>{"document_tokens.txt", "relevance"}));
  EXPECT_EQ(ReadWholeFile(dir + "/0/examples/001/document_tokens.txt"), "irrelevant\ndata\n");
  EXPECT_EQ(ReadWholeFile(dir + "/0/context/query_tokens.txt"),
            "this\nis\na\nrelevant\nquestion\n");
  std::vector<std::string> want;
  for (int i = 0; i < 10; ++i) want.push_back(absl::StrCat(i, " ok examples:2 context:1 features"));
  want.push_back("records 10");
  EXPECT_EQ(Check({"tree", RealShard(), dir}), want);
  // The file's extended attributes name the section and the example.
  CommandResult xattr = RunCommand({"getfattr", "--only-values", "-n", "user.tfrecordfs.example",
                                    dir + "/0/examples/001/relevance"});
  if (xattr.exit_code != 127) {
    EXPECT_EQ(xattr.out, "1") << xattr.err;
  }
}

TEST(RankingRealTest, EditsOfOneExampleKeepEveryOtherExampleAndTheContext) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (!HaveTools()) GTEST_SKIP() << "no /usr/bin/python3";
  if (RealDataDir().empty()) GTEST_SKIP() << RealDataMissing();
  Scratch s;
  const std::string shard = s.src + "/" + kRealName, before = s.tmp.path() + "/before.tfrecord";
  CopyFile(RealShard(), shard);
  CopyFile(shard, before);
  Mount d(PackConfig(s, {s.src}, "out"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  const std::string dir = s.mnt + "/" + kRealName;
  CommandResult edit =
      InDir(dir,
            "sed -i 's/irrelevant/unrelated/' 3/examples/001/document_tokens.txt\n"
            "echo 2 > 5/examples/000/relevance\n"
            "echo tuned >> 6/context/query_tokens.txt\n"
            "rm -r 7/examples/000\n"
            // Written over with what it holds: no change.
            "cat 8/examples/000/relevance > /tmp/tfrfs-rel.$$; "
            "cat /tmp/tfrfs-rel.$$ > 8/examples/000/relevance; rm /tmp/tfrfs-rel.$$\n"
            "cp -r 2 ../staging/copy2\n");
  ASSERT_EQ(edit.exit_code, 0) << edit.out << edit.err;
  EXPECT_EQ(ListDir(dir + "/7/examples"), std::vector<std::string>{"001"});
  const std::string report = Commit(s);
  EXPECT_EQ(Check({"kept", before, shard}),
            (std::vector<std::string>{
                "3 fields:e=e*c= changed:e1[document_tokens=bytes:unrelated,data]",
                "5 fields:e*e=c= changed:e0[relevance=int64:2]",
                "6 fields:e=e=c* changed:c[query_tokens=bytes:this,is,a,relevant,question,tuned]",
                "7 fields:e=c= changed:", "records 10 same 6"}));
  EXPECT_TRUE(absl::StrContains(report, ": kept 6, changed 4, added 0, deleted 0")) << report;
  // After the commit the mount shows the committed records.
  EXPECT_EQ(ReadWholeFile(dir + "/5/examples/000/relevance"), "2\n");
  EXPECT_EQ(ListDir(dir + "/7/examples"), std::vector<std::string>{"000"});
  int status = 0;
  CommandResult un = d.TfrUnmount(&status);
  EXPECT_EQ(un.exit_code, 0) << un.out << un.err;
  // The copy packed into an ELWC saying what record 2 says: same examples
  // and context, map entries in name order (the encoder's).
  const auto packed = AllPayloads(ReadPackedShards(s.out, "out"));
  ASSERT_EQ(packed.size(), 1u) << un.out;
  const std::vector<std::string> original = PayloadsIndependently(before);
  ASSERT_EQ(original.size(), 10u);
  EXPECT_EQ(SameMeaning(s, original[2], packed[0]), "same");
}

// ---------------------------------------------------------------------------
// Generated: the shapes the real file lacks.

std::string GeneratedShard(const Scratch& s) {
  const char* gen = std::getenv("TFRECORDFS_GEN");
  EXPECT_NE(gen, nullptr) << "$TFRECORDFS_GEN is not set";
  if (gen == nullptr) return "";
  CommandResult g = RunCommand({gen, "ranking", s.src, "--records", "8"});
  EXPECT_EQ(g.exit_code, 0) << g.err;
  return s.src + "/elwc-00000-of-00001.tfrecord";
}

TEST(RankingGeneratedTest, EmptyAndMissingContextsAndExampleListsShowAsTheyAre) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (!HaveTools()) GTEST_SKIP() << "no /usr/bin/python3";
  Scratch s;
  const std::string shard = GeneratedShard(s);
  Mount d(PackConfig(s, {s.src}, "out"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  const std::string dir = s.mnt + "/elwc-00000-of-00001.tfrecord";
  EXPECT_EQ(Check({"tree", shard, dir}),
            (std::vector<std::string>{
                "0 ok examples:1 context:empty", "1 ok examples:2 context:none",
                "2 ok examples:0 context:2 features", "3 ok examples:3 context:2 features",
                "4 ok examples:2 context:empty", "5 ok examples:2 context:none",
                "6 ok examples:0 context:2 features", "7 ok examples:3 context:2 features",
                "records 8"}));
  EXPECT_EQ(ListDir(dir + "/3/examples/000"),
            (std::vector<std::string>{"doc.txt", "missing.none", "relevance", "score"}));
  EXPECT_EQ(ListDir(dir + "/3/examples/001/blobs"), (std::vector<std::string>{"0.jpg", "1.bin"}));
  EXPECT_EQ(ListDir(dir + "/3/examples/002"),
            (std::vector<std::string>{"doc.txt", "mask.png", "relevance", "score"}));
  EXPECT_EQ(ListDir(dir + "/1/examples/001"), std::vector<std::string>{});
  EXPECT_EQ(ListDir(dir + "/2/examples"), std::vector<std::string>{});
}

TEST(RankingGeneratedTest, EditsRemovalsAndCopiesKeepTheirBytesAndShape) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (!HaveTools()) GTEST_SKIP() << "no /usr/bin/python3";
  Scratch s;
  const std::string shard = GeneratedShard(s), before = s.tmp.path() + "/before.tfrecord";
  CopyFile(shard, before);
  Mount d(PackConfig(s, {s.src}, "out"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  const std::string dir = s.mnt + "/elwc-00000-of-00001.tfrecord";
  CommandResult edit = InDir(dir,
                             "rm -r 1/examples/001\n"
                             "echo 9 > 3/examples/002/relevance\n"
                             "sed -i 's/q7/q77/' 7/context/query.txt\n"
                             "cp -r 0 ../staging/empty-context\n"
                             "cp -r 2 ../staging/no-examples\n"
                             "cp -r 3 ../staging/context-first\n");
  ASSERT_EQ(edit.exit_code, 0) << edit.out << edit.err;
  Commit(s);
  EXPECT_EQ(Check({"kept", before, shard}),
            (std::vector<std::string>{
                "1 fields:e= changed:", "3 fields:c=e=e=e* changed:e2[relevance=int64:9]",
                "7 fields:c*e=e=e= changed:c[query=bytes:q77]", "records 8 same 5"}));
  int status = 0;
  CommandResult un = d.TfrUnmount(&status);
  EXPECT_EQ(un.exit_code, 0) << un.out << un.err;
  // The copies pack to ELWCs saying what records 3, 0 and 2 said (staged
  // name order): an empty context stays an empty one (elwc_check.py tells
  // it from an absent one), no examples none.
  const auto packed = AllPayloads(ReadPackedShards(s.out, "out"));
  const std::vector<std::string> original = PayloadsIndependently(before);
  ASSERT_EQ(original.size(), 8u);
  ASSERT_EQ(packed.size(), 3u) << un.out;
  // (Record 3 was copied after its edit: what the commit wrote.)
  const std::vector<std::string> committed = PayloadsIndependently(shard);
  ASSERT_EQ(committed.size(), 8u);
  EXPECT_EQ(SameMeaning(s, committed[3], packed[0]), "same");
  EXPECT_NE(SameMeaning(s, original[3], packed[0]), "same");
  EXPECT_EQ(SameMeaning(s, original[0], packed[1]), "same");
  EXPECT_EQ(SameMeaning(s, original[2], packed[2]), "same");
}

// Example-in-Example: the same folders under the Example's feature names.
TEST(RankingGeneratedTest, ExampleInExampleShowsEditsAndCopiesAsOne) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (!HaveTools()) GTEST_SKIP() << "no /usr/bin/python3";
  Scratch s;
  GeneratedShard(s);
  const std::string shard = s.src + "/eie-00000-of-00001.tfrecord";
  const std::string before = s.tmp.path() + "/before.tfrecord";
  CopyFile(shard, before);
  Mount d(PackConfig(s, {s.src}, "out"));
  ASSERT_EQ(d.Start(), absl::OkStatus());
  const std::string dir = s.mnt + "/eie-00000-of-00001.tfrecord";
  EXPECT_EQ(
      Check({"tree", shard, dir, "--eie"}),
      (std::vector<std::string>{
          "0 ok examples:2 context:1 features", "1 ok examples:3 context:none",
          "2 ok examples:0 context:1 features", "3 ok examples:2 context:1 features",
          "4 ok examples:3 context:none", "5 ok examples:0 context:1 features",
          "6 ok examples:2 context:1 features", "7 ok examples:3 context:none", "records 8"}));
  EXPECT_EQ(ListDir(dir + "/0"),
            (std::vector<std::string>{"serialized_context", "serialized_examples"}));
  EXPECT_EQ(ListDir(dir + "/1/serialized_examples/001"), std::vector<std::string>{});
  CommandResult edit = InDir(dir,
                             "echo 5 > 0/serialized_examples/001/relevance\n"
                             "echo 9 > 3/serialized_context/query_id\n"
                             "sed -i 's/eie 4 2/eie 4 two/' 4/serialized_examples/002/doc.txt\n"
                             "rm -r 6/serialized_examples/000\n"
                             "cp -r 1 ../staging/eie1\n");
  ASSERT_EQ(edit.exit_code, 0) << edit.out << edit.err;
  Commit(s);
  EXPECT_EQ(Check({"kept-eie", before, shard}),
            (std::vector<std::string>{"0 context:= examples:=* entries:serialized_context",
                                      "3 context:* examples:== entries:serialized_examples",
                                      "4 context:- examples:==* entries:",
                                      "6 context:= examples:= entries:serialized_context",
                                      "records 8 same 4"}));
  EXPECT_EQ(ReadWholeFile(dir + "/4/serialized_examples/002/doc.txt"), "eie 4 two\n");
  int status = 0;
  CommandResult un = d.TfrUnmount(&status);
  EXPECT_EQ(un.exit_code, 0) << un.out << un.err;
  const auto packed = AllPayloads(ReadPackedShards(s.out, "out"));
  const std::vector<std::string> original = PayloadsIndependently(before);
  ASSERT_EQ(packed.size(), 1u) << un.out;
  ASSERT_EQ(original.size(), 8u);
  const std::string tmp = s.tmp.path() + "/pair.tfrecord";
  CommandResult w = RunCommand(
      {"/usr/bin/python3", "-c",
       absl::StrCat("import sys, binascii; sys.path.insert(0, '",
                    std::getenv("TFRECORDFS_SOURCE_ROOT"),
                    "/tests/cli'); import tfrecord_check as t\n"
                    "open(sys.argv[1], 'wb').write(t.frame(binascii.unhexlify(sys.argv[2])) + "
                    "t.frame(binascii.unhexlify(sys.argv[3])))\n"),
       tmp, absl::BytesToHexString(original[1]), absl::BytesToHexString(packed[0])});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_EQ(Check({"same", tmp, "--eie"}), std::vector<std::string>{"same"});
}

// ---------------------------------------------------------------------------
// The toolbox.

TEST(RankingToolboxTest, ShowSchemaCountAndVerifyReadExampleLists) {
  if (RealDataDir().empty()) GTEST_SKIP() << RealDataMissing();
  const std::string shard = RealShard();
  CommandResult show = RunCommand({BinaryPath(), "show", shard, "1"});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_TRUE(absl::StrContains(show.out, ": ExampleListWithContext, 200 bytes")) << show.out;
  EXPECT_TRUE(absl::StrContains(show.out, "examples:  2 example(s)")) << show.out;
  EXPECT_TRUE(absl::StrContains(show.out, "irrelevant")) << show.out;
  CommandResult json = RunCommand({BinaryPath(), "show", "--json", shard, "1"});
  EXPECT_EQ(json.exit_code, 0) << json.err;
  EXPECT_TRUE(absl::StrContains(json.out, "\"kind\":\"ExampleListWithContext\"")) << json.out;
  EXPECT_TRUE(absl::StrContains(json.out, "\"examples\":[")) << json.out;
  CommandResult schema = RunCommand({BinaryPath(), "schema", shard});
  EXPECT_EQ(schema.exit_code, 0) << schema.err;
  EXPECT_TRUE(absl::StrContains(schema.out,
                                "0 Example(s), 0 SequenceExample(s), 10 "
                                "ExampleListWithContext(s), 0 Example-in-Example(s), of 20 "
                                "example(s), 0 other payload(s)"))
      << schema.out;
  EXPECT_TRUE(absl::StrContains(schema.out, "query_tokens (context)")) << schema.out;
  EXPECT_TRUE(absl::StrContains(schema.out, "example feature")) << schema.out;
  EXPECT_TRUE(absl::StrContains(schema.out, "20/20")) << schema.out;
  CommandResult count = RunCommand({BinaryPath(), "count", shard});
  EXPECT_EQ(count.exit_code, 0) << count.err;
  EXPECT_TRUE(absl::StrContains(count.out, "10")) << count.out;
  CommandResult verify = RunCommand({BinaryPath(), "verify", shard});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  EXPECT_FALSE(absl::StrContains(verify.out, "none of them")) << verify.out;
}

TEST(RankingToolboxTest, ShowAndSchemaReadExampleInExample) {
  Scratch s;
  GeneratedShard(s);
  const std::string shard = s.src + "/eie-00000-of-00001.tfrecord";
  CommandResult show = RunCommand({BinaryPath(), "show", shard, "0"});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_TRUE(absl::StrContains(show.out, ": ExampleInExample, ")) << show.out;
  EXPECT_TRUE(absl::StrContains(show.out, "examples:  2 example(s)")) << show.out;
  EXPECT_TRUE(absl::StrContains(show.out, "\"eie 0 1\"")) << show.out;
  CommandResult schema = RunCommand({BinaryPath(), "schema", shard});
  EXPECT_EQ(schema.exit_code, 0) << schema.err;
  // 8 records: 3 + 3 + 2 of 2, 3 and 0 examples: 15.
  EXPECT_TRUE(absl::StrContains(schema.out,
                                "0 Example(s), 0 SequenceExample(s), 0 ExampleListWithContext(s), "
                                "8 Example-in-Example(s), of 15 example(s)"))
      << schema.out;
}

}  // namespace
}  // namespace tfrecordfs::mount_test::staging_test
