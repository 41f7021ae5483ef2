// Applying the edits of records of mounted shards to their shards,
// crash-safe: deletions (staging/deletions.h), edited and added records
// (staging/edits.h).
//
// Each shard of the deletion list is rewritten in its own codec (an object
// of a bucket, whose path is its URL, by bucket_rewrite.h's
// CommitObjectEdits, with the same edits and the same splice) (a GZIP
// shard stays GZIP): deleted records left out, edited ones replaced by the
// payload of their folder, spliced into the record's own bytes
// (example/splice.h: every feature the edit did not change keeps its bytes
// and order; an edit that changes nothing keeps the record byte for byte and
// counts it as kept), every other record's payload unchanged and in the
// same order, added records appended in name order:
//   1. the shard must still have the fingerprint its edits were made on
//      (else it is left alone and its edits stay pending), and every edit
//      folder must make a record (PayloadFromFolder; else the same);
//   2. `.<name>.tmp` beside it (beside a symlink's target: the target is
//      rewritten, the link left as it is; journal.h TempShardName), created
//      0600 with the shard's owner and group (a daemon that cannot give it
//      them leaves the shard pending), gets the records
//      (each kept one read back with both CRCs first) and the shard's
//      permission bits, is fsync'd and checked as the pack checks its
//      shards (framing, every CRC, record count, compressed stream);
//   3. the deletion list stores the temp file's fingerprint as `rewriting`
//      (durable), TFDS's dataset_info.json as it must become is written
//      beside it (tfds_info.h PrepareTfdsInfo), then the temp file is
//      renamed over the shard and the directory fsync'd (other hard links
//      of the shard keep the old file: RewrittenShard::note says so);
//   4. what depends on the shard follows: the prepared dataset_info.json is
//      renamed into place (FinishTfdsInfo), and the caller's FollowRewrite
//      runs (its indexes: index_store.h FollowRewrite);
//   5. the shard's entry is dropped from the list, then its edit folders
//      are removed.
// A crash before 3's rename leaves the old shard and a temp file; after it
// and before 5, the new shard. RecoverRewrites tells them apart by the
// shard's fingerprint: `rewriting` -> done: step 4 again (FollowRewrite
// without offsets), drop the entry (and the edit folders); `before` ->
// remove the temp file and the prepared metadata, keep the edits pending.
//
// Test hook: TFRECORDFS_FAULT (as in pack.h) names a point where the
// process kills itself:
//   rewrite_mid_shard        half of the first shard's records written to its
//                            temp file
//   rewrite_before_rename    a temp file complete and marked `rewriting`,
//                            not renamed
//   rewrite_after_rename     the first shard renamed into place, nothing of
//                            step 4 done
//   rewrite_after_shard:K    K shards renamed into place, the K-th's entry
//                            still in the list (K >= 1)
//   rewrite_after_forget     the first shard's entry dropped, its edit
//                            folders not yet removed
// and one that is not a crash:
//   rewrite_flip_written_byte  a plain shard's temp file gets one byte
//                            inverted after it is written, before it is
//                            checked: the check must refuse it (the shard
//                            stays as it was, its edits pending)
//
// Thread-safety: not concurrent with itself on one list.
#ifndef TFRECORDFS_REPACK_REWRITE_H_
#define TFRECORDFS_REPACK_REWRITE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/naming/feature_type.h"
#include "tfrecordfs/source/shard_source.h"
#include "tfrecordfs/staging/deletions.h"
#include "tfrecordfs/staging/edits.h"

namespace tfrecordfs::repack {

// A mounted shard the rewrite reads from: its uncompressed bytes and the
// framing offsets of its records (offsets[i], offsets[i + 1]).
// `object` is set for a shard that is an object in a bucket (its path a
// URL): it is rewritten by CommitObjectEdits (bucket_rewrite.h), with
// conditional writes, instead of through a temp file.
struct ShardToRewrite {
  const source::ShardSource* source = nullptr;
  const std::vector<uint64_t>* offsets = nullptr;
  source::Codec codec = source::Codec::kNone;
  const source::ObjectReader* object = nullptr;
};

struct RewrittenShard {
  std::string path;
  uint64_t kept = 0;     // unchanged (edits that change nothing included)
  uint64_t changed = 0;  // edited
  uint64_t added = 0;
  uint64_t deleted = 0;
  double seconds = 0;
  std::string note;     // OK: what the report adds (other hard links kept the old file)
  absl::Status status;  // not OK: left as it was, its edits still pending
  // OK: where the new shard's records start (uncompressed), its end last.
  std::vector<uint64_t> offsets;
};

// What depends on a rewritten shard besides TFDS's metadata (the caller's
// indexes of it: index::FollowRewrite). Called once the new shard is in
// place and before its entry leaves the list, so that recovery calls it
// again after a crash; `offsets` as RewrittenShard::offsets, or nullptr
// (recovery: not known); `walked`, for a GZIP/ZLIB shard, what the check
// after write found in the new file in its one inflate (its walk,
// checkpoints and windows, as index::WalkShard makes them: the new index
// needs no walk), to be taken (moved from); nullptr when not known.
using FollowRewrite = std::function<void(
    const std::string& path, const std::vector<uint64_t>* offsets, index::WalkedShard* walked)>;

// Each edited record's payload made again by example::SpliceEdit against
// the record's payload in `from`: what the edit did not change keeps its
// bytes and order. An edit that changes nothing (a value written over with
// itself, a refused write restored, an editor that gave up) is dropped from
// `edits`, so the record is kept byte for byte and counted as kept. A
// record whose original cannot be read (damaged) takes its folder's payload
// as it is. Used by the rewrite of files and of objects alike.
void KeepWhatEditsDidNotChange(const ShardToRewrite& from, staging::ShardEdits* edits);

// Removes committed edit folders of `edits_dir` (best effort: logged;
// RecoverRewrites retries).
void RemoveEditFolders(const std::string& edits_dir, const std::vector<std::string>& folders);

// Rewrites every shard of `list` (see the top). `edits_dir`: the edit
// store's records folder (staging/edits.h); `types`: what the edit folders'
// files are read as (PayloadFromFolder). `find` gives the mounted shard for
// a path (nullptr: not mounted now; left pending). Shards are independent:
// one failing does not stop the others.
std::vector<RewrittenShard> ApplyEdits(
    staging::DeletionList* list, const std::string& edits_dir, naming::FeatureTypes& types,
    const std::function<const ShardToRewrite*(const std::string& path)>& find,
    const FollowRewrite& follow = nullptr);

// Finishes or rolls back rewrites a crash interrupted (see the top), removes
// stale temp files of shards with pending edits, and the folders in
// `edits_dir` of shards the list does not have (committed). Returns the log
// lines saying what it did.
std::vector<std::string> RecoverRewrites(staging::DeletionList* list, const std::string& edits_dir,
                                         const FollowRewrite& follow = nullptr);

// "rewrote PATH: kept K, changed C, added A, deleted D record(s) in S s" /
// "not rewritten PATH: why".
std::string RewriteSummary(const std::vector<RewrittenShard>& shards);

}  // namespace tfrecordfs::repack

#endif  // TFRECORDFS_REPACK_REWRITE_H_
