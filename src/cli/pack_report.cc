// pack's report (reports.h).
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/cli/reports.h"

namespace tfrecordfs::cli {

std::string PackReport(const repack::PackReport& report) {
  // Pack has logged a failure to stderr already: stdout keeps what was
  // written and what stayed staged, and the error is said once.
  std::string summary = report.Summary();
  if (!report.status.ok()) {
    absl::string_view rest = summary;
    if (absl::ConsumeSuffix(&rest, absl::StrCat("pack failed: ", report.status.message(), "\n"))) {
      summary = std::string(rest);
    }
  }
  return summary;
}

}  // namespace tfrecordfs::cli
