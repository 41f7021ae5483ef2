// The work of `tfrecordfs index` beyond the scan that builds and saves the
// indexes (scan::Scan with an index store): what the scan's threads saw of
// each shard (saves that failed, the compressed shards' index sizes), and
// the NVIDIA DALI index files written for the scanned shards.
//
// Thread-safety: IndexTally::Observe may be called from the scan's threads
// at once (scan::ScanOptions::on_shard); read the tally once they are done.
// WriteDaliIndexes is reentrant.
#ifndef TFRECORDFS_SCAN_INDEXING_H_
#define TFRECORDFS_SCAN_INDEXING_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/scan/scan.h"

namespace tfrecordfs::scan {

// Where the indexes are saved (index::StoreOptions).
enum class IndexPlace { kCache, kShared, kBeside };

// What IndexTally saw of the shards.
struct IndexTotals {
  bool save_failed = false;
  // kBeside: directory -> (the first reason, shards whose index it cost).
  std::map<std::string, std::pair<std::string, int>> unwritable_dirs;
  // Compressed shards, their bytes and their new index files' bytes.
  uint64_t compressed_shards = 0, compressed_bytes = 0, compressed_index_bytes = 0;
};

class IndexTally {
 public:
  explicit IndexTally(IndexPlace place) : place_(place) {}

  // One scanned shard: a save that failed is logged (kShared: per shard) or
  // counted against its directory (kBeside: said once per directory by the
  // report); where its index came from is logged at debug level.
  void Observe(const ScannedShard& shard);

  IndexTotals totals() const;

 private:
  const IndexPlace place_;
  mutable Mutex mu_;
  IndexTotals totals_ ABSL_GUARDED_BY(mu_);
};

struct DaliResult {
  uint64_t written = 0;
  bool failed = false;                  // a damaged shard, or a file not written (logged)
  std::vector<std::string> compressed;  // GZIP/ZLIB shards, which get none
};

// DIR/<mount path>.idx for every plain, undamaged shard (index::DaliIndexText,
// recorded with index::RecordDaliIndex so that a commit rewrites it), with
// the folders it needs. Logs each shard that gets none and why.
DaliResult WriteDaliIndexes(const std::vector<ScannedShard>& shards, const std::string& dir);

}  // namespace tfrecordfs::scan

#endif  // TFRECORDFS_SCAN_INDEXING_H_
