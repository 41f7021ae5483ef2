// Writing test shards with the project's own writer.
//
// Contract: WriteShard writes `payloads` as a plain (uncompressed) TFRecord
// shard at `path` (created or truncated, mode 0644) with record::ShardWriter
// and closes it without fsync; WriteCompressibleShard does the same with
// `codec` (zlib level 6) and payloads it makes itself. Any failure fails the
// current test with a fatal gtest failure (ASSERT_*): a caller that must
// stop on it checks ASSERT_NO_FATAL_FAILURE(WriteShard(...)) or
// HasFatalFailure().
//
// Thread-safety: reentrant.
#ifndef TFRECORDFS_TESTS_TESTING_SHARD_H_
#define TFRECORDFS_TESTS_TESTING_SHARD_H_

#include <cstddef>
#include <string>
#include <vector>

#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::test {

void WriteShard(const std::string& path, const std::vector<std::string>& payloads);

// `count` records of `size` bytes each: "record I " and then letters a-p
// from one fixed xorshift sequence, text that compresses about 2:1, so a
// GZIP or ZLIB shard of 3000 x 300 bytes has many 64 KiB checkpoints.
void WriteCompressibleShard(const std::string& path, source::Codec codec, int count, size_t size);

}  // namespace tfrecordfs::test

#endif  // TFRECORDFS_TESTS_TESTING_SHARD_H_
