// UTF-8 validation (RFC 3629: no overlongs, no surrogates, <= U+10FFFF).
// Pure, thread-safe.
#ifndef TFRECORDFS_BASE_UTF8_H_
#define TFRECORDFS_BASE_UTF8_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace tfrecordfs {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if the bytes
// there do not start a valid sequence.
size_t Utf8SequenceLength(absl::string_view s, size_t i);

bool IsValidUtf8(absl::string_view s);

}  // namespace tfrecordfs

#endif  // TFRECORDFS_BASE_UTF8_H_
