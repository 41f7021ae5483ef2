// The namespace the mount shows: sources mirrored at the root, one directory
// per shard, one directory per record, files per feature (naming/naming.h).
// Operations return absl::Status / StatusOr; src/fuse turns them into
// replies. Nothing here includes FUSE headers.
//
// Errors (see fuse/errno.h for the errno each maps to):
//   NotFound            no such name
//   DataLoss (EIO)      a record whose CRC or framing is damaged; the message
//                       names the shard path, record index and byte offset
//   PosixError(EROFS)   writes outside the staging area
//
// Thread-safety: all methods may be called concurrently. The tree and shard
// indexes are immutable after Create(); the parsed-record cache is guarded by
// its own mutex (a leaf lock: nothing else is acquired while holding it).
#ifndef TFRECORDFS_VFS_FILESYSTEM_H_
#define TFRECORDFS_VFS_FILESYSTEM_H_

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/vfs/record_cache.h"

namespace tfrecordfs::vfs {

struct Options {
  // Shard files or directories (mirrored recursively at the mount root).
  std::vector<std::string> sources;
  // Parsed records kept in memory (LRU). Default 4096.
  size_t cache_records = 4096;
  // Threads for the initial header walk. 0 = number of CPUs (at most 16).
  int index_threads = 0;
};

struct Attr {
  uint64_t ino = 0;
  mode_t mode = 0;  // type and permission bits
  uint64_t size = 0;
  uint64_t nlink = 1;
  struct timespec mtime = {};
};

// Where the bytes of a read come from: a range of an open file (which the
// FUSE layer may splice) or bytes in memory.
struct ReadResult {
  int fd = -1;  // >= 0: serve [offset, offset + length) of fd
  uint64_t offset = 0;
  size_t length = 0;
  std::string data;  // used when fd < 0
};

// Statistics for statfs and the benchmarks.
struct Stats {
  uint64_t shards = 0;
  uint64_t records = 0;
  uint64_t shard_bytes = 0;
  uint64_t index_bytes = 0;
};

class Filesystem {
 public:
  // Scans the sources, probes files, and walks the headers of every shard in
  // parallel. Fails when a source is missing or two sources put the same name
  // at the root. Damaged shards are logged and indexed up to the damage.
  static absl::StatusOr<std::unique_ptr<Filesystem>> Create(const Options& options);
  ~Filesystem();

  absl::StatusOr<Attr> Lookup(uint64_t parent, absl::string_view name);
  absl::StatusOr<Attr> GetAttr(uint64_t ino);

  // Lists a directory from position `offset` ("." is 0, ".." is 1, children
  // follow). `emit(name, attr, next_offset)` returns false when the reply
  // buffer is full; that entry is then not consumed. Attributes are complete
  // (for READDIRPLUS).
  using EmitFn = std::function<bool(absl::string_view name, const Attr& attr, uint64_t next)>;
  absl::Status ReadDir(uint64_t ino, uint64_t offset, const EmitFn& emit);

  // Checks that `ino` may be opened with `flags` (O_ACCMODE, O_TRUNC...).
  absl::Status Open(uint64_t ino, int flags);

  // Reads up to `size` bytes at `offset` (short only at end of file).
  absl::StatusOr<ReadResult> Read(uint64_t ino, uint64_t offset, size_t size);

  Stats GetStats() const;
  const std::vector<std::shared_ptr<const index::ShardIndex>>& shards() const { return shards_; }

  class Tree;  // the mirrored source tree (defined in filesystem.cc)

 private:
  Filesystem();

  // The parsed layout of a record, through the cache. DataLoss when damaged.
  absl::StatusOr<std::shared_ptr<const ParsedRecord>> Parse(uint64_t shard, uint64_t record);
  Attr RecordDirAttr(uint64_t shard, uint64_t record) const;
  Attr EntryAttr(uint64_t shard, uint64_t record, uint32_t entry, const ParsedRecord& rec) const;
  std::string RecordName(uint64_t shard, uint64_t record) const;

  std::unique_ptr<Tree> tree_;
  std::vector<std::shared_ptr<const index::ShardIndex>> shards_;
  std::vector<int> shard_fds_;          // owned; closed in the destructor
  std::vector<int> shard_name_width_;   // digits of the largest record index
  std::vector<uint64_t> shard_tree_node_;
  std::unique_ptr<RecordCache> cache_;
  uid_t uid_;
  gid_t gid_;
};

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_FILESYSTEM_H_
