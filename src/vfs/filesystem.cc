#include "tfrecordfs/vfs/filesystem.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/objstore/listing.h"
#include "tfrecordfs/scan/scan.h"
#include "tfrecordfs/vfs/node_id.h"

namespace tfrecordfs::vfs {

namespace {

absl::Status NoXattr(absl::string_view name) {
  return PosixError(ENODATA, absl::StrCat("no attribute ", name));
}

}  // namespace

Filesystem::Filesystem(const Options& options)
    : shard_set_(options.max_open_shards, options.inflate_cache_bytes, options.index_store) {}

Filesystem::~Filesystem() = default;

absl::StatusOr<std::unique_ptr<Filesystem>> Filesystem::Create(const Options& options) {
  if (options.sources.empty()) return absl::InvalidArgumentError("no SOURCE given");
  std::unique_ptr<Filesystem> fs(new Filesystem(options));
  // Walks and reads wait on I/O, not CPU, where every read is a network
  // round trip: read ahead there (scan::Scan keeps many shards in flight).
  const bool remote = std::any_of(options.sources.begin(), options.sources.end(),
                                  [](const std::string& p) { return source::OnRemoteStorage(p); });
  const bool read_ahead = remote && options.readahead_bytes > 0;
  // Objects in larger blocks: one ranged GET costs a round trip whatever
  // its size (a network file system carries at most 1 MiB a request).
  const size_t readahead_block =
      std::any_of(options.sources.begin(), options.sources.end(),
                  [](const std::string& p) { return objstore::IsObjectUrl(p); })
          ? source::Readahead::kObjectBlock
          : source::Readahead::kBlock;
  // view=classes reads every record at mount, before the daemon forks into
  // the background: through the readahead pool, its threads (and the
  // condition variable they waited on, which glibc then never wakes in
  // the child) would be lost, and the first read missing its cache after
  // the fork (a commit's regrouping) would wait forever. The shards are
  // grouped without readahead, which starts once they are grouped.
  if (read_ahead && options.view != ViewKind::kClasses) {
    if (auto s = fs->shard_set_.StartReadahead(options.readahead_bytes, readahead_block); !s.ok()) {
      return s;
    }
  }
  auto entries = fs->OpenShards(options);
  if (!entries.ok()) return entries.status();
  fs->MakeViews(options, *entries);
  if (options.view == ViewKind::kClasses) {
    if (auto s = fs->MakeClassView(options); !s.ok()) return s;
    if (read_ahead) {
      if (auto s = fs->shard_set_.StartReadahead(options.readahead_bytes, readahead_block);
          !s.ok()) {
        return s;
      }
    }
  }
  if (auto s = fs->GraftStaging(options); !s.ok()) return s;
  return fs;
}

absl::StatusOr<Filesystem::MountEntries> Filesystem::OpenShards(const Options& options) {
  scan::ScanOptions scan_options;
  scan_options.sources = options.sources;
  scan_options.store = options.index_store;
  scan_options.threads = options.index_threads;
  scan_options.before_probe = [&](size_t files, int threads) {
    // Shards are opened on demand, at most max_open_shards at once (plus one
    // per walk thread while indexing): lift the soft limit, and grow the
    // table before the threads exist (growing it under them waits for an RCU
    // grace period each time).
    const size_t allowed =
        ReserveDescriptors(std::min(files, options.max_open_shards) + threads + 64);
    // Half of what the limit allows at most: staged files, index files and
    // FUSE need the rest.
    shard_set_.set_max_open(std::min(options.max_open_shards, std::max<size_t>(allowed / 2, 16)));
  };
  scan_options.on_other = [](const scan::OtherFile& f) {
    if (const std::string note = scan::NotAShardNote(f); !note.empty()) {
      log::Warning(note, "; shown as a plain file");
    }
  };
  // Objects keep their fetched bytes in the same cache as decompressed
  // blocks (one byte budget, inflate_cache_bytes). Not owned: the
  // filesystem outlives its shards' reads.
  scan_options.object_cache = std::shared_ptr<source::BlockCache>(
      std::shared_ptr<source::BlockCache>(), &shard_set_.block_cache());
  auto scanned = scan::Scan(scan_options);
  if (!scanned.ok()) return scanned.status();
  for (const scan::RefusedShard& r : scanned->refused) {
    log::Error(r.why.message(), "; shown as a plain file");
  }
  if (!scanned->unreadable.empty() && scanned->entries.empty()) {
    // Nothing else to serve: the mount fails as the object did.
    return scanned->unreadable.front().why;
  }
  for (const scan::RefusedShard& u : scanned->unreadable) {
    log::Error(u.why.message(), "; not shown (the other objects are; remount to try it again)");
  }
  if (scanned->shards.size() > kMaxShards) {
    return absl::ResourceExhaustedError(
        absl::StrCat("more than ", kMaxShards, " shards in the sources"));
  }

  std::vector<size_t> shard_entries;
  for (scan::ScannedShard& shard : scanned->shards) {
    const index::ShardIndex& idx = *shard.index;
    for (const std::string& line : index::FormatProblems(shard.path, idx.problems())) {
      log::Warning(line);
    }
    if (!idx.problems().empty()) {
      log::Warning(shard.path, ": damaged shard: ", idx.num_records(), " record(s) indexed");
    }
    const uint64_t n = idx.num_records();
    if (n > kMaxRecordsPerShard) {
      log::Warning(shard.path, ": only the first ", kMaxRecordsPerShard, " of ", n,
                   " records are shown");
    }
    shard_entries.push_back(shard.entry);
    const struct timespec mtime = scanned->entries[shard.entry].st.st_mtim;
    if (auto s = shard_set_.Add(shard, mtime); !s.ok()) return s;
  }
  return MountEntries{std::move(scanned->entries), std::move(shard_entries)};
}

void Filesystem::MakeViews(const Options& options, const MountEntries& entries) {
  std::vector<MountedShard>& shards = shard_set_.current();
  RecordViewOptions record_options;
  record_options.cache_records = options.cache_records;
  record_options.cache_bytes = options.cache_bytes;
  record_options.kind_sample_per_call = options.kind_sample_per_call;
  record_options.kind_sample_total = options.kind_sample_total;
  record_options.on_index_mismatch = options.on_index_mismatch;
  if (options.deletions != nullptr) {
    deletions_ = std::make_unique<RecordDeletions>(shards, options.deletions);
    record_options.deletions = deletions_.get();
  }
  // Records take changes where the edit overlay is made below (the image
  // views take none: their files stay read-only).
  const bool editable = options.deletions != nullptr && options.edits != nullptr &&
                        options.view == ViewKind::kRecords;
  record_options.writable = editable;
  records_ = std::make_unique<RecordView>(shards, std::move(record_options));
  // The previous generation of each shard a commit rewrites while mounted
  // (ShardSet::retired(): none yet). A small cache (its records are read by
  // files kept open across a commit); no deletions, no sampling.
  RecordViewOptions retired_options;
  retired_options.cache_records = 256;
  retired_options.cache_bytes = size_t{1} << 20;
  retired_options.kind_sample_per_call = {0, 0};
  retired_options.kind_sample_total = {0, 0};
  retired_view_ = std::make_unique<RecordView>(shard_set_.retired(), std::move(retired_options));
  staging_types_ = options.staging_types != nullptr ? options.staging_types : &records_->sampler();
  if (options.staging != nullptr && options.view == ViewKind::kRecords) {
    staging_ = std::make_unique<StagingView>(options.staging, staging_types_);
  }
  edit_list_ = options.deletions;
  edit_store_ = options.edits;
  index_store_ = options.index_store;
  if (deletions_ != nullptr && options.edits != nullptr) {
    edits_ = std::make_unique<RecordEdits>(shards, records_.get(), deletions_.get(), options.edits,
                                           staging_types_, staging_.get());
    edits_->set_max_edited(options.max_edited);
  }
  tree_ = std::make_unique<TreeView>(entries.entries, entries.shard_entries, shards,
                                     &shard_set_.fd_cache(),
                                     /*shards_only=*/options.view == ViewKind::kGallery,
                                     /*writable_shards=*/editable);
  if (options.view == ViewKind::kGallery) {
    gallery_ = std::make_unique<GalleryView>(shards, records_.get(), edits_.get());
  }
  shard_folders_ = gallery_ ? static_cast<ShardFolderView*>(gallery_.get())
                   : edits_ ? static_cast<ShardFolderView*>(edits_.get())
                            : static_cast<ShardFolderView*>(records_.get());
}

absl::Status Filesystem::MakeClassView(const Options& options) {
  std::vector<MountedShard>& shards = shard_set_.current();
  if (options.class_feature.empty()) {
    return absl::InvalidArgumentError("view=classes needs class_feature=NAME");
  }
  GroupOptions& group = group_options_;
  group.feature = options.class_feature;
  group.store = options.index_store;
  group.threads = options.index_threads > 0
                      ? options.index_threads
                      : static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
  group.progress = options.on_group_progress;
  group.class_names = ClassNamesBeside(shards, options.class_feature);
  ClassGroups groups = GroupByClass(shards, group, &group_stats_);
  group.progress = nullptr;  // a commit's regrouping shows none
  const GroupStats& g = group_stats_;
  log::Info("class folders by feature '", options.class_feature, "': ", groups.folders.size(),
            " folder(s); grouping of ", shards.size(), " shard(s): ", g.shards_loaded,
            " loaded from the index cache, ", g.shards_decoded, " decoded (", g.records_decoded,
            " record(s)",
            g.records_damaged ? absl::StrCat(", ", g.records_damaged, " damaged") : "", ")",
            g.saved ? absl::StrCat(", ", g.saved, " saved") : "");
  classes_ = std::make_unique<ClassView>(shards, shard_set_.mount_paths(), records_.get(),
                                         edits_.get(), std::move(groups));
  return absl::OkStatus();
}

absl::Status Filesystem::GraftStaging(const Options& options) {
  // Only the records view has a staging folder (MakeViews): the image views
  // take no new records (they go through a records-view mount).
  if (options.staging != nullptr && options.view == ViewKind::kRecords) {
    if (auto s = staging::CheckName(options.staging_name); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid staging folder name '", options.staging_name, "'"));
    }
    if (auto s = tree_->AddGraft(options.staging_name, staging_.get(), staging_->root_id());
        !s.ok()) {
      return absl::AlreadyExistsError(absl::StrCat("the staging folder name ", s.message(),
                                                   "; choose another with -o staging=NAME"));
    }
  }
  return absl::OkStatus();
}

bool Filesystem::Mutable(uint64_t ino) const {
  ReaderMutexLock serve(&serve_mu_);
  return SpaceOf(ino) == Space::kStaging ||
         (edits_ && !shard_set_.IsRetired(ino) && edits_->IsEdited(ino));
}

View* Filesystem::WriteViewOf(uint64_t ino, absl::Status* status) const {
  // The first change of a record checks it out into the edit store
  // (record_edits.h); without one, the record view answers (EROFS).
  if (shard_set_.IsRetired(ino)) {
    // A file of the shard a commit replaced: read-only, as that file is.
    *status = PosixError(EROFS, "a record of the shard as it was before the last commit");
    return nullptr;
  }
  if (edits_ && SpaceOf(ino) == Space::kRecord) {
    if (gallery_ || classes_) {
      // The image views take rm and (class folders) mv only.
      *status = PosixError(EROFS, "the image views change records only by rm and mv");
      return nullptr;
    }
    *status = edits_->CheckOut(ino);
    return status->ok() ? edits_.get() : nullptr;
  }
  View* view = ViewOf(ino);
  if (view == nullptr) *status = ReadOnlyError();
  return view;
}

View* Filesystem::ViewOf(uint64_t ino) const {
  switch (SpaceOf(ino)) {
    case Space::kTree:
      // view=classes: only the root is a tree id, and it is the class view's.
      return classes_ ? static_cast<View*>(classes_.get()) : tree_.get();
    case Space::kRecord:
      if (shard_set_.IsRetired(ino)) {
        // A record edited before the commit showed the edit store's files,
        // not the old shard's: its old ids are stale.
        return shard_set_.RetiredStale(ino) ? nullptr : retired_view_.get();
      }
      if (edits_ && edits_->IsEdited(ino)) return edits_.get();
      return records_.get();
    case Space::kStaging:
      if (IsEditId(ino)) return edits_ ? &edits_->folders() : nullptr;
      return staging_.get();
    case Space::kClass:
      return classes_.get();
  }
  return nullptr;
}

namespace {

absl::Status Stale() { return absl::NotFoundError("stale node id"); }

}  // namespace

absl::StatusOr<Attr> Filesystem::GetAttr(uint64_t ino) {
  ReaderMutexLock serve(&serve_mu_);
  View* view = ViewOf(ino);
  if (view == nullptr) return Stale();
  return view->GetAttr(ino);
}

absl::StatusOr<Attr> Filesystem::Lookup(uint64_t parent, absl::string_view name) {
  ReaderMutexLock serve(&serve_mu_);
  if (auto shard = ShardFolder(parent)) {
    return shard_folders_->LookupInShard(*shard, name);
  }
  View* view = ViewOf(parent);
  if (view == nullptr) return Stale();
  return view->Lookup(parent, name);
}

absl::Status Filesystem::ReadDir(uint64_t ino, uint64_t fh, uint64_t offset, const EmitFn& emit) {
  ReaderMutexLock serve(&serve_mu_);
  if (auto shard = ShardFolder(ino)) {
    auto self = tree_->GetAttr(ino);
    if (!self.ok()) return self.status();
    // A listed shard folder is usually walked next (`find`, `ls -R`): its
    // first records' bytes are asked for now, not at the first record read.
    if (offset == 0) shard_set_.current()[*shard].source->ExpectReadFromStart();
    return shard_folders_->ListShard(*shard, *self, offset, emit);
  }
  View* view = ViewOf(ino);
  if (view == nullptr) return PosixError(EBADF, "no directory handle");
  return view->ReadDir(ino, fh, offset, emit);
}

absl::StatusOr<uint64_t> Filesystem::Open(uint64_t ino, int flags) {
  ReaderMutexLock serve(&serve_mu_);
  if ((flags & (O_WRONLY | O_RDWR | O_TRUNC)) != 0) {
    return OnWriteView(ino, [&](View* view) { return view->Open(ino, flags); });
  }
  View* view = ViewOf(ino);
  if (view == nullptr) return Stale();
  return view->Open(ino, flags);
}

absl::StatusOr<uint64_t> Filesystem::OpenDir(uint64_t ino) {
  ReaderMutexLock serve(&serve_mu_);
  View* view = ViewOf(ino);
  if (view == nullptr) return Stale();
  return view->OpenDir(ino);
}

absl::StatusOr<ReadResult> Filesystem::Read(uint64_t ino, uint64_t fh, uint64_t offset,
                                            size_t size) {
  ReaderMutexLock serve(&serve_mu_);
  View* view = ViewOf(ino);
  if (view == nullptr) return Stale();
  return view->Read(ino, fh, offset, size);
}

// ---- Handles: only the staging views (staging/ and the edit store's
// folders) hand any out (the others return 0); their numbers say whose ----

StagingView* Filesystem::HandleOwner(uint64_t fh) const {
  if (edits_ && edits_->folders().OwnsHandle(fh)) return &edits_->folders();
  return staging_.get();
}

void Filesystem::ReleaseDir(uint64_t fh) {
  ReaderMutexLock serve(&serve_mu_);
  if (StagingView* v = HandleOwner(fh)) v->ReleaseDir(fh);
}

void Filesystem::Release(uint64_t fh) {
  ReaderMutexLock serve(&serve_mu_);
  if (StagingView* v = HandleOwner(fh)) v->Release(fh);
}

void Filesystem::Discard(uint64_t fh) {
  ReaderMutexLock serve(&serve_mu_);
  if (StagingView* v = HandleOwner(fh)) v->Discard(fh);
}

absl::Status Filesystem::Flush(uint64_t ino, uint64_t fh) {
  ReaderMutexLock serve(&serve_mu_);
  View* view = ViewOf(ino);
  if (view == nullptr) return absl::OkStatus();
  return view->Flush(ino, fh);
}

absl::Status Filesystem::Fsync(uint64_t ino, uint64_t fh, bool datasync) {
  ReaderMutexLock serve(&serve_mu_);
  View* view = ViewOf(ino);
  if (view == nullptr) return absl::OkStatus();
  return view->Fsync(ino, fh, datasync);
}

// ---- Writes: the view of the node decides (only staging takes them) ----

absl::StatusOr<std::pair<Attr, uint64_t>> Filesystem::CreateFile(
    uint64_t parent, absl::string_view name, mode_t mode, int flags,
    std::optional<staging::Owner> owner) {
  ReaderMutexLock serve(&serve_mu_);
  if (edits_ && ShardFolder(parent)) {
    return PosixError(EPERM, absl::StrCat(name, ": a shard folder holds record folders only"));
  }
  return OnWriteView(
      parent, [&](View* view) { return view->CreateFile(parent, name, mode, flags, owner); });
}

absl::StatusOr<Attr> Filesystem::Mkdir(uint64_t parent, absl::string_view name, mode_t mode,
                                       std::optional<staging::Owner> owner) {
  ReaderMutexLock serve(&serve_mu_);
  // A new folder in a shard folder: a record added to the shard.
  if (auto shard = ShardFolder(parent)) {
    return shard_folders_->MkdirInShard(*shard, name, mode, owner);
  }
  return OnWriteView(parent, [&](View* view) { return view->Mkdir(parent, name, mode, owner); });
}

absl::StatusOr<size_t> Filesystem::Write(uint64_t ino, uint64_t fh, absl::string_view data,
                                         uint64_t offset) {
  ReaderMutexLock serve(&serve_mu_);
  return OnWriteView(ino, [&](View* view) { return view->Write(ino, fh, data, offset); });
}

absl::StatusOr<Attr> Filesystem::SetAttr(uint64_t ino, uint64_t fh, const struct stat& to,
                                         int bits) {
  ReaderMutexLock serve(&serve_mu_);
  return OnWriteView(ino, [&](View* view) { return view->SetAttr(ino, fh, to, bits); });
}

absl::Status Filesystem::Unlink(uint64_t parent, absl::string_view name) {
  ReaderMutexLock serve(&serve_mu_);
  // rm of an image in the gallery: its record is deleted.
  if (auto shard = ShardFolder(parent)) return shard_folders_->UnlinkInShard(*shard, name);
  return OnWriteView(parent, [&](View* view) { return view->Unlink(parent, name); });
}

absl::Status Filesystem::Rmdir(uint64_t parent, absl::string_view name) {
  ReaderMutexLock serve(&serve_mu_);
  // A record folder: deleting the record (record_deletions.h), or an added
  // one's folder (record_edits.h).
  if (auto shard = ShardFolder(parent)) return shard_folders_->RmdirInShard(*shard, name);
  return OnWriteView(parent, [&](View* view) { return view->Rmdir(parent, name); });
}

bool Filesystem::EditSide(uint64_t ino) const {
  return SpaceOf(ino) == Space::kRecord || IsEditId(ino);
}

absl::Status Filesystem::Rename(uint64_t parent, absl::string_view name, uint64_t new_parent,
                                absl::string_view new_name, unsigned flags) {
  ReaderMutexLock serve(&serve_mu_);
  if (edits_ && !gallery_) {
    const auto from_shard = ShardFolder(parent), to_shard = ShardFolder(new_parent);
    // A record of a shard moved into staging/ or into another shard's folder
    // (RecordEdits::MoveRecord); the kernel then looks its new name up again.
    const bool to_staging =
        staging_ && SpaceOf(new_parent) == Space::kStaging && !IsEditId(new_parent);
    // An added record moves into staging/ the same way (between shards,
    // RenameAny renames its folder).
    const bool record =
        from_shard && (records_->LookupRecord(*from_shard, name).ok() ||
                       (to_staging && edits_->LookupInShard(*from_shard, name).ok()));
    if (record && (to_staging || (to_shard && *to_shard != *from_shard))) {
      if (flags != 0) return PosixError(EINVAL, "a record moves by a plain rename only");
      auto moved = edits_->MoveRecord(*from_shard, name, to_staging ? std::nullopt : to_shard,
                                      new_parent, new_name);
      if (!moved.ok()) return moved.status();
      InvalidateLater(new_parent, std::string(new_name));
      return absl::OkStatus();
    }
    if (from_shard && to_shard) {
      return edits_->RenameAny(parent, name, new_parent, new_name, flags, from_shard, to_shard);
    }
    if (!from_shard && !to_shard && EditSide(parent) && EditSide(new_parent)) {
      for (uint64_t ino : {parent, new_parent}) {
        if (auto s = edits_->CheckOut(ino); !s.ok()) return s;
      }
      return edits_->RenameAny(parent, name, new_parent, new_name, flags, std::nullopt,
                               std::nullopt);
    }
  }
  View* from = ViewOf(parent);
  View* to = ViewOf(new_parent);
  if (from == nullptr || to == nullptr) return ReadOnlyError();
  if (from == to) return from->Rename(parent, name, new_parent, new_name, flags);
  if (from == staging_.get() || to == staging_.get()) {
    // EROFS, not EXDEV: EXDEV tells mv(1) to copy and then delete the
    // source; the delete fails on the read-only shards, but the copy stays
    // staged and packs, and the dataset holds the record twice. EROFS stops
    // mv before it copies anything (cp -r stages a copy).
    return PosixError(
        EROFS, absl::StrCat("cannot move ", name, from == staging_.get() ? " out of" : " into",
                            " the staging folder: the shards are read-only"));
  }
  return ReadOnlyError();
}

void Filesystem::Forget(uint64_t ino, uint64_t n) {
  ReaderMutexLock serve(&serve_mu_);
  if (View* view = ViewOf(ino)) view->Forget(ino, n);
}

bool Filesystem::StagingSpace(uint64_t* free_bytes, uint64_t* total_bytes) const {
  ReaderMutexLock serve(&serve_mu_);
  return staging_ && staging_->Space(free_bytes, total_bytes);
}

// ---- Feature types ----

naming::FeatureTypes& Filesystem::feature_types() { return records_->sampler(); }

Stats Filesystem::GetStats() const {
  ReaderMutexLock serve(&serve_mu_);
  Stats s;
  s.shards = shard_set_.size();
  for (const MountedShard& shard : shard_set_.current()) {
    s.records += shard.index->num_records();
    s.shard_bytes += shard.index->file_size();
    s.index_bytes += shard.index->MemoryBytes();
  }
  s.index_bytes += records_->checked_bytes();
  s.records_read = records_->records_read();
  s.records_sampled = records_->sampler().records_sampled();
  s.bytes_sampled = records_->sampler().bytes_sampled();
  s.group_shards_loaded = group_stats_.shards_loaded;
  s.group_records_decoded = group_stats_.records_decoded;
  return s;
}

// ---- Extended attributes ----

absl::StatusOr<XattrList> Filesystem::Xattrs(uint64_t ino, bool read_error) {
  View* view = ViewOf(ino);
  if (view == nullptr) return Stale();
  XattrList out;
  if (auto s = view->Xattrs(ino, read_error, &out); !s.ok()) return s;
  return out;
}

absl::StatusOr<std::vector<std::string>> Filesystem::ListXattr(uint64_t ino) {
  ReaderMutexLock serve(&serve_mu_);
  auto all = Xattrs(ino, /*read_error=*/false);
  if (!all.ok()) return all.status();
  std::vector<std::string> names;
  for (auto& [name, value] : *all) names.push_back(std::move(name));
  return names;
}

absl::StatusOr<std::string> Filesystem::GetXattr(uint64_t ino, absl::string_view name) {
  ReaderMutexLock serve(&serve_mu_);
  // Other namespaces (security.*, system.posix_acl_*: asked by ls -l, cp -a
  // and the kernel itself) are answered without looking at the node, and
  // as unsupported (this file system keeps no security labels or ACLs):
  // `ls -l` then stops asking for the rest of the mount (coreutils
  // remembers a device whose answer was ENOTSUP), where ENODATA cost two
  // round trips per entry listed.
  if (!absl::StartsWith(name, "user.")) {
    return PosixError(EOPNOTSUPP, absl::StrCat(name, ": no security labels or ACLs here"));
  }
  if (!absl::StartsWith(name, kXattrPrefix)) return NoXattr(name);
  auto all = Xattrs(ino, /*read_error=*/name == absl::StrCat(kXattrPrefix, "error"));
  if (!all.ok()) return all.status();
  for (auto& [n, value] : *all) {
    if (n == name) return std::move(value);
  }
  return NoXattr(name);
}

absl::Status Filesystem::SetXattr(uint64_t ino, absl::string_view name) {
  ReaderMutexLock serve(&serve_mu_);
  if (SpaceOf(ino) == Space::kStaging) {
    return PosixError(ENOTSUP, absl::StrCat(name, ": staged files keep no extended attributes"));
  }
  return PosixError(EPERM, absl::StrCat(name, ": the attributes of the mounted shards are fixed"));
}

// ---- Committing edits ----

void Filesystem::SetInvalidator(std::optional<Invalidator> invalidator) {
  std::thread worker;
  {
    MutexLock lock(&invalidator_mu_);
    invalidator_ = std::move(invalidator);
    if (!invalidator_) {
      stop_invalidating_ = true;
      invalidations_.SignalAll();
      worker = std::move(invalidation_worker_);
    }
  }
  if (worker.joinable()) worker.join();
  // A commit's invalidations in flight use the session: wait for them (with
  // the session stopped, the kernel answers them at once).
  if (!invalidator) MutexLock call(&invalidating_mu_);
}

void Filesystem::InvalidateLater(uint64_t parent, std::string name) {
  MutexLock lock(&invalidator_mu_);
  if (!invalidator_ || stop_invalidating_) return;
  pending_invalidations_.emplace_back(parent, std::move(name));
  if (!invalidation_worker_.joinable()) {
    invalidation_worker_ = std::thread([this] { InvalidationLoop(); });
  }
  invalidations_.Signal();
}

void Filesystem::DropPagesLater(uint64_t ino) { InvalidateLater(ino, std::string()); }

void Filesystem::InvalidationLoop() {
  for (;;) {
    std::pair<uint64_t, std::string> next;
    std::function<void(uint64_t, const std::string&)> entry;
    std::function<void(uint64_t)> inode;
    {
      MutexLock lock(&invalidator_mu_);
      while (!stop_invalidating_ && (pending_invalidations_.empty() || !invalidator_)) {
        invalidations_.Wait(&invalidator_mu_);
      }
      if (stop_invalidating_) return;
      next = std::move(pending_invalidations_.front());
      pending_invalidations_.pop_front();
      entry = invalidator_->entry;
      inode = invalidator_->inode;
    }
    // Without invalidator_mu_: the kernel holds the folder's lock (or a
    // page being written back) until the request that changed it is
    // answered, and another request may be queueing an invalidation
    // meanwhile (InvalidateLater).
    MutexLock call(&invalidating_mu_);
    if (next.second.empty()) {
      inode(next.first);
    } else {
      entry(next.first, next.second);
    }
  }
}

}  // namespace tfrecordfs::vfs
