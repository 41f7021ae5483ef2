#include "tfrecordfs/base/utf8.h"

#include <cstdint>

#include "absl/strings/str_format.h"

namespace tfrecordfs {

size_t Utf8SequenceLength(absl::string_view s, size_t i) {
  const size_t n = s.size() - i;
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
  const uint8_t c = b(0);
  if (c < 0x80) return 1;
  auto cont = [&](size_t k) { return k < n && (b(k) & 0xc0) == 0x80; };
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xe0 && b(1) < 0xa0) return 0;  // overlong
    if (c == 0xed && b(1) > 0x9f) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xf0 && b(1) < 0x90) return 0;  // overlong
    if (c == 0xf4 && b(1) > 0x8f) return 0;  // > U+10FFFF
    return 4;
  }
  return 0;
}

bool IsValidUtf8(absl::string_view s) {
  for (size_t i = 0; i < s.size();) {
    // Fast path for ASCII runs.
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t len = Utf8SequenceLength(s, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string EscapeForLog(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  auto hex = [&out](uint8_t b) { absl::StrAppendFormat(&out, "\\x%02x", b); };
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    const size_t n = Utf8SequenceLength(s, i);
    if (n == 0) {
      hex(c);
      ++i;
    } else if (n == 1) {
      if (c == '\n') {
        out += "\\n";
      } else if (c == '\t') {
        out += "\\t";
      } else if (c == '\\') {
        out += "\\\\";
      } else if (c < 0x20 || c == 0x7f) {
        hex(c);
      } else {
        out.push_back(static_cast<char>(c));
      }
      ++i;
    } else if (n == 2 && c == 0xc2 && static_cast<uint8_t>(s[i + 1]) < 0xa0) {
      hex(c);  // C1 control: U+0080..U+009F
      hex(static_cast<uint8_t>(s[i + 1]));
      i += 2;
    } else {
      out.append(s.data() + i, n);
      i += n;
    }
  }
  return out;
}

}  // namespace tfrecordfs
