// The command line and the daemon life cycle: exit codes, detaching only once
// the mount is ready, and `mount -t fuse.tfrecordfs` through mount.fuse3.
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
#include "mount_harness.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/writer.h"
#include "tfrecordfs/staging/layout.h"

namespace tfrecordfs::mount_test {
namespace {

// Keeps the staging store and pack output of a daemon the harness does not
// own inside `tmp` (see Mount::Start).
std::string IsolationOptions(const TempDir& tmp) {
  return "staging_dir=" + tmp.path() + "/store,output_dir=" + tmp.Subdir("out");
}

std::string Bin() { return BinaryPath(); }

std::string Dirname(const std::string& p) { return std::filesystem::path(p).parent_path(); }

TEST(CliTest, HelpAndVersionExitZero) {
  if (Bin().empty()) GTEST_SKIP() << "TFRECORDFS_BIN is not set";
  for (const char* flag : {"--help", "-h"}) {
    CommandResult r = RunCommand({Bin(), flag});
    EXPECT_EQ(r.exit_code, 0) << flag;
    EXPECT_NE(r.out.find("Usage: tfrecordfs"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("MOUNTPOINT"), std::string::npos);
  }
  for (const char* flag : {"--version", "-V"}) {
    CommandResult r = RunCommand({Bin(), flag});
    EXPECT_EQ(r.exit_code, 0) << flag;
    EXPECT_EQ(r.out.rfind("tfrecordfs ", 0), 0u) << r.out;
    EXPECT_GT(r.out.size(), std::string("tfrecordfs \n").size());
  }
}

TEST(CliTest, UsageErrorsExitTwo) {
  if (Bin().empty()) GTEST_SKIP() << "TFRECORDFS_BIN is not set";
  TempDir tmp;
  const std::string mnt = tmp.Subdir("mnt");
  for (const std::vector<std::string>& args : {std::vector<std::string>{Bin()},
                                               {Bin(), mnt},
                                               {Bin(), "-f"},
                                               {Bin(), "-o"},
                                               {Bin(), "--no-such-option", tmp.path(), mnt},
                                               {Bin(), "-o", "cache_records=0", tmp.path(), mnt},
                                               {Bin(), "-o", "index_threads=x", tmp.path(), mnt},
                                               {Bin(), "-o", "cache_mb=0", tmp.path(), mnt},
                                               {Bin(), "-o", "cache_mb=lots", tmp.path(), mnt}}) {
    CommandResult r = RunCommand(args);
    std::string joined;
    for (size_t i = 1; i < args.size(); ++i) joined += " " + args[i];
    EXPECT_EQ(r.exit_code, 2) << "tfrecordfs" << joined << "\nstderr: " << r.err;
    EXPECT_NE(r.err.find("tfrecordfs"), std::string::npos) << r.err;
    EXPECT_FALSE(IsMounted(mnt));
  }
}

TEST(CliTest, MissingSourceExitsOneNamingIt) {
  if (Bin().empty()) GTEST_SKIP() << "TFRECORDFS_BIN is not set";
  TempDir tmp;
  const std::string mnt = tmp.Subdir("mnt");
  const std::string missing = tmp.path() + "/no-such-source.tfrecord";
  for (bool foreground : {true, false}) {
    std::vector<std::string> args = {Bin()};
    if (foreground) args.push_back("-f");
    args.insert(args.end(), {"-o", IsolationOptions(tmp), missing, mnt});
    CommandResult r = RunCommand(args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
    EXPECT_FALSE(IsMounted(mnt));
  }
  // One good source and one missing: still an error, nothing mounted.
  TempDir data;
  WriteDataset(data.path(), 1);
  CommandResult r =
      RunCommand({Bin(), "-f", "-o", IsolationOptions(tmp), data.path(), missing, mnt});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
  EXPECT_FALSE(IsMounted(mnt));
}

TEST(CliTest, MissingMountpointExitsOne) {
  if (Bin().empty()) GTEST_SKIP() << "TFRECORDFS_BIN is not set";
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  WriteDataset(tmp.Subdir("src"), 3);
  const std::string mnt = tmp.path() + "/no-such-mountpoint";
  CommandResult r =
      RunCommand({Bin(), "-f", "-o", IsolationOptions(tmp), tmp.path() + "/src", mnt});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(mnt), std::string::npos) << r.err;
}

// Typos are ours to report, naming the option, before any shard is read or
// anything is created (libfuse's wording and exit 1 came only after the
// whole index walk).
TEST(CliTest, UnknownOptionsAndBadValuesExitTwoNamingThem) {
  if (Bin().empty()) GTEST_SKIP() << "TFRECORDFS_BIN is not set";
  TempDir tmp;
  const std::string mnt = tmp.Subdir("mnt");
  const std::string store = tmp.path() + "/store";
  WriteDataset(tmp.Subdir("src"), 2);
  for (const auto& [opt, named] : std::vector<std::pair<std::string, std::string>>{
           {"cache_mbb=5", "cache_mbb"},
           {"readonly", "readonly"},
           {"max_read=x", "max_read"},
           {"cache_mb", "cache_mb"},
           {"staging_dir=", "staging_dir"},
           {"fsname", "fsname"},
           {"ro,allow_other,bogus", "bogus"},
           // Refused by libfuse 3.14 or the kernel, so not on our list
           // (they used to fail the mount after the index walk, exit 1).
           {"relatime", "relatime"},
           {"nolazytime", "nolazytime"},
           {"blksize=4096", "blksize"},
           {"max_read=131072", "max_read"}}) {
    CommandResult r = RunCommand(
        {Bin(), "-f", "-o", "staging_dir=" + store, "-o", opt, tmp.path() + "/src", mnt});
    EXPECT_EQ(r.exit_code, 2) << opt << "\nstderr: " << r.err;
    EXPECT_NE(r.err.find(named), std::string::npos) << opt << "\nstderr: " << r.err;
    EXPECT_EQ(r.err.find("fuse:"), std::string::npos) << "libfuse's wording: " << r.err;
    EXPECT_FALSE(std::filesystem::exists(store)) << opt << " created the staging store";
    EXPECT_FALSE(IsMounted(mnt));
  }
}

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

// A regular file, a dead or live mount of ours: refused before indexing,
// exit 1, and nothing created.
TEST(CliTest, BadMountpointsAreRefused) {
  if (Bin().empty()) GTEST_SKIP() << "TFRECORDFS_BIN is not set";
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  const std::string src = tmp.Subdir("src");
  WriteDataset(src, 2);
  const std::string store = tmp.path() + "/store";
  const std::string file = tmp.path() + "/file";
  WriteWholeFile(file, "x");
  CommandResult r = RunCommand({Bin(), "-f", "-o", "staging_dir=" + store, src, file});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("not a directory"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("indexed"), std::string::npos) << "indexed before checking: " << r.err;
  EXPECT_FALSE(std::filesystem::exists(store));
  EXPECT_FALSE(IsMounted(file));

  // Mounting again on a live mount of ours (same source, or another one).
  Mount m;
  ASSERT_EQ(m.Start({src}), absl::OkStatus());
  for (const std::string& source : {src, tmp.Subdir("other")}) {
    CommandResult again = RunCommand({Bin(), "-o", "ro", source, m.mountpoint()});
    EXPECT_EQ(again.exit_code, 1) << again.err;
    EXPECT_NE(again.err.find("already mounted"), std::string::npos) << again.err;
    EXPECT_EQ(FindDaemons(m.mountpoint()).size(), 1u) << "a second daemon stacked on the mount";
  }
  std::string err;
  EXPECT_EQ(m.Stop(&err), 0) << err;
}

// A mount that fails leaves nothing behind: no default staging store under
// $XDG_STATE_HOME for a missing source.
TEST(CliTest, FailedMountCreatesNothing) {
  if (Bin().empty()) GTEST_SKIP() << "TFRECORDFS_BIN is not set";
  TempDir tmp;
  const std::string mnt = tmp.Subdir("mnt");
  const std::string state = tmp.Subdir("state");
  const char* old = std::getenv("XDG_STATE_HOME");
  const std::string saved = old ? old : "";
  ::setenv("XDG_STATE_HOME", state.c_str(), 1);
  CommandResult r = RunCommand({Bin(), "-f", tmp.path() + "/missing", mnt});
  ::setenv("XDG_STATE_HOME", saved.c_str(), 1);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(std::filesystem::is_empty(state)) << "a failed mount created its staging store";
}

// The test binaries never see the real home directory (mount_harness.cc).
TEST(CliTest, TestsRunWithAPrivateHome) {
  const char* home = std::getenv("HOME");
  ASSERT_NE(home, nullptr);
  for (const char* var : {"XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR"}) {
    const char* v = std::getenv(var);
    ASSERT_NE(v, nullptr) << var;
    EXPECT_EQ(std::string(v).rfind(std::filesystem::path(home).parent_path().string(), 0), 0u)
        << var << "=" << v << " is outside the private home " << home;
  }
  EXPECT_NE(std::string(home), "/root");
  EXPECT_NE(std::string(home).find("tfrfs-mount-"), std::string::npos) << home;
}

// Any number of -o ro mounts of one source beside one read-write mount; the
// read-only ones show what is staged, never lock or write the store, and
// their unmount says only what happened. Loose files in staging/ are named
// by the read-write unmount.
TEST(CliTest, ReadOnlyMountsShareTheStagingStore) {
  if (Bin().empty()) GTEST_SKIP() << "TFRECORDFS_BIN is not set";
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  const std::string src = tmp.Subdir("src");
  WriteDataset(src, 2);
  const std::string opts = IsolationOptions(tmp);
  const std::string rw = tmp.Subdir("rw"), ro1 = tmp.Subdir("ro1"), ro2 = tmp.Subdir("ro2");
  DetachedGuard g1(rw), g2(ro1), g3(ro2);

  // A read-only mount with no store yet: no staging folder, no store made.
  CommandResult r = RunCommand({Bin(), "-o", "ro," + opts, src, ro1});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(ro1 + "/staging"));
  EXPECT_FALSE(std::filesystem::exists(tmp.path() + "/store"));
  CommandResult u = RunCommand({Bin(), "unmount", ro1});
  EXPECT_EQ(u.exit_code, 0) << u.err;
  EXPECT_EQ(u.out, "result: ok\nread-only mount: nothing packed\n");
  EXPECT_EQ(u.err, "");
  EXPECT_TRUE(DaemonGone(ro1));

  r = RunCommand({Bin(), "-o", opts, src, rw});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(::mkdir((rw + "/staging/new").c_str(), 0755), 0);
  WriteWholeFile(rw + "/staging/new/label", "7\n");
  WriteWholeFile(rw + "/staging/loose", "1\n");
  for (const std::string& ro : {ro1, ro2}) {
    r = RunCommand({Bin(), "-o", "ro," + opts, src, ro});
    ASSERT_EQ(r.exit_code, 0) << ro << ": " << r.err;
    EXPECT_EQ(ReadWholeFile(ro + "/staging/new/label"), "7\n");
  }
  for (const std::string& ro : {ro1, ro2}) {
    u = RunCommand({Bin(), "unmount", ro});
    EXPECT_EQ(u.exit_code, 0) << u.err;
    EXPECT_EQ(u.out, "result: ok\nread-only mount: nothing packed\n");
    EXPECT_EQ(u.err, "") << "a read-only unmount waits for no repack";
    EXPECT_TRUE(DaemonGone(ro));
  }
  u = RunCommand({Bin(), "unmount", rw});
  EXPECT_EQ(u.exit_code, 1) << u.out << u.err;  // the loose file stayed
  EXPECT_NE(u.out.find("packed 1 record into 1 shard"), std::string::npos) << u.out;
  EXPECT_NE(u.out.find("loose: not in a record folder"), std::string::npos) << u.out;
  EXPECT_TRUE(DaemonGone(rw));
}

// `meson install --destdir` puts the binary, its man page and the bash
// completion in the prefix, and mount(8) with type fuse.tfrecordfs runs that
// prefix's binary from PATH (through mount.fuse3).
TEST(InstallTest, InstalledBinaryMountsWithMountTypeFuseTfrecordfs) {
  TFRFS_SKIP_WITHOUT_FUSE();
  const char* build_root = std::getenv("TFRECORDFS_BUILD_ROOT");
  if (build_root == nullptr) GTEST_SKIP() << "TFRECORDFS_BUILD_ROOT is not set";
  if (RunCommand({"meson", "--version"}).exit_code != 0) {
    GTEST_SKIP() << "meson is not in PATH at test time: cannot test `meson install`";
  }
  if (::geteuid() != 0) GTEST_SKIP() << "mount -t fuse.tfrecordfs without fstab needs root";
  TempDir tmp;
  const std::string dest = tmp.path() + "/dest";
  CommandResult inst = RunCommand(
      {"meson", "install", "-C", build_root, "--no-rebuild", "--quiet", "--destdir", dest});
  ASSERT_EQ(inst.exit_code, 0) << inst.out << inst.err;
  CommandResult prefix = RunCommand(
      {"meson", "introspect", build_root, "--buildoptions"});  // JSON; find the prefix value
  std::string pre = "/usr/local";
  if (size_t at = prefix.out.find("\"name\": \"prefix\""); at != std::string::npos) {
    const size_t v = prefix.out.find("\"value\": \"", at);
    if (v != std::string::npos) {
      const size_t b = v + 10, e = prefix.out.find('"', b);
      pre = prefix.out.substr(b, e - b);
    }
  }
  const std::string bin = dest + pre + "/bin/tfrecordfs";
  ASSERT_EQ(::access(bin.c_str(), X_OK), 0) << bin;
  bool man = false, completion = false;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dest + pre)) {
    const std::string p = e.path().string();
    man |= p.ends_with("/man1/tfrecordfs.1");
    completion |= p.ends_with("/completions/tfrecordfs");
  }
  EXPECT_TRUE(man) << "no man1/tfrecordfs.1 under " << dest + pre << " (is scdoc installed?)";
  EXPECT_TRUE(completion) << "no bash completion under " << dest + pre;

