#include "src/cli/commands.h"

#include <algorithm>
#include <iostream>
#include <limits>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tfrecordfs::cli {

int UsageError(absl::string_view cmd, absl::string_view message) {
  const std::string who = cmd.empty() ? "tfrecordfs" : absl::StrCat("tfrecordfs ", cmd);
  std::cerr << who << ": " << message << "\nTry '" << who << " --help' for more information.\n";
  return kExitUsage;
}

absl::StatusOr<uint64_t> ParseSize(absl::string_view text) {
  absl::string_view digits = text;
  int shift = 0;
  if (!digits.empty()) {
    switch (absl::ascii_toupper(static_cast<unsigned char>(digits.back()))) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      case 'T':
        shift = 40;
        break;
      default:
        break;
    }
    if (shift != 0) digits.remove_suffix(1);
  }
  uint64_t n = 0;
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(digits, &n)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad size '", text, "': expected a number with an optional K, M, G or T suffix"));
  }
  if (n == 0) return absl::InvalidArgumentError(absl::StrCat("bad size '", text, "': zero"));
  if (n > (std::numeric_limits<uint64_t>::max() >> shift)) {
    return absl::InvalidArgumentError(absl::StrCat("bad size '", text, "': too large"));
  }
  return n << shift;
}

}  // namespace tfrecordfs::cli
