#include "tfrecordfs/repack/journal.h"

#include <cstdio>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "tfrecordfs/base/crc32c.h"

namespace tfrecordfs::repack {
namespace {

constexpr absl::string_view kCrcKey = "crc32c ";

// Reads the journal line by line; every accessor fails with the line number.
class LineReader {
 public:
  LineReader(absl::string_view body, absl::string_view path) : rest_(body), path_(path) {}

  absl::Status Error(absl::string_view what) const {
    return absl::DataLossError(
        absl::StrCat("pack journal ", path_, " is damaged at line ", line_, ": ", what));
  }

  // The value after `key ` on the next line.
  absl::StatusOr<absl::string_view> Value(absl::string_view key) {
    ++line_;
    size_t nl = rest_.find('\n');
    if (nl == absl::string_view::npos) return Error("missing line end");
    absl::string_view line = rest_.substr(0, nl);
    rest_.remove_prefix(nl + 1);
    if (line.size() <= key.size() || line.substr(0, key.size()) != key || line[key.size()] != ' ') {
      return Error(absl::StrCat("expected '", key, " ...'"));
    }
    return line.substr(key.size() + 1);
  }

  absl::StatusOr<std::string> Name(absl::string_view key) {
    auto v = Value(key);
    if (!v.ok()) return v.status();
    std::string out;
    if (!absl::CUnescape(*v, &out) || out.empty()) return Error("bad escaped name");
    return out;
  }

  // A record or shard name: one path component (IsJournalName).
  absl::StatusOr<std::string> Component(absl::string_view key) {
    auto name = Name(key);
    if (name.ok() && !IsJournalName(*name)) {
      return Error(absl::StrCat("the ", key, " name '", absl::CHexEscape(*name),
                                "' is not one path component"));
    }
    return name;
  }

  // A directory: an absolute path without NUL bytes.
  absl::StatusOr<std::string> Directory(absl::string_view key) {
    auto dir = Name(key);
    if (dir.ok() && ((*dir)[0] != '/' || dir->find('\0') != std::string::npos)) {
      return Error(
          absl::StrCat("the ", key, " '", absl::CHexEscape(*dir), "' is not an absolute path"));
    }
    return dir;
  }

  absl::StatusOr<uint64_t> Number(absl::string_view key) {
    auto v = Value(key);
    if (!v.ok()) return v.status();
    uint64_t n = 0;
    if (!absl::SimpleAtoi(*v, &n)) return Error("bad number");
    return n;
  }

  bool done() const { return rest_.empty(); }

 private:
  absl::string_view rest_;
  absl::string_view path_;
  int line_ = 0;
};

}  // namespace

bool IsJournalName(absl::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(absl::string_view("/\0", 2)) == absl::string_view::npos;
}

std::string TempShardName(absl::string_view final_name) {
  return absl::StrCat(".", final_name, ".tmp");
}

std::string EncodeJournal(const Journal& j) {
  std::string out = absl::StrCat(kJournalMagic, " ", kJournalVersion, "\n");
  absl::StrAppend(&out, "state ", j.state == Journal::State::kPlanned ? "planned" : "committed",
                  "\n");
  absl::StrAppend(&out, "records_dir ", absl::CEscape(j.records_dir), "\n");
  absl::StrAppend(&out, "output_dir ", absl::CEscape(j.output_dir), "\n");
  absl::StrAppend(&out, "remove_packed ", j.remove_packed ? 1 : 0, "\n");
  absl::StrAppend(&out, "shards ", j.shards.size(), "\n");
  for (const Journal::Shard& s : j.shards) {
    absl::StrAppend(&out, "shard ", s.records.size(), " ", s.bytes, " ", absl::CEscape(s.name),
                    "\n");
    for (const std::string& r : s.records) absl::StrAppend(&out, "record ", absl::CEscape(r), "\n");
  }
  absl::StrAppend(&out, kCrcKey, absl::StrFormat("%08x", crc32c::Value(out)), "\n");
  return out;
}

absl::StatusOr<Journal> ParseJournal(absl::string_view contents, absl::string_view path) {
  // The checksum line comes first: it tells a torn or edited file from a
  // well-formed one before any field is trusted.
  if (contents.empty() || contents.back() != '\n') {
    return absl::DataLossError(absl::StrCat("pack journal ", path, " is damaged: truncated"));
  }
  size_t crc_line = contents.rfind('\n', contents.size() - 2);
  crc_line = crc_line == absl::string_view::npos ? 0 : crc_line + 1;
  absl::string_view body = contents.substr(0, crc_line);
  absl::string_view last = contents.substr(crc_line, contents.size() - 1 - crc_line);
  uint32_t stored = 0;
  if (last.substr(0, kCrcKey.size()) != kCrcKey || last.size() != kCrcKey.size() + 8 ||
      !absl::SimpleHexAtoi(last.substr(kCrcKey.size()), &stored)) {
    return absl::DataLossError(
        absl::StrCat("pack journal ", path, " is damaged: no checksum line at the end"));
  }
  if (stored != crc32c::Value(body)) {
    return absl::DataLossError(
        absl::StrCat("pack journal ", path, " is damaged: checksum mismatch"));
  }

  LineReader in(body, path);
  auto version = in.Number(kJournalMagic);
  if (!version.ok()) return version.status();
  if (*version != kJournalVersion) {
    return absl::FailedPreconditionError(absl::StrCat("pack journal ", path, " has version ",
                                                      *version, "; this build reads version ",
                                                      kJournalVersion));
  }
  Journal j;
  auto state = in.Value("state");
  if (!state.ok()) return state.status();
  if (*state == "planned") {
    j.state = Journal::State::kPlanned;
  } else if (*state == "committed") {
    j.state = Journal::State::kCommitted;
  } else {
    return in.Error("unknown state");
  }
  auto records_dir = in.Directory("records_dir");
  if (!records_dir.ok()) return records_dir.status();
  j.records_dir = std::move(*records_dir);
  auto output_dir = in.Directory("output_dir");
  if (!output_dir.ok()) return output_dir.status();
  j.output_dir = std::move(*output_dir);
  auto remove = in.Number("remove_packed");
  if (!remove.ok()) return remove.status();
  if (*remove > 1) return in.Error("remove_packed must be 0 or 1");
  j.remove_packed = *remove == 1;
  auto shards = in.Number("shards");
  if (!shards.ok()) return shards.status();
  for (uint64_t i = 0; i < *shards; ++i) {
    auto v = in.Value("shard");
    if (!v.ok()) return v.status();
    // The name goes last: CEscape leaves spaces alone.
    std::vector<absl::string_view> parts = absl::StrSplit(*v, absl::MaxSplits(' ', 2));
    Journal::Shard s;
    uint64_t records = 0;
    if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &records) ||
        !absl::SimpleAtoi(parts[1], &s.bytes) || !absl::CUnescape(parts[2], &s.name) ||
        s.name.empty()) {
      return in.Error("bad shard line");
    }
    if (!IsJournalName(s.name)) {
      return in.Error(absl::StrCat("the shard name '", absl::CHexEscape(s.name),
                                   "' is not one path component"));
    }
    for (uint64_t r = 0; r < records; ++r) {
      auto name = in.Component("record");
      if (!name.ok()) return name.status();
      s.records.push_back(std::move(*name));
    }
    j.shards.push_back(std::move(s));
  }
  if (!in.done()) return in.Error("unexpected line after the last shard");
  return j;
}

}  // namespace tfrecordfs::repack
