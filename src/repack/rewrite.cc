#include "tfrecordfs/repack/rewrite.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/repack/arrayrecord_rewrite.h"
#include "src/repack/check_shard.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/fault_points.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/example/splice.h"
#include "tfrecordfs/record/deflate_runs.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/record/writer.h"
#include "tfrecordfs/repack/bucket_rewrite.h"
#include "tfrecordfs/repack/journal.h"
#include "tfrecordfs/repack/tfds_info.h"
#include "tfrecordfs/staging/edits.h"
#include "tfrecordfs/tensor/tensor.h"

namespace tfrecordfs::repack {
namespace {

struct Paths {
  std::string file;  // what the new shard is renamed over
  std::string dir;   // file's folder
  std::string temp;  // the new shard until then, in dir
};

// The file a shard's name leads to: a symlinked shard is rewritten at its
// target (the link stays the link it was, and sees the new records), the
// temp file beside the target (rename(2) stays within one folder).
Paths PathsOf(const std::string& shard) {
  Paths p;
  p.file = shard;
  struct stat st;
  if (::lstat(shard.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    if (char* real = ::realpath(shard.c_str(), nullptr)) {
      p.file = real;
      std::free(real);
    }
  }
  const size_t slash = p.file.rfind('/');
  p.dir = p.file.substr(0, slash);
  p.temp = absl::StrCat(p.dir, "/", TempShardName(p.file.substr(slash + 1)));
  return p;
}

// Gives the new shard `fd` (at `temp`) the old one's owner and group
// (`was`); its permission bits follow once it is written (KeepMode), so it
// stays 0600 until then. A daemon that may not give the file
// its owner (neither root nor the owner) leaves the shard as it was: a
// commit never hands a shard to another user.
absl::Status KeepOwner(int fd, const std::string& temp, const std::string& shard,
                       const struct stat& was) {
  struct stat now;
  if (::fstat(fd, &now) != 0) return ErrnoError(errno, temp);
  if ((now.st_uid != was.st_uid || now.st_gid != was.st_gid) &&
      ::fchown(fd, was.st_uid, was.st_gid) != 0) {
    const int err = errno;
    return PosixError(err, absl::StrFormat("%s: cannot give the rewritten shard its owner and "
                                           "group %d:%d (%s; the daemon runs as %d:%d): commit "
                                           "as root or as the shard's owner",
                                           shard, was.st_uid, was.st_gid, std::strerror(err),
                                           ::geteuid(), ::getegid()));
  }
  return absl::OkStatus();
}

// The old shard's permission bits (set-id bits included) on the new one.
absl::Status KeepMode(const std::string& temp, const struct stat& was) {
  if (::chmod(temp.c_str(), was.st_mode & 07777) != 0) {
    return ErrnoError(errno, absl::StrCat("chmod ", temp));
  }
  return absl::OkStatus();
}

// The payload bytes of record i (framing: 12 bytes before, 4 after).
int64_t RecordDataBytes(const std::vector<uint64_t>& offsets, uint64_t i) {
  return static_cast<int64_t>(offsets[i + 1] - offsets[i]) - 16;
}

// What depends on a rewritten shard, once it is in place: TFDS's
// dataset_info.json beside it (tfds_info.h: the file prepared before the
// rename, else, in recovery without one, "shardLengths" set to `records`),
// then the caller's `follow` (indexes). Failures are logged: the shard
// itself is committed.
void UpdateMetadata(const std::string& path, std::optional<uint64_t> records,
                    const std::vector<uint64_t>* offsets, index::WalkedShard* walked,
                    const FollowRewrite& follow) {
  auto info = FinishTfdsInfo(path);
  if (info.ok() && !*info && records) info = UpdateTfdsInfo(path, *records, std::nullopt);
  if (!info.ok()) {
    log::Error("rewrote ", path,
               " but could not update its TFDS metadata: ", info.status().message());
  } else if (*info) {
    log::Info("updated ", **info, " for ", path);
  }
  if (follow) follow(path, offsets, walked);
}

absl::StatusOr<staging::Fingerprint> FingerprintOfPath(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoError(errno, path);
  return staging::FingerprintOf(st);
}

// `s` with what to do appended (its errno payload kept), for a failure that
// leaves the shard as it was. Only a system call's error (it carries an
// errno: a full disk, a folder that is not writable) gets the advice to fix
// the machine; a check that failed says what it is itself (CheckFailed).
absl::Status KeptPending(const absl::Status& s) {
  return SetMessage(
      s, absl::StrCat(s.message(), "; the shard is left as it was and its edits are kept pending",
                      ErrnoOf(s) != 0 ? ": fix the cause (free space, a writable folder), then "
                                        "mount and unmount again"
                                      : ""));
}

// A failed check of the file the rewrite wrote (not a system call's error,
// which keeps its errno and its own advice): no free space fixes it.
absl::Status CheckFailed(const absl::Status& s) {
  if (s.ok() || ErrnoOf(s) != 0) return s;
  return SetMessage(s, absl::StrCat(s.message(),
                                    " (the check of the rewritten file failed: an internal error "
                                    "of tfrecordfs or a fault of the machine, not a full disk or "
                                    "an unwritable folder; please report it with this message)"));
}

// Runs `check` (which reads the new file `path` from the page cache) while
// another thread fsyncs the file: both must succeed before the rename.
absl::Status SyncWhileChecking(const std::string& path, absl::FunctionRef<absl::Status()> check) {
  absl::Status synced;
  std::thread syncer([&] {
    auto f = OpenFile(path, O_RDONLY | O_CLOEXEC);
    synced = !f.ok()                  ? f.status()
             : ::fsync(f->get()) != 0 ? ErrnoError(errno, absl::StrCat("fsync ", path))
                                      : absl::OkStatus();
  });
  absl::Status s = check();
  syncer.join();
  s.Update(synced);
  return s;
}

// The check of a plain shard's temp file (step 2 of the top of rewrite.h):
// the writer hands over each piece of the file it has finished (whole
// records; the pieces tile the file from byte 0), and once the copy is
// done a thread reads the pieces back from the file while the file is
// fsynced: every header and data CRC, each piece's record count, and the
// payloads the rewrite wrote itself (edited and added records) byte for
// byte. With Finish's size and record count, this checks what
// CheckWrittenShard checks after the write, plus the edited content.
// Measured on a 2 GB shard (one label edited; 2 CPUs): cp + fsync
// 1.41-1.48 s; this, 1.63-1.75 s; the same check run during the copy,
// 2.0-2.2 s (the copy, in the kernel, took twice as long beside it), and
// with a mapping instead of pread, slower still (page faults). Starting
// each piece's writeback early (sync_file_range) was tried: it throttles
// the copy to the disk's pace and made the commit slower.
//
// Thread-safety: Piece and Finish from the writing thread only.
class PieceCheck {
 public:
  // An expected payload: the record's index within its piece, and its bytes
  // (which must outlive Finish).
  using Expected = std::vector<std::pair<uint64_t, absl::string_view>>;

  explicit PieceCheck(std::string path) : path_(std::move(path)) {}
  PieceCheck(const PieceCheck&) = delete;
  PieceCheck& operator=(const PieceCheck&) = delete;
  ~PieceCheck() { (void)Finish(0, 0); }

  absl::Status Start() {
    auto fd = OpenFile(path_, O_RDONLY | O_CLOEXEC);
    if (!fd.ok()) return fd.status();
    fd_ = *std::move(fd);
    thread_ = std::thread([this] { Run(); });
    return absl::OkStatus();
  }

  // Bytes [begin, end) of the file are written and hold `records` records.
  void Piece(uint64_t begin, uint64_t end, uint64_t records, Expected expected) {
    if (end == begin && records == 0) return;
    MutexLock lock(&mu_);
    pieces_.push_back({begin, end, records, std::move(expected)});
    cv_.Signal();
  }

  // Waits for every piece to be checked. OK when each was, and the pieces
  // tile [0, bytes) with `records` records in all.
  absl::Status Finish(uint64_t bytes, uint64_t records) {
    {
      MutexLock lock(&mu_);
      done_ = true;
      cv_.Signal();
    }
    if (thread_.joinable()) thread_.join();
    MutexLock lock(&mu_);
    if (!status_.ok()) return status_;
    if (checked_bytes_ != bytes || checked_records_ != records) {
      return absl::DataLossError(
          absl::StrCat(path_, ": check after write failed: ", checked_records_, " records in ",
                       checked_bytes_, " bytes checked, expected ", records, " in ", bytes));
    }
    return absl::OkStatus();
  }

 private:
  struct Work {
    uint64_t begin, end, records;
    Expected expected;
  };

  void Run() {
    for (;;) {
      Work w;
      {
        MutexLock lock(&mu_);
        while (!done_) cv_.Wait(&mu_);  // the copy first: see above
        if (pieces_.empty() || !status_.ok()) return;
        w = std::move(pieces_.front());
        pieces_.pop_front();
      }
      absl::Status s = Check(w);
      MutexLock lock(&mu_);
      if (!s.ok()) {
        status_ = s;
        return;
      }
      checked_bytes_ = w.end;
      checked_records_ += w.records;
    }
  }

  absl::Status Check(const Work& w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (w.begin != checked_bytes_) {
      return absl::DataLossError(absl::StrCat(path_, ": check after write: a piece at byte offset ",
                                              w.begin, " after ", checked_bytes_, " checked"));
    }
    if (w.end == w.begin) {
      return w.records == 0 ? absl::OkStatus()
                            : absl::DataLossError(absl::StrCat(path_, ": empty piece"));
    }
    // Record by record through one buffer the size of the largest record
    // (pread: no page faults on a mapping, which cost more than the copy on
    // a paravirtualised guest).
    uint64_t seen = 0;
    size_t next = 0;  // into w.expected
    bool same = true;
    absl::Status framing;
    for (uint64_t pos = w.begin; pos < w.end && framing.ok();) {
      if (w.end - pos < record::kFramingOverhead) {
        framing =
            absl::DataLossError(absl::StrCat(w.end - pos, " stray byte(s) at byte offset ", pos));
        break;
      }
      char header[record::kHeaderSize];
      framing = PreadFull(fd_.get(), header, sizeof header, pos, path_);
      if (!framing.ok()) break;
      auto len = record::ParseHeader(header);
      if (!len.ok() || *len > w.end - pos - record::kFramingOverhead) {
        framing = len.ok() ? absl::DataLossError(absl::StrCat("record at byte offset ", pos,
                                                              " runs past its piece"))
                           : len.status();
        break;
      }
      buffer_.resize(*len + record::kFooterSize);
      framing =
          PreadFull(fd_.get(), buffer_.data(), buffer_.size(), pos + record::kHeaderSize, path_);
      if (!framing.ok()) break;
      const absl::string_view data(buffer_.data(), *len);
      if (DecodeFixed32(buffer_.data() + *len) != crc32c::Mask(crc32c::Value(data))) {
        framing = absl::DataLossError(absl::StrCat("data CRC mismatch at byte offset ", pos));
        break;
      }
      if (next < w.expected.size() && w.expected[next].first == seen) {
        same = same && data == w.expected[next].second;
        ++next;
      }
      ++seen;
      pos += record::kFramingOverhead + *len;
    }
    if (!framing.ok() || seen != w.records || !same || next != w.expected.size()) {
      return absl::DataLossError(
          absl::StrCat(path_, ": check after write failed in bytes ", w.begin, "-", w.end, ": ",
                       !framing.ok()       ? framing.message()
                       : seen != w.records ? absl::StrCat(seen, " records, expected ", w.records)
                                           : "a record written from an edit reads back different"));
    }
    return absl::OkStatus();
  }

  const std::string path_;
  UniqueFd fd_;
  std::string buffer_;  // the thread's
  std::thread thread_;
  Mutex mu_;
  CondVar cv_;
  std::deque<Work> pieces_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  // Written by the thread only (read by Finish after it ends).
  uint64_t checked_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t checked_records_ ABSL_GUARDED_BY(mu_) = 0;
};

// ---- How an edited record's bytes are built ----

// Whether two bytes values hold the same tensor: the mount shows a
// serialized TensorProto as a .png/.npy, and its folder gives back the
// TensorProto tf.io.serialize_tensor writes for that array, which may be
// spelt otherwise than the shard's (*_val fields, a broadcast value).
bool SameTensorValue(absl::string_view original, absl::string_view edited) {
  if (!tensor::IsTensor(original) || !tensor::IsTensor(edited)) return false;
  auto a = tensor::DecodeTensor(original);
  auto b = tensor::DecodeTensor(edited);
  return a.ok() && b.ok() && a->dtype == b->dtype && a->shape == b->shape &&
         a->data(original) == b->data(edited);
}

// Inverts the byte at `offset` of the file at `path` (the fault point
// rewrite_flip_written_byte).
void FlipByte(const std::string& path, uint64_t offset) {
  auto fd = OpenFile(path, O_RDWR | O_CLOEXEC);
  char c;
  if (fd.ok() && ::pread(fd->get(), &c, 1, static_cast<off_t>(offset)) == 1) {
    c = static_cast<char>(~c);
    (void)!::pwrite(fd->get(), &c, 1, static_cast<off_t>(offset));
  }
  log::Warning("TFRECORDFS_FAULT=rewrite_flip_written_byte: flipped byte ", offset, " of ", path);
}

// Step 2 of the top of rewrite.h for an ArrayRecord file (written by
// arrayrecord_rewrite.h): written, given the shard's mode, fsync'd while
// the written file is checked.
absl::Status RewriteArrayRecordShard(const Paths& p, const staging::DeletedShard& d,
                                     const staging::ShardEdits& edits, UniqueFd fd,
                                     const struct stat& was, const FaultPoints& faults,
                                     uint64_t done, RewrittenShard* out, int64_t* delta) {
  ArrayRecordRewriteCounts counts;
  ExpectedArrayRecord expected;
  absl::Status s = WriteArrayRecordRewrite(
      p.file, d.records, edits, std::move(fd), p.temp,
      [&] {
        if (done == 0) faults.At("rewrite_mid_shard");
      },
      &counts, &expected);
  if (s.ok() && faults.Is("rewrite_flip_written_byte")) FlipByte(p.temp, counts.file_bytes / 2);
  if (s.ok()) s = KeepMode(p.temp, was);
  if (s.ok()) {
    s = SyncWhileChecking(p.temp,
                          [&] { return CheckFailed(CheckArrayRecordRewrite(p.temp, expected)); });
  }
  out->kept = counts.kept;
  out->changed = counts.changed;
  out->added = counts.added;
  out->deleted = counts.deleted;
  *delta = counts.bytes_delta;
  if (s.ok()) {
    log::Info(p.file, ": ", counts.chunks_copied, " chunk(s) copied as they were, ",
              counts.chunks_encoded, " encoded");
  }
  return s;
}

// Bytes of kept records of a plain shard copied at once: the check and the
// writeback follow the copy piece by piece.
constexpr uint64_t kPieceBytes = uint64_t{32} << 20;

// Steps 1-4 of the top of rewrite.h for one shard; on failure before the
// rename the temp file is removed and the shard is as it was.
absl::Status RewriteOne(staging::DeletionList* list, const std::string& edits_dir,
                        const std::string& path, const staging::DeletedShard& d,
                        const ShardToRewrite& from, naming::FeatureTypes& types,
                        const FaultPoints& faults, const FollowRewrite& follow, uint64_t done,
                        RewrittenShard* out) {
  auto now = FingerprintOfPath(path);
  if (!now.ok()) return now.status();
  if (!(*now == d.before)) {
    return absl::FailedPreconditionError(
        "the shard changed on disk since its records were edited or deleted; its edits are "
        "kept pending (remove " +
        list->path() + " and the shard's folders in " + edits_dir + " to drop them)");
  }
  const std::string key = staging::ShardKey(path);
  auto edits = staging::ReadShardEdits(edits_dir, key, types);
  if (!edits.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(edits.status().message(),
                     "; nothing of this shard was written: fix that file through a "
                     "read-write mount and unmount again (its edits are kept pending)"));
  }
  KeepWhatEditsDidNotChange(from, &*edits);
  const Paths p = PathsOf(path);
  struct stat was;
  if (::stat(p.file.c_str(), &was) != 0) return KeptPending(ErrnoError(errno, p.file));
  if (was.st_nlink > 1) {
    // rename(2) replaces this name only (as an editor's save does): said in
    // the report, not refused.
    out->note = absl::StrCat("its ", was.st_nlink - 1,
                             " other hard link(s) keep the old records: the new file has this "
                             "name only");
  }
  // Created private, given the old shard's owner now and its mode once checked.
  auto fd = OpenFile(p.temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (!fd.ok()) return KeptPending(fd.status());
  if (auto k = KeepOwner(fd->get(), p.temp, path, was); !k.ok()) {
    ::unlink(p.temp.c_str());
    return KeptPending(k);
  }
  const std::vector<uint64_t>& offsets = *from.offsets;
  absl::Status s;
  int64_t delta = 0;  // payload bytes added (TFDS's numBytes)
  // The new shard's record offsets (uncompressed), as they are written: the
  // mount's index of it and the indexes that follow it need no walk.
  std::vector<uint64_t>& next_offsets = out->offsets;
  next_offsets.clear();
  // A GZIP/ZLIB shard: what the check after write found in the new file.
  index::WalkedShard walked;
  next_offsets.reserve(offsets.size() + edits->added.size());
  if (from.codec == source::Codec::kArrayRecord) {
    // In its own format (arrayrecord_rewrite.h); the new file's index is
    // made by the scan that reopens it (next_offsets stays empty).
    s = RewriteArrayRecordShard(p, d, *edits, *std::move(fd), was, faults, done, out, &delta);
  } else {
    record::ShardWriter writer(*std::move(fd), p.temp, {.codec = from.codec});
    // A plain shard is checked piece by piece (PieceCheck): the
    // piece not yet handed over starts at byte piece_begin, record
    // piece_first of next_offsets.
    const bool plain = from.codec == source::Codec::kNone;
    PieceCheck check(p.temp);
    if (plain) s = check.Start();
    uint64_t piece_begin = 0;
    size_t piece_first = 0;
    PieceCheck::Expected expected;
    // A GZIP / ZLIB shard: the runs of its stream that may be copied as
    // they are (record/deflate_runs.h); a run none of whose records was
    // edited or deleted is, the rest is inflated and deflated again.
    std::vector<record::DeflateRun> runs;
    size_t next_run = 0;
    UniqueFd old_fd;
    uint64_t runs_copied = 0, run_bytes = 0;
    std::string run_buffer;
    record::RecordBuffer record;  // a kept record deflated again
    if (s.ok() && (from.codec == source::Codec::kGzip || from.codec == source::Codec::kZlib)) {
      auto f = OpenFile(p.file, O_RDONLY | O_CLOEXEC);
      auto found = f.ok() ? record::FindDeflateRuns(f->get(), p.file, from.codec, offsets)
                          : absl::StatusOr<std::vector<record::DeflateRun>>(f.status());
      if (found.ok()) {
        runs = *std::move(found);
        old_fd = *std::move(f);
      } else {
        log::Warning(p.file, ": every record is deflated again: ", found.status().message());
      }
    }
    // Appends the run that starts at record i when none of its records was
    // edited or deleted: the index of the record after it, else i.
    auto copy_run = [&](uint64_t i) -> uint64_t {
      while (next_run < runs.size() && runs[next_run].begin < offsets[i]) ++next_run;
      if (next_run == runs.size() || runs[next_run].begin != offsets[i]) return i;
      const record::DeflateRun& r = runs[next_run];
      const uint64_t j = static_cast<uint64_t>(
          std::lower_bound(offsets.begin(), offsets.end(), r.end) - offsets.begin());
      if (j >= offsets.size() || offsets[j] != r.end) return i;
      auto d_at = d.records.lower_bound(i);
      if (d_at != d.records.end() && *d_at < j) return i;
      auto e_at = edits->replaced.lower_bound(i);
      if (e_at != edits->replaced.end() && e_at->first < j) return i;
      run_buffer.resize(r.file_end - r.file_begin);
      s = PreadFull(old_fd.get(), run_buffer.data(), run_buffer.size(), r.file_begin, p.file);
      const uint64_t at = writer.bytes();
      if (s.ok()) s = writer.AppendDeflated(&run_buffer, r.end - r.begin, r.check, j - i);
      if (!s.ok()) return i;
      for (uint64_t k = i + 1; k < j; ++k) next_offsets.push_back(at + offsets[k] - offsets[i]);
      out->kept += j - i;
      ++runs_copied;
      run_bytes += r.end - r.begin;
      ++next_run;
      return j;
    };
    auto hand_over = [&](size_t records_end) {
      check.Piece(piece_begin, writer.bytes(), records_end - piece_first, std::move(expected));
      expected.clear();
      piece_begin = writer.bytes();
      piece_first = records_end;
    };
    for (uint64_t i = 0; i + 1 < offsets.size() && s.ok(); ++i) {
      next_offsets.push_back(writer.bytes());
      if (d.records.count(i)) {
        next_offsets.pop_back();
        ++out->deleted;
        delta -= RecordDataBytes(offsets, i);
        continue;
      }
      if (auto e = edits->replaced.find(i); e != edits->replaced.end()) {
        s = writer.Append(e->second);
        expected.emplace_back(next_offsets.size() - 1 - piece_first, e->second);
        ++out->changed;
        delta += static_cast<int64_t>(e->second.size()) - RecordDataBytes(offsets, i);
        continue;
      }
      if (from.codec == source::Codec::kNone) {
        // A run of kept records of a plain shard (at most about
        // kPieceBytes): its bytes as they are, copied by the kernel (cloned
        // where the file system can); their CRCs are checked in the new
        // file (PieceCheck).
        uint64_t j = i + 1;
        while (j + 1 < offsets.size() && !d.records.count(j) && !edits->replaced.count(j) &&
               !(done == 0 && j == (offsets.size() - 1) / 2) &&
               offsets[j] - offsets[i] < kPieceBytes) {
          ++j;
        }
        auto range = from.source->Spliceable(offsets[i]);
        if (range.ok() && range->has_value()) {
          const uint64_t at = writer.bytes();
          for (uint64_t k = i + 1; k < j; ++k) next_offsets.push_back(at + offsets[k] - offsets[i]);
          s = writer.AppendFramedRange((*range)->fd, (*range)->offset, offsets[j] - offsets[i],
                                       j - i);
          if (s.ok()) hand_over(next_offsets.size());
          out->kept += j - i;
          i = j - 1;
          if (done == 0 && j == (offsets.size() - 1) / 2) faults.At("rewrite_mid_shard");
          continue;
        }
      }
      if (!runs.empty()) {
        // Whole unchanged runs of a compressed shard: their deflate bytes
        // as they are (every shard this writer made has one per
        // kFlushEvery block); the check after write inflates them.
        const uint64_t j = copy_run(i);
        if (!s.ok()) break;
        if (j > i) {
          const uint64_t mid = (offsets.size() - 1) / 2;
          if (done == 0 && i + 1 <= mid && mid <= j) faults.At("rewrite_mid_shard");
          i = j - 1;
          continue;
        }
      }
      // Any other kept record of a compressed shard is inflated and
      // deflated again (ShardWriter deflates on every core,
      // record/deflate.h): the blocks around an edit, and every record of
      // a shard TensorFlow or gzip wrote (no byte-aligned block ends at
      // record boundaries that need nothing before them).
      // Read into a buffer kept from record to record (or seen where the
      // source holds it), framed again from there: one copy of each byte
      // on this thread, which also inflates the old shard and feeds the
      // deflate workers (ReadRecord's own string cost two more copies and a
      // clear of each record's bytes; this thread's copies and clears were
      // 7.6 % of the daemon's samples in a 2 GB foreign GZIP commit).
      auto payload = record::ReadRecordInto(*from.source, i, offsets[i], offsets[i + 1], &record);
      if (!payload.ok()) {
        s = payload.status();
        break;
      }
      s = writer.Append(*payload);
      record.held.reset();
      ++out->kept;
      if (done == 0 && i + 1 == (offsets.size() - 1) / 2) faults.At("rewrite_mid_shard");
    }
    for (size_t i = 0; i < edits->added.size() && s.ok(); ++i) {
      next_offsets.push_back(writer.bytes());
      s = writer.Append(edits->added[i].second);
      expected.emplace_back(next_offsets.size() - 1 - piece_first, edits->added[i].second);
      ++out->added;
      delta += static_cast<int64_t>(edits->added[i].second.size());
    }
    if (s.ok()) s = writer.Close(/*sync=*/false);
    if (s.ok() && plain) hand_over(next_offsets.size());
    if (s.ok() && !runs.empty()) {
      log::Info(p.file, ": ", runs_copied, " of ", runs.size(),
                " unchanged deflate run(s) copied as they were (", run_bytes, " of ",
                writer.bytes(), " framed bytes), the rest deflated again");
    }
    if (s.ok() && faults.Is("rewrite_flip_written_byte")) {
      // A test of the check: one byte of the written file changed under it
      // (what a bad disk or a kernel bug would do), in the middle record.
      FlipByte(p.temp, writer.bytes() / 2);
    }
    next_offsets.push_back(writer.bytes());
    // The mode before the fsync, which makes it durable with the bytes (the
    // daemon could read the old shard, so it can read this one to check it).
    if (s.ok()) s = KeepMode(p.temp, was);
    if (s.ok()) {
      // The check reads the new file from the page cache while its pages
      // go to disk: fsync and check overlap, and both must succeed before
      // the rename.
      const uint64_t records = out->kept + out->changed + out->added;
      // A GZIP/ZLIB shard's check inflates the whole new file once: what
      // it finds (the walk, the checkpoints and their windows) is the new
      // file's index (FollowRewrite), which then needs no second inflate.
      s = SyncWhileChecking(p.temp, [&] {
        return CheckFailed(
            plain ? check.Finish(writer.bytes(), records)
                  : CheckWrittenShard(p.temp, writer.bytes(), records, from.codec, &walked));
      });
    }
  }
  absl::StatusOr<staging::Fingerprint> next = s.ok() ? FingerprintOfPath(p.temp) : s;
  const uint64_t records = out->kept + out->changed + out->added;
  if (next.ok()) s = list->SetRewriting(path, *next, records);
  if (!next.ok() || !s.ok()) {
    ::unlink(p.temp.c_str());
    return KeptPending(next.ok() ? s : next.status());
  }
  // TFDS's metadata as it must be with the new shard, ready beside it: a
  // crash after the rename finds it and renames it into place.
  if (auto prepared = PrepareTfdsInfo(path, records, delta); !prepared.ok()) {
    log::Error("cannot prepare the TFDS metadata of ", path, ": ", prepared.status().message());
  }
  faults.At("rewrite_before_rename");
  if (::rename(p.temp.c_str(), p.file.c_str()) != 0) {
    s = ErrnoError(errno, absl::StrCat("rename ", p.temp, " over ", p.file));
    ::unlink(p.temp.c_str());
    DiscardTfdsInfo(path);
    (void)list->SetRewriting(path, std::nullopt);
    return KeptPending(s);
  }
  // From here the new shard is in place: the edits are done even if what
  // follows fails (RecoverRewrites drops the entry next time, and the edit
  // folders of a shard without an entry are removed).
  if (auto f = FsyncDir(p.dir); !f.ok()) return f;
  faults.At("rewrite_after_rename");
  UpdateMetadata(path, records, &next_offsets, walked.checkpoints ? &walked : nullptr, follow);
  faults.At("rewrite_after_shard", done + 1);
  if (auto f = list->Forget(path); !f.ok()) return f;
  faults.At("rewrite_after_forget");
  RemoveEditFolders(edits_dir, edits->folders);
  return absl::OkStatus();
}

}  // namespace

void RemoveEditFolders(const std::string& edits_dir, const std::vector<std::string>& folders) {
  for (const std::string& f : folders) {
    if (auto s = RemoveTree(absl::StrCat(edits_dir, "/", f)); !s.ok()) {
      log::Warning("cannot remove the committed edit folder: ", s.message());
    }
  }
}

void KeepWhatEditsDidNotChange(const ShardToRewrite& from, staging::ShardEdits* edits) {
  const std::vector<uint64_t>& offsets = *from.offsets;
  for (auto e = edits->replaced.begin(); e != edits->replaced.end();) {
    const uint64_t i = e->first;
    if (i + 1 >= offsets.size()) {
      ++e;
      continue;
    }
    auto original = record::ReadRecord(*from.source, i, offsets[i], offsets[i + 1]);
    if (!original.ok()) {
      log::Warning("record ", i,
                   " is written from its edit folder as it is: ", original.status().message());
      ++e;
      continue;
    }
    example::SplicedRecord spliced = example::SpliceEdit(*original, e->second, SameTensorValue);
    if (!spliced.changed) {
      e = edits->replaced.erase(e);
      continue;
    }
    e->second = std::move(spliced.payload);
    ++e;
  }
}

std::vector<RewrittenShard> ApplyEdits(
    staging::DeletionList* list, const std::string& edits_dir, naming::FeatureTypes& types,
    const std::function<const ShardToRewrite*(const std::string& path)>& find,
    const FollowRewrite& follow) {
  std::vector<RewrittenShard> out;
  const FaultPoints faults;
  uint64_t done = 0;  // shards rewritten so far
  for (const auto& [path, d] : list->Snapshot()) {
    const auto start = std::chrono::steady_clock::now();
    RewrittenShard r;
    r.path = path;
    const ShardToRewrite* from = find(path);
    if (from == nullptr) {
      r.status = absl::FailedPreconditionError("not mounted; its edits are kept pending");
    } else {
      r.status = from->object != nullptr
                     ? CommitObjectEdits(list, edits_dir, path, d, *from, types, &r)
                     : RewriteOne(list, edits_dir, path, d, *from, types, faults, follow, done, &r);
      if (r.status.ok()) ++done;
    }
    if (!r.status.ok()) {
      r.kept = r.changed = r.added = r.deleted = 0;
      r.offsets.clear();
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::string> RecoverRewrites(staging::DeletionList* list, const std::string& edits_dir,
                                         const FollowRewrite& follow) {
  std::vector<std::string> lines;
  for (const auto& [path, d] : list->Snapshot()) {
    const Paths p = PathsOf(path);
    auto now = FingerprintOfPath(path);
    if (d.rewriting && now.ok() && *now == *d.rewriting) {
      UpdateMetadata(path, d.rewritten_records, nullptr, nullptr, follow);
      auto s = list->Forget(path);
      lines.push_back(absl::StrCat("finished the interrupted rewrite of ", path,
                                   s.ok() ? "" : absl::StrCat(" (", s.message(), ")")));
      continue;
    }
    if (now.ok() && *now == d.before) {
      DiscardTfdsInfo(path);
      if (::unlink(p.temp.c_str()) == 0) {
        lines.push_back(absl::StrCat("rolled back the interrupted rewrite of ", path, " (removed ",
                                     p.temp, "); its deletions stay pending"));
      }
      if (d.rewriting) (void)list->SetRewriting(path, std::nullopt);
    }
  }
  // Edit folders of shards the list no longer has: their commit renamed the
  // new shard into place before they could be removed.
  absl::flat_hash_set<std::string> keys;
  for (const auto& [path, d] : list->Snapshot()) keys.insert(staging::ShardKey(path));
  for (const auto& [key, folders] : staging::ListEditFolders(edits_dir)) {
    if (keys.contains(key)) continue;
    RemoveEditFolders(edits_dir, folders);
    lines.push_back(absl::StrCat("removed ", folders.size(),
                                 " edit folder(s) of a committed shard from ", edits_dir));
  }
  return lines;
}

std::string RewriteSummary(const std::vector<RewrittenShard>& shards) {
  std::string out;
  for (const RewrittenShard& r : shards) {
    if (r.status.ok()) {
      absl::StrAppend(&out, "rewrote ", r.path, ": kept ", r.kept, ", changed ", r.changed,
                      ", added ", r.added, ", deleted ", r.deleted, " record(s) in ",
                      absl::StrFormat("%.2f", r.seconds), " s",
                      r.note.empty() ? "" : absl::StrCat("; ", r.note), "\n");
    } else {
      absl::StrAppend(&out, "not rewritten ", r.path, ": ", r.status.message(), "\n");
    }
  }
  return out;
}

}  // namespace tfrecordfs::repack
