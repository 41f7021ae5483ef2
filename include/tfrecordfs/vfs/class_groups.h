// The grouping behind -o view=classes: which class folder every record of
// the mount goes to (naming::ClassFolder of its class feature), computed at
// mount in one parallel pass over the payloads, and kept on disk beside the
// shard's cached index so that the next mount reads it instead.
//
// The stored grouping: index/class_grouping_file.h.
//
// Thread-safety: GroupByClass runs its own threads and returns when they are
// done; the result is immutable.
#ifndef TFRECORDFS_VFS_CLASS_GROUPS_H_
#define TFRECORDFS_VFS_CLASS_GROUPS_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/index/class_grouping_file.h"
#include "tfrecordfs/index/index_store.h"
#include "tfrecordfs/vfs/mounted_shard.h"

namespace tfrecordfs::vfs {

using index::kNotGrouped;
using index::ShardGrouping;

// The whole mount's grouping.
struct ClassGroups {
  std::string feature;
  std::vector<std::string> folders;                // sorted, unique (the names shown)
  std::vector<std::optional<std::string>> values;  // per folder: as ShardGrouping's
  std::vector<std::vector<uint32_t>> folder_of;    // [shard][record]: an index of `folders`
  std::vector<std::string> class_names;            // GroupOptions::class_names
};

// The name a folder of a shard's grouping shows under: `folder` itself, or
// when `class_names` names its value (an integer i with i <
// class_names.size()), class_names[i] escaped as a class value is
// (naming::EscapeNamePart; a name that would read as another integer, or
// is `%none` / `%several`, keeps the number).
std::string ShownFolder(absl::string_view folder, const std::optional<std::string>& value,
                        const std::vector<std::string>& class_names);

struct GroupOptions {
  std::string feature;
  // The feature's class names (a TFDS ClassLabel's `<feature>.labels.txt`):
  // folder i shows as class_names[i] (ShownFolder). Empty: values as they are.
  std::vector<std::string> class_names;
  // Where groupings are loaded from and saved to (its cache directory);
  // null: every shard is decoded and nothing is kept.
  const index::IndexStore* store = nullptr;
  int threads = 1;
  // Called from the pass's threads as records are decoded: (shards done,
  // records, bytes) since the last call; a shard is done when its last
  // record is decoded, or at once when its stored grouping is loaded
  // (then with no records, none being decoded, and its file's size).
  std::function<void(uint64_t shards, uint64_t records, uint64_t bytes)> progress;
};

struct GroupStats {
  uint64_t shards_loaded = 0;    // groupings read from their side files
  uint64_t shards_decoded = 0;   // shards whose payloads were decoded
  uint64_t records_decoded = 0;  // payloads decoded
  uint64_t records_damaged = 0;  // of which unreadable (kNotGrouped)
  uint64_t saved = 0;            // side files written
};

// Groups every shown record of `shards` by options.feature: loads each
// shard's stored grouping when valid, else reads and decodes its payloads
// (records in chunks spread over options.threads threads) and stores the
// result. Damaged records are kNotGrouped and logged by their reader's
// message (shard path, record, byte offset). Errors: none but out of memory;
// I/O errors on a shard make its records kNotGrouped.
ClassGroups GroupByClass(const std::vector<MountedShard>& shards, const GroupOptions& options,
                         GroupStats* stats);

// The class names a dataset gives `feature` (a TFDS ClassLabel): the lines
// of `<feature>.labels.txt` ('/' in the name as '-', as TFDS names nested
// features' files) in the folder of the first shard that has one beside
// it, a trailing '\r' of each line dropped; empty when no shard has one or
// it cannot be read (logged). A file of another folder that disagrees is
// logged and not used.
std::vector<std::string> ClassNamesBeside(const std::vector<MountedShard>& shards,
                                          absl::string_view feature);

// One shard's grouping by options.feature, as GroupByClass makes it (loaded
// when stored and valid, else decoded and stored): for a shard rewritten
// while mounted (a commit), whose stored grouping the next mount then loads.
ShardGrouping GroupShard(const MountedShard& shard, const GroupOptions& options,
                         GroupStats* stats = nullptr);

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_CLASS_GROUPS_H_
