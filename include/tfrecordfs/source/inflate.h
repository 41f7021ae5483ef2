// Random access into GZIP and ZLIB shards (zran-style checkpoints).
//
// One pass over a compressed shard (ScanCompressed) inflates it from start
// to end, hands every decompressed byte to a sink (the header walk runs on
// them, so a shard is decompressed once to index it) and records a
// checkpoint at the first deflate block boundary after `span` compressed or
// `span` uncompressed bytes since the previous one, whichever comes first:
// the compressed bit offset of the boundary, the uncompressed offset there,
// and the 32 KiB of output before it (the window a raw inflate needs to
// resume). Bounding the uncompressed side keeps the work of a random read
// (inflating from the checkpoint before it) at about half a span of output
// however well the data compresses; a window compresses about as well as
// the data around it, so the windows cost about 32 KiB / span of the
// compressed size (3 % at the default span) whatever the ratio. Windows
// are stored deflate-compressed, apart from the checkpoint table, so that
// an index can keep them on disk and load one only when a read needs it.
// The start of every GZIP member (and of the ZLIB stream) is a checkpoint
// that needs no window.
//
// Reading: InflateSource serves a byte range by resuming at the last
// checkpoint at or before it (or from where its cursor stopped, when that is
// closer: sequential reads never restart), and keeps decompressed bytes in a
// BlockCache shared by every compressed shard of a mount, in aligned blocks
// of kBlockSize bytes, so that listing a record and then reading its files
// inflates that region once. A read that resumes at a checkpoint inflates
// only up to the end of the block holding its last byte.
//
// Damage: a stream that is truncated, has a corrupt deflate block, a bad
// GZIP trailer, or garbage after its last member, ends where it stops
// inflating cleanly; ScanResult::problem says where (compressed byte offset)
// and why (zlib's message). Bytes produced before the damage are served as
// they came out; the record CRCs above this layer judge them.
#ifndef TFRECORDFS_SOURCE_INFLATE_H_
#define TFRECORDFS_SOURCE_INFLATE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::source {

inline constexpr size_t kWindowSize = 32768;        // deflate's history
// Bytes between checkpoints, compressed or uncompressed (see ScanCompressed).
inline constexpr uint64_t kDefaultSpan = 1 << 20;
// BlockCache unit (uncompressed). Small, because a read that resumes at a
// checkpoint inflates to the end of its last block: a 64 KiB block costs
// about 0.1 ms of zlib past the bytes asked for.
inline constexpr size_t kBlockSize = 64 * 1024;

// Whether a checkpoint is due `in` compressed and `out` uncompressed bytes
// after the previous one (at the next block boundary, ScanCompressed).
constexpr bool CheckpointDue(uint64_t in, uint64_t out, uint64_t span) {
  return in >= span || out >= span;
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
// not saved) or in an index file (loaded on demand, one pread per window).
class Windows {
 public:
  virtual ~Windows() = default;
  // The uncompressed window of `cp` (at most kWindowSize bytes; fewer near
  // the start of the stream). DataLoss when the stored bytes do not match
  // their crc or do not inflate.
  absl::StatusOr<std::string> Load(const Checkpoint& cp) const;
  static std::shared_ptr<const Windows> InMemory(std::string blob);
  // `base` is the offset of the blob in the file at `path`, `size` its length.
  static std::shared_ptr<const Windows> InFile(std::string path, uint64_t base, uint64_t size);

 protected:
  virtual absl::StatusOr<std::string> Raw(uint64_t offset, uint32_t length) const = 0;
};

// What random access into one compressed shard needs. Immutable once built.
struct CheckpointTable {
  Codec codec = Codec::kGzip;
  uint64_t data_size = 0;  // uncompressed bytes served (see ShardSource::size)
  std::vector<Checkpoint> points;  // by offset; points[0] is the stream start
  std::shared_ptr<const Windows> windows;

  // The last checkpoint whose `out` is <= `offset` (points is never empty).
  const Checkpoint& Before(uint64_t offset) const;
  size_t MemoryBytes() const { return points.capacity() * sizeof(Checkpoint); }
};

struct StreamProblem {
  uint64_t compressed_offset = 0;
  uint64_t offset = 0;  // uncompressed offset where output stopped
  std::string message;
};

struct ScanResult {
  CheckpointTable table;       // windows: in memory
  std::string windows_blob;    // the same blob, for writing to an index file
  std::optional<StreamProblem> problem;
  uint64_t members = 0;        // GZIP members (1 for ZLIB)
};

// Inflates `fd` (a `codec` file of `file_size` bytes) from start to end in
// one pass, calling `sink` with the decompressed bytes in order, and records
// a checkpoint at the first block boundary where CheckpointDue(span) holds
// (0: kDefaultSpan), and at every GZIP member start.
// `progress`, when set, is called with compressed bytes consumed so far.
// Only I/O errors are errors; damage ends the stream (ScanResult::problem).
absl::StatusOr<ScanResult> ScanCompressed(
    int fd, absl::string_view path, uint64_t file_size, Codec codec, uint64_t span,
    const std::function<void(absl::string_view)>& sink,
    const std::function<void(uint64_t)>& progress = nullptr);

// Decompresses the first up to `n` bytes of a compressed file (for probing:
// is there a record header inside?). Fewer bytes when the stream is shorter
// or damaged early.
absl::StatusOr<std::string> InflatePrefix(int fd, absl::string_view path, uint64_t file_size,
                                          Codec codec, size_t n);

// A byte-bounded LRU of decompressed blocks, keyed by (source id, block
// number), shared by the sources of one mount. Thread-safe (mu_ is a leaf).
class BlockCache {
 public:
  explicit BlockCache(size_t max_bytes) : max_bytes_(max_bytes) {}
  std::shared_ptr<const std::string> Get(uint64_t source, uint64_t block);
  void Put(uint64_t source, uint64_t block, std::shared_ptr<const std::string> bytes);
  size_t bytes() const;
  uint64_t NewSourceId() { return next_id_.fetch_add(1); }

 private:
  struct Key {
    uint64_t source, block;
    bool operator==(const Key& o) const { return source == o.source && block == o.block; }
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.source, k.block);
    }
  };
  struct Slot {
    std::shared_ptr<const std::string> bytes;
    std::list<Key>::iterator lru;
  };
  const size_t max_bytes_;
  std::atomic<uint64_t> next_id_{1};
  mutable Mutex mu_;
  absl::flat_hash_map<Key, Slot> map_ ABSL_GUARDED_BY(mu_);
  std::list<Key> lru_ ABSL_GUARDED_BY(mu_);  // front = most recent
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

