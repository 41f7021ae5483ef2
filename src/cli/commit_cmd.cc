// `tfrecordfs commit [--timeout SECONDS] MOUNTPOINT`: writes the edits of a
// live read-write mount into its shards without unmounting.
//
// The daemon is asked through its control socket (cli/control.h; its
// committer thread serves it: mount_cmd.cc) and answers on the same
// connection with the result line and the rewrite summary.
#include <chrono>
#include <iostream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/cli/commands.h"
#include "src/cli/control.h"
#include "src/cli/reports.h"
#include "src/cli/runtime.h"
#include "src/cli/toolbox.h"

namespace tfrecordfs::cli {
namespace {

constexpr char kUsage[] = R"(Usage: tfrecordfs commit [--rebase] [--timeout SECONDS] MOUNTPOINT

Writes what was changed through a read-write mount into the mounted shards
now, without unmounting: records edited, added (mkdir or cp -r into a shard
folder) and deleted (rm -r). Each affected shard is rewritten as at unmount
(crash-safe, in its own codec, the other records byte for byte), and the
mount shows it at once, its records numbered afresh. The mount answers
nothing else while it commits. Staged records (staging/) stay staged: the
unmount packs them.

Prints each rewritten shard with the records kept, changed, added and
deleted, and the time taken.

An object of an s3:// bucket is rewritten only if it is still the one the
mount listed; one another writer replaced keeps the other writer's records
and its edits stay pending. --rebase re-reads such an object and re-applies
the edits to it by record key (each edited or deleted record's length and
CRC), listing those whose record it no longer holds.

Options:
  --rebase           re-apply the edits of objects replaced by another writer
  --timeout SECONDS  how long to wait for the daemon (default 3600)
)";
constexpr char kUsageEnd[] = R"(
Exit status: 0 when every edited shard was committed (or nothing was
edited), 1 when a shard was not (its edits stay pending; the output says
why), 2 on a usage error, 3 when MOUNTPOINT is not a live read-write
tfrecordfs mount of this user.
)";

// commit's command line.
struct CommitFlags {
  std::string mountpoint;
  double timeout_s = 3600;  // --timeout: how long to wait for the daemon
  bool rebase = false;      // --rebase
};

// Parses commit's command line through `tool`; InvalidArgument with the
// usage message. After -h/--help (tool->help()) nothing is checked.
absl::StatusOr<CommitFlags> ParseCommit(Tool* tool, int argc, char** argv) {
  CommitFlags f;
  const absl::Status parsed = tool->ParseFlags(argc, argv, [&](int* i) -> absl::StatusOr<bool> {
    const absl::string_view arg = argv[*i];
    if (arg == "--rebase") {
      f.rebase = true;
      return true;
    }
    if (arg != "--timeout") return false;
    if (*i + 1 >= argc || !absl::SimpleAtod(argv[*i + 1], &f.timeout_s) || f.timeout_s <= 0) {
      return absl::InvalidArgumentError("--timeout needs a positive number of seconds");
    }
    ++*i;
    return true;
  });
  if (!parsed.ok()) return parsed;
  if (tool->help()) return f;
  if (tool->operands().size() != 1) {
    return absl::InvalidArgumentError("need exactly one MOUNTPOINT");
  }
  f.mountpoint = tool->operands()[0];
  return f;
}

}  // namespace

int CommitMain(int argc, char** argv) {
  Tool tool({.name = "commit",
             .usage = kUsage,
             .usage_end = kUsageEnd,
             .usage_column = 21,
             .json = false,
             .quiet = false});
  auto flags = ParseCommit(&tool, argc, argv);
  if (auto stop = tool.Stop(flags.status())) return *stop;
  auto record = LiveMountRecord(flags->mountpoint, "commit");
  if (!record) return kExitNotMounted;
  if (record->read_only || record->store.empty()) {
    std::cerr << "tfrecordfs commit: " << record->mountpoint
              << " is mounted read-only: it has no edits to commit\n";
    return kExitNotMounted;
  }
  // The daemon's committer thread does the work (mount_cmd.cc).
  auto answer =
      AskDaemon(ControlSocketFile(record->store), flags->rebase ? "commit --rebase" : "commit",
                std::chrono::duration<double>(flags->timeout_s));
  if (!answer.ok()) {
    const absl::Status& why = answer.status();
    // A daemon killed in the commit never answers.
    const bool ended =
        !absl::IsDeadlineExceeded(why) && (absl::IsAborted(why) || !ProcessAlive(record->pid));
    std::cerr << CommitUnansweredReport(why, *record, flags->timeout_s, ended);
    return absl::IsDeadlineExceeded(why) || ended ? kExitFailed : kExitNotMounted;
  }
  const CommitOutput out = CommitReport(*answer);
  const int code = tool.Finish(out.out, out.ok);
  std::cerr << out.err;
  return code;
}

}  // namespace tfrecordfs::cli
