// Reading TFRecord shards: header parsing, the header walk that builds an
// offset index, and checked reads of one record.
//
// Everything reads through a source::ShardSource (uncompressed coordinates),
// so plain and GZIP/ZLIB shards are walked and read alike; the overloads
// taking a descriptor are the same over a plain file.
//
// Thread-safety: all functions are reentrant (sources are thread-safe);
// StreamWalker is not synchronised.
#ifndef TFRECORDFS_RECORD_READER_H_
#define TFRECORDFS_RECORD_READER_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::record {

// Parses a 12-byte header. Returns the data length, or DataLossError when the
// length CRC does not match. Does not check the length against a file size.
absl::StatusOr<uint64_t> ParseHeader(const char* header12);

// True when `header12` is a header whose length CRC matches and whose record
// would end at or before `file_size` when it starts at `offset`.
bool IsPlausibleHeader(const char* header12, uint64_t offset, uint64_t file_size);

// One problem the walk met and stepped over or stopped at. `offset` is the
// byte offset in the shard where it was found.
struct WalkProblem {
  uint64_t offset = 0;
  std::string message;  // e.g. "length CRC mismatch", "truncated record"
};

// The most records one walk indexes (records per shard) unless told
// otherwise (-o max_shard_records, --max-shard-records). An index costs 8
// bytes per record (12 at worst while its vector grows), so this bounds what
// one shard may cost: 50,000,000 records are 400 MB of offsets. A shard of
// empty records compresses about 1000:1, so without a bound a 2 MB GZIP file
// could ask for gigabytes.
inline constexpr uint64_t kDefaultMaxRecords = 50'000'000;

// The error of a walk that met more records than `max_records`:
// ResourceExhausted "<path>: more than N records (record N at [uncompressed]
// byte offset X); not indexed, to bound memory (8 bytes per record): raise
// the limit with -o max_shard_records= or --max-shard-records". Tell it
// with IsTooManyRecords.
absl::Status TooManyRecords(absl::string_view path, uint64_t max_records, uint64_t offset,
                            bool uncompressed);
bool IsTooManyRecords(const absl::Status& status);

// The outcome of a header walk.
struct WalkResult {
  // Start offsets of the records found, in order, plus one final element:
  // the end offset of the last record (so the vector is never empty).
  // Record i spans [offsets[i], offsets[i+1]) unless the walk resynchronised
  // right after it, in which case its stated length does not match that span
  // and a checked read of it fails.
  std::vector<uint64_t> offsets;
  std::vector<WalkProblem> problems;  // empty for a clean shard
  uint64_t file_size = 0;
};

// Walks the record headers of `fd` from `start` (a record boundary) to
// `file_size`, without reading payloads (except for small records, where a
// 64 KiB read-ahead window is cheaper than one pread per header, and while
// resynchronising after damage).
//
// Damage handling: when the header at the expected position fails its length
// CRC or overruns the file, the walk scans forward from just after the
// previous record's header for the next plausible header and continues there
// (a record shortened by a few bytes, such as by a CRLF->LF conversion, thus
// costs only that record). When the header found lies at least 16 bytes past
// the expected position, the bytes in between are kept as one record (whose
// checked read fails), so that a damaged header costs only its own record and
// later records keep their indices. With nothing plausible left, the walk ends
// at the last good record; stray bytes at the end are reported. Only I/O
// errors are returned as a non-OK status.
//
// `block` > 0 reads the shard in sequential blocks of that many bytes
// whatever the record sizes (for remote storage, where each read is a round
// trip: one read per block instead of one per large record).
//
// A walk that finds more than `max_records` records stops there with
// TooManyRecords (records before `start` are not counted).
//
// `progress`, when set, is called with the walk's position (bytes walked
// from offset 0) each time it has moved on by kWalkProgressStep or more:
// a progress bar advances while a large shard is walked, not only when it
// is done. Called on the walking thread.
inline constexpr uint64_t kWalkProgressStep = uint64_t{4} << 20;
absl::StatusOr<WalkResult> WalkHeaders(
    const source::ShardSource& src, uint64_t start = 0, size_t block = 0,
    uint64_t max_records = kDefaultMaxRecords,
    const std::function<void(uint64_t walked)>& progress = nullptr);
// The same over the plain file `fd` of `file_size` bytes.
absl::StatusOr<WalkResult> WalkHeaders(source::StoredBytes fd, absl::string_view path,
                                       uint64_t file_size, uint64_t start = 0,
                                       uint64_t max_records = kDefaultMaxRecords);

