#include "tfrecordfs/objstore/bearer.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tfrecordfs/base/file.h"

namespace tfrecordfs::objstore {
namespace {

// Access tokens are a few hundred bytes to a couple of KiB.
constexpr size_t kMaxTokenFile = 64 * 1024;

// A token goes into a header line: no control characters, no blanks.
bool UsableToken(absl::string_view token) {
  if (token.empty()) return false;
  for (char c : token) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return false;
  }
  return true;
}

}  // namespace

std::shared_ptr<const BearerTokenSigner> BearerTokenSigner::Fixed(std::string token) {
  return std::shared_ptr<const BearerTokenSigner>(
      new BearerTokenSigner(std::string(absl::StripAsciiWhitespace(token)), ""));
}

absl::StatusOr<std::shared_ptr<const BearerTokenSigner>> BearerTokenSigner::FromFile(
    std::string path) {
  std::shared_ptr<BearerTokenSigner> s(new BearerTokenSigner("", std::move(path)));
  {
    MutexLock lock(&s->mu_);
    if (absl::Status st = s->Refresh(); !st.ok()) return st;
  }
  return std::shared_ptr<const BearerTokenSigner>(std::move(s));
}

absl::StatusOr<std::shared_ptr<const BearerTokenSigner>> BearerTokenSigner::FromMetadataServer(
    std::string token_url, std::shared_ptr<const HttpClient> client) {
  std::shared_ptr<BearerTokenSigner> s(
      new BearerTokenSigner("", "", std::move(token_url), std::move(client)));
  {
    MutexLock lock(&s->mu_);
    if (absl::Status st = s->RefreshFromMetadata(); !st.ok()) return st;
  }
  return std::shared_ptr<const BearerTokenSigner>(std::move(s));
}

absl::Status BearerTokenSigner::RefreshFromMetadata() const {
  const auto now = std::chrono::steady_clock::now();
  if (!token_.empty() && now < refresh_at_) return absl::OkStatus();
  auto r = client_->Send("GET", metadata_url_, {"Metadata-Flavor: Google"}, nullptr, kMaxTokenFile,
                         "the metadata server's token");
  absl::Status failed;
  if (!r.ok()) {
    failed = r.status();
  } else if (r->status != 200) {
    failed = absl::UnavailableError(absl::StrCat(metadata_url_, ": HTTP ", r->status));
  } else {
    // No exceptions: a body that does not parse is a discarded value.
    const nlohmann::json j = nlohmann::json::parse(r->body, nullptr, /*allow_exceptions=*/false);
    const auto token = j.is_object() ? j.find("access_token") : j.end();
    const auto expires = j.is_object() ? j.find("expires_in") : j.end();
    if (token == j.end() || !token->is_string() || !UsableToken(token->get<std::string>()) ||
        expires == j.end() || !expires->is_number_integer() || expires->get<int64_t>() <= 0) {
      failed = absl::DataLossError(absl::StrCat(
          metadata_url_, ": not a token response (JSON with access_token and expires_in)"));
    } else {
      token_ = token->get<std::string>();
      // Half its life, at most 5 minutes before it ends.
      const int64_t life = expires->get<int64_t>();
      const int64_t wait_s = std::max<int64_t>(life / 2, life - 300);
      refresh_at_ = now + std::chrono::milliseconds(wait_s > 0 ? wait_s * 1000 : life * 500);
      expires_at_ = now + std::chrono::seconds(life);
      return absl::OkStatus();
    }
  }
  // A token that has not expired yet serves on (the next request asks
  // again); none: the request fails.
  return !token_.empty() && now < expires_at_ ? absl::OkStatus() : failed;
}

absl::Status BearerTokenSigner::Refresh() const {
  struct stat st;
  if (::stat(path_.c_str(), &st) != 0) {
    return ErrnoError(errno, absl::StrCat("the OAuth token file ", path_));
  }
  const FileStamp now{st.st_ino, st.st_size, st.st_mtim};
  if (now == stamp_ && !token_.empty()) return absl::OkStatus();
  auto fd = OpenFile(path_, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (!fd.ok()) return fd.status();
  std::string text(kMaxTokenFile + 1, '\0');
  auto got = PreadUpTo(fd->get(), text.data(), text.size(), 0, path_);
  if (!got.ok()) return got.status();
  if (*got > kMaxTokenFile) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the OAuth token file ", path_, " is larger than ", kMaxTokenFile, " bytes: not a token"));
  }
  text.resize(*got);
  const absl::string_view token = absl::StripAsciiWhitespace(text);
  if (!UsableToken(token)) {
    // Half-written by a refresh that truncates first: keep the old token
    // until the file is whole again (the next request stats it again).
    if (!token_.empty() && token.empty()) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("the OAuth token file ", path_,
                     token.empty() ? " is empty" : " does not hold one token (blanks inside)"));
  }
  token_ = std::string(token);
  stamp_ = now;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> BearerTokenSigner::Sign(absl::string_view,
                                                                 absl::string_view,
                                                                 absl::string_view) const {
  MutexLock lock(&mu_);
  if (!path_.empty()) {
    if (absl::Status s = Refresh(); !s.ok()) return s;
  } else if (!metadata_url_.empty()) {
    if (absl::Status s = RefreshFromMetadata(); !s.ok()) return s;
  } else if (!UsableToken(token_)) {
    return absl::FailedPreconditionError(
        "GOOGLE_OAUTH_ACCESS_TOKEN is empty or holds blanks: not a token");
  }
  return std::vector<std::string>{absl::StrCat("Authorization: Bearer ", token_)};
}

}  // namespace tfrecordfs::objstore
