// Rewriting an ArrayRecord file with its edits: step 2 of repack/rewrite.h
// for a shard whose codec is kArrayRecord (the journal, the temp file and
// its rename, recovery and TFDS metadata are rewrite.cc's, as for every
// shard). Internal to repack.
//
// The new file is in the old one's format: its footer's writer options
// string is kept as it was (arrayrecord::ParseOptionsText reads the
// compression, level and pad_to_block_boundary from it), and its records
// are grouped G to a chunk, where G is what the reference reader
// (array_record_reader.cc) finds record i with: the first chunk's record
// count (chunk i / G holds record i, so every chunk but the last must hold
// exactly G), or the options' group_size for a file of one chunk. Its
// records are the old file's in order, deleted ones left out, edited ones
// replaced by their new payload (already spliced: rewrite.cc), added ones
// appended.
//
// What is kept byte for byte: a chunk of the new file that holds exactly
// the records of a chunk of the old one, none of them edited, is that
// chunk: its 40 header bytes and its data unchanged. Only the 24-byte block
// headers every 64 KiB around it differ where the chunk now begins
// elsewhere (riegeli's block headers hold the distances to the chunk's
// begin and end, so they cannot be kept when an earlier chunk changes
// size), and the padding after it. Every other chunk is encoded afresh with
// the file's compression and level; the records in it keep their payload
// bytes (only an edited record's payload is new). So with group size 1 (the
// size Grain recommends for random access, and what reshard writes by
// default) every chunk but the edited ones is kept; with larger groups,
// chunks before the first deletion and untouched chunks after edits that
// delete nothing are kept, and a deletion re-encodes the chunks after it
// (their records move one place towards the front: the reference reader
// needs every chunk full).
//
// Refused (FailedPrecondition, the shard left as it was, its edits
// pending): a riegeli file without an ArrayRecord footer (only its chunk
// walk found its records), a footer whose options say transposed chunks.
//
// Thread-compatible.
#ifndef TFRECORDFS_SRC_REPACK_ARRAYRECORD_REWRITE_H_
#define TFRECORDFS_SRC_REPACK_ARRAYRECORD_REWRITE_H_

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tfrecordfs/arrayrecord/format.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/staging/edits.h"

namespace tfrecordfs::repack {

// What the check after the write expects of each chunk of the new file.
struct ExpectedArrayRecord {
  struct ChunkExpectation {
    bool copied = false;
    arrayrecord::ChunkHeader header;  // copied: the old chunk's header
    uint64_t source_offset = 0;       // copied: where it was in the old file
    std::vector<uint32_t> crcs;       // encoded: each record's CRC32C, in order
  };
  std::vector<ChunkExpectation> chunks;
  std::string options_text;  // the footer's writer options
  uint64_t records = 0;
};

struct ArrayRecordRewriteCounts {
  uint64_t kept = 0, changed = 0, added = 0, deleted = 0;
  uint64_t chunks_copied = 0, chunks_encoded = 0;
  int64_t bytes_delta = 0;  // payload bytes added (TFDS's numBytes)
  uint64_t file_bytes = 0;
};

// Writes the new file into `out` (`temp` in messages; not fsync'd) from the
// ArrayRecord file at `source` and its edits (`deleted` record indexes,
// `edits`' replaced and added payloads), as described at the top.
// `half_way` (may be null) is called once, when half of the new file's
// records are written (the fault point rewrite_mid_shard). Errors name the
// file and, for a chunk that does not read back, its byte offset.
absl::Status WriteArrayRecordRewrite(const std::string& source, const std::set<uint64_t>& deleted,
                                     const staging::ShardEdits& edits, UniqueFd out,
                                     const std::string& temp, const std::function<void()>& half_way,
                                     ArrayRecordRewriteCounts* counts,
                                     ExpectedArrayRecord* expected);

// The check of the written file (after its fsync began, before its
// rename): its footer read back (options string as expected), every chunk
// read with its block headers' and its own hashes checked, copied chunks
// with their old header (so their data hash: the same bytes), encoded ones
// decoded and each record's CRC32C compared, and the record count. DataLoss
// naming `temp` and the chunk's byte offset otherwise.
absl::Status CheckArrayRecordRewrite(const std::string& temp, const ExpectedArrayRecord& expected);

}  // namespace tfrecordfs::repack

#endif  // TFRECORDFS_SRC_REPACK_ARRAYRECORD_REWRITE_H_
