// The image views through real mounts, with the tools users use: ls, find,
// stat, cmp, rm, mv and /usr/bin/python3 with PIL (image_folder.py: PIL
// opens every image; torchvision's ImageFolder emulated). Each dataset is
// mounted twice, once per view, and the gallery's files are compared with
// the records view's.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "mount_harness.h"
#include "testing/shard.h"
#include "tfrecordfs/example/example.h"

namespace tfrecordfs::mount_test {
namespace {

constexpr char kPython[] = "/usr/bin/python3";

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::vector<std::string> Lines(const std::string& s) {
  return absl::StrSplit(s, '\n', absl::SkipEmpty());
}

std::string RealDataDir() {
  if (const char* e = std::getenv("TFRECORDFS_REAL_DATA"); e != nullptr && *e != '\0') return e;
  if (const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT"); root != nullptr) {
    return std::string(root) + "/../shared/data/real";
  }
  return "";
}

class ViewsMountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TFRFS_SKIP_WITHOUT_FUSE();
    if (::access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " is missing (needs PIL)";
    const char* gen = std::getenv("TFRECORDFS_GEN");
    const char* py = std::getenv("TFRECORDFS_VIEWS_PY");
    ASSERT_NE(gen, nullptr) << "$TFRECORDFS_GEN is not set";
    ASSERT_NE(py, nullptr) << "$TFRECORDFS_VIEWS_PY is not set";
    script_ = py;
    data_ = tmp_.path() + "/data";
    ASSERT_EQ(0, ::mkdir(data_.c_str(), 0755));
    for (const char* kind : {"sample", "tensors", "sequence"}) {
      const std::string out = absl::StrCat(data_, "/", kind);
      ASSERT_EQ(0, ::mkdir(out.c_str(), 0755));
      std::vector<std::string> argv = {gen, kind, out, "--records", "8"};
      if (std::string(kind) == "sample")
        argv = {gen, kind, out, "--records", "24", "--shards", "2"};
      const CommandResult r = RunCommand(argv);
      ASSERT_EQ(0, r.exit_code) << r.err;
    }
  }

  // Runs `script` with /bin/sh; fails the test unless it exits 0.
  static std::string Sh(const std::string& script) {
    const CommandResult r = Shell(script);
    EXPECT_EQ(0, r.exit_code) << script << "\n" << r.err;
    return r.out;
  }
  std::string Python(const std::string& mode, const std::string& dir) {
    const CommandResult r = RunCommand({kPython, script_, mode, dir});
    EXPECT_EQ(0, r.exit_code) << r.out << r.err;
    return std::string(absl::StripSuffix(r.out, "\n"));
  }

