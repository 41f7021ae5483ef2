#include "tfrecordfs/vfs/class_view.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <numeric>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/example/record.h"
#include "tfrecordfs/naming/gallery.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/vfs/node_id.h"

namespace tfrecordfs::vfs {

namespace {

constexpr mode_t kDirMode = S_IFDIR | 0555;
constexpr uint64_t kRootId = 1;  // FUSE_ROOT_ID, the tree's node 0
constexpr size_t kMaxShardName = 160;

constexpr uint64_t Position(uint64_t member, uint64_t image) {
  return ((member << kEntryBits) | image) + 2;
}

}  // namespace

ClassView::ClassView(const std::vector<MountedShard>& shards,
                     const std::vector<std::string>& mount_paths, RecordView* records,
                     RecordEdits* edits, ClassGroups groups)
    : shards_(shards), records_(records), edits_(edits), groups_(std::move(groups)) {
  for (size_t s = 0; s < shards_.size(); ++s) {
    // At most kMaxShardName bytes, leaving room in a 255-byte name for the
    // record and an image's feature.
    shard_names_.push_back(naming::EscapeNamePart(mount_paths[s], kMaxShardName));
    shard_by_name_.try_emplace(shard_names_.back(), static_cast<uint32_t>(s));
  }
  // Members in name order: shards by escaped name, then records.
  std::vector<uint32_t> order(shards_.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return shard_names_[a] < shard_names_[b]; });
  folders_.resize(groups_.folders.size());
  for (size_t f = 0; f < folders_.size(); ++f) {
    folders_[f].name = groups_.folders[f];
    if (f < groups_.values.size()) folders_[f].value = groups_.values[f];
  }
  shard_rank_.resize(shards_.size());
  for (uint32_t i = 0; i < order.size(); ++i) shard_rank_[order[i]] = i;
  FillFolders();
  // Records edited through an earlier mount show where their edits put them.
  if (edits_ != nullptr) {
    for (uint64_t key : edits_->EditedRecords()) {
      const uint64_t shard = ShardOfKey(key), record = RecordOfKey(key);
      const uint32_t now = FolderOfEdited(shard, record);
      if (record < groups_.folder_of[shard].size() && now != groups_.folder_of[shard][record]) {
        MutexLock lock(&mu_);
        moved_[key] = now;
      }
    }
  }
}

void ClassView::FillFolders() {
  mtime_ = {};
  for (const MountedShard& shard : shards_) {
    const struct timespec& t = shard.mtime;
    if (t.tv_sec > mtime_.tv_sec || (t.tv_sec == mtime_.tv_sec && t.tv_nsec > mtime_.tv_nsec)) {
      mtime_ = t;
    }
  }
  std::vector<uint32_t> order(shards_.size());
  for (uint32_t s = 0; s < shards_.size(); ++s) order[shard_rank_[s]] = s;
  for (Folder& folder : folders_) folder.members.clear();
  for (uint32_t s : order) {
    const std::vector<uint32_t>& of = groups_.folder_of[s];
    for (uint64_t r = 0; r < of.size(); ++r) {
      if (of[r] != kNotGrouped) folders_[of[r]].members.push_back(RecordKey(s, r));
    }
  }
}

void ClassView::ResetShard(uint64_t shard, const ShardGrouping& grouping) {
  std::vector<uint32_t> remap(grouping.folders.size());
  for (size_t f = 0; f < remap.size(); ++f) {
    remap[f] = FolderIndex(ShownFolder(
        grouping.folders[f], f < grouping.values.size() ? grouping.values[f] : std::nullopt,
        groups_.class_names));
    if (remap[f] == kNotGrouped) {
      log::Warning(shards_[shard].index->path(), ": records with ", groups_.feature, " folder '",
                   grouping.folders[f],
                   "' have no class folder in this mount; remount to see them");
    }
  }
  std::vector<uint32_t>& of = groups_.folder_of[shard];
  of.clear();
  for (uint32_t f : grouping.folder_of) of.push_back(f == kNotGrouped ? kNotGrouped : remap[f]);
  {
    MutexLock lock(&mu_);
    absl::erase_if(moved_, [&](const auto& kv) { return ShardOfKey(kv.first) == shard; });
  }
  FillFolders();
}

