// A property test of record edits (issue 23) through a real mount: for each
// seed of a fixed list, a generated shard of Example records (int64 `id`,
// bytes `text`, float `score`; plain or GZIP) is mounted read-write and a
// random sequence of edits is applied with shell tools, one command each
// (`echo N > id`, `sed -i` of a text file, `rm` of a feature file, `rm -r`
// of a record or `rm` of its files + `rmdir`, `mkdir` + files of a new
// record, `mv` of a text file within a record, `cp -r` of a record to a new
// name, `mv` of an added record to a new name, `mv` of a record into
// staging/), and to a model: the shard's records (or deleted), the added
// ones by name and the staged ones by name. The daemon is sometimes
// killed (-9) and mounted again in the middle, and `tfrecordfs commit`
// sometimes writes the edits while mounted. The mount must show what the
// model has (record folders, file names, ids, texts) after each remount and
// each commit (numbered afresh then) and before the unmount. After each
// commit, and after `tfrecordfs unmount`, the independent reader
// (tests/cli/tfrecord_check.py) must read exactly the model: kept and edited
// records in index order, the deleted ones gone, the added ones appended in
// name order; the staged ones must be packed into output_dir at unmount,
// once each, in name order. Every third seed commits nothing while mounted
// and dies (TFRECORDFS_FAULT) in the unmount's commit, before or after the
// rename: the shard must then read wholly as generated or wholly as the
// model, and a mount without the fault commits the rest.
// A failure prints the seed and every command so far.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "staging_util.h"

namespace tfrecordfs::mount_test::staging_test {
namespace {

// ---- The model ----

enum class Kind { kInt64, kFloat, kBytes };

// One feature with one value, as describe_example prints it (floats: %g).
struct Value {
  Kind kind;
  std::string shown;
};
using Features = std::map<std::string, Value>;  // feature name -> value

// The file a feature shows as in a record folder: numbers by their name,
// text as NAME.txt.
std::string FileOf(const std::string& feature, Kind kind) {
  return kind == Kind::kBytes ? feature + ".txt" : feature;
}

std::string Describe(const Features& f) {
  std::vector<std::string> parts;
  for (const auto& [name, v] : f) {
    const char* kind = v.kind == Kind::kInt64   ? "int64"
                       : v.kind == Kind::kFloat ? "float"
                                                : "bytes";
    parts.push_back(absl::StrCat(name, ":", kind, ":", v.shown));
  }
  return absl::StrJoin(parts, " ");
}

struct Model {
  std::vector<std::optional<Features>> records;  // nullopt: deleted
  std::map<std::string, Features> added;         // by name
  std::map<std::string, Features> staged;        // moved to staging/, by name

  // Takes record folder `name` out of the shard (deleted, or no longer
  // added).
  void Remove(const std::string& name, const std::vector<std::string>& folders) {
    if (added.erase(name) != 0) return;
    for (size_t i = 0; i < folders.size(); ++i) {
      if (folders[i] == name) records[i].reset();
    }
  }

  // The record folder `name` (a shard record's, or an added one), or null.
  Features* Find(const std::string& name, const std::vector<std::string>& folders) {
    for (size_t i = 0; i < folders.size(); ++i) {
      if (folders[i] == name) return records[i] ? &*records[i] : nullptr;
    }
    auto it = added.find(name);
    return it == added.end() ? nullptr : &it->second;
  }
};

// Words of the texts: none is part of another, so `sed 's/A/B/'` and
// std::string::find agree on the first match.
constexpr const char* kWords[] = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot"};
constexpr const char* kTextFeatures[] = {"text", "note", "memo"};
constexpr const char* kNewNames[] = {"add", "copy", "extra", "fresh", "more", "new", "zz"};

class Rng {
 public:
  explicit Rng(uint64_t seed) : g_(seed) {}
  // Uniform enough in [0, n): modulo of a 64-bit draw (the same on every
  // standard library, unlike std::uniform_int_distribution).
  size_t Below(size_t n) { return static_cast<size_t>(g_() % n); }
  bool OneIn(size_t n) { return Below(n) == 0; }
  template <typename T, size_t N>
  const T& Pick(const T (&a)[N]) {
    return a[Below(N)];
  }