  // mount(8) hands its helpers a fixed PATH (/usr/local/sbin:/usr/local/bin:
  // /usr/sbin:/usr/bin:/sbin:/bin), whatever ours is: the prefix's bin must
  // be on it, and the installed binary is made the one found there by
  // bind-mounting it over PREFIX/bin in a private mount namespace.
  ASSERT_TRUE(pre == "/usr/local" || pre == "/usr")
      << "prefix " << pre << ": mount -t fuse.tfrecordfs will not find " << pre
      << "/bin/tfrecordfs";
  if (RunCommand({"unshare", "--version"}).exit_code != 0) GTEST_SKIP() << "no unshare(1)";
  const std::string src = tmp.Subdir("src");
  const GenDataset ds = WriteDataset(src, 6);
  const std::string mnt = std::filesystem::canonical(tmp.Subdir("mnt")).string();
  const std::string script =
      "set -e; mount --bind " + ShellQuote(Dirname(bin)) + " " + pre + "/bin; " +
      "mount -t fuse.tfrecordfs -o ro," + ShellQuote(IsolationOptions(tmp)) + " " +
      ShellQuote(src) + " " + ShellQuote(mnt) + "; " + "cat " +
      ShellQuote(mnt + "/one.tfrecord/0/label") + "; " + "pid=$(pgrep -f -n -- " +
      ShellQuote("tfrecordfs .*" + mnt) + "); " + "echo exe=$(stat -L -c %d:%i /proc/$pid/exe); " +
      "umount " + ShellQuote(mnt) + "; " + "while kill -0 $pid 2>/dev/null; do sleep 0.05; done";
  CommandResult r = RunCommand({"unshare", "-m", "--propagation", "private", "sh", "-c", script});
  ASSERT_EQ(r.exit_code, 0) << "stdout: " << r.out << "\nstderr: " << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find("exe=")), ds.Expected().at("one.tfrecord/0/label").content);
  struct stat st;
  ASSERT_EQ(::stat(bin.c_str(), &st), 0);
  EXPECT_NE(r.out.find("exe=" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino)),
            std::string::npos)
      << "mount.fuse3 ran another tfrecordfs than the installed one: " << r.out;
}

