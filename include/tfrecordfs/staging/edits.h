// Edits of records of the mounted shards, pending their commit: the folders
// of the edit store (layout.h: `<store>/edits`, a staging::Store of its
// own), one per record being edited or added, in its records/ folder:
//
//   <key>-<record index>   record <index> of the shard, as edited: checked
//                          out (every file the record view showed, copied)
//                          at its first change, then changed through the
//                          mount like a staged record folder
//   <key>+<name>           a record added to the shard (`mkdir SHARD/name`,
//                          `cp -r REC SHARD/`), appended at the commit after
//                          the shard's records, in name order
//
// where <key> is ShardKey(the shard's path). Every shard with edit folders
// has an entry in the deletion list (deletions.h: DeletionList::Register,
// done before its first folder is made), which pins the shard's
// fingerprint; folders whose key no entry has are leftovers of a commit
// (repack/rewrite.h) and are removed at the next mount.
//
// A folder is made under a hidden name (`.<name>.tmp`) and renamed into
// place once it holds every file, so a crash never leaves half a record.
//
// Thread-safety: pure functions of the file system state.
#ifndef TFRECORDFS_STAGING_EDITS_H_
#define TFRECORDFS_STAGING_EDITS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/naming/feature_type.h"

namespace tfrecordfs::staging {

// 16 lowercase hex digits naming a shard path in folder names.
std::string ShardKey(absl::string_view shard_path);

std::string EditedFolderName(absl::string_view key, uint64_t record);
std::string AddedFolderName(absl::string_view key, absl::string_view name);

// A folder name of the edit store taken apart; nullopt for other names
// (hidden ones included).
struct EditFolder {
  std::string key;
  std::optional<uint64_t> record;  // `<key>-<record>`
  std::string added;               // `<key>+<name>`: the name
};
std::optional<EditFolder> ParseEditFolder(absl::string_view folder);

// The edits of one shard, as its commit applies them.
struct ShardEdits {
  std::map<uint64_t, std::string> replaced;                // record index -> new payload
  std::vector<std::pair<std::string, std::string>> added;  // (name, payload), name order
  std::vector<std::string> folders;                        // the folders read
};

// Reads every folder of shard `key` in `records_dir` (the edit store's
// records/) into payloads (PayloadFromFolder, against `types`).
// InvalidArgument naming the record (its index, or the added name) and why
// when a folder does not make a record.
absl::StatusOr<ShardEdits> ReadShardEdits(const std::string& records_dir, absl::string_view key,
                                          naming::FeatureTypes& types);

// The edit folders of `records_dir` by key, in name order (empty when it
// does not exist). Hidden names are not listed.
std::map<std::string, std::vector<std::string>> ListEditFolders(const std::string& records_dir);

}  // namespace tfrecordfs::staging

#endif  // TFRECORDFS_STAGING_EDITS_H_
