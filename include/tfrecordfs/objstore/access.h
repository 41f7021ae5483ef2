// Where requests for s3:// and gs:// objects go and how they are signed,
// resolved the way the ecosystem's own tools resolve it, from the
// environment, the AWS shared files and the command line (ObjectOptions).
//
// s3:// (as the AWS CLI; the first that gives a value wins):
//   credentials  AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN);
//                else the profile's aws_access_key_id / aws_secret_access_key /
//                aws_session_token in the credentials file, then in the config
//                file; else anonymous. Anonymous whatever is configured with
//                ObjectOptions::no_sign_request or AWS_NO_SIGN_REQUEST=true.
//   region       AWS_REGION, AWS_DEFAULT_REGION, the profile's `region`,
//                us-east-1.
//   endpoint     AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's nested
//                `s3 = / endpoint_url = ...`, the profile's `endpoint_url`
//                (path-style requests, ENDPOINT/BUCKET/KEY); else AWS's
//                virtual-hosted https://BUCKET.s3.REGION.amazonaws.com.
//   profile      AWS_PROFILE, else `default`; sections `[NAME]` in the
//                credentials file (AWS_SHARED_CREDENTIALS_FILE, else
//                ~/.aws/credentials) and `[profile NAME]` (or `[default]`) in
//                the config file (AWS_CONFIG_FILE, else ~/.aws/config). A
//                profile named by AWS_PROFILE (or AWS_DEFAULT_PROFILE) that
//                neither file has is an error, as is, unless requests are
//                anonymous, one whose credentials come from something we do
//                not run (credential_process, sso_*, role_arn,
//                web_identity_token_file) and that has no keys of its own.
// gs:// (Cloud Storage's XML API):
//   endpoint     STORAGE_EMULATOR_HOST (path-style, tests), else
//                https://storage.googleapis.com.
//   signing      anonymous with ObjectOptions::no_sign_request; else an OAuth
//                access token as `Authorization: Bearer`, from
//                ObjectOptions::gcs_token_file (re-read when it changes) or
//                GOOGLE_OAUTH_ACCESS_TOKEN; else HMAC keys GS_ACCESS_KEY_ID +
//                GS_SECRET_ACCESS_KEY (boto's and gsutil's names) signed with
//                AWS SigV4 (region "auto"), which the XML API accepts; else
//                the VM's service account token from the GCE metadata
//                server, when GCE_METADATA_HOST names it (host[:port], the
//                variable Google's client libraries take) or the machine
//                says it is a Compute Engine VM (/sys/class/dmi/id/
//                product_name starts with "Google": metadata.google.internal;
//                NO_GCE_CHECK=true skips that check, as google-auth's);
//                else anonymous.
//
// Secrets are never logged nor put in a status: messages say where a key
// came from (a variable's or a file's name), never its value.
//
// Thread-safety: the functions are pure but for reading the files named;
// BucketAccess is immutable and its signer thread-safe.
#ifndef TFRECORDFS_OBJSTORE_ACCESS_H_
#define TFRECORDFS_OBJSTORE_ACCESS_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/objstore/http.h"
#include "tfrecordfs/objstore/sigv4.h"

namespace tfrecordfs::objstore {

// What the command line adds to the environment for object sources.
// Defaults: only the environment and the files speak.
struct ObjectOptions {
  // Every s3:// and gs:// request anonymous, whatever is configured
  // (-o no_sign_request, --no-sign-request: the aws CLI's flag): public
  // buckets, and no credentials file read.
  bool no_sign_request = false;
  // gs://: a file holding an OAuth 2 access token (what `gcloud auth
  // print-access-token` prints; -o gcs_token_file, --gcs-token-file). Read
  // again whenever it changes, so a token refreshed by cron keeps a mount
  // going. "" for none.
  std::string gcs_token_file;
  // The pack into a bucket (repack/upload.h, objstore/upload.h): a shard larger than this is
  // uploaded as a multipart upload in parts of this size, a smaller one
  // with one PUT (-o multipart_mb=N). Default 8 MiB, the aws CLI's
  // multipart_threshold and multipart_chunksize (objstore/upload.h's kPartSize).
  uint64_t multipart_bytes = uint64_t{8} << 20;
  // The most one request (a listing page, a HEAD, a ranged GET: all its
  // attempts together) may take before it fails (-o request_timeout=S):
  // HttpOptions::deadline_s.
  long request_timeout_s = 120;
};

// The ObjectOptions of a scan that does not give its own
// (ScanOptions::objects): the mount's -o options, which reach the scan that
// vfs::Filesystem::Create runs only this way (vfs::Options does not carry
// them). Set once on the main thread, after the command line is parsed and
// before any scan; a plain ObjectOptions until then. Thread-safe (a leaf
// mutex). The toolbox passes its flags in ScanOptions instead.
void SetDefaultObjectOptions(ObjectOptions options);
ObjectOptions DefaultObjectOptions();

// An environment variable's value, "" when unset (tests pass their own).
using Getenv = std::function<std::string(const char* name)>;
// The process environment.
std::string ProcessEnv(const char* name);

// An AWS profile as the shared files give it.
struct AwsProfile {
  std::string name;              // "default" unless AWS_PROFILE says otherwise
  bool found = false;            // a file has a section for it
  AwsCredentials credentials;    // empty keys when the files give none
  std::string credentials_from;  // "[dev] in /home/u/.aws/credentials"
  std::string region;
  std::string s3_endpoint_url;  // the nested s3 endpoint_url, else endpoint_url
  // When the profile has no keys but names another way to get them that
  // we do not run (credential_process, sso_session, sso_start_url,
  // role_arn, web_identity_token_file): that key. ResolveS3Access then
  // fails unless requests are anonymous anyway.
  std::string unsupported;
};
// Reads the profile from the shared files (missing files are fine).
// Errors: a profile named by AWS_PROFILE that neither file has (NotFound),
// a file that does not parse or cannot be read.
absl::StatusOr<AwsProfile> LoadAwsProfile(const Getenv& env);

struct BucketAccess {
  // Path-style "ENDPOINT/BUCKET/KEY" when set; else AWS's virtual-hosted
  // https://BUCKET.s3.REGION.amazonaws.com/KEY (s3:// only).
  std::string endpoint;
  std::string region;
  std::shared_ptr<const RequestSigner> signer;  // null: anonymous
  // How requests are sent, for messages ("anonymously (no_sign_request)",
  // "signed (AWS SigV4) with the keys of AWS_ACCESS_KEY_ID", ...): never a
  // secret.
  std::string signing;
};

// Where a bucket's requests go: "<base>/<encoded key>" for an object,
// "<base>/?list-type=2..." for a listing. Path-style "ENDPOINT/BUCKET"
// under an endpoint, else AWS's https://BUCKET.s3.REGION.amazonaws.com.
std::string BucketBase(const BucketAccess& access, absl::string_view bucket);

absl::StatusOr<BucketAccess> ResolveS3Access(const ObjectOptions& options, const Getenv& env);
// `client` sends the metadata server's requests (null: one of its own).
absl::StatusOr<BucketAccess> ResolveGcsAccess(const ObjectOptions& options, const Getenv& env,
                                              std::shared_ptr<const HttpClient> client = nullptr);

}  // namespace tfrecordfs::objstore

#endif  // TFRECORDFS_OBJSTORE_ACCESS_H_
