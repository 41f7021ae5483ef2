#include "tfrecordfs/repack/pack.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
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
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/record/writer.h"
#include "tfrecordfs/repack/journal.h"
#include "tfrecordfs/source/inflate.h"
#include "tfrecordfs/source/snappy_source.h"
#include "tfrecordfs/staging/store.h"

namespace tfrecordfs::repack {
namespace {

// The record folders of `dir` in bytewise name order. Symlinks and
// loose files are reported in `left`.
absl::StatusOr<std::vector<std::string>> ListRecordFolders(const std::string& dir,
                                                           std::vector<LeftStaged>* left) {
  auto d = ListDir::Open(dir);
  if (!d.ok()) return d.status();
  std::vector<std::string> out;
  for (absl::string_view entry; d->Next(&entry);) {
    std::string name(entry);
    if (naming::IsIgnoredName(name)) continue;
    struct stat st;
    if (::fstatat(d->fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return ErrnoError(errno, JoinPath(dir, name));
    }
    if (S_ISDIR(st.st_mode)) {
      out.push_back(std::move(name));
    } else if (S_ISLNK(st.st_mode)) {
      left->push_back({std::move(name), "a symlink, not a record folder (symlinks are refused)"});
    } else if (S_ISREG(st.st_mode)) {
      // `mv shard/07/label staging/`: said at unmount, never dropped silently.
      left->push_back({std::move(name), staging::kLooseFileReason});
    }
  }
  if (!d->status().ok()) return d->status();
  std::sort(out.begin(), out.end());  // char_traits<char> compares as unsigned: bytewise
  std::sort(left->begin(), left->end(),
            [](const LeftStaged& a, const LeftStaged& b) { return a.record < b.record; });
  return out;
}

// One valid record as pass 1 saw it.
struct PlannedRecord {
  std::string name;
  uint64_t length = 0;
  uint32_t crc = 0;
};

struct PlannedShard {
  std::string name;
  size_t first = 0;  // records [first, first + count) of the plan
  size_t count = 0;
  uint64_t bytes = 0;
  uint64_t file_bytes = 0;  // known once written
};

std::vector<PlannedShard> Split(const std::vector<PlannedRecord>& records, uint64_t shard_size) {
  std::vector<PlannedShard> shards;
  for (size_t i = 0; i < records.size(); ++i) {
    const uint64_t framed = records[i].length + record::kFramingOverhead;
    if (shards.empty() || (shards.back().count > 0 && shards.back().bytes + framed > shard_size)) {
      shards.push_back({"", i, 0, 0});
    }
    shards.back().count++;
    shards.back().bytes += framed;
  }
  return shards;
}

// Checks both CRCs of every record as the stream's bytes pass once (the
// scan of the check after write): the header's, and the data's, computed
// over the bytes as they come, without holding a record. Before, the check
// read every record back through an InflateSource after the scan: a second
// inflate of the whole file on one thread, at the end of every commit of a
// compressed shard (docs/bench.md). Framing errors (a bad length) are the
// StreamWalker's to find; this stops at the first mismatch and names it.
class RecordCrcCheck {
 public:
  explicit RecordCrcCheck(absl::string_view path) : path_(path) {}

  void Feed(absl::string_view b) {
    while (!b.empty() && status_.ok()) {
      if (phase_ == kHeader || phase_ == kFooter) {
        const size_t want = (phase_ == kHeader ? record::kHeaderSize : size_t{4}) - have_;
        const size_t n = std::min(want, b.size());
        std::memcpy(buf_ + have_, b.data(), n);
        have_ += n;
        pos_ += n;
        b.remove_prefix(n);
        if (have_ < (phase_ == kHeader ? record::kHeaderSize : size_t{4})) break;
        have_ = 0;
        if (phase_ == kHeader) {
          if (crc32c::Mask(crc32c::Value(buf_, 8)) != DecodeFixed32(buf_ + 8)) {
            Fail("length CRC");
            break;
          }
          left_ = DecodeFixed64(buf_);
          crc_ = 0;
          phase_ = left_ > 0 ? kData : kFooter;
        } else {
          if (crc32c::Mask(crc_) != DecodeFixed32(buf_)) {
            Fail("data CRC");
            break;
          }
          ++record_;
          start_ = pos_;
          phase_ = kHeader;
        }
        continue;
      }
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left_, b.size()));
      crc_ = crc32c::Extend(crc_, b.data(), n);
      left_ -= n;
      pos_ += n;
      b.remove_prefix(n);
      if (left_ == 0) phase_ = kFooter;
    }
  }

