// CRC32C (Castagnoli) and the TFRecord mask.
//
// Contract: pure functions over byte spans; thread-safe. Backed by ISA-L's
// crc32_iscsi, which computes the reflected CRC32C without the final xor:
//   crc32c(x) = ~crc32_iscsi(x, n, 0xffffffff).
#ifndef TFRECORDFS_BASE_CRC32C_H_
#define TFRECORDFS_BASE_CRC32C_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace tfrecordfs::crc32c {

// Returns crc32c(concat(A, data[0, n))) where init_crc == crc32c(A).
// Extend(0, data, n) is the CRC of data alone.
uint32_t Extend(uint32_t init_crc, const void* data, size_t n);

inline uint32_t Value(const void* data, size_t n) { return Extend(0, data, n); }
inline uint32_t Value(absl::string_view s) { return Value(s.data(), s.size()); }

inline constexpr uint32_t kMaskDelta = 0xa282ead8u;

// TFRecord stores masked CRCs: a CRC of a string that itself holds CRCs is
// badly distributed, so the stored value is rotated and offset.
constexpr uint32_t Mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }

constexpr uint32_t Unmask(uint32_t masked) {
  uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

}  // namespace tfrecordfs::crc32c

#endif  // TFRECORDFS_BASE_CRC32C_H_
