// What is in a set of shards, without a mount: a schema summary over some
// or all records, a check of every record, and how to spread a sample over
// shards. The `schema` and `verify` commands are thin adapters over this.
//
// Payload kinds: a payload is a tf.train.Example when DecodeExample accepts
// it, else a tf.train.SequenceExample when DecodeSequenceExample does (a
// SequenceExample without feature_lists is byte for byte an Example), else
// "other" (TensorBoard events, raw strings, ExampleListWithContext, ...).
//
// Thread-safety: SchemaBuilder is not synchronised; the functions are
// reentrant.
#ifndef TFRECORDFS_INSPECT_INSPECT_H_
#define TFRECORDFS_INSPECT_INSPECT_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::inspect {

// ---- schema ----

// One feature (or the steps of one feature list) over the records seen.
struct FeatureStats {
  std::string name;
  uint64_t present = 0;  // records (steps, for a list) holding the key
  uint64_t empty = 0;    // ... as a Feature{} with no list (a missing value)
  uint64_t int64_records = 0, float_records = 0, bytes_records = 0;
  // Values per record, over the records where it has a list.
  uint64_t min_count = std::numeric_limits<uint64_t>::max();
  uint64_t max_count = 0;
  // Value ranges (int64 / float lists; NaNs are counted, not compared).
  std::optional<int64_t> min_int64, max_int64;
  std::optional<float> min_float, max_float;
  uint64_t nan_values = 0;
  // Bytes values: how many, how many are single-line text, how many parse
  // as serialized tensors, and the sniffed types of the others
  // (naming::SniffExtension: ".jpg" -> values).
  uint64_t bytes_values = 0, text_values = 0, tensor_values = 0;
  uint64_t min_bytes = std::numeric_limits<uint64_t>::max(), max_bytes = 0;
  std::map<std::string, uint64_t> sniffed;
  // Tensors: dtypes seen, and the smallest and largest size of each axis
  // (set while every tensor has the same rank; `mixed_rank` otherwise).
  std::map<std::string, uint64_t> tensor_dtypes;
  std::vector<int64_t> min_shape, max_shape;
  bool mixed_rank = false;
  // Seen in SequenceExample or ExampleListWithContext contexts (else in
  // Examples only).
  bool in_context = false;

  // "int64", "float", "bytes", "text" (every bytes value single-line
  // text), "tensor" (every bytes value a serialized tensor), "empty" (only
  // Feature{}), or "mixed" (several kinds).
  std::string Kind() const;
  // "[3,224..256,224]": each axis as min..max (one number when equal); ""
  // unless Kind() is "tensor".
  std::string ShapeRange() const;
};

struct ListStats {
  std::string name;
  uint64_t present = 0;  // SequenceExamples holding the list
  uint64_t min_steps = std::numeric_limits<uint64_t>::max(), max_steps = 0;
  FeatureStats steps;  // over every step of every record (present = steps)
};

class SchemaBuilder {
 public:
  void Add(absl::string_view payload);

  uint64_t records() const { return records_; }
  uint64_t examples() const { return examples_; }
  uint64_t sequence_examples() const { return sequence_examples_; }
  uint64_t example_lists() const { return example_lists_; }
  // Examples that are TF-Ranking Example-in-Example lists (not in examples()).
  uint64_t examples_in_examples() const { return examples_in_examples_; }
  // The examples of every ExampleListWithContext and Example-in-Example read.
  uint64_t listed_examples() const { return listed_examples_; }
  uint64_t others() const { return others_; }
  // The Example decoder's message for the first payload that was neither.
  const std::string& first_other_reason() const { return first_other_reason_; }
  // By name (bytewise).
  const std::map<std::string, FeatureStats>& features() const { return features_; }
  const std::map<std::string, ListStats>& lists() const { return lists_; }
  // The features of ExampleListWithContext (and Example-in-Example)
  // examples, by name (`present`
  // counts examples, of listed_examples()); their contexts' features are in
  // features(), `in_context`.
  const std::map<std::string, FeatureStats>& example_features() const { return example_features_; }

 private:
  uint64_t records_ = 0, examples_ = 0, sequence_examples_ = 0, example_lists_ = 0,
           examples_in_examples_ = 0, listed_examples_ = 0, others_ = 0;
  std::map<std::string, FeatureStats> example_features_;
  std::string first_other_reason_;
  std::map<std::string, FeatureStats> features_;
  std::map<std::string, ListStats> lists_;
};

