#include "tfrecordfs/base/ini.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tfrecordfs/base/file.h"

namespace tfrecordfs {
namespace {

constexpr uint64_t kMaxIniFile = uint64_t{1} << 20;

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

absl::Status LineError(absl::string_view origin, size_t line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(origin, ":", line, ": ", what));
}

}  // namespace

absl::StatusOr<IniFile> ParseIni(absl::string_view text, absl::string_view origin) {
  IniFile out;
  IniSection* section = nullptr;
  std::string* value = nullptr;  // the value a continuation line extends
  size_t number = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++number;
    if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
    const absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty())
      continue;  // configparser: a blank line inside a value is kept; no key here needs it
    if (line[0] == '#' || line[0] == ';') continue;
    if (IsBlank(raw[0]) && value != nullptr) {
      absl::StrAppend(value, value->empty() ? "" : "\n", line);
      continue;
    }
    if (line[0] == '[') {
      if (line.back() != ']') return LineError(origin, number, "a '[' without its ']'");
      const std::string name(absl::StripAsciiWhitespace(line.substr(1, line.size() - 2)));
      section = &out[name];
      value = nullptr;
      continue;
    }
    const size_t eq = line.find_first_of("=:");
    if (eq == absl::string_view::npos || eq == 0) {
      return LineError(origin, number, "neither [section], key = value nor a comment");
    }
    if (section == nullptr) return LineError(origin, number, "a setting before any [section]");
    const std::string key = absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.substr(0, eq)));
    value = &(*section)[key];
    *value = std::string(absl::StripAsciiWhitespace(line.substr(eq + 1)));
  }
  return out;
}

IniSection ParseNestedIni(absl::string_view value) {
  IniSection out;
  for (absl::string_view line : absl::StrSplit(value, '\n')) {
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) continue;
    out[absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.substr(0, eq)))] =
        std::string(absl::StripAsciiWhitespace(line.substr(eq + 1)));
  }
  return out;
}

absl::StatusOr<IniFile> ReadIniFile(const std::string& path) {
  auto fd = OpenFile(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (!fd.ok()) {
    if (ErrnoOf(fd.status()) == ENOENT || ErrnoOf(fd.status()) == ENOTDIR) {
      return absl::NotFoundError(path);
    }
    return fd.status();
  }
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return ErrnoError(errno, path);
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": not a regular file"));
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxIniFile) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": larger than ", kMaxIniFile, " bytes; not read"));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  auto got = PreadUpTo(fd->get(), text.data(), text.size(), 0, path);
  if (!got.ok()) return got.status();
  text.resize(*got);
  return ParseIni(text, path);
}

}  // namespace tfrecordfs
