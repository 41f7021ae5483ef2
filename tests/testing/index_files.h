// Editing saved shard indexes (.tfri, tfrecordfs/index/index_file.h) the way
// an attacker or a damaged disk would, with every CRC still holding.
//
// Contract: EditIndexFile decodes the index file at `path`, lets `edit`
// change it, and writes it back (truncated, mode kept) encoded by the
// project's own writer, windows blob included, so that the file decodes and
// only what `edit` changed is wrong. A file that does not decode, or a
// forge without enough checkpoints, fails the current test with a fatal
// gtest failure (ASSERT_*): check HasFatalFailure() where that matters.
//
// Thread-safety: reentrant.
#ifndef TFRECORDFS_TESTS_TESTING_INDEX_FILES_H_
#define TFRECORDFS_TESTS_TESTING_INDEX_FILES_H_

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "tfrecordfs/index/index_file.h"

namespace tfrecordfs::test {

void EditIndexFile(const std::string& path, absl::FunctionRef<void(index::IndexFile*)> edit);

// Moves the uncompressed offset of the middle checkpoint (of more than four)
// on by `shift` bytes, still short of the next one: with `shift` one
// record's framed size of a shard of equal-size records, the framing still
// checks out at the forged offset, but reads resumed there serve another
// record's bytes.
void ForgeMiddleCheckpoint(const std::string& path, uint64_t shift);

}  // namespace tfrecordfs::test

#endif  // TFRECORDFS_TESTS_TESTING_INDEX_FILES_H_
