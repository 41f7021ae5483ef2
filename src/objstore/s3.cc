// s3:// buckets: where requests go and how they are signed, as the AWS CLI
// resolves it (access.h: the environment, the shared files' profiles).
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
#include "tfrecordfs/base/ini.h"
#include "tfrecordfs/objstore/access.h"
#include "tfrecordfs/objstore/sigv4.h"

namespace tfrecordfs::objstore {
namespace {

using internal::IsTrue;
using internal::WithScheme;

// `path` with a leading "~/" made $HOME/ (botocore expands it too).
std::string ExpandHome(const std::string& path, const std::string& home) {
  if (absl::StartsWith(path, "~/") && !home.empty()) return absl::StrCat(home, path.substr(1));
  return path;
}

// A shared file: its path (from `var`, else ~/.aws/NAME), parsed; an
// empty IniFile when it does not exist (or there is no HOME to find it).
struct SharedFile {
  std::string path;
  IniFile ini;
};
absl::StatusOr<SharedFile> ReadShared(const Getenv& env, const char* var, const char* name) {
  SharedFile f;
  const std::string home = env("HOME");
  f.path = env(var);
  if (f.path.empty() && !home.empty()) f.path = absl::StrCat(home, "/.aws/", name);
  f.path = ExpandHome(f.path, home);
  if (f.path.empty()) return f;
  auto ini = ReadIniFile(f.path);
  if (absl::IsNotFound(ini.status())) return f;
  if (!ini.ok()) {
    return Annotate(ini.status(), absl::StrCat("the AWS ", name, " file"));
  }
  f.ini = std::move(*ini);
  return f;
}

const IniSection* Find(const IniFile& ini, const std::string& section) {
  auto it = ini.find(section);
  return it == ini.end() ? nullptr : &it->second;
}

std::string Get(const IniSection* s, const char* key) {
  if (s == nullptr) return "";
  auto it = s->find(key);
  return it == s->end() ? "" : it->second;
}

// The keys of a section, when it has both halves.
bool TakeKeys(const IniSection* s, AwsCredentials* c) {
  const std::string id = Get(s, "aws_access_key_id"), secret = Get(s, "aws_secret_access_key");
  if (id.empty() || secret.empty()) return false;
  *c = {id, secret, Get(s, "aws_session_token")};
  return true;
}

}  // namespace

absl::StatusOr<AwsProfile> LoadAwsProfile(const Getenv& env) {
  AwsProfile p;
  p.name = env("AWS_PROFILE");
  if (p.name.empty()) p.name = env("AWS_DEFAULT_PROFILE");
  const bool named = !p.name.empty();
  if (!named) p.name = "default";
  auto credentials = ReadShared(env, "AWS_SHARED_CREDENTIALS_FILE", "credentials");
  if (!credentials.ok()) return credentials.status();
  auto config = ReadShared(env, "AWS_CONFIG_FILE", "config");
  if (!config.ok()) return config.status();

  const IniSection* in_credentials = Find(credentials->ini, p.name);
  const IniSection* in_config = Find(config->ini, absl::StrCat("profile ", p.name));
  if (in_config == nullptr && p.name == "default") in_config = Find(config->ini, "default");
  p.found = in_credentials != nullptr || in_config != nullptr;
  if (!p.found && named) {
    return absl::NotFoundError(
        absl::StrCat("the AWS profile '", p.name, "' (AWS_PROFILE) is in neither ",
                     credentials->path.empty() ? "~/.aws/credentials" : credentials->path, " nor ",
                     config->path.empty() ? "~/.aws/config" : config->path));
  }
  if (TakeKeys(in_credentials, &p.credentials)) {
    p.credentials_from = absl::StrCat("[", p.name, "] in ", credentials->path);
  } else if (TakeKeys(in_config, &p.credentials)) {
    p.credentials_from = absl::StrCat("[profile ", p.name, "] in ", config->path);
  } else {
    for (const char* key : {"credential_process", "sso_session", "sso_start_url", "role_arn",
                            "web_identity_token_file"}) {
      if (!Get(in_config, key).empty() || !Get(in_credentials, key).empty()) {
        p.unsupported = key;
        break;
      }
    }
  }
  p.region = Get(in_config, "region");
  if (p.region.empty()) p.region = Get(in_credentials, "region");
  // endpoint_url: the profile's s3 sub-section, its services section's,
  // then its own.
  p.s3_endpoint_url = ParseNestedIni(Get(in_config, "s3"))["endpoint_url"];
  if (const std::string services = Get(in_config, "services");
      p.s3_endpoint_url.empty() && !services.empty()) {
    p.s3_endpoint_url = ParseNestedIni(
        Get(Find(config->ini, absl::StrCat("services ", services)), "s3"))["endpoint_url"];
  }
  if (p.s3_endpoint_url.empty()) p.s3_endpoint_url = Get(in_config, "endpoint_url");
  return p;
}

absl::StatusOr<BucketAccess> ResolveS3Access(const ObjectOptions& options, const Getenv& env) {
  auto profile = LoadAwsProfile(env);
  if (!profile.ok()) return profile.status();
  BucketAccess a;
  a.region = env("AWS_REGION");
  if (a.region.empty()) a.region = env("AWS_DEFAULT_REGION");
  if (a.region.empty()) a.region = profile->region;
  if (a.region.empty()) a.region = "us-east-1";
  std::string endpoint = env("AWS_ENDPOINT_URL_S3");
  if (endpoint.empty()) endpoint = env("AWS_ENDPOINT_URL");
  if (endpoint.empty()) endpoint = profile->s3_endpoint_url;
  if (!endpoint.empty()) a.endpoint = WithScheme(endpoint);

  if (options.no_sign_request || IsTrue(env("AWS_NO_SIGN_REQUEST"))) {
    a.signing = options.no_sign_request ? "anonymously (no_sign_request)"
                                        : "anonymously (AWS_NO_SIGN_REQUEST)";
    return a;
  }
  AwsCredentials c{env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"),
                   env("AWS_SESSION_TOKEN")};
  if (!c.access_key_id.empty() && !c.secret_access_key.empty()) {
    a.signing = "signed (AWS SigV4) with the keys of AWS_ACCESS_KEY_ID";
  } else if (!profile->credentials.access_key_id.empty()) {
    c = profile->credentials;
    a.signing = absl::StrCat("signed (AWS SigV4) with the keys of ", profile->credentials_from);
  } else if (!profile->unsupported.empty()) {
    return absl::UnimplementedError(absl::StrCat(
        "the AWS profile '", profile->name, "' gets its credentials through ", profile->unsupported,
        ", which tfrecordfs does not support: export them instead (e.g. eval \"$(aws configure "
        "export-credentials --profile ",
        profile->name, " --format env)\"), or use no_sign_request for a public bucket"));
  } else {
    a.signing = "anonymously (no credentials in the environment or the AWS files)";
    return a;
  }
  a.signer = std::make_shared<SigV4Signer>(std::move(c), a.region);
  return a;
}

}  // namespace tfrecordfs::objstore
