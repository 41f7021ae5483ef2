#include "generated_dataset.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>

#include "gtest/gtest.h"
#include "testing/canon.h"
#include "testing/shard.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/example/example.h"

namespace tfrecordfs::mount_test {

namespace {

using example::Kind;

using test::FromBits;

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}

  uint64_t Below(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }
  bool Chance(int percent) { return Below(100) < static_cast<uint64_t>(percent); }

  std::string Bytes(size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(Below(256));
    return s;
  }
  // Binary that is never single-line text: starts with a NUL byte.
  std::string RawBinary(size_t n) { return std::string(1, '\0') + Bytes(n); }
  std::string FakeJpeg(size_t n) { return std::string("\xFF\xD8\xFF\xE0", 4) + Bytes(n); }
  std::string FakePng(size_t n) { return std::string("\x89PNG\r\n\x1a\n", 8) + Bytes(n); }

  std::string Text() {
    static const char* kWords[] = {"cat",
                                   "dog",
                                   "h\xC3\xA9llo",
                                   "\xE2\x96\x81world",
                                   "tab\there",
                                   "a b",
                                   "\xE5\x9B\xBE\xE5\x83\x8F",
                                   "42",
                                   "-0",
                                   "nan",
                                   "{\"json\": 1}",
                                   " padded "};
    std::string s;
    const size_t n = Below(4);
    for (size_t i = 0; i < n; ++i) {
      if (i) s += ' ';
      s += kWords[Below(sizeof kWords / sizeof kWords[0])];
    }
    return s;  // may be empty
  }

  std::vector<int64_t> Ints(size_t n) {
    static const int64_t kSpecial[] = {
        0,         -1, 1, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
        1000000007};
    std::vector<int64_t> v(n);
    for (auto& x : v) {
      x = Chance(20) ? kSpecial[Below(6)] : static_cast<int64_t>(rng_());
    }
    return v;
  }

  std::vector<float> Floats(size_t n) {
    static const uint32_t kSpecial[] = {
        0x7fc00000u,  // the default quiet NaN
        0xffc00000u,  // -nan
        0x7fc00123u,  // NaN with a payload
        0x80000000u,  // -0
        0x00000000u,  // +0
        0x7f800000u,  // inf
        0xff800000u,  // -inf
        0x00000001u,  // smallest denormal
        0x7f7fffffu,  // FLT_MAX
        0x3dcccccdu,  // 0.1f
    };
    std::vector<float> v(n);
    for (auto& x : v) {
      if (Chance(30)) {
        x = FromBits(kSpecial[Below(sizeof kSpecial / sizeof kSpecial[0])]);
      } else {
        x = std::uniform_real_distribution<float>(-1e6f, 1e6f)(rng_);
      }
    }
    return v;
  }

 private:
  std::mt19937_64 rng_;
};

// A feature of `kind` with no values yet (kNone: a kindless Feature{}).
OwnedFeature NamedF(std::string name, Kind kind) {
  OwnedFeature f;
  f.name = std::move(name);
  f.kind = kind;
  return f;
}
OwnedFeature IntF(std::string name, std::vector<int64_t> v) {
  OwnedFeature f = NamedF(std::move(name), Kind::kInt64);
  f.int64s = std::move(v);
  return f;
}
OwnedFeature FloatF(std::string name, std::vector<float> v) {
  OwnedFeature f = NamedF(std::move(name), Kind::kFloat);
  f.floats = std::move(v);
  return f;
}
OwnedFeature BytesF(std::string name, std::vector<std::string> v) {
  OwnedFeature f = NamedF(std::move(name), Kind::kBytes);
  f.bytes = std::move(v);
  return f;
}
OwnedFeature NoneF(std::string name) { return NamedF(std::move(name), Kind::kNone); }

// Names chosen to hit every escaping rule of naming.h.
void AddAwkwardNames(Gen& g, uint64_t r, std::vector<OwnedFeature>* fs) {
  fs->push_back(IntF("", {static_cast<int64_t>(r)}));                               // empty name
  fs->push_back(FloatF(".", {1.5f}));                                               // "."
  fs->push_back(BytesF("..", {"dotdot"}));                                          // ".."
  fs->push_back(IntF(std::string("ctl\x01\x1f\x7fname", 10), {1, 2}));              // control bytes
  fs->push_back(IntF("long_" + std::string(295, 'x'), {static_cast<int64_t>(r)}));  // 300 bytes
  std::string e_acute;
  for (int i = 0; i < 150; ++i) e_acute += "\xC3\xA9";
  fs->push_back(BytesF(e_acute, {"accent"}));                  // 300 bytes of UTF-8
  fs->push_back(IntF(std::string(100, '%'), {3}));             // escapes to 300 bytes
  fs->push_back(IntF("image", {7, static_cast<int64_t>(r)}));  // beside image/encoded
  fs->push_back(BytesF("record", {g.RawBinary(20)}));          // would be record.bin
  fs->push_back(IntF("record.bin", {5}));
  fs->push_back(IntF("42", {42}));                                // all-digit stem
  fs->push_back(BytesF("ambig/0.5", {"digit stem with a dot"}));  // looks like a list item
  fs->push_back(IntF("/lead", {1}));                              // empty components
  fs->push_back(BytesF("trail/", {"trailing slash"}));
  fs->push_back(BytesF("a//b", {g.RawBinary(10)}));
  fs->push_back(FloatF("loss.total", g.Floats(2)));
  fs->push_back(IntF("dir.x/.hidden/y", {9}));
  fs->push_back(BytesF("\xE5\x9B\xBE\xE5\x83\x8F/\xE7\xBC\x96\xE7\xA0\x81", {g.FakeJpeg(64)}));
  fs->push_back(BytesF("deep/" + std::string(300, 'd') + "/list",
                       {g.FakePng(16), g.RawBinary(16)}));  // list under a long dir
  fs->push_back(BytesF("name~", {"backup-looking name"}));
  fs->push_back(BytesF("space name", {"with a space"}));
}