  // True when every record fed was whole and both its CRCs matched.
  bool Finish() {
    if (status_.ok() && (phase_ != kHeader || have_ != 0)) Fail("end of the stream inside");
    return status_.ok();
  }
  const absl::Status& status() const { return status_; }

 private:
  enum Phase { kHeader, kData, kFooter };
  void Fail(absl::string_view what) {
    status_ = absl::DataLossError(absl::StrCat(path_, ": check after write: ", what, " of record ",
                                               record_, " (uncompressed byte offset ", start_,
                                               ") does not match"));
  }

  std::string path_;
  absl::Status status_;
  Phase phase_ = kHeader;
  char buf_[record::kHeaderSize];
  size_t have_ = 0;
  uint64_t left_ = 0;
  uint32_t crc_ = 0;
  uint64_t record_ = 0;
  uint64_t start_ = 0;  // the current record's first byte
  uint64_t pos_ = 0;
};

// A compressed shard: one clean stream (member) of `codec` that
// decompresses to exactly `bytes` bytes of clean framing with `records`
// records, each with both CRCs right (RecordCrcCheck, in the same inflate
// pass as the scan). `walked`: see CheckWrittenShard.
absl::Status CheckCompressedShard(UniqueFd fd, const std::string& path, uint64_t file_size,
                                  source::Codec codec, uint64_t bytes, uint64_t records,
                                  index::WalkedShard* walked) {
  // The mount must take the file for what it is (index::ProbeFile): GZIP
  // and ZLIB announce themselves in their first bytes; SNAPPY has no magic,
  // so its file must announce neither, nor start with a plain record header
  // (the scan below then checks every block).
  char head[record::kHeaderSize] = {};
  const size_t head_size = static_cast<size_t>(std::min<uint64_t>(file_size, sizeof head));
  if (auto s = PreadFull(fd.get(), head, head_size, 0, path); !s.ok()) return s;
  const source::Codec announced = source::DetectCodec(absl::string_view(head, head_size));
  const bool starts_so =
      codec == source::Codec::kSnappy
          ? announced == source::Codec::kNone && !(file_size >= record::kFramingOverhead &&
                                                   record::IsPlausibleHeader(head, 0, file_size))
          : announced == codec;
  if (!starts_so) {
    return absl::DataLossError(
        absl::StrCat(path, ": written as ", source::CodecName(codec), " but does not start so"));
  }
  // The check of what we wrote: no record limit (the pack chose the records).
  record::StreamWalker walker(path, UINT64_MAX);
  RecordCrcCheck crcs(path);
  const auto sink = [&](absl::string_view b) {
    crcs.Feed(b);
    return walker.Feed(b);
  };
  auto scan =
      codec == source::Codec::kSnappy
          ? source::ScanSnappy(fd.get(), path, file_size, sink)
          : source::ScanCompressed(fd.get(), path, file_size, codec, source::kDefaultSpan, sink);
  if (!scan.ok()) return scan.status();
  if (scan->problem) {
    return absl::DataLossError(absl::StrCat(path,
                                            ": compressed stream check after write failed at "
                                            "compressed byte offset ",
                                            scan->problem->compressed_offset, ": ",
                                            scan->problem->message));
  }
  if (scan->members != 1 || scan->table.data_size != bytes) {
    return absl::DataLossError(absl::StrCat(path, ": decompresses to ", scan->table.data_size,
                                            " bytes in ", scan->members, " stream(s), expected ",
                                            bytes, " in one"));
  }
  if (!walker.Finish(bytes)) {
    return absl::DataLossError(absl::StrCat(path, ": framing check after write failed"));
  }
  record::WalkResult walk = walker.TakeResult();
  if (!walk.problems.empty() || walk.offsets.size() != records + 1) {
    return absl::DataLossError(absl::StrCat(path, ": framing check after write found ",
                                            walk.offsets.size() - 1, " records, expected ",
                                            records));
  }
  if (!crcs.Finish()) return crcs.status();
  if (walked != nullptr && codec != source::Codec::kSnappy) {
    // What index::WalkShard would find in the file, found by this pass.
    walked->walk = std::move(walk);
    walked->checkpoints = std::make_shared<source::CheckpointTable>(std::move(scan->table));
    walked->windows_blob = std::move(scan->windows_blob);
  }
  return absl::OkStatus();
}

}  // namespace

