// RepairShard (reshape.h): intact records copied, damaged ones listed.
#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "src/reshape/internal.h"
#include "tfrecordfs/base/crc32c.h"
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
  // A plain shard's intact records are copied in runs, file to file
  // (copy_file_range: no pass through user space, as cat(1) copies), once
  // each record read back whole with its CRCs; other shards record by record.
  std::optional<source::FileRange> splice;
  if (src.codec() == source::Codec::kNone && idx.num_records() > 0) {
    auto range = src.Spliceable(0);
    if (range.ok()) splice = *std::move(range);
  }
  std::optional<RunCopier> copier;
  if (splice) copier.emplace(out->get());
  uint64_t run_first = 0, run_records = 0;
  // The output's CRC32C: the copied runs are the kept records' framing, in
  // order, each read whole into `buffer` and checked before it is copied.
  uint32_t copied_crc = 0;
  auto flush = [&]() -> absl::Status {
    if (run_records == 0) return absl::OkStatus();
    const uint64_t begin = idx.begin(run_first);
    const uint64_t end = idx.end(run_first + run_records - 1);
    absl::Status s = copier->Push(splice->fd, splice->offset + begin, end - begin, run_records);
    for (uint64_t k = 0; k < run_records; ++k) mid.Appended();
    run_records = 0;
    return s;
  };
  constexpr uint64_t kRunBytes = uint64_t{16} << 20;
  std::string buffer;  // one record's framing; grows to the largest
  for (uint64_t i = 0; i < idx.num_records(); ++i) {
    if (Cancelled(control)) {
      return absl::CancelledError(absl::StrCat("interrupted while writing ", output));
    }
    const uint64_t begin = idx.begin(i), end = idx.end(i);
    if (end > begin && buffer.size() < end - begin) buffer.resize(end - begin);
    auto data = record::ReadRecordInto(src, i, begin, end, buffer.data());
    if (control.progress) control.progress(1, end - begin);
    if (!data.ok()) {
      if (!absl::IsDataLoss(data.status())) return data.status();
      if (splice) {
        if (auto s = flush(); !s.ok()) return s;
      }
      result.dropped.push_back({idx.path(), i, begin, DamageReason(data.status(), begin)});
      damaged.push_back(i);
      continue;
    }
    if (splice) {
      // Runs are of adjacent records: a gap (damage between records, which
      // the walk skipped) ends one.
      if (run_records > 0 && (idx.end(run_first + run_records - 1) != begin ||
                              end - idx.begin(run_first) > kRunBytes)) {
        if (auto s = flush(); !s.ok()) return s;
      }
      if (run_records == 0) run_first = i;
      ++run_records;
      copied_crc = crc32c::Extend(copied_crc, buffer.data(), end - begin);
      continue;
    }
    if (auto s = (*out)->Append(*data); !s.ok()) return s;
    mid.Appended();
  }
  if (splice) {
    if (auto s = flush(); !s.ok()) return s;
    if (auto s = copier->Finish(); !s.ok()) return s;
    copier.reset();
    // The bytes copied are the bytes checked only if the shard did not
    // change meanwhile (shards are immutable while read: say so if not).
    if (auto s = src.CheckUnchanged(); !s.ok()) return s;
  }
  if (Cancelled(control)) {
    return absl::CancelledError(absl::StrCat("interrupted while writing ", output));
  }
  if (auto s = (*out)->Seal(); !s.ok()) return s;
  result.records_kept = (*out)->records();
  result.bytes = (*out)->bytes();
  result.file_bytes = (*out)->file_bytes();
  result.crc32c = splice ? std::optional<uint32_t>(copied_crc) : (*out)->file_crc32c();
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
