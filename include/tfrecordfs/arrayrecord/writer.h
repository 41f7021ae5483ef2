// Writing ArrayRecord files as google/array_record's writer lays them out
// (arrayrecord/format.h): the signature, one simple chunk per `group_size`
// records compressed with `compression`, a footer chunk (the same
// compression) padded to a block boundary, and the postscript chunk padded
// to the end of its block. Transposed chunks are never written.
//
// Chunks are compressed on `WriterOptions::threads` threads (an
// OrderedPipeline: batches of chunks encoded in parallel, written in the
// order their records were added), so the bytes are the same whatever the
// thread count: those of one thread encoding one chunk after the other.
//
// Thread-compatible: one writer per thread (its own workers are its
// business: started at its first full batch, joined in Close or when it is
// destroyed).
#ifndef TFRECORDFS_ARRAYRECORD_WRITER_H_
#define TFRECORDFS_ARRAYRECORD_WRITER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/arrayrecord/file.h"
#include "tfrecordfs/arrayrecord/format.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/parallel.h"

namespace tfrecordfs::arrayrecord {

struct WriterOptions {
  uint64_t group_size = 65536;  // records per chunk (the reference's default)
  Compression compression = Compression::kZstd;
  int level = 3;  // zstd:3, the reference's default
  // A padding chunk after every data chunk, so that each begins a block
  // (the reference's pad_to_block_boundary:true).
  bool pad_to_block_boundary = false;
  // The options string the footer records; empty: OptionsString(*this).
  // A rewrite of a file keeps the string its footer had.
  std::string options_text;
  // Threads compressing chunks: 0, the machine's cores (DefaultThreads);
  // 1, on the caller's thread. Not part of the layout: the bytes written
  // do not depend on it. With N > 1, up to N + 1 batches of chunks (each
  // about 1 MiB of records, or one chunk when a chunk is larger) are held
  // at once instead of one chunk.
  int threads = 0;
};

// "none", "uncompressed", "brotli", "zstd", "snappy", each with an optional
// ":LEVEL" (brotli 0-11, zstd -131072..22; none and snappy take none), as
// the reference writer spells its options. InvalidArgument otherwise.
absl::Status ParseCompression(absl::string_view text, WriterOptions* options);
// The options as the reference writer records them in the footer
// ("group_size:1,transpose:false,pad_to_block_boundary:false,zstd:3,
// max_parallelism:1").
std::string OptionsString(const WriterOptions& options);
// The options a footer's string records (as the reference's
// Options::FromString reads them: comma-separated `key` or `key:value`;
// group_size, transpose, pad_to_block_boundary, uncompressed/brotli/zstd/
// snappy with their levels; max_parallelism, saturation_delay_ms,
// transpose_bucket_size and window_log are accepted and change nothing we
// write), with options_text set to `text`. Defaults as the reference's:
// group_size 65536, zstd:3. InvalidArgument for a key it does not know or
// a value out of range; FailedPrecondition for transpose:true (tfrecordfs
// writes simple chunks only).
absl::StatusOr<WriterOptions> ParseOptionsText(absl::string_view text);
// The options new files beside the ArrayRecord files `paths` are written
// with (staged records packed into a dataset of them): the options their
// footers record, when every file records the same ones (the string kept
// as it is); else reshard's defaults for ArrayRecord (group_size 1, zstd:3).
// A file whose footer does not read counts as different.
WriterOptions OptionsOfFiles(const std::vector<std::string>& paths);

class Writer {
 public:
  // `sink` appends bytes to the file, in order.
  using Sink = std::function<absl::Status(absl::string_view)>;
  Writer(Sink sink, WriterOptions options);
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  absl::Status Add(absl::string_view record);
  // Appends a simple chunk as it is stored elsewhere (`header` and `data`,
  // as ReadChunk gives them, hashes already checked): its header and data
  // bytes are written unchanged, block headers laid out for where it now
  // begins. Only at a chunk boundary (at_chunk_boundary(): no record added
  // since the last chunk was written); it counts its header's records.
  absl::Status AddChunk(const ChunkHeader& header, absl::string_view data);
  // True when no record waits for its chunk (the next Add starts one).
  bool at_chunk_boundary() const { return pending_.empty(); }
  // Writes the last chunk, the footer and the postscript. The file is
  // complete once this returns OK; nothing may be added after it.
  absl::Status Close();
  // Bytes handed to the sink so far (chunks still being compressed not
  // counted: final after Close).
  uint64_t pos() const { return pos_; }
  uint64_t records() const { return records_; }