 private:
  std::mt19937_64 g_;
};

Value RandomInt(Rng& rng) {
  static constexpr int64_t kInts[] = {0, 1, -1, 7, 42, -300, 65536, 1234567890123, -987654321};
  const int64_t v = rng.OneIn(2) ? rng.Pick(kInts) : static_cast<int64_t>(rng.Below(1000));
  return {Kind::kInt64, absl::StrCat(v)};
}

// A quarter in [-50, 50): exact in a float, printed the same by %g in C and
// Python.
std::pair<float, Value> RandomFloat(Rng& rng) {
  const float v = (static_cast<float>(rng.Below(400)) - 200) / 4;
  return {v, {Kind::kFloat, absl::StrFormat("%g", v)}};
}

std::string RandomText(Rng& rng) {
  std::vector<std::string> words;
  const size_t n = 1 + rng.Below(4);
  for (size_t i = 0; i < n; ++i) words.push_back(rng.Pick(kWords));
  return absl::StrJoin(words, " ");
}

class RecordEditModelTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    TFRFS_SKIP_WITHOUT_FUSE();
    if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  }

  // TFRECORDFS_FAULT of every daemon of this seed: its points are in the
  // commit only, so the edits and the kill -9s never reach them.
  MountConfig Config(const std::string& fault) const {
    MountConfig c = PackConfig(s_, {s_.src}, "model");
    c.fault = fault;
    return c;
  }

  // Expects the independent reader to read `want` from `shard`, naming the
  // lines that differ (gtest elides long vectors; line 0 is the codec).
  void ExpectShardReads(const std::string& shard, const std::vector<std::string>& want,
                        const std::string& what) {
    const std::vector<std::string> got = ReadIndependently(shard);
    if (got == want) return;
    for (size_t i = 0; i < std::max(got.size(), want.size()); ++i) {
      const std::string g = i < got.size() ? got[i] : "(none)";
      const std::string w = i < want.size() ? want[i] : "(none)";
      if (g != w) ADD_FAILURE() << "line " << i << ": read " << g << "\n  want " << w;
    }
    ADD_FAILURE() << shard << " is not " << what << "; seed " << GetParam() << ", edits:\n"
                  << absl::StrJoin(log_, "\n");
  }

  // MNT/<shard>
  std::string ShardDir() const { return s_.mnt + "/" + shard_name_; }

  // Runs one edit in the shard folder and logs it.
  void Edit(const std::string& command) {
    log_.push_back(command);
    CommandResult r = RunCommand(
        {"bash", "-c", absl::StrCat("set -e; cd ", ShellQuote(ShardDir()), "\n", command)});
    ASSERT_EQ(r.exit_code, 0) << "seed " << GetParam() << ": `" << command << "` failed: " << r.err
                              << "\nafter:\n"
                              << absl::StrJoin(log_, "\n");
  }

  // The live record folders in listing order: the shard's records not
  // deleted, then the added ones.
  std::vector<std::string> LiveFolders() const {
    std::vector<std::string> out;
    for (size_t i = 0; i < model_.records.size(); ++i) {
      if (model_.records[i]) out.push_back(folders_[i]);
    }
    for (const auto& [name, f] : model_.added) out.push_back(name);
    return out;
  }

  // After a commit: the live records are the shard's, numbered afresh
  // (folder names as wide as the last index).
  void Rebase() {
    std::vector<std::optional<Features>> now;
    for (const std::string& name : LiveFolders()) now.push_back(*model_.Find(name, folders_));
    model_.records = std::move(now);
    model_.added.clear();
    const int width =
        static_cast<int>(absl::StrCat(std::max<size_t>(model_.records.size(), 1) - 1).size());
    folders_.clear();
    for (size_t i = 0; i < model_.records.size(); ++i) {
      folders_.push_back(absl::StrFormat("%0*d", width, i));
    }
  }

  // What the independent reader must read from the shard once the model is
  // committed: the codec, then the records in order.
  std::vector<std::string> Committed(bool gzip) const {
    std::vector<std::string> out = {gzip ? "gzip" : "none"};
    for (const auto& r : model_.records) {
      if (r) out.push_back(Describe(*r));
    }
    for (const auto& [name, f] : model_.added) out.push_back(Describe(f));
    return out;
  }