  TempDir tmp_;
  std::string data_;
  std::string script_;
};

// The records-view path of a gallery file of an Example's record:
// `<rec>-<feature>[-<i>].<ext>` -> `<rec>/<feature>[/<i>].<ext>` ('/' as
// %2F in the gallery); `<rec>.<ext>` has one image, whose path the caller
// knows.
std::string RecordViewPath(const std::string& gallery_name) {
  const size_t dash = gallery_name.find('-');
  const std::string record = gallery_name.substr(0, dash);
  std::string rest = absl::StrReplaceAll(gallery_name.substr(dash + 1), {{"%2F", "/"}});
  // A list index: the last '-' followed by digits and the extension.
  const size_t last = rest.rfind('-');
  const size_t dot = rest.rfind('.');
  if (last != std::string::npos && dot > last + 1 &&
      std::all_of(rest.begin() + last + 1, rest.begin() + dot, ::isdigit)) {
    uint64_t i;
    (void)absl::SimpleAtoi(rest.substr(last + 1, dot - last - 1), &i);
    rest = absl::StrCat(rest.substr(0, last), "/", i, rest.substr(dot));
  }
  return absl::StrCat(record, "/", rest);
}

TEST_F(ViewsMountTest, GalleryOfGeneratedDataMatchesTheRecordsView) {
  Mount records, gallery;
  ASSERT_EQ(absl::OkStatus(), records.Start({data_}));
  // -o ro: the read-only checks below (rm and mv clean on a read-write
  // mount: CleaningThroughTheViews).
  ASSERT_EQ(absl::OkStatus(), gallery.Start({data_}, {"-o", "view=gallery,ro"}));
  const std::string g = gallery.mountpoint(), r = records.mountpoint();

  // Only images: no plain files (dataset_info.json, MANIFEST.txt), no staging/.
  EXPECT_EQ(Sh("ls " + ShellQuote(g)), "sample\nsequence\ntensors\n");
  EXPECT_EQ(Sh("cd " + ShellQuote(g) + " && find . -type f ! -name '*.jpg' ! -name '*.png'"), "");
  EXPECT_EQ(Sh("ls " + ShellQuote(g + "/sample")),
            "train-00000-of-00002.tfrecord\ntrain-00001-of-00002.tfrecord\n");

  // Sorted by ls and in readdir order alike (zero-padded names).
  const std::string shard = g + "/sample/train-00000-of-00002.tfrecord";
  const std::string sorted = Sh("LC_ALL=C ls -1 " + ShellQuote(shard));
  EXPECT_EQ(sorted, Sh("ls -1U " + ShellQuote(shard)));
  std::vector<std::string> names = Lines(sorted);
  ASSERT_EQ(names.size(), 24u) << sorted;  // 12 records x (image, thumbnail)
  EXPECT_EQ(names.front(), "00-image%2Fencoded.jpg");
  EXPECT_EQ(names[1], "00-image%2Fthumbnail.png");
  EXPECT_EQ(names.back(), "11-image%2Fthumbnail.png");

  // Every gallery file of the Example datasets is the records view's file:
  // cmp, and stat's size and mtime (the shard's).
  std::string script = "set -e\n";
  int compared = 0;
  for (const char* dir :
       {"sample/train-00000-of-00002.tfrecord", "sample/train-00001-of-00002.tfrecord",
        "tensors/tensors-00000-of-00001.tfrecord"}) {
    for (const std::string& name : Lines(Sh("ls " + ShellQuote(g + "/" + dir)))) {
      const std::string a = absl::StrCat(g, "/", dir, "/", name);
      const std::string b = absl::StrCat(r, "/", dir, "/", RecordViewPath(name));
      absl::StrAppend(&script, "cmp ", ShellQuote(a), " ", ShellQuote(b), "\n",
                      "test \"$(stat -c '%s %Y' ", ShellQuote(a), ")\" = \"$(stat -c '%s %Y' ",
                      ShellQuote(b), ")\"\n", "test \"$(stat -c %s ", ShellQuote(a),
                      ")\" = \"$(wc -c < ", ShellQuote(a), ")\"\n");
      ++compared;
    }
  }
  EXPECT_GE(compared, 48 + 8 * 8);
  Sh(script);
  EXPECT_EQ(Sh("stat -c %Y " + ShellQuote(shard + "/03-image%2Fencoded.jpg")),
            Sh("stat -c %Y " + ShellQuote(data_ + "/sample/train-00000-of-00002.tfrecord")));

  // A SequenceExample's steps: `<rec>-<list>-<step>[-<i>]`.
  const std::string seq = g + "/sequence/sequence-00000-of-00001.tfrecord";
  Sh("cmp " + ShellQuote(seq + "/0-frames%2Fencoded-2-1.jpg") + " " +
     ShellQuote(
         r + "/sequence/sequence-00000-of-00001.tfrecord/0/feature_lists/frames/encoded/2/1.jpg"));
  Sh("cmp " + ShellQuote(seq + "/1-mask-0.png") + " " +
     ShellQuote(r + "/sequence/sequence-00000-of-00001.tfrecord/1/feature_lists/mask/0.png"));

  // PIL opens every image of the gallery (the generated SequenceExamples'
  // frames are JPEG headers only, not pictures: left out).
  for (const char* dir : {"/sample", "/tensors"}) {
    const std::string total = Sh("find " + ShellQuote(g + dir) + " -type f | wc -l");
    EXPECT_EQ(Python("verify", g + dir),
              absl::StrCat(absl::StripTrailingAsciiWhitespace(total), " images"));
  }

  // -o ro: rm, mv and writes fail with EROFS, and change nothing.
  const std::string victim = ShellQuote(shard + "/00-image%2Fencoded.jpg");
  for (const std::string& cmd :
       {"rm -f " + victim, "mv " + victim + " " + ShellQuote(shard + "/x.jpg"),
        "echo x > " + ShellQuote(shard + "/new.jpg"), "mkdir " + ShellQuote(g + "/new")}) {
    const CommandResult res = Shell(cmd);
    EXPECT_NE(0, res.exit_code) << cmd;
    EXPECT_TRUE(absl::StrContains(res.err, "Read-only file system")) << cmd << ": " << res.err;
  }
  EXPECT_EQ(Sh("ls " + victim), absl::StrCat(shard, "/00-image%2Fencoded.jpg\n"));

  std::string err;
  EXPECT_EQ(0, gallery.Stop(&err)) << err;
  EXPECT_EQ(0, records.Stop(&err)) << err;
}

// label -> the records (`<shard>-<rec>`) that say it, read through the
// records view with cat: the independent grouping.
std::map<std::string, std::set<std::string>> LabelsFromRecordsView(const std::string& root,
                                                                   const std::string& label_file) {
  std::map<std::string, std::set<std::string>> out;
  const CommandResult r =
      Shell("cd " + ShellQuote(root) + " && for f in */*/" + label_file +
            "; do printf '%s\\t%s\\n' \"$f\" \"$(tr '\\n' ' ' < \"$f\")\"; done");
  EXPECT_EQ(0, r.exit_code) << r.err;
  for (const std::string& line : Lines(r.out)) {
    const std::vector<std::string> parts = absl::StrSplit(line, '\t');
    const std::vector<std::string> path = absl::StrSplit(parts[0], '/');
    const std::vector<std::string> values = absl::StrSplit(parts[1], ' ', absl::SkipEmpty());
    const std::string label = values.size() == 1 ? values[0]
                              : values.empty()   ? "%none"
                                                 : "%several";
    out[label].insert(absl::StrCat(path[0], "-", path[1]));
  }
  return out;
}

// `{"a": 2, "b": 3}` -> map.
std::map<std::string, int> ParseCounts(absl::string_view json) {
  std::map<std::string, int> out;
  json = absl::StripPrefix(absl::StripSuffix(json, "}"), "{");
  for (absl::string_view item : absl::StrSplit(json, ", ", absl::SkipEmpty())) {
    const std::vector<std::string> kv = absl::StrSplit(item, ": ");
    int n = -1;
    (void)absl::SimpleAtoi(kv[1], &n);
    out[std::string(absl::StripSuffix(absl::StripPrefix(kv[0], "\""), "\""))] = n;
  }
  return out;
}

TEST_F(ViewsMountTest, ClassFoldersAreAnImageFolderAndTheGroupingIsKept) {
  const std::string sample = data_ + "/sample";
  std::map<std::string, std::set<std::string>> expected;
  {
    Mount records;
    ASSERT_EQ(absl::OkStatus(), records.Start({data_}));
    // The records of the sample dataset, keyed as the class view names them.
    for (auto& [label, recs] : LabelsFromRecordsView(records.path("sample"), "label")) {
      for (const std::string& rec : recs) expected[label].insert(rec);
    }
    std::string err;
    EXPECT_EQ(0, records.Stop(&err)) << err;
  }
  ASSERT_GE(expected.size(), 2u);

  Mount classes;
  // Read-only here (-o ro): cleaning by rm and mv is CleaningThroughTheViews.
  ASSERT_EQ(absl::OkStatus(),
            classes.Start({sample}, {"-o", "view=classes,class_feature=label,ro"}));
  EXPECT_TRUE(absl::StrContains(classes.Stderr(),
                                "0 loaded from the index cache, 2 decoded (24 record(s))"))
      << classes.Stderr();
  const std::string root = classes.mountpoint();
  std::vector<std::string> want_folders;
  for (const auto& [label, recs] : expected) want_folders.push_back(label);
  EXPECT_EQ(Lines(Sh("LC_ALL=C ls " + ShellQuote(root))), want_folders);

  // ImageFolder: a class per folder, two images (encoded, thumbnail) per record.
  const std::map<std::string, int> counts = ParseCounts(Python("imagefolder", root));
  for (const auto& [label, recs] : expected) {
    EXPECT_EQ(counts.count(label) ? counts.at(label) : -1, static_cast<int>(2 * recs.size()))
        << label;
    // Every record of the label, by name, and nothing else.
    std::set<std::string> seen;
    for (const std::string& name : Lines(Sh("ls " + ShellQuote(root + "/" + label)))) {
      seen.insert(name.substr(0, name.find("-image")));
    }
    std::set<std::string> want;
    for (const std::string& rec : recs) want.insert(absl::StrReplaceAll(rec, {{"/", "%2F"}}));
    EXPECT_EQ(seen, want) << label;
  }
  EXPECT_EQ(Sh("find " + ShellQuote(root) + " -type f | wc -l"), "48\n");
  const CommandResult mv = Shell("mv " + ShellQuote(root + "/" + want_folders[0]) + "/* " +
                                 ShellQuote(root + "/" + want_folders[1]));
  EXPECT_NE(0, mv.exit_code);
  EXPECT_TRUE(absl::StrContains(mv.err, "Read-only file system")) << mv.err;
  std::string err;
  EXPECT_EQ(0, classes.Stop(&err)) << err;

  // The next mount reads the stored grouping: nothing decoded.
  Mount again;
  ASSERT_EQ(absl::OkStatus(), again.Start({sample}, {"-o", "view=classes,class_feature=label"}));
  EXPECT_TRUE(
      absl::StrContains(again.Stderr(), "2 loaded from the index cache, 0 decoded (0 record(s))"))
      << again.Stderr();
  EXPECT_EQ(ParseCounts(Python("imagefolder", again.mountpoint())), counts);
  EXPECT_EQ(0, again.Stop(&err)) << err;

  // A changed shard (touched: a new mtime) is indexed and grouped again; the other is kept.
  Sh("touch -d '2001-02-03 04:05:06' " + ShellQuote(sample + "/train-00001-of-00002.tfrecord"));
  Mount third;
  ASSERT_EQ(absl::OkStatus(), third.Start({sample}, {"-o", "view=classes,class_feature=label"}));
  EXPECT_TRUE(
      absl::StrContains(third.Stderr(), "1 loaded from the index cache, 1 decoded (12 record(s))"))
      << third.Stderr();
  EXPECT_EQ(0, third.Stop(&err)) << err;
}

// Cleaning through the image views of a read-write mount: `mv` of an image
// between class folders relabels its record (int64 and text class
// features), `rm` of an image deletes its record, in the class view and in
// the gallery; kept across a kill -9 and a remount, listed by status, and
// committed at unmount (read back by the independent reader).
TEST_F(ViewsMountTest, CleaningThroughTheViews) {
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  ASSERT_NE(root, nullptr);
  const std::string sample = data_ + "/sample";
  const std::string shard0 = sample + "/train-00000-of-00002.tfrecord";
  const std::string store = tmp_.path() + "/store";
  // label and class_name of every record of shard 0, by the independent
  // reader (tests/cli/tfrecord_check.py).
  auto read_labels = [&]() {
    const std::string script = absl::StrCat(
        "import sys; sys.path.insert(0, '", root, "/tests/cli'); import tfrecord_check as t\n",
        "for p in t.read_records(sys.argv[1]):\n",
        "  d = t.decode_example(p); print(d['label'][1][0], d['class_name'][1][0].decode())\n");
    const CommandResult r = RunCommand({kPython, "-c", script, shard0});
    EXPECT_EQ(0, r.exit_code) << r.err;
    return Lines(r.out);
  };
  const std::vector<std::string> before = read_labels();
  ASSERT_EQ(before.size(), 12u);
  // Record 0's label and class name, and a label it does not have.
  const std::vector<std::string> first = absl::StrSplit(before[0], ' ');
  const std::string other_label = first[0] == "1" ? "2" : "1";
  const std::string stem0 = "train-00000-of-00002.tfrecord-00";
  {
    Mount classes;
    ASSERT_EQ(
        absl::OkStatus(),
        classes.Start({sample}, {"-o", "view=classes,class_feature=label,staging_dir=" + store}));
    const std::string m = classes.mountpoint();
    ASSERT_TRUE(Exists(m + "/" + other_label)) << Sh("ls " + ShellQuote(m));
    // mv relabels: both images of record 0 move to the other label's folder.
    Sh("mv " + ShellQuote(m + "/" + first[0] + "/" + stem0 + "-image%2Fencoded.jpg") + " " +
       ShellQuote(m + "/" + other_label + "/"));
    EXPECT_EQ(Lines(Sh("ls " + ShellQuote(m + "/" + other_label) + " | grep -c '^" + stem0 + "-'")),
              std::vector<std::string>{"2"});
    EXPECT_FALSE(Exists(m + "/" + first[0] + "/" + stem0 + "-image%2Fthumbnail.png"));
    // rm of one image deletes its record 1 (both images go).
    const std::string one =
        Sh("cd " + ShellQuote(m) + " && ls */train-00000-of-00002.tfrecord-01-image%2Fencoded.jpg");
    Sh("rm " + ShellQuote(m + "/" + std::string(absl::StripSuffix(one, "\n"))));
    EXPECT_EQ(Sh("find " + ShellQuote(m) + " -name 'train-00000-of-00002.tfrecord-01-*' | wc -l"),
              "0\n");
    // What is not cleaning is refused.
    for (const std::string& cmd :
         {"mv " + ShellQuote(m + "/" + other_label + "/" + stem0 + "-image%2Fencoded.jpg") + " " +
              ShellQuote(m + "/" + other_label + "/renamed.jpg"),
          "mv " + ShellQuote(m + "/" + other_label) + " " + ShellQuote(m + "/newclass")}) {
      const CommandResult res = Shell(cmd);
      EXPECT_NE(0, res.exit_code) << cmd;
      EXPECT_TRUE(absl::StrContains(res.err, "Operation not permitted")) << cmd << ": " << res.err;
    }
    const CommandResult write = Shell("echo x > " + ShellQuote(m + "/" + other_label + "/x.jpg"));
    EXPECT_TRUE(absl::StrContains(write.err, "Read-only file system")) << write.err;
    const CommandResult status = RunCommand({BinaryPath(), "status", m});
    EXPECT_TRUE(absl::StrContains(status.out, "edited: " + shard0 + ": 1 record(s)")) << status.out;
    EXPECT_TRUE(absl::StrContains(status.out, "deleted: " + shard0 + ": 1 record(s)"))
        << status.out;
    classes.KillHard();
  }
  {
    // After a crash, the next mount shows the edits (the edit store keeps
    // them) and the unmount commits them.
    Mount classes;
    ASSERT_EQ(
        absl::OkStatus(),
        classes.Start({sample}, {"-o", "view=classes,class_feature=label,staging_dir=" + store}));
    const std::string m = classes.mountpoint();
    EXPECT_TRUE(Exists(m + "/" + other_label + "/" + stem0 + "-image%2Fencoded.jpg"));
    EXPECT_FALSE(Exists(m + "/" + first[0] + "/" + stem0 + "-image%2Fencoded.jpg"));
    int status = 0;
    const CommandResult un = classes.TfrUnmount(&status);
    EXPECT_EQ(0, un.exit_code) << un.out << un.err;
    EXPECT_TRUE(absl::StrContains(
        un.out, "rewrote " + shard0 + ": kept 10, changed 1, added 0, deleted 1 record(s)"))
        << un.out;
  }
  std::vector<std::string> want = before;
  want[0] = other_label + " " + first[1];  // relabelled: label only
  want.erase(want.begin() + 1);
  EXPECT_EQ(read_labels(), want);

  // Text class feature: relabel by class_name; gallery: rm deletes.
  {
    Mount classes;
    ASSERT_EQ(absl::OkStatus(), classes.Start({sample}, {"-o",
                                                         "view=classes,class_feature=class_name,"
                                                         "staging_dir=" +
                                                             store}));
    const std::string m = classes.mountpoint();
    const std::string label = want[0].substr(0, want[0].find(' '));
    const std::string from = want[0].substr(want[0].find(' ') + 1);
    std::string to;
    for (const std::string& n : Lines(Sh("ls " + ShellQuote(m)))) {
      if (n != from) to = n;
    }
    ASSERT_FALSE(to.empty());
    Sh("mv " + ShellQuote(m + "/" + from + "/" + stem0 + "-image%2Fencoded.jpg") + " " +
       ShellQuote(m + "/" + to + "/"));
    int status = 0;
    EXPECT_EQ(0, classes.TfrUnmount(&status).exit_code);
    want[0] = label + " " + to;
  }
  EXPECT_EQ(read_labels(), want);
  {
    Mount gallery;
    ASSERT_EQ(absl::OkStatus(),
              gallery.Start({sample}, {"-o", "view=gallery,staging_dir=" + store}));
    Sh("rm " + ShellQuote(gallery.path("train-00000-of-00002.tfrecord/03-image%2Fthumbnail.png")));
    EXPECT_FALSE(Exists(gallery.path("train-00000-of-00002.tfrecord/03-image%2Fencoded.jpg")));
    int status = 0;
    EXPECT_EQ(0, gallery.TfrUnmount(&status).exit_code);
  }
  want.erase(want.begin() + 3);
  EXPECT_EQ(read_labels(), want);
}

// `tfrecordfs commit` while an image view is mounted: the rewritten shard
// shows at once, renumbered, with nothing stale from the names and
// listings the kernel cached before (every image is stat'ed first), and a
// relabelled record in its new class folder; checked against the
// independent reader, and in the gallery against a records-view mount.
TEST_F(ViewsMountTest, CommitWhileMountedInTheImageViews) {
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  ASSERT_NE(root, nullptr);
  const std::string sample = data_ + "/sample";
  const std::string shard0 = sample + "/train-00000-of-00002.tfrecord";
  const std::string store = tmp_.path() + "/store";
  auto labels = [&]() {  // label of every record of shard 0 (tests/cli/tfrecord_check.py)
    const std::string script = absl::StrCat(
        "import sys; sys.path.insert(0, '", root, "/tests/cli'); import tfrecord_check as t\n",
        "for p in t.read_records(sys.argv[1]): print(t.decode_example(p)['label'][1][0])\n");
    const CommandResult r = RunCommand({kPython, "-c", script, shard0});
    EXPECT_EQ(0, r.exit_code) << r.err;
    return Lines(r.out);
  };
  // Every image of shard 0 in a class view: "<folder>/<record>", from the names.
  auto class_members = [&](const std::string& m) {
    std::set<std::string> out;
    for (const std::string& path :
         Lines(Sh("cd " + ShellQuote(m) + " && find . -name 'train-00000-*encoded.jpg'"))) {
      const std::vector<std::string> parts = absl::StrSplit(path, '/');  // . folder name
      const std::string rec =
          parts[2].substr(std::string("train-00000-of-00002.tfrecord-").size(), 2);
      out.insert(parts[1] + "/" + rec);
    }
    return out;
  };
  std::vector<std::string> want = labels();
  ASSERT_EQ(want.size(), 12u);
  const std::string other = want[0] == "1" ? "2" : "1";
  {
    Mount classes;
    ASSERT_EQ(
        absl::OkStatus(),
        classes.Start({sample}, {"-o", "view=classes,class_feature=label,staging_dir=" + store}));
    const std::string m = classes.mountpoint();
    // The kernel caches every name and listing first.
    Sh("find " + ShellQuote(m) + " -exec stat {} + > /dev/null");
    const std::vector<std::string> cached =
        Lines(Sh("cd " + ShellQuote(m) + " && find . -type f | sort"));
    const std::string stem0 = "train-00000-of-00002.tfrecord-00";
    Sh("mv " + ShellQuote(m + "/" + want[0] + "/" + stem0 + "-image%2Fencoded.jpg") + " " +
       ShellQuote(m + "/" + other + "/"));
    Sh("rm " +
       ShellQuote(m + "/" + want[1] + "/train-00000-of-00002.tfrecord-01-image%2Fencoded.jpg"));
    const CommandResult commit = RunCommand({BinaryPath(), "commit", m});
    EXPECT_EQ(0, commit.exit_code) << commit.out << commit.err;
    EXPECT_TRUE(absl::StrContains(
        commit.out, "rewrote " + shard0 + ": kept 10, changed 1, added 0, deleted 1 record(s)"))
        << commit.out;
    want[0] = other;
    want.erase(want.begin() + 1);
    EXPECT_EQ(labels(), want);
    // At once: each record of the new shard in its label's folder, once.
    std::set<std::string> expect;
    for (size_t r = 0; r < want.size(); ++r) {
      expect.insert(absl::StrCat(want[r], "/", r < 10 ? "0" : "", r));
    }
    EXPECT_EQ(class_members(m), expect);
    // No name cached before the commit answers for a record it no longer is.
    for (const std::string& path : cached) {
      const std::vector<std::string> parts = absl::StrSplit(path, '/');
      const std::string prefix = "train-00000-of-00002.tfrecord-";
      if (!absl::StartsWith(parts[2], prefix)) continue;
      const std::string rec = parts[2].substr(prefix.size(), 2);
      EXPECT_EQ(Exists(m + "/" + parts[1] + "/" + parts[2]), expect.count(parts[1] + "/" + rec) > 0)
          << path;
    }
    // The stored grouping follows the new shard: a remount shows the same.
    int status = 0;
    EXPECT_EQ(0, classes.TfrUnmount(&status).exit_code);
    Mount again;
    ASSERT_EQ(absl::OkStatus(),
              again.Start({sample}, {"-o", "ro,view=classes,class_feature=label"}));
    EXPECT_EQ(class_members(again.mountpoint()), expect);
  }
  {
    Mount gallery;
    ASSERT_EQ(absl::OkStatus(),
              gallery.Start({sample}, {"-o", "view=gallery,staging_dir=" + store}));
    const std::string dir = gallery.path("train-00000-of-00002.tfrecord");
    Sh("ls -l " + ShellQuote(dir) + " > /dev/null; stat " + ShellQuote(dir) + "/* > /dev/null");
    Sh("rm " + ShellQuote(dir + "/03-image%2Fencoded.jpg"));
    const CommandResult commit = RunCommand({BinaryPath(), "commit", gallery.mountpoint()});
    EXPECT_EQ(0, commit.exit_code) << commit.out << commit.err;
    want.erase(want.begin() + 3);
    EXPECT_EQ(labels(), want);
    // 10 records left, named 0..9 now (one digit), two images each; 10-*
    // and 00-* are gone from the kernel's cache too.
    EXPECT_EQ(Sh("ls " + ShellQuote(dir) + " | wc -l"), "20\n");
    EXPECT_FALSE(Exists(dir + "/10-image%2Fencoded.jpg"));
    EXPECT_FALSE(Exists(dir + "/00-image%2Fencoded.jpg"));
    Mount records;
    ASSERT_EQ(absl::OkStatus(), records.Start({sample}, {"-o", "ro,staging_dir=" + store}));
    for (const char* r : {"0", "3", "9"}) {
      Sh(absl::StrCat("cmp ", ShellQuote(absl::StrCat(dir, "/", r, "-image%2Fencoded.jpg")), " ",
                      ShellQuote(records.path(absl::StrCat("train-00000-of-00002.tfrecord/", r,
                                                           "/image/encoded.jpg")))));
    }
  }
}

TEST_F(ViewsMountTest, OptionErrorsAreUsageErrors) {
  TempDir mnt;
  for (const std::vector<std::string>& args : {std::vector<std::string>{"-o", "view=classes"},
                                               {"-o", "class_feature=label"},
                                               {"-o", "view=thumbnails"}}) {
    std::vector<std::string> argv = {BinaryPath(), "-f"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(data_);
    argv.push_back(mnt.path());
    const CommandResult r = RunCommand(argv);
    EXPECT_EQ(2, r.exit_code) << absl::StrJoin(args, " ") << ": " << r.err;
  }
}

// The real object-detection shards (../shared/data/real, SOURCES.md): one
// JPEG per record (raccoon), and a JPEG plus a PNG mask per record (deeplab).
TEST_F(ViewsMountTest, RealObjectDetectionData) {
  const std::string real = RealDataDir();
  if (real.empty() || ::access((real + "/SOURCES.md").c_str(), R_OK) != 0) {
    GTEST_SKIP() << "real TFRecord data not found at '" << real
                 << "' (set TFRECORDFS_REAL_DATA to the directory holding SOURCES.md)";
  }
  const std::string od = std::filesystem::canonical(real + "/od_raccoon_jpeg_bbox").string();
  const std::string voc = std::filesystem::canonical(real + "/deeplab_voc_seg_jpeg_png").string();
  Mount records, gallery;
  ASSERT_EQ(absl::OkStatus(), records.Start({od, voc}));
  ASSERT_EQ(absl::OkStatus(), gallery.Start({od, voc}, {"-o", "view=gallery"}));
  const std::string g = gallery.mountpoint(), r = records.mountpoint();

  std::vector<std::string> want;
  for (int i = 0; i < 40; ++i) want.push_back(absl::StrCat(i < 10 ? "0" : "", i, ".jpg"));
  EXPECT_EQ(Lines(Sh("ls " + ShellQuote(g + "/test.record"))), want);
  std::string script = "set -e\n";
  for (const std::string& name : want) {
    absl::StrAppend(&script, "cmp ", ShellQuote(g + "/test.record/" + name), " ",
                    ShellQuote(r + "/test.record/" + name.substr(0, 2) + "/image/encoded.jpg"),
                    "\n");
  }
  Sh(script);
  EXPECT_EQ(Lines(Sh("ls " + ShellQuote(g + "/val-00000-of-00001.tfrecord"))),
            (std::vector<std::string>{
                "0-image%2Fencoded.jpg", "0-image%2Fsegmentation%2Fclass%2Fencoded.png",
                "1-image%2Fencoded.jpg", "1-image%2Fsegmentation%2Fclass%2Fencoded.png",
                "2-image%2Fencoded.jpg", "2-image%2Fsegmentation%2Fclass%2Fencoded.png"}));
  for (const std::string& name :
       Lines(Sh("ls " + ShellQuote(g + "/val-00000-of-00001.tfrecord")))) {
    Sh("cmp " + ShellQuote(g + "/val-00000-of-00001.tfrecord/" + name) + " " +
       ShellQuote(r + "/val-00000-of-00001.tfrecord/" + RecordViewPath(name)));
  }
  EXPECT_EQ(Python("verify", g), "46 images");

  // Class folders by the object class text: records with two boxes list it twice.
  const std::map<std::string, std::set<std::string>> expected =
      LabelsFromRecordsView(r, "image/object/class/text.txt");
  std::string err;
  EXPECT_EQ(0, gallery.Stop(&err)) << err;
  Mount classes;
  ASSERT_EQ(absl::OkStatus(),
            classes.Start({od}, {"-o", "view=classes,class_feature=image/object/class/text"}));
  std::map<std::string, int> want_counts;
  for (const auto& [label, recs] : expected) want_counts[label] = static_cast<int>(recs.size());
  EXPECT_EQ(want_counts.size(), 2u);  // raccoon, %several (SOURCES.md: some images have 2 objects)
  EXPECT_EQ(ParseCounts(Python("imagefolder", classes.mountpoint())), want_counts);
  EXPECT_EQ(0, classes.Stop(&err)) << err;
  EXPECT_EQ(0, records.Stop(&err)) << err;
}

// A shard of records with one JPEG (enough for the sniffer) and `label`
// per record: a string, an int64 or a float, as the record's value says.
struct ClassRecord {
  std::string text;
  std::optional<int64_t> number = std::nullopt;
  std::optional<float> real = std::nullopt;
};
void WriteClassShard(const std::string& path, const std::vector<ClassRecord>& records) {
  std::vector<std::string> payloads;
  for (size_t i = 0; i < records.size(); ++i) {
    const std::string jpeg = absl::StrCat("\xff\xd8\xff\xe0 image ", i);
    example::FeatureTable table;
    example::Feature image;
    image.name = "image";
    image.kind = example::Kind::kBytes;
    image.bytes = {jpeg};
    example::Feature label;
    label.name = "label";
    if (records[i].number) {
      label.kind = example::Kind::kInt64;
      label.int64s = {*records[i].number};
    } else if (records[i].real) {
      label.kind = example::Kind::kFloat;
      label.floats = {*records[i].real};
    } else {
      label.kind = example::Kind::kBytes;
      label.bytes = {records[i].text};
    }
    table.features = {image, label};
    payloads.push_back(example::EncodeExample(table));
  }
  test::WriteShard(path, payloads);
}

// `label` of every record of `shard`, by the independent reader
// (tests/cli/tfrecord_check.py): its kind and Python repr of its values.
std::vector<std::string> ReadLabelColumn(const std::string& shard) {
  const char* root = std::getenv("TFRECORDFS_SOURCE_ROOT");
  EXPECT_NE(root, nullptr);
  const std::string script =
      absl::StrCat("import sys; sys.path.insert(0, '", root ? root : "", "/tests/cli'); ",
                   "import tfrecord_check as t\n", "for p in t.read_records(sys.argv[1]):\n",
                   "  k, v = t.decode_example(p)['label']; print(k, repr(v))\n");
  const CommandResult r = RunCommand({kPython, "-c", script, shard});
  EXPECT_EQ(0, r.exit_code) << r.err;
  return Lines(r.out);
}

// Issue 34 item 8 and item 15's "nan": a 300-byte label shows as a folder
// cut to 255 bytes (`%~` and a hash), and a move into it writes the whole
// value, not the cut name (before: 246 L's and the literal `%~cb70d665`);
// its `class` xattr is the whole value. The text "nan" and a float NaN are
// two folders (before: one, "nan").
TEST_F(ViewsMountTest, ClassFoldersStandForWholeValues) {
  const std::string data = tmp_.path() + "/long";
  ASSERT_EQ(0, ::mkdir(data.c_str(), 0755));
  const std::string shard = data + "/train.tfrecord";
  const std::string long_label(300, 'L');
  ASSERT_NO_FATAL_FAILURE(WriteClassShard(
      shard, {{long_label}, {"short"}, {"nan"}, {"", std::nullopt, std::nanf("")}}));
  const std::string store = tmp_.path() + "/store";
  std::string long_folder;
  {
    Mount classes;
    ASSERT_EQ(
        absl::OkStatus(),
        classes.Start({data}, {"-o", "view=classes,class_feature=label,staging_dir=" + store}));
    const std::string m = classes.mountpoint();
    const std::vector<std::string> folders = Lines(Sh("ls " + ShellQuote(m)));
    ASSERT_EQ(folders.size(), 4u) << absl::StrJoin(folders, " ");
    for (const std::string& f : folders) {
      if (absl::StartsWith(f, "LLL")) long_folder = f;
    }
    ASSERT_EQ(long_folder.size(), 255u) << absl::StrJoin(folders, " ");
    EXPECT_TRUE(absl::StrContains(long_folder, "%~"));
    // The text "nan" has its own folder (first letter escaped), apart from
    // the float NaN's.
    EXPECT_EQ(std::set<std::string>(folders.begin(), folders.end()),
              (std::set<std::string>{long_folder, "%6Ean", "nan", "short"}));
    EXPECT_EQ(Lines(Sh("ls " + ShellQuote(m + "/%6Ean"))),
              std::vector<std::string>{"train.tfrecord-2.jpg"});
    EXPECT_EQ(Lines(Sh("ls " + ShellQuote(m + "/nan"))),
              std::vector<std::string>{"train.tfrecord-3.jpg"});
    EXPECT_EQ(
        Sh("getfattr --only-values -n user.tfrecordfs.class " + ShellQuote(m + "/" + long_folder)),
        long_label);
    EXPECT_EQ(Sh("getfattr --only-values -n user.tfrecordfs.class " + ShellQuote(m + "/%6Ean")),
              "nan");
    Sh("mv " + ShellQuote(m + "/short/train.tfrecord-1.jpg") + " " +
       ShellQuote(m + "/" + long_folder + "/"));
    EXPECT_EQ(Lines(Sh("ls " + ShellQuote(m + "/" + long_folder))),
              (std::vector<std::string>{"train.tfrecord-0.jpg", "train.tfrecord-1.jpg"}));
    int status = 0;
    const CommandResult un = classes.TfrUnmount(&status);
    EXPECT_EQ(0, un.exit_code) << un.out << un.err;
  }
  const std::vector<std::string> labels = ReadLabelColumn(shard);
  ASSERT_EQ(labels.size(), 4u);
  EXPECT_EQ(labels[0], labels[1]);
  EXPECT_EQ(labels[1], "bytes [b'" + long_label + "']");
  EXPECT_EQ(labels[2], "bytes [b'nan']");
  EXPECT_EQ(labels[3], "float [nan]");
}

// Rough edge "class folders use raw label values": a TFDS ClassLabel's
// `label.labels.txt` beside the shards names the folders; a move between
// two named folders writes the class's number; `class` is the number.
TEST_F(ViewsMountTest, ClassFoldersAreNamedByTheDatasetsClassLabel) {
  const std::string data = tmp_.path() + "/tfds";
  ASSERT_EQ(0, ::mkdir(data.c_str(), 0755));
  const std::string shard = data + "/pets-train.tfrecord-00000-of-00001";
  ASSERT_NO_FATAL_FAILURE(WriteClassShard(shard, {{"", 0}, {"", 1}, {"", 2}, {"", 0}, {"", 5}}));
  WriteWholeFile(data + "/label.labels.txt", "cat\ndog\r\nbird\n");
  const std::string store = tmp_.path() + "/store";
  {
    Mount classes;
    ASSERT_EQ(
        absl::OkStatus(),
        classes.Start({data}, {"-o", "view=classes,class_feature=label,staging_dir=" + store}));
    const std::string m = classes.mountpoint();
    // 5 has no name: it keeps its number.
    EXPECT_EQ(Lines(Sh("ls " + ShellQuote(m))),
              (std::vector<std::string>{"5", "bird", "cat", "dog"}));
    EXPECT_EQ(Lines(Sh("ls " + ShellQuote(m + "/cat"))),
              (std::vector<std::string>{"pets-train.tfrecord-00000-of-00001-0.jpg",
                                        "pets-train.tfrecord-00000-of-00001-3.jpg"}));
    EXPECT_EQ(Sh("getfattr --only-values -n user.tfrecordfs.class " + ShellQuote(m + "/dog")), "1");
    Sh("mv " + ShellQuote(m + "/cat/pets-train.tfrecord-00000-of-00001-3.jpg") + " " +
       ShellQuote(m + "/bird/"));
    EXPECT_EQ(Lines(Sh("ls " + ShellQuote(m + "/bird"))),
              (std::vector<std::string>{"pets-train.tfrecord-00000-of-00001-2.jpg",
                                        "pets-train.tfrecord-00000-of-00001-3.jpg"}));
    int status = 0;
    const CommandResult un = classes.TfrUnmount(&status);
    EXPECT_EQ(0, un.exit_code) << un.out << un.err;
  }
  EXPECT_EQ(ReadLabelColumn(shard), (std::vector<std::string>{"int64 [0]", "int64 [1]", "int64 [2]",
                                                              "int64 [2]", "int64 [5]"}));
}

}  // namespace
}  // namespace tfrecordfs::mount_test
