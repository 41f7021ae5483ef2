// Writing TFRecord framing, plain or compressed.
//
// Compressed output (GZIP or ZLIB, as tf.io.TFRecordWriter(path, "GZIP" |
// "ZLIB") writes it) is one stream: one GZIP member, or one ZLIB stream,
// which every TensorFlow version reads (TensorFlow reads no further than the
// end of a ZLIB stream). Every kFlushEvery bytes of framed input the writer
// ends the deflate block with a full flush (Z_FULL_FLUSH: byte-aligned, no
// back references across it), so a reader that indexes the shard finds a
// clean resume point at least that often and needs no stored window to start
// there; the cost is about 0.3 % of size. The blocks between full flushes
// need nothing from each other; they are deflated on every core at once, in
// pieces as pigz does (record/deflate.h: ParallelDeflater).
//
// Thread-safety: ShardWriter is not synchronised; use one per thread.
#ifndef TFRECORDFS_RECORD_WRITER_H_
#define TFRECORDFS_RECORD_WRITER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/record/deflate.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::record {

// Appends the framed record (header, data, footer) to *out.
void AppendFramed(std::string* out, absl::string_view data);

// Framed bytes between two full flushes of compressed output.
inline constexpr size_t kFlushEvery = size_t{1} << 20;
// Plain output is written out once this many framed bytes are buffered
// (cat's buffer size): a write() from a buffer the CPU's caches still hold.
// 1 MiB writes cost 2.8x the system time of 256 KiB ones on the benchmark
// machine (dd of the 2 GB image shards into one file: 4.3 s against 1.6 s),
// which made repair 0.3x the speed of `cat`.
inline constexpr size_t kPlainWriteEvery = size_t{128} << 10;
// Uncompressed bytes per SNAPPY block (TensorFlow's default snappy buffer).
inline constexpr size_t kSnappyBlockInput = size_t{256} << 10;

struct WriterOptions {
  // kNone: plain framing. kGzip / kZlib: one compressed stream. kSnappy:
  // TensorFlow's SNAPPY blocks (source/snappy_source.h), one per
  // kSnappyBlockInput bytes of framing.
  source::Codec codec = source::Codec::kNone;
  // zlib's level for compressed output (1 fastest .. 9 smallest; 6 is what
  // TensorFlow's writer uses by default).
  int level = 6;
  // GZIP / ZLIB: threads deflating blocks at once (record/deflate.h; 0: the
  // machine's cores, 1: the writer's thread only). The bytes are the same
  // whatever the count.
  int threads = 0;
};

// Streams framed records to a file descriptor through a buffer.
//
// Only Close() writes the last buffered records (and, compressed, the end
// of the stream): a writer destroyed without Close() closes the descriptor
// and drops them, so the file then holds a prefix of the records, possibly
// ending mid-record. Callers that must not leave such a file (the pack)
// write to a temporary name and rename after a successful Close().
class ShardWriter {
 public:
  // Takes ownership of `fd`; `path` is used in error messages only.
  ShardWriter(UniqueFd fd, std::string path, WriterOptions options = {});
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  absl::Status Append(absl::string_view data);
  // Plain output only: appends `length` bytes of `fd` at `offset`, which
  // hold `records` whole framed records, as they are (copy_file_range(2),
  // else read and write). The caller vouches for the framing; check the
  // file after Close (the rewrite does, repack/rewrite.h).
  absl::Status AppendFramedRange(int fd, uint64_t offset, uint64_t length, uint64_t records);
  // GZIP / ZLIB output only: appends `records` whole framed records,
  // `length` bytes whose CRC-32 / Adler-32 is `check`, as the deflate bytes
  // *deflated` (taken: left empty) that a run of another stream holds
  // (record/deflate_runs.h); the records buffered before them end a block
  // (full flush). The caller vouches for the bytes; check the file after
  // Close (the rewrite does, repack/rewrite.h).
  absl::Status AppendDeflated(std::string* deflated, uint64_t length, uint32_t check,
                              uint64_t records);
  // Plain output only: appends `framed`, `records` whole framed records the
  // caller read and checked, as they are: written from the caller's memory
  // in kPlainWriteEvery pieces, no copy into the buffer (what was buffered
  // is written first). The caller vouches for the framing.
  absl::Status AppendFramedBytes(absl::string_view framed, uint64_t records);
  // Framed bytes so far (uncompressed; buffered bytes count).
  uint64_t bytes() const { return bytes_; }
  uint64_t records() const { return records_; }
  // Bytes written to the file so far: == bytes() after Close for plain
  // output; for compressed output, the compressed size once closed.
  uint64_t file_bytes() const { return file_bytes_; }
  // CRC32C (unmasked) of the file's bytes so far, computed as they were
  // written; nullopt once a range was copied by copy_file_range (its bytes
  // never passed through here).
  std::optional<uint32_t> file_crc32c() const {
    return crc_complete_ ? std::optional<uint32_t>(file_crc_) : std::nullopt;
  }
  // Writes the buffered records out (and ends the compressed stream):
  // file_bytes() is then final. Only Close() may follow (Append after Seal
  // fails); Close() seals the file itself when Seal() was not called.
  absl::Status Seal();
  // Flushes the buffer (and ends the compressed stream) unless sealed; with
  // `sync`, fsyncs the file. Then closes it. Call once; Append after Close
  // fails.
  absl::Status Close(bool sync);

 private:
  // Writes the buffered framing out (compressed with `flush`: Z_FULL_FLUSH
  // or Z_FINISH).
  absl::Status Flush(int flush);
  absl::Status Write(const char* data, size_t n);

  UniqueFd fd_;
  std::string path_;
  WriterOptions options_;
  std::unique_ptr<ParallelDeflater> deflater_;  // GZIP / ZLIB only
  absl::Status status_;                         // the first error: later calls return it
  std::string buffer_;
  uint64_t bytes_ = 0;
  uint64_t records_ = 0;
  uint64_t file_bytes_ = 0;
  uint32_t file_crc_ = 0;
  bool crc_complete_ = true;
  bool sealed_ = false;  // Seal() or Close() called: nothing more is appended
  bool closed_ = false;
};

}  // namespace tfrecordfs::record

#endif  // TFRECORDFS_RECORD_WRITER_H_
