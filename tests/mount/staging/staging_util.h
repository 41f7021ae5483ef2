// Helpers for the staging / repack real-mount tests (tests/mount/staging/).
//
// The daemons are mount_harness.h's Mount, run with a MountConfig that puts
// the mount point, staging_dir, output_dir and logs in one Scratch (and,
// for crash tests, TFRECORDFS_FAULT: see repack/pack.h). The rest reads
// packed shards back with the project's own reader
// (record::ForEachRecordInBuffer) and compares records feature by feature
// (example::DecodeExample; floats bit for bit).
//
// Thread-safety: none; use from the test's main thread.
#ifndef TFRECORDFS_TESTS_MOUNT_STAGING_STAGING_UTIL_H_
#define TFRECORDFS_TESTS_MOUNT_STAGING_STAGING_UTIL_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "expectations.h"
#include "mount_harness.h"
#include "testing/canon.h"
#include "testing/shard.h"  // test::WriteShard, for the shards the tests mount
#include "tfrecordfs/example/sequence.h"

namespace tfrecordfs::mount_test::staging_test {

// The usual layout of one test's scratch space: src/ (the source tree),
// mnt/, store/ (staging_dir), out/ (output_dir), logs/.
struct Scratch {
  Scratch();
  TempDir tmp;
  std::string src, mnt, store, out, logs;
  // store + "/records": what MNT/staging/ shows.
  std::string records() const { return store + "/records"; }
};

// `staging_dir=S,output_dir=O,prefix=P,shard_size=Z` (empty parts left out).
std::vector<std::string> PackOptions(const Scratch& s, const std::string& prefix,
                                     const std::string& shard_size = "");

// The usual daemon of a test: `sources` mounted at s.mnt with
// PackOptions(s, prefix, shard_size), logs in s.logs, no fault, no extra
// environment.
MountConfig PackConfig(const Scratch& s, std::vector<std::string> sources,
                       const std::string& prefix, const std::string& shard_size = "");

// Mounts `sources` with PackOptions(s, prefix), copies each mount-relative
// record folder froms[i] to MNT/staging/cNNNN with `cp -r` (one shell; name
// order is copy order), packs with `tfrecordfs unmount` and returns the
// packed payloads in copy order. Fails the test (and returns what it has)
// when a step fails or the staging folder is not emptied.
std::vector<std::string> CopyAndPack(const Scratch& s, const std::vector<std::string>& sources,
                                     const std::vector<std::string>& froms,
                                     const std::string& prefix);

// open(O_WRONLY|O_CREAT|O_TRUNC) + write + close, each errno recorded.
struct WriteOutcome {
  int open_errno = 0;
  int write_errno = 0;
  int close_errno = 0;
};
WriteOutcome WriteAndClose(const std::string& path, const std::string& bytes);

// Sorted entry names of a directory (no "." / ".."); fails the test when it
// cannot be listed.
std::vector<std::string> ListDir(const std::string& dir);
bool Exists(const std::string& path);
bool IsDir(const std::string& path);

// A shard file written by the pack, read back with the project's reader.
struct PackedShard {
  std::string name;
  uint64_t file_size = 0;
  std::vector<std::string> payloads;
};
// A GZIP or ZLIB file decompressed by zlib itself: nullopt unless it is
// exactly one whole stream (one GZIP member), as the pack writes.
std::optional<std::string> InflateOneStream(absl::string_view file);

// Every `*.tfrecord` (or `.tfrecord.gz` / `.tfrecord.zlib`, decompressed by
// zlib: one stream each) regular file in `dir` whose name starts with
// `prefix` + "-", in name order. Fails the test on a read/framing error.
std::vector<PackedShard> ReadPackedShards(const std::string& dir, const std::string& prefix);
// All payloads of the shards, in shard then record order.
std::vector<std::string> AllPayloads(const std::vector<PackedShard>& shards);

// A decoded record: features by name, kindless ones too (the mount shows
// them as empty `<name>.none` files, so they round-trip).
struct DecodedRecord {
  bool is_example = false;
  std::map<std::string, OwnedFeature> features;
};
DecodedRecord Decode(const std::string& payload);

// A SequenceExample as text, kindless context features included, for
// comparing feature by feature with a readable diff (tests/testing/canon.h).
using test::SequenceText;

// Expects `packed` to be the same record as `original`: for Examples the
// same features (names, kinds, values; floats bit-exact), for
// SequenceExamples the same SequenceText, for ExampleListWithContexts the
// same examples and context (feature by feature), for other payloads the
// same bytes.
// `what` names the record in failure messages.
void ExpectSameRecord(const std::string& original, const std::string& packed,
                      const std::string& what);

// Writes `payloads` as the shard `dir`/`base` in `codec` ("none", "gzip" or
// "zlib"; compressed by gzip(1) or /usr/bin/python3's zlib, not by the
// project's writer, as `base`.gz / `base`.zlib). Returns the file's name;
// fails the test when a tool fails.
std::string WriteShardWithCodec(const std::string& dir, const std::string& base,
                                const std::vector<std::string>& payloads, const std::string& codec);

// Builders for expected features.
OwnedFeature Int64Feature(std::string name, std::vector<int64_t> values);
OwnedFeature FloatFeature(std::string name, std::vector<float> values);
OwnedFeature BytesFeature(std::string name, std::vector<std::string> values);
// The serialized Example of `features` (any order).
std::string ExamplePayload(std::vector<OwnedFeature> features);

// The record's int64 feature `name` with exactly one value, or nullopt.
std::optional<int64_t> SingleInt(const DecodedRecord& r, const std::string& name);

// What the independent reader (tests/cli/tfrecord_check.py: no tfrecordfs
// code; run by /usr/bin/python3 from $TFRECORDFS_SOURCE_ROOT) reads from
// `shard`: its codec ("none", "gzip", "zlib") on the first line, then one
// line per record, the Python expression `per_record` of the payload `p`
// (the module is `t`): by default the tf.train.Example described by
// t.describe_example. Fails the test (and returns what it has) when the
// reader fails: a damaged shard, a bad CRC.
std::vector<std::string> ReadIndependently(const std::string& shard,
                                           const std::string& per_record = "t.describe_example(p)");

}  // namespace tfrecordfs::mount_test::staging_test

#endif  // TFRECORDFS_TESTS_MOUNT_STAGING_STAGING_UTIL_H_
