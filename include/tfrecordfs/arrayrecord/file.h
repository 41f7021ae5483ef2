// An ArrayRecord file as the rest of tfrecordfs sees it: the records of its
// chunks, framed as a TFRecord stream.
//
// Finding the chunks (ReadLayout): the postscript in the last 64 KiB names
// the footer chunk, whose entries give every data chunk's offset, record
// count and decoded size. The footer is checked before it is believed:
// version 1, the postscript's magic, offsets strictly increasing, past the
// signature and before the footer, counts adding up. A riegeli file without
// a readable footer (a plain riegeli/records file, or a damaged footer) is
// walked instead from its signature, chunk header to chunk header; a chunk
// header that is damaged is skipped by the block headers after it (riegeli's
// recovery), and the walk says so.
//
// The record view: the file's records in order, each framed as TFRecord
// framing (length, masked CRC32C of the length, bytes, masked CRC32C of the
// bytes), so that the header walk, the index, the record reads and the
// toolbox treat an ArrayRecord file as a shard whose codec is kArrayRecord.
// The CRCs are computed here, from bytes the chunk's HighwayHash vouched
// for: the riegeli hashes are what guards the file. The stream's
// CheckpointTable (codec kArrayRecord) has a first point {0, 0} for the
// stream start, then one point per chunk with records: `in` the chunk's file
// offset, `out` the framed offset of its first record. Every point is a
// stream start (no window).
//
// Damage: a data chunk that does not read back (hash mismatch, bad block
// header, sizes that do not add up) when the file is scanned becomes, in the
// framed stream, as many empty records as the footer says it holds, and a
// problem naming its byte offset; reading those records later fails
// (ArrayRecordSource decodes the chunk again and gives DataLoss), so they
// read as EIO while every other chunk reads. A transposed data chunk makes
// the whole file unreadable here (Unimplemented, naming the file and why).
//
// Thread-safety: the functions keep no state; ArrayRecordSource is safe to
// use from any number of threads.
#ifndef TFRECORDFS_ARRAYRECORD_FILE_H_
#define TFRECORDFS_ARRAYRECORD_FILE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/arrayrecord/chunk.h"
#include "tfrecordfs/source/block_source.h"
#include "tfrecordfs/source/checkpoints.h"

namespace tfrecordfs::arrayrecord {

struct ChunkEntry {
  uint64_t offset = 0;
  uint64_t num_records = 0;
  uint64_t decoded_data_size = 0;
};

// Something wrong found at file byte offset `offset`.
struct Problem {
  uint64_t offset = 0;
  std::string message;
};

struct Layout {
  std::vector<ChunkEntry> chunks;  // data chunks, by offset
  uint64_t num_records = 0;
  bool from_footer = false;       // else walked from the signature
  std::string writer_options;     // the footer's, when there is one
  std::vector<Problem> problems;  // the walk's skips, an unreadable footer
};

// The footer chunk's records, parsed and checked against a file of
// `file_size` bytes whose footer chunk begins at `footer_offset`. Pure: the
// fuzzed footer parser.
absl::StatusOr<Layout> ParseFooter(const Records& footer, uint64_t footer_offset,
                                   absl::string_view path);
// The postscript chunk's records: the footer offset. Pure.
absl::StatusOr<uint64_t> ParsePostscript(const Records& postscript, uint64_t file_size,
                                         absl::string_view path);

// Where the data chunks of the riegeli file `in` are (see above).
// InvalidArgument when it does not start with the riegeli signature.
absl::StatusOr<Layout> ReadLayout(source::StoredBytes in, absl::string_view path,
                                  uint64_t file_size);

// Appends `record` in TFRecord framing.
void AppendFramed(std::string* out, absl::string_view record);
// The framed bytes of a chunk's records.
std::string Frame(const Records& records);

struct ScanResult {
  source::CheckpointTable table;
  std::vector<Problem> problems;  // file offsets, messages naming them
  Layout layout;
};

// Reads the layout, then every data chunk in order, handing the framed
// bytes to `sink` (`progress` gets file bytes consumed). Errors: I/O, the
// sink's, a file that is no riegeli file, a transposed chunk
// (Unimplemented), and layouts beyond the limits. `layout`, when given, is
// ReadLayout's of the same file (read elsewhere: a caller that reads the
// chunks through a sequential prefetcher reads the footer at the end of the
// file directly, so the prefetcher sees only reads front to back).
absl::StatusOr<ScanResult> Scan(source::StoredBytes in, absl::string_view path, uint64_t file_size,
                                const source::StreamSink& sink,
                                const std::function<void(uint64_t)>& progress = nullptr,
                                std::optional<Layout> layout = std::nullopt);

// Every record of the file, in order (tests and small tools). Any damaged
// chunk is an error.
absl::StatusOr<std::vector<std::string>> ReadAllRecords(source::StoredBytes in,
                                                        absl::string_view path, uint64_t file_size);

// The framed stream of an ArrayRecord file: serves a read by decoding the
// one chunk that holds it (cached in the mount's BlockCache).
class ArrayRecordSource final : public source::BlockSource {
 public:
  ArrayRecordSource(source::ShardFile file, uint64_t file_size,
                    std::shared_ptr<const source::CheckpointTable> table, source::BlockCache* cache)
      : BlockSource(std::move(file), file_size, std::move(table), cache) {}
  source::Codec codec() const override { return source::Codec::kArrayRecord; }

 private:
  absl::StatusOr<std::shared_ptr<const std::string>> BlockAt(uint64_t offset,
                                                             uint64_t* start) const override;
};

}  // namespace tfrecordfs::arrayrecord

#endif  // TFRECORDFS_ARRAYRECORD_FILE_H_
