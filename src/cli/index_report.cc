// index's report (reports.h).
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/cli/progress.h"
#include "src/cli/reports.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/objstore/listing.h"

namespace tfrecordfs::cli {

void LogDamagedShards(const std::vector<scan::ScannedShard>& shards) {
  for (const scan::ScannedShard& shard : shards) {
    for (const std::string& line : index::FormatProblems(shard.path, shard.index->problems())) {
      log::Warning(line);
    }
    if (!shard.index->problems().empty()) {
      log::Warning(shard.path, ": damaged shard: ", shard.index->num_records(),
                   " record(s) indexed");
    }
  }
}

std::string IndexReport(const IndexRun& run, bool quiet) {
  for (const auto& [dir, failure] : run.totals.unwritable_dirs) {
    log::Error("cannot write indexes beside the shards in ", dir, " (", failure.second,
               " shard(s)): ", failure.first,
               objstore::IsObjectUrl(dir)
                   ? "; may these credentials write into the bucket? Without --beside the "
                     "indexes go to the per-user cache"
                   : "; is the directory writable? --index-dir PATH keeps them elsewhere");
  }
  if (quiet) return "";
  const index::StoreStats& s = run.stats;
  const double secs = run.seconds;
  std::string out;
  absl::StrAppendFormat(
      &out,
      "indexed %d shard(s), %d record(s), %s in %.3f s (%s records/s): %d walked, %d grown, "
      "%d already valid; index files %s\n",
      s.from_shared + s.from_cache + s.grown + s.walked, s.records,
      HumanBytes(static_cast<double>(s.bytes)), secs,
      HumanCount(secs > 0 ? static_cast<double>(s.records) / secs : 0), s.walked, s.grown,
      s.from_shared + s.from_cache, run.where);
  const double index_bytes = static_cast<double>(run.totals.compressed_index_bytes);
  const double bytes = static_cast<double>(run.totals.compressed_bytes);
  if (index_bytes > 0) {
    absl::StrAppendFormat(
        &out,
        "%d compressed shard(s), %s: their new index files take %s (%.2f%% of the compressed "
        "size, %s per GiB)\n",
        run.totals.compressed_shards, HumanBytes(bytes), HumanBytes(index_bytes),
        100.0 * index_bytes / bytes, HumanBytes(index_bytes * (1 << 30) / bytes));
  }
  if (run.dali != nullptr) {
    absl::StrAppendFormat(&out, "wrote %d DALI index file(s) in %s\n", run.dali->written,
                          run.dali_dir);
  }
  return out;
}

}  // namespace tfrecordfs::cli
