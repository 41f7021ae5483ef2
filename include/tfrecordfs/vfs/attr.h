// What the namespace's operations hand back, shared by Filesystem and the
// views it forwards to (staging_view.h): a node's attributes, a read's
// bytes, and the callback a directory listing emits entries through.
#ifndef TFRECORDFS_VFS_ATTR_H_
#define TFRECORDFS_VFS_ATTR_H_

#include <sys/stat.h>
#include <time.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace tfrecordfs::vfs {

// Attr::uid / gid of a node that belongs to the mounting user (the daemon's
// ids): every node but the staged ones, which show their backing file's.
inline constexpr uid_t kMountOwnerUid = static_cast<uid_t>(-1);
inline constexpr gid_t kMountOwnerGid = static_cast<gid_t>(-1);

struct Attr {
  uint64_t ino = 0;
  mode_t mode = 0;  // type and permission bits
  uid_t uid = kMountOwnerUid;
  gid_t gid = kMountOwnerGid;
  uint64_t size = 0;
  uint64_t nlink = 1;
  struct timespec mtime = {};
  struct timespec atime = {};  // zero: same as mtime
  struct timespec ctime = {};  // zero: same as mtime
  // FUSE's generation of the node id: a node id that names something else
  // than before (a record of a shard rewritten while mounted) comes with a
  // higher one, so the kernel drops what it kept for the old node.
  uint64_t generation = 1;
};

// Where the bytes of a read come from: a range of an open file (which the
// FUSE layer may splice) or bytes in memory. The descriptor stays open while
// `hold` (or the Filesystem, for plain source files) lives.
struct ReadBuffer {
  int fd = -1;  // >= 0: serve [offset, offset + length) of fd
  uint64_t offset = 0;
  size_t length = 0;
  std::shared_ptr<const void> hold;  // keeps fd open until the reply is sent
  std::string data;                  // used when fd < 0
  size_t size() const { return fd >= 0 ? length : data.size(); }
};

// A read's bytes: this buffer, then `more` in order. A file made of several
// pieces (an .npy: a header in memory, then tensor bytes in the shard) gives
// several buffers, so the shard's part can still be spliced; adjacent
// in-memory parts are merged.
struct ReadResult : ReadBuffer {
  std::vector<ReadBuffer> more;
  size_t total_size() const {
    size_t n = size();
    for (const ReadBuffer& b : more) n += b.size();
    return n;
  }
};

// Lists a directory: `emit(name, attr, next_offset)` returns false when the
// reply buffer is full; that entry is then not consumed. Attributes are
// complete (for READDIRPLUS).
using EmitFn = std::function<bool(absl::string_view name, const Attr& attr, uint64_t next)>;

}  // namespace tfrecordfs::vfs

#endif  // TFRECORDFS_VFS_ATTR_H_
