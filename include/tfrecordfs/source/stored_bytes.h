// StoredBytes: where a shard's stored bytes (compressed, for a compressed
// shard) are read from: a local file descriptor, or an object held elsewhere
// (an object in a bucket, a file on a web server: objstore/http.h).
//
// Every reader of stored bytes (the probe, the header walk, the inflater,
// the SNAPPY block reader, the index checks) takes a StoredBytes, so that an
// object goes through the same checkpoints, block tables and walks as a
// local file. A StoredBytes converts implicitly from a descriptor: code that
// reads a local file passes its fd as before.
//
// Thread-safety: StoredBytes is a borrowed handle (a descriptor or a
// pointer), copied freely; what it points to must outlive it. ObjectReader
// implementations are thread-safe.
#ifndef TFRECORDFS_SOURCE_STORED_BYTES_H_
#define TFRECORDFS_SOURCE_STORED_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tfrecordfs::source {

// The stored bytes of an object that is not a local file. Thread-safe.
class ObjectReader {
 public:
  virtual ~ObjectReader() = default;
  // Where the object is (a URL), for messages and as its identity.
  virtual const std::string& url() const = 0;
  // Its size when it was listed: no byte at or past it is ever requested.
  virtual uint64_t size() const = 0;
  // Reads up to n bytes at `offset`; fewer only at size(). Errors name the
  // URL and the byte offset: DataLoss when the object is no longer the one
  // listed (replaced behind the mount), Unavailable for a server or
  // network that keeps failing.
  virtual absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const = 0;

  // The object beside this one whose name is this one's plus `suffix`
  // (".tfri": its index, index/index_store.h), read whole. NotFound when
  // there is none; FailedPrecondition when it is larger than `max_bytes`.
  // Default: NotFound (a store without neighbours).
  virtual absl::StatusOr<std::string> ReadBeside(absl::string_view suffix,
                                                 uint64_t max_bytes) const;
  // Creates or replaces that object with `bytes`. Errors name its URL and,
  // for a store that refuses, the HTTP status. Default: Unimplemented.
  virtual absl::Status WriteBeside(absl::string_view suffix, absl::string_view bytes) const;
  // The object's ETag as listed (quotes included); "" when the store gave
  // none. A bucket mount's edits are committed conditionally on it
  // (repack/bucket_rewrite.h). Default: "".
  virtual const std::string& etag() const;
};

class StoredBytes {
 public:
  // NOLINTNEXTLINE(google-explicit-constructor): every fd-taking reader
  // takes an object the same way, and its local callers stay as they were.
  StoredBytes(int fd) : fd_(fd) {}
  // NOLINTNEXTLINE(google-explicit-constructor)
  StoredBytes(const ObjectReader* object) : object_(object) {}

  // The descriptor (-1 for an object).
  int fd() const { return fd_; }
  // The object (null for a descriptor).
  const ObjectReader* object() const { return object_; }

 private:
  int fd_ = -1;
  const ObjectReader* object_ = nullptr;
};

// As base/file.h's PreadUpTo / PreadFull, for either kind of stored bytes.
absl::StatusOr<size_t> PreadUpTo(StoredBytes in, void* buf, size_t n, uint64_t offset,
                                 absl::string_view path);
absl::Status PreadFull(StoredBytes in, void* buf, size_t n, uint64_t offset,
                       absl::string_view path);

}  // namespace tfrecordfs::source

#endif  // TFRECORDFS_SOURCE_STORED_BYTES_H_