GenRecord MakeExample(Gen& g, uint64_t r, bool awkward, size_t big_value) {
  std::vector<OwnedFeature> fs;
  fs.push_back(BytesF("image/encoded", {g.FakeJpeg(big_value ? big_value : 50 + g.Below(3000))}));
  fs.push_back(IntF("image/height", {static_cast<int64_t>(1 + g.Below(4000))}));
  fs.push_back(IntF("image/width", {static_cast<int64_t>(1 + g.Below(4000))}));
  fs.push_back(BytesF("image/format", {"jpeg"}));
  fs.push_back(IntF("label", g.Ints(g.Below(7))));
  fs.push_back(FloatF("scores", g.Floats(1 + g.Below(8))));
  {
    std::vector<std::string> caps;
    const size_t n = 1 + g.Below(3);
    for (size_t i = 0; i < n; ++i) caps.push_back(g.Text());
    fs.push_back(BytesF("caption", caps));
  }
  fs.push_back(BytesF("mask", {g.FakePng(20 + g.Below(500))}));
  {
    std::vector<std::string> frames;
    const size_t n = 2 + g.Below(4);
    for (size_t i = 0; i < n; ++i) {
      switch (g.Below(6)) {
        case 0:
          frames.push_back(g.FakeJpeg(g.Below(200)));
          break;
        case 1:
          frames.push_back(g.FakePng(g.Below(200)));
          break;
        case 2:
          frames.push_back(g.RawBinary(g.Below(200)));
          break;
        case 3:
          frames.push_back("{\n  \"a\": 1\n}\n");
          break;  // JSON
        case 4:
          frames.push_back("line one\nline two");
          break;  // UTF-8, not single-line
        default:
          frames.push_back("");
          break;  // empty value
      }
    }
    // At least one value that is not single-line text, so it stays a list.
    frames[0] = g.RawBinary(8);
    fs.push_back(BytesF("frames", frames));
  }
  fs.push_back(IntF("tokens/a/b", g.Ints(1 + g.Below(40))));
  fs.push_back(FloatF("bbox/xmin", g.Floats(1 + g.Below(3))));
  fs.push_back(FloatF("bbox/xmax", g.Floats(1 + g.Below(3))));
  fs.push_back(IntF("empty_int64", {}));
  fs.push_back(FloatF("empty_float", {}));
  fs.push_back(BytesF("empty_bytes", {}));
  fs.push_back(NoneF("missing"));
  // A key whose kind changes from record to record, as in the TFX taxi data.
  switch (r % 4) {
    case 0:
      fs.push_back(IntF("varying", {static_cast<int64_t>(r)}));
      break;
    case 1:
      fs.push_back(FloatF("varying", {static_cast<float>(r) + 0.5f}));
      break;
    case 2:
      fs.push_back(NoneF("varying"));
      break;
    default:
      break;
  }
  if (r % 5 == 0) fs.push_back(FloatF("embedding", g.Floats(784)));  // a multi-page text file
  if (awkward) AddAwkwardNames(g, r, &fs);

  std::sort(fs.begin(), fs.end(),
            [](const OwnedFeature& a, const OwnedFeature& b) { return a.name < b.name; });
  for (size_t i = 1; i < fs.size(); ++i) {
    EXPECT_NE(fs[i - 1].name, fs[i].name) << "duplicate generated feature name";
  }
  GenRecord rec;
  rec.is_example = true;
  rec.features = std::move(fs);
  rec.payload = example::EncodeExample(ToTable(rec.features));
  return rec;
}

GenRecord RawRecord(std::string payload) {
  GenRecord r;
  r.payload = std::move(payload);
  return r;
}

