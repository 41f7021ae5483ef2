// Writing TFRecord framing.
//
// Thread-safety: ShardWriter is not synchronised; use one per thread.
#ifndef TFRECORDFS_RECORD_WRITER_H_
#define TFRECORDFS_RECORD_WRITER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/file.h"

namespace tfrecordfs::record {

// Appends the framed record (header, data, footer) to *out.
void AppendFramed(std::string* out, absl::string_view data);

// Streams framed records to a file descriptor through a buffer.
class ShardWriter {
 public:
  // Takes ownership of `fd`; `path` is used in error messages only.
  ShardWriter(UniqueFd fd, std::string path);
  ~ShardWriter() = default;

  absl::Status Append(absl::string_view data);
  // Bytes written so far, framing included (buffered bytes count).
  uint64_t bytes() const { return bytes_; }
  uint64_t records() const { return records_; }
  // Flushes the buffer; with `sync`, fsyncs the file. Then closes it.
  absl::Status Close(bool sync);

 private:
  absl::Status Flush();

  UniqueFd fd_;
  std::string path_;
  std::string buffer_;
  uint64_t bytes_ = 0;
  uint64_t records_ = 0;
};

}  // namespace tfrecordfs::record

#endif  // TFRECORDFS_RECORD_WRITER_H_
