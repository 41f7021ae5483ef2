// Sparse checkpoint windows: which bytes of a checkpoint's 32 KiB window
// the deflate stream after it reads (as rapidgzip does for its index).
//
// Inflating from a checkpoint needs only the window bytes that back-
// references in the next kWindowSize bytes of output reach (no reference
// reaches further than 32 KiB back, and bytes copied out of the window are
// read again from the output, not from the window). With the other bytes set
// to zero, a window compresses several times better (about 1 KB instead of
// 7.4 KB for the bench's small records), so an index of the same size holds
// several times as many checkpoints, and a random read inflates that much
// less.
//
// Thread-safe (SparseWindow is a pure function; DataAfter reads).
#ifndef TFRECORDFS_SOURCE_WINDOW_USE_H_
#define TFRECORDFS_SOURCE_WINDOW_USE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/source/stored_bytes.h"

namespace tfrecordfs::source {

struct Checkpoint;  // source/checkpoints.h

// `window` (at most kWindowSize bytes, the output just before a deflate
// block boundary) with every byte that the raw deflate data in `in`, from
// bit `first_bit` of in[0] on (bits counted from the least significant),
// does not read within its first kWindowSize bytes of output (or before the
// end of its final block) set to zero. OutOfRange when `in` ends before
// that; InvalidArgument when the data is not valid deflate, or refers
// further back than the window. Either way the caller keeps the whole
// window.
absl::StatusOr<std::string> SparseWindow(absl::string_view window, absl::string_view in,
                                         int first_bit);

// The compressed bytes of `fd` (`path` in messages) from the first bit of
// the deflate data after `cp` on, up to `bytes` of them (fewer at the end
// of the file; the default is enough for SparseWindow: 32 KiB of output
// takes at most about 37 KiB of fixed-code or stored blocks), and in
// *first_bit the bit of the first byte the data starts at.
absl::StatusOr<std::string> DataAfter(StoredBytes fd, absl::string_view path, const Checkpoint& cp,
                                      int* first_bit, size_t bytes = 48 << 10);

}  // namespace tfrecordfs::source

#endif  // TFRECORDFS_SOURCE_WINDOW_USE_H_
