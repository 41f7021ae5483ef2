// Checkpoints: random access into GZIP and ZLIB shards (zran-style).
//
// One pass over a compressed shard (ScanCompressed) inflates it from start
// to end, hands every decompressed byte to a sink (the header walk runs on
// them, so a shard is decompressed once to index it) and records
// checkpoints at deflate block boundaries: the compressed bit offset of the
// boundary, the uncompressed offset there, and the 32 KiB of output before
// it (the window a raw inflate needs to resume). One is laid at the first
// boundary after span / kDenseSpans compressed or uncompressed bytes since
// the previous one, whichever comes first, as long as the checkpoints and
// their stored windows so far stay within kCheckpointBudget (3.5 %) of the
// compressed bytes read, and always at the first boundary after a span.
// Bounding the uncompressed side keeps the work of a random read
// (inflating from the checkpoint before it) at about half a span of output
// however well the data compresses. A window is stored sparse
// (source/window_use.h): only the bytes the next 32 KiB of output refer
// back to are kept, the others zero, which compresses several times better
// than the whole window, so the budget pays for several times as many
// checkpoints; the scan checks each sparse window by inflating from its
// checkpoint with it (and keeps the whole window when that does not give
// the stream's bytes). The windows (and the sink) are handled beside the
// inflate, on a thread of their own (source/scan_output.h); the budget
// counts the windows of the last MiB or so of output at the mean size of
// those before, so that where checkpoints go depends on the stream alone.
// Windows are stored deflate-compressed, apart from
// the checkpoint table, so that an index can keep them on disk and load one
// only when a read needs it.
// The start of every GZIP member (and of the ZLIB stream) is a checkpoint
// that needs no window.
//
// Damage: a stream that is truncated, has a corrupt deflate block, a bad
// GZIP trailer, or garbage after its last member, ends where it stops
// inflating cleanly; ScanResult::problem says where (compressed byte offset)
// and why (zlib's message). Bytes produced before the damage are served as
// they came out; the record CRCs above this layer judge them.
//
// Pure functions and immutable tables; Windows are thread-safe.
#ifndef TFRECORDFS_SOURCE_CHECKPOINTS_H_
#define TFRECORDFS_SOURCE_CHECKPOINTS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/source/inflater.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::source {

inline constexpr size_t kWindowSize = 32768;  // deflate's history
// Index files whose windows are kept open for reads, in the whole process
// (Windows::InFile).
inline constexpr size_t kOpenWindowFiles = 32;
// The most bytes between checkpoints, compressed or uncompressed (see
// ScanCompressed).
inline constexpr uint64_t kDefaultSpan = 1 << 20;
// Checkpoints lie as close as span / kDenseSpans while the index stays
// within kCheckpointBudget of the compressed bytes (ScanCompressed).
inline constexpr uint64_t kDenseSpans = 8;
inline constexpr double kCheckpointBudget = 0.035;
// A checkpoint's entry in an index file (index/index_file.h), for the budget.
inline constexpr uint64_t kCheckpointEntryBytes = 40;
// Whether a checkpoint is due `in` compressed and `out` uncompressed bytes
// after the previous one (at the next block boundary, ScanCompressed).
constexpr bool CheckpointDue(uint64_t in, uint64_t out, uint64_t span) {
  return in >= span || out >= span;
}
// Whether one may be laid there, budget permitting.
constexpr bool CheckpointAllowed(uint64_t in, uint64_t out, uint64_t span) {
  return CheckpointDue(in, out, span / kDenseSpans > 0 ? span / kDenseSpans : 1);
}

// Where inflating can resume.
struct Checkpoint {
  uint64_t in = 0;   // compressed offset of the first byte not wholly consumed
  uint64_t out = 0;  // uncompressed offset
  // Bits of byte in - 1 still to be read (0-7), as zlib's data_type & 7
  // gives them at a block boundary; 0 when the boundary is byte-aligned.
  uint8_t bits = 0;
  // A GZIP member or the ZLIB stream starts at `in` (header included): no
  // window, bits 0.
  bool stream_start = false;
  // The compressed window in the windows blob (length 0 for stream starts),
  // and the crc32c of those compressed bytes (checked when loaded).
  uint64_t window_offset = 0;
  uint32_t window_length = 0;
  uint32_t window_crc = 0;
};

// Where the compressed windows live: in memory (a fresh scan whose index was
// not saved) or in an index file (loaded on demand: one pread per window
// from the file opened at the first load and kept open in a process-wide
// cache of kOpenWindowFiles descriptors, reopened and checked again when it
// was dropped; VerifyCheckpoints reads the windows it checks in runs, one
// pread per run).
class Windows {
 public:
  virtual ~Windows() = default;
  // The uncompressed window of `cp` (at most kWindowSize bytes; fewer near
  // the start of the stream). DataLoss when the stored bytes do not match
  // their crc or do not inflate.
  absl::StatusOr<std::string> Load(const Checkpoint& cp) const;
  // The same from `stored`, the window's stored bytes (cp.window_length of
  // them) read earlier with Stored().
  static absl::StatusOr<std::string> Decode(const Checkpoint& cp, absl::string_view stored);
  // `length` stored bytes from `offset` of the blob (windows of several
  // checkpoints at once). DataLoss past the blob's end.
  absl::StatusOr<std::string> Stored(uint64_t offset, uint64_t length) const {
    return Raw(offset, length);
  }
  // Bytes of the blob.
  virtual uint64_t size() const = 0;
  static std::shared_ptr<const Windows> InMemory(std::string blob);
  // `base` is the offset of the blob in the file at `path`, `size` its length.
  static std::shared_ptr<const Windows> InFile(std::string path, uint64_t base, uint64_t size);
  // The same, read only from the file that is `identity` (the file the
  // table was read from, as FileIdentity::Of gave it: its inode where
  // inodes persist, size and mtime), checked whenever the file is opened:
  // a file put in its place (a rename over it by whoever may write its
  // directory) before an open serves no window (DataLoss); one put there
  // while the file is open is not read (the descriptor reads the file
  // vouched for). Windows always come from the file that was vouched for.
  static std::shared_ptr<const Windows> InFile(std::string path, uint64_t base, uint64_t size,
                                               FileIdentity identity);

