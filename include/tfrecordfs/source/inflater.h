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
//
// Z_BLOCK reads (stop at the next block boundary) use ISA-L too. Stock ISA-L
// reads the next block's header as soon as one ends, so such a read stops
// it another way: isal_inflate consults `bfinal` only at the end of a block
// (to choose between the next header and the end of the data), so with
// bfinal set to a nonzero sentinel while a non-final block is decoded, the
// block's end looks like the end of the data and ISA-L stops right there,
// its bit buffer intact as long as some output is still held in its own
// buffer (the read asks for one byte less than is held). The boundary's bit
// offset is then the bytes taken minus the bits buffered, its output the
// bytes delivered plus those held; once they are handed out, ISA-L restarts
// at the boundary with the last 32 KiB it produced as its dictionary. A
// read that starts between blocks feeds ISA-L the next header a few bytes
// at a time, so that it is inside the next block before the sentinel is
// set. Two rare cases pass a boundary unseen and stop at the next one: a
// block of fewer than 32 compressed bytes after such a start, and a block
// that ends exactly where the previous call stopped (nothing held: ISA-L
// would drop its bit buffer; it is decoded again from a copy of the state
// without the sentinel). Otherwise a Z_BLOCK read stops where zlib's does.
//
// With `exact_problems` (a scan from the start of the stream), the bytes
// ISA-L hands out are summed (CRC-32, or Adler-32 for ZLIB) and checked
// against the member's trailer, as zlib checks them; and damage that ISA-L
// finds (a bad block, a short file, a trailer that does not match) is found
// again by zlib: the member is inflated by zlib from its start, the bytes
// already handed out are skipped (ISA-L's are a prefix of zlib's), and
// zlib's verdict (offset, bytes produced, message) is the stream's, as if
// zlib had inflated all of it. ISA-L may write a few bytes ahead of the
// symbol it fails on: the bytes of the call that fails are not handed out
// (zlib produces them again). One gap is left: ISA-L accepts an incomplete
// Huffman code, which zlib refuses ("invalid literal/lengths set"); a block
// with one is inflated by ISA-L while zlib stops at its header, so bytes
// were handed out that zlib does not produce: overran() says so (the scan
// then starts over with zlib, ScanCompressed).
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
           bool fast = false, bool exact_problems = false);
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
  // With exact_problems: zlib, inflating again after ISA-L found damage,
  // stopped before the bytes ISA-L had handed out (see above).
  bool overran() const { return overran_; }
  // Lets go of the input loaded (the next Read reads again from in_pos())
  // and releases the input buffer when it grew past one first read
  // (64 KiB), so an idle Inflater costs its state and at most that.
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
  // The reply of one isal_inflate call that returned `ret` after writing
  // `produced` bytes at `out`: hands them out (out_pos_, Sum), except, with
  // exact_problems_, those of a call that failed (ISA-L may write ahead of
  // the symbol it fails on; zlib produces them again); a failure finishes
  // the stream (IsalProblem). Returns the bytes handed out.
  absl::StatusOr<size_t> IsalReply(int ret, const char* out, size_t produced);
  // Loads more input for ISA-L when it has taken all that was loaded.
  absl::Status IsalInput();
  // A Z_BLOCK read through ISA-L: up to n bytes, stopping at the next block
  // boundary (at_boundary_) or the member's end.
  absl::StatusOr<size_t> ReadIsalToBoundary(char* out, size_t n);
  // ISA-L is between blocks (its output so far ends at a boundary): notes
  // where, and the bytes it holds to hand out before it (boundary_pending_).
  void MarkBoundary();
  // Hands out held bytes before the boundary; after the last, restarts
  // ISA-L there and sets at_boundary_.
  absl::StatusOr<size_t> DeliverToBoundary(char* out, size_t n);
  // ISA-L found damage: Finish with its verdict, or with exact_problems_,
  // zlib's (see the header comment).
  absl::Status IsalProblem(std::string message);
  // Bytes ISA-L handed out: into the member's check value (exact_problems_).
  void Sum(const char* p, size_t n);
  // With exact_problems_, at the end of a member ISA-L inflated: whether
  // its trailer is there and matches.
  absl::StatusOr<bool> TrailerMatches();

  StoredBytes fd_;
  absl::string_view path_;
  uint64_t file_size_;
  Codec codec_;
  const bool fast_;
  const bool exact_problems_;
  bool isal_disabled_ = false;  // zlib re-inflates after an ISA-L problem
  bool overran_ = false;
  // The member being inflated: where it starts (known after a Start at a
  // stream start), and the check value of ISA-L's bytes of it.
  bool member_known_ = false;
  uint64_t member_in_ = 0;
  uint64_t member_out_ = 0;
  uint32_t member_sum_ = 0;
  // A boundary ISA-L stopped at, with bytes before it still to hand out.
  bool boundary_pending_ = false;
  uint64_t boundary_in_ = 0;
  int boundary_bits_ = 0;
  std::unique_ptr<inflate_state> snapshot_;  // ISA-L's state before a stop try
  std::unique_ptr<inflate_state> isal_;      // with fast_
  bool isal_active_ = false;                 // the deflate data is ISA-L's (else zlib's)
  bool header_pending_ = false;              // zlib is parsing a header to hand over after
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
