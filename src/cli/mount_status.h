// What `tfrecordfs status` finds in a live mount (status_cmd.cc): what is
// staged, what the pack on unmount would leave staged and why, the edits of
// the mounted shards and which the commit would refuse, and where the
// daemon logs.
//
// The reasons are the daemon's: each staged record folder's
// `user.tfrecordfs.error` attribute (vfs::Filesystem, staging::Store::
// ErrorOf), which the daemon computes with the kinds of the mounted shards,
// exactly as the pack will. So GatherMountStatus reads through the mount
// and needs nothing but the mount record (runtime.h) and the mount itself;
// it lives in cli/ beside that record.
//
// Layout: one Gather step fills each section of MountStatus; StatusReport
// (reports.h) prints the sections in order. A new section is a member, a
// Gather step and a few lines in each printer.
//
// Thread-safety: reentrant.
#ifndef TFRECORDFS_CLI_MOUNT_STATUS_H_
#define TFRECORDFS_CLI_MOUNT_STATUS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "src/cli/runtime.h"
#include "tfrecordfs/staging/deletions.h"

namespace tfrecordfs::cli {

struct StagedEntry {
  std::string name;
  bool folder = true;                 // else a loose file
  std::optional<std::string> reason;  // why it would stay staged
};

struct MountStatus {
  MountRecord record;
  std::string staging_path;  // "" without a staging folder
  LogProblems log;
  // Section "staged": the staging folder's entries in name order.
  std::vector<StagedEntry> staged;
  uint64_t records = 0;
  uint64_t refused = 0;  // entries the pack would leave staged
  uint64_t unknown = 0;  // records whose state the mount cannot tell (noxattr)
  // Section "deleted": records deleted from the shards, pending their
  // rewrite at unmount (the store's deletion list, staging/deletions.h).
  staging::Deletions deleted;
  // Sections "edited" and "added": records of the shards changed through
  // the mount, and records added to them (the edit store, staging/edits.h).
  std::map<std::string, std::vector<uint64_t>> edited;
  std::map<std::string, std::vector<std::string>> added;
  // Edited and added records the commit would refuse: shard -> (record
  // folder name, reason), from the daemon (the record folder's `error`).
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> refused_edits;
  uint64_t refused_edit_count = 0;
  uint64_t unknown_edits = 0;  // records whose state the mount cannot tell
};

// The status of the live mount `record` describes. Errors: the staging
// folder, the deletion list or an `error` attribute cannot be read.
absl::StatusOr<MountStatus> GatherMountStatus(const MountRecord& record);

}  // namespace tfrecordfs::cli

#endif  // TFRECORDFS_CLI_MOUNT_STATUS_H_
