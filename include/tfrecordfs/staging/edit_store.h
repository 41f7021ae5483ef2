// The edit store's folders on disk (edits.h names them: `<key>-<record>` for
// an edited record, `<key>+<name>` for an added one): the crash-safe steps
// of a check-out, of its undoing, and of moving an edited record out of its
// shard, apart from the node ids the mount gives them
// (vfs/record_edits.h translates those, and decides when each step runs).
//
//   CheckOut   builds the folder under `.<folder>.tmp` and renames it into
//              place once it holds every file: a crash or a failure leaves
//              the record checked out whole or not at all.
//   Drop       renames the folder to `.<folder>.tmp`, then removes it: the
//              record is edited or not, never half a folder.
//   MoveOut    moves an edited record's folder to another folder (staging's
//              records/, or an added record's name in this store) in three
//              steps around the deletion of the record from its shard:
//                1. rename to `<dest dir>/.move-<folder>-<dest name>`
//                2. the caller's delete (on failure the folder is put back)
//                3. rename to `<dest dir>/<dest name>`
//              RecoverMoves, at the next mount, finishes a move whose
//              record was deleted (step 2 done) and rolls back the others.
//
// Thread-safety: a value type over a directory; calls that touch the same
// folder must not run at once (RecordEdits serialises them).
#ifndef TFRECORDFS_STAGING_EDIT_STORE_H_
#define TFRECORDFS_STAGING_EDIT_STORE_H_

#include <time.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tfrecordfs::staging {

class EditStore {
 public:
  // `records_dir`: the edit store's records/ folder (it must exist).
  explicit EditStore(std::string records_dir) : records_dir_(std::move(records_dir)) {}

  const std::string& records_dir() const { return records_dir_; }
  // records_dir()/folder.
  std::string PathOf(absl::string_view folder) const;

  // One entry of a checked-out folder: a path relative to the folder
  // (parents before children), a folder or a file.
  struct Entry {
    std::string rel;
    bool is_dir = false;
  };
  // Writes `entries` as `folder` (see the top): `content(i)` gives file
  // entries[i]'s bytes; every entry and the folder get `times` as their
  // access and modification times. A stale `.<folder>.tmp` is replaced. On
  // any error (content's included) nothing is left but the stale temp the
  // next check-out replaces; AlreadyExists when `folder` is there.
  absl::Status CheckOut(absl::string_view folder, const std::vector<Entry>& entries,
                        const std::function<absl::StatusOr<std::string>(size_t)>& content,
                        struct timespec times) const;

  // Removes `folder` (see the top). An error means the folder is still in
  // place. Once it is hidden, a failure to remove what is left goes to
  // `*leftover` (when given): the next CheckOut or Drop of that name
  // replaces it.
  absl::Status Drop(absl::string_view folder, absl::Status* leftover = nullptr) const;

  // Moves edited-record folder `folder` (`<key>-<record>`) to
  // `dest_dir`/`dest_name` around `delete_record` (see the top);
  // `after_step1` and `after_step2` run between the steps (test hooks:
  // base/fault_points.h). AlreadyExists when the destination is taken.
  absl::Status MoveOut(absl::string_view folder, const std::string& dest_dir,
                       absl::string_view dest_name,
                       const std::function<absl::Status()>& delete_record,
                       const std::function<void()>& after_step1 = nullptr,
                       const std::function<void()>& after_step2 = nullptr) const;

  // An interrupted move found in a folder.
  struct InterruptedMove {
    std::string dir;   // where its temp is
    std::string temp;  // `.move-<key>-<record>-<dest name>`
    std::string key;
    uint64_t record = 0;
    std::string dest_name;
  };
  // The interrupted moves in `dir` (this store's records/ or staging's).
  static std::vector<InterruptedMove> FindInterruptedMoves(const std::string& dir);
  // Finishes `m` (its record was deleted: renamed to its destination) or
  // rolls it back (renamed to its folder here). Returns the path it now has.
  absl::StatusOr<std::string> ResolveMove(const InterruptedMove& m, bool record_deleted) const;

 private:
  std::string records_dir_;
};

}  // namespace tfrecordfs::staging

#endif  // TFRECORDFS_STAGING_EDIT_STORE_H_
