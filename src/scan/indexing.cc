#include "tfrecordfs/scan/indexing.h"

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/index/dali_index.h"

namespace tfrecordfs::scan {

void IndexTally::Observe(const ScannedShard& shard) {
  const index::LoadInfo& info = shard.info;
  const uint64_t size = static_cast<uint64_t>(shard.st.st_size);
  MutexLock lock(&mu_);
  if (!info.save_status.ok()) {
    totals_.save_failed = true;
    if (place_ == IndexPlace::kShared) {
      log::Error(shard.path, ": cannot save its index: ", info.save_status.message());
    } else if (place_ == IndexPlace::kBeside) {
      auto& [why, count] = totals_.unwritable_dirs[Dirname(shard.path)];
      if (count++ == 0) why = std::string(info.save_status.message());
    }
  }
  log::Debug(shard.path, ": ", shard.index->num_records(), " record(s), index ",
             index::IndexSourceName(info.source),
             info.stored_path.empty() ? "" : absl::StrCat(" (", info.stored_path, ")"));
  if (shard.codec != source::Codec::kNone) {
    ++totals_.compressed_shards;
    totals_.compressed_bytes += size;
    totals_.compressed_index_bytes += info.index_bytes;
  }
}

IndexTotals IndexTally::totals() const {
  MutexLock lock(&mu_);
  return totals_;
}

DaliResult WriteDaliIndexes(const std::vector<ScannedShard>& shards, const std::string& dir) {
  DaliResult result;
  for (const ScannedShard& shard : shards) {
    if (shard.codec != source::Codec::kNone) {
      result.compressed.push_back(shard.path);
      continue;
    }
    if (!shard.index->problems().empty()) {
      log::Error(shard.path,
                 ": no DALI index: the shard is damaged (DALI would fail on it; "
                 "see tfrecordfs verify)");
      result.failed = true;
      continue;
    }
    const std::string target = absl::StrCat(dir, "/", shard.mount_path, ".idx");
    absl::Status st = MakeDirs(Dirname(target), 0755);
    // Recorded (index/dali_index.h) so that a commit of record edits
    // rewrites it with the shard.
    const std::string text = index::DaliIndexText(shard.index->offsets());
    if (st.ok()) st = WriteFileAtomically(target, text);
    if (st.ok()) st = index::RecordDaliIndex(shard.path, RealPath(target).value_or(target), text);
    if (!st.ok()) {
      log::Error(shard.path, ": cannot write its DALI index: ", st.message());
      result.failed = true;
      continue;
    }
    ++result.written;
  }
  if (!result.compressed.empty()) {
    log::Warning(result.compressed.size(),
                 " GZIP/ZLIB shard(s) got no DALI index: DALI reads "
                 "the raw file bytes and cannot use an index of compressed records (",
                 result.compressed.front(), result.compressed.size() > 1 ? ", ..." : "", ")");
  }
  return result;
}

}  // namespace tfrecordfs::scan