// The mount records `tfrecordfs unmount` reads ($XDG_RUNTIME_DIR/tfrecordfs,
// one file per mount point), as name -> contents.
std::map<std::string, std::string> MountRecords() {
  std::map<std::string, std::string> out;
  const std::string dir = std::string(std::getenv("XDG_RUNTIME_DIR")) + "/tfrecordfs";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".mount") out[e.path().string()] = ReadWholeFile(e.path().string());
  }
  return out;
}

// Without -f the command returns only once the mount serves requests and
// its record is written: a stat and `tfrecordfs unmount` right after it
// returns must succeed, with no polling in between.
// An unmount that waits long (a daemon releasing millions of cached files)
// says on a terminal what it waits for, and how long it took; a script's
// output stays as it was. The daemon is made slow to exit by a test hook.
TEST(DaemonTest, SlowUnmountSaysWhatItWaitsForOnATerminal) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (RunCommand({"sh", "-c", "command -v script"}).exit_code != 0) {
    GTEST_SKIP() << "no script(1) (util-linux) to give unmount a terminal";
  }
  TempDir tmp;
  const GenDataset ds = WriteDataset(tmp.Subdir("src"), 5);
  for (const bool terminal : {true, false}) {
    const std::string mnt =
        std::filesystem::canonical(tmp.Subdir(terminal ? "mnt-tty" : "mnt-pipe")).string();
    DetachedGuard guard(mnt);
    CommandResult r = RunCommand({"env", "TFRECORDFS_FAULT=slow_exit", Bin(), "-o",
                                  IsolationOptions(tmp) + ",ro", ds.root, mnt});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string unmount = ShellQuote(Bin()) + " unmount " + ShellQuote(mnt);
    CommandResult u = terminal ? RunCommand({"script", "-qec", unmount, "/dev/null"})
                               : RunCommand({"sh", "-c", unmount});
    ASSERT_EQ(u.exit_code, 0) << u.out << u.err;
    const std::string said = u.out + u.err;
    const bool waited = said.find("waiting for the daemon") != std::string::npos &&
                        said.find("to exit: done in") != std::string::npos;
    EXPECT_EQ(waited, terminal) << said;
    EXPECT_NE(said.find("nothing packed"), std::string::npos) << said;
    EXPECT_TRUE(DaemonGone(mnt));
  }
}

