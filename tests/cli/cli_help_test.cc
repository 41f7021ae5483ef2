// The commands' --help: one table of options per command (the shared rows
// once, at the command's column), and the codecs the readers take named in
// every --help and in the man page.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cli_toolbox_util.h"
#include "generated_dataset.h"
#include "gtest/gtest.h"
#include "mount_harness.h"
#include "nlohmann/json.hpp"
#include "src/cli/json_writer.h"
#include "testing/index_files.h"
#include "testing/shard.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/index/index_file.h"
#include "tfrecordfs/index/index_store.h"
#include "tfrecordfs/inspect/inspect.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/writer.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::mount_test {
namespace {

// Every command's --help lists its options as one table: the shared rows
// (-q, --max-shard-records, -h: Tool's, printed from one table) once each,
// their descriptions at the same column as the command's own rows.
TEST(HelpTest, SharedOptionRowsAppearOnceAtEachCommandsColumn) {
  for (const char* cmd : {"count", "schema", "show", "verify", "index", "pack", "repair", "reshard",
                          "status", "commit", "unmount"}) {
    SCOPED_TRACE(cmd);
    CommandResult help = Tool({cmd, "--help"});
    ASSERT_EQ(help.exit_code, 0);
    const size_t options = help.out.find("\nOptions:\n");
    ASSERT_NE(options, std::string::npos);
    const size_t end = help.out.find("\n\n", options + 1);
    const std::vector<std::string> lines =
        absl::StrSplit(help.out.substr(options + 10, end - options - 10), '\n', absl::SkipEmpty());
    std::set<size_t> columns;
    std::map<std::string, int> seen;
    for (size_t k = 0; k < lines.size(); ++k) {
      const std::string& line = lines[k];
      if (!absl::StartsWith(line, "  -")) continue;
      const size_t gap = line.find("  ", 2);
      seen[line.substr(2, gap == std::string::npos ? std::string::npos : gap - 2)]++;
      if (gap != std::string::npos) {
        columns.insert(line.find_first_not_of(' ', gap));
      } else if (k + 1 < lines.size()) {  // the flag alone: its text on the next line
        columns.insert(lines[k + 1].find_first_not_of(' '));
      }
    }
    EXPECT_EQ(columns.size(), 1u) << help.out;
    EXPECT_EQ(seen["-h, --help"], 1) << help.out;
    EXPECT_LE(seen["-q, --quiet"], 1) << help.out;
    const std::set<std::string> read_no_sources = {"pack", "status", "commit", "unmount"};
    const bool indexes = read_no_sources.count(cmd) == 0;
    EXPECT_EQ(seen["--max-shard-records N"], indexes ? 1 : 0) << help.out;
  }
}

// Rough edge of issue 34: the --help of count, schema, show, verify, repair
// and reshard and the man page listed the codecs of the shards they read
// as "plain, GZIP and ZLIB", without SNAPPY. Every such list ("plain,
// GZIP..." up to its ')' or ';') names every codec the readers take
// (source::Codec up to kMaxCodec, by its CodecName).
TEST(CodecListsTest, HelpAndManPageNameEveryCodecTheReadersTake) {
  std::vector<std::string> codecs;
  for (uint8_t c = 1; c <= source::kMaxCodec; ++c) {
    codecs.push_back(absl::AsciiStrToUpper(source::CodecName(static_cast<source::Codec>(c))));
  }
  // The lists in `text` (lines joined, blanks collapsed); the test fails
  // for one that leaves a codec out. Returns how many lists there were.
  auto check = [&](const std::string& what, const std::string& text) {
    std::string flat;
    for (char c : text) {
      const char ch = c == '\n' || c == '\t' ? ' ' : c;
      if (ch == ' ' && !flat.empty() && flat.back() == ' ') continue;
      flat.push_back(ch);
    }
    int lists = 0;
    for (size_t at = flat.find("plain, GZIP"); at != std::string::npos;
         at = flat.find("plain, GZIP", at + 1)) {
      const size_t end = flat.find_first_of(");", at);
      const std::string list = flat.substr(at, end == std::string::npos ? 80 : end - at);
      ++lists;
      for (const std::string& codec : codecs) {
        EXPECT_NE(list.find(codec), std::string::npos) << what << ": '" << list << "'";
      }
    }
    return lists;
  };
  for (const char* command : {"count", "schema", "show", "verify", "repair", "reshard"}) {
    const CommandResult help = Tool({command, "--help"});
    EXPECT_EQ(help.exit_code, 0) << command;
    EXPECT_EQ(check(absl::StrCat(command, " --help"), help.out), 1) << command << ":\n" << help.out;
  }
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  ASSERT_NE(root, nullptr);
  EXPECT_GE(
      check("docs/tfrecordfs.1.scd", ReadWholeFile(std::string(root) + "/docs/tfrecordfs.1.scd")),
      2);
}

}  // namespace
}  // namespace tfrecordfs::mount_test
