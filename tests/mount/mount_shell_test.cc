// Everyday shell tools on a mounted generated dataset: ls, find, du, cp,
// cmp, grep, head, stat.
#include <sys/stat.h>

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "expectations.h"
#include "generated_dataset.h"
#include "gtest/gtest.h"
#include "mount_harness.h"

namespace tfrecordfs::mount_test {
namespace {

class ShellToolsTest : public GeneratedMountTestBase {
 protected:
  ShellToolsTest() : GeneratedMountTestBase(77) {}
  void SetUp() override {
    GeneratedMountTestBase::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    expected_ = ds_.Expected();
    mnt_ = ShellQuote(mount_.mountpoint());
  }

  // Runs a script, expects exit code 0, returns stdout without the final
  // newline.
  std::string Ok(const std::string& script) {
    CommandResult r = Shell(script);
    EXPECT_EQ(r.exit_code, 0) << script << "\nstdout: " << r.out << "\nstderr: " << r.err;
    std::string out = r.out;
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  uint64_t Number(const std::string& script) {
    const std::string out = Ok(script);
    uint64_t n = 0;
    std::string first(out.substr(0, out.find_first_of(" \t")));
    EXPECT_TRUE(absl::SimpleAtoi(first, &n)) << script << " printed '" << out << "'";
    return n;
  }

  ExpectedTree expected_;
  std::string mnt_;
};

TEST_F(ShellToolsTest, LsRecursiveSucceedsAndShowsExactSizes) {
  CommandResult r = Shell("ls -lR " + mnt_);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("dataset_info.json"), std::string::npos);
  EXPECT_NE(r.out.find("encoded.jpg"), std::string::npos);

