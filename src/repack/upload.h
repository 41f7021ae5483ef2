// Packing staged records back into a bucket (s3://, and gs:// through the
// same XML API): the pack writes its shards into a local outgoing folder of
// the staging store first (repack/pack.h: written, checked, committed, the
// staged folders removed), then each shard is uploaded under the source's
// prefix and deleted locally only once the object is there.
//
// Upload of one shard (a local file of SIZE bytes, to KEY; the requests
// are objstore/upload.h's):
//   SIZE <= kMultipartThreshold   one PUT with If-None-Match: * (a store
//                                 that ignores it is covered by the HEAD
//                                 before);
//   larger                        CreateMultipartUpload, UploadPart of
//                                 kPartSize bytes each (the last shorter),
//                                 CompleteMultipartUpload; any failure
//                                 aborts the upload (AbortMultipartUpload).
// Either way the object appears under KEY whole or not at all: a store
// shows neither a PUT nor a multipart upload under its name before it is
// complete. Before uploading, a HEAD of KEY: an object already there is
// never overwritten (the shard stays local and the error says so).
//
// Exactly once: the upload journal (`upload.journal` in the outgoing
// folder, replaced atomically, crc32c-checked) names every object before
// anything is sent, and each multipart upload's id before any part is:
//
//   step                                   after a crash, FinishUploads
//   -------------------------------------  ----------------------------------
//   local pack (pack.h's journal)          pack.h's Recover (the store's)
//   shard files in outgoing/, no journal   each file: HEAD, upload
//   journal written (objects named)        HEAD KEY: the same bytes -> done;
//   multipart created, id journaled,       absent -> abort the journaled
//     parts sent                             upload id (if any), upload
//   object complete, local file kept       again; another object -> refused,
//   local file deleted, journal rewritten    the shard stays local
//   journal deleted
//
// One window is not covered: a crash between CreateMultipartUpload's answer
// and the journal's rewrite leaves an upload no journal names. It never
// becomes an object; its parts stay until the bucket's lifecycle rule
// (AbortIncompleteMultipartUpload) or an operator removes them.
//
// "The same bytes" is checked byte for byte with ranged GETs against the
// local file (ETags differ between stores and between PUT and multipart),
// so a record is neither lost (a local shard goes only after its object is
// verified) nor duplicated (an object is uploaded under one name, which is
// never written twice).
//
// Test hook: TFRECORDFS_FAULT (fault_points.h) at
//   upload_after_journal   the journal names the objects, nothing sent
//   mid_upload             a multipart upload's first part sent
//   before_complete        every part sent, not completed
//   after_upload:K         K objects complete, their local files kept
//
// Thread-safety: one FinishUploads / PackAndUpload at a time per outgoing
// folder (the staging store's lock guarantees it for a mount).
#ifndef TFRECORDFS_SRC_REPACK_UPLOAD_H_
#define TFRECORDFS_SRC_REPACK_UPLOAD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/objstore/upload.h"
#include "tfrecordfs/repack/pack.h"

namespace tfrecordfs::repack {

struct UploadOptions {
  // The bucket and its requests (objstore/upload.h).
  objstore::UploadTarget target;
  // The local folder the pack writes into (created if missing); holds the
  // upload journal too.
  std::string outgoing_dir;
};

// Finishes or aborts what a crash left in `outgoing_dir` (see above), then
// deletes the journal when nothing is left. `lines` gets one human line per
// object ("finished", "aborted ... and uploaded again", ...). Errors name
// the object and the local file; what failed stays for the next run.
absl::Status FinishUploads(const UploadOptions& options, std::vector<std::string>* lines);

// FinishUploads, then Pack(pack) with pack.output_dir = the outgoing
// folder, then the upload of every new shard. The report's shard paths are
// the objects' names ("s3://BUCKET/KEY"). When the upload fails the
// records are packed already: status says which shards wait in the
// outgoing folder for the next unmount (FinishUploads).
PackReport PackAndUpload(PackOptions pack, const UploadOptions& options);

// The upload journal's contents (file `upload.journal` in the outgoing
// folder; replaced with WriteFileAtomically):
//
//   tfrecordfs-upload-journal 1
//   target <CEscaped target name, "s3://BUCKET">
//   object <size> <upload id, CEscaped; "-" for none>    per object, in
//   key <CEscaped key>                                   upload order
//   local <CEscaped file name in the outgoing folder>
//   crc32c <8 hex digits of every byte before this line>
struct PendingObject {
  uint64_t size = 0;
  std::string upload_id;  // "" for none (a single PUT, or not created yet)
  std::string key;
  std::string local;  // one path component (IsJournalName)
};
struct UploadJournal {
  std::string target;
  std::vector<PendingObject> objects;
};
std::string EncodeUploadJournal(const UploadJournal& journal);
// DataLoss naming `path` for a torn, damaged or foreign file, or a local
// name that is not one path component.
absl::StatusOr<UploadJournal> ParseUploadJournal(absl::string_view text, const std::string& path);

}  // namespace tfrecordfs::repack

#endif  // TFRECORDFS_SRC_REPACK_UPLOAD_H_
