// A seeded, generated source tree for the mount tests: shards of 1, 12 and
// 130 records (record names of 1, 2 and 3 digits), every feature layout,
// awkward names, non-Example payloads, an empty shard, plain files and
// nested directories.
#ifndef TFRECORDFS_TESTS_MOUNT_GENERATED_DATASET_H_
#define TFRECORDFS_TESTS_MOUNT_GENERATED_DATASET_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "expectations.h"
#include "gtest/gtest.h"
#include "mount_harness.h"

namespace tfrecordfs::mount_test {

struct GenRecord {
  std::string payload;
  // True when the payload is an Example built from `features` (sorted by
  // name; kNone entries are the kindless Feature{} ones).
  bool is_example = false;
  std::vector<OwnedFeature> features;
};

struct GenShard {
  std::string rel_path;  // relative to the source root (= the mount root)
  std::vector<GenRecord> records;
};

struct GenDataset {
  std::string root;  // the source directory
  std::vector<GenShard> shards;
  std::map<std::string, std::string> plain_files;  // rel path -> bytes
  std::vector<std::string> dirs;                   // rel paths of source dirs
  // A text value that occurs in exactly one file of the mount.
  std::string needle;
  std::string needle_file;  // its mount-relative path

  // The whole expected mount tree, computed from the payloads through
  // DecodeExample + LayoutExample.
  ExpectedTree Expected() const;
  const GenShard& Shard(const std::string& rel_path) const;
};

// Writes the dataset under `root` (which must exist) with ShardWriter.
// Deterministic for a given seed. Fails the current test on I/O errors.
GenDataset WriteDataset(const std::string& root, uint64_t seed);

// Shard paths inside the generated dataset.
inline constexpr char kShardOne[] = "one.tfrecord";                 // 1 record
inline constexpr char kShardTwelve[] = "train-00000-of-00002";      // 12 records
inline constexpr char kShardBig[] = "train-00001-of-00002";         // 130 records
inline constexpr char kShardNested[] = "nested/deep/val.tfrecord";  // 3 records
inline constexpr char kShardEmpty[] = "nested/empty.tfrecord";      // 0 records

// A test on a generated dataset mounted for it: SetUp skips without FUSE,
// writes WriteDataset(tmp_/src, seed) and mounts it with `args`; TearDown
// expects a daemon still running to exit 0 on `fusermount3 -u`. A test that
// ends the daemon itself leaves nothing for TearDown to do (pid() is -1).
class GeneratedMountTestBase : public ::testing::Test {
 protected:
  explicit GeneratedMountTestBase(uint64_t seed, std::vector<std::string> args = {})
      : seed_(seed), args_(std::move(args)) {}
  void SetUp() override;
  void TearDown() override;

  std::string M(const std::string& rel) const { return mount_.path(rel); }

  TempDir tmp_;
  std::string src_;
  GenDataset ds_;
  Mount mount_;

 private:
  uint64_t seed_;
  std::vector<std::string> args_;
};

}  // namespace tfrecordfs::mount_test

#endif  // TFRECORDFS_TESTS_MOUNT_GENERATED_DATASET_H_
