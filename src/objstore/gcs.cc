// gs:// buckets through Cloud Storage's XML API: where requests go and how
// they are signed (access.h: a token file or variable, HMAC keys, the GCE
// metadata server).
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/objstore/access_internal.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/objstore/access.h"
#include "tfrecordfs/objstore/bearer.h"
#include "tfrecordfs/objstore/sigv4.h"

namespace tfrecordfs::objstore {
namespace {

using internal::IsTrue;
using internal::WithScheme;

// A Compute Engine VM says so in its DMI product name (what google-auth
// checks before it asks the metadata server).
bool OnComputeEngine() {
  auto name = ReadFileToString("/sys/class/dmi/id/product_name");
  return name.ok() && absl::StartsWith(*name, "Google");
}

}  // namespace

absl::StatusOr<BucketAccess> ResolveGcsAccess(const ObjectOptions& options, const Getenv& env,
                                              std::shared_ptr<const HttpClient> client) {
  BucketAccess a;
  const std::string emulator = env("STORAGE_EMULATOR_HOST");
  a.endpoint = emulator.empty() ? "https://storage.googleapis.com" : WithScheme(emulator);
  a.region = "auto";
  if (options.no_sign_request) {
    a.signing = "anonymously (no_sign_request)";
    return a;
  }
  if (!options.gcs_token_file.empty()) {
    auto signer = BearerTokenSigner::FromFile(options.gcs_token_file);
    if (!signer.ok()) return signer.status();
    a.signer = std::move(*signer);
    a.signing = absl::StrCat("with the OAuth access token in ", options.gcs_token_file);
    return a;
  }
  if (const std::string token = env("GOOGLE_OAUTH_ACCESS_TOKEN"); !token.empty()) {
    a.signer = BearerTokenSigner::Fixed(token);
    a.signing = "with the OAuth access token of GOOGLE_OAUTH_ACCESS_TOKEN";
    return a;
  }
  AwsCredentials c{env("GS_ACCESS_KEY_ID"), env("GS_SECRET_ACCESS_KEY"), ""};
  if (!c.access_key_id.empty() && !c.secret_access_key.empty()) {
    // Cloud Storage's XML API takes AWS SigV4 with an HMAC key ("auto" is
    // its region for it).
    a.signer = std::make_shared<SigV4Signer>(std::move(c), a.region);
    a.signing = "signed (AWS SigV4) with the HMAC key of GS_ACCESS_KEY_ID";
    return a;
  }
  std::string metadata = env("GCE_METADATA_HOST");
  if (metadata.empty() && !IsTrue(env("NO_GCE_CHECK")) && OnComputeEngine()) {
    metadata = "metadata.google.internal";
  }
  if (!metadata.empty()) {
    const std::string url = absl::StrCat(
        WithScheme(metadata), "/computeMetadata/v1/instance/service-accounts/default/token");
    if (client == nullptr) client = std::make_shared<HttpClient>();
    auto signer = BearerTokenSigner::FromMetadataServer(url, std::move(client));
    if (!signer.ok()) {
      return Annotate(signer.status(), "no token from the GCE metadata server");
    }
    a.signer = std::move(*signer);
    a.signing = absl::StrCat("with the service account token of the metadata server ", metadata);
    return a;
  }
  a.signing = "anonymously (no OAuth token, HMAC key or metadata server)";
  return a;
}

}  // namespace tfrecordfs::objstore
