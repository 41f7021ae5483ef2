// RepairShard (reshape.h): intact records copied, damaged ones listed.
#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "src/reshape/internal.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/inspect/inspect.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/reshape/reshape.h"

namespace tfrecordfs::reshape {

std::string DamageReason(const absl::Status& status, uint64_t offset) {
  // The reader's message is "<path>: record i at [uncompressed ]byte offset
  // N: <reason>"; the caller prints path, record and offset itself.
  std::string reason(status.message());
  const std::string mark = absl::StrCat("byte offset ", offset, ": ");
  if (const size_t at = reason.find(mark); at != std::string::npos) {
    reason = reason.substr(at + mark.size());
  }
  return reason;
}

absl::StatusOr<std::vector<Dropped>> DamageOutsideRecords(
    const index::ShardIndex& idx, const source::ShardSource& src,
    const std::vector<uint64_t>& damaged_records) {
  std::vector<Dropped> out;
  for (inspect::Damage& d : inspect::DamageOutsideRecords(idx, damaged_records)) {
    out.push_back({idx.path(), kNoRecord, d.offset, std::move(d.reason)});
  }
  auto tail = inspect::CheckTail(idx, src);
  if (!tail.ok()) return tail.status();
  if (tail->has_value()) out.push_back({idx.path(), kNoRecord, (*tail)->offset, (*tail)->reason});
  return out;
}

absl::StatusOr<RepairResult> RepairShard(const index::ShardIndex& idx,
                                         const source::ShardSource& src, const std::string& output,
                                         const Control& control, ShardSyncer* syncer) {
  auto exists = Exists(output);
  if (!exists.ok()) return exists.status();
  if (*exists) {
    return absl::AlreadyExistsError(absl::StrCat(output, ": already exists (never replaced)"));
  }
  if (idx.codec() == source::Codec::kArrayRecord) {
    // Its chunks' hashes already confine damage to the chunk (the mount
    // and `verify` report it); repair rewrites TFRecord framing only.
    return absl::FailedPreconditionError(
        absl::StrCat(idx.path(),
                     ": an ArrayRecord file: repair rewrites TFRecord shards only (tfrecordfs "
                     "reshard --format arrayrecord|tfrecord copies its intact records)"));
  }
  auto out = PendingShard::Create(output, idx.codec());
  if (!out.ok()) return out.status();
  RepairResult result;
  result.output = output;
  result.records_in = idx.num_records();
  std::vector<uint64_t> damaged;
  Midpoint mid(control.mid_output, idx.num_records());
  // A plain shard's intact records are written as they were read and
  // checked, their framing as it is (an intact record's framing is a
  // function of its payload: the bytes Append would write), in runs on a
  // copier thread while the next run is read: the input is read once.
  // (copy_file_range of the checked runs read it a second time, in the
  // kernel, which /proc's rchar counts: 2.00x the input.) Other shards
  // record by record through Append.
  std::optional<RunCopier> copier;
  if (src.codec() == source::Codec::kNone) copier.emplace(out->get());
  // The checked records' framing not yet queued: run[0, run_bytes). Its
  // size only grows (resize zero-fills: not once per run); recycled buffers
  // come back with theirs.
  std::string run;
  uint64_t run_bytes = 0, run_records = 0;
  auto flush = [&]() -> absl::Status {
    if (run_records == 0) return absl::OkStatus();
    absl::Status s = copier->PushBytes(std::move(run), run_bytes, run_records);
    for (uint64_t k = 0; k < run_records; ++k) mid.Appended();
    run = copier->Recycled();
    run_bytes = run_records = 0;
    return s;
  };
  // A run's bytes: written in kPlainWriteEvery pieces from memory the next
  // reads do not touch; a record larger than this is a run of its own.
  constexpr uint64_t kRunBytes = uint64_t{1} << 20;
  std::string buffer;  // one record's framing (Append's path); grows to the largest
  for (uint64_t i = 0; i < idx.num_records(); ++i) {
    if (Cancelled(control)) {
      return absl::CancelledError(absl::StrCat("interrupted while writing ", output));
    }
    const uint64_t begin = idx.begin(i), end = idx.end(i);
    char* into;
    if (copier) {
      if (run_records > 0 && run_bytes + (end - begin) > kRunBytes) {
        if (auto s = flush(); !s.ok()) return s;
      }
      // The record is read where it stays if intact: the run's end.
      if (run.size() < run_bytes + (end - begin)) {
        run.resize(std::max(kRunBytes, run_bytes + (end - begin)));
      }
      into = run.data() + run_bytes;
    } else {
      if (end > begin && buffer.size() < end - begin) buffer.resize(end - begin);
      into = buffer.data();
    }
    auto data = record::ReadRecordInto(src, i, begin, end, into);
    if (control.progress) control.progress(1, end - begin);
    if (!data.ok()) {
      if (!absl::IsDataLoss(data.status())) return data.status();
      result.dropped.push_back({idx.path(), i, begin, DamageReason(data.status(), begin)});
      damaged.push_back(i);
      continue;
    }
    if (copier) {
      run_bytes += end - begin;
      ++run_records;
      continue;
    }
    if (auto s = (*out)->Append(*data); !s.ok()) return s;
    mid.Appended();
  }
  if (copier) {
    if (auto s = flush(); !s.ok()) return s;
    if (auto s = copier->Finish(); !s.ok()) return s;
    copier.reset();
    // Records read while the shard changed may come from two versions of it
    // (shards are immutable while read: say so if not).
    if (auto s = src.CheckUnchanged(); !s.ok()) return s;
  }
  if (Cancelled(control)) {
    return absl::CancelledError(absl::StrCat("interrupted while writing ", output));
  }
  if (auto s = (*out)->Seal(); !s.ok()) return s;
  result.records_kept = (*out)->records();
  result.bytes = (*out)->bytes();
  result.file_bytes = (*out)->file_bytes();
  result.crc32c = (*out)->file_crc32c();
  if (syncer != nullptr) {
    syncer->Add(*std::move(out));
  } else {
    if (auto s = (*out)->Finish(); !s.ok()) return s;
    if (auto s = (*out)->Commit(); !s.ok()) return s;
  }
  auto outside = DamageOutsideRecords(idx, src, damaged);
  if (!outside.ok()) return outside.status();
  for (Dropped& d : *outside) result.dropped.push_back(std::move(d));
  std::stable_sort(result.dropped.begin(), result.dropped.end(),
                   [](const Dropped& a, const Dropped& b) { return a.offset < b.offset; });
  return result;
}

}  // namespace tfrecordfs::reshape
