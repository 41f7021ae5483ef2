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

}  // namespace

int CommitMain(int argc, char** argv) {
  Tool tool({.name = "commit",
             .usage = kUsage,
             .usage_end = kUsageEnd,
             .usage_column = 21,
             .json = false,
             .quiet = false});
  double timeout = 3600;
  bool rebase = false;
  if (auto stop = tool.Parse(argc, argv, [&](int* i) -> std::optional<int> {
        const absl::string_view arg = argv[*i];
        if (arg == "--rebase") {
          rebase = true;
          return kExitOk;
        }
        if (arg != "--timeout") return std::nullopt;
        if (*i + 1 >= argc || !absl::SimpleAtod(argv[*i + 1], &timeout) || timeout <= 0) {
          return tool.Usage("--timeout needs a positive number of seconds");
        }
        ++*i;
        return kExitOk;
      })) {
    return *stop;
  }
  if (tool.operands().size() != 1) return tool.Usage("need exactly one MOUNTPOINT");
  auto record = LiveMountRecord(tool.operands()[0], "commit");
  if (!record) return kExitNotMounted;
  if (record->read_only || record->store.empty()) {
    std::cerr << "tfrecordfs commit: " << record->mountpoint
              << " is mounted read-only: it has no edits to commit\n";
    return kExitNotMounted;
  }
  auto answer = AskDaemon(ControlSocketFile(record->store), rebase ? "commit --rebase" : "commit",
                          std::chrono::duration<double>(timeout));
  if (!answer.ok()) {
    const std::string log = record->log.empty() ? "syslog" : record->log;
    if (absl::IsDeadlineExceeded(answer.status())) {
      std::cerr << "tfrecordfs commit: no answer from the daemon (pid " << record->pid
                << ") within " << timeout << " s; it may still be committing (see its log: " << log
                << ")\n";
    } else if (absl::IsAborted(answer.status()) || !ProcessAlive(record->pid)) {
      // A daemon killed in the commit never answers.
      std::cerr << "tfrecordfs commit: the daemon (pid " << record->pid
                << ") ended before it answered (did it crash? the edits stay pending: mount "
                   "again, which finishes or rolls back the interrupted commit; its log: "
                << log << ")\n";
    } else {
      std::cerr << "tfrecordfs commit: cannot reach the daemon (pid " << record->pid
                << "): " << answer.status().message() << " (its log: " << log << ")\n";
      return kExitNotMounted;
    }
    return kExitFailed;
  }
  // The result line, then the report.
  const size_t eol = answer->find('\n');
  const std::string result = answer->substr(0, eol);
  std::cout << (eol == std::string::npos ? "" : answer->substr(eol + 1));
  if (result != kResultOk && result != "result: failed")
    std::cerr << answer->substr(0, eol) << "\n";
  return result == kResultOk ? kExitOk : kExitFailed;
}

}  // namespace tfrecordfs::cli