uint32_t ClassView::FolderIndex(absl::string_view name) const {
  auto it = std::lower_bound(folders_.begin(), folders_.end(), name,
                             [](const Folder& a, absl::string_view n) { return a.name < n; });
  if (it == folders_.end() || it->name != name) return kNotGrouped;
  return static_cast<uint32_t>(it - folders_.begin());
}

uint32_t ClassView::FolderOfEdited(uint64_t shard, uint64_t record) const {
  auto payload = edits_->EditedPayload(shard, record);
  if (!payload.ok()) return kNotGrouped;  // makes no record now: shown nowhere
  const naming::RecordClass c = naming::ClassOf(example::DecodeRecord(*payload), groups_.feature);
  return FolderIndex(ShownFolder(c.folder,
                                 c.has_value ? std::optional<std::string>(c.value) : std::nullopt,
                                 groups_.class_names));
}

uint32_t ClassView::FolderOf(uint64_t shard, uint64_t record) const {
  if (records_->IsDeleted(shard, record)) return kNotGrouped;
  {
    MutexLock lock(&mu_);
    if (auto it = moved_.find(RecordKey(shard, record)); it != moved_.end()) return it->second;
  }
  const std::vector<uint32_t>& of = groups_.folder_of[shard];
  return record < of.size() ? of[record] : kNotGrouped;
}

std::vector<uint64_t> ClassView::MembersOf(uint64_t f) const {
  std::vector<uint64_t> out;
  std::vector<uint64_t> moved_in;
  {
    MutexLock lock(&mu_);
    for (const auto& [key, to] : moved_) {
      if (to == f) moved_in.push_back(key);
    }
  }
  for (uint64_t key : folders_[f].members) {
    if (FolderOf(ShardOfKey(key), RecordOfKey(key)) == f) out.push_back(key);
  }
  if (moved_in.empty()) return out;
  for (uint64_t key : moved_in) {
    if (!records_->IsDeleted(ShardOfKey(key), RecordOfKey(key)) &&
        groups_.folder_of[ShardOfKey(key)][RecordOfKey(key)] != f) {
      out.push_back(key);
    }
  }
  auto rank = [&](uint64_t key) {
    return std::make_pair(shard_rank_[ShardOfKey(key)], RecordOfKey(key));
  };
  std::sort(out.begin(), out.end(), [&](uint64_t a, uint64_t b) { return rank(a) < rank(b); });
  return out;
}

absl::StatusOr<uint64_t> ClassView::Resolve(uint64_t ino) const {
  if (ino == kRootId) return kRoot;
  if (SpaceOf(ino) == Space::kClass && ClassFolderIndex(ino) < folders_.size()) {
    return ClassFolderIndex(ino);
  }
  return absl::NotFoundError("stale node id");
}

Attr ClassView::DirAttr(uint64_t ino) const {
  Attr a;
  a.ino = ino;
  a.mode = kDirMode;
  a.nlink = 1;
  a.mtime = mtime_;
  return a;
}

std::string ClassView::Stem(uint64_t shard, uint64_t record) const {
  return absl::StrCat(shard_names_[shard], "-", records_->RecordName(shard, record));
}

absl::StatusOr<Attr> ClassView::GetAttr(uint64_t ino) {
  auto f = Resolve(ino);
  if (!f.ok()) return f.status();
  return DirAttr(ino);
}

