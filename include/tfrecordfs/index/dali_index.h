// NVIDIA DALI index files of plain shards, and the record of which ones
// tfrecordfs wrote, so that a commit of edits (repack/rewrite.h) can make
// them follow a rewritten shard.
//
// DALI's tfrecord2idx format: one text line "<offset> <size>" per record,
// <size> the whole framing (16 bytes + the payload). DALI reads the raw file
// bytes, so only plain shards have one.
//
// `tfrecordfs index --dali-dir DIR` writes DIR/<path in the mount>.idx and
// records it in the per-user registry:
//   ${XDG_CACHE_HOME:-~/.cache}/tfrecordfs/dali/<hash>.dali
// <hash> 16 hex digits of the FNV-1a hash of the shard's real path; the file
// is four lines: "tfrecordfs-dali 1", the shard's real path, the .idx file's
// absolute path, and 16 hex digits of the FNV-1a hash of the text written.
// FollowDaliIndex rewrites an .idx file only while its content still hashes
// to what was written (else someone else changed it: it is left alone and
// the record forgotten), so a file tfrecordfs did not write, or no longer
// owns, is never touched.
//
// Thread-safety: free functions over the file system; one writer per shard
// at a time.
#ifndef TFRECORDFS_INDEX_DALI_INDEX_H_
#define TFRECORDFS_INDEX_DALI_INDEX_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tfrecordfs::index {

// The .idx text for a shard whose records start at offsets[i] (the last
// element: the end of the last record).
std::string DaliIndexText(const std::vector<uint64_t>& offsets);

// ${XDG_CACHE_HOME:-$HOME/.cache}/tfrecordfs/dali, or "" when neither
// variable is set (nothing is then recorded or followed).
std::string DaliRegistryDir();

// Records that `idx_path` (absolute) now holds `text`, the DALI index of the
// shard at `shard_path` (durable). Errors: the registry cannot be written.
absl::Status RecordDaliIndex(const std::string& shard_path, const std::string& idx_path,
                             const std::string& text);

// After the shard at `shard_path` was rewritten and now has records at
// `offsets`: the .idx file recorded for it, when it still holds what was
// written, gets DaliIndexText(offsets) (atomically) and its record the new
// hash. Idempotent (a file that already holds the new text only gets its
// record updated). Returns the .idx path rewritten, or nullopt when none was
// recorded, or it was changed or removed since (the record is then
// dropped). Errors: the .idx file or the record cannot be written.
absl::StatusOr<std::optional<std::string>> FollowDaliIndex(const std::string& shard_path,
                                                           const std::vector<uint64_t>& offsets);

// Whether a DALI index is recorded for the shard at `shard_path` (recovery
// walks a shard only then).
bool HasDaliIndex(const std::string& shard_path);

}  // namespace tfrecordfs::index

#endif  // TFRECORDFS_INDEX_DALI_INDEX_H_
