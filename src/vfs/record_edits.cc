#include "tfrecordfs/vfs/record_edits.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tfrecordfs/base/fault_points.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/staging/edits.h"
#include "tfrecordfs/staging/record_folder.h"
#include "tfrecordfs/vfs/node_id.h"

namespace tfrecordfs::vfs {

namespace {

absl::Status Stale() { return absl::NotFoundError("stale node id"); }

// Erases the entries of `map` whose key `taken` accepts, appending their
// values to *out (in the map's order).
template <typename Pred>
void TakeIf(absl::flat_hash_map<uint64_t, uint64_t>& map, Pred taken, std::vector<uint64_t>* out) {
  absl::erase_if(map, [&](const std::pair<const uint64_t, uint64_t>& entry) {
    if (!taken(entry.first)) return false;
    out->push_back(entry.second);
    return true;
  });
}

constexpr StagingViewIds kEditIds = {.node_tag = kEditNodeTag, .file_tag = 3, .dir_tag = 4};

// Writes `data` to `path` (a new file, mode 0644).
// Appends the bytes a read gave (inline, or a range of a descriptor).
absl::Status AppendBytes(const ReadBuffer& b, std::string* out) {
  if (b.fd < 0) {
    out->append(b.data);
    return absl::OkStatus();
  }
  const size_t at = out->size();
  out->resize(at + b.length);
  auto got = PreadUpTo(b.fd, out->data() + at, b.length, b.offset, "shard");
  if (!got.ok()) return got.status();
  if (*got != b.length) return absl::DataLossError("short read of a record file");
  return absl::OkStatus();
}

}  // namespace

RecordEdits::RecordEdits(const std::vector<MountedShard>& shards, RecordView* records,
                         RecordDeletions* deletions, staging::Store* store,
                         naming::FeatureTypes* types, StagingView* staging)
    : shards_(shards),
      records_(records),
      deletions_(deletions),
      store_(store),
      disk_(store->records_dir()),
      types_(types),
      folders_(store, types, kEditIds),
      staging_(staging) {
  for (uint64_t s = 0; s < shards_.size(); ++s) {
    shard_of_key_.emplace(staging::ShardKey(shards_[s].index->path()), s);
  }
  // Errors and log lines name an edited file as the shard's path, the
  // record's folder name and the path in it.
  store_->SetDisplay([this](absl::string_view rel) { return Describe(rel); });
  RecoverMoves();
  // An earlier mount's edits.
  MutexLock lock(&mu_);
  for (const auto& [key, folders] : staging::ListEditFolders(store_->records_dir())) {
    auto shard = ShardOfStoreKey(key);
    if (!shard) continue;  // not mounted now: kept for a mount that has it
    if (!deletions_->Registered(*shard)) {
      log::Error(shards_[*shard].index->path(), ": changed on disk since ", folders.size(),
                 " of its records were edited or added; those edits are not shown nor applied (",
                 store_->records_dir(), " keeps them)");
      continue;
    }
    for (const std::string& name : folders) {
      const staging::EditFolder f = *staging::ParseEditFolder(name);
      if (f.record) {
        if (*f.record >= shards_[*shard].records_shown() ||
            deletions_->IsDeleted(*shard, *f.record)) {
          continue;
        }
        auto st = store_->Lookup(store_->root(), name);
        if (!st.ok()) {
          log::Error("edit store: ", st.status().message());
          continue;
        }
        edited_[RecordKey(*shard, *f.record)] = st->st_ino;
      } else {
        added_[*shard].insert(f.added);
      }
    }
  }
  any_.store(!edited_.empty());
}

RecordEdits::~RecordEdits() { store_->SetDisplay(nullptr); }

std::string RecordEdits::Describe(absl::string_view rel) const {
  const size_t slash = rel.find('/');
  const absl::string_view folder = rel.substr(0, slash);
  const absl::string_view rest = slash == absl::string_view::npos ? "" : rel.substr(slash);
  auto f = staging::ParseEditFolder(folder);
  if (!f) return absl::StrCat("edits/", rel);
  auto shard = ShardOfStoreKey(f->key);
  if (!shard) return absl::StrCat("edits/", rel);
  return absl::StrCat(shards_[*shard].index->path(), "/",
                      f->record ? records_->RecordName(*shard, *f->record) : f->added, rest);
}

std::optional<uint64_t> RecordEdits::ShardOfStoreKey(absl::string_view key) const {
  auto it = shard_of_key_.find(key);
  if (it == shard_of_key_.end()) return std::nullopt;
  return it->second;
}

std::string RecordEdits::Key(uint64_t shard) const {
  return staging::ShardKey(shards_[shard].index->path());
}

size_t RecordEdits::edited() const {
  MutexLock lock(&mu_);
  size_t n = edited_.size();
  for (const auto& [shard, names] : added_) n += names.size();
  return n;
}

bool RecordEdits::Hidden(uint64_t shard) const {
  {
    MutexLock lock(&mu_);
    if (hidden_.contains(shard)) return true;
  }
  const absl::Status unchanged = deletions_->CheckUnchanged(shard);
  if (unchanged.ok()) return false;
  size_t edits = 0;
  {
    MutexLock lock(&mu_);
    if (!hidden_.insert(shard).second) return true;
    for (const auto& [key, node] : edited_) edits += ShardOfKey(key) == shard;
    if (auto it = added_.find(shard); it != added_.end()) edits += it->second.size();
  }
  log::Error(unchanged.message(), ": its ", edits,
             " edited or added record(s) are neither shown nor applied (", store_->records_dir(),
             " keeps them)");
  return true;
}

absl::Status RecordEdits::ChangedError(uint64_t shard) const {
  return PosixError(EROFS, absl::StrCat(shards_[shard].index->path(),
                                        ": changed on disk since the mount; its edits are "
                                        "neither shown nor applied"));
}

absl::Status RecordEdits::CheckRoom() const {
  const size_t now = edited();
  if (now < max_edited_) return absl::OkStatus();
  const std::string why =
      absl::StrCat("the edit store holds ", now,
                   " edited or added record(s), the most -o max_edited allows (", max_edited_,
                   ", each a copy of every file of its record); commit them first (tfrecordfs "
                   "commit MOUNTPOINT), or raise max_edited");
  log::Warning("edit refused: ", why);
  return PosixError(EDQUOT, why);
}

bool RecordEdits::IsEdited(uint64_t ino) const {
  if (!any_.load(std::memory_order_acquire) || SpaceOf(ino) != Space::kRecord) return false;
  const uint64_t key = RecordKey(ShardOf(ino), RecordOf(ino));
  {
    MutexLock lock(&mu_);
    if (moved_.contains(key)) return true;
    if (!edited_.contains(key)) return false;
  }
  return !Hidden(ShardOf(ino));
}

absl::StatusOr<uint64_t> RecordEdits::Inner(uint64_t ino) const {
  if (SpaceOf(ino) == Space::kStaging) {
    if (!IsEditId(ino)) return PosixError(EXDEV, "not an edited record");
    return ino;
  }
  if (SpaceOf(ino) != Space::kRecord) return PosixError(EXDEV, "not an edited record");
  MutexLock lock(&mu_);
  if (EntryOf(ino) == 0) {
    auto it = edited_.find(RecordKey(ShardOf(ino), RecordOf(ino)));
    if (it != edited_.end()) return folders_.IdOf(it->second);
    if (auto m = moved_.find(RecordKey(ShardOf(ino), RecordOf(ino))); m != moved_.end()) {
      return m->second;
    }
    return Stale();
  }
  auto it = translated_.find(ino);
  if (it == translated_.end()) return Stale();
  return it->second;
}

absl::Status RecordEdits::CheckOut(uint64_t ino) {
  if (SpaceOf(ino) != Space::kRecord) return absl::OkStatus();
  const uint64_t shard = ShardOf(ino), record = RecordOf(ino);
  if (shard >= shards_.size() || record >= shards_[shard].records_shown()) return Stale();
  if (Hidden(shard)) return ChangedError(shard);
  MutexLock checkout(&checkout_mu_);
  {
    MutexLock lock(&mu_);
    if (edited_.contains(RecordKey(shard, record))) return absl::OkStatus();
  }
  if (deletions_->IsDeleted(shard, record)) return Stale();
  if (auto s = CheckRoom(); !s.ok()) return s;
  if (auto s = deletions_->Register(shard); !s.ok()) return s;
  deletions_->NoteContentKey(shard, record);
  const std::string folder = staging::EditedFolderName(Key(shard), record);
  if (auto s = Materialize(shard, record, folder); !s.ok()) {
    log::Warning("cannot edit record ", record, " of ", shards_[shard].index->path(), ": ",
                 s.message());
    return s;
  }
  log::Info("editing record ", record, " of ", shards_[shard].index->path(),
            " (pending: the shard is rewritten at unmount)");
  return absl::OkStatus();
}

absl::Status RecordEdits::Materialize(uint64_t shard, uint64_t record, const std::string& folder) {
  auto parsed = records_->Parse(shard, record);
  if (!parsed.ok()) return parsed.status();
  const naming::Layout& layout = (*parsed)->layout;
  // Paths of the entries relative to the folder (entries[0] is the folder).
  std::vector<staging::EditStore::Entry> entries(layout.entries.size() - 1);
  for (size_t e = 1; e < layout.entries.size(); ++e) {
    const naming::Entry& entry = layout.entries[e];
    entries[e - 1].rel = entry.parent == 0
                             ? entry.name
                             : absl::StrCat(entries[entry.parent - 1].rel, "/", entry.name);
    entries[e - 1].is_dir = entry.is_dir;
  }
  // The copies keep the times the record view showed (the shard's mtime):
  // an editor that read a file before this check-out (vim, whose swap file
  // made it) compares the mtime before it saves, and would take a new one
  // for a change behind its back ("The file has been changed since reading
  // it"), and not write.
  if (auto s = disk_.CheckOut(
          folder, entries,
          [&](size_t i) { return RecordFileBytes(shard, record, static_cast<uint32_t>(i + 1)); },
          shards_[shard].mtime);
      !s.ok()) {
    return s;
  }
  // The folder's node, then every entry's (one reference each).
  auto top = store_->Lookup(store_->root(), folder);
  if (!top.ok()) return top.status();
  std::vector<uint64_t> nodes(layout.entries.size());
  nodes[0] = top->st_ino;
  std::vector<std::pair<uint64_t, uint64_t>> ids;
  for (size_t e = 1; e < layout.entries.size(); ++e) {
    auto st = store_->Lookup(nodes[layout.entries[e].parent], layout.entries[e].name);
    if (!st.ok()) return st.status();
    nodes[e] = st->st_ino;
    ids.emplace_back(RecordId(shard, record, e, shards_[shard].generation), st->st_ino);
  }
  MutexLock lock(&mu_);
  edited_[RecordKey(shard, record)] = nodes[0];
  for (const auto& [id, node] : ids) translated_[id] = folders_.IdOf(node);
  any_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

absl::StatusOr<std::string> RecordEdits::RecordFileBytes(uint64_t shard, uint64_t record,
                                                         uint32_t entry) {
  std::string content;
  const uint64_t id = RecordId(shard, record, entry, shards_[shard].generation);
  for (;;) {
    auto got = records_->Read(id, 0, content.size(), size_t{1} << 20);
    if (!got.ok()) return got.status();
    if (got->total_size() == 0) break;
    if (auto s = AppendBytes(*got, &content); !s.ok()) return s;
    for (const ReadBuffer& b : got->more) {
      if (auto s = AppendBytes(b, &content); !s.ok()) return s;
    }
  }
  return content;
}

absl::StatusOr<bool> RecordEdits::SameAsRecord(uint64_t shard, uint64_t record,
                                               const std::string& dir) {
  auto parsed = records_->Parse(shard, record);
  if (!parsed.ok()) return parsed.status();
  const naming::Layout& layout = (*parsed)->layout;
  // The record's entries by path in the folder (entries[0] is the folder).
  absl::flat_hash_map<std::string, uint32_t> want;
  std::vector<std::string> rel(layout.entries.size());
  for (uint32_t e = 1; e < layout.entries.size(); ++e) {
    const naming::Entry& entry = layout.entries[e];
    rel[e] = entry.parent == 0 ? entry.name : absl::StrCat(rel[entry.parent], "/", entry.name);
    want.emplace(rel[e], e);
  }
  // Names, kinds and sizes first (a listing and a stat each): a folder an
  // edit changed is told apart without reading a byte.
  std::vector<std::pair<std::string, uint32_t>> files;  // path on disk, entry
  size_t seen = 0;
  std::vector<std::pair<std::string, std::string>> dirs = {{dir, ""}};
  while (!dirs.empty()) {
    auto [path, prefix] = std::move(dirs.back());
    dirs.pop_back();
    auto list = ListDir::Open(path);
    if (!list.ok()) return list.status();
    for (absl::string_view name; list->Next(&name);) {
      const std::string key = absl::StrCat(prefix, name);
      auto it = want.find(key);
      if (it == want.end()) return false;
      struct stat st;
      if (::fstatat(list->fd(), std::string(name).c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        return ErrnoError(errno, absl::StrCat(path, "/", name));
      }
      const naming::Entry& entry = layout.entries[it->second];
      ++seen;
      if (entry.is_dir) {
        if (!S_ISDIR(st.st_mode)) return false;
        dirs.emplace_back(absl::StrCat(path, "/", name), absl::StrCat(key, "/"));
        continue;
      }
      if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != entry.size()) return false;
      files.emplace_back(absl::StrCat(path, "/", name), it->second);
    }
    if (!list->status().ok()) return list->status();
  }
  if (seen != layout.entries.size() - 1) return false;
  for (const auto& [path, e] : files) {
    auto now = ReadFileToString(path);
    if (!now.ok()) return now.status();
    auto then = RecordFileBytes(shard, record, e);
    if (!then.ok()) return then.status();
    if (*now != *then) return false;
  }
  return true;
}

std::vector<std::pair<uint64_t, uint64_t>> RecordEdits::DropUnchanged() {
  std::vector<std::pair<uint64_t, uint64_t>> dropped;
  if (!any_.load(std::memory_order_acquire)) return dropped;
  MutexLock checkout(&checkout_mu_);
  // Folders with a file open through a handle (`-o open`) may be written
  // again: left edited.
  std::vector<std::string> open;
  for (uint64_t node : folders_.OpenFileNodes()) {
    if (auto rel = store_->RelativePath(node); rel.ok())
      open.push_back(rel->substr(0, rel->find('/')));
  }
  for (uint64_t key : EditedRecords()) {
    const uint64_t shard = ShardOfKey(key), record = RecordOfKey(key);
    const std::string folder = staging::EditedFolderName(Key(shard), record);
    if (std::find(open.begin(), open.end(), folder) != open.end()) continue;
    auto same = SameAsRecord(shard, record, disk_.PathOf(folder));
    if (!same.ok()) {
      log::Warning("record ", record, " of ", shards_[shard].index->path(),
                   ": cannot compare its edit folder with the record: ", same.status().message());
      continue;
    }
    if (!*same) continue;
    // Out of the edit store's names in one rename, then removed.
    absl::Status leftover;
    if (auto s = disk_.Drop(folder, &leftover); !s.ok()) {
      log::Warning("edit store: ", s.message());
      continue;
    }
    const std::vector<uint64_t> held = ForgetCheckOut(shard, record, nullptr);
    if (!leftover.ok()) {
      log::Warning("edit store: ", leftover.message(),
                   " (removed at the next check-out of the record)");
    }
    for (uint64_t id : held) ViewFor(id).Forget(id, 1);
    log::Info("record ", record, " of ", shards_[shard].index->path(),
              " holds what the shard holds: not edited");
    dropped.emplace_back(shard, record);
  }
  MutexLock lock(&mu_);
  any_.store(!edited_.empty() || !moved_.empty(), std::memory_order_release);
  return dropped;
}

bool RecordEdits::HasEdits(uint64_t shard) const {
  {
    MutexLock lock(&mu_);
    for (const auto& [key, node] : edited_) {
      if (ShardOfKey(key) == shard) return true;
    }
    for (const auto& [key, id] : moved_) {
      if (ShardOfKey(key) == shard) return true;
    }
    auto it = added_.find(shard);
    if (it != added_.end() && !it->second.empty()) return true;
  }
  // And what the maps do not hold: folders an earlier mount left, kept
  // for a shard that changed since (they are neither shown nor applied).
  return staging::ListEditFolders(store_->records_dir()).contains(Key(shard));
}

std::vector<uint64_t> RecordEdits::EditedKeys(uint64_t shard) const {
  std::vector<uint64_t> keys;
  MutexLock lock(&mu_);
  for (const auto* map : {&edited_, &moved_}) {
    for (const auto& [key, node] : *map) {
      if (ShardOfKey(key) == shard) keys.push_back(key);
    }
  }
  return keys;
}

std::vector<std::string> RecordEdits::ResetShard(uint64_t shard) {
  std::vector<uint64_t> held, moved_ids;
  std::vector<std::string> names;
  {
    MutexLock lock(&mu_);
    // RecordKeys (edited_, moved_) and record-space ids (translated_) of
    // the shard's records.
    auto of_shard = [shard](uint64_t key) { return ShardOfKey(key) == shard; };
    TakeIf(edited_, of_shard, &held);
    // translated_'s values are inner ids, like the moved folders'.
    auto id_of_shard = [shard](uint64_t id) { return ShardOf(id) == shard; };
    TakeIf(translated_, id_of_shard, &moved_ids);
    if (auto it = added_.find(shard); it != added_.end()) {
      names.assign(it->second.begin(), it->second.end());
      added_.erase(it);
    }
    TakeIf(moved_, of_shard, &moved_ids);
    hidden_.erase(shard);
    any_.store(!edited_.empty() || !moved_.empty(), std::memory_order_release);
  }
  for (uint64_t node : held) folders_.Forget(folders_.IdOf(node), 1);
  for (uint64_t id : moved_ids) ViewFor(id).Forget(id, 1);
  return names;
}

// ---- The shard folder ----

absl::StatusOr<Attr> RecordEdits::LookupInShard(uint64_t shard, absl::string_view name) {
  auto a = records_->LookupRecord(shard, name);
  if (a.ok()) return IsEdited(a->ino) ? GetAttr(a->ino) : a;
  bool added;
  {
    MutexLock lock(&mu_);
    auto it = added_.find(shard);
    added = it != added_.end() && it->second.contains(std::string(name));
  }
  if (!added || Hidden(shard)) return a;
  return folders_.Lookup(folders_.IdOf(store_->root()), staging::AddedFolderName(Key(shard), name));
}

absl::Status RecordEdits::ListShard(uint64_t shard, const Attr& self, uint64_t offset,
                                    const EmitFn& emit) {
  // Records take positions 2..count+1 (RecordView::ReadShardDir), added
  // records the ones after.
  const uint64_t first_added = shards_[shard].records_shown() + 2;
  if (offset < first_added) {
    bool full = false;
    records_->ReadShardDir(shard, self, offset,
                           [&](absl::string_view n, const Attr& a, uint64_t next) {
                             if (emit(n, a, next)) return true;
                             full = true;
                             return false;
                           });
    if (full) return absl::OkStatus();
    offset = first_added;
  }
  std::vector<std::string> names;
  {
    MutexLock lock(&mu_);
    auto it = added_.find(shard);
    if (it == added_.end()) return absl::OkStatus();
    names.assign(it->second.begin(), it->second.end());
  }
  if (Hidden(shard)) return absl::OkStatus();
  const std::string key = Key(shard);
  for (uint64_t i = offset - first_added; i < names.size(); ++i) {
    struct stat st;
    const std::string path =
        absl::StrCat(store_->records_dir(), "/", staging::AddedFolderName(key, names[i]));
    if (::lstat(path.c_str(), &st) != 0) continue;  // removed meanwhile
    if (!emit(names[i], folders_.AttrOfStat(st), first_added + i + 1)) break;
  }
  return absl::OkStatus();
}

absl::StatusOr<Attr> RecordEdits::MkdirInShard(uint64_t shard, absl::string_view name, mode_t mode,
                                               std::optional<staging::Owner> owner) {
  if (auto s = staging::CheckName(name); !s.ok()) return s;
  if (records_->LookupRecord(shard, name).ok()) {
    return PosixError(EEXIST, absl::StrCat(name, ": a record of the shard"));
  }
  if (Hidden(shard)) return ChangedError(shard);
  if (auto s = CheckRoom(); !s.ok()) return s;
  if (auto s = deletions_->Register(shard); !s.ok()) return s;
  auto a = folders_.Mkdir(folders_.IdOf(store_->root()), staging::AddedFolderName(Key(shard), name),
                          mode, owner);
  if (!a.ok()) return a.status();
  MutexLock lock(&mu_);
  added_[shard].insert(std::string(name));
  return a;
}

absl::Status RecordEdits::DeleteRecord(uint64_t shard, uint64_t record) {
  // Durable first: a crash after it leaves an edit folder of a deleted
  // record, which nothing shows and the commit removes.
  if (auto s = deletions_->DeleteRecord(shard, record); !s.ok()) return s;
  uint64_t node = 0;
  const std::vector<uint64_t> held = ForgetCheckOut(shard, record, &node);
  if (node != 0) {
    absl::Status leftover;
    absl::Status s = disk_.Drop(staging::EditedFolderName(Key(shard), record), &leftover);
    if (!s.ok() || !leftover.ok()) {
      log::Warning("edit store: ", (s.ok() ? leftover : s).message(), " (removed at the commit)");
    }
  }
  for (uint64_t id : held) ViewFor(id).Forget(id, 1);
  return absl::OkStatus();
}

std::vector<uint64_t> RecordEdits::ForgetCheckOut(uint64_t shard, uint64_t record,
                                                  uint64_t* folder) {
  std::vector<uint64_t> held;
  MutexLock lock(&mu_);
  if (auto it = edited_.find(RecordKey(shard, record)); it != edited_.end()) {
    if (folder != nullptr) *folder = it->second;
    held.push_back(folders_.IdOf(it->second));
    edited_.erase(it);
  }
  for (auto t = translated_.begin(); t != translated_.end();) {
    if (ShardOf(t->first) == shard && RecordOf(t->first) == record) {
      held.push_back(t->second);
      translated_.erase(t++);
    } else {
      ++t;
    }
  }
  return held;
}

void RecordEdits::RecoverMoves() {
  std::vector<std::string> dirs = {store_->records_dir()};
  if (staging_ != nullptr) dirs.push_back(staging_->store()->records_dir());
  for (const std::string& dir : dirs) {
    for (const auto& m : staging::EditStore::FindInterruptedMoves(dir)) {
      auto shard = ShardOfStoreKey(m.key);
      if (!shard) continue;  // not mounted now: left for a mount that has it
      const bool deleted = deletions_->IsDeleted(*shard, m.record);
      auto to = disk_.ResolveMove(m, deleted);
      if (to.ok()) {
        log::Info(deleted ? "finished the interrupted move of record "
                          : "rolled back the interrupted move of record ",
                  m.record, " of ", shards_[*shard].index->path(), " (", *to, ")");
      } else {
        log::Error("cannot resolve the interrupted move ", m.dir, "/", m.temp, ": ",
                   to.status().message());
      }
    }
  }
}

absl::StatusOr<uint64_t> RecordEdits::MoveRecord(uint64_t shard, absl::string_view name,
                                                 std::optional<uint64_t> to_shard,
                                                 uint64_t new_parent, absl::string_view new_name) {
  auto a = records_->LookupRecord(shard, name);
  bool added = false;
  if (!a.ok()) {
    MutexLock lock(&mu_);
    auto it = added_.find(shard);
    added = it != added_.end() && it->second.contains(std::string(name));
  }
  if (!a.ok() && !added) return a.status();
  if (auto s = staging::CheckName(new_name); !s.ok()) return s;
  std::string dest_dir, dest_folder;
  if (to_shard) {
    if (records_->LookupRecord(*to_shard, new_name).ok() ||
        LookupInShard(*to_shard, new_name).ok()) {
      return PosixError(EEXIST, absl::StrCat(new_name, ": taken in that shard folder"));
    }
    if (auto s = deletions_->Register(*to_shard); !s.ok()) return s;
    dest_dir = store_->records_dir();
    dest_folder = staging::AddedFolderName(Key(*to_shard), new_name);
  } else {
    if (staging_ == nullptr) return ReadOnlyError();
    if (new_parent != staging_->root_id()) {
      return PosixError(EPERM, "a record moves into staging/ itself, not into a folder in it");
    }
    dest_dir = staging_->store()->records_dir();
    dest_folder = std::string(new_name);
  }
  if (struct stat st; ::lstat(absl::StrCat(dest_dir, "/", dest_folder).c_str(), &st) == 0) {
    return PosixError(EEXIST, absl::StrCat(new_name, ": exists"));
  }
  if (added) {
    // Nothing to delete from the shard: one rename leaves the folder here
    // or there, never both.
    MutexLock checkout(&checkout_mu_);
    if (auto s = RenameNoReplace(
            absl::StrCat(store_->records_dir(), "/", staging::AddedFolderName(Key(shard), name)),
            absl::StrCat(dest_dir, "/", dest_folder));
        !s.ok()) {
      return s;
    }
    {
      MutexLock lock(&mu_);
      added_[shard].erase(std::string(name));
      if (to_shard) added_[*to_shard].insert(std::string(new_name));
    }
    StagingView& view = to_shard ? folders_ : *staging_;
    auto moved =
        view.Lookup(to_shard ? folders_.IdOf(store_->root()) : staging_->root_id(), dest_folder);
    if (!moved.ok()) return moved.status();
    log::Info("moved the added record ", name, " of ", shards_[shard].index->path(), " to ",
              to_shard ? shards_[*to_shard].index->path() + "/" + std::string(new_name)
                       : "staging/" + std::string(new_name));
    return moved->ino;
  }
  const uint64_t record = RecordOf(a->ino);
  if (auto s = CheckOut(RecordId(shard, record, 0, shards_[shard].generation)); !s.ok()) return s;
  MutexLock checkout(&checkout_mu_);
  const FaultPoints faults;
  bool deleted = false;
  if (auto s = disk_.MoveOut(
          staging::EditedFolderName(Key(shard), record), dest_dir, dest_folder,
          [&] {
            absl::Status d = deletions_->DeleteRecord(shard, record);
            deleted = d.ok();
            return d;
          },
          [&] { faults.At("move_before_delete"); }, [&] { faults.At("move_after_delete"); });
      !s.ok()) {
    if (deleted) {
      log::Error("moved record ", record, " of ", shards_[shard].index->path(),
                 " but cannot name it ", dest_dir, "/", dest_folder, ": ", s.message(),
                 " (the next mount does)");
    }
    return s;
  }
  // Its edit-store nodes are gone from that store's tree; the ids the
  // kernel knows of its files follow them to their new place (their paths
  // in the record are what they were: a rename inside a folder keeps them).
  std::vector<std::pair<uint64_t, std::string>> paths;  // record-space id -> path in the record
  {
    MutexLock lock(&mu_);
    for (const auto& [id, inner] : translated_) {
      if (ShardOf(id) != shard || RecordOf(id) != record) continue;
      auto rel = store_->RelativePath(folders_.NodeOf(inner));
      if (rel.ok() && rel->find('/') != std::string::npos) {
        paths.emplace_back(id, rel->substr(rel->find('/') + 1));
      }
    }
  }
  for (uint64_t id : ForgetCheckOut(shard, record, nullptr)) ViewFor(id).Forget(id, 1);
  StagingView& view = to_shard ? folders_ : *staging_;
  auto moved =
      view.Lookup(to_shard ? folders_.IdOf(store_->root()) : staging_->root_id(), dest_folder);
  std::vector<std::pair<uint64_t, uint64_t>> retranslated;
  if (moved.ok()) {
    // (RelativePath reads the store's node table, which the renames on
    // disk did not change: the paths are inside the record's folder.)
    for (const auto& [id, rel] : paths) {
      uint64_t at = moved->ino;
      bool ok = true;
      std::vector<uint64_t> steps;
      for (absl::string_view part : absl::StrSplit(rel, '/')) {
        auto a = view.Lookup(at, part);
        if (!a.ok()) {
          ok = false;
          break;
        }
        steps.push_back(a->ino);
        at = a->ino;
      }
      // One reference kept (the file's), the folders' given back.
      for (size_t i = 0; i + 1 < steps.size(); ++i) view.Forget(steps[i], 1);
      if (ok) {
        retranslated.emplace_back(id, at);
      } else if (!steps.empty()) {
        view.Forget(steps.back(), 1);
      }
    }
  }
  MutexLock lock(&mu_);
  if (to_shard) added_[*to_shard].insert(std::string(new_name));
  if (!moved.ok()) return moved.status();
  moved_[RecordKey(shard, record)] = moved->ino;
  for (const auto& [id, inner] : retranslated) translated_[id] = inner;
  any_.store(true, std::memory_order_release);
  log::Info("moved record ", record, " of ", shards_[shard].index->path(), " to ",
            to_shard ? shards_[*to_shard].index->path() + "/" + std::string(new_name)
                     : "staging/" + std::string(new_name),
            " (pending: the shard is rewritten at unmount)");
  return moved->ino;
}

std::vector<uint64_t> RecordEdits::EditedRecords() const {
  MutexLock lock(&mu_);
  std::vector<uint64_t> out;
  for (const auto& [key, node] : edited_) out.push_back(key);
  return out;
}

absl::StatusOr<std::string> RecordEdits::EditedPayload(uint64_t shard, uint64_t record) {
  {
    MutexLock lock(&mu_);
    if (!edited_.contains(RecordKey(shard, record))) return absl::NotFoundError("not edited");
  }
  return staging::PayloadFromFolder(
      absl::StrCat(store_->records_dir(), "/", staging::EditedFolderName(Key(shard), record)),
      *types_);
}

absl::Status RecordEdits::WriteEntry(uint64_t shard, uint64_t record, uint32_t entry,
                                     absl::string_view content) {
  const uint64_t ino = RecordId(shard, record, 0, shards_[shard].generation);
  if (auto s = CheckOut(ino); !s.ok()) return s;
  auto parsed = records_->Parse(shard, record);
  if (!parsed.ok()) return parsed.status();
  const naming::Layout& layout = (*parsed)->layout;
  // The entry's path in the record, from the folder down.
  std::vector<std::string> names;
  for (uint32_t e = entry; e != 0; e = layout.entries[e].parent) {
    names.push_back(layout.entries[e].name);
  }
  auto folder = Inner(ino);
  if (!folder.ok()) return folder.status();
  uint64_t at = *folder;
  std::vector<uint64_t> looked_up;  // references to give back
  absl::Status s;
  for (auto it = names.rbegin(); it != names.rend() && s.ok(); ++it) {
    auto a = folders_.Lookup(at, *it);
    if (!a.ok()) {
      s = a.status();
      break;
    }
    looked_up.push_back(a->ino);
    at = a->ino;
  }
  if (s.ok()) {
    auto fh = folders_.Open(at, O_WRONLY | O_TRUNC);
    s = fh.status();
    if (fh.ok()) {
      auto w = folders_.Write(at, *fh, content, 0);
      s = w.ok() ? folders_.Flush(at, *fh) : w.status();
      folders_.Release(*fh);
    }
  }
  for (uint64_t id : looked_up) folders_.Forget(id, 1);
  return s;
}

absl::Status RecordEdits::RmdirInShard(uint64_t shard, absl::string_view name) {
  auto a = records_->LookupRecord(shard, name);
  if (a.ok() && IsEdited(a->ino)) {
    const uint64_t record = RecordOf(a->ino);
    const std::string folder = staging::EditedFolderName(Key(shard), record);
    // Empty? (rmdir would say, but the deletion must be durable first.)
    auto dir = ListDir::Open(absl::StrCat(store_->records_dir(), "/", folder));
    if (!dir.ok()) return dir.status();
    absl::string_view child;
    if (dir->Next(&child)) return PosixError(ENOTEMPTY, "directory not empty");
    return DeleteRecord(shard, record);
  }
  if (a.ok() || !absl::IsNotFound(a.status())) return records_->RmdirInShard(shard, name);
  bool added;
  {
    MutexLock lock(&mu_);
    auto it = added_.find(shard);
    added = it != added_.end() && it->second.contains(std::string(name));
  }
  if (!added) return a.status();
  if (auto s =
          folders_.Rmdir(folders_.IdOf(store_->root()), staging::AddedFolderName(Key(shard), name));
      !s.ok()) {
    return s;
  }
  MutexLock lock(&mu_);
  added_[shard].erase(std::string(name));
  return absl::OkStatus();
}

absl::Status RecordEdits::RenameAny(uint64_t parent, absl::string_view name, uint64_t new_parent,
                                    absl::string_view new_name, unsigned flags,
                                    std::optional<uint64_t> parent_shard,
                                    std::optional<uint64_t> new_parent_shard) {
  if (parent_shard || new_parent_shard) {
    // Between shard folders: only added records, renamed (or moved to
    // another shard) as themselves; a record's name is its position.
    if (!parent_shard || !new_parent_shard) {
      return PosixError(EPERM, "a record folder moves only between shard folders");
    }
    bool added;
    {
      MutexLock lock(&mu_);
      auto it = added_.find(*parent_shard);
      added = it != added_.end() && it->second.contains(std::string(name));
    }
    if (!added) {
      return PosixError(EPERM, absl::StrCat(name,
                                            ": a record of the shard is named by its position "
                                            "and cannot be renamed"));
    }
    if (auto s = staging::CheckName(new_name); !s.ok()) return s;
    if (records_->LookupRecord(*new_parent_shard, new_name).ok()) {
      return PosixError(EEXIST, absl::StrCat(new_name, ": a record of the shard"));
    }
    if (*new_parent_shard != *parent_shard) {
      if (auto s = deletions_->Register(*new_parent_shard); !s.ok()) return s;
    }
    const uint64_t root = folders_.IdOf(store_->root());
    if (auto s = folders_.Rename(root, staging::AddedFolderName(Key(*parent_shard), name), root,
                                 staging::AddedFolderName(Key(*new_parent_shard), new_name), flags);
        !s.ok()) {
      return s;
    }
    MutexLock lock(&mu_);
    added_[*parent_shard].erase(std::string(name));
    added_[*new_parent_shard].insert(std::string(new_name));
    return absl::OkStatus();
  }
  auto from = Inner(parent);
  if (!from.ok()) return from.status();
  auto to = Inner(new_parent);
  if (!to.ok()) return to.status();
  if (&ViewFor(*from) != &ViewFor(*to)) {
    return PosixError(EXDEV, "between a moved record and an edited one");
  }
  return ViewFor(*from).Rename(*from, name, *to, new_name, flags);
}

// ---- Translated calls ----

absl::StatusOr<Attr> RecordEdits::GetAttr(uint64_t ino) {
  auto in = Inner(ino);
  if (!in.ok()) return in.status();
  auto a = ViewFor(*in).GetAttr(*in);
  if (a.ok()) a->ino = ino;
  return a;
}

absl::StatusOr<Attr> RecordEdits::Lookup(uint64_t parent, absl::string_view name) {
  auto in = Inner(parent);
  if (!in.ok()) return in.status();
  return ViewFor(*in).Lookup(*in, name);
}

absl::Status RecordEdits::ReadDir(uint64_t ino, uint64_t fh, uint64_t offset, const EmitFn& emit) {
  auto in = Inner(ino);
  if (!in.ok()) return in.status();
  return ViewFor(*in).ReadDir(*in, ViewFor(*in).OwnsHandle(fh) ? fh : 0, offset, emit);
}

absl::StatusOr<uint64_t> RecordEdits::Open(uint64_t ino, int flags) {
  auto in = Inner(ino);
  if (!in.ok()) return in.status();
  return ViewFor(*in).Open(*in, flags);
}

absl::StatusOr<ReadResult> RecordEdits::Read(uint64_t ino, uint64_t fh, uint64_t offset,
                                             size_t size) {
  auto in = Inner(ino);
  if (!in.ok()) return in.status();
  return ViewFor(*in).Read(*in, ViewFor(*in).OwnsHandle(fh) ? fh : 0, offset, size);
}

absl::StatusOr<uint64_t> RecordEdits::OpenDir(uint64_t ino) {
  auto in = Inner(ino);
  if (!in.ok()) return in.status();
  return ViewFor(*in).OpenDir(*in);
}

absl::Status RecordEdits::Xattrs(uint64_t ino, bool read_error, XattrList* out) {
  auto in = Inner(ino);
  if (!in.ok()) return in.status();
  return ViewFor(*in).Xattrs(*in, read_error, out);
}

void RecordEdits::Forget(uint64_t ino, uint64_t /*n*/) {
  // The kernel forgets an id once, with all its references: the one
  // reference held for a translated id goes with it.
  if (SpaceOf(ino) != Space::kRecord || EntryOf(ino) == 0) return;
  uint64_t inner;
  {
    MutexLock lock(&mu_);
    auto it = translated_.find(ino);
    if (it == translated_.end()) return;
    inner = it->second;
    translated_.erase(it);
  }
  ViewFor(inner).Forget(inner, 1);
}

absl::StatusOr<std::pair<Attr, uint64_t>> RecordEdits::CreateFile(
    uint64_t parent, absl::string_view name, mode_t mode, int flags,
    std::optional<staging::Owner> owner) {
  auto in = Inner(parent);
  if (!in.ok()) return in.status();
  return ViewFor(*in).CreateFile(*in, name, mode, flags, owner);
}

absl::StatusOr<Attr> RecordEdits::Mkdir(uint64_t parent, absl::string_view name, mode_t mode,
                                        std::optional<staging::Owner> owner) {
  auto in = Inner(parent);
  if (!in.ok()) return in.status();
  return ViewFor(*in).Mkdir(*in, name, mode, owner);
}

absl::StatusOr<size_t> RecordEdits::Write(uint64_t ino, uint64_t fh, absl::string_view data,
                                          uint64_t offset) {
  auto in = Inner(ino);
  if (!in.ok()) return in.status();
  return ViewFor(*in).Write(*in, ViewFor(*in).OwnsHandle(fh) ? fh : 0, data, offset);
}

absl::StatusOr<Attr> RecordEdits::SetAttr(uint64_t ino, uint64_t fh, const struct stat& to,
                                          int bits) {
  auto in = Inner(ino);
  if (!in.ok()) return in.status();
  auto a = ViewFor(*in).SetAttr(*in, ViewFor(*in).OwnsHandle(fh) ? fh : 0, to, bits);
  if (a.ok()) a->ino = ino;
  return a;
}

absl::Status RecordEdits::Unlink(uint64_t parent, absl::string_view name) {
  auto in = Inner(parent);
  if (!in.ok()) return in.status();
  return ViewFor(*in).Unlink(*in, name);
}

absl::Status RecordEdits::Rmdir(uint64_t parent, absl::string_view name) {
  auto in = Inner(parent);
  if (!in.ok()) return in.status();
  return ViewFor(*in).Rmdir(*in, name);
}

absl::Status RecordEdits::Rename(uint64_t parent, absl::string_view name, uint64_t new_parent,
                                 absl::string_view new_name, unsigned flags) {
  return RenameAny(parent, name, new_parent, new_name, flags, std::nullopt, std::nullopt);
}

absl::Status RecordEdits::Flush(uint64_t ino, uint64_t fh) {
  auto in = Inner(ino);
  if (!in.ok()) return in.status();
  return ViewFor(*in).Flush(*in, ViewFor(*in).OwnsHandle(fh) ? fh : 0);
}

absl::Status RecordEdits::Fsync(uint64_t ino, uint64_t fh, bool datasync) {
  auto in = Inner(ino);
  if (!in.ok()) return in.status();
  return ViewFor(*in).Fsync(*in, ViewFor(*in).OwnsHandle(fh) ? fh : 0, datasync);
}

}  // namespace tfrecordfs::vfs
