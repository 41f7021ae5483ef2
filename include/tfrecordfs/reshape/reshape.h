// Reshaping datasets offline: repair (a copy of a shard without its damaged
// records) and reshard (all records of many shards into N new ones, in
// source order or a seeded global shuffle). The `repair` and `reshard`
// commands are thin adapters over this; nothing here knows about a mount.
//
// Input: shards as the scan finds them (an index::ShardIndex built by the
// header walk, which resynchronises after damage exactly as a mount's does,
// and the ShardSource of its bytes). Every record is read back whole with
// its framing and both CRCs checked (a damaged one is described in
// record::ReadRecord's words) and its payload copied byte for byte; an
// intact record of a plain shard copied into plain output is copied as its
// framing, which is the same bytes the writer would produce.
//
// Output: every file is written under a temporary name in its final
// directory (`.<name>.tmp`) and renamed to its final name only once it is
// complete (closed and fsynced), never over an existing file
// (RenameNoReplace). A run that fails or is cancelled removes its temporary
// files: no partial file ever carries a final name.
//
// Cancellation: `Control::cancel`, when set, is polled between records;
// once it reads true the call removes its temporary files and returns
// Cancelled (the commands set it from SIGINT/SIGTERM).
//
// Speed: an output file's fsync runs on a ShardSyncer's thread while the
// next file is written (`cat` of the shards into one file fsyncs once, at
// the end), and a plain shard's checked records are written on a copier
// thread while the next ones are read and checked: reshard copies them file
// to file (copy_file_range), repair writes the bytes it read and checked
// (so that it reads its input once: /proc's rchar counts a copy_file_range
// as a second read). On the benchmark machine (2 GB of 100 KB records in 32 shards,
// warm page cache, scripts/bench --reshape-only, in the same rounds as
// `cat` + fsync) these took repair from 0.67x to 0.81x of cat's throughput
// and an in-order reshard from 0.77x to 0.95x; with each record checked in
// a kept buffer (record::ReadRecordInto) and one directory fsync per reshard, 1.45x and
// 1.55x (the code before: 0.74x and 0.86x that hour).
//
// Thread-safety: the functions keep no state and may run concurrently on
// different outputs. A call reads and checks on its caller's thread; the
// threads it starts (a copier, a syncer) end before it returns. `progress`
// and `mid_output` are called from the caller's thread.
#ifndef TFRECORDFS_RESHAPE_RESHAPE_H_
#define TFRECORDFS_RESHAPE_RESHAPE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/arrayrecord/writer.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/record/writer.h"
#include "tfrecordfs/reshape/plan.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::reshape {

inline constexpr uint64_t kNoRecord = std::numeric_limits<uint64_t>::max();

// A record (or a span of bytes between records) left out of the output.
struct Dropped {
  std::string path;             // the input shard
  uint64_t record = kNoRecord;  // kNoRecord: damage between or after records
  uint64_t offset = 0;          // byte offset (uncompressed, for a compressed shard)
  std::string reason;           // "data CRC mismatch (stored ..., computed ...)"
};

struct Control {
  const std::atomic<bool>* cancel = nullptr;
  // (records, framed input bytes) as they are read.
  std::function<void(uint64_t, uint64_t)> progress;
  // reshard: an output file was written whole (then fsynced and renamed
  // with the others); a progress bar's count of shards.
  std::function<void()> output_done;
  // Test hook: called once, after half of the records of the first output
  // file were appended or queued for the copier (that file then exists
  // under its temporary name).
  std::function<void()> mid_output;
};

// `.<name>.tmp` beside `final_path`.
std::string TempPathFor(absl::string_view final_path);

