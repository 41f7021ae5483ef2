#include "tfrecordfs/record/writer.h"

#include <snappy.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/record/deflate.h"
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

ShardWriter::ShardWriter(UniqueFd fd, std::string path, WriterOptions options)
    : fd_(std::move(fd)), path_(std::move(path)), options_(options) {
  if (options_.codec == source::Codec::kNone || options_.codec == source::Codec::kSnappy) return;
  deflater_ = std::make_unique<ParallelDeflater>(
      options_.codec, options_.level, options_.threads, path_,
      [this](absl::string_view bytes) { return Write(bytes.data(), bytes.size()); });
}

ShardWriter::~ShardWriter() = default;

absl::Status ShardWriter::Append(absl::string_view data) {
  if (!status_.ok()) return status_;
  if (sealed_) return absl::FailedPreconditionError(absl::StrCat(path_, ": append after close"));
  AppendFramed(&buffer_, data);
  bytes_ += data.size() + kFramingOverhead;
  ++records_;
  const size_t every = options_.codec == source::Codec::kNone ? kPlainWriteEvery : kFlushEvery;
  if (buffer_.size() >= every) return Flush(Z_FULL_FLUSH);
  return absl::OkStatus();
}

absl::Status ShardWriter::AppendFramedRange(int fd, uint64_t offset, uint64_t length,
                                            uint64_t records) {
  if (!status_.ok()) return status_;
  if (sealed_) return absl::FailedPreconditionError(absl::StrCat(path_, ": append after close"));
  if (options_.codec != source::Codec::kNone) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": framed ranges are copied into plain output only"));
  }
  if (status_ = Flush(Z_NO_FLUSH); !status_.ok()) return status_;
  // copy_file_range(2): no copy through user space (on file systems with
  // reflinks, ranges are cloned); pread/write where the kernel refuses it
  // (another file system on old kernels, special files).
  loff_t in = static_cast<loff_t>(offset);
  uint64_t left = length;
  bool fallback = false;
  while (left > 0 && !fallback) {
    const ssize_t n = ::copy_file_range(fd, &in, fd_.get(), nullptr, left, 0);
    if (n > 0) {
      left -= static_cast<uint64_t>(n);
      file_bytes_ += static_cast<uint64_t>(n);
      crc_complete_ = false;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 &&
               (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
      fallback = true;
    } else {
      status_ = n == 0 ? absl::DataLossError(absl::StrCat(path_, ": source ended at byte ", in))
                       : ErrnoError(errno, absl::StrCat(path_, ": copy_file_range"));
      return status_;
    }
  }
  std::string chunk;
  while (left > 0) {
    chunk.resize(std::min<uint64_t>(left, uint64_t{1} << 20));
    auto got = PreadUpTo(fd, chunk.data(), chunk.size(), static_cast<uint64_t>(in), path_);
    if (!got.ok()) return status_ = got.status();
    if (*got == 0) {
      return status_ = absl::DataLossError(absl::StrCat(path_, ": source ended at byte ", in));
    }
    if (status_ = Write(chunk.data(), *got); !status_.ok()) return status_;
    in += static_cast<loff_t>(*got);
    left -= *got;
  }
  bytes_ += length;
  records_ += records;
  return absl::OkStatus();
}

absl::Status ShardWriter::AppendDeflated(std::string* deflated, uint64_t length, uint32_t check,
                                         uint64_t records) {
  if (!status_.ok()) return status_;
  if (sealed_) return absl::FailedPreconditionError(absl::StrCat(path_, ": append after close"));
  if (!deflater_) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": deflate bytes are copied into GZIP or ZLIB output only"));
  }
  if (!buffer_.empty()) {
    if (status_ = Flush(Z_FULL_FLUSH); !status_.ok()) return status_;
  }
  status_ = deflater_->AddDeflated(deflated, length, check);
  if (!status_.ok()) {
    status_ =
        SetMessage(status_, absl::StrCat(status_.message(), " after ", records_, " record(s)"));
    return status_;
  }
  bytes_ += length;
  records_ += records;
  return absl::OkStatus();
}

absl::Status ShardWriter::AppendFramedBytes(absl::string_view framed, uint64_t records) {
  if (!status_.ok()) return status_;
  if (sealed_) return absl::FailedPreconditionError(absl::StrCat(path_, ": append after close"));
  if (options_.codec != source::Codec::kNone) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": framed bytes are written into plain output only"));
  }
  if (status_ = Flush(Z_NO_FLUSH); !status_.ok()) return status_;
  for (size_t at = 0; at < framed.size(); at += kPlainWriteEvery) {
    const size_t n = std::min(kPlainWriteEvery, framed.size() - at);
    if (status_ = Write(framed.data() + at, n); !status_.ok()) return status_;
  }
  bytes_ += framed.size();
  records_ += records;
  return absl::OkStatus();
}

absl::Status ShardWriter::Write(const char* data, size_t n) {
  absl::Status s = WriteFull(fd_.get(), data, n, path_);
  if (s.ok()) {
    file_bytes_ += n;
    file_crc_ = crc32c::Extend(file_crc_, data, n);
  }
  return s;
}

absl::Status ShardWriter::Flush(int flush) {
  if (!status_.ok()) return status_;
  if (options_.codec == source::Codec::kSnappy) {
    // TensorFlow's framing (source/snappy_source.h): each block a big-endian
    // length, then the raw Snappy block of at most kSnappyBlockInput bytes.
    std::string block;
    for (size_t at = 0; at < buffer_.size() && status_.ok(); at += kSnappyBlockInput) {
      const size_t n = std::min(kSnappyBlockInput, buffer_.size() - at);
      snappy::Compress(buffer_.data() + at, n, &block);
      const uint32_t len = static_cast<uint32_t>(block.size());
      const char prefix[4] = {static_cast<char>(len >> 24), static_cast<char>(len >> 16),
                              static_cast<char>(len >> 8), static_cast<char>(len)};
      status_ = Write(prefix, sizeof prefix);
      if (status_.ok()) status_ = Write(block.data(), block.size());
    }
    buffer_.clear();
    return status_;
  }
  if (!deflater_) {
    status_ = Write(buffer_.data(), buffer_.size());
    buffer_.clear();
    return status_;
  }
  // Each block ends with a full flush (record/deflate.h); the buffer
  // handed over comes back empty.
  status_ = deflater_->AddBlock(&buffer_);
  if (status_.ok() && flush == Z_FINISH) status_ = deflater_->Finish();
  if (!status_.ok()) {
    status_ =
        SetMessage(status_, absl::StrCat(status_.message(), " after ", records_, " record(s)"));
  }
  return status_;
}

absl::Status ShardWriter::Seal() {
  if (sealed_) return absl::FailedPreconditionError(absl::StrCat(path_, ": sealed twice"));
  sealed_ = true;
  return Flush(Z_FINISH);
}

absl::Status ShardWriter::Close(bool sync) {
  if (closed_) return absl::FailedPreconditionError(absl::StrCat(path_, ": closed twice"));
  closed_ = true;
  absl::Status s = sealed_ ? status_ : Flush(Z_FINISH);
  sealed_ = true;
  if (s.ok() && sync && ::fsync(fd_.get()) != 0) {
    s = ErrnoError(errno, absl::StrCat("fsync ", path_));
  }
  absl::Status c = fd_.Close();
  return s.ok() ? c : s;
}

}  // namespace tfrecordfs::record
