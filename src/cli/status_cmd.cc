// `tfrecordfs status [--json] MOUNTPOINT`: what a live mount holds in
// staging, what the pack on unmount would leave staged and why, and where
// the daemon logs.
//
// The reasons are the daemon's: each staged record folder's
// `user.tfrecordfs.error` attribute (vfs::Filesystem, staging::Store::
// ErrorOf), which the daemon computes with the kinds of the mounted shards,
// exactly as the pack will. So `status` reads through the mount and needs
// nothing but the mount record (runtime.h) and the mount itself.
//
// Layout: Gather*() fill one section of MountStatus each; Text and Json
// print the sections in order. A new section (the edits of
// mounted shards: records edited, added and deleted per shard) is a member,
// a Gather function and a few lines in each printer.
#include <dirent.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/cli/commands.h"
#include "src/cli/json_writer.h"
#include "src/cli/runtime.h"
#include "src/cli/toolbox.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/staging/deletions.h"
#include "tfrecordfs/staging/edits.h"
#include "tfrecordfs/staging/layout.h"
#include "tfrecordfs/staging/store.h"

namespace tfrecordfs::cli {
namespace {

constexpr char kStatusUsage[] = R"(Usage: tfrecordfs status [--json] MOUNTPOINT

Says what a tfrecordfs mount of this user holds in its staging folder: each
staged record (a folder directly in staging/) and whether the pack on unmount
would take it or leave it staged, and why (a write the checks refused, a file
that does not parse, two files for one feature...); files directly in
staging/, which are no record; and where the daemon logs, with how many
warnings and errors it logged since it mounted; and, per shard, the records
of the mounted shards edited through the mount, the records added to them
(mkdir or cp -r into a shard folder) and the records deleted from them
(rm -r SHARD/RECORD), which the unmount writes into the shards, with each
edited or added record that cannot be written and why (a file whose content
its feature cannot take): such a record keeps its whole shard from being
committed until it is fixed or undone.

The reasons come from the daemon, checked with the kinds of the mounted
shards as the pack will check them: every staged record is read once. A
file's own reason: getfattr -n user.tfrecordfs.error FILE.

Options:
  --json       one JSON object instead of text: mountpoint, pid, read_only,
               store, staging (null without a staging folder), log (null
               when the daemon keeps no log file), log_warnings, log_errors,
               records [{name, ok, reason (null when ok)}], loose_files
               [{name, reason}], staged (records), refused (records the pack
               would leave), edited [{shard, records}] (record indexes),
               added [{shard, records}] (folder names), deleted [{shard,
               records}] (record indexes): what the unmount writes into the
               shards; refused_edits [{shard, record, reason}] (record: its
               folder name) and refused_edit_count: edited or added records
               the commit would refuse
)";
constexpr char kStatusUsageEnd[] = R"(
Exit status: 0 when the pack would take every staged record (or nothing is
staged) and the commit every edit, 1 when a staged record or a loose file
would stay staged or an edited record would keep its shard uncommitted (the
unmount would exit 1), 2 on a usage error, 3 when MOUNTPOINT is not a live
tfrecordfs mount of this user or its staging folder cannot be read.
)";

struct StagedEntry {
  std::string name;
  bool folder = true;                 // else a loose file
  std::optional<std::string> reason;  // why it would stay staged
};

struct MountStatus {
  MountRecord record;
  std::string staging_path;  // "" without a staging folder
  LogProblems log;
  // Section "staged": the staging folder's entries in name order.
  std::vector<StagedEntry> staged;
  uint64_t records = 0;
  uint64_t refused = 0;  // entries the pack would leave staged
  uint64_t unknown = 0;  // records whose state the mount cannot tell (noxattr)
  // Section "deleted": records deleted from the shards, pending their
  // rewrite at unmount (the store's deletion list, staging/deletions.h).
  staging::Deletions deleted;
  // Sections "edited" and "added": records of the shards changed through
  // the mount, and records added to them (the edit store, staging/edits.h).
  std::map<std::string, std::vector<uint64_t>> edited;
  std::map<std::string, std::vector<std::string>> added;
  // Edited and added records the commit would refuse: shard -> (record
  // folder name, reason), from the daemon (the record folder's `error`).
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> refused_edits;
  uint64_t refused_edit_count = 0;
  uint64_t unknown_edits = 0;  // records whose state the mount cannot tell
};

