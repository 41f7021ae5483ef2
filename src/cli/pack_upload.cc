#include "src/cli/pack_upload.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/repack/upload.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/objstore/access.h"
#include "tfrecordfs/objstore/upload.h"

namespace tfrecordfs::cli {

bool PacksIntoBucket(const std::vector<std::string>& sources) {
  return !sources.empty() &&
         (absl::StartsWith(sources.front(), "s3://") || absl::StartsWith(sources.front(), "gs://"));
}

std::string OutgoingDir(const std::string& store_dir) { return JoinPath(store_dir, "outgoing"); }

namespace {

absl::StatusOr<repack::UploadOptions> ResolveUpload(const std::string& bucket_source,
                                                    const std::string& store_dir) {
  auto target = objstore::ResolveUploadTarget(bucket_source, objstore::DefaultObjectOptions(),
                                              objstore::ProcessEnv);
  if (!target.ok()) return target.status();
  repack::UploadOptions options;
  options.target = std::move(*target);
  options.outgoing_dir = OutgoingDir(store_dir);
  return options;
}

}  // namespace

void FinishBucketUploads(const std::string& bucket_source, const std::string& store_dir) {
  auto options = ResolveUpload(bucket_source, store_dir);
  absl::Status s = options.status();
  if (options.ok()) {
    auto exists = Exists(options->outgoing_dir);
    if (!exists.ok() || !*exists) return;  // nothing was ever packed here
    std::vector<std::string> lines;
    s = repack::FinishUploads(*options, &lines);
    for (const std::string& line : lines) log::Info(line);
  }
  if (!s.ok()) {
    log::Warning(
        "the uploads an interrupted unmount left are not finished (the unmount tries "
        "again): ",
        s.message());
  }
}

repack::PackReport PackIntoBucket(const std::string& bucket_source, const repack::PackOptions& pack,
                                  const std::string& store_dir) {
  auto options = ResolveUpload(bucket_source, store_dir);
  if (!options.ok()) {
    repack::PackReport failed;
    failed.status = options.status();
    return failed;
  }
  return repack::PackAndUpload(pack, *options);
}

}  // namespace tfrecordfs::cli
