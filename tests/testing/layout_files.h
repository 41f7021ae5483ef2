// Writing a record's layout (naming/naming.h) to disk as `cp -r` of its
// mounted folder would: what the staging tests and the staging fuzzer feed
// the store and the folder -> record parser.
//
// Contract: WriteLayout writes the subtree of entry `entry` of `layout` (0:
// the whole record) under `dir`, which must exist: a folder per folder
// entry, a file per file entry holding naming::FileContent of it (`payload`
// is the record the layout was made from). Files are written without fsync.
// Stops at the first failure and returns it (an ErrnoError naming the path).
//
// Thread-safety: reentrant.
#ifndef TFRECORDFS_TESTS_TESTING_LAYOUT_FILES_H_
#define TFRECORDFS_TESTS_TESTING_LAYOUT_FILES_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/naming/naming.h"

namespace tfrecordfs::test {

absl::Status WriteLayout(const naming::Layout& layout, uint32_t entry, const std::string& dir,
                         absl::string_view payload);

}  // namespace tfrecordfs::test

#endif  // TFRECORDFS_TESTS_TESTING_LAYOUT_FILES_H_
