// Formatting and parsing of file contents (numbers and text lines).
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

using namespace std::string_view_literals;

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tfrecordfs/base/utf8.h"
#include "tfrecordfs/naming/naming.h"

namespace tfrecordfs::naming {

using example::Feature;
using example::Kind;

namespace {

constexpr uint32_t kSignBit = 0x80000000u;
constexpr uint32_t kMantissa = 0x007fffffu;
constexpr uint32_t kExponent = 0x7f800000u;
constexpr uint32_t kDefaultNanMantissa = 0x00400000u;

void AppendFloat(std::string* out, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  if (std::isnan(v)) {
    // Keep the sign and payload so that a copy round-trips bit for bit.
    if (bits & kSignBit) out->push_back('-');
    const uint32_t mantissa = bits & kMantissa;
    if (mantissa == kDefaultNanMantissa) {
      out->append("nan");
    } else {
      char buf[16];
      auto r = std::to_chars(buf, buf + sizeof buf, mantissa, 16);
      absl::StrAppend(out, "nan(0x", absl::string_view(buf, r.ptr - buf), ")");
    }
    return;
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, r.ptr);
  // A whole number ("1", "-0", "16777216") would read back as an int64
  // wherever the kind is not known (a folder copied without its xattrs by
  // `cp -r`, then packed): a decimal point keeps it a float. The shortest
  // round-trip text with one ("1.0"); "1e+30", "inf" already are floats.
  if (std::isfinite(v) &&
      std::find_if(buf, r.ptr, [](char c) { return c == '.' || c == 'e'; }) == r.ptr) {
    out->append(".0");
  }
}

// Parses one float token exactly as AppendFloat writes it, plus anything
// strtof accepts in the C locale (leading '+', hex floats, "infinity").
bool ParseFloat(absl::string_view tok, float* out) {
  if (tok.empty()) return false;
  absl::string_view body = tok;
  bool neg = false;
  if (body[0] == '-' || body[0] == '+') {
    neg = body[0] == '-';
    body.remove_prefix(1);
  }
  if (absl::StartsWithIgnoreCase(body, "nan")) {
    uint32_t mantissa = kDefaultNanMantissa;
    absl::string_view rest = body.substr(3);
    if (!rest.empty()) {
      if (rest.size() < 5 || rest.substr(0, 3) != "(0x" || rest.back() != ')') return false;
      absl::string_view hex = rest.substr(3, rest.size() - 4);
      uint32_t m = 0;
      auto r = std::from_chars(hex.data(), hex.data() + hex.size(), m, 16);
      if (r.ec != std::errc() || r.ptr != hex.data() + hex.size()) return false;
      if (m == 0 || m > kMantissa) return false;
      mantissa = m;
    }
    uint32_t bits = kExponent | mantissa | (neg ? kSignBit : 0);
    std::memcpy(out, &bits, 4);
    return true;
  }
  std::string s(tok);  // strtof needs a terminator
  char* end = nullptr;
  errno = 0;
  float v = std::strtof(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return false;
  if (errno == ERANGE && std::isinf(v)) return false;  // overflow, not "inf"
  *out = v;
  return true;
}

// Splits content into lines, the final '\n' optional; "" has no lines.
std::vector<absl::string_view> Lines(absl::string_view content) {
  std::vector<absl::string_view> lines;
  if (content.empty()) return lines;
  if (content.back() == '\n') content.remove_suffix(1);
  lines = absl::StrSplit(content, '\n');
  return lines;
}

// A value of a numeric file and its 1-based line number (for messages).
struct NumericLine {
  absl::string_view text;
  size_t number;
};

// Numeric lines: blanks around each value are dropped, and blank lines are
// skipped (a number cannot be empty, so they carry nothing; `echo "" > f`
// is an empty list).
std::vector<NumericLine> NumericLines(absl::string_view content) {
  std::vector<NumericLine> out;
  const std::vector<absl::string_view> lines = Lines(content);
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::string_view v = absl::StripAsciiWhitespace(lines[i]);
    if (!v.empty()) out.push_back({v, i + 1});
  }
  return out;
}

}  // namespace

std::string FormatInt64s(std::span<const int64_t> values) {
  std::string out;
  out.reserve(values.size() * 4);
  for (int64_t v : values) absl::StrAppend(&out, v, "\n");
  return out;
}

std::string FormatFloats(std::span<const float> values) {
  std::string out;
  out.reserve(values.size() * 10);
  for (float v : values) {
    AppendFloat(&out, v);
    out.push_back('\n');
  }
  return out;
}

std::string FormatText(std::span<const absl::string_view> values) {
  std::string out;
  for (absl::string_view v : values) {
    out.append(v.data(), v.size());
    out.push_back('\n');
  }
  return out;
}

bool IsSingleLineText(absl::string_view v) {
  for (char c : v) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && u != '\t') || u == 0x7f) return false;
  }
  return IsValidUtf8(v);
}

