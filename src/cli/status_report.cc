// status's report (reports.h).
#include <sstream>
#include <string>

#include "absl/strings/str_join.h"
#include "src/cli/json_writer.h"
#include "src/cli/mount_status.h"
#include "src/cli/reports.h"

namespace tfrecordfs::cli {
namespace {

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

std::string StatusReport(const MountStatus& status, bool json) {
  return json ? Json(status) : Text(status);
}

}  // namespace tfrecordfs::cli