// A complete shard has exactly the planned size and clean framing with the
// planned number of records (the walk checks every header's CRC).
absl::Status CheckWrittenShard(const std::string& path, uint64_t bytes, uint64_t records,
                               source::Codec codec, index::WalkedShard* walked) {
  auto fd = OpenFile(path, O_RDONLY);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return ErrnoError(errno, path);
  if (codec != source::Codec::kNone) {
    return CheckCompressedShard(std::move(*fd), path, static_cast<uint64_t>(st.st_size), codec,
                                bytes, records, walked);
  }
  if (static_cast<uint64_t>(st.st_size) != bytes) {
    return absl::DataLossError(
        absl::StrCat(path, ": written ", st.st_size, " bytes, expected ", bytes));
  }
  // One pass over the mapped file: every header and data CRC (ranges the
  // rewrite copied as they were were never read), no copy of the bytes.
  uint64_t seen = 0;
  absl::Status framing;
  if (bytes > 0) {
    void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd->get(), 0);
    if (map == MAP_FAILED) return ErrnoError(errno, absl::StrCat("mmap ", path));
    ::madvise(map, bytes, MADV_SEQUENTIAL);
    framing = record::ForEachRecordInBuffer(absl::string_view(static_cast<const char*>(map), bytes),
                                            [&](uint64_t, absl::string_view) { ++seen; });
    ::munmap(map, bytes);
  }
  if (!framing.ok() || seen != records) {
    return absl::DataLossError(absl::StrCat(
        path, ": check after write failed: ",
        framing.ok() ? absl::StrCat(seen, " records, expected ", records) : framing.message()));
  }
  return absl::OkStatus();
}

namespace {

class Packer {
 public:
  Packer(const PackOptions& options, PackReport* report)
      : o_(options),
        types_(options.types != nullptr ? *options.types : naming::NoFeatureTypes()),
        report_(report) {}

  absl::Status Run();

 private:
  absl::Status Plan();
  absl::Status WriteShard(PlannedShard& shard, bool first);
  // The payload of planned record `r` built again from its folder, checked
  // to be the one pass 1 planned (its length and CRC32C): FailedPrecondition
  // naming the record when its folder changed during the pack.
  absl::StatusOr<std::string> RebuiltPayload(const PlannedRecord& r);
  absl::Status WriteArrayRecordShard(PlannedShard& shard, bool first, UniqueFd fd,
                                     const std::string& tmp, const std::string& final_path);
  // Undoes everything written before the commit point. Returns `cause`,
  // extended when the cleanup itself failed.
  absl::Status RollBack(absl::Status cause);
  absl::Status Commit();
  absl::Status RemovePacked();

