// What a mount should show, computed without the mount: shards read directly
// with the record reader, payloads decoded and laid out through naming, and
// the reverse direction (mounted files -> features) for independent checks.
#ifndef TFRECORDFS_TESTS_MOUNT_EXPECTATIONS_H_
#define TFRECORDFS_TESTS_MOUNT_EXPECTATIONS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mount_harness.h"
#include "tfrecordfs/example/example.h"

namespace tfrecordfs::mount_test {

struct ExpectedNode {
  bool is_dir = false;
  std::string content;  // files
};
// Keys are paths relative to the mount root ("shard/07/label").
using ExpectedTree = std::map<std::string, ExpectedNode>;

// The name of record `index` in a shard of `count` records: zero-padded to
// the digits of count - 1.
std::string RecordDirName(uint64_t index, uint64_t count);

// Adds the record directory `dir` and the files a payload lays out to.
void AddRecordLayout(const std::string& dir, const std::string& payload, ExpectedTree* out);

// A shard read straight from disk: each record's payload, or the error the
// checked read gave.
struct DirectShard {
  std::string error;  // non-empty when the shard could not be walked at all
  std::vector<std::optional<std::string>> payloads;
  std::vector<std::string> record_errors;  // parallel to payloads; "" when read fine
  std::vector<uint64_t> offsets;           // walk offsets (record starts + end)
};
DirectShard ReadShardDirectly(const std::string& path);

// Compares a walked mount subtree against expectations: same set of paths,
// type, mode (dirs 0555, files 0444; or with the owner's write bit, as a
// read-write mount's records show), stat size == bytes read == expected
// size, and the bytes themselves. `prefix` (may be "") is prepended to the
// walked keys before matching. Reports differences as test failures (at most
// a bounded number of each kind) and returns the number of differences.
size_t CompareTrees(const ExpectedTree& expected, const std::map<std::string, WalkedNode>& walked,
                    const std::string& prefix = "");

// A feature that owns its values, compared bit for bit (floats as bits).
struct OwnedFeature {
  std::string name;
  example::Kind kind = example::Kind::kNone;
  std::vector<std::string> bytes;
  std::vector<float> floats;
  std::vector<int64_t> int64s;
};
bool SameFeature(const OwnedFeature& a, const OwnedFeature& b);
std::string Describe(const OwnedFeature& f);

// A table whose views point into `features` (which must outlive it).
example::FeatureTable ToTable(const std::vector<OwnedFeature>& features);

// Rebuilds the features of one record from its mounted files (keys relative
// to the record directory) with the naming reverse functions only. `kinds`
// gives the kind each name has in the shard (the ParseNumeric hint). Errors
// (a file that does not parse back) go to *errors.
std::map<std::string, OwnedFeature> ReconstructRecord(
    const std::map<std::string, WalkedNode>& record_files,
    const std::map<std::string, example::Kind>& kinds, std::vector<std::string>* errors);

// Keys of `walked` under `dir` ("dir/x/y" -> "x/y"), with their nodes.
std::map<std::string, WalkedNode> Subtree(const std::map<std::string, WalkedNode>& walked,
                                          const std::string& dir);

}  // namespace tfrecordfs::mount_test

#endif  // TFRECORDFS_TESTS_MOUNT_EXPECTATIONS_H_