absl::StatusOr<Attr> ClassView::Lookup(uint64_t parent, absl::string_view name) {
  auto f = Resolve(parent);
  if (!f.ok()) return f.status();
  if (*f == kRoot) {
    auto it = std::lower_bound(folders_.begin(), folders_.end(), name,
                               [](const Folder& a, absl::string_view n) { return a.name < n; });
    if (it == folders_.end() || it->name != name) return absl::NotFoundError(name);
    return DirAttr(ClassFolderId(static_cast<uint64_t>(it - folders_.begin())));
  }
  // `<shard>-<record>` then '.' or '-': try every '-' that could end the
  // shard's name (shard names may hold '-' themselves).
  for (size_t dash = name.find('-'); dash != absl::string_view::npos;
       dash = name.find('-', dash + 1)) {
    auto s = shard_by_name_.find(name.substr(0, dash));
    if (s == shard_by_name_.end()) continue;
    const uint64_t shard = s->second;
    const size_t width = static_cast<size_t>(shards_[shard].name_width);
    const size_t end = dash + 1 + width;
    if (name.size() <= end || (name[end] != '.' && name[end] != '-')) continue;
    const absl::string_view digits = name.substr(dash + 1, width);
    uint64_t record;
    if (!std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) ||
        !absl::SimpleAtoi(digits, &record) || record >= groups_.folder_of[shard].size() ||
        FolderOf(shard, record) != *f) {
      continue;
    }
    auto rec = records_->Parse(shard, record);
    if (!rec.ok()) return rec.status();
    for (const naming::GalleryImage& image :
         naming::GalleryImages((*rec)->layout, name.substr(0, end))) {
      if (image.name == name) return records_->EntryAttr(shard, record, image.entry, **rec);
    }
  }
  return absl::NotFoundError(name);
}