  const PackOptions& o_;
  naming::FeatureTypes& types_;  // o_.types, else none
  PackReport* report_;
  FaultPoints faults_;
  std::string journal_path_;
  std::string records_dir_;  // absolute
  std::string output_dir_;   // absolute
  std::string prefix_;
  std::vector<PlannedRecord> records_;
  std::vector<PlannedShard> shards_;
  Journal journal_;
  // Files of this pack in the output directory (temp files and renamed
  // shards) that a rollback must remove.
  std::vector<std::string> created_;
};

absl::Status Packer::Plan() {
  auto listed = ListRecordFolders(records_dir_, &report_->left);
  if (!listed.ok()) return Annotate(listed.status(), "listing staged records");
  std::map<std::pair<std::string, example::Kind>, std::vector<std::string>> inferred;
  for (const std::string& name : *listed) {
    std::vector<staging::InferredKind> kinds;
    auto payload = staging::PayloadFromFolder(JoinPath(records_dir_, name), types_, &kinds);
    if (!payload.ok()) {
      report_->left.push_back({name, std::string(payload.status().message())});
      continue;
    }
    records_.push_back({name, payload->size(), crc32c::Value(*payload)});
    for (staging::InferredKind& k : kinds) inferred[{std::move(k.file), k.kind}].push_back(name);
  }
  for (auto& [key, names] : inferred) {
    report_->inferred.push_back({key.first, key.second, std::move(names)});
  }
  std::sort(report_->left.begin(), report_->left.end(),
            [](const LeftStaged& a, const LeftStaged& b) { return a.record < b.record; });
  for (const LeftStaged& l : report_->left) {
    log::Warning("pack: record ", l.record, " stays staged: ", l.reason);
  }
  if (records_.empty()) return absl::OkStatus();

  shards_ = Split(records_, o_.shard_size);
  for (size_t i = 0; i < shards_.size(); ++i) {
    shards_[i].name = ShardName(prefix_, i, shards_.size(), o_.compression);
    if (TempShardName(shards_[i].name).size() > naming::kMaxNameBytes) {
      return absl::InvalidArgumentError(absl::StrCat("prefix '", prefix_,
                                                     "' makes shard names longer than ",
                                                     naming::kMaxNameBytes, " bytes"));
    }
    const std::string path = JoinPath(output_dir_, shards_[i].name);
    auto exists = Exists(path);
    if (!exists.ok()) return exists.status();
    if (*exists) {
      return PosixError(EEXIST, absl::StrCat(path,
                                             " already exists; refusing to overwrite it "
                                             "(choose another prefix)"));
    }
  }
  return absl::OkStatus();
}

absl::Status Packer::WriteShard(PlannedShard& shard, bool first) {
  const std::string tmp = JoinPath(output_dir_, TempShardName(shard.name));
  const std::string final_path = JoinPath(output_dir_, shard.name);
  auto fd = OpenFile(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!fd.ok()) return fd.status();
  created_.push_back(tmp);
  if (o_.compression == source::Codec::kArrayRecord) {
    return WriteArrayRecordShard(shard, first, std::move(*fd), tmp, final_path);
  }
  record::ShardWriter writer(std::move(*fd), tmp, {.codec = o_.compression});
  for (size_t k = 0; k < shard.count; ++k) {
    const PlannedRecord& r = records_[shard.first + k];
    auto payload = RebuiltPayload(r);
    if (!payload.ok()) return payload.status();
    if (auto s = writer.Append(*payload); !s.ok()) return s;
    if (first && k + 1 == std::max<size_t>(1, shard.count / 2)) faults_.At("mid_shard");
  }
  if (auto s = writer.Close(/*sync=*/true); !s.ok()) return s;
  shard.file_bytes = writer.file_bytes();
  if (auto s = CheckWrittenShard(tmp, shard.bytes, shard.count, o_.compression); !s.ok()) return s;
  if (auto s = RenameNoReplace(tmp, final_path); !s.ok()) return s;
  created_.back() = final_path;
  return FsyncDir(output_dir_);
}

absl::StatusOr<std::string> Packer::RebuiltPayload(const PlannedRecord& r) {
  auto payload = staging::PayloadFromFolder(JoinPath(records_dir_, r.name), types_);
  if (!payload.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "record ", r.name,
        " changed during the pack and no longer builds: ", payload.status().message()));
  }
  if (payload->size() != r.length || crc32c::Value(*payload) != r.crc) {
    return absl::FailedPreconditionError(
        absl::StrCat("record ", r.name, " changed during the pack (its folder was edited)"));
  }
  return payload;
}

// WriteShard for an ArrayRecord file (PackOptions::array_record).
absl::Status Packer::WriteArrayRecordShard(PlannedShard& shard, bool first, UniqueFd fd,
                                           const std::string& tmp, const std::string& final_path) {
  arrayrecord::FileWriter writer(std::move(fd), tmp, o_.array_record);
  // What the check expects: each chunk's records by their pass-1 CRCs.
  ExpectedArrayRecord expected;
  expected.options_text = o_.array_record.options_text.empty()
                              ? arrayrecord::OptionsString(o_.array_record)
                              : o_.array_record.options_text;
  const uint64_t group = std::max<uint64_t>(1, o_.array_record.group_size);
  for (size_t k = 0; k < shard.count; ++k) {
    const PlannedRecord& r = records_[shard.first + k];
    auto payload = RebuiltPayload(r);
    if (!payload.ok()) return payload.status();
    if (auto s = writer.Append(*payload); !s.ok()) return s;
    if (k % group == 0) expected.chunks.emplace_back();
    expected.chunks.back().crcs.push_back(r.crc);
    if (first && k + 1 == std::max<size_t>(1, shard.count / 2)) faults_.At("mid_shard");
  }
  expected.records = shard.count;
  if (auto s = writer.Close(/*sync=*/true); !s.ok()) return s;
  shard.file_bytes = writer.file_bytes();
  if (auto s = CheckArrayRecordRewrite(tmp, expected); !s.ok()) return s;
  if (auto s = RenameNoReplace(tmp, final_path); !s.ok()) return s;
  created_.back() = final_path;
  return FsyncDir(output_dir_);
}