TEST(DaemonTest, DetachesOnlyOnceTheMountIsReady) {
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  const GenDataset ds = WriteDataset(tmp.Subdir("src"), 5);
  const std::string mnt = std::filesystem::canonical(tmp.Subdir("mnt")).string();
  DetachedGuard guard(mnt);
  const std::string rel = "train-00001-of-00002/042/image/encoded.jpg";

  CommandResult r = RunCommand({Bin(), "-o", IsolationOptions(tmp), ds.root, mnt});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t records = 0;
  for (const auto& [path, text] : MountRecords()) {
    records += text.find("mountpoint=" + mnt + "\n") != std::string::npos;
  }
  EXPECT_EQ(records, 1u) << "the launching process returned before the mount's record was written";
  struct stat st;
  ASSERT_EQ(::stat((mnt + "/" + rel).c_str(), &st), 0) << std::strerror(errno);
  EXPECT_TRUE(IsMounted(mnt, "fuse.tfrecordfs"));
  const ExpectedTree expected = ds.Expected();
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), expected.at(rel).content.size());
  EXPECT_EQ(ReadWholeFile(mnt + "/" + rel), expected.at(rel).content);

  // One detached daemon serves the mount; the launching process is gone.
  const std::vector<pid_t> daemons = FindDaemons(mnt);
  EXPECT_EQ(daemons.size(), 1u);

  CommandResult u = RunCommand({"fusermount3", "-u", mnt});
  ASSERT_EQ(u.exit_code, 0) << u.err;
  EXPECT_TRUE(DaemonGone(mnt)) << "the daemon did not exit after fusermount3 -u";
  EXPECT_EQ(::stat((mnt + "/" + rel).c_str(), &st), -1);
}

