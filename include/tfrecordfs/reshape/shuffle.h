// The global shuffle of `reshard --shuffle`, in two passes that run as one
// process or as N parts with the same result, in bounded memory.
//
// The order. Record r of the shard shown at mount path P gets the key
// ShuffleKey(seed, Fnv1a64(P), r); the output holds the records sorted by
// (key, Fnv1a64(P), r). The keys are a 64-bit mix of the three (SplitMix64's
// finalizer), so the order is a uniformly random permutation up to the
// hash's quality, the same on every machine, and a function of the inputs
// and the seed only: not of N, not of the memory budget, not of the order
// the parts run in. (Until issue 37 a single process drew a Fisher-Yates
// permutation of all records, which needs 8 bytes per record in one place.)
//
// Pass 1, map (each part over its own input files, plan.h): reads its
// records in file order, gives each its key and its bucket
// floor(key * M / 2^64) (M buckets: the key range cut in M equal slices, so
// bucket order is key order), and collects them in memory up to half the
// budget; then sorts them by key and writes them as one run file (and its
// bucket table), and goes on. A part's output: its runs, their tables, and
// the number and framed bytes of its records in each bucket.
//
// Pass 2, reduce (each part over its own output shards): the output shards'
// boundaries come from the buckets' totals over every map part (positions
// with --shards S: record counts split as evenly as possible, earlier
// shards taking the remainder; bytes with a shard size: S = ceil(total
// framed bytes / size) shards, a record going to shard
// floor(framed bytes before it * S / total): shards of about the size,
// whose records may reach past it by less than one record). Part K writes
// the shards [SplitByWeight(1 per shard, N)[K], ...[K+1]); it reads the
// buckets holding their records from every run, a bucket at a time, sorts
// it by key and appends its records in that order. A bucket larger than
// half the budget is read in slices of its key range (each slice a pass
// over the bucket's segments), so memory stays within the budget whatever
// the dataset's size.
//
// Bytes moved: every record is read twice (its shard, its run) and written
// twice (its run, its output shard); bucket tables add 8 bytes per bucket
// per run.
//
// Thread-safety: functions without state, run on the caller's thread.
#ifndef TFRECORDFS_RESHAPE_SHUFFLE_H_
#define TFRECORDFS_RESHAPE_SHUFFLE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/reshape/parts.h"
#include "tfrecordfs/reshape/plan.h"
#include "tfrecordfs/reshape/reshape.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::reshape {

// The key of record `record` of the shard whose mount path hashes to
// `file` (Fnv1a64), for `seed`:
//   mix(z) = SplitMix64's finalizer (z ^= z >> 30; z *= 0xbf58476d1ce4e5b9;
//            z ^= z >> 27; z *= 0x94d049bb133111eb; z ^= z >> 31)
//   key = mix(mix(seed ^ mix(file + 0x9e3779b97f4a7c15))
//             + (record + 1) * 0x9e3779b97f4a7c15)      (all mod 2^64)
uint64_t ShuffleKey(uint64_t seed, uint64_t file, uint64_t record);

// The number of buckets for `input_bytes` (the SOURCE files' sizes) and a
// `memory` budget: ceil(4 * input_bytes / memory), at least 1, at most
// 1 << 20: a bucket of about a quarter of the budget, so that with its
// entries' overhead it fits the reduce's half of the budget and is read
// once, not in slices. Every part computes the same M from the same
// inputs.
uint32_t ShuffleBuckets(uint64_t input_bytes, uint64_t memory);

// The least memory budget (--memory) the shuffle takes.
inline constexpr uint64_t kMinShuffleMemory = uint64_t{1} << 20;

// One input of the map: a shard (its index and source), the hash of its
// mount path, and the records it contributes ([first, last): a piece of a
// split shard, or all).
struct MapInput {
  const index::ShardIndex* index = nullptr;
  const source::ShardSource* source = nullptr;
  uint64_t file = 0;  // Fnv1a64(mount path)
  uint64_t first = 0, last = 0;
};

