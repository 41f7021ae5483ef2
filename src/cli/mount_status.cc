#include "src/cli/mount_status.h"

#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/staging/edits.h"
#include "tfrecordfs/staging/layout.h"
#include "tfrecordfs/staging/store.h"

namespace tfrecordfs::cli {
namespace {

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

}  // namespace

absl::StatusOr<MountStatus> GatherMountStatus(const MountRecord& record) {
  const std::string real = record.mountpoint;
  MountStatus st;
  st.record = record;
  // Records written before the record named its staging folder: the default.
  const std::string staging =
      record.staging.empty() && !record.read_only ? "staging" : record.staging;
  if (!staging.empty()) {
    const std::string path = absl::StrCat(real, "/", staging);
    struct stat s;
    if (::stat(path.c_str(), &s) == 0 && S_ISDIR(s.st_mode)) st.staging_path = path;
  }
  if (!record.log.empty()) st.log = ScanLog(record.log, record.log_start);
  if (auto s = GatherStaged(&st); !s.ok()) return s;
  if (auto s = GatherDeleted(&st); !s.ok()) return s;
  if (auto s = GatherRefusedEdits(&st); !s.ok()) return s;
  return st;
}

}  // namespace tfrecordfs::cli
