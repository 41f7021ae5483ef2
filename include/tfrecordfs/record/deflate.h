// Compressed output made on every core: one GZIP member or one ZLIB stream
// deflated in parallel pieces (what ShardWriter writes, and through it
// every commit, pack, repair and reshard of a compressed shard).
//
// The caller cuts its bytes into blocks (ShardWriter: at the first record
// boundary after kFlushEvery framed bytes), and each block ends with a full
// flush (byte-aligned; nothing after it refers back), as the writer did
// before on one core: the stream keeps a clean resume point after every
// block, where an index's checkpoint needs no stored window. Inside a
// block, pigz's way: the block is deflated in pieces of kDeflatePiece bytes
// by workers at once, each piece as raw deflate from a fresh state primed
// with the kDeflateDictionary bytes before it (deflateSetDictionary; none
// for a block's first piece), ending with a sync flush (byte-aligned, so
// pieces join), the block's last piece with the full flush, the stream's
// last piece with Z_FINISH. The wrapper goes around the pieces: GZIP's
// 10-byte header and its CRC-32 and size trailer, or ZLIB's 2-byte header
// and Adler-32 trailer; each piece's checksum is computed by its worker and
// joined in order with zlib's crc32_combine / adler32_combine. zcat,
// Python's gzip and zlib modules and TensorFlow's readers see one ordinary
// stream, within a few hundredths of a percent of the one-state stream's
// size (a sync flush's 5 bytes per piece; the dictionary keeps matches).
//
// Why pieces of 128 KiB rather than whole 1 MiB blocks: on a loaded machine
// the kernel's scheduler gave 1 MiB tasks (30 ms of deflate each, never
// sleeping) half the CPU it gave pigz's 128 KiB ones; `pigz -b 1024` was as
// slow as they were (docs/bench.md). The bytes do not depend on the number
// of threads.
//
// Thread-safety: a ParallelDeflater belongs to one thread (its owner), which
// calls AddBlock and Finish and on which the sink runs; its workers touch
// only the blocks handed to them (base/parallel.h).
#ifndef TFRECORDFS_RECORD_DEFLATE_H_
#define TFRECORDFS_RECORD_DEFLATE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::record {

// Bytes deflated per task, and the bytes before a piece that prime it.
inline constexpr size_t kDeflatePiece = size_t{128} << 10;
inline constexpr size_t kDeflateDictionary = size_t{32} << 10;
// Workers a `threads` of 0 starts at most: each holds four pieces in flight
// (about 0.6 MiB each: input, output, deflate state), and the deflater at
// least kMinPiecesInFlight (about 18 MiB) when it has workers: the owner
// (reading the old shard, framing, writing the output) can be off the CPU
// or blocked in write(2) for a while on a loaded machine, and the workers
// must not run dry meanwhile (with 4 per worker, 2 workers: a 200 MB GZIP
// commit of random records 4.2-5.5 s against `pigz -6`'s 2.9-3.6 s; with
// 32, 3.4-4.6 s in the same interleaved rounds, docs/bench.md).
inline constexpr int kDefaultMaxThreads = 8;
inline constexpr size_t kMinPiecesInFlight = 32;

class ParallelDeflater {
 public:
  // Receives the compressed bytes, in order, on the owner's thread; an
  // error stops the deflater (every later call returns it).
  using Sink = std::function<absl::Status(absl::string_view)>;

  // `codec`: kGzip or kZlib. `level`: zlib's, 0..9. `threads`: blocks
  // deflated at once (0: the machine's cores, at most kDefaultMaxThreads;
  // 1: on the owner's thread, no worker started); 4 * threads pieces are
  // held at most (kMinPiecesInFlight with workers), besides the newest
  // block. The bytes written do not
  // depend on it. `name` is used in error messages.
  ParallelDeflater(source::Codec codec, int level, int threads, std::string name, Sink sink);
  ~ParallelDeflater();
  ParallelDeflater(const ParallelDeflater&) = delete;
  ParallelDeflater& operator=(const ParallelDeflater&) = delete;

  // Takes the bytes of *block as the next block (swapped out: *block is
  // left empty, with a buffer the caller may reuse). An empty block adds
  // nothing. Blocks are deflated in the background; their bytes reach the
  // sink in order, at the latest from Finish.
  absl::Status AddBlock(std::string* block);
  // Takes *deflated (swapped out, left empty) as the next block's bytes as
  // they are: raw deflate blocks that start and end at a byte boundary
  // between blocks, hold no final block, refer to nothing before their
  // start, and inflate to `length` bytes whose CRC-32 (GZIP) or Adler-32
  // (ZLIB) is `check` (record/deflate_runs.h finds such runs in a stream).
  // The block before them ends with a full flush; the next block starts
  // after them as after a full flush. Nothing here checks them: the caller
  // checks the stream it made (the rewrite inflates it before using it).
  absl::Status AddDeflated(std::string* deflated, uint64_t length, uint32_t check);
  // Ends the stream (the last block, the trailer) and hands every byte left
  // to the sink. Call once; AddBlock after it fails.
  absl::Status Finish();

  // Input bytes taken so far.
  uint64_t input_bytes() const { return input_; }

 private:
  struct Block;
  struct Pipeline;
  // The GZIP or ZLIB header, before the first bytes.
  absl::Status WriteHeader();
  // Hands `held_` to the workers in pieces (ending the stream with it when
  // `last`).
  absl::Status SubmitHeld(bool last);
  // Writes the oldest piece's bytes to the sink and joins its checksum.
  absl::Status WriteFront();
  absl::Status Emit(absl::string_view bytes);

  const source::Codec codec_;
  const int level_;
  const std::string name_;
  Sink sink_;
  std::unique_ptr<Pipeline> pipe_;
  std::string held_;  // the newest block: deflated once it is known whether it is the last
  bool header_written_ = false;
  bool finished_ = false;
  absl::Status status_;
  uint64_t input_ = 0;
  uint64_t written_in_ = 0;  // input bytes of the pieces handed to the sink
  uint32_t check_;           // CRC-32 (GZIP) or Adler-32 (ZLIB) of those bytes
};

}  // namespace tfrecordfs::record

#endif  // TFRECORDFS_RECORD_DEFLATE_H_
