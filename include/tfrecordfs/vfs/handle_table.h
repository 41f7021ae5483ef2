// Handles (fuse_file_info::fh) of one kind of open state, as numbers the
// kernel stores and hands back: the table owns each state object from Add to
// Remove, and resolves only the numbers it issued and has not yet removed.
//
// A number is `tag` in the top 8 bits and a serial in the low 56 (never
// reused in a table's life: 2^56 opens), so a stale number (used after its
// RELEASE), a number of another table (a directory handle given to a file
// call) or a made-up one resolves to EBADF instead of to freed or foreign
// memory. 0 is "no handle" (the kernel opened the node itself) and resolves
// to nullptr.
//
// Cost: one mutex and one hash lookup per resolution. Only staging files and
// directories have handles (shard files are opened without one), so the
// read path of the shards never comes here.
//
// Thread-safety: all methods may be called concurrently. A pointer from Get
// stays valid until Remove of its number; the caller must not Remove a
// handle while another thread uses it (the kernel sends RELEASE only after
// every request on the handle has been answered).
#ifndef TFRECORDFS_VFS_HANDLE_TABLE_H_
#define TFRECORDFS_VFS_HANDLE_TABLE_H_

#include <cerrno>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/mutex.h"

namespace tfrecordfs::vfs {

template <typename T>
class HandleTable {
 public:
  // `tag` (1..255) tells this table's numbers from other tables'.
  explicit HandleTable(uint8_t tag) : tag_(uint64_t{tag} << kSerialBits) {}
  HandleTable(const HandleTable&) = delete;
  HandleTable& operator=(const HandleTable&) = delete;

  // Takes ownership of `state`; returns its number (never 0).
  uint64_t Add(std::unique_ptr<T> state) {
    MutexLock lock(&mu_);
    const uint64_t fh = tag_ | (++serial_ & kSerialMask);
    live_.emplace(fh, std::move(state));
    return fh;
  }

  // nullptr for 0; the state of a live number; else EBADF.
  absl::StatusOr<T*> Get(uint64_t fh) const {
    if (fh == 0) return nullptr;
    MutexLock lock(&mu_);
    auto it = live_.find(fh);
    if (it == live_.end()) return Unknown(fh);
    return it->second.get();
  }

  // Takes the state of a live number back out of the table (nullptr for 0);
  // else EBADF.
  absl::StatusOr<std::unique_ptr<T>> Remove(uint64_t fh) {
    if (fh == 0) return std::unique_ptr<T>();
    MutexLock lock(&mu_);
    auto node = live_.extract(fh);
    if (node.empty()) return Unknown(fh);
    return std::move(node.mapped());
  }

  // Whether `fh` is one of this table's numbers (live or not).
  bool Owns(uint64_t fh) const { return fh != 0 && (fh & ~kSerialMask) == tag_; }

  size_t size() const {
    MutexLock lock(&mu_);
    return live_.size();
  }

  // Calls `fn(const T&)` for each live state, under the table's lock (`fn`
  // must take no lock and call nothing that may).
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    MutexLock lock(&mu_);
    for (const auto& [fh, state] : live_) fn(*state);
  }

 private:
  static constexpr int kSerialBits = 56;
  static constexpr uint64_t kSerialMask = (uint64_t{1} << kSerialBits) - 1;

  absl::Status Unknown(uint64_t fh) const {
    return PosixError(EBADF, absl::StrCat("file handle ", fh, " is not open",
                                          (fh & ~kSerialMask) != tag_ ? " (another kind)" : ""));
  }

  const uint64_t tag_;
  mutable Mutex mu_;
  uint64_t serial_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, std::unique_ptr<T>> live_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_HANDLE_TABLE_H_