 private:
  // Chunks encoded together by one worker (batches keep the per-item
  // hand-over small next to the compression of group_size 1's tiny chunks).
  struct Group {
    std::vector<std::string> records;
    uint64_t decoded = 0;
    absl::StatusOr<std::string> data;
    uint64_t hash = 0;  // of data
  };
  struct Batch {
    std::vector<Group> groups;
    size_t used = 0;  // groups[0, used) are this batch's (the rest kept for their capacity)
    uint64_t bytes = 0;
  };
  // Moves the records waiting for their chunk into the batch being
  // filled; hands the batch to the pipeline once it holds enough bytes.
  absl::Status Flush();
  // Hands the batch being filled over (encoded here when `inline_ok` and no
  // pipeline was started yet: a small file starts no threads).
  absl::Status SubmitBatch(bool inline_ok);
  // Writes every chunk submitted so far, in order.
  absl::Status Drain();
  // Writes the encoded chunks of the pipeline's oldest batch and pops it.
  absl::Status WriteFront();
  // Writes the encoded chunks of `batch` and empties it.
  absl::Status WriteBatch(Batch& batch);
  absl::Status WriteChunk(uint8_t type, uint64_t num_records, uint64_t decoded_data_size,
                          absl::string_view data);
  // `h` as given (its data_hash trusted: `data`'s).
  absl::Status WriteChunkAs(const ChunkHeader& h, absl::string_view data);
  // After a data chunk: the padding pad_to_block_boundary asks for.
  absl::Status AfterDataChunk();
  absl::Status PadToBlockBoundary();
  absl::Status Emit(absl::string_view bytes);
  // The simple chunk data for `records`.
  static absl::StatusOr<std::string> Encode(const std::vector<std::string>& records,
                                            Compression compression, int level);

  Sink sink_;
  WriterOptions options_;
  absl::Status status_;
  bool closed_ = false;
  uint64_t pos_ = 0;
  uint64_t records_ = 0;
  std::vector<std::string> pending_;
  std::vector<ChunkEntry> chunks_;
  static void EncodeBatch(Batch& batch, Compression compression, int level);
  Batch filling_;
  std::unique_ptr<OrderedPipeline<Batch>> pipeline_;
};

// An ArrayRecord file written to a descriptor, with the interface of the
// TFRecord shard writer (record/writer.h) that reshape's output files use:
// Append, Seal, Close, and the counts. bytes() counts what the records
// would take framed as TFRecord (16 bytes of framing each): the size the
// mount shows and --shard-size bounds. Writes go out in pieces of at least
// 1 MiB.
class FileWriter {
 public:
  FileWriter(UniqueFd fd, std::string path, WriterOptions options);
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  absl::Status Append(absl::string_view payload);
  // Writer::AddChunk: a stored simple chunk copied (at_chunk_boundary()).
  absl::Status AppendChunk(const ChunkHeader& header, absl::string_view data);
  bool at_chunk_boundary() const { return writer_.at_chunk_boundary(); }
  // Unimplemented: framed ranges are copied into TFRecord shards only.
  absl::Status AppendFramedRange(int fd, uint64_t offset, uint64_t length, uint64_t records);
  // Writes the footer and everything buffered: file_bytes() is final.
  absl::Status Seal();
  // Seals, fsyncs when `sync`, closes.
  absl::Status Close(bool sync);
  uint64_t bytes() const { return bytes_; }
  uint64_t records() const { return writer_.records(); }
  uint64_t file_bytes() const { return writer_.pos(); }

 private:
  absl::Status Out(absl::string_view b);
  UniqueFd fd_;
  std::string path_;
  std::string buf_;
  uint64_t bytes_ = 0;
  bool sealed_ = false;
  Writer writer_;
};

// The whole file for `records` (tests).
absl::StatusOr<std::string> WriteToString(const std::vector<std::string>& records,
                                          WriterOptions options);

}  // namespace tfrecordfs::arrayrecord

#endif  // TFRECORDFS_ARRAYRECORD_WRITER_H_