 protected:
  virtual absl::StatusOr<std::string> Raw(uint64_t offset, uint64_t length) const = 0;
};

// What random access into one compressed shard needs. Immutable once built.
struct CheckpointTable {
  Codec codec = Codec::kGzip;
  uint64_t data_size = 0;          // uncompressed bytes served (see ShardSource::size)
  std::vector<Checkpoint> points;  // by offset; points[0] is the stream start
  std::shared_ptr<const Windows> windows;

  // False for a table read from an index file that others may write (an
  // index_dir, or beside the shard): such checkpoints are checked against
  // the stream (VerifyCheckpoints) before a read resumes at them, since a
  // forged one, CRC and all, would serve other bytes of the stream as these.
  bool trusted = true;

  // The last checkpoint whose `out` is <= `offset` (points is never empty).
  const Checkpoint& Before(uint64_t offset) const;
  size_t MemoryBytes() const { return points.capacity() * sizeof(Checkpoint); }
};

struct ScanResult {
  CheckpointTable table;     // windows: in memory
  std::string windows_blob;  // the same blob, for writing to an index file
  std::optional<StreamProblem> problem;
  uint64_t members = 0;  // GZIP members (1 for ZLIB)
};

// Takes a scan's decompressed bytes in order. A non-OK status stops the
// scan, which returns it (e.g. the walk met more records than it may keep).
using StreamSink = std::function<absl::Status(absl::string_view)>;

// Inflates `fd` (a `codec` file of `file_size` bytes) from start to end in
// one pass, calling `sink` with the decompressed bytes in order (from
// another thread than the caller's, for a local file of 512 KiB or more:
// `sink` and `progress` are called one at a time, in order, and not after
// this returns), and records
// a checkpoint at block boundaries where CheckpointAllowed(span) holds and
// the budget allows, always where CheckpointDue(span) holds (0:
// kDefaultSpan), and at every GZIP member start (see the top of this file).
// `progress`, when set, is called with compressed bytes consumed so far.
// Only I/O errors and the sink's errors are errors; damage ends the stream
// (ScanResult::problem). The deflate data is inflated by ISA-L (`isal`,
// source/inflater.h: the same bytes and problems as zlib's, checkpoints as
// valid, at igzip's speed) or, with isal false, by zlib. On a damaged
// stream with a block zlib refuses and ISA-L does not (an incomplete
// Huffman code), ISA-L hands the sink bytes zlib does not produce: then
// `restart`, when given, is called and the scan runs again from the start
// of the stream with zlib (the sink gets every byte again, now exactly
// zlib's); without it, the sink's bytes run past data_size (a problem is
// always reported then).
absl::StatusOr<ScanResult> ScanCompressed(StoredBytes fd, absl::string_view path,
                                          uint64_t file_size, Codec codec, uint64_t span,
                                          const StreamSink& sink,
                                          const std::function<void(uint64_t)>& progress = nullptr,
                                          bool isal = true,
                                          const std::function<void()>& restart = nullptr);

// Checks checkpoints (first, last] of `table` against the stream of `fd`
// (the `codec` file of `file_size` bytes it was made for), inflating with
// zlib from points[first], which is taken as correct (points[0], the start
// of the stream, always is), and stopping at every deflate block boundary
// on the way: each checkpoint must lie exactly at a boundary the stream
// has (compressed offset and bits), or at the start of a GZIP member, with
// the uncompressed offset it names and, after its boundary, the window it
// stores (the whole window, or the sparse one SparseWindow makes of it from
// the stream, source/window_use.h). When `last` is the final checkpoint, the stream must also end
// at table.data_size. DataLoss names the first checkpoint that does not match (its index,
// compressed and uncompressed offsets, and why); I/O errors are errors. Costs one inflate of the
// bytes between the two checkpoints.
absl::Status VerifyCheckpoints(StoredBytes fd, absl::string_view path, uint64_t file_size,
                               const CheckpointTable& table, size_t first, size_t last);
// All of them, from the start of the stream to its end.
absl::Status VerifyCheckpoints(StoredBytes fd, absl::string_view path, uint64_t file_size,
                               const CheckpointTable& table);

// Decompresses the first up to `n` bytes of a compressed file (for probing:
// is there a record header inside?). Fewer bytes when the stream is shorter
// or damaged early.
absl::StatusOr<std::string> InflatePrefix(StoredBytes fd, absl::string_view path,
                                          uint64_t file_size, Codec codec, size_t n);

}  // namespace tfrecordfs::source

#endif  // TFRECORDFS_SOURCE_CHECKPOINTS_H_
