// Applying record deletions (staging/deletions.h) to their shards, crash-safe.
//
// Each shard with deletions is rewritten without the deleted records, in its
// own codec (a GZIP shard stays GZIP), every kept record's payload unchanged
// and in the same order:
//   1. the shard must still have the fingerprint the deletions were made on
//      (else it is left alone and its deletions stay pending);
//   2. `.<name>.tmp` beside it (journal.h TempShardName) gets the kept
//      records (each read back with both CRCs first), is fsync'd and checked
//      as the pack checks its shards (framing, record count, compressed
//      stream);
//   3. the deletion list stores the temp file's fingerprint as `rewriting`
//      (durable), then the temp file is renamed over the shard and the
//      directory fsync'd;
//   4. the shard's deletions are dropped from the list.
// A crash before 3 leaves the old shard and a temp file; after the rename
// and before 4, the new shard. RecoverRewrites tells them apart by the
// shard's fingerprint: `rewriting` -> done, drop the entry; `before` ->
// remove the temp file, keep the deletions pending.
//
// Thread-safety: not concurrent with itself on one list.
#ifndef TFRECORDFS_REPACK_REWRITE_H_
#define TFRECORDFS_REPACK_REWRITE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tfrecordfs/source/shard_source.h"
#include "tfrecordfs/staging/deletions.h"

namespace tfrecordfs::repack {

// A mounted shard the rewrite reads from: its uncompressed bytes and the
// framing offsets of its records (offsets[i], offsets[i + 1]).
struct ShardToRewrite {
  const source::ShardSource* source = nullptr;
  const std::vector<uint64_t>* offsets = nullptr;
  source::Codec codec = source::Codec::kNone;
};

struct RewrittenShard {
  std::string path;
  uint64_t kept = 0;
  uint64_t deleted = 0;
  double seconds = 0;
  absl::Status status;  // not OK: left as it was, deletions still pending
};

// Rewrites every shard of `list` (see the top). `find` gives the mounted
// shard for a path (nullptr: not mounted now; left pending). Shards are
// independent: one failing does not stop the others.
std::vector<RewrittenShard> ApplyDeletions(
    staging::DeletionList* list,
    const std::function<const ShardToRewrite*(const std::string& path)>& find);

// Finishes or rolls back rewrites a crash interrupted (see the top), and
// removes stale temp files of shards with pending deletions. Returns the
// log lines saying what it did.
std::vector<std::string> RecoverRewrites(staging::DeletionList* list);

// "rewrote PATH: kept K, deleted D record(s) in S s" / "... not rewritten: why".
std::string RewriteSummary(const std::vector<RewrittenShard>& shards);

}  // namespace tfrecordfs::repack

#endif  // TFRECORDFS_REPACK_REWRITE_H_
