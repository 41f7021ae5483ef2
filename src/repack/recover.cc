// Recover (repack/pack.h): finishes or undoes a pack a crash interrupted,
// per its journal (repack/journal.h). Kept apart from pack.cc: it shares no
// state with the Packer, and a reader checking what recovery may delete
// should find all of it here.
#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/repack/journal.h"
#include "tfrecordfs/repack/pack.h"

namespace tfrecordfs::repack {
namespace {

// Removes `<journal>.tmp.<pid>` files a crash inside WriteFileAtomically can
// leave behind; they are never read.
void RemoveJournalTemps(const std::string& journal_path) {
  const std::string dir = Dirname(journal_path);
  const std::string stem = absl::StrCat(Basename(journal_path), ".tmp.");
  auto names = ListNames(dir);
  if (!names.ok()) return;
  for (const std::string& name : *names) {
    if (name.size() > stem.size() && absl::StartsWith(name, stem) &&
        ::unlink(JoinPath(dir, name).c_str()) == 0) {
      log::Info("removed stale pack journal temp file ", JoinPath(dir, name));
    }
  }
}

}  // namespace

absl::Status Recover(const std::string& journal_path, const std::string& records_dir) {
  RemoveJournalTemps(journal_path);
  auto contents = ReadFileToString(journal_path);
  if (!contents.ok()) {
    if (ErrnoOf(contents.status()) == ENOENT) return absl::OkStatus();
    return contents.status();
  }
  auto journal = ParseJournal(*contents, journal_path);
  if (!journal.ok()) return journal.status();
  const Journal& j = *journal;

  // Rolling forward deletes folders: only in the directory the journal was
  // written for (deleting another store's folders, or none when the store
  // moved, would lose or duplicate records). Rolling back never touches it.
  if (j.state == Journal::State::kCommitted && j.remove_packed) {
    auto here = RealPath(records_dir);
    auto there = RealPath(j.records_dir);
    const bool same = here.ok() ? there.ok() && *here == *there : !there.ok();
    if (!same) {
      return absl::FailedPreconditionError(
          absl::StrCat("pack journal ", journal_path, " belongs to records directory ",
                       j.records_dir, ", not ", records_dir, "; refusing to recover"));
    }
  }

  if (j.state == Journal::State::kPlanned) {
    // Roll back: the records are all still staged; whatever the pack wrote
    // would duplicate them.
    int removed = 0;
    for (const Journal::Shard& s : j.shards) {
      for (const std::string& name : {s.name, TempShardName(s.name)}) {
        auto r = UnlinkIfExists(JoinPath(j.output_dir, name));
        if (!r.ok()) return r.status();
        removed += *r ? 1 : 0;
      }
    }
    auto out_exists = Exists(j.output_dir);
    if (!out_exists.ok()) return out_exists.status();
    if (*out_exists) {
      if (auto s = FsyncDir(j.output_dir); !s.ok()) return s;
    }
    log::Warning("recovered an interrupted pack (not committed): removed ", removed,
                 " partial file(s) from ", j.output_dir, "; the records stay staged");
  } else {
    // Roll forward: the shards are complete; finish removing their records.
    for (const Journal::Shard& s : j.shards) {
      const std::string path = JoinPath(j.output_dir, s.name);
      auto exists = Exists(path);
      if (!exists.ok()) return exists.status();
      if (!*exists) {
        return absl::FailedPreconditionError(absl::StrCat(
            "pack journal ", journal_path, " is committed but its shard ", path,
            " is missing; not removing the staged records it holds (restore the shard, or "
            "delete the journal to keep the records staged)"));
      }
    }
    int removed = 0;
    if (j.remove_packed) {
      for (const Journal::Shard& s : j.shards) {
        for (const std::string& r : s.records) {
          const std::string path = JoinPath(records_dir, r);
          auto exists = Exists(path);
          if (!exists.ok()) return exists.status();
          if (!*exists) continue;
          if (auto st = RemoveTree(path); !st.ok()) return st;
          ++removed;
        }
      }
      auto dir_exists = Exists(records_dir);
      if (!dir_exists.ok()) return dir_exists.status();
      if (*dir_exists) {
        if (auto s = FsyncDir(records_dir); !s.ok()) return s;
      }
    }
    log::Info("recovered an interrupted pack (committed): removed ", removed,
              " packed record(s) from staging");
  }
  return UnlinkDurably(journal_path);
}

}  // namespace tfrecordfs::repack