// The `error` attribute of `path`: nullopt when it has none (nothing
// wrong). *err: the errno when it cannot be read (0 otherwise).
std::optional<std::string> ErrorAttribute(const std::string& path, int* err) {
  static constexpr char kName[] = "user.tfrecordfs.error";
  *err = 0;
  for (size_t size = 4096;; size *= 4) {
    std::string buf(size, '\0');
    const ssize_t n = ::lgetxattr(path.c_str(), kName, buf.data(), buf.size());
    if (n >= 0) {
      buf.resize(static_cast<size_t>(n));
      return buf;
    }
    if (errno == ENODATA) return std::nullopt;
    if (errno != ERANGE || size > (size_t{1} << 24)) {
      *err = errno;
      return std::nullopt;
    }
  }
}

absl::Status GatherStaged(MountStatus* st) {
  if (st->staging_path.empty()) return absl::OkStatus();
  auto dir = ListDir::Open(st->staging_path);
  if (!dir.ok()) return dir.status();
  std::vector<std::string> names;
  for (absl::string_view entry; dir->Next(&entry);) {
    const std::string name(entry);
    // The pack skips these (editors' leftovers), and so does the listing.
    if (name.empty() || name[0] == '.' || name.back() == '~') continue;
    names.push_back(name);
  }
  if (!dir->status().ok()) return dir->status();
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string path = absl::StrCat(st->staging_path, "/", name);
    struct stat s;
    if (::lstat(path.c_str(), &s) != 0) continue;  // removed while listing
    StagedEntry e{name, S_ISDIR(s.st_mode), std::nullopt};
    int err = 0;
    e.reason = ErrorAttribute(path, &err);
    if (err == ENOTSUP || err == ENOSYS) {
      // -o noxattr: the daemon cannot say why; a loose file is refused anyway.
      st->unknown += e.folder;
      if (!e.folder) e.reason = staging::kLooseFileReason;
    } else if (err != 0) {
      return ErrnoError(err, path);
    }
    st->records += e.folder;
    st->refused += e.reason.has_value();
    st->staged.push_back(std::move(e));
  }
  return absl::OkStatus();
}

// Read from the store directly: the list is the daemon's, written before
// each deletion returns.
absl::Status GatherDeleted(MountStatus* st) {
  if (st->record.store.empty()) return absl::OkStatus();
  auto list = staging::DeletionList::Load(staging::DeletionsPath(st->record.store),
                                          /*read_only=*/true);
  if (!list.ok()) return list.status();
  st->deleted = (*list)->Snapshot();
  // The edit folders, by the shard whose key they carry.
  std::map<std::string, std::string> path_of_key;
  for (const auto& [path, shard] : st->deleted) path_of_key[staging::ShardKey(path)] = path;
  const std::string edits = staging::RecordsDir(staging::EditsStoreDir(st->record.store));
  for (const auto& [key, folders] : staging::ListEditFolders(edits)) {
    auto it = path_of_key.find(key);
    if (it == path_of_key.end()) continue;  // committed; removed at the next mount
    for (const std::string& name : folders) {
      const staging::EditFolder f = *staging::ParseEditFolder(name);
      if (!f.record) {
        st->added[it->second].push_back(f.added);
      } else if (!st->deleted[it->second].records.contains(*f.record)) {
        st->edited[it->second].push_back(*f.record);
      }
    }
  }
  for (auto& [path, records] : st->edited) std::sort(records.begin(), records.end());
  return absl::OkStatus();
}

// The folder at which the mount shows the shard at `real_path`: sources are
// mirrored at the root, so it is one of the path's suffixes; the one whose
// `shard` attribute names the shard. nullopt when none does (-o noxattr).
std::optional<std::string> ShardFolderInMount(const std::string& mountpoint,
                                              const std::string& real_path) {
  const std::vector<std::string> parts = absl::StrSplit(real_path, '/', absl::SkipEmpty());
  for (size_t k = 1; k <= parts.size(); ++k) {
    std::string path = mountpoint;
    for (size_t i = parts.size() - k; i < parts.size(); ++i) absl::StrAppend(&path, "/", parts[i]);
    char buf[4096];
    const ssize_t n = ::lgetxattr(path.c_str(), "user.tfrecordfs.shard", buf, sizeof buf);
    if (n >= 0 && absl::string_view(buf, static_cast<size_t>(n)) == real_path) return path;
  }
  return std::nullopt;
}

