#include "src/cli/pack_upload.h"

#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/repack/upload.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/objstore/access.h"
#include "tfrecordfs/objstore/listing.h"
#include "tfrecordfs/objstore/sigv4.h"

namespace tfrecordfs::cli {

bool PacksIntoBucket(const std::vector<std::string>& sources) {
  return !sources.empty() &&
         (absl::StartsWith(sources.front(), "s3://") || absl::StartsWith(sources.front(), "gs://"));
}

std::string OutgoingDir(const std::string& store_dir) { return JoinPath(store_dir, "outgoing"); }

namespace {

absl::StatusOr<repack::UploadOptions> ResolveUpload(const std::string& bucket_source,
                                                    const std::string& store_dir) {
  auto u = objstore::ParseObjectUrl(bucket_source);
  if (!u.ok()) return u.status();
  auto client = std::make_shared<objstore::HttpClient>();
  const bool s3 = u->scheme == objstore::ObjectUrl::Scheme::kS3;
  auto access =
      s3 ? objstore::ResolveS3Access(objstore::DefaultObjectOptions(), objstore::ProcessEnv)
         : objstore::ResolveGcsAccess(objstore::DefaultObjectOptions(), objstore::ProcessEnv,
                                      client);
  if (!access.ok()) {
    return absl::Status(access.status().code(),
                        absl::StrCat(bucket_source, ": ", access.status().message()));
  }
  repack::UploadOptions options;
  repack::UploadTarget& t = options.target;
  // As scan/objects.cc addresses a bucket: path-style under an endpoint.
  t.base = !access->endpoint.empty()
               ? absl::StrCat(access->endpoint, "/", objstore::AwsUriEncode(u->bucket, true))
               : absl::StrCat("https://", u->bucket, ".s3.", access->region, ".amazonaws.com");
  t.name = absl::StrCat(s3 ? "s3://" : "gs://", u->bucket);
  t.key_prefix = u->key.empty() || absl::EndsWith(u->key, "/") ? u->key : u->key + "/";
  t.signer = access->signer;
  t.client = client;
  t.multipart_threshold = objstore::DefaultObjectOptions().multipart_bytes;
  t.part_size = objstore::DefaultObjectOptions().multipart_bytes;
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
