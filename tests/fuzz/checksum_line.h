// For the fuzz targets of files that end in a `crc32c <8 hex digits>` line
// (the pack journal, the deletion list): the input with that line made
// right, so that mutations reach the parser behind the checksum.
#ifndef TFRECORDFS_TESTS_FUZZ_CHECKSUM_LINE_H_
#define TFRECORDFS_TESTS_FUZZ_CHECKSUM_LINE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "fuzz_check.h"
#include "tfrecordfs/base/crc32c.h"

namespace tfrecordfs::fuzz {

// `bytes` with its last line replaced by a correct checksum line (appended
// when the last line is not a checksum line).
inline std::string WithChecksum(absl::string_view bytes) {
  std::string body(bytes);
  if (!body.empty() && body.back() != '\n') body.push_back('\n');
  size_t start = 0;  // of the last line
  if (body.size() >= 2) {
    const size_t nl = body.rfind('\n', body.size() - 2);
    if (nl != std::string::npos) start = nl + 1;
  }
  if (absl::StartsWith(absl::string_view(body).substr(start), "crc32c ")) body.resize(start);
  return absl::StrCat(body, "crc32c ", absl::StrFormat("%08x", crc32c::Value(body)), "\n");
}

// How such a file's parser refuses: DataLoss (damaged, torn) or
// FailedPrecondition (another version), naming the file `path`.
inline void CheckRefusal(const absl::Status& s, absl::string_view path) {
  FUZZ_CHECK(absl::IsDataLoss(s) || absl::IsFailedPrecondition(s), s.ToString());
  FUZZ_CHECK(absl::StrContains(s.message(), path), s.ToString());
}

// The file `bytes` (accepted by `parse`) torn after any earlier line end is
// refused, never read as a smaller file.
template <typename Parse>
void CheckTornPrefixesRefused(absl::string_view bytes, Parse parse) {
  for (size_t nl = bytes.find('\n'); nl + 1 < bytes.size(); nl = bytes.find('\n', nl + 1)) {
    FUZZ_CHECK(!parse(bytes.substr(0, nl + 1)).ok(), "torn after byte ", nl + 1, " of ",
               bytes.size(), " accepted");
  }
}

// Runs `check` on `bytes`, then on WithChecksum(bytes) when that differs:
// the input as it came, and with its checksum made right.
template <typename Check>
void CheckAsIsAndWithChecksum(absl::string_view bytes, Check check) {
  check(bytes);
  const std::string fixed = WithChecksum(bytes);
  if (fixed != bytes) check(absl::string_view(fixed));
}

}  // namespace tfrecordfs::fuzz

#endif  // TFRECORDFS_TESTS_FUZZ_CHECKSUM_LINE_H_
