// The mount's pack into a bucket (repack/upload.h): a read-write mount
// whose first SOURCE is s3:// or gs:// packs its staged records into new
// shards under that prefix at unmount.
//
// Thread-safety: pure functions but for the requests they send.
#ifndef TFRECORDFS_SRC_CLI_PACK_UPLOAD_H_
#define TFRECORDFS_SRC_CLI_PACK_UPLOAD_H_

#include <string>
#include <vector>

#include "tfrecordfs/repack/pack.h"

namespace tfrecordfs::cli {

// True when `sources`' first one is an s3:// or gs:// URL: staging packs
// back into it.
bool PacksIntoBucket(const std::vector<std::string>& sources);

// The outgoing folder of the store at `store_dir`, where shards wait for
// their upload.
std::string OutgoingDir(const std::string& store_dir);

// Resolves where `bucket_source` (s3://BUCKET/PREFIX, gs://...) is reached
// (objstore::ResolveUploadTarget, with the mount's object options), then
// repack::PackAndUpload. New objects are keyed PREFIX/<shard name> (PREFIX
// taken as a folder; "" for a whole bucket).
// repack::FinishUploads for the store at `store_dir`: what a crash left in
// its outgoing folder is uploaded (or found complete) before the bucket is
// listed, so the next mount shows it. Logs a line per object; an error is
// logged as a warning (the unmount tries again).
void FinishBucketUploads(const std::string& bucket_source, const std::string& store_dir);

repack::PackReport PackIntoBucket(const std::string& bucket_source, const repack::PackOptions& pack,
                                  const std::string& store_dir);

}  // namespace tfrecordfs::cli

#endif  // TFRECORDFS_SRC_CLI_PACK_UPLOAD_H_
