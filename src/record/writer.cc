#include "tfrecordfs/record/writer.h"

#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/record/format.h"

namespace tfrecordfs::record {

void AppendFramed(std::string* out, absl::string_view data) {
  char header[kHeaderSize];
  EncodeFixed64(header, data.size());
  EncodeFixed32(header + kLengthSize, crc32c::Mask(crc32c::Value(header, kLengthSize)));
  out->append(header, kHeaderSize);
  out->append(data.data(), data.size());
  PutFixed32(out, crc32c::Mask(crc32c::Value(data)));
}

ShardWriter::ShardWriter(UniqueFd fd, std::string path)
    : fd_(std::move(fd)), path_(std::move(path)) {}

absl::Status ShardWriter::Append(absl::string_view data) {
  AppendFramed(&buffer_, data);
  bytes_ += data.size() + kFramingOverhead;
  ++records_;
  if (buffer_.size() >= (1u << 20)) return Flush();
  return absl::OkStatus();
}

absl::Status ShardWriter::Flush() {
  absl::Status s = WriteFull(fd_.get(), buffer_.data(), buffer_.size(), path_);
  buffer_.clear();
  return s;
}

absl::Status ShardWriter::Close(bool sync) {
  absl::Status s = Flush();
  if (s.ok() && sync && ::fsync(fd_.get()) != 0) {
    s = ErrnoError(errno, absl::StrCat("fsync ", path_));
  }
  absl::Status c = fd_.Close();
  return s.ok() ? c : s;
}

}  // namespace tfrecordfs::record
