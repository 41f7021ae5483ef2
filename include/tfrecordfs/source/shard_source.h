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

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/file.h"

namespace tfrecordfs::source {

// How a shard file is stored. The values are stored in index files (the
// flags field of index/index_file.h): never renumber them.
enum class Codec : uint8_t {
  kNone = 0,  // plain TFRecord framing
  kGzip = 1,  // RFC 1952, one member or several concatenated
  kZlib = 2,  // RFC 1950, one stream (TensorFlow reads nothing after it)
};
inline constexpr uint8_t kMaxCodec = 2;

// "none", "gzip", "zlib".
absl::string_view CodecName(Codec codec);
// The inverse of CodecName (exact, lower case); nullopt for anything else.
std::optional<Codec> ParseCodecName(absl::string_view name);

// The codec a file's first bytes announce: GZIP when they are 1f 8b 08, ZLIB
// when they form a valid RFC 1950 header (deflate, window <= 32 KiB, no preset
// dictionary, header check multiple of 31), else kNone. Needs at least 2
// bytes to say anything but kNone. A plain TFRecord can start with bytes that
// look like a ZLIB header (its first byte is the low byte of a length): the
// caller must still check that the decompressed bytes form a record header.
Codec DetectCodec(absl::string_view first_bytes);

// A range of an open file holding some of a source's bytes.
struct FileRange {
  int fd = -1;  // owned by the source; valid while the source lives
  uint64_t offset = 0;
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
  // of range.fd for any k up to size() - offset.
  virtual std::optional<FileRange> Spliceable(uint64_t offset) const = 0;

  // Reads exactly n bytes or fails (DataLoss naming the path and offset when
  // the source ends first).
  absl::Status ReadFull(uint64_t offset, char* buf, size_t n) const;
};

// A plain shard file. Owns its descriptor, or borrows one (the caller keeps
// it open for the source's life).
class PlainSource final : public ShardSource {
 public:
  PlainSource(UniqueFd fd, std::string path, uint64_t size);
  static PlainSource Borrowing(int fd, std::string path, uint64_t size);

  Codec codec() const override { return Codec::kNone; }
  const std::string& path() const override { return path_; }
  uint64_t size() const override { return size_; }
  absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const override;
  std::optional<FileRange> Spliceable(uint64_t offset) const override {
    return FileRange{fd_, offset};
  }
  int fd() const { return fd_; }

 private:
  PlainSource(int fd, std::string path, uint64_t size) : fd_(fd), path_(std::move(path)), size_(size) {}
  UniqueFd owned_;
  int fd_;
  std::string path_;
  uint64_t size_;
};

}  // namespace tfrecordfs::source

#endif  // TFRECORDFS_SOURCE_SHARD_SOURCE_H_
