// How an index stores a checkpoint's window: raw deflate by ISA-L at its
// level 1, in one call (on the mostly-zero sparse windows about 2.5x as fast
// as zlib's level 1, and a few percent smaller). The scan (source/
// scan_output.h) and the commit's writer (record/deflate.h) store their
// windows this way; Windows (source/checkpoints.h) inflates them back.
//
// Not thread-safe: one per thread (it keeps ISA-L's state and its output
// buffer from call to call).
#ifndef TFRECORDFS_SOURCE_WINDOW_DEFLATER_H_
#define TFRECORDFS_SOURCE_WINDOW_DEFLATER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct isal_zstream;  // ISA-L's (isa-l/igzip_lib.h)

namespace tfrecordfs::source {

class WindowDeflater {
 public:
  WindowDeflater();
  ~WindowDeflater();
  WindowDeflater(const WindowDeflater&) = delete;
  WindowDeflater& operator=(const WindowDeflater&) = delete;

  // `window` (at most kWindowSize bytes) as raw deflate data, in a buffer
  // of this deflater's that the next call overwrites. Internal when ISA-L
  // fails (it does not on a window of at most kWindowSize bytes).
  absl::StatusOr<absl::string_view> Deflate(absl::string_view window);

 private:
  std::unique_ptr<isal_zstream> z_;
  std::string level_buf_;
  std::string out_;
};

}  // namespace tfrecordfs::source

#endif  // TFRECORDFS_SOURCE_WINDOW_DEFLATER_H_
