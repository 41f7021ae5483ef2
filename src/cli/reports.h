// The toolbox commands' reports: each result (inspect/commands.h, ...)
// written as the text a person reads and as the JSON document --json
// prints (json_writer.h). Pure functions of the result: they print nothing,
// except where a function says it logs (stderr, as the command always has).
//
// Thread-safety: reentrant.
#ifndef TFRECORDFS_CLI_REPORTS_H_
#define TFRECORDFS_CLI_REPORTS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "src/cli/mount_status.h"
#include "src/cli/runtime.h"
#include "tfrecordfs/inspect/commands.h"
#include "tfrecordfs/repack/pack.h"
#include "tfrecordfs/reshape/repair_shards.h"
#include "tfrecordfs/reshape/reshape.h"
#include "tfrecordfs/reshape/reshard_run.h"
#include "tfrecordfs/reshape/shuffle.h"
#include "tfrecordfs/scan/indexing.h"
#include "tfrecordfs/scan/scan.h"

namespace tfrecordfs::cli {

// count: "records<TAB>path" per shard and "records<TAB>total", or
// {"shards": [{"path", "records", "damaged"?}], "records"}. Logs a warning
// per damaged shard.
std::string CountReport(const inspect::CountResult& result, bool json);

// schema: the summary line, then tables of features, example features and
// feature lists; or {"records_scanned", "records_total", "shards",
// "unreadable", "payloads", "features", "feature_lists", ...}.
std::string SchemaReport(const inspect::SchemaResult& result, bool json);

// show: "# record i of PATH: KIND, N bytes at byte offset O" and the
// record's features per record, or one JSON object per record (an array of
// them for several). `shorten`: values cut for a terminal. Logs each record
// that could not be read.
std::string ShowReport(absl::string_view path, bool compressed,
                       const std::vector<inspect::ShownRecord>& records, bool json, bool shorten);

// verify: a line per damage, unreadable shard and shard of other payloads,
// then the verdict; or {"shards", "records", ..., "damaged": [...],
// "unreadable": [...], "non_example_shards": [...]}.
std::string VerifyReport(const inspect::VerifyResult& result, bool json);

// status: the mount, its staging folder and log, each staged entry, the
// edits per shard and what would be refused; or one JSON object of the same
// (status_cmd.cc's --help lists its keys).
std::string StatusReport(const MountStatus& status, bool json);

// commit: the daemon's answer, a result line (kResultOk or "result:
// failed") then the rewrite summary: the summary for stdout (`out`),
// whether the commit succeeded, and for stderr (`err`) a result line of any
// other kind.
struct CommitOutput {
  std::string out;
  std::string err;
  bool ok = false;
};
CommitOutput CommitReport(absl::string_view answer);
// commit when the daemon did not answer (AskDaemon's `status`): why, for
// stderr, naming the daemon and its log: no answer within `timeout_s`, the
// daemon `ended` before it answered, or it could not be reached.
std::string CommitUnansweredReport(const absl::Status& status, const MountRecord& record,
                                   double timeout_s, bool ended);

// unmount: the pack report the daemon left (the result line, then the pack
// summary) for stdout, and whether everything staged was packed.
bool UnmountPacked(absl::string_view pack_report);
// unmount: when the daemon logged warnings or errors while mounted, a note
// for stderr naming its log and the first such lines; else "".
std::string UnmountLogNote(const MountRecord& record);

// pack: what was written and what stayed staged (repack::PackReport::
// Summary) without the failure's last line, which Pack has logged already.
std::string PackReport(const repack::PackReport& report);

// index: what a run did (the store's counts, how long the scan took, the
// tally of its shards, the DALI files when asked) and where the indexes
// went ("in DIR", "beside the shards").
struct IndexRun {
  index::StoreStats stats;
  double seconds = 0;
  scan::IndexTotals totals;
  const scan::DaliResult* dali = nullptr;  // null without --dali-dir
  std::string dali_dir;
  std::string where;
};
// Logs each directory where indexes could not be written beside their
// shards; then the summary lines ("" when quiet).
std::string IndexReport(const IndexRun& run, bool quiet);
// Logs each damaged shard's problems (index::FormatProblems) and count.
void LogDamagedShards(const std::vector<scan::ScannedShard>& shards);

// repair: a line per dropped record or span and per shard not repaired,
// then "N shard(s) copied to OUTPUT: ..."; or {"shards", "records",
// "written", "dropped", "unreadable"}.
std::string RepairReport(const std::vector<reshape::RepairedShard>& repaired,
                         const std::string& output, bool json);

// reshard: each skipped record, "records<TAB>path" per new shard and the
// total line (how it was ordered, a part's publication); or {"shards",
// "records", "seed", "skipped"}. A map pass (--pass map): each skipped
// record and the "mapped" line. `shards`: the SOURCEs' shards the run read;
// `options`: its flags'. Logs what became of TFDS's dataset_info.json and
// the stale temporary files the run removed.
std::string ReshardReport(const reshape::ReshardResult& result,
                          const std::vector<scan::ScannedShard>& shards,
                          const reshape::ReshardOptions& options, bool json);

}  // namespace tfrecordfs::cli

#endif  // TFRECORDFS_CLI_REPORTS_H_
