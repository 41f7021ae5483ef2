// The work of the read-only toolbox commands (count, schema, show, verify)
// over scanned shards: each returns a result and prints nothing; src/cli
// parses the command line and writes the result as text or JSON.
//
// Read errors of single shards or records are part of a result (and logged
// as they happen, as a mount logs them); the functions themselves do not
// fail. `progress`, when given, gets (shards, records, bytes) as they are
// done: what cli's ProgressBar::Add takes.
//
// Thread-safety: reentrant; a result is a plain value.
#ifndef TFRECORDFS_INSPECT_COMMANDS_H_
#define TFRECORDFS_INSPECT_COMMANDS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tfrecordfs/inspect/inspect.h"
#include "tfrecordfs/scan/scan.h"

namespace tfrecordfs::inspect {

using Progress = std::function<void(uint64_t shards, uint64_t records, uint64_t bytes)>;

// ---- count: records per shard, from the indexes alone ----

struct ShardCount {
  std::string path;
  uint64_t records = 0;  // indexed records
  size_t problems = 0;   // problems the header walk met (a damaged shard)
};

struct CountResult {
  std::vector<ShardCount> shards;  // in scan order
  uint64_t records = 0;            // over every shard
  bool damaged() const;            // some shard has problems
};

CountResult CountRecords(const std::vector<scan::ScannedShard>& shards);

// ---- schema: the features of a sample of records (or all) ----

// The records a schema reads (PlanSample over the shards) and their framed
// bytes (the work, for a progress bar).
struct SchemaPlan {
  std::vector<std::pair<size_t, uint64_t>> records;  // (shard, record)
  uint64_t records_total = 0;                        // in every shard
  uint64_t bytes = 0;
};

// About `sample` records spread over `shards`; every record with nullopt.
SchemaPlan PlanSchema(const std::vector<scan::ScannedShard>& shards,
                      std::optional<uint64_t> sample);

struct SchemaResult {
  SchemaBuilder schema;  // over the records read
  uint64_t records_total = 0;
  uint64_t shards = 0;
  uint64_t unreadable = 0;  // planned records not read (their shard or record unreadable)
};

SchemaResult ReadSchema(const std::vector<scan::ScannedShard>& shards, const SchemaPlan& plan,
                        const Progress& progress = nullptr);

// ---- show: chosen records of one shard ----

struct ShownRecord {
  uint64_t record = 0;
  uint64_t offset = 0;  // the record's (uncompressed) byte offset
  // The payload, or why it could not be read (no such record, damage).
  absl::StatusOr<std::string> payload;
};

// The records `wanted` of `shard` (in that order, repeats kept). Errors:
// the shard cannot be opened.
absl::StatusOr<std::vector<ShownRecord>> ReadRecords(const scan::ScannedShard& shard,
                                                     const std::vector<uint64_t>& wanted);

// ---- verify: every record of every shard checked ----

struct ShardVerdict {
  const scan::ScannedShard* shard = nullptr;  // of the shards given
  absl::Status status;  // not OK: unreadable (cannot open, forged checkpoints, I/O)
  ShardReport report;
};

struct VerifyResult {
  std::vector<ShardVerdict> shards;  // in scan order
  // Over every shard.
  uint64_t records = 0, damaged = 0, spans = 0, unreadable = 0, examples = 0, sequence_examples = 0,
           example_lists = 0, others = 0;
  bool intact() const { return damaged + spans + unreadable == 0; }
};

// The records of a shard to verify: one range per piece this run owns
// (`--part`), or the whole shard ({RecordRange{}}); none skips it.
using RangesOf = std::function<std::vector<RecordRange>(const scan::ScannedShard&)>;

// VerifyShard over the ranges of each shard (every record without
// `ranges`); an index loaded from a file gets its checkpoints checked
// first (VerifyStoredCheckpoints).
VerifyResult VerifyShards(const std::vector<scan::ScannedShard>& shards,
                          const RangesOf& ranges = nullptr, const Progress& progress = nullptr);

}  // namespace tfrecordfs::inspect

#endif  // TFRECORDFS_INSPECT_COMMANDS_H_
