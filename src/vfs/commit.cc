// Filesystem::Commit (filesystem.h): the pending edits written into their
// shards (repack::ApplyEdits), each rewritten shard reopened by the shard
// set (ShardSet::Reopen) and shown under the next generation of node ids,
// the views' caches of it dropped, and what the kernel cached of it
// invalidated (ForgetStale) once no request is held off any more.
#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/index/index_store.h"
#include "tfrecordfs/repack/bucket_rewrite.h"
#include "tfrecordfs/scan/scan.h"
#include "tfrecordfs/vfs/filesystem.h"
#include "tfrecordfs/vfs/node_id.h"

namespace tfrecordfs::vfs {

absl::StatusOr<std::vector<repack::RewrittenShard>> Filesystem::Commit(bool reopen, bool rebase) {
  if (!edits_) return absl::FailedPreconditionError("this mount takes no edits (read-only)");
  std::vector<StaleNames> stale;
  std::vector<repack::RewrittenShard> results;
  {
    WriterMutexLock serve(&serve_mu_);
    Rewrite rewrite = RewriteShards(rebase, &stale);
    if (!reopen) return std::move(rewrite.results);
    ShowRewritten(&rewrite, &stale);
    results = std::move(rewrite.results);
  }
  // The kernel, outside the serve lock (its invalidations may wait for
  // requests).
  ForgetStale(stale);
  return results;
}

Filesystem::Rewrite Filesystem::RewriteShards(bool rebase, std::vector<StaleNames>* stale) {
  Rewrite out;
  std::vector<MountedShard>& shards = shard_set_.current();
  naming::FeatureTypes& types = *staging_types_;
  edit_store_->CheckAllWritten(types);
  std::vector<repack::ShardToRewrite> from(shards.size());
  for (uint64_t s = 0; s < shards.size(); ++s) {
    out.by_path[shards[s].index->path()] = s;
    from[s] = {shards[s].source.get(), &shards[s].index->offsets(), shards[s].index->codec(),
               shards[s].object.get()};
  }
  // Check-outs that changed nothing (an editor opened and quit, a value
  // written back as it was) are no edits: dropped here, where no request
  // runs (a tool mid-save would find the ids it holds gone), and a shard
  // left with nothing pending is not rewritten.
  for (const auto& [s, record] : edits_->DropUnchanged()) {
    stale->push_back(
        {tree_->ShardFolderId(s), {records_->RecordName(s, record), absl::StrCat(record)}});
  }
  for (const auto& [path, d] : edit_list_->Snapshot()) {
    auto it = out.by_path.find(path);
    // Only a shard this mount registered (its entry's fingerprint is the
    // mounted file's): an entry of a shard changed since keeps its edits.
    if (it == out.by_path.end() || !d.records.empty() || d.rewriting ||
        !deletions_->Registered(it->second) || edits_->HasEdits(it->second)) {
      continue;
    }
    if (auto s = edit_list_->Forget(path); !s.ok()) {
      log::Warning(path, ": ", s.message());
      continue;
    }
    deletions_->ResetShard(it->second);
  }
  // --rebase: the objects another writer replaced, as the store holds
  // them now, with the edits re-keyed onto them (kept until the commit
  // below has written them).
  absl::flat_hash_map<std::string, MountedShard> rebased;
  absl::flat_hash_map<std::string, std::string> rebase_notes;
  for (const auto& [path, d] : rebase ? edit_list_->Snapshot() : staging::Deletions()) {
    auto it = out.by_path.find(path);
    if (it == out.by_path.end() || shards[it->second].object == nullptr) continue;
    absl::StatusOr<scan::ScannedShard> scanned = scan::ScanOne(path, index_store_);
    absl::StatusOr<MountedShard> now =
        !scanned.ok() ? absl::StatusOr<MountedShard>(scanned.status())
        : scanned->object == nullptr
            ? absl::StatusOr<MountedShard>(absl::NotFoundError("not an object any more"))
            : shard_set_.Open(*scanned, scanned->st.st_mtim);
    if (!now.ok()) {
      rebase_notes[path] =
          absl::StrCat("cannot read the object the store holds now: ", now.status().message());
      continue;
    }
    if (staging::ObjectFingerprint(now->object->size(), now->object->etag()) == d.before) {
      continue;  // not replaced: committed as it is
    }
    repack::ShardToRewrite to{now->source.get(), &now->index->offsets(), now->index->codec(),
                              now->object.get()};
    auto report = repack::RebaseObjectEdits(edit_list_, edit_store_->records_dir(), path, d, to);
    if (!report.ok()) {
      rebase_notes[path] = absl::StrCat("not rebased: ", report.status().message());
      continue;
    }
    log::Info(path, ": ", *report);
    rebase_notes[path] = *report;
    from[it->second] = to;
    rebased.emplace(path, *std::move(now));
  }
  // The indexes of each rewritten shard follow it within its commit
  // (index::FollowRewrite); a plain shard's new index, made from the
  // offsets the rewrite wrote, and a GZIP/ZLIB shard's, made by the check
  // after write's inflate of it, is the one the mount shows it with.
  out.results = repack::ApplyEdits(
      edit_list_, edit_store_->records_dir(), types,
      [&](const std::string& path) -> const repack::ShardToRewrite* {
        auto it = out.by_path.find(path);
        return it == out.by_path.end() ? nullptr : &from[it->second];
      },
      [&](const std::string& path, const std::vector<uint64_t>* offsets,
          index::WalkedShard* walked) {
        auto it = out.by_path.find(path);
        const std::string mount_path =
            it == out.by_path.end() ? std::string() : shard_set_.mount_path(it->second);
        out.new_indexes[path] =
            index::FollowRewrite(index_store_, path, mount_path, offsets, walked);
      });
  for (repack::RewrittenShard& r : out.results) {
    auto note = rebase_notes.find(r.path);
    if (note == rebase_notes.end()) continue;
    if (r.status.ok()) {
      r.note = r.note.empty() ? note->second : absl::StrCat(note->second, "; ", r.note);
    } else {
      r.status = SetMessage(r.status, absl::StrCat(note->second, "; then ", r.status.message()));
    }
    if (!r.status.ok() && rebased.contains(r.path)) {
      // The edits name the new object's records now: this mount, which
      // shows the old one, shows them once mounted again.
      r.status = SetMessage(r.status, absl::StrCat(r.status.message(),
                                                   " (unmount and mount again to see the "
                                                   "edits on the new object)"));
    }
  }
  return out;
}

void Filesystem::ShowRewritten(Rewrite* rewrite, std::vector<StaleNames>* stale) {
  std::vector<MountedShard>& shards = shard_set_.current();
  bool regrouped = false;  // view=classes: a shard regrouped
  for (repack::RewrittenShard& r : rewrite->results) {
    if (!r.status.ok()) continue;
    const uint64_t s = rewrite->by_path.at(r.path);
    StaleNames st;
    st.folder = tree_->ShardFolderId(s);
    std::vector<uint64_t> edited = edits_->EditedKeys(s);
    for (std::string& name : edits_->ResetShard(s)) st.names.push_back(std::move(name));
    deletions_->ResetShard(s);
    // The shard set shows the new file as the next generation and keeps
    // the old one as the retired generation (ShardSet::Reopen).
    absl::StatusOr<ShardSet::Replaced> replaced =
        shard_set_.Reopen(s, r.path, rewrite->new_indexes[r.path], edited);
    if (!replaced.ok()) {
      // The shard is committed on disk; this mount cannot show it.
      log::Error("committed ", r.path, " but cannot show it: ", replaced.status().message(),
                 "; remount to see it");
      r.status =
          absl::DataLossError(absl::StrCat("committed, but the mount cannot show the new shard (",
                                           replaced.status().message(), "): remount"));
      continue;
    }
    const MountedShard& shard = shards[s];
    // Both generations' ids name other records now: the views' caches of
    // them go.
    retired_view_->ResetShard(s);
    records_->ResetShard(s);
    // Every view: the kernel forgets what it cached in the folders that
    // list the shard (one invalidation of each folder's own entry drops
    // the names in it no process holds, negative entries included), and
    // what it re-reads comes with the next generation.
    if (classes_) {
      // The new shard's records, by the grouping of its new bytes (and
      // stored: the next mount loads it); its images may be in any class
      // folder (invalidated once, after the loop).
      classes_->ResetShard(s, GroupShard(shard, group_options_));
      regrouped = true;
    } else {
      auto [parent, name] = tree_->ShardFolderEntry(s);
      stale->push_back({parent, {std::move(name)}});
    }
    if (!gallery_ && !classes_) {
      // Records view: every record name now names another node id (the
      // next generation's), and the kernel keeps the old entries a
      // process holds (an open file, a working directory) across the
      // folder's own invalidation: each name is invalidated (both
      // spellings, and the edit store's names).
      st.records = std::max(replaced->old_records, shard.records_shown());
      st.old_width = static_cast<size_t>(replaced->old_width);
      st.new_width = static_cast<size_t>(shard.name_width);
    } else {
      st.names.clear();  // the edit store's names: not shown by the image views
    }
    stale->push_back(std::move(st));
  }
  if (regrouped) {
    StaleNames root{TreeId(0), {}};
    for (size_t f = 0; f < classes_->num_folders(); ++f) {
      root.names.push_back(classes_->FolderName(f));
      stale->push_back({ClassFolderId(f), {}});
    }
    stale->push_back(std::move(root));
  }
}

void Filesystem::ForgetStale(const std::vector<StaleNames>& stale) {
  // Outside invalidator_mu_ (a request may queue one).
  std::optional<Invalidator> inv;
  {
    MutexLock lock(&invalidator_mu_);
    inv = invalidator_;
  }
  if (!inv) return;
  MutexLock call(&invalidating_mu_);
  for (const StaleNames& st : stale) {
    for (const std::string& name : st.names) inv->entry(st.folder, name);
    for (uint64_t i = 0; i < st.records; ++i) {
      const std::string digits = absl::StrCat(i);
      auto padded = [&](size_t width) {
        if (digits.size() < width) {
          inv->entry(st.folder, std::string(width - digits.size(), '0') + digits);
        }
      };
      padded(st.old_width);
      if (st.new_width != st.old_width) padded(st.new_width);
      inv->entry(st.folder, digits);
    }
    inv->inode(st.folder);
  }
}

}  // namespace tfrecordfs::vfs
