// The TFRecord framing. Every record in a shard is laid out as:
//
//   offset 0        8                  12              12+N                16+N
//   +---------------+------------------+---------------+-------------------+
//   | length N      | masked crc32c of | data          | masked crc32c of  |
//   | u64 LE        | the 8 length     | N bytes       | the N data bytes  |
//   |               | bytes, u32 LE    |               | u32 LE            |
//   +---------------+------------------+---------------+-------------------+
//
// Records follow each other with no padding; a shard has no file header or
// footer. Masking is crc32c::Mask (rotate right 15, add 0xa282ead8).
#ifndef TFRECORDFS_RECORD_FORMAT_H_
#define TFRECORDFS_RECORD_FORMAT_H_

#include <cstddef>
#include <cstdint>

namespace tfrecordfs::record {

inline constexpr size_t kLengthSize = 8;
inline constexpr size_t kLengthCrcSize = 4;
inline constexpr size_t kHeaderSize = kLengthSize + kLengthCrcSize;    // 12
inline constexpr size_t kFooterSize = 4;                               // data crc
inline constexpr size_t kFramingOverhead = kHeaderSize + kFooterSize;  // 16

}  // namespace tfrecordfs::record

#endif  // TFRECORDFS_RECORD_FORMAT_H_
