// Runs of an existing GZIP / ZLIB shard whose compressed bytes can be
// copied as they are into another stream (the rewrite of a compressed
// shard: only the blocks around an edit are deflated again).
//
// A run is a whole number of deflate blocks of the old stream that starts
// and ends at a byte boundary between blocks, on a record boundary of the
// framed bytes, holds no final block, and refers to nothing before its
// start: inflated from a fresh state (no window) it gives exactly the bytes
// it gave in the old stream. Such bytes can follow any point of a new
// stream where a block ends at a byte boundary (after a full flush, or
// after another run), and what follows them can start there too: zcat,
// Python's gzip module and TensorFlow see one ordinary stream.
//
// Every shard ShardWriter wrote has such a point after each kFlushEvery
// block (record/writer.h: a full flush at the first record boundary after
// it), so a shard this project wrote splits into runs of about 1 MiB of
// framing. A stream with no byte-aligned block end at a record boundary
// (gzip's, TensorFlow's) has one candidate run, from its start to its final
// block, which is not a run: nothing of it is copied. A candidate whose
// fresh inflate meets a reference before its start ("invalid distance too
// far back": pigz's sync-flushed pieces, primed with the bytes before them)
// is inflated again with its window and is not a run either: whether a run
// is independent is found by inflating it, never assumed from who wrote it.
//
// Cost: one inflate of the old stream (zlib, on the caller's thread) and the
// CRC-32 / Adler-32 of its output (ISA-L), plus a second inflate of each
// candidate that turned out to depend on its window, up to the reference
// that showed it. A candidate that passes 16 MiB of framing and 8 records
// without ending stops the scan there (a stream without flushes costs the
// inflate of its first 16 MiB, not of the whole shard).
#ifndef TFRECORDFS_RECORD_DEFLATE_RUNS_H_
#define TFRECORDFS_RECORD_DEFLATE_RUNS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::record {

struct DeflateRun {
  uint64_t file_begin = 0, file_end = 0;  // compressed bytes of the file
  uint64_t begin = 0, end = 0;            // the framed bytes they hold (record offsets)
  uint32_t check = 0;                     // CRC-32 (GZIP) or Adler-32 (ZLIB) of those framed bytes
};

// The runs of the GZIP member or ZLIB stream in `fd` (`path`, for
// messages), in order, none empty; `offsets`: the shard's record offsets
// (uncompressed, ascending, its end last), where runs may start and end.
// Reading stops at the end of the first member / stream, or quietly at the
// first damage (what follows has no runs: the caller reads it through its
// source, which reports the damage); only a failed read of the file is an
// error.
absl::StatusOr<std::vector<DeflateRun>> FindDeflateRuns(int fd, const std::string& path,
                                                        source::Codec codec,
                                                        absl::Span<const uint64_t> offsets);

}  // namespace tfrecordfs::record

#endif  // TFRECORDFS_RECORD_DEFLATE_RUNS_H_
