// INI files as the AWS CLI reads ~/.aws/config and ~/.aws/credentials
// (Python's configparser, as botocore uses it):
//
//   # a comment (also "; ..."), on a line of its own
//   [profile dev]
//   region = eu-west-1
//   s3 =
//     endpoint_url = http://127.0.0.1:9000
//
// Section names are kept as written; keys are lower-cased and, like values,
// trimmed of blanks; "key: value" is taken like "key = value". A line that
// starts with a blank continues the value above it (joined with '\n'): that
// is how the AWS files nest settings ("s3 =" and its indented lines, which
// ParseNestedIni reads). No inline comments (configparser keeps "a ; b" as
// the value), no interpolation. A section or key given twice: the last wins.
//
// Why not Debian's libinih (r55): its package is built with a 200-byte line
// limit, which cuts an AWS session token (often over 1,000 bytes) and then
// reads the rest of the line as a new one; and its multi-line values do not
// keep the nested keys apart.
//
// Secrets: these files hold keys. Errors name the file and the line number,
// never a line's text.
//
// Thread-safety: pure functions; IniFile is a plain value.
#ifndef TFRECORDFS_BASE_INI_H_
#define TFRECORDFS_BASE_INI_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tfrecordfs {

// Section name -> key -> value.
using IniSection = std::map<std::string, std::string>;
using IniFile = std::map<std::string, IniSection>;

// Parses `text`; `origin` (a file name) names it in errors. InvalidArgument
// for a key before any section, a line that is neither a section, a
// comment, a "key = value" nor a continuation, or an unclosed "[".
absl::StatusOr<IniFile> ParseIni(absl::string_view text, absl::string_view origin);

// The "key = value" lines of a nested value (what follows "s3 =");
// other lines are ignored.
IniSection ParseNestedIni(absl::string_view value);

// Reads and parses the file at `path` (at most 1 MiB). NotFound when it
// does not exist.
absl::StatusOr<IniFile> ReadIniFile(const std::string& path);

}  // namespace tfrecordfs

#endif  // TFRECORDFS_BASE_INI_H_