absl::Status Packer::RollBack(absl::Status cause) {
  absl::Status cleanup;
  for (const std::string& path : created_) {
    auto r = UnlinkIfExists(path);
    if (!r.ok()) cleanup.Update(r.status());
  }
  if (cleanup.ok() && !created_.empty()) cleanup.Update(FsyncDir(output_dir_));
  // The journal goes last: while any file of this pack may remain, it is
  // what lets Recover find and remove it.
  if (cleanup.ok()) cleanup.Update(UnlinkDurably(journal_path_));
  if (!cleanup.ok()) {
    log::Error("pack: cleanup after a failed pack failed: ", cleanup.message(),
               "; the next recovery retries it");
  }
  return cause;
}

absl::Status Packer::Commit() {
  journal_.state = Journal::State::kCommitted;
  absl::Status s = WriteFileAtomically(journal_path_, EncodeJournal(journal_));
  if (s.ok()) return s;
  // The rename may have happened before the step that failed (the directory
  // fsync). Rolling back under a COMMITTED journal would let a later
  // recovery delete records whose shards are gone, so look at what is there.
  auto contents = ReadFileToString(journal_path_);
  if (contents.ok()) {
    auto on_disk = ParseJournal(*contents, journal_path_);
    if (on_disk.ok() && on_disk->state == Journal::State::kCommitted) {
      log::Warning("pack: committing the journal reported ", s.message(),
                   ", but the journal is committed; going on");
      return absl::OkStatus();
    }
  }
  return Annotate(s, "committing the pack journal");
}

absl::Status Packer::RemovePacked() {
  bool first = true;
  for (const PlannedRecord& r : records_) {
    if (auto s = RemoveTree(JoinPath(records_dir_, r.name)); !s.ok()) return s;
    if (first) faults_.At("mid_delete");
    first = false;
  }
  return FsyncDir(records_dir_);
}