// One output file in the making: a ShardWriter on TempPathFor(final_path),
// locked (flock, LOCK_EX) while it is written so that RemoveStaleTemps of
// another run leaves it alone. Destroyed before Commit(), it closes and
// removes the temporary file.
class PendingShard {
 public:
  // Creates (truncating) the temporary file. Does not check `final_path`.
  // A `codec` of kArrayRecord writes an ArrayRecord file with `array_record`.
  static absl::StatusOr<std::unique_ptr<PendingShard>> Create(
      std::string final_path, source::Codec codec,
      const arrayrecord::WriterOptions& array_record = {});
  ~PendingShard();
  PendingShard(const PendingShard&) = delete;
  PendingShard& operator=(const PendingShard&) = delete;

  absl::Status Append(absl::string_view payload) {
    return ar_ ? ar_->Append(payload) : writer_->Append(payload);
  }
  // Plain output: `length` bytes of `fd` at `offset` holding `records` whole
  // framed records the caller checked (record::ShardWriter::AppendFramedRange).
  absl::Status AppendFramedRange(int fd, uint64_t offset, uint64_t length, uint64_t records) {
    return ar_ ? ar_->AppendFramedRange(fd, offset, length, records)
               : writer_->AppendFramedRange(fd, offset, length, records);
  }
  // Plain TFRecord output: `framed`, `records` whole framed records the
  // caller read and checked, written as they are
  // (record::ShardWriter::AppendFramedBytes).
  absl::Status AppendFramedBytes(absl::string_view framed, uint64_t records);
  // Writes out what is buffered (and ends a compressed stream): file_bytes()
  // is final. Optional before Finish(); nothing can be appended after it.
  absl::Status Seal() { return ar_ ? ar_->Seal() : writer_->Seal(); }
  // Starts the kernel's writeback of the bytes written to the file since
  // the last call, once they are at least `min_bytes` (sync_file_range(2)
  // SYNC_FILE_RANGE_WRITE: no wait, no durability). Called behind a writer as it
  // goes, it leaves Finish()'s fsync the last few MiB to wait for, not the
  // whole file: a `--part K/N` process ends with that fsync (issue 37's
  // parts; docs/bench.md). Durability is still Finish()'s alone. Best
  // effort (a failure is ignored: the fsync reports write errors). Call
  // from the thread that appends.
  void StartWriteback(uint64_t min_bytes);
  // Closes and fsyncs the temporary file (it stays under its temporary name).
  absl::Status Finish();
  // After Finish(): renames it to its final name (never over an existing
  // file) and, with `sync_dir`, fsyncs the directory (without, the caller
  // does, once for many renames).
  absl::Status Commit(bool sync_dir = true);

  const std::string& final_path() const { return final_path_; }
  uint64_t records() const { return ar_ ? ar_->records() : writer_->records(); }
  uint64_t bytes() const { return ar_ ? ar_->bytes() : writer_->bytes(); }
  uint64_t file_bytes() const { return ar_ ? ar_->file_bytes() : writer_->file_bytes(); }
  // The file's CRC32C as written (record::ShardWriter::file_crc32c);
  // nullopt for ArrayRecord output or ranges copied by copy_file_range
  // (AppendFramedBytes keeps it).
  std::optional<uint32_t> file_crc32c() const {
    return ar_ ? std::nullopt : writer_->file_crc32c();
  }

 private:
  PendingShard(std::string final_path, std::string temp_path,
               std::unique_ptr<record::ShardWriter> writer,
               std::unique_ptr<arrayrecord::FileWriter> ar);
  std::string final_path_, temp_path_;
  std::unique_ptr<record::ShardWriter> writer_;  // or
  std::unique_ptr<arrayrecord::FileWriter> ar_;
  UniqueFd writeback_fd_;           // the temporary file again, for StartWriteback
  uint64_t writeback_started_ = 0;  // bytes [0, this) handed to the kernel's writeback
  bool finished_ = false, committed_ = false;
};

