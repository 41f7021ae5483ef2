// The offset index of one shard, built by walking record headers.
//
// Memory: one uint64_t per record (8 bytes) plus one; the length of record i
// is implied by offsets[i+1] - offsets[i] - 16.
//
// Thread-safety: a ShardIndex is immutable once built and is shared as
// std::shared_ptr<const ShardIndex>; any number of threads may read it.
#ifndef TFRECORDFS_INDEX_SHARD_INDEX_H_
#define TFRECORDFS_INDEX_SHARD_INDEX_H_

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/source/inflate.h"

namespace tfrecordfs::index {

class ShardIndex {
 public:
  // `checkpoints` is set for a compressed shard (its codec and data size
  // come from it) and null for a plain one.
  ShardIndex(std::string path, uint64_t file_size, int64_t mtime_ns, record::WalkResult walk,
             std::shared_ptr<const source::CheckpointTable> checkpoints = nullptr);

  const std::string& path() const { return path_; }
  // The shard file's size (compressed, for a compressed shard).
  uint64_t file_size() const { return file_size_; }
  source::Codec codec() const { return checkpoints_ ? checkpoints_->codec : source::Codec::kNone; }
  // Bytes of the uncompressed stream the offsets are in.
  uint64_t data_size() const { return checkpoints_ ? checkpoints_->data_size : file_size_; }
  const std::shared_ptr<const source::CheckpointTable>& checkpoints() const { return checkpoints_; }
  int64_t mtime_ns() const { return mtime_ns_; }
  uint64_t num_records() const { return offsets_.size() - 1; }
  // Framing of record i spans [begin(i), end(i)).
  uint64_t begin(uint64_t i) const { return offsets_[i]; }
  uint64_t end(uint64_t i) const { return offsets_[i + 1]; }
  const std::vector<uint64_t>& offsets() const { return offsets_; }
  // Damage met by the walk (empty for a clean shard).
  const std::vector<record::WalkProblem>& problems() const { return problems_; }
  // Bytes of heap this index holds (for the memory figures).
  size_t MemoryBytes() const {
    return offsets_.capacity() * sizeof(uint64_t) +
           (checkpoints_ ? checkpoints_->MemoryBytes() : 0);
  }

 private:
  std::string path_;
  uint64_t file_size_;
  int64_t mtime_ns_;
  std::vector<uint64_t> offsets_;
  std::vector<record::WalkProblem> problems_;
  std::shared_ptr<const source::CheckpointTable> checkpoints_;
};

// How many of a shard's problems are logged at mount; the rest are only
// counted (a badly damaged shard can have 100,000).
inline constexpr size_t kMaxProblemsLogged = 20;

// The log lines for a shard's walk problems: "<path>: byte offset N:
// <message>" for the first `max_lines`, then "<path>: ... and N more
// problem(s)". Path and messages go through EscapeForLog: messages may come
// from an index file, which whoever can write the index directory controls,
// and a file name may hold a newline.
std::vector<std::string> FormatProblems(absl::string_view path,
                                        const std::vector<record::WalkProblem>& problems,
                                        size_t max_lines = kMaxProblemsLogged);

// True for names TFRecord writers use: *.tfrecord(s), *.record(s), *.tfr,
// names containing "tfrecord", and sharded names like "x-00001-of-00010".
bool LooksLikeShardName(absl::string_view name);

// What a regular file in a source turned out to be.
enum class Probe {
  kShard,     // a valid first header (or an empty file with a shard name)
  kNotShard,  // some other file: shown as it is
};

// Decides by content whether `fd` (size `size`) is a TFRecord shard, and how
// it is stored (`*codec`, when given):
//   plain  its first 12 bytes are a header with a valid length CRC whose
//          record fits in the file (checked first: a plain shard may start
//          with bytes that look like a ZLIB header);
//   gzip / zlib  its first bytes announce the codec (source::DetectCodec)
//          and the first 12 decompressed bytes are a header with a valid
//          length CRC; a stream that decompresses to nothing is an empty
//          shard when the name looks like one.
// A file with a shard-like name whose first header is damaged is still
// walked, and counts as a shard when the walk finds a record. A compressed
// file that is not a shard is kNotShard with *codec set (so the caller can
// say so).
absl::StatusOr<Probe> ProbeFile(source::StoredBytes fd, absl::string_view path, uint64_t size,
                                source::Codec* codec = nullptr);

// A shard walked: its header walk, and for a compressed shard the
// checkpoints made in the same pass (with their windows in memory, and the
// same windows as one blob for an index file).
struct WalkedShard {
  record::WalkResult walk;
  std::shared_ptr<const source::CheckpointTable> checkpoints;  // null: plain
  std::string windows_blob;
};

// Walks the shard `fd` (`size` bytes on disk, stored as `codec`). A plain
// shard's headers are walked in place; a compressed shard is inflated once,
// from start to end, walking the headers in the stream and laying
// checkpoints every `span` compressed or uncompressed bytes; if the stream holds damaged
// records, the walk is then redone over the decompressed stream (through
// the new checkpoints) to resynchronise like a plain walk. Where the stream
// itself stops inflating (truncated, corrupt block), the data ends; the walk
// reports it as its last problem, naming the compressed byte offset and
// zlib's message. `progress` gets compressed bytes consumed. More than
// `max_records` records fail the walk with record::TooManyRecords as soon as
// the walk meets them (a compressed shard is not inflated further).
//
// How a plain shard's headers are read (-o walk=): kHeaders reads each
// header where it is (one small read per large record: cheapest on local
// disk, where a read costs microseconds), kBlocks reads the whole shard in
// whole shard front to back through a source::PrefetchReader (several
// ranged reads in flight ahead of the walk, of 1 MiB, or for objects
// growing from 1 to 8 MiB,
// all walks of the process within source::PrefetchBudget::Process()'s 64 MiB
// held or in flight, each its share of it: what network storage wants,
// where every read is a round trip), which the walk then reads from memory
// in kPrefetchedWalkBlock blocks; kAuto picks kBlocks on remote storage
// (objects, source::OnRemoteStorage) and kHeaders elsewhere. A compressed
// shard is inflated from a PrefetchReader the same way unless kHeaders.
enum class WalkMode { kAuto, kHeaders, kBlocks };
inline constexpr size_t kPrefetchedWalkBlock = size_t{1} << 20;
// Shards walked at once when a source is on remote storage: there a walk
// waits on round trips, not on CPU, so I/O concurrency, not the number of
// cores, sets the pace (a mount's index_threads, `index --threads`).
inline constexpr int kRemoteWalkThreads = 32;

absl::StatusOr<WalkedShard> WalkShard(source::StoredBytes fd, const std::string& path,
                                      uint64_t size, source::Codec codec,
                                      uint64_t span = source::kDefaultSpan,
                                      const std::function<void(uint64_t)>& progress = nullptr,
                                      WalkMode mode = WalkMode::kAuto,
                                      uint64_t max_records = record::kDefaultMaxRecords);

// Walks `fd` and returns its index. `st` supplies size and mtime.
absl::StatusOr<std::shared_ptr<const ShardIndex>> BuildShardIndex(
    source::StoredBytes fd, const std::string& path, const struct stat& st,
    source::Codec codec = source::Codec::kNone, uint64_t max_records = record::kDefaultMaxRecords);

}  // namespace tfrecordfs::index

#endif  // TFRECORDFS_INDEX_SHARD_INDEX_H_
