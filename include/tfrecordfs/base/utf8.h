// UTF-8 validation (RFC 3629: no overlongs, no surrogates, <= U+10FFFF).
// Pure, thread-safe.
#ifndef TFRECORDFS_BASE_UTF8_H_
#define TFRECORDFS_BASE_UTF8_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace tfrecordfs {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if the bytes
// there do not start a valid sequence.
size_t Utf8SequenceLength(absl::string_view s, size_t i);

bool IsValidUtf8(absl::string_view s);

// `s` made safe to write as one line of a log or a terminal: control bytes
// (C0, DEL, and the C1 range U+0080..U+009F, which terminals may take for
// escape sequences), bytes that are not valid UTF-8, and the backslash are
// written as \n, \t, \\ or \xNN (C1 as its two UTF-8 bytes); valid printable
// UTF-8 is kept as it is.
std::string EscapeForLog(absl::string_view s);

}  // namespace tfrecordfs

#endif  // TFRECORDFS_BASE_UTF8_H_
