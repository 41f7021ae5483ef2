// Helpers for the staging / repack real-mount tests (tests/mount/staging/).
//
// StagingDaemon runs `tfrecordfs -f -o staging_dir=...,output_dir=...,...
// SOURCE... MNT` as a child of the test on the same test::Daemon as
// mount_harness.h's Mount (tests/testing/daemon.h), but with the options,
// mount point and log directory the test chooses, and gives the test what
// crash tests need: the raw wait status of the daemon, an environment of its
// own (TFRECORDFS_FAULT, see repack/pack.h), a hard kill, and `tfrecordfs
// unmount`. Readiness is polled in /proc/self/mountinfo with a bounded
// deadline; nothing sleeps a fixed time.
//
// The rest reads packed shards back with the project's own reader
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

struct DaemonConfig {
  std::vector<std::string> sources;
  std::string mountpoint;
  // Joined with ',' into one `-o` argument when not empty.
  std::vector<std::string> options;
  // TFRECORDFS_FAULT for the daemon only ("" = unset).
  std::string fault;
  // More NAME=VALUE environment entries for the daemon (override ours).
  std::vector<std::string> env;
  // Directory for the daemon's stdout/stderr files.
  std::string log_dir;
};

// `staging_dir=S,output_dir=O,prefix=P,shard_size=Z` (empty parts left out).
std::vector<std::string> PackOptions(const Scratch& s, const std::string& prefix,
                                     const std::string& shard_size = "");

// The usual daemon of a test: `sources` mounted at s.mnt with
// PackOptions(s, prefix, shard_size), logs in s.logs, no fault, no extra
// environment.
DaemonConfig PackConfig(const Scratch& s, std::vector<std::string> sources,
                        const std::string& prefix, const std::string& shard_size = "");

class StagingDaemon {
 public:
  explicit StagingDaemon(DaemonConfig config);
  ~StagingDaemon();  // lazy unmount, SIGTERM, then SIGKILL if still around
  StagingDaemon(const StagingDaemon&) = delete;
  StagingDaemon& operator=(const StagingDaemon&) = delete;

  // Spawns the daemon and waits until MNT is a fuse.tfrecordfs mount.
  // Returns "" or why not (with the daemon's stderr).
  std::string Start();
  // Runs the daemon to completion without expecting a mount (for option
  // errors): returns its exit code, or -1 when it mounted or was signalled.
  int RunExpectingFailure();

  // `fusermount3 -u MNT` then waits for the daemon to end. Returns false
  // (and why in *error) when unmount fails or the daemon does not end;
  // *status gets the waitpid status.
  bool Unmount(int* status, std::string* error);
  // `tfrecordfs unmount MNT` (which waits for the pack), then reaps the
  // daemon into *status.
  CommandResult TfrUnmount(int* status);
  // Waits for the daemon to end (bounded); false on timeout.
  bool WaitExit(int* status);
  // kill -9 the daemon, reap it, and lazily unmount the dead mount.
  void KillHard();

  pid_t pid() const;
  std::string Stderr() const;

 private:
  DaemonConfig config_;
  std::optional<test::Daemon> daemon_;  // from Start() on
};

// Mounts `sources` with PackOptions(s, prefix), copies each mount-relative
// record folder froms[i] to MNT/staging/cNNNN with `cp -r` (one shell; name
// order is copy order), packs with `tfrecordfs unmount` and returns the
// packed payloads in copy order. Fails the test (and returns what it has)
// when a step fails or the staging folder is not emptied.
std::vector<std::string> CopyAndPack(const Scratch& s, const std::vector<std::string>& sources,
                                     const std::vector<std::string>& froms,
                                     const std::string& prefix);

// Human-readable waitpid status ("exit code 1", "signal Killed") and the
// exit code (-1 when signalled): tests/testing/process.h.
using test::DescribeWait;
using test::ExitCodeOfWait;
bool KilledBySigkill(int status);

// If MNT is still (or stale-ly) mounted, `fusermount3 -u -z` and wait until
// it is gone.
void CleanStaleMount(const std::string& mnt);

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

// A decoded record: features by name, kindless ones left out (the mount
// does not show them, so they cannot round-trip).
struct DecodedRecord {
  bool is_example = false;
  std::map<std::string, OwnedFeature> features;
};
DecodedRecord Decode(const std::string& payload);

// A SequenceExample as text, kindless context features left out, for
// comparing feature by feature with a readable diff (tests/testing/canon.h).
using test::SequenceText;

// Expects `packed` to be the same record as `original`: for Examples the
// same features (names, kinds, values; floats bit-exact), for
// SequenceExamples the same SequenceText, for other payloads the same bytes.
// `what` names the record in failure messages.
void ExpectSameRecord(const std::string& original, const std::string& packed,
                      const std::string& what);

// Builders for expected features.
OwnedFeature Int64Feature(std::string name, std::vector<int64_t> values);
OwnedFeature FloatFeature(std::string name, std::vector<float> values);
OwnedFeature BytesFeature(std::string name, std::vector<std::string> values);
// The serialized Example of `features` (any order).
std::string ExamplePayload(std::vector<OwnedFeature> features);

// The record's int64 feature `name` with exactly one value, or nullopt.
std::optional<int64_t> SingleInt(const DecodedRecord& r, const std::string& name);

// $TFRECORDFS_SOURCE_ROOT/../shared/data/real, or "" when absent.
std::string RealDataDir();

}  // namespace tfrecordfs::mount_test::staging_test

#endif  // TFRECORDFS_TESTS_MOUNT_STAGING_STAGING_UTIL_H_