// A foreground daemon (-f) writes its mount record just after the mount
// appears, so a script that waited for the mount point can ask for the
// unmount in between: `tfrecordfs unmount` then waits for the record while
// the path is a live tfrecordfs mount, instead of calling it no mount. The
// window is made wide here by taking the record away for 300 ms.
TEST(DaemonTest, UnmountWaitsForAForegroundMountsRecord) {
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  const GenDataset ds = WriteDataset(tmp.Subdir("src"), 6);
  const std::string mnt = std::filesystem::canonical(tmp.Subdir("mnt")).string();
  DetachedGuard guard(mnt);
  // Started from a shell that exits, so the daemon is no child of the test
  // (`unmount` waits for its pid to go, which a zombie never does).
  ASSERT_EQ(Shell(ShellQuote(Bin()) + " -f -o " + ShellQuote("ro," + IsolationOptions(tmp)) + " " +
                  ShellQuote(ds.root) + " " + ShellQuote(mnt) + " >" +
                  ShellQuote(tmp.path() + "/daemon.log") + " 2>&1 &")
                .exit_code,
            0);
  std::string record_path, record_text;
  ASSERT_TRUE(WaitUntil([&] {
    for (const auto& [path, text] : MountRecords()) {
      if (text.find("mountpoint=" + mnt + "\n") != std::string::npos) {
        record_path = path;
        record_text = text;
      }
    }
    return !record_path.empty();
  })) << "no mount record; daemon log:\n"
      << ReadWholeFile(tmp.path() + "/daemon.log");
  ASSERT_EQ(::unlink(record_path.c_str()), 0);
  std::thread restore([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    WriteWholeFile(record_path, record_text);
  });
  CommandResult u = RunCommand({Bin(), "unmount", mnt});
  restore.join();
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  EXPECT_EQ(u.out, "result: ok\nread-only mount: nothing packed\n");
  EXPECT_TRUE(DaemonGone(mnt));

  // A path that is no mount at all is still refused at once.
  u = RunCommand({Bin(), "unmount", mnt});
  EXPECT_EQ(u.exit_code, 1);
  EXPECT_NE(u.err.find("is not a tfrecordfs mount"), std::string::npos) << u.err;
}

// Issue 15, item 1: `cd dir && tfrecordfs src mnt` with every path relative.
// The detached daemon runs in "/", so a path kept relative would name
// nothing there: plain files (opened on read), the staging store and the
// pack output (used after unmount) must all have been made absolute.
TEST(DaemonTest, RelativePathsWorkAfterDetaching) {
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  const GenDataset ds = WriteDataset(tmp.Subdir("src"), 3);
  tmp.Subdir("mnt");
  tmp.Subdir("out");
  const std::string mnt = std::filesystem::canonical(tmp.path() + "/mnt").string();
  DetachedGuard guard(mnt);
  const std::string in_tmp = "cd " + ShellQuote(tmp.path()) + " && ";
  CommandResult r =
      Shell(in_tmp + ShellQuote(Bin()) + " -o staging_dir=store,output_dir=out src mnt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const ExpectedTree expected = ds.Expected();
  // A plain file is opened by its source path only when read.
  for (const std::string rel : {"dataset_info.json", "train-00000-of-00002/03/record.bin"}) {
    EXPECT_EQ(ReadWholeFile(mnt + "/" + rel), expected.at(rel).content) << rel;
  }
  // A staged record is packed after unmount, from the store into out/.
  CommandResult st = Shell(in_tmp + "mkdir mnt/staging/r && echo 7 > mnt/staging/r/label");
  ASSERT_EQ(st.exit_code, 0) << st.err;
  CommandResult u = Shell(in_tmp + ShellQuote(Bin()) + " unmount mnt");
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  EXPECT_TRUE(DaemonGone(mnt));
  size_t shards = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path() + "/out")) {
    shards += e.path().extension() == ".tfrecord";
  }
  EXPECT_EQ(shards, 1u) << "the staged record was not packed into out/: " << u.out << u.err;
  EXPECT_FALSE(std::filesystem::exists(staging::RecordsDir(tmp.path() + "/store") + "/r"));
  // Nothing was created relative to "/" by the daemon.
  EXPECT_FALSE(std::filesystem::exists("/store"));
  EXPECT_FALSE(std::filesystem::exists("/out"));
}

// A shard of `n` Examples (int64 `n`, text `name`); record `damaged`'s data
// has one bit flipped, so its data CRC fails. *offsets gets each record's
// byte offset.
std::string DamagedShard(int n, int damaged, std::vector<uint64_t>* offsets) {
  std::string bytes;
  std::vector<std::string> texts;
  for (int r = 0; r < n; ++r) texts.push_back("record " + std::to_string(r));
  for (int r = 0; r < n; ++r) {
    example::FeatureTable t;
    example::Feature name, num;
    name.name = "name";
    name.kind = example::Kind::kBytes;
    name.bytes.push_back(texts[r]);
    num.name = "n";
    num.kind = example::Kind::kInt64;
    num.int64s = {r};
    t.features = {num, name};  // sorted by name
    offsets->push_back(bytes.size());
    record::AppendFramed(&bytes, example::EncodeExample(t));
  }
  bytes[(*offsets)[damaged] + record::kHeaderSize + 2] ^= 0x10;
  return bytes;
}

std::string GetXattr(const std::string& path, const std::string& name) {
  char buf[4096];
  const ssize_t n = ::getxattr(path.c_str(), name.c_str(), buf, sizeof buf);
  if (n < 0) return std::string("errno ") + std::strerror(errno);
  return std::string(buf, static_cast<size_t>(n));
}

