// libcurl, loaded at the first request (dlopen of "libcurl.so.4"), not linked.
// Private to src/objstore/ (http.cc is its one user).
//
// Why: a command over local files never sends a request, yet a binary that
// names libcurl among its NEEDED libraries maps libcurl and the ~29 libraries
// it needs (OpenSSL, GnuTLS' friends, Kerberos, LDAP...) and resolves their
// symbols at every start: about 3 ms of a `--part K/N` process's 6 ms
// (docs/bench.md, issue 37's parts). Loaded here, only a bucket or web
// SOURCE pays for them, once per process.
//
// Contract: LoadCurl() loads the library and runs curl_global_init once per
// process (thread-safe; later calls return the same table or the same error).
// When the library is missing or lacks a function, every call returns
// FailedPrecondition naming libcurl.so.4, what the loader said, and the
// Debian package that holds it; nothing is retried. The table's pointers are
// valid until the process exits (the library is never closed).
#ifndef TFRECORDFS_SRC_OBJSTORE_CURL_API_H_
#define TFRECORDFS_SRC_OBJSTORE_CURL_API_H_

// Types and constants only: the functions are called through CurlApi.
#include <curl/curl.h>

#include "absl/status/statusor.h"

namespace tfrecordfs::objstore::internal {

// The soname loaded (libcurl's ABI 4, every libcurl 7.x and 8.x).
inline constexpr char kLibcurlSoname[] = "libcurl.so.4";

// libcurl's functions that http.cc calls, with libcurl's signatures.
struct CurlApi {
  CURL* (*easy_init)();
  void (*easy_cleanup)(CURL*);
  void (*easy_reset)(CURL*);
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...);
  CURLcode (*easy_perform)(CURL*);
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...);
  const char* (*easy_strerror)(CURLcode);
  curl_slist* (*slist_append)(curl_slist*, const char*);
  void (*slist_free_all)(curl_slist*);
};

// The loaded and started library (see the contract above).
absl::StatusOr<const CurlApi*> LoadCurl();

}  // namespace tfrecordfs::objstore::internal

#endif  // TFRECORDFS_SRC_OBJSTORE_CURL_API_H_
