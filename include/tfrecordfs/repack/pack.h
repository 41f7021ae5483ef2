// The pack engine: staged record folders -> new TFRecord shards, crash-safe.
//
// Used by the mount on unmount (packing its staging store) and by the offline
// `tfrecordfs pack DIR OUTPUT_DIR` command. The crash-safety protocol, its
// journal and the recovery rules are in repack/journal.h; Pack is in
// pack.cc, Recover in recover.cc.
//
// What Pack does, in order:
//   0. Recover(journal_path, records_dir): finish or undo an interrupted pack.
//   1. Pass 1: list the record folders (every direct subdirectory of
//      records_dir, in bytewise name order; hidden names and names ending in
//      '~' skipped; plain files ignored), build each payload with
//      staging::PayloadFromFolder and keep its length and CRC. A folder that
//      does not build is reported in PackReport::left with the reason and
//      stays staged. Split the valid records into shards in name order: a
//      shard closes before its framed size would exceed shard_size, but
//      always holds at least one record. With no valid record nothing is
//      written. If any final shard name exists in output_dir, the pack is
//      refused before anything is written.
//   2. Write the journal (PLANNED); for each shard write `.<final>.tmp` with
//      a ShardWriter, rebuilding every payload from its folder and checking
//      it against pass 1 (a folder edited in between fails the pack), fsync,
//      check the file's size and framing, rename to `<final>` (never over an
//      existing file), fsync the directory.
//   3. Rewrite the journal as COMMITTED (the commit point).
//   4. With remove_packed: delete the packed folders, fsync records_dir.
//   5. Delete the journal.
//
// Shard names: `<prefix>-<i>-of-<N>.tfrecord`, i and N printed with at least
// five digits (`staged-20240102T030405-00000-of-00002.tfrecord`). Compressed
// shards add the codec's suffix: `.tfrecord.gz` (GZIP: the `.gz` that TFX
// and tf.data users glob for) and `.tfrecord.zlib` (ZLIB has no common
// suffix; ".zlib" says what it is).
//
// Compression (PackOptions::compression): GZIP or ZLIB shards are one
// member / stream each, written by record::ShardWriter with a full flush
// every record::kFlushEvery framed bytes. shard_size still bounds the
// uncompressed (framed) bytes, so a shard holds the same records whatever
// the codec. The check after the write (step 2) decompresses the temp file
// through the source layer (source::ScanCompressed, then every record read
// back with its CRCs through an InflateSource) before the rename.
//
// Errors: if anything fails before the commit point (ENOSPC, EACCES, EIO, a
// changed folder...), the temp file and every shard of this pack already in
// place are removed, the journal is deleted and PackReport::status says what
// failed, naming the file; staging is untouched. If removing the packed
// folders fails after the commit point, the journal stays (COMMITTED) so that
// the next Recover finishes the job, and status says so.
//
// Test hook (fault injection): when the environment variable
// TFRECORDFS_FAULT names one of these points, the process kills itself with
// SIGKILL when it gets there, so tests can check recovery from every step:
//   after_journal    the PLANNED journal is durable, no shard written yet
//   mid_shard        half of the first shard's records handed to the writer
//   after_shard:K    K shards renamed into place (K >= 1)
//   before_commit    all shards in place, journal still PLANNED
//   after_commit     journal COMMITTED, no folder deleted yet
//   mid_delete       the first packed folder deleted
// Unset (the normal case) costs one getenv per pack.
//
// Thread-safety: Pack and Recover must not run concurrently on the same
// records_dir / journal; nothing else is shared.
#ifndef TFRECORDFS_REPACK_PACK_H_
#define TFRECORDFS_REPACK_PACK_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/arrayrecord/writer.h"
#include "tfrecordfs/source/shard_source.h"
#include "tfrecordfs/staging/record_folder.h"