// Records to read for a sample of at most about `n` records from shards
// holding `counts[s]` records: one from every shard with records (so more
// than n when there are more such shards), the rest of n in proportion to
// each shard's size, evenly spaced inside it (its first record included).
// All records when n >= their total. Sorted by (shard, record).
std::vector<std::pair<size_t, uint64_t>> PlanSample(const std::vector<uint64_t>& counts,
                                                    uint64_t n);

// ---- verify ----

inline constexpr uint64_t kNoRecord = std::numeric_limits<uint64_t>::max();

struct Damage {
  uint64_t record = kNoRecord;  // kNoRecord: damage between or after records
  uint64_t offset = 0;          // byte offset (uncompressed for a compressed shard)
  // Compressed shards: the compressed byte offset of the nearest checkpoint
  // at or before `offset` (where a reader resumes inflating to reach it).
  std::optional<uint64_t> checkpoint_offset;
  std::string reason;
};

struct ShardReport {
  uint64_t records = 0;  // indexed records
  uint64_t examples = 0, sequence_examples = 0, example_lists = 0,
           others = 0;  // of the intact ones
  std::string first_other_reason;
  std::vector<Damage> damage;  // by offset
  // Entries of `damage` naming a record, and those between or after records
  // (record == kNoRecord): each record is named at most once.
  uint64_t DamagedRecords() const;
  uint64_t DamagedSpans() const { return damage.size() - DamagedRecords(); }
};

// The checkpoints of a compressed shard's index checked against its stream
// (source::VerifyCheckpoints, one inflate of the shard): for indexes loaded
// from a file (the cache, an index directory, beside the shard), which
// anyone who can write there may have forged so that reads serve other
// records' bytes. DataLoss names the first checkpoint that does not match
// and says how to rebuild the index; I/O errors are errors; OK for plain
// and SNAPPY shards.
// `object`: the shard's object (ScannedShard::object), read instead of the
// file at idx.path().
absl::Status VerifyStoredCheckpoints(const index::ShardIndex& idx,
                                     const source::ObjectReader* object = nullptr);

// The damage the header walk of `idx` met outside the records in
// `damaged_records` (sorted record numbers whose reads failed), as
// VerifyShard reports it: a walk problem at the start or inside of a
// damaged record, or where the walk resynchronised right after one, is
// that record's and not listed again; the others are kNoRecord entries
// (stray bytes between records). The tail after the last record is
// CheckTail's, not listed here. No checkpoint offsets.
std::vector<Damage> DamageOutsideRecords(const index::ShardIndex& idx,
                                         const std::vector<uint64_t>& damaged_records);

// Reads every record of the shard `src` indexed by `idx`, checks both CRCs
// and the framing, and decodes each payload. Damaged: a record whose read
// fails, damage the header walk met outside such a record (stray bytes, a
// compressed stream that stops inflating, bytes after the last record:
// CheckTail), and, in a shard where some
// payload is an Example or SequenceExample, a payload that is neither (one
// writer wrote the shard). A shard of other payloads only (TensorBoard
// events) is not damaged: ShardReport counts them. `progress` gets (records,
// bytes) as they are read. Errors: I/O errors only.
// The bytes after the shard's last indexed record, when there are any: one
// Damage (kNoRecord, at the last record's end) whose reason says what the
// walk met there and after (a compressed stream that stops inflating:
// zlib's reason) and, when a record header with a good length CRC starts
// in the last record or after it but runs past the end, where that
// truncated record starts and how many bytes it lacks. nullopt when the
// records reach the end. Errors: I/O errors only.
absl::StatusOr<std::optional<Damage>> CheckTail(const index::ShardIndex& idx,
                                                const source::ShardSource& src);

// Records [first, last) of a shard: a piece of it (`--part`, reshape/plan.h).
struct RecordRange {
  uint64_t first = 0;
  uint64_t last = kNoRecord;  // kNoRecord: to the end
};

// With `range`, only its records are read, and damage outside records is
// reported where its byte offset lies in the range's bytes (from its first
// record's start, or 0, to the next record's start, or the end: the tail is
// checked with the last record): the reports of a shard's pieces, taken
// together, are the report of the whole shard, except that the "payload is
// neither an Example nor a SequenceExample" judgement is made per piece, and
// a walk problem at a piece's first bytes right after the previous piece's
// damaged record is listed apart.
absl::StatusOr<ShardReport> VerifyShard(
    const index::ShardIndex& idx, const source::ShardSource& src,
    const std::function<void(uint64_t, uint64_t)>& progress = nullptr, RecordRange range = {});

}  // namespace tfrecordfs::inspect

#endif  // TFRECORDFS_INSPECT_INSPECT_H_
