// The commit target for a plain (uncompressed) shard that is an object in
// an S3 bucket: the object is rewritten in place with as few bytes as
// possible crossing the network, and only if it is still the object the
// mount listed. Beside repack::ApplyEdits (rewrite.h, local shards: a temp
// file renamed over the shard); an object store has no rename, so:
//   1. ObjectLayout turns the edits of records (replaced framed bytes,
//      deletions, appended records) into the new object's layout: the old
//      object's unchanged ranges, and new bytes (objstore/rewrite.h);
//   2. RewriteObject writes it: an object of at most min_part bytes (or one
//      whose plan is a single part) as one PutObject with If-Match: ETAG;
//      else CreateMultipartUpload, each part an UploadPartCopy of a kept
//      range (x-amz-copy-source-if-match: ETAG, server-side) or an
//      UploadPart of new bytes (with the kept bytes merged into it read
//      through `read_old`), then CompleteMultipartUpload with If-Match:
//      ETAG. The store swaps the object whole at the completion: readers
//      see all the old object or all the new, never a mix.
//   3. A refusal (412: the object was replaced meanwhile; ESTALE naming the
//      object and the ETag listed) or any failure aborts the upload and
//      leaves the object as it was: the caller keeps the edits pending.
// An upload a crash leaves behind (between 2's create and its completion
// or abort) never shows under the key; AbortLeftUploads aborts those of
// the given keys at the next mount (ListMultipartUploads: S3 keeps the
// list, so no journal in the store is needed).
//
// Thread-safety: pure functions and requests through a BucketWriter
// (thread-safe); one rewrite of an object at a time is the caller's.
#ifndef TFRECORDFS_REPACK_BUCKET_REWRITE_H_
#define TFRECORDFS_REPACK_BUCKET_REWRITE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tfrecordfs/objstore/rewrite.h"
#include "tfrecordfs/objstore/upload.h"
#include "tfrecordfs/repack/rewrite.h"
#include "tfrecordfs/staging/deletions.h"