// Finishes output files (PendingShard::Finish: flush, fsync, close) on a
// thread of its own, one at a time in the order they were handed over, so
// that the next file is written while the last one's fsync waits for the
// disk. With `commit`, each file is then renamed to its final name
// (PendingShard::Commit), only once its own fsync succeeded, in the same
// order; without, the files come back from Wait() finished, for the caller
// to commit. With `commit` and not `sync_dirs`, a rename's directory is not
// fsynced: the caller fsyncs each directory once after Wait() (one journal
// commit for all the renames in it instead of one per file: about 7 ms
// each on ext4).
//
// A file whose Finish or Commit fails is removed (its temporary name) and
// reported by Wait() and error(). Destroying the syncer waits for the fsync
// under way; every file not yet committed (or, without `commit`, not yet
// returned by Wait) is then removed: a cancelled or failed run leaves no
// temporary file, and nothing under a final name that was not fsynced.
//
// Memory: at most `depth` files are in the syncer's hands (queued or being
// finished); Add waits for room. Each holds no buffer once sealed, and the
// page cache holds at most the dirty pages of those files and the one being
// written.
//
// Thread-safety: Add, Wait and error are called from one thread (the one
// writing the files); a file handed to Add is touched by the syncer's thread
// only, until Wait returns it.
class ShardSyncer {
 public:
  struct Synced {
    std::string final_path;
    absl::Status status;                  // Finish's, then Commit's
    std::unique_ptr<PendingShard> shard;  // null when status is not OK
  };

  explicit ShardSyncer(bool commit, size_t depth = 1, bool sync_dirs = true);
  ~ShardSyncer();
  ShardSyncer(const ShardSyncer&) = delete;
  ShardSyncer& operator=(const ShardSyncer&) = delete;