  // The mount shows the model: record folders, their files, ids and texts,
  // and (`staging`) the records moved to staging/.
  void ExpectMountShowsModel(const std::string& when, bool staging = true) {
    const std::string trace =
        absl::StrCat("seed ", GetParam(), ", ", when, ", after:\n", absl::StrJoin(log_, "\n"));
    if (staging) {
      std::vector<std::string> staged;
      for (const auto& [name, f] : model_.staged) staged.push_back(name);
      EXPECT_EQ(ListDir(s_.mnt + "/staging"), staged) << trace;
    }
    std::vector<std::string> live = LiveFolders();
    std::vector<std::string> sorted = live;
    std::sort(sorted.begin(), sorted.end());
    ASSERT_EQ(ListDir(ShardDir()), sorted) << trace;
    for (const std::string& name : live) {
      const Features& f = *model_.Find(name, folders_);
      std::vector<std::string> files;
      for (const auto& [feature, v] : f) files.push_back(FileOf(feature, v.kind));
      std::sort(files.begin(), files.end());
      const std::string dir = ShardDir() + "/" + name;
      EXPECT_EQ(ListDir(dir), files) << name << "\n" << trace;
      for (const auto& [feature, v] : f) {
        if (v.kind == Kind::kFloat) continue;  // the float's text is the mount's
        EXPECT_EQ(ReadWholeFile(dir + "/" + FileOf(feature, v.kind)), v.shown + "\n")
            << name << "/" << feature << "\n"
            << trace;
      }
    }
  }

  // One random edit, applied through the mount and to the model.
  void RandomEdit(Rng& rng) {
    const std::vector<std::string> live = LiveFolders();
    const std::string rec = live[rng.Below(live.size())];
    Features& f = *model_.Find(rec, folders_);
    std::vector<std::string> texts;  // its bytes features
    for (const auto& [name, v] : f) {
      if (v.kind == Kind::kBytes) texts.push_back(name);
    }
    // A name no live record has, from a small pool so that removed added
    // records' names come back; "" when the draws find none.
    auto new_name = [&]() -> std::string {
      for (int tries = 0; tries < 50; ++tries) {
        std::string n = absl::StrCat(rng.Pick(kNewNames), rng.Below(4));
        if (model_.Find(n, folders_) == nullptr) return n;
      }
      return "";
    };
    switch (rng.Below(11)) {
      case 0:
      case 1: {  // a number
        const bool id = rng.OneIn(2);
        const Value v = id ? RandomInt(rng) : RandomFloat(rng).second;
        const std::string feature = id ? "id" : "score";
        Edit(absl::StrFormat("echo %s > %s/%s", v.shown, rec, feature));
        f[feature] = v;
        return;
      }
      case 2:
      case 3: {  // sed -i
        if (texts.empty()) break;
        const std::string& t = texts[rng.Below(texts.size())];
        const std::string from = rng.Pick(kWords);
        const std::string to = rng.Pick(kWords);
        Edit(absl::StrFormat("sed -i 's/%s/%s/' %s/%s.txt", from, to, rec, t));
        std::string& shown = f[t].shown;
        if (size_t at = shown.find(from); at != std::string::npos)
          shown.replace(at, from.size(), to);
        return;
      }
      case 4: {  // rm of a feature file, never the last
        if (f.size() < 2) break;
        auto it = f.begin();
        std::advance(it, rng.Below(f.size()));
        Edit(absl::StrFormat("rm %s/%s", rec, FileOf(it->first, it->second.kind)));
        f.erase(it);
        return;
      }
      case 5: {  // rm -r of a record, or rmdir once its files are gone
        if (live.size() < 4) break;
        Edit(rng.OneIn(2) ? absl::StrCat("rm -r ", rec)
                          : absl::StrCat("rm ", rec, "/* && rmdir ", rec));
        model_.Remove(rec, folders_);
        return;
      }
      case 6:
      case 7: {  // mkdir + files of a new record
        const std::string name = new_name();
        if (name.empty()) break;
        Features nf;
        std::string cmd = absl::StrFormat("mkdir %s", name);
        while (nf.empty()) {
          if (rng.OneIn(2)) nf["id"] = RandomInt(rng);
          if (rng.OneIn(2)) nf["score"] = RandomFloat(rng).second;
          if (rng.OneIn(2)) nf[rng.Pick(kTextFeatures)] = {Kind::kBytes, RandomText(rng)};
        }
        for (const auto& [feature, v] : nf) {
          absl::StrAppend(&cmd, absl::StrFormat(" && echo '%s' > %s/%s", v.shown, name,
                                                FileOf(feature, v.kind)));
        }
        Edit(cmd);
        model_.added[name] = std::move(nf);
        return;
      }
      case 8: {  // mv of a text file within the record (over another one)
        if (texts.empty()) break;
        const std::string& from = texts[rng.Below(texts.size())];
        const std::string to = rng.Pick(kTextFeatures);
        if (to == from) break;
        Edit(absl::StrFormat("mv %s/%s.txt %s/%s.txt", rec, from, rec, to));
        Value v = f[from];
        f.erase(from);
        f[to] = std::move(v);
        return;
      }
      case 9: {  // cp -r of a record to a new name, or mv of an added one
        const std::string name = new_name();
        if (name.empty()) break;
        if (model_.added.count(rec) != 0 && rng.OneIn(2)) {
          Edit(absl::StrFormat("mv %s %s", rec, name));
          Features moved = std::move(f);
          model_.added.erase(rec);
          model_.added[name] = std::move(moved);
          return;
        }
        Edit(absl::StrFormat("cp -r %s %s", rec, name));
        model_.added[name] = f;
        return;
      }
      case 10: {  // mv of a record out of the shard into staging/
        if (live.size() < 4) break;
        std::string name;
        while (name.empty() || model_.staged.count(name) != 0) {
          name = absl::StrCat("st", rng.Below(100));
        }
        Edit(absl::StrFormat("mv %s ../staging/%s", rec, name));
        Features moved = f;
        model_.Remove(rec, folders_);
        model_.staged[name] = std::move(moved);
        return;
      }
    }
    // What was picked did not apply to this record: a number, always.
    const Value v = RandomInt(rng);
    Edit(absl::StrFormat("echo %s > %s/id", v.shown, rec));
    f["id"] = v;
  }

