// The bytes of a shard in uncompressed coordinates.
//
// Everything above this layer (the header walk, checked record reads, the
// index, the read path) sees a shard as a ShardSource: `size()` bytes that
// can be read at any offset. A plain shard is its file; a GZIP or ZLIB shard
// is the file's decompressed stream (source/inflate.h), reached through
// checkpoints so that a read at offset N does not inflate from the start.
//
// Only a plain shard can hand out a file range (Spliceable), which the FUSE
// layer may splice to the kernel without copying.
//
// Thread-safety: every method of every ShardSource is safe to call
// concurrently (plain sources only pread a shared descriptor; inflating
// sources lock internally).
#ifndef TFRECORDFS_SOURCE_SHARD_SOURCE_H_
#define TFRECORDFS_SOURCE_SHARD_SOURCE_H_

#include <sys/stat.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/lru.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/source/stored_bytes.h"

namespace tfrecordfs::source {

// How a shard file is stored. The values are stored in index files (the
// flags field of index/index_file.h): never renumber them.
enum class Codec : uint8_t {
  kNone = 0,  // plain TFRecord framing
  kGzip = 1,  // RFC 1952, one member or several concatenated
  kZlib = 2,  // RFC 1950, one stream (TensorFlow reads nothing after it)
  // TensorFlow's SNAPPY framing: big-endian length-prefixed raw Snappy
  // blocks (source/snappy_source.h). Recognised by content (index::ProbeFile),
  // not by DetectCodec: it has no magic bytes.
  kSnappy = 3,
  // Not a TFRecord stream at all: an ArrayRecord (riegeli) file, whose
  // records arrayrecord/file.h frames as one. Recognised by its signature
  // (index::ProbeFile).
  kArrayRecord = 4,
};
// Index files store the codec in 3 bits (index_file.cc): 4 is the last.
// Files written before kSnappy existed hold 0-2 and still load.
inline constexpr uint8_t kMaxCodec = 4;

// "none", "gzip", "zlib", "snappy", "arrayrecord".
absl::string_view CodecName(Codec codec);
// The inverse of CodecName (exact, lower case) for the codecs a user may ask
// for as output (--compression, -o compression=): none, gzip, zlib; nullopt
// for anything else.
std::optional<Codec> ParseCodecName(absl::string_view name);

// The codec a file's first bytes announce: GZIP when they are 1f 8b 08, ZLIB
// when they form a valid RFC 1950 header (deflate, window <= 32 KiB, no preset
// dictionary, header check multiple of 31), else kNone. Needs at least 2
// bytes to say anything but kNone. A plain TFRecord can start with bytes that
// look like a ZLIB header (its first byte is the low byte of a length): the
// caller must still check that the decompressed bytes form a record header.
Codec DetectCodec(absl::string_view first_bytes);

// True when `fd` (or the file at `path`) lives on storage where one read
// costs a network round trip however small it is (statfs type: FUSE, NFS,
// CIFS/SMB, Lustre, Ceph, 9p, GPFS, GlusterFS via FUSE, AFS): there a header
// walk reads large sequential blocks and many shards at once. A `path` that
// is an object source's URL (s3://, gs://, http://, https://) is remote too.
bool OnRemoteStorage(int fd);
bool OnRemoteStorage(const std::string& path);

// False when the file system behind `fd` may give the same file another
// inode number later in the same mount: FUSE, where libfuse's high-level API
// (sshfs, s3fs, our tests' slowfs) numbers nodes as the kernel looks them up,
// so a file whose inode the kernel dropped under memory pressure comes back
// with a new number (gcsfuse does the same). There an inode number cannot
// tell one file from another: identity checks use size, mtime and ctime.
bool InodesPersist(int fd);

// An open descriptor and what keeps it open: a descriptor from an FdCache
// stays open while any Lease of it lives, even if the cache drops it. For a
// shard held in an object (ShardFile of an ObjectReader), `fd` is -1 and
// `object` reads its bytes.
struct Lease {
  int fd = -1;
  std::shared_ptr<const void> hold;
  const ObjectReader* object = nullptr;
  StoredBytes bytes() const { return object != nullptr ? StoredBytes(object) : StoredBytes(fd); }
};

// A bounded LRU of open shard descriptors, so that a mount of any number of
// shards holds at most `capacity` of them (plus those leased for reads in
// flight). Thread-safe; mu_ is a leaf lock, never held across open().
class FdCache {
 public:
  explicit FdCache(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}
  // Lowers or raises the bound (call before use: not synchronised).
  void set_capacity(size_t capacity) { capacity_ = capacity == 0 ? 1 : capacity; }
  size_t capacity() const { return capacity_; }
  // The cached descriptor for `key`, or `open()`'s, cached.
  absl::StatusOr<Lease> Get(uint64_t key, const std::function<absl::StatusOr<UniqueFd>()>& open);
  uint64_t NewKey() { return next_key_.fetch_add(1); }
  // Forgets `key`'s descriptor (closed once no lease holds it): for a user
  // of the cache that goes away.
  void Drop(uint64_t key);
  size_t size() const;
  uint64_t opens() const { return opens_.load(std::memory_order_relaxed); }