// The decompressed bytes of a GZIP or ZLIB shard, read through its
// checkpoint table. Thread-safe: reads that hit the cache run in parallel;
// inflating is serialised per source (mu_ guards the cursor).
class InflateSource final : public ShardSource {
 public:
  // `cache` is not owned and must outlive the source.
  InflateSource(ShardFile file, uint64_t file_size, std::shared_ptr<const CheckpointTable> table,
                BlockCache* cache);
  InflateSource(UniqueFd fd, std::string path, uint64_t file_size,
                std::shared_ptr<const CheckpointTable> table, BlockCache* cache)
      : InflateSource(ShardFile(std::move(fd), std::move(path)), file_size, std::move(table),
                      cache) {}
  ~InflateSource() override;

  Codec codec() const override { return table_->codec; }
  const std::string& path() const override { return file_.path(); }
  uint64_t size() const override { return table_->data_size; }
  absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const override;
  absl::StatusOr<std::optional<FileRange>> Spliceable(uint64_t) const override {
    return std::optional<FileRange>();
  }
  absl::Status CheckUnchanged() const override { return file_.CheckUnchanged(); }

  // Blocks inflated so far (cache misses), for tests and statistics.
  uint64_t blocks_inflated() const { return blocks_inflated_.load(std::memory_order_relaxed); }
  uint64_t restarts() const { return restarts_.load(std::memory_order_relaxed); }
  // True once ISA-L failed on this shard and zlib took over (for tests).
  bool fell_back_to_zlib() const {
    MutexLock lock(&mu_);
    return zlib_only_;
  }

 private:
  struct Cursor;
  absl::StatusOr<std::shared_ptr<const std::string>> Block(uint64_t block) const;
  absl::StatusOr<std::shared_ptr<const std::string>> InflateBlock(uint64_t block,
                                                                 const Lease& lease) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ShardFile file_;
  uint64_t file_size_;
  std::shared_ptr<const CheckpointTable> table_;
  BlockCache* cache_;
  uint64_t id_;
  mutable Mutex mu_;
  mutable std::unique_ptr<Cursor> cursor_ ABSL_GUARDED_BY(mu_);
  // Inflate with zlib only (ISA-L failed on this shard once).
  mutable bool zlib_only_ ABSL_GUARDED_BY(mu_) = false;
  mutable std::atomic<uint64_t> blocks_inflated_{0};
  mutable std::atomic<uint64_t> restarts_{0};
};

}  // namespace tfrecordfs::source

#endif  // TFRECORDFS_SOURCE_INFLATE_H_