namespace tfrecordfs::repack {

inline constexpr uint64_t kDefaultShardSize = uint64_t{128} << 20;

struct PackOptions {
  // Each direct subdirectory is one record, packed in name order (bytewise).
  // Hidden names and names ending in '~' are skipped.
  std::string records_dir;
  // Must exist. The mount defaults it to its first source directory.
  std::string output_dir;
  // Shard file name prefix. Empty: "staged-" + UTC yyyymmddThhmmss. Must not
  // contain '/' or start with '.'.
  std::string prefix;
  // A shard closes before its framed size would exceed this (a single larger
  // record still gets a shard of its own). Must be > 0.
  uint64_t shard_size = kDefaultShardSize;
  // Where the pack journal lives. The staging store puts it beside
  // records_dir; empty means `<output_dir>/.tfrecordfs-pack.journal`.
  std::string journal_path;
  // A file holding space set aside for the journal on its file system (the
  // staging store's journal.reserve, see staging/layout.h), or empty. It is
  // deleted just before the journal is first written, so that a store whose
  // file system filled up still has room for the journal.
  std::string journal_reserve;
  // Delete the packed folders after the commit. The offline `pack` command
  // sets false: it never deletes its input.
  bool remove_packed = true;
  // How new shards are stored. The mount defaults it to its sources' codec
  // when every source shard has the same one (kNone otherwise); the offline
  // `pack` command to kNone.
  source::Codec compression = source::Codec::kNone;
  // With compression kArrayRecord: the files are ArrayRecord files
  // (`<prefix>.array_record-<i>-of-<N>`, as TFDS names them) written with
  // these options; the check after the write reads every chunk back
  // (hashes, each record's CRC32C against pass 1's). The mount sets them
  // to its ArrayRecord files' (arrayrecord::OptionsOfFiles).
  arrayrecord::WriterOptions array_record;
  // What the shards say about feature names (see staging::PayloadFromFolder;
  // not owned). Null: nothing known. Must answer the same way on every call
  // during one pack.
  naming::FeatureTypes* types = nullptr;
};

struct ShardWritten {
  std::string path;  // output_dir/<final name>
  uint64_t records = 0;
  uint64_t bytes = 0;       // framed (uncompressed) bytes
  uint64_t file_bytes = 0;  // the file's size (== bytes for a plain shard)
  source::Codec codec = source::Codec::kNone;
};

struct LeftStaged {
  std::string record;  // folder name inside records_dir
  std::string reason;
};

// Numeric files packed with a kind read from their content alone
// (staging::InferredKind): the same file path of several records, one kind.
struct InferredFile {
  std::string file;  // path in the record folder
  example::Kind kind = example::Kind::kNone;
  std::vector<std::string> records;  // folder names, in pack order
};

struct PackReport {
  std::vector<ShardWritten> shards;  // empty when the pack failed
  std::vector<LeftStaged> left;      // invalid records, still staged
  // Kinds the pack inferred (neither the shards nor a kind xattr knew the
  // feature: a folder copied by `cp -r`), by file and kind, in file order.
  // Said in Summary() so that a kind that was only guessed is never silent.
  std::vector<InferredFile> inferred;
  absl::Status status;  // OK unless the pack failed
  // Human-readable, several lines: the shards written with their record
  // counts and sizes, the records left staged and why, the error if any.
  std::string Summary() const;
};

// Packs as described above. Never throws; the result says what happened.
PackReport Pack(const PackOptions& options);

// Finishes or undoes a pack interrupted by a crash, per the journal at
// `journal_path` (see journal.h): PLANNED -> delete its shards and temp
// files; COMMITTED -> delete its record folders still in `records_dir`
// (unless it was an offline pack). Then deletes the journal. No journal: OK,
// nothing done. Idempotent: a crash during Recover is recovered by the next
// one. Fails without touching anything when the journal is damaged, when it
// belongs to a different records_dir, or when a COMMITTED journal's shard is
// missing (deleting the staged records then would lose them); a human must
// look then. Run at mount before serving, and at the start of Pack.
// `records_dir` must name the directory the pack was run on (compared after
// resolving symlinks).
absl::Status Recover(const std::string& journal_path, const std::string& records_dir);

// When the folder `dir` holds ArrayRecord files (recognised by their
// riegeli signature) and no file named as a TFRecord shard (`.tfrecord` in
// its name): the options new files there are written with
// (arrayrecord::OptionsOfFiles of those files). nullopt otherwise, also
// when `dir` does not exist. The offline `pack` packs into that format
// when no --compression is given.
std::optional<arrayrecord::WriterOptions> ArrayRecordDatasetIn(const std::string& dir);

// OK when `prefix` can start a shard name: not empty, no '/' or NUL, no
// leading '.'.
absl::Status ValidatePrefix(absl::string_view prefix);

// `<prefix>-<index>-of-<count>.tfrecord` with five-digit numbers, plus
// ShardSuffix(codec); a prefix that ends in ".tfrecord" (TFDS's
// "<dataset>-<split>.tfrecord") gives TFDS's own names,
// `<prefix>-<index>-of-<count>` plus ShardSuffix(codec).
std::string ShardName(absl::string_view prefix, uint64_t index, uint64_t count,
                      source::Codec codec = source::Codec::kNone);
// "" for kNone, ".gz" for kGzip, ".zlib" for kZlib, ".snappy" for kSnappy.
absl::string_view ShardSuffix(source::Codec codec);

// "staged-<UTC time, %Y%m%dT%H%M%S>": the shard name prefix a pack uses
// when PackOptions::prefix is empty (and the bucket upload's).
std::string DefaultPrefix();

}  // namespace tfrecordfs::repack

#endif  // TFRECORDFS_REPACK_PACK_H_