// Issue 11: a detached daemon (no -f) logs to a file under the private
// $XDG_STATE_HOME: a damaged record read through the mount fails with EIO,
// its reason is in that file and in the record folder's xattrs, and
// `tfrecordfs unmount` names the file. Xattrs are read with getxattr(2) and,
// where installed (scripts/setup installs `attr`), with getfattr -d.
TEST(DaemonTest, DetachedDaemonLogsToAFileThatUnmountNames) {
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  std::vector<uint64_t> offsets;
  WriteWholeFile(tmp.Subdir("src") + "/bad.tfrecord", DamagedShard(4, 2, &offsets));
  const std::string mnt = std::filesystem::canonical(tmp.Subdir("mnt")).string();
  DetachedGuard guard(mnt);
  CommandResult r = RunCommand({Bin(), "-o", IsolationOptions(tmp), tmp.path() + "/src", mnt});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  // Xattrs of an intact record and its files.
  const std::string rec1 = mnt + "/bad.tfrecord/1";
  EXPECT_EQ(GetXattr(rec1, "user.tfrecordfs.record"), "1");
  EXPECT_EQ(GetXattr(rec1, "user.tfrecordfs.offset"), std::to_string(offsets[1]));
  EXPECT_EQ(GetXattr(rec1, "user.tfrecordfs.length"),
            std::to_string(offsets[2] - offsets[1] - record::kFramingOverhead));
  EXPECT_EQ(GetXattr(rec1, "user.tfrecordfs.shard"), tmp.path() + "/src/bad.tfrecord");
  EXPECT_EQ(GetXattr(rec1 + "/n", "user.tfrecordfs.kind"), "int64");
  EXPECT_EQ(GetXattr(rec1 + "/name.txt", "user.tfrecordfs.feature"), "name");
  EXPECT_EQ(GetXattr(rec1 + "/name.txt", "user.tfrecordfs.kind"), "text");
  EXPECT_EQ(GetXattr(rec1, "user.nothing"), std::string("errno ") + std::strerror(ENODATA));
  EXPECT_EQ(::setxattr(rec1.c_str(), "user.x", "1", 1, 0), -1);
  EXPECT_EQ(errno, EPERM);
  if (::access("/usr/bin/getfattr", X_OK) == 0) {
    CommandResult g = RunCommand({"getfattr", "-d", rec1 + "/name.txt"});
    EXPECT_EQ(g.exit_code, 0) << g.err;
    EXPECT_NE(g.out.find("user.tfrecordfs.feature=\"name\""), std::string::npos) << g.out;
    EXPECT_NE(g.out.find("user.tfrecordfs.kind=\"text\""), std::string::npos) << g.out;
  }

  // The damaged record: EIO, then its reason as an xattr.
  const std::string rec2 = mnt + "/bad.tfrecord/2";
  struct stat st;
  EXPECT_EQ(::stat((rec2 + "/n").c_str(), &st), -1);
  EXPECT_EQ(errno, EIO);
  const std::string reason = GetXattr(rec2, "user.tfrecordfs.error");
  EXPECT_NE(reason.find("record 2 at byte offset " + std::to_string(offsets[2])), std::string::npos)
      << reason;

  CommandResult u = RunCommand({Bin(), "unmount", mnt});
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  EXPECT_TRUE(DaemonGone(mnt));
  // The log file: the default place, named after the mount point, holding
  // the mount point and the EIO's reason; unmount's output names it.
  const char* state = std::getenv("XDG_STATE_HOME");
  ASSERT_NE(state, nullptr);
  std::string log_path;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(state) + "/tfrecordfs/log")) {
    if (ReadWholeFile(e.path()).find(" on " + mnt + " (pid") != std::string::npos)
      log_path = e.path();
  }
  ASSERT_FALSE(log_path.empty()) << "no log file names " << mnt;
  const std::string log = ReadWholeFile(log_path);
  EXPECT_NE(log.find("error: " + reason), std::string::npos) << log;
  EXPECT_NE(u.err.find(log_path), std::string::npos) << "unmount did not name the log: " << u.err;
  EXPECT_NE(u.err.find("1 error(s)"), std::string::npos) << u.err;
}

// -o log=PATH: the daemon logs there; an unmount after nothing went wrong (the
// damaged record is never read) says nothing about it.
TEST(DaemonTest, LogOptionNamesTheFile) {
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  std::vector<uint64_t> offsets;
  WriteWholeFile(tmp.Subdir("src") + "/bad.tfrecord", DamagedShard(3, 1, &offsets));
  const std::string mnt = std::filesystem::canonical(tmp.Subdir("mnt")).string();
  const std::string log_path = tmp.path() + "/logs/mount.log";
  DetachedGuard guard(mnt);
  CommandResult r = RunCommand(
      {Bin(), "-o", IsolationOptions(tmp) + ",log=" + log_path, tmp.path() + "/src", mnt});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadWholeFile(mnt + "/bad.tfrecord/0/n"), "0\n");
  CommandResult u = RunCommand({Bin(), "unmount", mnt});
  EXPECT_EQ(u.exit_code, 0) << u.out << u.err;
  EXPECT_EQ(u.err.find(log_path), std::string::npos)
      << "nothing went wrong, yet unmount pointed at the log: " << u.err;
  EXPECT_TRUE(DaemonGone(mnt));
  EXPECT_NE(ReadWholeFile(log_path).find(" on " + mnt + " (pid"), std::string::npos);
}

