// What the record-edit tests share (record_edit_test.cc,
// record_edit_commit_test.cc, record_edit_generated_test.cc,
// record_modes_test.cc): the independent reader run on a shard, and the
// fixture of a mounted shard of kRecords records in each codec.
#ifndef TFRECORDFS_TESTS_MOUNT_STAGING_RECORD_EDIT_UTIL_H_
#define TFRECORDFS_TESTS_MOUNT_STAGING_RECORD_EDIT_UTIL_H_

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

inline constexpr int kRecords = 12;

// Each record of `shard` as the independent reader describes it (one line
// per record: tfrecord_check.describe_example), after a first line naming
// the codec.
// Runs `body` under /usr/bin/python3 with tests/cli/tfrecord_check.py
// imported as `t` and `arg` as sys.argv[1]; its stdout.
inline std::string WithChecker(const std::string& body, const std::string& arg) {
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

inline std::vector<std::string> IndependentRead(const std::string& shard) {
  return absl::StrSplit(
      WithChecker("raw = open(sys.argv[1], 'rb').read(); print(t.codec_of(raw))\n"
                  "for p in t.read_records(sys.argv[1]): print(t.describe_example(p))\n",
                  shard),
      '\n', absl::SkipEmpty());
}

inline std::string Described(int id, const std::string& text, const std::string& score) {
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

}  // namespace tfrecordfs::mount_test::staging_test

#endif  // TFRECORDFS_TESTS_MOUNT_STAGING_RECORD_EDIT_UTIL_H_
