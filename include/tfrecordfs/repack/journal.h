// The pack journal: the one file that makes a pack crash-safe.
//
// A pack turns staged record folders into new shards and then removes the
// folders from staging. Between those two steps a crash must neither lose a
// record (folders removed, shards missing) nor duplicate one (shards present,
// folders still staged and packed again). The journal names everything the
// pack is about to create and to remove, and its state says which side of
// the commit point the pack got to:
//
//   Pack                          on disk                      Recover after a crash here
//   ----------------------------  ---------------------------  --------------------------------
//   pass 1: read folders, plan    nothing written              nothing to do (no journal)
//   write journal PLANNED  ─────> journal(PLANNED)             roll back: delete listed shards
//   per shard: .<final>.tmp,      .tmp and finished shards     and temps, then the journal;
//     fsync, rename to <final>,                                the records are still staged
//     fsync(output dir)
//   rewrite journal COMMITTED ──> journal(COMMITTED)  ← commit point (an atomic rename)
//   delete packed folders,        shards complete, some        roll forward: delete listed
//     fsync(records dir)          folders gone                 folders still present, then
//   delete journal, fsync(dir)    no journal                   the journal
//
// Records leave staging only after the commit point, and every shard written
// before it is removed by recovery, so each staged record ends up in the
// output exactly once, whatever moment the process died at. The journal is
// always replaced with WriteFileAtomically (temp file, fsync, rename, fsync of
// the directory), so it is either the old or the new version; the checksum
// still guards against a journal damaged some other way, and recovery refuses
// to guess from a damaged one.
//
// File format (text, so that a human can read it when recovery refuses; all
// names are absl::CEscape'd, so a name can hold spaces, newlines or any byte):
//
//   tfrecordfs-pack-journal 1              magic and format version
//   state planned|committed
//   records_dir <absolute path>            where the record folders live
//   output_dir <absolute path>             where the shards go
//   remove_packed 0|1                      0: offline `pack`, never deletes input
//   shards <N>
//   shard <records> <bytes> <final name>   N times, each followed by
//   record <folder name>                   its records, in pack order
//   ...
//   crc32c <8 lowercase hex digits>        crc32c of every byte before this line
//
// Every line ends in '\n' and nothing may follow the crc32c line. A reader
// that meets a newer version fails instead of guessing.
//
// Thread-safety: pure functions.
#ifndef TFRECORDFS_REPACK_JOURNAL_H_
#define TFRECORDFS_REPACK_JOURNAL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tfrecordfs::repack {

inline constexpr absl::string_view kJournalMagic = "tfrecordfs-pack-journal";
inline constexpr int kJournalVersion = 1;

// The file name the offline `pack` command (and a PackOptions without a
// journal_path) uses, inside the output directory.
inline constexpr absl::string_view kDefaultJournalName = ".tfrecordfs-pack.journal";

struct Journal {
  enum class State { kPlanned, kCommitted };

  struct Shard {
    std::string name;  // final file name inside output_dir
    uint64_t bytes = 0;
    std::vector<std::string> records;  // folder names inside records_dir, pack order
  };

  State state = State::kPlanned;
  std::string records_dir;
  std::string output_dir;
  bool remove_packed = true;
  std::vector<Shard> shards;
};

std::string EncodeJournal(const Journal& journal);

// Parses a journal read from `path` (used in messages). A torn, damaged or
// foreign file is DataLossError naming the path and the line; a newer
// version is FailedPreconditionError. Recovery deletes what a journal
// names, so only what a pack writes is accepted: absolute directories, and
// shard and record names that are one path component each
// (IsJournalName); anything else is DataLossError, even under a valid
// checksum.
absl::StatusOr<Journal> ParseJournal(absl::string_view contents, absl::string_view path);

// True when `name` is one path component: not empty, not "." or "..", no
// '/' and no NUL.
bool IsJournalName(absl::string_view name);

// The name of the temp file a shard is written to before its rename:
// `.<final>.tmp` in the same directory (hidden, so readers skip it).
std::string TempShardName(absl::string_view final_name);

}  // namespace tfrecordfs::repack

#endif  // TFRECORDFS_REPACK_JOURNAL_H_
