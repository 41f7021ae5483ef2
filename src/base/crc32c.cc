#include "tfrecordfs/base/crc32c.h"

#include <isa-l/crc.h>

namespace tfrecordfs::crc32c {

uint32_t Extend(uint32_t init_crc, const void* data, size_t n) {
  // ISA-L takes and returns the un-inverted register; CRC32C inverts on the
  // way in and out, so invert around the call to chain partial CRCs.
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t crc = ~init_crc;
  // crc32_iscsi takes an int length; feed huge buffers in pieces.
  while (n > 0) {
    const size_t chunk = n > (1u << 30) ? (1u << 30) : n;
    crc = crc32_iscsi(const_cast<unsigned char*>(p), static_cast<int>(chunk), crc);
    p += chunk;
    n -= chunk;
  }
  return ~crc;
}

}  // namespace tfrecordfs::crc32c
