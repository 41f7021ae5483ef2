// Compressed twins: tfrecordfs-gen writes the same dataset plain, as GZIP
// (several members per shard) and as ZLIB; each is mounted and every file of
// every compressed shard must equal its plain twin's (mode, size, bytes),
// with the shard directory keeping the compressed file's name.
#include <sys/stat.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "mount_harness.h"

namespace tfrecordfs::mount_test {
namespace {

std::string GenPath() {
  const char* root = std::getenv("TFRECORDFS_BUILD_ROOT");
  return root ? std::string(root) + "/src/gen/tfrecordfs-gen" : "";
}

// Generates `mode` (sample or synthetic) into dir with extra flags.
void Generate(const std::string& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {GenPath()};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.begin() + 2, dir);
  CommandResult r = RunCommand(argv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

// The walk of a mount with each compressed shard's name mapped to its plain
// twin's (`suffix` dropped from the first path component).
std::map<std::string, WalkedNode> Renamed(std::map<std::string, WalkedNode> walked,
                                          const std::string& suffix) {
  std::map<std::string, WalkedNode> out;
  for (auto& [rel, node] : walked) {
    const size_t slash = rel.find('/');
    std::string top = rel.substr(0, slash);
    if (absl::EndsWith(top, suffix)) top.resize(top.size() - suffix.size());
    out[slash == std::string::npos ? top : top + rel.substr(slash)] = std::move(node);
  }
  return out;
}

class CompressedTwinTest : public ::testing::TestWithParam<std::vector<std::string>> {
 protected:
  void SetUp() override {
    TFRFS_SKIP_WITHOUT_FUSE();
    struct stat st;
    if (GenPath().empty() || ::stat(GenPath().c_str(), &st) != 0) {
      GTEST_SKIP() << "tfrecordfs-gen not built at '" << GenPath() << "'";
    }
  }
  TempDir tmp_;
};

TEST_P(CompressedTwinTest, EveryFileEqualsItsPlainTwin) {
  const std::vector<std::string>& gen = GetParam();
  const std::string plain = tmp_.path() + "/plain";
  Generate(plain, gen);
  ASSERT_FALSE(HasFatalFailure());
  Mount pm;
  ASSERT_EQ(pm.Start({plain}), "");
  auto expected = WalkTree(pm.mountpoint());
  RemoveEmptyStaging(&expected);
  size_t shards = 0;
  for (const auto& [rel, node] : expected) {
    if (rel.find('/') == std::string::npos && absl::EndsWith(rel, ".tfrecord")) ++shards;
  }
  ASSERT_GE(shards, 2u);

  struct Variant {
    std::string name;
    std::vector<std::string> flags;
    std::string suffix;  // added to ".tfrecord"
  };
  const std::vector<Variant> variants = {
      {"gzip", {"--compression", "gzip"}, ".gz"},
      {"gzip3", {"--compression", "gzip", "--members", "3"}, ".gz"},
      {"zlib", {"--compression", "zlib"}, ".zlib"},
  };
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    const std::string dir = tmp_.path() + "/" + v.name;
    std::vector<std::string> args = gen;
    args.insert(args.end(), v.flags.begin(), v.flags.end());
    Generate(dir, args);
    ASSERT_FALSE(HasFatalFailure());
    Mount m;
    // A small span: many checkpoints, so reads resume mid-stream.
    ASSERT_EQ(m.Start({dir}, {"-o", "gz_span=64K,inflate_cache_mb=1"}), "");
    auto raw = WalkTree(m.mountpoint());
    RemoveEmptyStaging(&raw);
    size_t compressed_shards = 0;
    for (const auto& [rel, node] : raw) {
      if (rel.find('/') == std::string::npos && absl::EndsWith(rel, ".tfrecord" + v.suffix)) {
        ++compressed_shards;
        EXPECT_TRUE(S_ISDIR(node.mode)) << rel << " is not shown as a directory";
      }
    }
    EXPECT_EQ(compressed_shards, shards);
    const auto got = Renamed(std::move(raw), v.suffix);
    ASSERT_EQ(got.size(), expected.size());
    size_t files = 0;
    for (const auto& [rel, want] : expected) {
      auto it = got.find(rel);
      ASSERT_NE(it, got.end()) << rel << " missing";
      const WalkedNode& have = it->second;
      EXPECT_EQ(have.error, want.error) << rel;
      EXPECT_EQ(have.mode, want.mode) << rel;
      if (S_ISREG(want.mode)) {
        ++files;
        EXPECT_EQ(have.size, want.size) << rel;
        EXPECT_TRUE(have.content == want.content) << rel << ": contents differ";
      }
    }
    EXPECT_GT(files, 100u);
    std::string err;
    EXPECT_EQ(m.Stop(&err), 0) << err << m.Stderr();
    EXPECT_EQ(m.Stderr().find("warning"), std::string::npos) << m.Stderr();
  }
  std::string err;
  EXPECT_EQ(pm.Stop(&err), 0) << err;
}

INSTANTIATE_TEST_SUITE_P(Datasets, CompressedTwinTest,
                         ::testing::Values(
                             // JPEG records with every feature kind.
                             std::vector<std::string>{"sample", "--records", "60", "--shards", "3"},
                             // Incompressible 40 KiB images: stored blocks, several MiB per shard.
                             std::vector<std::string>{"synthetic", "--records", "300", "--shards",
                                                      "2", "--bytes", "40000"}),
                         [](const ::testing::TestParamInfo<std::vector<std::string>>& info) {
                           return info.param[0];
                         });

}  // namespace
}  // namespace tfrecordfs::mount_test