// fstab style: mount(8) -> mount.fuse3 -> `/bin/sh -c 'tfrecordfs' SOURCE MNT
// -o OPTS`. mount.fuse3 finds the program by the type's subtype name in PATH.
// util-linux mount(8) removes PATH from the helper's environment (the shell
// then searches its default system PATH), so a freshly built binary cannot be
// found through `mount -t fuse.tfrecordfs` without installing it. Hence two
// tests: mount.fuse3 itself with the build's binary first in PATH, and
// mount(8) with mount.fuse3's `PROGRAM#SOURCE` form naming the binary.
class FstabTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TFRFS_SKIP_WITHOUT_FUSE();
    for (const char* p : {"/sbin/mount.fuse3", "/usr/sbin/mount.fuse3", "/usr/bin/mount.fuse3"}) {
      if (::access(p, X_OK) == 0) helper_ = p;
    }
    if (helper_.empty()) GTEST_SKIP() << "mount.fuse3 is not installed (package fuse3)";
    const bool have_mount =
        ::access("/bin/mount", X_OK) == 0 || ::access("/usr/bin/mount", X_OK) == 0;
    if (!have_mount) GTEST_SKIP() << "mount(8) is not installed";
    if (::geteuid() != 0)
      GTEST_SKIP() << "mounting through mount.fuse3 without an fstab entry needs root";
    ds_ = WriteDataset(tmp_.Subdir("src"), 6);
    mnt_ = std::filesystem::canonical(tmp_.Subdir("mnt")).string();
    bindir_ = tmp_.Subdir("bin");
    ASSERT_EQ(::symlink(Bin().c_str(), (bindir_ + "/tfrecordfs").c_str()), 0)
        << std::strerror(errno);
    guard_ = std::make_unique<DetachedGuard>(mnt_);
  }

  // Checks a few files, then unmounts with umount(8) and waits for the
  // daemon to exit.
  void CheckAndUnmount() {
    ASSERT_TRUE(IsMounted(mnt_, "fuse.tfrecordfs"));
    const ExpectedTree expected = ds_.Expected();
    for (const std::string rel :
         {"one.tfrecord/0/label", "dataset_info.json", "train-00000-of-00002/03/record.bin"}) {
      EXPECT_EQ(ReadWholeFile(mnt_ + "/" + rel), expected.at(rel).content) << rel;
    }
    EXPECT_EQ(FindDaemons(mnt_).size(), 1u);
    CommandResult u = RunCommand({"umount", mnt_});
    ASSERT_EQ(u.exit_code, 0) << u.err;
    EXPECT_TRUE(DaemonGone(mnt_)) << "the daemon did not exit after umount";
  }

  TempDir tmp_;
  GenDataset ds_;
  std::string helper_, mnt_, bindir_;
  std::unique_ptr<DetachedGuard> guard_;
};