// Why the commit would refuse each edited and added record: the `error`
// attribute of its folder, which the daemon computes as the commit builds
// the record (the whole record is read).
absl::Status GatherRefusedEdits(MountStatus* st) {
  std::map<std::string, std::vector<std::string>> folders;  // shard -> record folder names
  for (const auto& [path, records] : st->edited) {
    for (uint64_t r : records) folders[path].push_back(absl::StrCat(r));
  }
  for (const auto& [path, names] : st->added) {
    folders[path].insert(folders[path].end(), names.begin(), names.end());
  }
  for (const auto& [path, names] : folders) {
    const std::optional<std::string> shard = ShardFolderInMount(st->record.mountpoint, path);
    if (!shard) {
      st->unknown_edits += names.size();
      continue;
    }
    for (const std::string& name : names) {
      int err = 0;
      std::optional<std::string> reason = ErrorAttribute(absl::StrCat(*shard, "/", name), &err);
      if (err == ENOTSUP || err == ENOSYS || err == ENOENT) {
        ++st->unknown_edits;
      } else if (err != 0) {
        return ErrnoError(err, absl::StrCat(*shard, "/", name));
      } else if (reason) {
        st->refused_edits[path].emplace_back(name, std::move(*reason));
        ++st->refused_edit_count;
      }
    }
  }
  return absl::OkStatus();
}

std::string Text(const MountStatus& st) {
  std::ostringstream os;
  const MountRecord& r = st.record;
  os << "mount: " << r.mountpoint << " (pid " << r.pid << ", "
     << (r.read_only ? "read-only" : "read-write") << ")\n";
  if (st.staging_path.empty()) {
    os << "staging: none\n";
  } else {
    os << "staging: " << st.staging_path << " (store " << r.store << ")\n";
  }
  if (r.log.empty()) {
    os << "log: none (a foreground mount without -o log logs to its terminal)\n";
  } else {
    os << "log: " << r.log << " (" << st.log.warnings << " warning(s), " << st.log.errors
       << " error(s) since the mount)\n";
  }
  const uint64_t loose = st.staged.size() - st.records;
  os << "staged: " << st.records << " record(s)";
  if (loose > 0) os << ", " << loose << " loose file(s)";
  os << "\n";
  for (const StagedEntry& e : st.staged) {
    os << "  " << e.name << (e.folder ? "" : " (file)") << ": "
       << (e.reason ? "refused: " + *e.reason : std::string("ok")) << "\n";
  }
  if (st.unknown > 0) {
    os << "unknown: " << st.unknown
       << " record(s): the mount answers no extended attributes (-o noxattr), so it"
          " cannot say which would stay staged\n";
  }
  for (const auto& [path, records] : st.edited) {
    os << "edited: " << path << ": " << records.size() << " record(s) (rewritten at unmount):";
    for (uint64_t r : records) os << " " << r;
    os << "\n";
  }
  for (const auto& [path, names] : st.added) {
    os << "added: " << path << ": " << absl::StrJoin(names, " ") << " (appended at unmount)\n";
  }
  for (const auto& [path, records] : st.refused_edits) {
    for (const auto& [name, reason] : records) {
      os << "  " << path << "/" << name << ": refused: " << reason << "\n";
    }
  }
  if (st.unknown_edits > 0) {
    os << "unknown: " << st.unknown_edits
       << " edited record(s): the mount answers no extended attributes (-o noxattr), so it"
          " cannot say which the commit would refuse\n";
  }
  const bool edits = !st.edited.empty() || !st.added.empty();
  if (st.refused > 0 || st.refused_edit_count > 0) {
    os << "refused:";
    if (st.refused > 0) os << " " << st.refused << " would stay staged at unmount";
    if (st.refused > 0 && st.refused_edit_count > 0) os << ";";
    if (st.refused_edit_count > 0) {
      os << " " << st.refused_edit_count << " edited record(s) keep " << st.refused_edits.size()
         << " shard(s) from being committed";
    }
    os << " (fix or remove them first)\n";
  } else if (!st.staged.empty() || edits) {
    os << "refused: none (the unmount would "
       << (!st.staged.empty() && edits ? "pack every staged record and commit every edit"
           : edits                     ? "commit every edit"
                                       : "pack every staged record")
       << ")\n";
  }
  for (const auto& [path, shard] : st.deleted) {
    if (shard.records.empty()) continue;
    os << "deleted: " << path << ": " << shard.records.size()
       << " record(s) (rewritten at unmount):";
    for (uint64_t r : shard.records) os << " " << r;
    os << "\n";
  }
  return os.str();
}

