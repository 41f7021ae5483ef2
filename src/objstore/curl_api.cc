#include "curl_api.h"

#include <dlfcn.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace tfrecordfs::objstore::internal {
namespace {

// The function `name` of `lib` as a pointer of `*fn`'s type, or false.
template <typename Fn>
bool Bind(void* lib, const char* name, Fn* fn, std::string* missing) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*fn == nullptr && missing->empty()) missing->assign(name);
  return *fn != nullptr;
}

absl::StatusOr<const CurlApi*> Load() {
  const auto fail = [](absl::string_view why) {
    return absl::FailedPreconditionError(
        absl::StrCat(kLibcurlSoname, " could not be loaded (", why,
                     "): buckets and web SOURCEs (s3://, gs://, http(s)://) need libcurl "
                     "(Debian and Ubuntu: apt install libcurl4); local shards do not"));
  };
  // RTLD_LOCAL: its symbols stay its own (nothing of ours binds to them by
  // name); RTLD_NOW: a broken library fails here, not in a request.
  void* lib = dlopen(kLibcurlSoname, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return fail(why != nullptr ? why : "dlopen failed");
  }
  static CurlApi api;
  CURLcode (*global_init)(long) = nullptr;
  std::string missing;
  Bind(lib, "curl_global_init", &global_init, &missing);
  Bind(lib, "curl_easy_init", &api.easy_init, &missing);
  Bind(lib, "curl_easy_cleanup", &api.easy_cleanup, &missing);
  Bind(lib, "curl_easy_reset", &api.easy_reset, &missing);
  Bind(lib, "curl_easy_setopt", &api.easy_setopt, &missing);
  Bind(lib, "curl_easy_perform", &api.easy_perform, &missing);
  Bind(lib, "curl_easy_getinfo", &api.easy_getinfo, &missing);
  Bind(lib, "curl_easy_strerror", &api.easy_strerror, &missing);
  Bind(lib, "curl_slist_append", &api.slist_append, &missing);
  Bind(lib, "curl_slist_free_all", &api.slist_free_all, &missing);
  if (!missing.empty()) {
    dlclose(lib);
    return fail(absl::StrCat("it has no function ", missing));
  }
  // OpenSSL's configuration and tables: at the first request, not at start.
  if (const CURLcode rc = global_init(CURL_GLOBAL_DEFAULT); rc != CURLE_OK) {
    return fail(absl::StrCat("curl_global_init failed: ", api.easy_strerror(rc)));
  }
  return &api;
}

}  // namespace

absl::StatusOr<const CurlApi*> LoadCurl() {
  // A function-local static: initialised once, by the first caller, while
  // any others wait (C++11 "magic statics").
  static const absl::StatusOr<const CurlApi*> loaded = Load();
  return loaded;
}

}  // namespace tfrecordfs::objstore::internal
