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
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/record/reader.h"

namespace tfrecordfs::index {

class ShardIndex {
 public:
  ShardIndex(std::string path, uint64_t file_size, int64_t mtime_ns,
             record::WalkResult walk);

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }
  int64_t mtime_ns() const { return mtime_ns_; }
  uint64_t num_records() const { return offsets_.size() - 1; }
  // Framing of record i spans [begin(i), end(i)).
  uint64_t begin(uint64_t i) const { return offsets_[i]; }
  uint64_t end(uint64_t i) const { return offsets_[i + 1]; }
  const std::vector<uint64_t>& offsets() const { return offsets_; }
  // Damage met by the walk (empty for a clean shard).
  const std::vector<record::WalkProblem>& problems() const { return problems_; }
  // Bytes of heap this index holds (for the memory figures).
  size_t MemoryBytes() const { return offsets_.capacity() * sizeof(uint64_t); }

 private:
  std::string path_;
  uint64_t file_size_;
  int64_t mtime_ns_;
  std::vector<uint64_t> offsets_;
  std::vector<record::WalkProblem> problems_;
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
  kShard,      // a valid first header (or an empty file with a shard name)
  kNotShard,   // some other file: shown as it is
};

// Decides by content whether `fd` (size `size`, base name `name`) is an
// uncompressed TFRecord shard: its first 12 bytes must be a header with a
// valid length CRC whose record fits in the file. A file with a shard-like
// name whose first header is damaged is still walked, and counts as a shard
// when the walk finds a record.
absl::StatusOr<Probe> ProbeFile(int fd, absl::string_view path, uint64_t size);

// Walks `fd` and returns its index. `st` supplies size and mtime.
absl::StatusOr<std::shared_ptr<const ShardIndex>> BuildShardIndex(int fd, const std::string& path,
                                                                  const struct stat& st);

}  // namespace tfrecordfs::index

#endif  // TFRECORDFS_INDEX_SHARD_INDEX_H_