  Scratch s_;
  std::string shard_name_;
  std::vector<std::string> folders_;  // record index -> folder name
  Model model_;
  std::vector<std::string> log_;  // the edits run so far
};

TEST_P(RecordEditModelTest, RandomEditsCommitExactlyWhatTheModelSays) {
  Rng rng(0x5eed0000u + static_cast<uint64_t>(GetParam()));
  const bool gzip = GetParam() % 2 == 0;
  // Every third seed also dies in the commit, at one of these points
  // (repack/rewrite.h; rewrite_mid_shard is left out: it needs the middle
  // record kept, which random edits may not do).
  static constexpr const char* kFaults[] = {"rewrite_after_forget", "rewrite_before_rename",
                                            "rewrite_after_shard:1"};
  const std::string fault = GetParam() % 3 == 0 ? kFaults[(GetParam() / 3) % 3] : "";
  const size_t records = 26 + rng.Below(9);  // 26..34: two-digit folder names
  std::vector<std::string> payloads;
  std::vector<std::string> before = {gzip ? "gzip" : "none"};  // the shard as generated
  for (size_t i = 0; i < records; ++i) {
    Features f;
    f["id"] = {Kind::kInt64, absl::StrCat(i)};
    const std::string text = RandomText(rng);
    f["text"] = {Kind::kBytes, text};
    const auto [score, shown] = RandomFloat(rng);
    f["score"] = shown;
    payloads.push_back(
        ExamplePayload({Int64Feature("id", {static_cast<int64_t>(i)}), BytesFeature("text", {text}),
                        FloatFeature("score", {score})}));
    before.push_back(Describe(f));
    model_.records.push_back(std::move(f));
    folders_.push_back(absl::StrFormat("%02d", i));
  }
  const std::string plain = s_.src + "/data.tfrecord";
  test::WriteShard(plain, payloads);
  shard_name_ = "data.tfrecord";
  if (gzip) {
    CommandResult r = Shell("gzip -n " + ShellQuote(plain));  // not our writer
    ASSERT_EQ(r.exit_code, 0) << r.err;
    shard_name_ += ".gz";
  }
  const std::string shard = s_.src + "/" + shard_name_;

  const size_t edits = 15 + rng.Below(26);  // 15..40
  // Edits after which the daemon is killed and mounted again (0 to 2).
  std::vector<size_t> kills;
  for (size_t k = rng.Below(3); k > 0; --k) kills.push_back(1 + rng.Below(edits - 1));
  // Edits after which `tfrecordfs commit` writes them while mounted (0 to
  // 2; none where the commit's fault point would fire).
  std::vector<size_t> commits;
  for (size_t k = fault.empty() ? rng.Below(3) : 0; k > 0; --k) {
    commits.push_back(1 + rng.Below(edits - 1));
  }
  bool dirty = false;  // edits since the last commit
  std::optional<Mount> d;
  d.emplace(Config(fault));
  ASSERT_EQ(d->Start(), absl::OkStatus());
  ASSERT_NO_FATAL_FAILURE(ExpectMountShowsModel("at the start"));
  for (size_t e = 1; e <= edits; ++e) {
    ASSERT_NO_FATAL_FAILURE(RandomEdit(rng));
    dirty = true;
    if (std::find(commits.begin(), commits.end(), e) != commits.end()) {
      log_.push_back("# tfrecordfs commit");
      CommandResult c = RunCommand({BinaryPath(), "commit", s_.mnt});
      const std::string trace =
          absl::StrCat("seed ", GetParam(), ", edits:\n", absl::StrJoin(log_, "\n"));
      ASSERT_EQ(c.exit_code, 0) << c.out << c.err << "\n" << trace;
      EXPECT_NE(c.out.find("rewrote " + shard + ": "), std::string::npos) << c.out << "\n" << trace;
      ExpectShardReads(shard, Committed(gzip), "the model");
      Rebase();
      dirty = false;
      ASSERT_NO_FATAL_FAILURE(ExpectMountShowsModel("after tfrecordfs commit"));
    }
    if (std::find(kills.begin(), kills.end(), e) != kills.end()) {
      log_.push_back("# kill -9, mount again");
      d->KillHard();
      d.reset();
      d.emplace(Config(fault));
      ASSERT_EQ(d->Start(), absl::OkStatus());
      ASSERT_NO_FATAL_FAILURE(ExpectMountShowsModel("after a remount"));
    }
  }
  ASSERT_NO_FATAL_FAILURE(ExpectMountShowsModel("before the commit"));
  const std::vector<std::string> expected = Committed(gzip);
  const std::string trace =
      absl::StrCat("seed ", GetParam(), ", edits:\n", absl::StrJoin(log_, "\n"));

  bool pending = dirty;  // the commit still to do
  if (!fault.empty()) {
    log_.push_back("# tfrecordfs unmount, killed at " + fault + ", mount again");
    int status = 0;
    CommandResult un = d->TfrUnmount(&status);
    EXPECT_TRUE(KilledBySigkill(status)) << DescribeWait(status) << " at " << fault << "\n"
                                         << un.out << un.err << "\n"
                                         << trace;
    d.reset();
    CleanStaleMount(s_.mnt);
    // Wholly old (before the rename) or wholly the model (after it).
    pending = fault == "rewrite_before_rename";
    ExpectShardReads(shard, pending ? before : expected,
                     pending ? "the shard as generated" : "the model");
    d.emplace(Config(""));
    ASSERT_EQ(d->Start(), absl::OkStatus());
    if (pending) {
      // (staging/ is packed before or after the rewrite: not checked here)
      ASSERT_NO_FATAL_FAILURE(
          ExpectMountShowsModel("after the crash in the commit", /*staging=*/false));
    } else {
      EXPECT_EQ(ListDir(ShardDir()).size(), expected.size() - 1) << trace;
    }
  }
  int status = 0;
  CommandResult un = d->TfrUnmount(&status);
  EXPECT_EQ(un.exit_code, 0) << un.out << un.err << "\n" << trace;
  EXPECT_EQ(un.out.find("rewrote " + shard + ": ") != std::string::npos, pending) << un.out << "\n"
                                                                                  << trace;
  d.reset();

  ExpectShardReads(shard, expected, "the model");
  EXPECT_EQ(ListDir(s_.src), std::vector<std::string>{shard_name_}) << trace;
  // The records moved to staging/ were packed into output_dir, in name
  // order, once each.
  std::vector<std::string> packed;
  for (const std::string& name : ListDir(s_.out)) {
    EXPECT_TRUE(absl::StartsWith(name, "model-")) << name;
    std::vector<std::string> lines = ReadIndependently(s_.out + "/" + name);
    if (!lines.empty()) packed.insert(packed.end(), lines.begin() + 1, lines.end());
  }
  std::vector<std::string> staged;
  for (const auto& [name, f] : model_.staged) staged.push_back(Describe(f));
  EXPECT_EQ(packed, staged) << trace;
  EXPECT_EQ(ListDir(s_.store + "/records"), std::vector<std::string>{}) << trace;
  EXPECT_EQ(ListDir(s_.store + "/edits/records"), std::vector<std::string>{}) << trace;
}

INSTANTIATE_TEST_SUITE_P(Seeds, RecordEditModelTest, ::testing::Range(1, 21),
                         [](const auto& info) { return absl::StrCat("seed", info.param); });

}  // namespace
}  // namespace tfrecordfs::mount_test::staging_test
