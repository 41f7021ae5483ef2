#include "tfrecordfs/source/inflate.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/log.h"

namespace tfrecordfs::source {

InflateSource::~InflateSource() { cache_->DropCursor(id_); }

absl::StatusOr<std::shared_ptr<const std::string>> InflateSource::BlockAt(uint64_t offset,
                                                                          uint64_t* start) const {
  const uint64_t block = offset / kBlockSize;
  *start = block * kBlockSize;
  if (auto hit = cache_->Get(id_, block)) return hit;
  MutexLock lock(&mu_);
  if (auto hit = cache_->Get(id_, block)) return hit;  // another reader inflated it
  auto lease = file_.Open();
  if (!lease.ok()) return lease.status();
  // The cursor is this reader's until it is put back (parked: its input
  // buffer released) for the next read of this shard; the cache keeps a
  // bounded number of idle ones across the mount.
  std::unique_ptr<Inflater> cursor = cache_->TakeCursor(id_);
  auto result = InflateBlock(block, *lease, &cursor);
  if (!result.ok() && !zlib_only_ &&
      (absl::IsDataLoss(result.status()) || absl::IsInternal(result.status()))) {
    // The index was made with zlib, and only zlib's verdict on a damaged
    // stream counts: should ISA-L stop short of bytes zlib produced (or fail
    // in any other way), this shard is read with zlib from now on.
    log::Warning(file_.path(), ": ", result.status().message(), "; reading with zlib instead");
    zlib_only_ = true;
    cursor.reset();
    result = InflateBlock(block, *lease, &cursor);
  }
  if (cursor != nullptr) {
    cursor->Park();
    cache_->PutCursor(id_, std::move(cursor));
  }
  return result;
}

absl::StatusOr<const Checkpoint*> InflateSource::CheckedCheckpoint(const Checkpoint* cp,
                                                                   const Lease& lease) const {
  const size_t k = static_cast<size_t>(cp - table_->points.data());
  if (k <= verified_) return cp;
  // Checked in order, from the last checkpoint checked so far: a read far
  // into a shard pays once for the stream before it, and a sequential
  // reader, whose cursor never restarts, pays nothing.
  absl::Status s =
      VerifyCheckpoints(lease.bytes(), file_.path(), file_size_, *table_, verified_, k);
  if (s.ok()) {
    verified_ = k;
    return cp;
  }
  if (!absl::IsDataLoss(s)) return s;
  log::Error(s.message(),
             "; its index came from a file others may write (index_dir, or "
             "beside the shard): reads past uncompressed offset ",
             table_->points[verified_].out,
             " inflate from there instead of using its checkpoints (run tfrecordfs index --force "
             "on the shard, then remount)");
  usable_ = verified_;
  return &table_->points[verified_];
}

absl::StatusOr<std::shared_ptr<const std::string>> InflateSource::InflateBlock(
    uint64_t block, const Lease& lease, std::unique_ptr<Inflater>* cursor) const {
  const uint64_t target = block * kBlockSize;
  const uint64_t target_end = std::min<uint64_t>(target + kBlockSize, table_->data_size);
  const Checkpoint* cp = &table_->Before(target);
  if (!table_->trusted) {
    // Checkpoints after one that failed its check are never used.
    cp = &table_->points[std::min<size_t>(cp - table_->points.data(), usable_)];
  }
  // Resume where the cursor stopped when it is at or past the checkpoint:
  // sequential reads (a walk, a cat of every record) never restart.
  std::unique_ptr<Inflater>& cur = *cursor;
  if (cur == nullptr || cur->finished() || cur->out_pos() > target || cur->out_pos() < cp->out) {
    if (!table_->trusted) {
      auto checked = CheckedCheckpoint(cp, lease);
      if (!checked.ok()) return checked.status();
      cp = *checked;
    }
    if (cur == nullptr) {
      cur = std::make_unique<Inflater>(lease.bytes(), file_.path(), file_size_, table_->codec,
                                       /*fast=*/!zlib_only_);
    }
    // Start reads (the byte holding a checkpoint's leftover bits): through
    // this read's lease. The descriptor an earlier lease gave the cursor may
    // be closed by now, or its number reused for another file.
    cur->SetFd(lease.bytes());
    auto window = table_->windows->Load(*cp);
    if (!window.ok()) {
      // The index file changed under the mount, or its window is damaged:
      // fall back to the stream start before it (always present), slower
      // but exact.
      log::Error(file_.path(), ": checkpoint at compressed byte offset ", cp->in, ": ",
                 window.status().message(), "; inflating from an earlier stream start");
      while (cp != table_->points.data() && !cp->stream_start) --cp;
      window = std::string();
    }
    if (auto s = cur->Start(*cp, *window); !s.ok()) {
      cur.reset();
      return s;
    }
    restarts_.fetch_add(1, std::memory_order_relaxed);
  }
  Inflater& inf = *cur;
  inf.SetFd(lease.bytes());
  std::shared_ptr<const std::string> result;
  std::string acc;
  bool acc_whole = inf.out_pos() % kBlockSize == 0;  // acc starts at a block boundary
  uint64_t acc_block = inf.out_pos() / kBlockSize;
  char tmp[64 * 1024];
  while (inf.out_pos() < target_end) {
    const uint64_t pos = inf.out_pos();
    const size_t want = static_cast<size_t>(
        std::min<uint64_t>({sizeof tmp, target_end - pos, kBlockSize - pos % kBlockSize}));
    auto got = inf.Read(tmp, want, /*z_block=*/false);
    if (!got.ok()) {
      cur.reset();
      return got.status();
    }
    if (*got == 0) {
      cur.reset();
      return absl::DataLossError(
          absl::StrCat(file_.path(), ": the compressed stream ends at uncompressed offset ", pos,
                       ", before the ", table_->data_size,
                       " bytes it held when it was indexed; the shard changed under the "
                       "mount (remount to re-index it)"));
    }
    if (acc_whole) acc.append(tmp, *got);
    const uint64_t now = inf.out_pos();
    if (now % kBlockSize == 0 || now == table_->data_size) {
      if (acc_whole) {
        auto bytes = std::make_shared<const std::string>(std::move(acc));
        blocks_inflated_.fetch_add(1, std::memory_order_relaxed);
        cache_->Put(id_, acc_block, bytes);
        if (acc_block == block) result = bytes;
      }
      acc.clear();
      acc_whole = true;
      acc_block = now / kBlockSize;
    }
  }
  if (!result)
    return absl::InternalError(absl::StrCat(file_.path(), ": block ", block, " not produced"));
  return result;
}

}  // namespace tfrecordfs::source