std::string Json(const MountStatus& st) {
  const MountRecord& r = st.record;
  JsonWriter w;
  w.BeginObject();
  w.Key("mountpoint").String(r.mountpoint);
  w.Key("pid").Int(r.pid);
  w.Key("read_only").Bool(r.read_only);
  w.Key("store").String(r.store);
  w.Key("staging");
  st.staging_path.empty() ? w.Null() : w.String(st.staging_path);
  w.Key("log");
  r.log.empty() ? w.Null() : w.String(r.log);
  w.Key("log_warnings").Uint(st.log.warnings);
  w.Key("log_errors").Uint(st.log.errors);
  w.Key("records").BeginArray();
  for (const StagedEntry& e : st.staged) {
    if (!e.folder) continue;
    w.BeginObject().Key("name").String(e.name).Key("ok").Bool(!e.reason).Key("reason");
    e.reason ? w.String(*e.reason) : w.Null();
    w.EndObject();
  }
  w.EndArray();
  w.Key("loose_files").BeginArray();
  for (const StagedEntry& e : st.staged) {
    if (e.folder) continue;
    w.BeginObject().Key("name").String(e.name).Key("reason").String(e.reason.value_or(""));
    w.EndObject();
  }
  w.EndArray();
  w.Key("staged").Uint(st.records);
  w.Key("refused").Uint(st.refused);
  w.Key("edited").BeginArray();
  for (const auto& [path, records] : st.edited) {
    w.BeginObject().Key("shard").String(path).Key("records").BeginArray();
    for (uint64_t r : records) w.Uint(r);
    w.EndArray().EndObject();
  }
  w.EndArray();
  w.Key("added").BeginArray();
  for (const auto& [path, names] : st.added) {
    w.BeginObject().Key("shard").String(path).Key("records").BeginArray();
    for (const std::string& n : names) w.String(n);
    w.EndArray().EndObject();
  }
  w.EndArray();
  w.Key("deleted").BeginArray();
  for (const auto& [path, shard] : st.deleted) {
    if (shard.records.empty()) continue;
    w.BeginObject().Key("shard").String(path).Key("records").BeginArray();
    for (uint64_t r : shard.records) w.Uint(r);
    w.EndArray().EndObject();
  }
  w.EndArray();
  w.Key("refused_edits").BeginArray();
  for (const auto& [path, records] : st.refused_edits) {
    for (const auto& [name, reason] : records) {
      w.BeginObject().Key("shard").String(path).Key("record").String(name);
      w.Key("reason").String(reason).EndObject();
    }
  }
  w.EndArray();
  w.Key("refused_edit_count").Uint(st.refused_edit_count);
  w.EndObject();
  return w.str();
}

}  // namespace

int StatusMain(int argc, char** argv) {
  Tool tool({.name = "status",
             .usage = kStatusUsage,
             .usage_end = kStatusUsageEnd,
             .usage_column = 15,
             .quiet = false});
  if (auto stop = tool.Parse(argc, argv)) return *stop;
  if (tool.operands().empty()) return tool.Usage("need a MOUNTPOINT");
  if (tool.operands().size() > 1) return tool.Usage("unexpected argument " + tool.operands()[1]);
  auto record = LiveMountRecord(tool.operands().front(), "status");
  if (!record) return kExitNotMounted;
  const std::string real = record->mountpoint;
  MountStatus st;
  st.record = *record;
  // Records written before the record named its staging folder: the default.
  const std::string staging =
      record->staging.empty() && !record->read_only ? "staging" : record->staging;
  if (!staging.empty()) {
    const std::string path = absl::StrCat(real, "/", staging);
    struct stat s;
    if (::stat(path.c_str(), &s) == 0 && S_ISDIR(s.st_mode)) st.staging_path = path;
  }
  if (!record->log.empty()) st.log = ScanLog(record->log, record->log_start);
  if (auto s = GatherStaged(&st); !s.ok()) {
    std::cerr << "tfrecordfs status: " << s.message() << "\n";
    return kExitNotMounted;
  }
  if (auto s = GatherDeleted(&st); !s.ok()) {
    std::cerr << "tfrecordfs status: " << s.message() << "\n";
    return kExitNotMounted;
  }
  if (auto s = GatherRefusedEdits(&st); !s.ok()) {
    std::cerr << "tfrecordfs status: " << s.message() << "\n";
    return kExitNotMounted;
  }
  return tool.Finish(tool.json() ? Json(st) : Text(st),
                     st.refused == 0 && st.refused_edit_count == 0);
}

}  // namespace tfrecordfs::cli