  // Hands `shard` (written, ideally sealed) over; waits while `depth` files
  // are in hand.
  void Add(std::unique_ptr<PendingShard> shard);
  // Waits until every file handed over is done; returns them in the order
  // they were added since the last Wait, with their status.
  std::vector<Synced> Wait();
  // The first failure of a file finished so far (OK if none): its message
  // names the file.
  absl::Status error() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// ---- repair ----

struct RepairResult {
  std::string output;         // the file written
  uint64_t records_in = 0;    // records the index holds
  uint64_t records_kept = 0;  // records written
  uint64_t bytes = 0;         // framed bytes written (uncompressed)
  uint64_t file_bytes = 0;    // the output file's size
  // The output file's CRC32C (unmasked), computed from the bytes as they
  // were checked or written, never by reading the output back: a plain
  // shard's runs copied file to file are the checked records' framing, in
  // order. nullopt when unknown.
  std::optional<uint32_t> crc32c;
  std::vector<Dropped> dropped;  // by offset
};

// Copies every record of the shard `src` (indexed by `idx`) that reads back
// intact to `output` (same codec as the input), in order; a record whose
// read fails (length or data CRC, framing) is left out and listed, and so
// is damage the header walk met outside any record (stray bytes, a
// compressed stream that stops inflating). Payloads that are not Examples
// are kept: repair mends framing, not content. `output` must not exist
// (AlreadyExists otherwise, and nothing is written). Errors: I/O errors
// (naming the file), Cancelled.
//
// With `syncer` (made with commit = true), the written and sealed file is
// handed to it instead of being fsynced and renamed before the call
// returns: `output` then exists once syncer->Wait() reports it done, and an
// fsync or rename error is reported there (for `output`), not here. The
// result describes the file as written.
absl::StatusOr<RepairResult> RepairShard(const index::ShardIndex& idx,
                                         const source::ShardSource& src, const std::string& output,
                                         const Control& control = {},
                                         ShardSyncer* syncer = nullptr);

// ---- reshard ----

// The temporary files (TempPathFor) of reshard outputs named for `prefix`
// (`.<prefix>-NNNNN-of-NNNNN.tfrecord[...].tmp`) in `dir` that no running
// process writes (an flock is free): what a run killed midway (SIGKILL, a
// power cut) left. Removes them and returns their paths. Errors: the
// directory cannot be listed (a missing one has none).
absl::StatusOr<std::vector<std::string>> RemoveStaleTemps(const std::string& dir,
                                                          absl::string_view prefix);

struct Input {
  const index::ShardIndex* index;
  const source::ShardSource* source;
  // The shard's path in a mount of the SOURCEs (scan::ScannedShard::
  // mount_path): its identity in a shuffle's order (shuffle.h), the same
  // on every machine whatever the SOURCE's path there. Empty: the index's
  // path.
  std::string name = {};
};

struct ReshardOptions {
  std::string output_dir;  // must exist
  std::string prefix = "data";
  // Exactly one of: `shards` > 0 (records split as evenly as possible,
  // earlier shards taking the remainder), or `shard_size` > 0 (a shard
  // closes before its framed bytes would exceed it; at least one record).
  uint64_t shards = 0;
  uint64_t shard_size = 0;
  source::Codec codec = source::Codec::kNone;
  // With codec kArrayRecord: the ArrayRecord files' group size and
  // compression.
  arrayrecord::WriterOptions array_record;
  bool shuffle = false;
  uint64_t seed = 0;
  // Leave damaged records out (listed in the report) instead of failing.
  bool skip_damaged = false;
  // In source order records are copied one at a time (plain shards into
  // plain output: in runs of adjacent checked records, file to file, as
  // repair copies); the commands size the compressed sources' block cache
  // by this. (Until issue 37 a shuffle read its records in batches of this
  // many bytes; it now runs in the two passes of shuffle.h, within
  // `memory`.)
  uint64_t buffer_bytes = uint64_t{64} << 20;
  // A shuffle's memory budget (shuffle.h: runs of half of it; buckets read
  // in slices of at most half of it).
  uint64_t memory = uint64_t{512} << 20;
  // Write only this part's output shards (`--part K/N`): the output shards
  // of the whole reshard (the same order, the same boundaries, the same
  // names, whatever N) split into N contiguous runs balanced by their
  // framed bytes (SplitByWeight), part K writing run K. So the parts'
  // files together are byte for byte the files one process writes. Damage
  // the header walk met between records is listed by part 0 only.
  std::optional<PartSpec> part;
};

struct OutputShard {
  std::string path;
  uint64_t records = 0, bytes = 0, file_bytes = 0;
  std::optional<uint32_t> crc32c = std::nullopt;  // of the file, when known as written
};

struct ReshardReport {
  std::vector<OutputShard> shards;
  uint64_t records = 0;          // written
  std::vector<Dropped> skipped;  // with skip_damaged
  // Temporary files an interrupted earlier run left in output_dir, removed
  // before writing (RemoveStaleTemps).
  std::vector<std::string> stale_removed;
};

// Writes every record of `inputs` (in the given order, or shuffled: the
// two passes of shuffle.h in one process, its runs in a work folder under
// output_dir/.tfrecordfs-parts removed at the end) into
// options.output_dir/<prefix>-<i>-of-<N>.tfrecord[.gz|.zlib]
// (repack::ShardName), after removing what an interrupted run with the
// same prefix left there (RemoveStaleTemps; listed in the report). All
// output files are written under temporary names
// and renamed together once every one is complete; if any final name
// exists beforehand nothing is written (AlreadyExists). Each output file
// holds the records' framing as TensorFlow writes it, however the records
// were copied. Errors: a damaged
// record without skip_damaged (DataLoss naming the shard, record and
// offset; nothing is left under a final name), damage between records the
// header walk met (same), I/O errors, Cancelled.
absl::StatusOr<ReshardReport> Reshard(const std::vector<Input>& inputs,
                                      const ReshardOptions& options, const Control& control = {});

}  // namespace tfrecordfs::reshape

#endif  // TFRECORDFS_RESHAPE_RESHAPE_H_
