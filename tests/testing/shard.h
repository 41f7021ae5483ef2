// Writing test shards with the project's own writer.
//
// Contract: WriteShard writes `payloads` as a plain (uncompressed) TFRecord
// shard at `path` (created or truncated, mode 0644) with record::ShardWriter
// and closes it without fsync. Any failure fails the current test with a
// fatal gtest failure (ASSERT_*): a caller that must stop on it checks
// ASSERT_NO_FATAL_FAILURE(WriteShard(...)) or HasFatalFailure().
//
// Thread-safety: reentrant.
#ifndef TFRECORDFS_TESTS_TESTING_SHARD_H_
#define TFRECORDFS_TESTS_TESTING_SHARD_H_

#include <string>
#include <vector>

namespace tfrecordfs::test {

void WriteShard(const std::string& path, const std::vector<std::string>& payloads);

}  // namespace tfrecordfs::test

#endif  // TFRECORDFS_TESTS_TESTING_SHARD_H_
