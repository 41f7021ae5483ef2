// For the fuzz targets of files that end in a `crc32c <8 hex digits>` line
// (the pack journal, the deletion list): the input with that line made
// right, so that mutations reach the parser behind the checksum.
#ifndef TFRECORDFS_TESTS_FUZZ_CHECKSUM_LINE_H_
#define TFRECORDFS_TESTS_FUZZ_CHECKSUM_LINE_H_

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
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

}  // namespace tfrecordfs::fuzz

#endif  // TFRECORDFS_TESTS_FUZZ_CHECKSUM_LINE_H_
