#include "src/cli/commands.h"

#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"

namespace tfrecordfs::cli {

int UsageError(absl::string_view cmd, absl::string_view message) {
  const std::string who = cmd.empty() ? "tfrecordfs" : absl::StrCat("tfrecordfs ", cmd);
  std::cerr << who << ": " << message << "\nTry '" << who << " --help' for more information.\n";
  return kExitUsage;
}

}  // namespace tfrecordfs::cli
