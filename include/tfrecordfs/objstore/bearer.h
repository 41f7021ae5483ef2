// OAuth 2 access tokens sent as `Authorization: Bearer TOKEN` (Cloud
// Storage's XML API takes them, as its JSON API does).
//
// A token lives about an hour. BearerTokenSigner::FromFile reads the token
// from a file and reads it again whenever the file changes (its inode, size
// or mtime: a `gcloud auth print-access-token > FILE` from cron, written in
// place or renamed over it), checked with one stat(2) per request, so a
// mount outlives its first token. The file holds the token alone
// (surrounding blanks and newlines are dropped).
// BearerTokenSigner::FromMetadataServer asks a GCE metadata server for the
// VM's service account token (GET TOKEN_URL with "Metadata-Flavor:
// Google"; JSON {"access_token", "expires_in"}, parsed with nlohmann/json)
// and asks again once half its lifetime (at most 5 minutes before it
// expires) has passed; the request that finds it due waits for that one
// round trip, holding the signer's lock (others wait with it). When asking
// again fails, the old token serves until it expires.
//
// Secrets: the token is never logged nor put into a status; errors name the
// file.
//
// Thread-safety: thread-safe (the file's token is behind a leaf mutex).
#ifndef TFRECORDFS_OBJSTORE_BEARER_H_
#define TFRECORDFS_OBJSTORE_BEARER_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/objstore/http.h"

namespace tfrecordfs::objstore {

class BearerTokenSigner final : public RequestSigner {
 public:
  // A fixed token (e.g. GOOGLE_OAUTH_ACCESS_TOKEN).
  static std::shared_ptr<const BearerTokenSigner> Fixed(std::string token);
  // The token in the file at `path`, read now (an error when it cannot be
  // read or is empty) and again whenever it changes.
  static absl::StatusOr<std::shared_ptr<const BearerTokenSigner>> FromFile(std::string path);
  // The token a metadata server gives at `token_url`
  // (http://HOST/computeMetadata/v1/instance/service-accounts/default/token),
  // asked now (an error naming the URL and the HTTP status when it cannot
  // be had) and again before it expires.
  static absl::StatusOr<std::shared_ptr<const BearerTokenSigner>> FromMetadataServer(
      std::string token_url, std::shared_ptr<const HttpClient> client);

  // {"Authorization: Bearer TOKEN"}. Errors: the token file changed and
  // cannot be read now, or is empty (naming the file).
  absl::StatusOr<std::vector<std::string>> Sign(absl::string_view method, absl::string_view url,
                                                absl::string_view payload_sha256) const override;

 private:
  struct FileStamp {
    ino_t ino = 0;
    off_t size = -1;
    timespec mtime = {};
    bool operator==(const FileStamp& o) const {
      return ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
             mtime.tv_nsec == o.mtime.tv_nsec;
    }
  };
  BearerTokenSigner(std::string token, std::string path, std::string metadata_url = "",
                    std::shared_ptr<const HttpClient> client = nullptr)
      : path_(std::move(path)),
        metadata_url_(std::move(metadata_url)),
        client_(std::move(client)),
        token_(std::move(token)) {}
  // Reads the token file when its stamp differs from stamp_.
  absl::Status Refresh() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Asks the metadata server when the token is due (refresh_at_).
  absl::Status RefreshFromMetadata() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;          // the token file; "" for none
  const std::string metadata_url_;  // the metadata server's token URL; "" for none
  const std::shared_ptr<const HttpClient> client_;
  mutable Mutex mu_;  // leaf lock
  mutable std::string token_ ABSL_GUARDED_BY(mu_);
  mutable FileStamp stamp_ ABSL_GUARDED_BY(mu_);
  mutable std::chrono::steady_clock::time_point refresh_at_ ABSL_GUARDED_BY(mu_);
  mutable std::chrono::steady_clock::time_point expires_at_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tfrecordfs::objstore

#endif  // TFRECORDFS_OBJSTORE_BEARER_H_
