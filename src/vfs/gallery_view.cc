#include "tfrecordfs/vfs/gallery_view.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "tfrecordfs/naming/gallery.h"
#include "tfrecordfs/vfs/node_id.h"
#include "tfrecordfs/vfs/view.h"

namespace tfrecordfs::vfs {

namespace {

// Listing positions: (record << kEntryBits | image) + 2 (after "." and "..").
constexpr uint64_t Position(uint64_t record, uint64_t image) {
  return ((record << kEntryBits) | image) + 2;
}

}  // namespace

GalleryView::GalleryView(const std::vector<MountedShard>& shards, RecordView* records,
                         RecordEdits* edits)
    : shards_(shards), records_(records), edits_(edits) {}

absl::StatusOr<Attr> GalleryView::LookupInShard(uint64_t shard, absl::string_view name) {
  // The record is the name's first name_width digits, then '.' or '-'.
  const size_t width = static_cast<size_t>(shards_[shard].name_width);
  if (name.size() <= width || (name[width] != '.' && name[width] != '-')) {
    return absl::NotFoundError(name);
  }
  const absl::string_view digits = name.substr(0, width);
  uint64_t record;
  if (!std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(digits, &record) || record >= shards_[shard].records_shown() ||
      records_->IsDeleted(shard, record)) {
    return absl::NotFoundError(name);
  }
  auto rec = records_->Parse(shard, record);
  if (!rec.ok()) return rec.status();
  for (const naming::GalleryImage& image : naming::GalleryImages((*rec)->layout, digits)) {
    if (image.name == name) return records_->EntryAttr(shard, record, image.entry, **rec);
  }
  return absl::NotFoundError(name);
}

absl::Status GalleryView::ListShard(uint64_t shard, const Attr& self, uint64_t offset,
                                    const EmitFn& emit) {
  if (!EmitDots(self, &offset, emit)) return absl::OkStatus();
  const uint64_t count = shards_[shard].records_shown();
  const uint64_t mask = (uint64_t{1} << kEntryBits) - 1;
  uint64_t first_image = (offset - 2) & mask;
  for (uint64_t r = (offset - 2) >> kEntryBits; r < count; ++r, first_image = 0) {
    if (records_->IsDeleted(shard, r)) continue;
    auto rec = records_->Parse(shard, r);
    if (!rec.ok()) continue;  // damaged: no images (logged by the record view)
    const std::vector<naming::GalleryImage> images =
        naming::GalleryImages((*rec)->layout, records_->RecordName(shard, r));
    for (uint64_t k = first_image; k < images.size(); ++k) {
      const uint64_t next = k + 1 < images.size() ? Position(r, k + 1) : Position(r + 1, 0);
      if (!emit(images[k].name, records_->EntryAttr(shard, r, images[k].entry, **rec), next)) {
        return absl::OkStatus();
      }
    }
  }
  return absl::OkStatus();
}

absl::Status GalleryView::UnlinkInShard(uint64_t shard, absl::string_view name) {
  auto a = LookupInShard(shard, name);
  if (!a.ok() && !absl::IsDataLoss(a.status())) return a.status();
  if (edits_ == nullptr) return ReadOnlyError();
  uint64_t record;
  if (a.ok()) {
    record = RecordOf(a->ino);
  } else if (!absl::SimpleAtoi(name.substr(0, shards_[shard].name_width), &record)) {
    return a.status();
  }
  return edits_->DeleteRecord(shard, record);
}

}  // namespace tfrecordfs::vfs
