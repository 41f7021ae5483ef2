// FNV-1a, 64 bits: the one non-cryptographic hash of names and bytes that
// ends up in file names (index cache, class groupings, gallery names cut to
// fit) and in fingerprints (an object's ETag as a ctime). Those names are on
// disk, so the function must never change: the tests pin it to the published
// FNV-1a test vectors. Pure, thread-safe.
#ifndef TFRECORDFS_BASE_HASH_H_
#define TFRECORDFS_BASE_HASH_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace tfrecordfs {

inline constexpr uint64_t kFnv1a64Offset = 14695981039346656037ull;
inline constexpr uint64_t kFnv1a64Prime = 1099511628211ull;

// The FNV-1a hash of `bytes`, continuing from `h` (kFnv1a64Offset for a fresh
// hash; pass an earlier result to hash several pieces as one string).
constexpr uint64_t Fnv1a64(absl::string_view bytes, uint64_t h = kFnv1a64Offset) {
  for (char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= kFnv1a64Prime;
  }
  return h;
}

}  // namespace tfrecordfs

#endif  // TFRECORDFS_BASE_HASH_H_