namespace tfrecordfs::repack {

// Reads `size` bytes of the old object at `offset` into *out.
using ReadOldBytes = std::function<absl::Status(uint64_t offset, uint64_t size, std::string* out)>;

// The new object as the old one's ranges and new bytes.
struct ObjectLayout {
  std::vector<objstore::RewritePiece> pieces;
  std::string new_bytes;  // the kNew pieces' bytes, in order
  uint64_t size = 0;      // of the new object
  // When set, the kNew pieces' bytes are read through it (offsets into the
  // stream of new bytes) instead of from new_bytes: a compressed object is
  // written whole into a local file first, and uploaded from it.
  ReadOldBytes read_new;
};

// The layout of the object whose records are framed at `offsets` (record i
// is [offsets[i], offsets[i + 1]); offsets.back() is the object's size)
// after `changes` (record index -> its new framed bytes, or nullopt:
// deleted) and with `appended` (framed records) at the end. Errors:
// InvalidArgument for a change of a record the offsets do not have.
absl::StatusOr<ObjectLayout> LayoutAfterEdits(
    const std::vector<uint64_t>& offsets,
    const std::map<uint64_t, std::optional<std::string>>& changes,
    const std::vector<std::string>& appended);

struct ObjectRewrite {
  std::string key;    // the object's key
  std::string etag;   // as listed, quotes included (not empty)
  uint64_t size = 0;  // as listed
  // A gs:// object's generation (x-goog-generation), "" for S3. Set: Cloud
  // Storage's XML API has no ranged server-side copy, so the object is
  // streamed through once: every part uploaded (kept ranges read through
  // `read_old`), one PUT for an object of at most one part, the final
  // write conditional on x-goog-if-generation-match: GENERATION.
  std::string generation;
};

struct ObjectRewriteStats {
  uint64_t parts = 0;      // 0: one PutObject
  uint64_t copied = 0;     // bytes copied by the store (UploadPartCopy)
  uint64_t uploaded = 0;   // bytes sent (PutObject, UploadPart)
  uint64_t read_back = 0;  // bytes of the old object read to merge into parts
  // The new object's ETag, as the store answered the final write ("" when
  // it gave none).
  std::string etag;
};

// Writes `layout` over `object` (see the top). `before_final`, when set,
// runs once every part is uploaded, right before the final conditional
// write (PutObject or CompleteMultipartUpload): the commit journals the
// rewrite there; its error stops the rewrite (upload aborted). Errors:
// ESTALE (the object changed since it was listed; nothing written), the
// requests' (the upload aborted), `read_old`'s, `before_final`'s.
absl::StatusOr<ObjectRewriteStats> RewriteObject(
    const objstore::BucketWriter& writer, const ObjectRewrite& object, const ObjectLayout& layout,
    const ReadOldBytes& read_old, const objstore::RewritePlanOptions& plan = {},
    const std::function<absl::Status()>& before_final = nullptr);

// The commit of a mount's pending edits of one object (repack/rewrite.h
// ApplyEdits calls it for a shard whose ShardToRewrite has an object; its
// path is the object's URL, s3://BUCKET/KEY or gs://BUCKET/KEY; a gs://
// object is HEADed first for its generation, and one whose ETag is no
// longer the listed one is a conflict, ESTALE): the same edits as a file's
// (deletions, edit folders spliced by KeepWhatEditsDidNotChange, added
// records appended in name order), laid out by LayoutAfterEdits and
// written by RewriteObject conditionally on the ETag the mount listed (a
// GZIP, ZLIB or SNAPPY object is rewritten in its codec: streamed through
// once, every record inflated from the old object and the new stream
// deflated by record::ShardWriter into `<store>/.rewrite-KEY` beside the
// list, checked as the local rewrite checks its temp file, then uploaded
// whole in parts and removed):
//   1. the object must still be the one the edits were made on (its
//      listed fingerprint, staging::ObjectFingerprint, is the entry's);
//   2. the parts are uploaded or copied; then the entry is marked
//      `rewriting` (the new size and record count; durable) and the final
//      conditional write is sent;
//   3. once the store took it, the index stored beside the object
//      (`index --beside`: KEY.tfri, which describes the old object), when
//      there is one, follows it: for a plain object it is replaced by the
//      new object's index, made from the offsets the rewrite wrote (no
//      walk) and tied to the new object's ETag (the one the final write
//      answered), size and Last-Modified, in a PUT conditional on the old
//      index's ETag or generation; a compressed object's is deleted (its
//      checkpoints need a walk). Then the entry is dropped and the edit
//      folders removed. (The local index cache, keyed by URL and ETag,
//      refuses its entry of the old object; the mount's reopen indexes
//      the new object, from this index or by a walk, and caches it.)
//      TFDS's dataset_info.json beside the object, when the object is a
//      TFDS shard of a split it counts, gets the shard's new record count
//      and the split's payload bytes (tfds_info.h CommittedTfdsInfoJson)
//      in a PUT conditional on the ETag (generation) it was read with; a
//      refusal (another writer changed it) or failure is in the result's
//      note and the log, and the object's commit stays done. (A crash
//      before it: RecoverObjectRewrites sets the shard's length from the
//      `rewriting` mark's record count; the split's numBytes stays the old
//      object's.)
// A refusal (ESTALE: another writer replaced the object) or any failure
// leaves the object as it was and the edits pending, the entry's
// `rewriting` mark cleared; the status says which object and what to do.
// A crash between 2 and 3 is settled by RecoverObjectRewrites (a crash
// before the index's PUT leaves the old index beside the new object: every
// reader refuses it by the ETag, and the recovery deletes it).
//
// Test hooks (TFRECORDFS_FAULT, as rewrite.h's): rewrite_object_before_final
// (parts uploaded, marked `rewriting`, the final write not sent),
// rewrite_object_after_final (the store took it, the entry still listed;
// the index beside it not yet rewritten), bucket_tfds_info_raced (not a
// crash: another writer's dataset_info.json put between the commit's read
// of it and its conditional write).
absl::Status CommitObjectEdits(staging::DeletionList* list, const std::string& edits_dir,
                               const std::string& url, const staging::DeletedShard& d,
                               const ShardToRewrite& from, naming::FeatureTypes& types,
                               RewrittenShard* out);

// `tfrecordfs commit --rebase`: re-keys the pending edits of the object
// at `url` (entry `d`, made on the object the mount listed) onto `now`,
// the object the store holds now (another writer's), by record key
// (staging::ContentKey: each edited or deleted record's data length and
// CRC, kept when it was first edited): an edit or deletion of a record
// whose key names exactly one record of the new object is moved to that
// record's index; one whose record is not there (or not once) is not
// applied: a deletion is dropped, an edit folder is moved to
// `<store>/rebase-left/` (kept, not applied). Added records stay. The
// entry then names the new object (its fingerprint), and the caller
// commits it as any other. Returns the report: what was re-applied and
// what was not, by old record index. Crash-safe: the folder renames (in
// two phases, through temporary names) are journaled first
// (`<store>/rebase-journal-SHARDKEY`) and the list updated last; a crash
// or failure before the list names the new object undoes them (the edits
// stay pending on the object they were made on, as before the rebase),
// one after finishes it (RecoverObjectRewrites settles journals at the
// next mount). Test hooks: rebase_mid_renames (first phase done),
// rebase_before_list (every folder renamed), rebase_after_list.
absl::StatusOr<std::string> RebaseObjectEdits(staging::DeletionList* list,
                                              const std::string& edits_dir, const std::string& url,
                                              const staging::DeletedShard& d,
                                              const ShardToRewrite& now);

// At mount, before the objects are listed: first the journals of rebases
// a crash interrupted (RebaseObjectEdits) are settled; then for each object
// of `list` (a
// URL path) whose rewrite a crash interrupted (`rewriting`), decides by the
// object as it is now (HEAD) and the uploads in flight for its key
// (ListMultipartUploads): still the object the edits were made on, or an
// upload still in flight (its completion never happened; another writer
// replaced the object) -> not written: the mark is cleared, the edits stay
// pending; else (no upload left and the object has the rewritten size) ->
// written: the entry is dropped (its edit folders are then removed by
// RecoverRewrites), the index beside the object deleted if it describes
// the old object (the crash came before its rewrite) and a TFDS shard's
// length set in dataset_info.json (idempotent). Then aborts the uploads in flight for every
// listed object's key (AbortLeftUploads). Returns the log lines saying what it did.
std::vector<std::string> RecoverObjectRewrites(staging::DeletionList* list);

// Aborts the multipart uploads in flight for `keys` (a crash's leftovers;
// nothing else of this mount uploads to them). Returns the log lines
// saying what it aborted; errors: the listing's.
absl::StatusOr<std::vector<std::string>> AbortLeftUploads(const objstore::BucketWriter& writer,
                                                          const std::string& prefix,
                                                          const std::vector<std::string>& keys);

}  // namespace tfrecordfs::repack

#endif  // TFRECORDFS_REPACK_BUCKET_REWRITE_H_
