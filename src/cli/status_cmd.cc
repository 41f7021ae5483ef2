// `tfrecordfs status [--json] MOUNTPOINT`: what a live mount holds in
// staging, what the pack on unmount would leave staged and why, and where
// the daemon logs.
//
// The work is GatherMountStatus (mount_status.h), the report StatusReport.
#include <iostream>
#include <string>

#include "src/cli/commands.h"
#include "src/cli/mount_status.h"
#include "src/cli/reports.h"
#include "src/cli/runtime.h"
#include "src/cli/toolbox.h"

namespace tfrecordfs::cli {
namespace {

constexpr char kStatusUsage[] = R"(Usage: tfrecordfs status [--json] MOUNTPOINT

Says what a tfrecordfs mount of this user holds in its staging folder: each
staged record (a folder directly in staging/) and whether the pack on unmount
would take it or leave it staged, and why (a write the checks refused, a file
that does not parse, two files for one feature...); files directly in
staging/, which are no record; and where the daemon logs, with how many
warnings and errors it logged since it mounted; and, per shard, the records
of the mounted shards edited through the mount, the records added to them
(mkdir or cp -r into a shard folder) and the records deleted from them
(rm -r SHARD/RECORD), which the unmount writes into the shards, with each
edited or added record that cannot be written and why (a file whose content
its feature cannot take): such a record keeps its whole shard from being
committed until it is fixed or undone.

The reasons come from the daemon, checked with the kinds of the mounted
shards as the pack will check them: every staged record is read once. A
file's own reason: getfattr -n user.tfrecordfs.error FILE.

Options:
  --json       one JSON object instead of text: mountpoint, pid, read_only,
               store, staging (null without a staging folder), log (null
               when the daemon keeps no log file), log_warnings, log_errors,
               records [{name, ok, reason (null when ok)}], loose_files
               [{name, reason}], staged (records), refused (records the pack
               would leave), edited [{shard, records}] (record indexes),
               added [{shard, records}] (folder names), deleted [{shard,
               records}] (record indexes): what the unmount writes into the
               shards; refused_edits [{shard, record, reason}] (record: its
               folder name) and refused_edit_count: edited or added records
               the commit would refuse
)";
constexpr char kStatusUsageEnd[] = R"(
Exit status: 0 when the pack would take every staged record (or nothing is
staged) and the commit every edit, 1 when a staged record or a loose file
would stay staged or an edited record would keep its shard uncommitted (the
unmount would exit 1), 2 on a usage error, 3 when MOUNTPOINT is not a live
tfrecordfs mount of this user or its staging folder cannot be read.
)";

}  // namespace

int StatusMain(int argc, char** argv) {
  Tool tool({.name = "status",
             .usage = kStatusUsage,
             .usage_end = kStatusUsageEnd,
             .usage_column = 15,
             .quiet = false});
  if (auto stop = tool.Parse(argc, argv)) return *stop;
  if (tool.operands().empty()) return tool.Usage("need a MOUNTPOINT");
  if (tool.operands().size() > 1) return tool.Usage("unexpected argument " + tool.operands()[1]);
  auto record = LiveMountRecord(tool.operands().front(), "status");
  if (!record) return kExitNotMounted;
  auto status = GatherMountStatus(*record);
  if (!status.ok()) {
    std::cerr << "tfrecordfs status: " << status.status().message() << "\n";
    return kExitNotMounted;
  }
  return tool.Finish(StatusReport(*status, tool.json()),
                     status->refused == 0 && status->refused_edit_count == 0);
}

}  // namespace tfrecordfs::cli
