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
// LoadShardIndex opens `path`, stats it and loads its index through `store`
// the way a scan does (mount path: its base name), returning what
// IndexStore::Load returns; a shard that cannot be opened or stat'ed is an
// error naming it.
//
// Thread-safety: reentrant.
#ifndef TFRECORDFS_TESTS_TESTING_INDEX_FILES_H_
#define TFRECORDFS_TESTS_TESTING_INDEX_FILES_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "tfrecordfs/index/index_file.h"
#include "tfrecordfs/index/index_store.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::test {

void EditIndexFile(const std::string& path, absl::FunctionRef<void(index::IndexFile*)> edit);

// Moves the uncompressed offset of the middle checkpoint (of more than four)
// on by `shift` bytes, still short of the next one: with `shift` one
// record's framed size of a shard of equal-size records, the framing still
// checks out at the forged offset, but reads resumed there serve another
// record's bytes.
void ForgeMiddleCheckpoint(const std::string& path, uint64_t shift);

absl::StatusOr<std::shared_ptr<const index::ShardIndex>> LoadShardIndex(index::IndexStore& store,
                                                                        const std::string& path,
                                                                        source::Codec codec,
                                                                        index::LoadInfo* info);

}  // namespace tfrecordfs::test

#endif  // TFRECORDFS_TESTS_TESTING_INDEX_FILES_H_
