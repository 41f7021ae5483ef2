// The mount's options as --help, the man page and the shell completion
// list them: the same FUSE options and our own in all three (checked
// against the option table), and every FUSE option --help lists mounts.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "generated_dataset.h"
#include "gtest/gtest.h"
#include "mount_cli_util.h"
#include "mount_harness.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/writer.h"
#include "tfrecordfs/staging/layout.h"

namespace tfrecordfs::mount_test {
namespace {

// The FUSE and mount(8) options `tfrecordfs --help` lists (generated from
// the allow-list in src/cli/mount_options.cc): the indented lines under its two
// headings.
struct HelpMountOptions {
  std::vector<std::string> passed;   // "allow_other", "fsname=NAME", ...
  std::vector<std::string> ignored;  // "defaults", "x-*", ...
};

HelpMountOptions MountOptionsFromHelp() {
  HelpMountOptions out;
  CommandResult r = RunCommand({Bin(), "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(r.out);
  std::vector<std::string>* into = nullptr;
  for (std::string line; std::getline(in, line);) {
    if (line.find("FUSE and mount(8) options, passed on") != std::string::npos) {
      into = &out.passed;
    } else if (line.find("fstab and mount(8) words, accepted and ignored") != std::string::npos) {
      into = &out.ignored;
    } else if (line.find("Any other option") != std::string::npos) {
      into = nullptr;
    } else if (into != nullptr && line.rfind("       ", 0) == 0 && line.size() > 7 &&
               line[7] != ' ') {
      std::istringstream words(line);
      for (std::string w; words >> w;) into->push_back(w);
    }
  }
  return out;
}

// "fsname=NAME" -> "fsname=", "x-*" -> "x-": how the man page spells them.
std::string OptionStem(const std::string& word) {
  if (const size_t eq = word.find('='); eq != std::string::npos) return word.substr(0, eq + 1);
  if (word.ends_with("*")) return word.substr(0, word.size() - 1);
  return word;
}

TEST(CliTest, HelpListsTheFuseOptionsItAccepts) {
  if (Bin().empty()) GTEST_SKIP() << "TFRECORDFS_BIN is not set";
  const HelpMountOptions help = MountOptionsFromHelp();
  for (const char* want : {"allow_other", "allow_root", "default_permissions", "auto_unmount",
                           "noatime", "fsname=NAME", "subtype=NAME"}) {
    EXPECT_NE(std::find(help.passed.begin(), help.passed.end(), want), help.passed.end()) << want;
  }
  for (const char* want : {"defaults", "noauto", "_netdev", "nofail", "x-*", "comment=*"}) {
    EXPECT_NE(std::find(help.ignored.begin(), help.ignored.end(), want), help.ignored.end())
        << want;
  }
  for (const char* gone : {"relatime", "lazytime", "blksize=N", "max_read=N"}) {
    EXPECT_EQ(std::find(help.passed.begin(), help.passed.end(), gone), help.passed.end()) << gone;
  }
  CommandResult r = RunCommand({Bin(), "--help"});
  EXPECT_NE(r.out.find("Any other option, or a value that does not parse, exits 2"),
            std::string::npos)
      << r.out;
}

// Every FUSE option --help lists really mounts (libfuse 3.14 refused eight of
// the old list only after the index walk, with its own wording and exit 1),
// and the fstab words are accepted together.
TEST(CliTest, EveryFuseOptionInHelpMounts) {
  if (Bin().empty()) GTEST_SKIP() << "TFRECORDFS_BIN is not set";
  TFRFS_SKIP_WITHOUT_FUSE();
  const HelpMountOptions help = MountOptionsFromHelp();
  ASSERT_GE(help.passed.size(), 10u);
  TempDir tmp;
  const std::string src = tmp.Subdir("src");
  const GenDataset ds = WriteDataset(src, 2);
  const std::string expected = ds.Expected().at("one.tfrecord/0/label").content;
  const bool selinux = ::access("/sys/fs/selinux/enforce", F_OK) == 0;
  std::vector<std::string> options;
  for (const std::string& word : help.passed) {
    if (word.find("context=") != std::string::npos && !selinux) continue;  // man page: exit 1
    const size_t eq = word.find('=');
    options.push_back(eq == std::string::npos ? word : word.substr(0, eq + 1) + "tfrfs-test");
  }
  std::string ignored;
  for (const std::string& word : help.ignored) {
    if (!ignored.empty()) ignored += ",";
    ignored += word.ends_with("*") ? word.substr(0, word.size() - 1) + "test" : word;
  }
  options.push_back(ignored);
  for (const std::string& opt : options) {
    Mount m;
    ASSERT_EQ(m.Start({src}, {"-o", opt}), absl::OkStatus()) << "-o " << opt;
    EXPECT_EQ(ReadWholeFile(m.path("one.tfrecord/0/label")), expected) << "-o " << opt;
    std::string err;
    EXPECT_EQ(m.Stop(&err), 0) << "-o " << opt << ": " << err;
  }
}

// The man page's "FUSE and mount(8) options passed through" names exactly
// the options --help lists: its definition-list terms (lines that start
// with a bold word), bold words followed by "(" (page references) aside.
TEST(CliTest, ManPageListsTheSameFuseOptionsAsHelp) {
  if (Bin().empty()) GTEST_SKIP() << "TFRECORDFS_BIN is not set";
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  if (root == nullptr) GTEST_SKIP() << "TFRECORDFS_SOURCE_ROOT is not set";
  const std::string page = ReadWholeFile(std::string(root) + "/docs/tfrecordfs.1.scd");
  const size_t begin = page.find("## FUSE and mount(8) options passed through");
  ASSERT_NE(begin, std::string::npos);
  const size_t end = page.find("\n# ", begin);
  std::istringstream in(page.substr(begin, end - begin));
  std::set<std::string> in_man;
  const std::regex bold(R"(\*((?:\\.|[^*\s])+)\*(\(?))");
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] != '*') continue;
    for (std::sregex_iterator it(line.begin(), line.end(), bold), e; it != e; ++it) {
      if (!(*it)[2].str().empty()) continue;  // *fuse*(8)
      std::string word = (*it)[1].str();
      word.erase(std::remove(word.begin(), word.end(), '\\'), word.end());  // *\_netdev*
      in_man.insert(word);
    }
  }
  const HelpMountOptions help = MountOptionsFromHelp();
  std::set<std::string> in_help;
  for (const auto* list : {&help.passed, &help.ignored}) {
    for (const std::string& w : *list) in_help.insert(OptionStem(w));
  }
  std::string only_man, only_help;
  for (const std::string& w : in_man) {
    if (!in_help.contains(w)) only_man += " " + w;
  }
  for (const std::string& w : in_help) {
    if (!in_man.contains(w)) only_help += " " + w;
  }
  EXPECT_EQ(only_man, "") << "in docs/tfrecordfs.1.scd but not in `tfrecordfs --help`";
  EXPECT_EQ(only_help, "") << "in `tfrecordfs --help` but not in docs/tfrecordfs.1.scd";
  EXPECT_GE(in_help.size(), 20u);
}

// Our -o options, from --help (generated from the option table): the first
// word of each line indented 7 columns above the FUSE options, as
// "name=" or "name".
std::vector<std::string> OurOptionsFromHelp() {
  CommandResult r = RunCommand({Bin(), "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> out;
  std::istringstream in(r.out);
  bool in_list = false;
  for (std::string line; std::getline(in, line);) {
    if (line.find("-o OPT[,OPT...]") != std::string::npos) in_list = true;
    if (line.find("FUSE and mount(8) options, passed on") != std::string::npos) break;
    if (in_list && line.rfind("       ", 0) == 0 && line.size() > 7 && line[7] != ' ') {
      std::string word = line.substr(7, line.find(' ', 7) - 7);
      out.push_back(OptionStem(word));
    }
  }
  return out;
}

// The man page's "Options of tfrecordfs" names each option of the table
// once, and nothing else; --list-mount-options (what the bash completion
// offers) gives the same, then the FUSE options --help lists.
TEST(CliTest, OptionTableMatchesManPageAndCompletion) {
  if (Bin().empty()) GTEST_SKIP() << "TFRECORDFS_BIN is not set";
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  if (root == nullptr) GTEST_SKIP() << "TFRECORDFS_SOURCE_ROOT is not set";
  const std::vector<std::string> ours = OurOptionsFromHelp();
  ASSERT_GE(ours.size(), 25u);
  const std::string page = ReadWholeFile(std::string(root) + "/docs/tfrecordfs.1.scd");
  const size_t begin = page.find("## Options of tfrecordfs");
  ASSERT_NE(begin, std::string::npos);
  const size_t end = page.find("\n## ", begin + 1);
  std::istringstream in(page.substr(begin, end - begin));
  std::map<std::string, int> in_man;
  const std::regex term(R"(^\*([a-z_]+=?)\*)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, term)) ++in_man[m[1].str()];
  }
  std::set<std::string> in_help(ours.begin(), ours.end());
  EXPECT_EQ(in_help.size(), ours.size()) << "an option listed twice in --help";
  for (const auto& [name, count] : in_man) {
    EXPECT_EQ(count, 1) << name << " is described " << count << " times in the man page";
    EXPECT_TRUE(in_help.contains(name)) << name << ": in the man page, not in --help";
  }
  for (const std::string& name : ours) {
    EXPECT_TRUE(in_man.contains(name)) << name << ": in --help, not in the man page";
  }

  // The completion's list: sourced from the installed file, run as bash runs it.
  const std::string completion = std::string(root) + "/data/bash-completion/tfrecordfs";
  CommandResult comp = RunCommand(
      {"/bin/bash", "-c", "source \"$1\" && COMP_WORDS=(\"$2\") && _tfrecordfs_mount_options",
       "bash", completion, Bin()});
  ASSERT_EQ(comp.exit_code, 0) << comp.err;
  std::vector<std::string> offered;
  std::istringstream words(comp.out);
  for (std::string w; words >> w;) offered.push_back(w);
  std::vector<std::string> want = ours;
  for (const std::string& w : MountOptionsFromHelp().passed) want.push_back(OptionStem(w));
  EXPECT_EQ(offered, want);
  for (const char* gone : {"max_read=", "blksize=", "relatime"}) {
    EXPECT_EQ(std::find(offered.begin(), offered.end(), gone), offered.end()) << gone;
  }
}

// What the man page says about formats: GZIP/ZLIB shards are browsed, not
// shown as plain files (a mount shows them as shard folders:
// mount_compressed).
TEST(CliTest, ManPageSaysCompressedShardsAreBrowsed) {
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  if (root == nullptr) GTEST_SKIP() << "TFRECORDFS_SOURCE_ROOT is not set";
  const std::string page = ReadWholeFile(std::string(root) + "/docs/tfrecordfs.1.scd");
  const size_t desc = page.find("# DESCRIPTION");
  const std::string description = page.substr(desc, page.find("\n# ", desc + 1) - desc);
  EXPECT_NE(description.find("GZIP and ZLIB shards"), std::string::npos);
  EXPECT_NE(description.find("browsed like plain ones"), std::string::npos);
  EXPECT_EQ(description.find("compressed *.gz* shards"), std::string::npos)
      << "DESCRIPTION lists compressed shards among the files shown as they are";
  const size_t errors = page.find("# ERRORS");
  const std::string table = page.substr(errors, page.find("\n# ", errors + 1) - errors);
  EXPECT_EQ(table.find("compressed shards included"), std::string::npos)
      << "ERRORS says compressed shards are plain files";
  CommandResult help = RunCommand({Bin(), "--help"});
  EXPECT_NE(help.out.find("GZIP/ZLIB shards"), std::string::npos);
}

}  // namespace
}  // namespace tfrecordfs::mount_test
