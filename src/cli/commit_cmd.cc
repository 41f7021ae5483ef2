// `tfrecordfs commit [--timeout SECONDS] MOUNTPOINT`: writes the edits of a
// live read-write mount into its shards without unmounting.
//
// The daemon is asked with SIGUSR1 (its committer thread waits for it:
// mount_cmd.cc) and answers in its store's commit report
// (staging/layout.h CommitReportFile): `commit <pid>.<n>`, the result line,
// the rewrite summary. The command waits for a report newer than the one
// it saw before asking.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/cli/commands.h"
#include "src/cli/runtime.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/staging/layout.h"

namespace tfrecordfs::cli {
namespace {

constexpr char kUsage[] = R"(Usage: tfrecordfs commit [--timeout SECONDS] MOUNTPOINT

Writes what was changed through a read-write mount into the mounted shards
now, without unmounting: records edited, added (mkdir or cp -r into a shard
folder) and deleted (rm -r). Each affected shard is rewritten as at unmount
(crash-safe, in its own codec, the other records byte for byte), and the
mount shows it at once, its records numbered afresh. The mount answers
nothing else while it commits. Staged records (staging/) stay staged: the
unmount packs them.

Prints each rewritten shard with the records kept, changed, added and
deleted, and the time taken.

Options:
  --timeout SECONDS  how long to wait for the daemon (default 3600)
  -h, --help         show this help and exit

Exit status: 0 when every edited shard was committed (or nothing was
edited), 1 when a shard was not (its edits stay pending; the output says
why), 2 on a usage error, 3 when MOUNTPOINT is not a live read-write
tfrecordfs mount of this user.
)";

// The first line of the commit report ("commit <pid>.<n>"), "" when none.
std::string ReportId(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return "";
  return text->substr(0, text->find('\n'));
}

}  // namespace

int CommitMain(int argc, char** argv) {
  Tool tool({.name = "commit", .usage = kUsage, .json = false, .quiet = false});
  double timeout = 3600;
  if (auto stop = tool.Parse(argc, argv, [&](int* i) -> std::optional<int> {
        const absl::string_view arg = argv[*i];
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
  const std::string report = staging::CommitReportFile(record->store);
  const std::string before = ReportId(report);
  if (::kill(static_cast<pid_t>(record->pid), SIGUSR1) != 0) {
    std::cerr << "tfrecordfs commit: cannot signal the daemon (pid " << record->pid
              << "): " << std::strerror(errno) << "\n";
    return kExitNotMounted;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  std::chrono::milliseconds wait(2);
  while (ReportId(report) == before) {
    // A daemon killed in the commit never answers: say so now, not at the
    // timeout (one more look: it may have answered, then exited).
    if (!ProcessAlive(record->pid) && ReportId(report) == before) {
      std::cerr << "tfrecordfs commit: the daemon (pid " << record->pid
                << ") ended before it answered (did it crash? the edits stay pending: mount "
                   "again, which finishes or rolls back the interrupted commit"
                << (record->log.empty() ? "" : "; its log: " + record->log) << ")\n";
      return kExitFailed;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::cerr << "tfrecordfs commit: no answer from the daemon (pid " << record->pid
                << ") within " << timeout << " s; it may still be committing (see its log: "
                << (record->log.empty() ? "syslog" : record->log) << ")\n";
      return kExitFailed;
    }
    // Short commits answer within milliseconds: look again soon, then less
    // often (every 10 ms: a stat and a small read).
    std::this_thread::sleep_for(wait);
    wait = std::min(wait * 2, std::chrono::milliseconds(10));
  }
  auto text = ReadFileToString(report);
  if (!text.ok()) {
    std::cerr << "tfrecordfs commit: " << text.status().message() << "\n";
    return kExitFailed;
  }
  // Drop the id line; print the rest (result line and summary).
  const std::string body = text->substr(text->find('\n') + 1);
  const size_t eol = body.find('\n');
  const std::string result = body.substr(0, eol);
  std::cout << body.substr(eol + 1);
  return result == kResultOk ? kExitOk : kExitFailed;
}

}  // namespace tfrecordfs::cli