TEST_F(FstabTest, MountFuse3RunsTfrecordfsFoundInPath) {
  const char* path = std::getenv("PATH");
  const std::string new_path = bindir_ + ":" + (path ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
  // Exactly what mount(8) runs for `SOURCE MNT fuse.tfrecordfs OPTS` in fstab.
  CommandResult r = RunCommand({helper_, ds_.root, mnt_, "-t", "tfrecordfs", "-o",
                                "rw,nosuid,nodev," + IsolationOptions(tmp_)},
                               new_path);
  ASSERT_EQ(r.exit_code, 0) << "stdout: " << r.out << "\nstderr: " << r.err;
  CheckAndUnmount();
}

TEST_F(FstabTest, MountCommandWithTypeFuse) {
  CommandResult r = RunCommand({"mount", "-t", "fuse", "-o", IsolationOptions(tmp_),
                                bindir_ + "/tfrecordfs#" + ds_.root, mnt_});
  ASSERT_EQ(r.exit_code, 0) << "stdout: " << r.out << "\nstderr: " << r.err;
  CheckAndUnmount();
}

// A shard of one record, {v: int64 [7]}, at `path`.
void WriteOneRecordShard(const std::string& path) {
  example::FeatureTable table;
  example::Feature f;
  f.name = "v";
  f.kind = example::Kind::kInt64;
  f.int64s = {7};
  table.features.push_back(f);
  std::string shard;
  record::AppendFramed(&shard, example::EncodeExample(table));
  WriteWholeFile(path, shard);
}

// Rough edge of issue 34: a user who may not open /dev/fuse got "cannot
// mount on MNT (is it an existing directory you may mount on?)", a guess;
// libfuse's reason went to the daemon's stderr only, never into its log
// file. Now the error itself names the cause, on the terminal and in the
// log. /dev/fuse is made unopenable for nobody in a private mount
// namespace of the test's own (a 0600 file bound over it), so nothing else
// on the machine sees it.
TEST(CliTest, MountFailingToOpenDevFuseSaysSo) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (::geteuid() != 0) GTEST_SKIP() << "acting as another user needs root";
  if (::access("/usr/bin/unshare", X_OK) != 0 || ::access("/usr/bin/setpriv", X_OK) != 0) {
    GTEST_SKIP() << "needs unshare(1) and setpriv(1)";
  }
  TempDir tmp;
  const std::string dir = tmp.path();
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  const std::string src = tmp.Subdir("src"), mnt = tmp.Subdir("mnt"), home = tmp.Subdir("home");
  ASSERT_EQ(::chown(mnt.c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chown(home.c_str(), 65534, 65534), 0);
  WriteOneRecordShard(src + "/data.tfrecord");
  ASSERT_EQ(::chmod((src + "/data.tfrecord").c_str(), 0644), 0);
  WriteWholeFile(dir + "/nofuse", "");
  ASSERT_EQ(::chmod((dir + "/nofuse").c_str(), 0600), 0);
  const std::string log = home + "/mount.log";
  const std::string script = absl::StrCat(
      "mount --bind ", ShellQuote(dir + "/nofuse"), " /dev/fuse || exit 99\n",
      "exec setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=", ShellQuote(home),
      " XDG_CACHE_HOME=", ShellQuote(home + "/cache"),
      " XDG_STATE_HOME=", ShellQuote(home + "/state"), " ", ShellQuote(BinaryPath()),
      " -o log=", ShellQuote(log), " ", ShellQuote(src), " ", ShellQuote(mnt), "\n");
  const CommandResult r =
      RunCommand({"/usr/bin/unshare", "-m", "--propagation", "private", "sh", "-c", script});
  ASSERT_NE(r.exit_code, 99) << "cannot bind over /dev/fuse: " << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::string want =
      "cannot mount on " + mnt + ": failed to open /dev/fuse: Permission denied";
  EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
  EXPECT_NE(ReadWholeFile(log).find(want), std::string::npos) << ReadWholeFile(log);
}

// Rough edge of issue 34, one rule for output directories: `pack`,
// `repair` and `reshard` create a missing one, and so does the unmount's
// pack for -o output_dir (it failed: "output directory ...: No such file or
// directory", the staged record kept). Staged with bash, read back by the
// independent reader (tests/cli/tfrecord_check.py).
TEST(CliTest, UnmountPacksIntoAMissingOutputDir) {
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  const std::string src = tmp.Subdir("src");
  WriteOneRecordShard(src + "/data.tfrecord");
  const std::string out = tmp.path() + "/new/out";
  MountConfig config;
  config.sources = {src};
  config.options = {"staging_dir=" + tmp.path() + "/store", "output_dir=" + out, "prefix=p"};
  Mount m(config);
  ASSERT_EQ(m.Start(), absl::OkStatus());
  const CommandResult staged = Shell("mkdir " + ShellQuote(m.path("staging/r1")) + " && echo 5 > " +
                                     ShellQuote(m.path("staging/r1/v")));
  ASSERT_EQ(staged.exit_code, 0) << staged.err;
  int status = 0;
  const CommandResult un = m.TfrUnmount(&status);
  EXPECT_EQ(un.exit_code, 0) << un.out << un.err;
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  ASSERT_NE(root, nullptr);
  const CommandResult read = RunCommand(
      {"/usr/bin/python3", "-c",
       absl::StrCat("import sys; sys.path.insert(0, '", root,
                    "/tests/cli'); import tfrecord_check as t\n"
                    "for p in t.read_records(sys.argv[1]): print(t.describe_example(p))\n"),
       out + "/p-00000-of-00001.tfrecord"});
  EXPECT_EQ(read.exit_code, 0) << read.err;
  EXPECT_EQ(read.out, "v:int64:5\n");
}

}  // namespace
// Issue 36: -o max_background=N reaches the kernel's connection (read
// back from /sys/fs/fuse/connections/<device minor>/), with the congestion
// threshold at three quarters of it; without it the kernel's default
// stays. Before the option existed, the mount refused it (exit 2). The
// fusectl file system is mounted there when it is not yet (as root).
TEST(CliTest, MaxBackgroundReachesTheKernel) {
  TFRFS_SKIP_WITHOUT_FUSE();
  if (::access("/sys/fs/fuse/connections", R_OK) != 0) {
    GTEST_SKIP() << "no /sys/fs/fuse/connections";
  }
  TempDir tmp;
  const std::string src = tmp.Subdir("src");
  WriteOneRecordShard(src + "/data.tfrecord");
  for (const char* n : {"", "64", "128"}) {
    SCOPED_TRACE(absl::StrCat("max_background=", n));
    MountConfig config;
    config.sources = {src};
    config.options = {"ro"};
    if (*n != '\0') config.options.push_back(absl::StrCat("max_background=", n));
    Mount m(config);
    ASSERT_EQ(m.Start(), absl::OkStatus());
    struct stat st;
    ASSERT_EQ(::stat(m.path("").c_str(), &st), 0);
    const std::string conn = absl::StrCat("/sys/fs/fuse/connections/", minor(st.st_dev), "/");
    if (::access(conn.c_str(), R_OK) != 0 && ::geteuid() == 0) {
      Shell("mount -t fusectl fusectl /sys/fs/fuse/connections");
    }
    if (::access(conn.c_str(), R_OK) != 0) GTEST_SKIP() << "fusectl is not mounted";
    const std::string background = ReadWholeFile(conn + "max_background");
    const std::string congestion = ReadWholeFile(conn + "congestion_threshold");
    if (*n == '\0') {
      EXPECT_EQ(background, "12\n");
      EXPECT_EQ(congestion, "9\n");
    } else {
      EXPECT_EQ(background, absl::StrCat(n, "\n"));
      EXPECT_EQ(congestion, absl::StrCat(std::stoi(n) * 3 / 4, "\n"));
    }
  }
}

}  // namespace tfrecordfs::mount_test