 private:
  using Fd = std::shared_ptr<const UniqueFd>;
  size_t capacity_;
  std::atomic<uint64_t> next_key_{1};
  std::atomic<uint64_t> opens_{0};
  mutable Mutex mu_;
  LruMap<uint64_t, Fd> fds_ ABSL_GUARDED_BY(mu_);
};

// What a shard file was when it was indexed. Shards are immutable by
// contract; a file that no longer matches is a breach the reads report
// (DataLoss: "changed under the mount; remount") instead of serving bytes
// the index does not describe.
struct FileIdentity {
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0;
  // Whether dev and ino are compared: InodesPersist of the file (a FUSE
  // source is known by its size and mtime only).
  bool ino_persists = true;
  // `fd`, when given, is the open file (for InodesPersist).
  static FileIdentity Of(const struct stat& st, int fd = -1);
};

// The file behind a shard: either a descriptor held for the source's life,
// or a path opened on demand through an FdCache and checked against the
// FileIdentity it had when indexed, or an object elsewhere (an
// ObjectReader, which pins every read to the object it listed: its path()
// is the object's URL). Thread-safe.
class ShardFile {
 public:
  ShardFile(std::string path, FileIdentity identity, FdCache* cache);
  ShardFile(UniqueFd fd, std::string path);
  explicit ShardFile(std::shared_ptr<const ObjectReader> object);
  // `in` (a descriptor or an object) must outlive the ShardFile.
  static ShardFile Borrowed(StoredBytes in, std::string path);

  const std::string& path() const { return path_; }
  // An open descriptor (reopened, and re-checked, if the cache dropped it).
  absl::StatusOr<Lease> Open() const;
  // fstat of the open file against its identity: DataLoss when its size,
  // mtime or inode changed since it was indexed (for lazily opened files).
  absl::Status CheckUnchanged() const;

 private:
  std::string path_;
  std::shared_ptr<const UniqueFd> owned_;  // or
  int borrowed_ = -1;                      // or
  FdCache* cache_ = nullptr;               // with
  uint64_t key_ = 0;
  std::shared_ptr<const ObjectReader> object_;  // or
  const ObjectReader* borrowed_object_ = nullptr;
  FileIdentity identity_;
};

// A range of an open file holding some of a source's bytes. `hold` keeps
// the descriptor open: keep it until the bytes are served.
struct FileRange {
  int fd = -1;
  uint64_t offset = 0;
  std::shared_ptr<const void> hold;
};

// Bytes of a source it holds in memory, and what keeps them there.
struct HeldBytes {
  std::shared_ptr<const void> owner;
  absl::string_view bytes;
};

class ShardSource {
 public:
  virtual ~ShardSource() = default;

  // How the shard is stored, and the path used in messages.
  virtual Codec codec() const = 0;
  virtual const std::string& path() const = 0;
  // The number of (uncompressed) bytes. For a compressed shard: the bytes
  // that decompressed before the end of the stream or its first damage.
  virtual uint64_t size() const = 0;
  // Reads up to n bytes at `offset`; fewer only at size(). Errors are I/O
  // errors and DataLoss (a compressed stream that no longer inflates as it
  // did when it was indexed).
  virtual absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const = 0;
  // The file range that holds the bytes at `offset` unchanged (plain shards
  // only): bytes [offset, offset + k) are at [range.offset, range.offset + k)
  // of range.fd for any k up to size() - offset. Errors: as ReadAt's (the
  // file cannot be reopened, or changed under the mount).
  virtual absl::StatusOr<std::optional<FileRange>> Spliceable(uint64_t offset) const = 0;
  // DataLoss when the shard file no longer is what was indexed (a breach of
  // the immutability contract), checked with one fstat; OK when unknown.
  virtual absl::Status CheckUnchanged() const { return absl::OkStatus(); }
  // A hint: the shard is about to be read in order from its start (its
  // folder was listed). A source that reads ahead may start now; the
  // others ignore it.
  virtual void ExpectReadFromStart() const {}
  // Bytes [offset, offset + n) without a copy, when the source holds them
  // in memory in one piece (a block read ahead); else nullopt, and the
  // caller reads them with ReadAt. A source that reads ahead counts it as
  // the read ReadAt would have been. The bytes stay valid while `owner`
  // lives; holding it keeps memory beyond the source's budget, so callers
  // let it go once they are done with the bytes.
  virtual std::optional<HeldBytes> Held(uint64_t /*offset*/, size_t /*n*/) const {
    return std::nullopt;
  }

  // Reads exactly n bytes or fails (DataLoss naming the path and offset when
  // the source ends first).
  absl::Status ReadFull(uint64_t offset, char* buf, size_t n) const;
};

// A plain shard file (or object: then nothing is Spliceable).
class PlainSource final : public ShardSource {
 public:
  PlainSource(ShardFile file, uint64_t size) : file_(std::move(file)), size_(size) {}
  PlainSource(UniqueFd fd, std::string path, uint64_t size)
      : PlainSource(ShardFile(std::move(fd), std::move(path)), size) {}
  static PlainSource Borrowing(StoredBytes in, std::string path, uint64_t size) {
    return PlainSource(ShardFile::Borrowed(in, std::move(path)), size);
  }

  Codec codec() const override { return Codec::kNone; }
  const std::string& path() const override { return file_.path(); }
  uint64_t size() const override { return size_; }
  // A read that comes back short of size() means the file shrank under the
  // mount: DataLoss, not fewer bytes.
  absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const override;
  absl::StatusOr<std::optional<FileRange>> Spliceable(uint64_t offset) const override;
  absl::Status CheckUnchanged() const override { return file_.CheckUnchanged(); }

 private:
  ShardFile file_;
  uint64_t size_;
};

}  // namespace tfrecordfs::source

#endif  // TFRECORDFS_SOURCE_SHARD_SOURCE_H_