// An Example whose only key is not UTF-8 (proto3 rejects it): shown raw.
// Built by hand because protobuf would complain while serialising it.
std::string NonUtf8KeyExample() {
  const std::string int64_list("\x0a\x01\x01", 3);                      // values: [1]
  const std::string feature = std::string("\x1a\x03", 2) + int64_list;  // int64_list
  const std::string entry = std::string("\x0a\x02\xff\xfe\x12\x05", 6) + feature;
  const std::string features = std::string("\x0a\x0b", 2) + entry;
  return std::string("\x0a\x0d", 2) + features;
}

void WriteShard(const std::string& root, const GenShard& shard) {
  const std::string path = root + "/" + shard.rel_path;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::vector<std::string> payloads;
  for (const GenRecord& r : shard.records) payloads.push_back(r.payload);
  test::WriteShard(path, payloads);
}

}  // namespace

GenDataset WriteDataset(const std::string& root, uint64_t seed) {
  GenDataset ds;
  ds.root = root;
  Gen g(seed);

  GenShard one{kShardOne, {}};
  one.records.push_back(MakeExample(g, 0, /*awkward=*/true, 0));

  GenShard twelve{kShardTwelve, {}};
  for (uint64_t r = 0; r < 12; ++r) {
    if (r == 3) {
      twelve.records.push_back(RawRecord(std::string("hello, not an Example \x00\x01\xff", 25)));
    } else if (r == 4) {
      twelve.records.push_back(RawRecord(""));  // decodes as an empty Example: an empty folder
      twelve.records.back().is_example = true;
    } else if (r == 6) {
      twelve.records.push_back(RawRecord(NonUtf8KeyExample()));
    } else if (r == 8) {
      twelve.records.push_back(RawRecord(g.Bytes(300)));
    } else {
      twelve.records.push_back(MakeExample(g, r, r % 3 == 0, 0));
    }
  }
  ds.needle = "needle-7f3a9c-in-twelve-5";
  {
    // Put the needle into record 5's caption.
    GenRecord& rec = twelve.records[5];
    for (OwnedFeature& f : rec.features) {
      if (f.name == "caption") f.bytes = {"first line", ds.needle};
    }
    rec.payload = example::EncodeExample(ToTable(rec.features));
    ds.needle_file = std::string(kShardTwelve) + "/05/caption.txt";
  }

  GenShard big{kShardBig, {}};
  for (uint64_t r = 0; r < 130; ++r) {
    // Record 7 carries a 300 KiB image: reads cross many FUSE request sizes.
    big.records.push_back(MakeExample(g, r, r % 7 == 0, r == 7 ? 300 * 1024 : 0));
  }

  GenShard nested{kShardNested, {}};
  for (uint64_t r = 0; r < 3; ++r) nested.records.push_back(MakeExample(g, r, r == 1, 0));

  GenShard empty{kShardEmpty, {}};

  ds.shards = {one, twelve, big, nested, empty};
  for (const GenShard& s : ds.shards) WriteShard(root, s);

  ds.plain_files["dataset_info.json"] =
      "{\n  \"name\": \"generated\",\n  \"splits\": [\"train\"]\n}\n";
  ds.plain_files["nested/notes.txt"] = "plain notes, not a shard\n";
  ds.plain_files["nested/deep/blob.bin"] = g.Bytes(5000);
  ds.plain_files["nested/deep/zero_length"] = "";
  for (const auto& [rel, bytes] : ds.plain_files) WriteWholeFile(root + "/" + rel, bytes);
  std::filesystem::create_directories(root + "/empty_dir");
  ds.dirs = {"nested", "nested/deep", "empty_dir"};
  return ds;
}

ExpectedTree GenDataset::Expected() const {
  ExpectedTree t;
  for (const std::string& d : dirs) t[d] = ExpectedNode{true, ""};
  for (const auto& [rel, bytes] : plain_files) t[rel] = ExpectedNode{false, bytes};
  for (const GenShard& s : shards) {
    t[s.rel_path] = ExpectedNode{true, ""};
    for (size_t r = 0; r < s.records.size(); ++r) {
      AddRecordLayout(s.rel_path + "/" + RecordDirName(r, s.records.size()), s.records[r].payload,
                      &t);
    }
  }
  return t;
}

const GenShard& GenDataset::Shard(const std::string& rel_path) const {
  for (const GenShard& s : shards) {
    if (s.rel_path == rel_path) return s;
  }
  ADD_FAILURE() << "no generated shard " << rel_path;
  return shards.front();
}

void GeneratedMountTestBase::SetUp() {
  TFRFS_SKIP_WITHOUT_FUSE();
  src_ = tmp_.Subdir("src");
  ds_ = WriteDataset(src_, seed_);
  ASSERT_FALSE(HasFatalFailure());
  const absl::Status err = mount_.Start({src_}, args_);
  ASSERT_TRUE(err.ok()) << err;
}

void GeneratedMountTestBase::TearDown() {
  if (mount_.pid() <= 0) return;
  std::string err;
  EXPECT_EQ(mount_.Stop(&err), 0) << "daemon exit code after fusermount3 -u; " << err
                                  << "\nstderr:\n"
                                  << mount_.Stderr();
}

}  // namespace tfrecordfs::mount_test
