// Inflater: the stepping engine under GZIP/ZLIB random access. A z_stream
// (and, for reads, ISA-L) over a compressed file, with positions in both
// coordinates, that steps over GZIP member boundaries and can stop at
// deflate block boundaries, where a checkpoint (source/checkpoints.h) can
// be laid or checked.
//
// With `fast`, the deflate data itself is inflated by ISA-L's isal_inflate
// (3-4x zlib's speed) from every point where the stream is at a block
// boundary: a checkpoint (its window set with isal_inflate_set_dict, its
// bits primed into the bit buffer, read_in/read_in_length, as zlib's
// inflatePrime does) or the end of a GZIP/ZLIB header, which zlib parses
// (Z_BLOCK stops right after it, byte-aligned). At the end of the member's
// last block, zlib takes over again for the trailer and the next header.
// Stock ISA-L cannot stop at a block boundary (it reads the next block's
// header as soon as one ends), so the scan and the checkpoint check, which
// must see boundaries, stay with zlib.
//
// The descriptor is not owned: it is read from on Start (the byte holding
// a checkpoint's leftover bits) and on every Read, so give it the one that
// is open now (SetFd) before either.
//
// Thread-safety: none; an Inflater belongs to one caller at a time.
#ifndef TFRECORDFS_SOURCE_INFLATER_H_
#define TFRECORDFS_SOURCE_INFLATER_H_

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/source/shard_source.h"

struct inflate_state;  // ISA-L's (isa-l/igzip_lib.h)

namespace tfrecordfs::source {

struct Checkpoint;  // source/checkpoints.h

// Where a stream stopped inflating cleanly, and why.
struct StreamProblem {
  uint64_t compressed_offset = 0;
  uint64_t offset = 0;  // uncompressed offset where output stopped
  std::string message;
};

class Inflater {
 public:
  // `path` is used in messages and must outlive the Inflater.
  Inflater(StoredBytes fd, absl::string_view path, uint64_t file_size, Codec codec,
           bool fast = false);
  ~Inflater();
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  // Positions the stream at `cp`; `window` is its window (ignored for stream
  // starts).
  absl::Status Start(const Checkpoint& cp, absl::string_view window);

  // Inflates up to n bytes into `out`. With `z_block`, returns early at
  // every deflate block boundary; with `stop_at_members` (implied by
  // z_block), at every stream start. Returns the bytes produced: 0 only
  // when finished(). I/O errors are errors; damage finishes the stream and
  // sets problem().
  absl::StatusOr<size_t> Read(char* out, size_t n, bool z_block, bool stop_at_members = false);

  // The first compressed byte not wholly consumed.
  uint64_t in_pos() const;
  // The descriptor to read from next (a cursor outlives one lease of it).
  void SetFd(StoredBytes fd) { fd_ = fd; }
  uint64_t out_pos() const { return out_pos_; }
  // Bits of byte in_pos() - 1 still to be read (meaningful at a boundary).
  int bits() const;
  bool finished() const { return finished_; }
  bool at_boundary() const { return at_boundary_; }
  bool at_stream_start() const { return at_stream_start_; }
  const std::optional<StreamProblem>& problem() const { return problem_; }
  uint64_t members() const { return members_; }
  // Releases the input buffer (the next Read reads again from in_pos()),
  // so an idle Inflater costs only its state.
  void Park();
  // Heap bytes this Inflater holds (input buffer, zlib's and ISA-L's state
  // and window), for the budget of idle cursors (source/block_cache.h).
  size_t MemoryBytes() const;

 private:
  absl::Status Zcheck(int ret);
  // Loads the next chunk of compressed input at file offset `pos` into
  // in_buf_ (in_off_ = pos, in_len_ = the bytes read: 0 at the end of the
  // file). Both inflaters' refills go through it.
  absl::Status LoadInput(uint64_t pos);
  // Reads the next chunk of compressed input, from in_pos() on (unread
  // input left in the buffer is read again). Returns the bytes read.
  absl::StatusOr<size_t> Refill();
  // Takes n bytes of input (a trailer) without inflating them. False when
  // the file ends first.
  absl::StatusOr<bool> Skip(size_t n);
  // Peeks at up to 2 bytes of input (refilling as needed).
  absl::StatusOr<std::string> Peek2();
  absl::Status EndOfStream();
  void Finish(uint64_t compressed_offset, std::string message);
  // Hands the stream to ISA-L at compressed byte `in`, with `bits` bits of
  // byte in - 1 still to read and `window` as the history.
  absl::Status StartIsal(uint64_t in, int bits, absl::string_view window);
  // One isal_inflate call into [out, out + n); returns the bytes produced.
  // At the end of the member's last block, hands the stream back to zlib
  // (EndOfStream: trailer, next member).
  absl::StatusOr<size_t> ReadIsal(char* out, size_t n);

  StoredBytes fd_;
  absl::string_view path_;
  uint64_t file_size_;
  Codec codec_;
  const bool fast_;
  std::unique_ptr<inflate_state> isal_;  // with fast_
  bool isal_active_ = false;             // the deflate data is ISA-L's (else zlib's)
  bool header_pending_ = false;          // zlib is parsing a header to hand over after
  size_t next_chunk_;
  z_stream z_;
  bool ok_ = false;
  bool raw_ = false;
  bool finished_ = false;
  bool at_boundary_ = false;
  bool at_stream_start_ = false;
  std::optional<StreamProblem> problem_;
  std::string in_buf_;
  uint64_t in_off_ = 0;  // file offset of in_buf_[0]
  size_t in_len_ = 0;    // bytes of in_buf_ loaded (consumed: in_len_ - avail_in)
  uint64_t out_pos_ = 0;
  uint64_t members_ = 0;
};

}  // namespace tfrecordfs::source

#endif  // TFRECORDFS_SOURCE_INFLATER_H_
