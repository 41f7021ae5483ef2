// The reports of `tfrecordfs commit` and `tfrecordfs unmount` (reports.h):
// what the daemon answered or left, and why there was no answer.
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/cli/reports.h"
#include "src/cli/runtime.h"

namespace tfrecordfs::cli {

CommitOutput CommitReport(absl::string_view answer) {
  const size_t eol = answer.find('\n');
  const absl::string_view result = answer.substr(0, eol);
  CommitOutput out;
  out.out = eol == absl::string_view::npos ? "" : std::string(answer.substr(eol + 1));
  out.ok = result == kResultOk;
  if (!out.ok && result != "result: failed") out.err = absl::StrCat(result, "\n");
  return out;
}

std::string CommitUnansweredReport(const absl::Status& status, const MountRecord& record,
                                   double timeout_s, bool ended) {
  const std::string log = record.log.empty() ? "syslog" : record.log;
  if (absl::IsDeadlineExceeded(status)) {
    return absl::StrCat("tfrecordfs commit: no answer from the daemon (pid ", record.pid,
                        ") within ", timeout_s,
                        " s; it may still be committing (see its log: ", log, ")\n");
  }
  if (ended) {
    return absl::StrCat("tfrecordfs commit: the daemon (pid ", record.pid,
                        ") ended before it answered (did it crash? the edits stay pending: mount "
                        "again, which finishes or rolls back the interrupted commit; its log: ",
                        log, ")\n");
  }
  return absl::StrCat("tfrecordfs commit: cannot reach the daemon (pid ", record.pid,
                      "): ", status.message(), " (its log: ", log, ")\n");
}

bool UnmountPacked(absl::string_view pack_report) {
  return absl::StartsWith(pack_report, absl::StrCat(kResultOk, "\n"));
}

std::string UnmountLogNote(const MountRecord& record) {
  if (record.log.empty()) return "";
  const LogProblems p = ScanLog(record.log, record.log_start);
  if (p.errors == 0 && p.warnings == 0) return "";
  std::string out =
      absl::StrCat("tfrecordfs unmount: the mount logged ", p.errors, " error(s) and ", p.warnings,
                   " warning(s); see ", record.log, "\n");
  for (const std::string& line : p.first) absl::StrAppend(&out, "  ", line, "\n");
  if (p.errors + p.warnings > p.first.size()) out += "  ...\n";
  return out;
}

}  // namespace tfrecordfs::cli