// Walks headers as bytes stream past (the one pass that decompresses a
// GZIP/ZLIB shard to index it). Feed() the bytes in order; offsets are
// collected while every header is valid and fits. The first bad header, or
// a stream that ends inside a record, makes it give up (clean() false): the
// caller then walks the whole shard with WalkHeaders, which resynchronises.
// More than `max_records` records make Feed() return TooManyRecords (naming
// `path`); the caller stops feeding.
class StreamWalker {
 public:
  explicit StreamWalker(std::string path = "", uint64_t max_records = kDefaultMaxRecords)
      : path_(std::move(path)), max_records_(max_records) {}
  // OK unless the records exceed the limit; damage only makes clean() false.
  absl::Status Feed(absl::string_view bytes);
  // A hint: the stream will hold about `total` bytes. The offsets then grow
  // to the record count the bytes fed so far predict (a reservation of at
  // most `most_records`; more records still fit, by doubling), once, instead
  // of by doubling (on 1.2M small records, the reallocations' copies and
  // fresh pages were a fifth of a SNAPPY index build's walking thread).
  void ExpectBytes(uint64_t total, uint64_t most_records) {
    expected_bytes_ = total;
    most_records_ = std::min(most_records, max_records_);
  }
  // Ends the walk at `total` bytes; the result, if clean().
  bool Finish(uint64_t total);
  bool clean() const { return clean_; }
  uint64_t bytes_fed() const { return pos_; }
  WalkResult TakeResult() { return std::move(result_); }

 private:
  std::string path_;
  uint64_t max_records_;
  WalkResult result_;
  bool clean_ = true;
  uint64_t pos_ = 0;   // bytes fed so far
  uint64_t next_ = 0;  // where the next header starts
  char header_[12];
  size_t header_have_ = 0;       // bytes of the next header collected
  uint64_t expected_bytes_ = 0;  // ExpectBytes's hint; 0: none
  uint64_t most_records_ = 0;
};

// Reads record `index` whose framing spans [begin, end) in the shard (as
// given by a WalkResult) and verifies both CRCs and that the stated length
// fits. On success returns the data bytes. Errors are DataLossError (the
// message names the path, the record index and the byte offset) or I/O errors.
absl::StatusOr<std::string> ReadRecord(const source::ShardSource& src, uint64_t index,
                                       uint64_t begin, uint64_t end);
// Where ReadRecordInto puts a record: bytes the source holds in memory
// (ShardSource::Held: no copy), kept alive by `held`, or else `bytes`, a
// buffer the caller keeps from record to record, grown to the largest
// record read (never shrunk, so a reader of many records neither allocates
// nor zero-fills each one's bytes).
struct RecordBuffer {
  std::string bytes;
  std::shared_ptr<const void> held;
};
// ReadRecord into `*buf`: the data bytes as a view into the source's held
// bytes or buf->bytes, valid until `*buf` is used again or changes (reset
// buf->held once done: it keeps the source's memory). Same checks and
// errors.
absl::StatusOr<absl::string_view> ReadRecordInto(const source::ShardSource& src, uint64_t index,
                                                 uint64_t begin, uint64_t end, RecordBuffer* buf);
// ReadRecord into dst[0, end - begin), which the caller provides (e.g. a
// slot of an arena of many records): the whole framing is read there and the
// data bytes are returned as a view into it. Same checks and errors.
absl::StatusOr<absl::string_view> ReadRecordInto(const source::ShardSource& src, uint64_t index,
                                                 uint64_t begin, uint64_t end, char* dst);

// True for a ReadRecord error that says the header does not frame [begin,
// end) as the index claims (a length CRC mismatch, or a stated length other
// than the span): the index and the shard disagree there, unless the walk
// recorded damage at that record.
bool IsFramingMismatch(const absl::Status& status);
absl::StatusOr<std::string> ReadRecord(int fd, absl::string_view path, uint64_t index,
                                       uint64_t begin, uint64_t end);

// Reads a whole shard from memory (used by tests, `pack` verification and the
// fuzzers): calls `fn(index, data)` for each record. Fails on any damage.
absl::Status ForEachRecordInBuffer(absl::string_view shard,
                                   const std::function<void(uint64_t, absl::string_view)>& fn);

}  // namespace tfrecordfs::record

#endif  // TFRECORDFS_RECORD_READER_H_
