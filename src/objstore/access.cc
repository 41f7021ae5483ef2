#include "tfrecordfs/objstore/access.h"

#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/objstore/access_internal.h"
#include "tfrecordfs/base/mutex.h"

namespace tfrecordfs::objstore {
namespace {
Mutex default_options_mu;
ObjectOptions& DefaultOptionsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(default_options_mu) {
  static ObjectOptions* options = new ObjectOptions();
  return *options;
}
}  // namespace

void SetDefaultObjectOptions(ObjectOptions options) {
  MutexLock lock(&default_options_mu);
  DefaultOptionsLocked() = std::move(options);
}

ObjectOptions DefaultObjectOptions() {
  MutexLock lock(&default_options_mu);
  return DefaultOptionsLocked();
}

std::string ProcessEnv(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

std::string BucketBase(const BucketAccess& access, absl::string_view bucket) {
  if (!access.endpoint.empty()) {  // path-style
    return absl::StrCat(access.endpoint, "/", AwsUriEncode(bucket, true));
  }
  return absl::StrCat("https://", bucket, ".s3.", access.region, ".amazonaws.com");
}

namespace internal {

bool IsTrue(const std::string& v) {
  const std::string l = absl::AsciiStrToLower(v);
  return l == "1" || l == "true" || l == "yes";
}

std::string WithScheme(std::string endpoint) {
  if (!absl::StartsWith(endpoint, "http://") && !absl::StartsWith(endpoint, "https://")) {
    endpoint = absl::StrCat("http://", endpoint);
  }
  while (absl::EndsWith(endpoint, "/")) endpoint.pop_back();
  return endpoint;
}

}  // namespace internal
}  // namespace tfrecordfs::objstore