  // ls -ln of single files: the size column is the exact byte count.
  for (const std::string rel :
       {"train-00001-of-00002/007/image/encoded.jpg", "one.tfrecord/0/caption.txt",
        "one.tfrecord/0/scores", "dataset_info.json", "train-00000-of-00002/03/record.bin",
        "one.tfrecord/0/empty_int64"}) {
    const std::string line = Ok("ls -ln " + ShellQuote(mount_.path(rel)));
    std::vector<std::string> cols = absl::StrSplit(line, ' ', absl::SkipEmpty());
    ASSERT_GE(cols.size(), 5u) << line;
    // A read-write mount: a record's files take edits (the owner's write
    // bit, issue 34 item 5); the plain files beside the shards do not.
    EXPECT_EQ(cols[0], rel == "dataset_info.json" ? "-r--r--r--" : "-rw-r--r--") << rel;
    EXPECT_EQ(cols[4], std::to_string(expected_.at(rel).content.size())) << rel;
    EXPECT_EQ(Ok("stat -c %s " + ShellQuote(mount_.path(rel))),
              std::to_string(expected_.at(rel).content.size()));
    EXPECT_EQ(Ok("wc -c < " + ShellQuote(mount_.path(rel))),
              std::to_string(expected_.at(rel).content.size()));
  }
  const std::string dir_line = Ok("ls -lnd " + ShellQuote(mount_.path("one.tfrecord/0")));
  EXPECT_EQ(dir_line.substr(0, 10), "drwxr-xr-x");
}

TEST_F(ShellToolsTest, FindCountsEveryFileAndDirectory) {
  uint64_t files = 0, dirs = 2;  // find lists the root and staging/ too
  for (const auto& [rel, node] : expected_) (node.is_dir ? dirs : files) += 1;
  EXPECT_EQ(Number("find " + mnt_ + " -type f | wc -l"), files);
  EXPECT_EQ(Number("find " + mnt_ + " -type d | wc -l"), dirs);
  EXPECT_EQ(Number("find " + mnt_ + " ! -type f ! -type d | wc -l"), 0u);
  EXPECT_EQ(Number("find " + mnt_ + " -name encoded.jpg | wc -l"), 1u + 8u + 130u + 3u);
}

TEST_F(ShellToolsTest, DuCountsTheApparentSizeOfEveryFile) {
  uint64_t bytes = 0;
  for (const auto& [rel, node] : expected_) bytes += node.content.size();
  EXPECT_EQ(Number("du -sb --exclude=staging " + mnt_), bytes);
  EXPECT_EQ(Number("du -sb " + ShellQuote(mount_.path("train-00001-of-00002/007"))), [&] {
    uint64_t n = 0;
    for (const auto& [rel, node] : expected_) {
      if (rel.rfind("train-00001-of-00002/007/", 0) == 0) n += node.content.size();
    }
    return n;
  }());
}

TEST_F(ShellToolsTest, CpOfARecordFolderMatchesByteForByte) {
  for (const std::string rec : {"one.tfrecord/0", "train-00001-of-00002/042",
                                "train-00001-of-00002/007", "train-00000-of-00002/03"}) {
    SCOPED_TRACE(rec);
    const std::string copy = tmp_.path() + "/copy-" + std::to_string(std::hash<std::string>()(rec));
    Ok("cp -r " + ShellQuote(mount_.path(rec)) + " " + ShellQuote(copy));
    // cmp every file of the mount against its copy.
    Ok("cd " + ShellQuote(mount_.path(rec)) + " && find . -type f -exec cmp {} " +
       ShellQuote(copy) + "/{} \\;");
    Ok("diff -r " + ShellQuote(mount_.path(rec)) + " " + ShellQuote(copy));
    // And the copy against the expectation, independently of the mount.
    const auto copied = WalkTree(copy);
    size_t n = 0;
    for (const auto& [rel, node] : copied) {
      auto it = expected_.find(rec + "/" + rel);
      ASSERT_NE(it, expected_.end()) << rel;
      if (!it->second.is_dir) {
        ++n;
        EXPECT_EQ(node.content, it->second.content) << rel;
      }
    }
    size_t want = 0;
    for (const auto& [rel, node] : expected_) {
      want += !node.is_dir && rel.rfind(rec + "/", 0) == 0;
    }
    EXPECT_EQ(n, want);
  }
}

TEST_F(ShellToolsTest, GrepFindsAKnownTextValue) {
  const std::string out = Ok("grep -r -l -F " + ShellQuote(ds_.needle) + " " + mnt_);
  EXPECT_EQ(out, mount_.path(ds_.needle_file));
  EXPECT_EQ(Ok("grep -h -F -x " + ShellQuote(ds_.needle) + " " +
               ShellQuote(mount_.path(ds_.needle_file))),
            ds_.needle);
  // grep -c over a text list counts its lines (one value per line).
  EXPECT_EQ(Ok("grep -c '' " + ShellQuote(mount_.path(ds_.needle_file))), "2");
  CommandResult none = Shell("grep -r -l -F no-such-needle-anywhere " + mnt_);
  EXPECT_EQ(none.exit_code, 1) << none.err;
  EXPECT_EQ(none.err, "");
}

TEST_F(ShellToolsTest, HeadCatAndTailReadTheRightBytes) {
  const std::string rel = "train-00001-of-00002/007/image/encoded.jpg";
  const std::string& want = expected_.at(rel).content;
  const std::string f = ShellQuote(mount_.path(rel));
  WriteWholeFile(tmp_.path() + "/head100", want.substr(0, 100));
  WriteWholeFile(tmp_.path() + "/tail100", want.substr(want.size() - 100));
  WriteWholeFile(tmp_.path() + "/full", want);
  Ok("head -c 100 " + f + " | cmp - " + ShellQuote(tmp_.path() + "/head100"));
  Ok("tail -c 100 " + f + " | cmp - " + ShellQuote(tmp_.path() + "/tail100"));
  Ok("cat " + f + " | cmp - " + ShellQuote(tmp_.path() + "/full"));
  WriteWholeFile(tmp_.path() + "/slice", want.substr(3 * 4096, 2 * 4096));
  Ok("dd if=" + f + " bs=4096 skip=3 count=2 status=none | cmp - " +
     ShellQuote(tmp_.path() + "/slice"));
  EXPECT_EQ(Ok("head -n 1 " + ShellQuote(mount_.path("one.tfrecord/0/image/height"))),
            absl::StripSuffix(expected_.at("one.tfrecord/0/image/height").content, "\n"));
  EXPECT_EQ(Ok("cat " + ShellQuote(mount_.path("one.tfrecord/0/image/format.txt"))), "jpeg");
}

}  // namespace
}  // namespace tfrecordfs::mount_test