struct ShuffleOptions {
  uint64_t seed = 0;
  uint32_t buckets = 1;
  uint64_t memory = uint64_t{512} << 20;
  bool skip_damaged = false;
};

// The bucket totals of one map part, and its runs (file names relative to
// its folder).
struct MapReport {
  std::vector<std::string> runs;    // run-NNNNN; each with run-NNNNN.idx
  std::vector<uint64_t> run_bytes;  // each run's size
  std::vector<uint32_t> run_crcs;   // and CRC32C (unmasked), computed as written
  std::vector<uint64_t> counts;     // per bucket
  std::vector<uint64_t> bytes;      // framed bytes per bucket
  uint64_t records = 0;
  std::vector<Dropped> skipped;  // with skip_damaged
};

// Pass 1 into the existing folder `dir`: writes run-NNNNN, run-NNNNN.idx
// and buckets.bin (the totals: per bucket, count and framed bytes, 16
// bytes LE). control.mid_output is called once the first run is written. Errors: a damaged record
// or walk damage without skip_damaged (DataLoss naming the shard, record and offset), I/O errors,
// Cancelled.
absl::StatusOr<MapReport> ShuffleMap(const std::vector<MapInput>& inputs, const std::string& dir,
                                     const ShuffleOptions& options, const Control& control = {});

// Pass 2 over the folders of every map part (in part order; each as
// ShuffleMap left it): writes this part's output shards (all of them
// without `options.part`) into options.output_dir, named as Reshard names
// them, under temporary names renamed together at the end (never over an
// existing file: AlreadyExists, nothing written). `options` as for
// Reshard (shards or shard_size, prefix, codec, part). Errors: a map
// folder that is incomplete, I/O, Cancelled.
absl::StatusOr<ReshardReport> ShuffleReduce(const std::vector<std::string>& map_dirs,
                                            const ShuffleOptions& shuffle,
                                            const ReshardOptions& options,
                                            const Control& control = {});

// ---- as parts (`reshard --shuffle --part K/N --pass map|reduce`, parts.h) ----

// Pass 1 of part manifest.part of the plan manifest.plan into DIR: ShuffleMap
// into a work folder of the part (PartOutput, phase "map"), the codec its
// shards share noted beside the runs, then published with `manifest` (its
// command, plan, part and inputs; the runs and their tables are added as its
// outputs). Errors: ShuffleMap's, PartOutput's.
absl::StatusOr<MapReport> ShuffleMapPart(const std::vector<MapInput>& inputs,
                                         const std::string& dir, PartManifest manifest,
                                         const ShuffleOptions& options,
                                         const Control& control = {});

// What pass 2 needs of pass 1: the published map folders of parts 0..N-1
// of `plan` in DIR (in part order), the inputs they read, and the codec all
// their shards share (nullopt: none, or several).
struct MappedParts {
  std::vector<std::string> dirs;
  std::vector<ManifestInput> inputs;
  std::optional<source::Codec> codec;
};
// FailedPrecondition naming the parts whose pass 1 is not there.
absl::StatusOr<MappedParts> FindMapParts(const std::string& dir, const std::string& plan,
                                         uint32_t parts);

// The buckets [first, last) that part options.part of the reduce reads
// (those holding records of its output shards; ShuffleReduce reads no
// other), from the contents of every map part's buckets.bin (16 bytes a
// bucket). {0, 0} when it writes no shard. FailedPrecondition for totals
// of another bucket count. Used to fetch only those bytes of the runs of a
// map in a bucket (bucket_parts.h).
absl::StatusOr<std::pair<uint32_t, uint32_t>> ReduceBuckets(const std::vector<std::string>& totals,
                                                            uint32_t buckets,
                                                            const ReshardOptions& options);
// The name of a map part's totals file ("buckets.bin").
std::string ShuffleBucketsFileName();

}  // namespace tfrecordfs::reshape

#endif  // TFRECORDFS_RESHAPE_SHUFFLE_H_
