// The staging store's files and folders: the one place their names are
// spelt (as leveldb's db/filename.h is for a database's files). Every path
// is built from the store's directory `store`:
//
//   <store>/
//     records/        what MOUNT/staging/ shows; each folder is one record
//     pack.journal    present only while a pack is in flight (repack/pack.h)
//     journal.reserve kJournalReserveBytes set aside for pack.journal: the
//                     pack deletes it before writing the journal, so that a
//                     store whose file system filled up can still be packed
//     last-pack.txt   the report of the last pack (read by `tfrecordfs unmount`)
//     last-commit.txt the report of the last commit while mounted (read by
//                     `tfrecordfs commit`): `commit <n>`, `result: ...`, the
//                     rewrite summary
//     deleted-records records deleted from the mounted shards, and the shards
//                     with pending edits (staging/deletions.h)
//     edits/          the edit store: a store of this same layout whose
//                     records/ holds the folders of records of the mounted
//                     shards being edited or added (staging/edits.h)
//     lock            flock()ed exclusively by the read-write daemon that owns
//                     the store (read-only openers neither take nor create it)
//
// Thread-safety: pure functions.
#ifndef TFRECORDFS_STAGING_LAYOUT_H_
#define TFRECORDFS_STAGING_LAYOUT_H_

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tfrecordfs::staging {

inline std::string RecordsDir(absl::string_view store) { return absl::StrCat(store, "/records"); }
inline std::string PackJournalFile(absl::string_view store) {
  return absl::StrCat(store, "/pack.journal");
}
inline std::string JournalReserveFile(absl::string_view store) {
  return absl::StrCat(store, "/journal.reserve");
}
inline std::string PackReportFile(absl::string_view store) {
  return absl::StrCat(store, "/last-pack.txt");
}
inline std::string LockFile(absl::string_view store) { return absl::StrCat(store, "/lock"); }
inline std::string CommitReportFile(absl::string_view store) {
  return absl::StrCat(store, "/last-commit.txt");
}
inline std::string EditsStoreDir(absl::string_view store) { return absl::StrCat(store, "/edits"); }

// What journal.reserve holds. The journal takes about 8 bytes plus the
// folder name per staged record, and needs room for two copies while it is
// replaced (COMMITTED): 4 MiB covers ~100,000 records with 12-byte names.
inline constexpr uint64_t kJournalReserveBytes = uint64_t{4} << 20;

}  // namespace tfrecordfs::staging

#endif  // TFRECORDFS_STAGING_LAYOUT_H_