absl::Status ClassView::ReadDir(uint64_t ino, uint64_t /*fh*/, uint64_t offset,
                                const EmitFn& emit) {
  auto f = Resolve(ino);
  if (!f.ok()) return f.status();
  if (!EmitDots(DirAttr(ino), &offset, emit)) return absl::OkStatus();
  if (*f == kRoot) {
    for (uint64_t i = offset - 2; i < folders_.size(); ++i) {
      if (!emit(folders_[i].name, DirAttr(ClassFolderId(i)), i + 3)) break;
    }
    return absl::OkStatus();
  }
  const std::vector<uint64_t> members = MembersOf(*f);
  const uint64_t mask = (uint64_t{1} << kEntryBits) - 1;
  uint64_t first_image = (offset - 2) & mask;
  for (uint64_t m = (offset - 2) >> kEntryBits; m < members.size(); ++m, first_image = 0) {
    const uint64_t shard = ShardOfKey(members[m]);
    const uint64_t record = RecordOfKey(members[m]);
    auto rec = records_->Parse(shard, record);
    if (!rec.ok()) continue;  // damaged (logged by the record view)
    const std::vector<naming::GalleryImage> images =
        naming::GalleryImages((*rec)->layout, Stem(shard, record));
    for (uint64_t k = first_image; k < images.size(); ++k) {
      const uint64_t next = k + 1 < images.size() ? Position(m, k + 1) : Position(m + 1, 0);
      if (!emit(images[k].name, records_->EntryAttr(shard, record, images[k].entry, **rec), next)) {
        return absl::OkStatus();
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ClassView::Open(uint64_t ino, int /*flags*/) {
  auto f = Resolve(ino);
  if (!f.ok()) return f.status();
  return PosixError(EISDIR, "is a directory");
}

absl::StatusOr<ReadResult> ClassView::Read(uint64_t ino, uint64_t /*fh*/, uint64_t /*offset*/,
                                           size_t /*size*/) {
  auto f = Resolve(ino);
  if (!f.ok()) return f.status();
  return PosixError(EISDIR, "is a directory");
}

absl::Status ClassView::Xattrs(uint64_t ino, bool /*read_error*/, XattrList* out) {
  auto f = Resolve(ino);
  if (!f.ok()) return f.status();
  if (*f == kRoot) return absl::OkStatus();
  AddXattr(out, "class_feature", groups_.feature);
  // The whole value (a folder name cut to 255 bytes, or a ClassLabel
  // name, is not the value).
  if (folders_[*f].value) AddXattr(out, "class", *folders_[*f].value);
  return absl::OkStatus();
}

absl::Status ClassView::Unlink(uint64_t parent, absl::string_view name) {
  auto f = Resolve(parent);
  if (!f.ok()) return f.status();
  if (edits_ == nullptr) return ReadOnlyError();
  if (*f == kRoot) return PosixError(EPERM, "class folders are the class feature's values");
  auto a = Lookup(parent, name);
  if (!a.ok()) return a.status();
  return edits_->DeleteRecord(ShardOf(a->ino), RecordOf(a->ino));
}

absl::Status ClassView::Rename(uint64_t parent, absl::string_view name, uint64_t new_parent,
                               absl::string_view new_name, unsigned flags) {
  auto from = Resolve(parent);
  if (!from.ok()) return from.status();
  auto to = Resolve(new_parent);
  if (!to.ok()) return to.status();
  if (edits_ == nullptr) return ReadOnlyError();
  auto refuse = [&](absl::string_view why) {
    log::Warning("mv ", name, " to ", new_name, ": ", why);
    return PosixError(EPERM, why);
  };
  if (*from == kRoot || *to == kRoot) {
    return refuse("class folders are the class feature's values: they cannot be renamed");
  }
  if (name != new_name) return refuse("an image's name is derived from its record; keep it");
  if ((flags & ~static_cast<unsigned>(RENAME_NOREPLACE)) != 0) {
    return refuse("only a plain move relabels");
  }
  auto a = Lookup(parent, name);
  if (!a.ok()) return a.status();
  if (*from == *to) return absl::OkStatus();
  const uint64_t shard = ShardOf(a->ino), record = RecordOf(a->ino);
  const std::string& target = folders_[*to].name;
  if (!folders_[*to].value) {
    return refuse(absl::StrCat("'", target, "' is not a value of ", groups_.feature));
  }
  if (!folders_[*from].value) {
    return refuse(absl::StrCat("the record has no single value of ", groups_.feature,
                               " to change; set it in a records-view mount"));
  }
  // The feature's file in the record, and its value as that file spells it.
  auto rec = records_->Parse(shard, record);
  if (!rec.ok()) return rec.status();
  const naming::Layout& layout = (*rec)->layout;
  std::optional<uint32_t> file;
  naming::EntryRole role = naming::EntryRole::kFolder;
  for (uint32_t e = 1; e < layout.entries.size(); ++e) {
    auto info = naming::FeatureOf(layout, e);
    if (!info || info->name != groups_.feature || info->feature_list || info->example ||
        info->value) {
      continue;
    }
    if (info->role == naming::EntryRole::kInt64 || info->role == naming::EntryRole::kFloat ||
        info->role == naming::EntryRole::kText) {
      file = e;
      role = info->role;
      break;
    }
  }
  if (!file) {
    return refuse(absl::StrCat("the record keeps ", groups_.feature,
                               " in a form a move cannot set; set it in a records-view mount"));
  }
  // The folder's whole value: its name may be cut (`%~` and a hash) or a
  // ClassLabel name.
  const std::string& value = *folders_[*to].value;
  int64_t n;
  float x;
  if ((role == naming::EntryRole::kInt64 && !absl::SimpleAtoi(value, &n)) ||
      (role == naming::EntryRole::kFloat && !absl::SimpleAtof(value, &x)) ||
      (role == naming::EntryRole::kText && !naming::IsSingleLineText(value))) {
    return PosixError(EINVAL, absl::StrCat("'", value, "' is not a value ", groups_.feature,
                                           " can take in this record"));
  }
  if (auto s = edits_->WriteEntry(shard, record, *file, absl::StrCat(value, "\n")); !s.ok()) {
    log::Warning("mv ", name, " to ", target, ": ", s.message());
    return s;
  }
  const uint32_t now = FolderOfEdited(shard, record);
  {
    MutexLock lock(&mu_);
    moved_[RecordKey(shard, record)] = now;
  }
  log::Info("relabelled record ", record, " of ", shards_[shard].index->path(), ": ",
            groups_.feature, " = ", value, " (pending: the shard is rewritten at unmount)");
  return absl::OkStatus();
}

}  // namespace tfrecordfs::vfs