absl::Status Packer::Run() {
  if (o_.records_dir.empty() || o_.output_dir.empty()) {
    return absl::InvalidArgumentError("pack needs a records directory and an output directory");
  }
  if (o_.shard_size == 0) return absl::InvalidArgumentError("shard size must be positive");
  prefix_ = o_.prefix.empty() ? DefaultPrefix() : o_.prefix;
  if (auto s = ValidatePrefix(prefix_); !s.ok()) return s;
  journal_path_ =
      o_.journal_path.empty() ? JoinPath(o_.output_dir, kDefaultJournalName) : o_.journal_path;

  if (auto s = Recover(journal_path_, o_.records_dir); !s.ok()) {
    return Annotate(s, "recovering an interrupted pack");
  }
  auto records_dir = RealPath(o_.records_dir);
  if (!records_dir.ok())
    return SetMessage(records_dir.status(),
                      absl::StrCat("records directory ", records_dir.status().message()));
  records_dir_ = std::move(*records_dir);
  auto output_dir = RealPath(o_.output_dir);
  if (!output_dir.ok())
    return SetMessage(output_dir.status(),
                      absl::StrCat("output directory ", output_dir.status().message()));
  output_dir_ = std::move(*output_dir);
  struct stat st;
  if (::stat(output_dir_.c_str(), &st) != 0) return ErrnoError(errno, output_dir_);
  if (!S_ISDIR(st.st_mode)) return ErrnoError(ENOTDIR, output_dir_);

  if (auto s = Plan(); !s.ok()) return s;
  if (records_.empty()) {
    log::Info("pack: nothing to pack in ", records_dir_);
    return absl::OkStatus();
  }

  journal_.state = Journal::State::kPlanned;
  journal_.records_dir = records_dir_;
  journal_.output_dir = output_dir_;
  journal_.remove_packed = o_.remove_packed;
  for (const PlannedShard& ps : shards_) {
    Journal::Shard js;
    js.name = ps.name;
    js.bytes = ps.bytes;
    for (size_t k = 0; k < ps.count; ++k) js.records.push_back(records_[ps.first + k].name);
    journal_.shards.push_back(std::move(js));
  }
  const std::string journal_bytes = EncodeJournal(journal_);
  if (!o_.journal_reserve.empty()) {
    // Give the journal the reserved blocks (the store allocates them again
    // when it is next opened). An error shows in the journal write below.
    (void)UnlinkIfExists(o_.journal_reserve);
  }
  if (auto s = WriteFileAtomically(journal_path_, journal_bytes); !s.ok()) {
    // WriteFileAtomically removed its temp file; nothing else exists yet.
    if (ErrnoOf(s) == ENOSPC || ErrnoOf(s) == EDQUOT) {
      return Annotate(
          s, absl::StrCat("the file system of ", Dirname(journal_path_),
                          " is full: the pack journal (", journal_bytes.size(),
                          " bytes, twice that while it is committed) does not fit even in the "
                          "space set aside for it, so nothing was packed and every record stays "
                          "staged; free space there, and the next mount packs them on unmount"));
    }
    return Annotate(s, "writing the pack journal");
  }
  faults_.At("after_journal");

  for (size_t i = 0; i < shards_.size(); ++i) {
    if (auto s = WriteShard(shards_[i], i == 0); !s.ok()) {
      return RollBack(Annotate(s, absl::StrCat("writing shard ", shards_[i].name)));
    }
    faults_.At("after_shard", i + 1);
  }
  faults_.At("before_commit");
  if (auto s = Commit(); !s.ok()) return RollBack(s);

  for (const PlannedShard& ps : shards_) {
    report_->shards.push_back(
        {JoinPath(output_dir_, ps.name), ps.count, ps.bytes, ps.file_bytes, o_.compression});
    log::Info("pack: wrote ", JoinPath(output_dir_, ps.name), " (", ps.count, " records, ",
              ps.file_bytes, " bytes",
              o_.compression == source::Codec::kNone
                  ? ""
                  : absl::StrCat(", ", source::CodecName(o_.compression), " of ", ps.bytes),
              ")");
  }
  faults_.At("after_commit");
  if (o_.remove_packed) {
    if (auto s = RemovePacked(); !s.ok()) {
      return Annotate(s, absl::StrCat("the shards are written, but removing the packed records "
                                      "from staging failed (the journal ",
                                      journal_path_,
                                      " stays, so the next recovery finishes "
                                      "the removal)"));
    }
  }
  if (auto s = UnlinkDurably(journal_path_); !s.ok()) {
    return Annotate(s, "the pack is complete, but removing its journal failed");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidatePrefix(absl::string_view prefix) {
  if (prefix.empty()) return absl::InvalidArgumentError("shard prefix is empty");
  if (prefix.front() == '.') {
    return absl::InvalidArgumentError(
        absl::StrCat("shard prefix '", prefix, "' starts with '.' (hidden names are skipped)"));
  }
  if (prefix.find('/') != absl::string_view::npos || prefix.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard prefix '", prefix, "' contains '/' or a NUL byte"));
  }
  return absl::OkStatus();
}

absl::string_view ShardSuffix(source::Codec codec) {
  switch (codec) {
    case source::Codec::kNone:
      return "";
    case source::Codec::kGzip:
      return ".gz";
    case source::Codec::kZlib:
      return ".zlib";
    case source::Codec::kSnappy:
      return ".snappy";
    case source::Codec::kArrayRecord:
      return "";
  }
  return "";
}

std::optional<arrayrecord::WriterOptions> ArrayRecordDatasetIn(const std::string& dir) {
  auto d = ListDir::Open(dir);
  if (!d.ok()) return std::nullopt;
  std::vector<std::string> files;
  for (absl::string_view entry; d->Next(&entry);) {
    const std::string name(entry);
    if (naming::IsIgnoredName(name)) continue;
    if (name.find(".tfrecord") != std::string::npos) return std::nullopt;
    const std::string path = JoinPath(dir, name);
    auto fd = OpenFile(path, O_RDONLY | O_CLOEXEC);
    if (!fd.ok()) continue;
    char head[arrayrecord::kSignatureSize];
    struct stat st;
    if (::fstat(fd->get(), &st) == 0 && S_ISREG(st.st_mode) &&
        PreadFull(fd->get(), head, sizeof head, 0, path).ok() &&
        arrayrecord::HasSignature(absl::string_view(head, sizeof head))) {
      files.push_back(path);
    }
  }
  if (files.empty()) return std::nullopt;
  std::sort(files.begin(), files.end());
  return arrayrecord::OptionsOfFiles(files);
}

std::string ShardName(absl::string_view prefix, uint64_t index, uint64_t count,
                      source::Codec codec) {
  if (codec == source::Codec::kArrayRecord) {
    // As TFDS names ArrayRecord shards (NAME-train.array_record-00000-of-00016).
    return absl::StrFormat("%s.array_record-%05d-of-%05d", prefix, index, count);
  }
  if (absl::EndsWith(prefix, ".tfrecord")) {
    // As TFDS names TFRecord shards (NAME-train.tfrecord-00000-of-00016).
    return absl::StrFormat("%s-%05d-of-%05d%s", prefix, index, count, ShardSuffix(codec));
  }
  return absl::StrFormat("%s-%05d-of-%05d.tfrecord%s", prefix, index, count, ShardSuffix(codec));
}

PackReport Pack(const PackOptions& options) {
  PackReport report;
  Packer packer(options, &report);
  report.status = packer.Run();
  if (!report.status.ok()) log::Error("pack failed: ", report.status.message());
  return report;
}

std::string PackReport::Summary() const {
  std::string out;
  uint64_t records = 0;
  for (const ShardWritten& s : shards) {
    absl::StrAppend(&out, "wrote ", s.path, ": ", s.records,
                    s.records == 1 ? " record, " : " records, ", s.file_bytes, " bytes",
                    s.codec == source::Codec::kNone
                        ? ""
                        : absl::StrCat(" (", source::CodecName(s.codec), " of ", s.bytes, ")"),
                    "\n");
    records += s.records;
  }
  if (!shards.empty()) {
    absl::StrAppend(&out, "packed ", records, records == 1 ? " record" : " records", " into ",
                    shards.size(), shards.size() == 1 ? " shard\n" : " shards\n");
  } else if (status.ok()) {
    absl::StrAppend(&out, "nothing packed: no valid staged record\n");
  }
  if (!inferred.empty()) {
    // A kind the shards or a kind xattr gave is known; one read from the
    // file's text is a guess worth seeing (an int64 list that was a float
    // one before an old `cp -r`).
    absl::flat_hash_set<std::string> records_with;
    for (const InferredFile& f : inferred) records_with.insert(f.records.begin(), f.records.end());
    absl::StrAppend(&out, "kinds inferred from the files' text in ", records_with.size(),
                    records_with.size() == 1 ? " record" : " records",
                    " (no user.tfrecordfs.kind attribute: copied without extended attributes, as"
                    " cp -r does; cp -a keeps them; whole numbers are int64, decimals float):\n");
    for (const InferredFile& f : inferred) {
      absl::StrAppend(&out, "  ", f.file, ": ", example::KindName(f.kind), " (");
      constexpr size_t kNamed = 3;
      for (size_t i = 0; i < f.records.size() && i < kNamed; ++i) {
        absl::StrAppend(&out, i ? ", " : "", f.records[i]);
      }
      if (f.records.size() > kNamed)
        absl::StrAppend(&out, " and ", f.records.size() - kNamed, " more");
      absl::StrAppend(&out, ")\n");
    }
  }
  if (!left.empty()) {
    absl::StrAppend(&out, left.size(), left.size() == 1 ? " record" : " records",
                    " left staged:\n");
    for (const LeftStaged& l : left) absl::StrAppend(&out, "  ", l.record, ": ", l.reason, "\n");
  }
  if (!status.ok()) absl::StrAppend(&out, "pack failed: ", status.message(), "\n");
  return out;
}

std::string DefaultPrefix() {
  std::time_t now = std::time(nullptr);
  std::tm tm;
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%S", &tm);
  return absl::StrCat("staged-", buf);
}

}  // namespace tfrecordfs::repack