absl::StatusOr<Feature> ParseNumeric(absl::string_view content, Kind hint) {
  Feature f;
  const std::vector<NumericLine> lines = NumericLines(content);
  f.kind = hint == Kind::kFloat ? Kind::kFloat : Kind::kInt64;
  if (hint != Kind::kFloat) {
    bool all_int = true;
    f.int64s.reserve(lines.size());
    for (const NumericLine& line : lines) {
      int64_t v;
      if (!absl::SimpleAtoi(line.text, &v)) {
        if (hint == Kind::kInt64) {
          return absl::InvalidArgumentError(absl::StrCat(
              "line ", line.number, ": '", absl::CEscape(line.text.substr(0, 40)),
              "' is not an int64 (this feature is an int64 list in the mounted shards)"));
        }
        all_int = false;
        break;
      }
      f.int64s.push_back(v);
    }
    if (all_int) return f;
    f.int64s.clear();
  }
  f.kind = Kind::kFloat;
  f.floats.reserve(lines.size());
  for (const NumericLine& line : lines) {
    float v;
    if (!ParseFloat(line.text, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("line ", line.number, ": '",
                                                     absl::CEscape(line.text.substr(0, 40)),
                                                     "' is not a number"));
    }
    f.floats.push_back(v);
  }
  return f;
}

std::vector<absl::string_view> ParseText(absl::string_view content) {
  std::vector<absl::string_view> values = Lines(content);
  for (auto& v : values) {
    if (!v.empty() && v.back() == '\r') v.remove_suffix(1);  // CRLF from an editor
  }
  return values;
}

absl::string_view SniffExtension(absl::string_view b) {
  auto starts = [&](std::string_view std_magic, size_t at = 0) {
    absl::string_view magic(std_magic.data(), std_magic.size());
    return b.size() >= at + magic.size() && b.substr(at, magic.size()) == magic;
  };
  if (starts("\xff\xd8\xff"sv)) return ".jpg";
  if (starts("\x89PNG\r\n\x1a\n"sv)) return ".png";
  if (starts("GIF87a") || starts("GIF89a")) return ".gif";
  if (starts("BM") && b.size() >= 26) {
    const auto u = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(b[i])); };
    const uint32_t declared = u(2) | (u(3) << 8) | (u(4) << 16) | (u(5) << 24);
    if (declared == b.size()) return ".bmp";
  }
  if (starts("RIFF") && starts("WEBP", 8)) return ".webp";
  if (starts("RIFF") && starts("WAVE", 8)) return ".wav";
  if (starts("II*\0"sv) || starts("MM\0*"sv)) return ".tif";
  if (starts("fLaC")) return ".flac";
  if (starts("OggS")) return ".ogg";
  if (starts("ID3")) return ".mp3";
  if (starts("ftyp", 4)) return ".mp4";
  if (starts("%PDF-")) return ".pdf";
  if (starts("\x1f\x8b"sv)) return ".gz";
  if (starts("PK\x03\x04"sv)) return ".zip";
  if (starts("\x93NUMPY"sv)) return ".npy";
  absl::string_view t = absl::StripAsciiWhitespace(b);
  if (t.size() >= 2 &&
      ((t.front() == '{' && t.back() == '}') || (t.front() == '[' && t.back() == ']')) &&
      IsValidUtf8(t)) {
    return ".json";
  }
  return ".bin";
}

}  // namespace tfrecordfs::naming
