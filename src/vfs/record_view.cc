// The record namespace: a shard folder lists its records ("000", "001", ...),
// a record folder the files of its features (naming::Layout, parsed through
// the record cache). Filesystem's other files dispatch here for shard
// folders and record-space node ids (filesystem.h).
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/sequence.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/tensor/png.h"
#include "tfrecordfs/vfs/filesystem.h"
#include "tfrecordfs/vfs/node_id.h"

namespace tfrecordfs::vfs {

namespace {

// Reasons kept for the `error` attribute; beyond that, records are simply
// read again.
constexpr size_t kMaxDamageNotes = 65536;

}  // namespace

uint64_t Filesystem::RecordsShown(uint64_t shard) const {
  return std::min<uint64_t>(shards_[shard]->num_records(), kMaxRecordsPerShard);
}

std::string Filesystem::RecordName(uint64_t shard, uint64_t record) const {
  std::string digits = absl::StrCat(record);
  const size_t width = static_cast<size_t>(shard_name_width_[shard]);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

void Filesystem::IndexDisagrees(uint64_t shard, uint64_t record) {
  const index::ShardIndex& idx = *shards_[shard];
  // A record next to damage the walk recorded is expected not to frame.
  for (const auto& p : idx.problems()) {
    if (p.offset == idx.begin(record) || p.offset == idx.end(record)) return;
  }
  log::Error("the index of ", idx.path(), " disagrees with the shard at record ", record,
             " (byte offset ", idx.begin(record), "): its stored index is dropped; remount to "
             "index the shard again");
  if (on_index_mismatch_) on_index_mismatch_(idx.path());
}

Attr Filesystem::RecordDirAttr(uint64_t shard, uint64_t record) const {
  Attr a;
  a.ino = RecordId(shard, record, 0);
  a.mode = kDirMode;
  a.nlink = 1;
  a.mtime = shard_mtime_[shard];
  return a;
}

Attr Filesystem::EntryAttr(uint64_t shard, uint64_t record, uint32_t entry,
                           const ParsedRecord& rec) const {
  const naming::Entry& e = rec.layout.entries[entry];
  Attr a;
  a.ino = RecordId(shard, record, entry);
  a.mode = e.is_dir ? kDirMode : kFileMode;
  a.size = e.is_dir ? 0 : e.size();
  a.nlink = 1;
  a.mtime = shard_mtime_[shard];
  return a;
}

absl::StatusOr<std::shared_ptr<const ParsedRecord>> Filesystem::Parse(uint64_t shard,
                                                                       uint64_t record) {
  const uint64_t key = (shard << kRecordBits) | record;
  std::shared_ptr<const ParsedRecord> rec = cache_->Get(key);
  if (!rec) {
    const index::ShardIndex& idx = *shards_[shard];
    if (idx.end(record) - idx.begin(record) > kBigRecord) {
      // Parsing holds the whole record in memory: one huge record at a time,
      // so concurrent listings of 2 GiB records cannot multiply that.
      MutexLock big(&big_record_mu_);
      rec = ReadAndParse(shard, record);
    } else {
      rec = ReadAndParse(shard, record);
    }
  }
  if (!rec->status.ok()) return rec->status;
  return rec;
}

std::shared_ptr<const ParsedRecord> Filesystem::ReadAndParse(uint64_t shard, uint64_t record) {
  auto parsed = std::make_shared<ParsedRecord>();
  const index::ShardIndex& idx = *shards_[shard];
  parsed->data_offset = idx.begin(record) + record::kHeaderSize;
  auto data = record::ReadRecord(*sources_[shard], record, idx.begin(record), idx.end(record));
  if (!data.ok() && record::IsFramingMismatch(data.status())) IndexDisagrees(shard, record);
  absl::StatusOr<example::FeatureTable> table = absl::UnknownError("not read");
  absl::StatusOr<example::SequenceTable> seq = absl::UnknownError("not tried");
  if (data.ok()) {
    // An Example first: a SequenceExample without feature_lists is byte
    // for byte one (example/sequence.h).
    table = example::DecodeExample(*data);
    if (!table.ok()) seq = example::DecodeSequenceExample(*data);
  }
  if (!data.ok()) {
    parsed->status = data.status();
    // Once per record: a mount read epoch after epoch (the record cache
    // forgets) would otherwise log the same damage every time.
    if (NoteDamage(shard, record, data.status().message())) {
      log::Error(data.status().message());
    } else {
      log::Debug(data.status().message());
    }
  } else if (table.ok() || seq.ok()) {
    if (table.ok()) {
      sampler_->Learn(*table);
      parsed->layout = naming::LayoutExample(*table, *data);
    } else {
      sampler_->Learn(*seq);
      parsed->layout = naming::LayoutSequence(*seq, *data);
    }
    if (auto s = naming::CheckLayout(parsed->layout); !s.ok()) {
      // A bug of ours, not damage: this record reads as EIO, the rest of
      // the mount is served.
      log::Error(idx.path(), ": record ", record, " at byte offset ", idx.begin(record),
                 ": cannot be shown (", s.message(), "); please report this record");
      parsed->status = absl::DataLossError(s.message());
      parsed->layout = naming::Layout();
    } else if (parsed->layout.entries.size() > kMaxEntriesPerRecord) {
      log::Warning(idx.path(), ": record ", record, " at byte offset ", idx.begin(record), ": ",
                   parsed->layout.entries.size(),
                   " files are more than one record can show; shown raw as ",
                   naming::kRawRecordName);
      parsed->layout = naming::LayoutRaw(data->size());
    }
  } else {
    log::Debug(idx.path(), ": record ", record, " at byte offset ", idx.begin(record), ": ",
               table.status().message(), "; ", seq.status().message(), "; shown raw");
    parsed->layout = naming::LayoutRaw(data->size());
  }
  // Cached layouts are charged by their memory: no growth slack.
  parsed->layout.entries.shrink_to_fit();
  records_read_.fetch_add(1, std::memory_order_relaxed);
  if (parsed->status.ok()) checked_.MarkChecked(shard, record);
  cache_->Put((shard << kRecordBits) | record, parsed);
  return parsed;
}

absl::StatusOr<std::shared_ptr<const ParsedRecord>> Filesystem::ParseEntry(const Node& node) {
  auto rec = Parse(node.shard, node.record);
  if (!rec.ok()) return rec.status();
  if (node.entry >= (*rec)->layout.entries.size()) return absl::NotFoundError("stale node id");
  return rec;
}

absl::StatusOr<Attr> Filesystem::LookupRecord(uint64_t shard, absl::string_view name) const {
  // The name is a record index, padded or not.
  uint64_t record;
  const bool digits = !name.empty() && name.size() <= 19 &&
                      std::all_of(name.begin(), name.end(),
                                  [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || !absl::SimpleAtoi(name, &record)) return absl::NotFoundError(name);
  if (record >= RecordsShown(shard)) return absl::NotFoundError(name);
  const bool canonical = name == RecordName(shard, record) || name == absl::StrCat(record);
  if (!canonical) return absl::NotFoundError(name);
  return RecordDirAttr(shard, record);
}

void Filesystem::ListRecords(uint64_t shard, uint64_t first, const EmitFn& emit) const {
  const uint64_t count = RecordsShown(shard);
  for (uint64_t r = first; r < count; ++r) {
    if (!emit(RecordName(shard, r), RecordDirAttr(shard, r), r + 3)) break;
  }
}

absl::StatusOr<Attr> Filesystem::RecordGetAttr(const Node& node) {
  if (node.entry == 0) return RecordDirAttr(node.shard, node.record);
  auto rec = ParseEntry(node);
  if (!rec.ok()) return rec.status();
  return EntryAttr(node.shard, node.record, node.entry, **rec);
}

absl::StatusOr<Attr> Filesystem::RecordLookup(const Node& parent, absl::string_view name) {
  auto rec = ParseEntry(parent);
  if (!rec.ok()) return rec.status();
  if (!(*rec)->layout.entries[parent.entry].is_dir) return PosixError(ENOTDIR, "not a directory");
  auto child = naming::FindChild((*rec)->layout, parent.entry, name);
  if (!child) return absl::NotFoundError(name);
  return EntryAttr(parent.shard, parent.record, *child, **rec);
}

absl::Status Filesystem::RecordReadDir(const Node& dir, uint64_t first, const EmitFn& emit) {
  auto rec = ParseEntry(dir);
  if (!rec.ok()) return rec.status();
  const naming::Entry& d = (*rec)->layout.entries[dir.entry];
  for (uint64_t k = first; k < d.num_children; ++k) {
    const uint32_t c = d.first_child + static_cast<uint32_t>(k);
    if (!emit((*rec)->layout.entries[c].name, EntryAttr(dir.shard, dir.record, c, **rec), k + 3)) {
      break;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ReadResult> Filesystem::RecordRead(const Node& node, uint64_t offset, size_t size) {
  auto rec = ParseEntry(node);
  if (!rec.ok()) return rec.status();
  const naming::Entry& e = (*rec)->layout.entries[node.entry];
  if (e.is_dir) return PosixError(EISDIR, "is a directory");
  const uint64_t total = e.size();
  const size_t n =
      offset >= total ? 0 : static_cast<size_t>(std::min<uint64_t>(size, total - offset));
  return ReadPieces(node.shard, (*rec)->data_offset, e, offset, n);
}

absl::StatusOr<ReadResult> Filesystem::ReadPieces(uint64_t shard, uint64_t data_offset,
                                                  const naming::Entry& e, uint64_t offset,
                                                  size_t n) const {
  const source::ShardSource& src = *sources_[shard];
  std::vector<ReadBuffer> bufs;
  uint64_t begin = 0;  // file offset of the current piece
  for (const naming::Piece& p : e.Pieces()) {
    const uint64_t end = begin + p.size;
    const uint64_t piece_begin = begin;
    begin = end;
    if (end <= offset || piece_begin >= offset + n) continue;
    const uint64_t from = std::max(offset, piece_begin) - piece_begin;
    const size_t len = static_cast<size_t>(std::min<uint64_t>(end, offset + n) - piece_begin - from);
    ReadBuffer b;
    switch (p.type) {
      case naming::Piece::Type::kInline:
        b.data.assign(p.bytes.data() + from, len);
        break;
      case naming::Piece::Type::kSpan: {
        const uint64_t at = data_offset + p.offset + from;
        auto range = src.Spliceable(at);
        if (!range.ok()) {
          log::Error(range.status().message());
          return absl::DataLossError(range.status().message());
        }
        if (range->has_value()) {
          // The kernel splices straight from the shard: make sure it is
          // still the file that was indexed (one fstat), or the bytes could
          // be another file's or short.
          if (auto s = src.CheckUnchanged(); !s.ok()) {
            log::Error(s.message());
            return absl::DataLossError(s.message());
          }
          b.fd = (*range)->fd;
          b.offset = (*range)->offset;
          b.length = len;
          b.hold = std::move((*range)->hold);
          break;
        }
        // A compressed shard: the bytes come from its decompression cache.
        b.data.resize(len);
        if (auto s = src.ReadFull(at, b.data.data(), len); !s.ok()) {
          log::Error(s.message());
          return absl::DataLossError(s.message());
        }
        break;
      }
      case naming::Piece::Type::kFill:
        // A broadcast tensor's elements: made here, never held.
        b.data.resize(len);
        naming::FillRange(p.fill, from, b.data.data(), len);
        break;
      case naming::Piece::Type::kPng: {
        // The PNG's bytes are made from the pixels in the shard (stored
        // deflate blocks: tensor/png.h), or from a broadcast's one element,
        // a range at a time.
        b.data.resize(len);
        const uint64_t pixels = data_offset + p.offset;
        const tensor::PixelSource source = [&](uint64_t at, char* buf, size_t k) {
          if (!p.fill.empty()) {
            naming::FillRange(p.fill, at, buf, k);
            return absl::OkStatus();
          }
          return src.ReadFull(pixels + at, buf, k);
        };
        if (auto s = tensor::ReadPngRange(p.png, source, from, b.data.data(), len); !s.ok()) {
          log::Error(s.message());
          return absl::DataLossError(s.message());
        }
        break;
      }
    }
    if (!bufs.empty() && bufs.back().fd < 0 && b.fd < 0) {
      bufs.back().data += b.data;
    } else {
      bufs.push_back(std::move(b));
    }
  }
  ReadResult out;
  if (bufs.empty()) return out;
  static_cast<ReadBuffer&>(out) = std::move(bufs[0]);
  out.more.assign(std::make_move_iterator(bufs.begin() + 1), std::make_move_iterator(bufs.end()));
  return out;
}

// ---- Extended attributes of shard and record folders, feature files ----

void Filesystem::AddXattr(XattrList* out, absl::string_view key, std::string value) {
  out->emplace_back(absl::StrCat(kXattrPrefix, key), std::move(value));
}

void Filesystem::ShardXattrs(uint64_t shard, XattrList* out) const {
  const index::ShardIndex& idx = *shards_[shard];
  AddXattr(out, "shard", idx.path());
  AddXattr(out, "records", absl::StrCat(idx.num_records()));
  AddXattr(out, "codec", idx.codec() == source::Codec::kNone
                             ? std::string("none")
                             : std::string(source::CodecName(idx.codec())));
  if (!idx.problems().empty()) {
    std::string lines;
    for (const std::string& line : index::FormatProblems(idx.path(), idx.problems())) {
      absl::StrAppend(&lines, lines.empty() ? "" : "\n", line);
    }
    AddXattr(out, "error", std::move(lines));
  }
}

absl::Status Filesystem::RecordXattrs(const Node& node, bool read_error, XattrList* out) {
  const uint64_t shard = node.shard, record = node.record;
  const index::ShardIndex& idx = *shards_[shard];
  if (node.entry == 0) {
    AddXattr(out, "shard", idx.path());
    AddXattr(out, "record", absl::StrCat(record));
    AddXattr(out, "offset", absl::StrCat(idx.begin(record)));
    AddXattr(out, "length",
             absl::StrCat(idx.end(record) - idx.begin(record) - record::kFramingOverhead));
    if (idx.checkpoints()) {
      AddXattr(out, "compressed_offset",
               absl::StrCat(idx.checkpoints()->Before(idx.begin(record)).in));
    }
    std::optional<std::string> damage = DamageOf(shard, record);
    if (!damage && read_error && !checked_.Checked(shard, record)) {
      (void)Parse(shard, record);  // a damaged record notes its reason
      damage = DamageOf(shard, record);
    }
    if (damage) AddXattr(out, "error", std::move(*damage));
    return absl::OkStatus();
  }
  auto rec = ParseEntry(node);
  if (!rec.ok()) return rec.status();
  auto info = naming::FeatureOf((*rec)->layout, node.entry);
  if (!info) return absl::OkStatus();
  AddXattr(out, "feature", info->name);
  AddXattr(out, "kind", naming::RoleName(info->role, info->dtype));
  if (info->context) AddXattr(out, "section", "context");
  if (info->feature_list) AddXattr(out, "section", "feature_list");
  if (info->step) AddXattr(out, "step", absl::StrCat(*info->step));
  if (info->value) AddXattr(out, "value", absl::StrCat(*info->value));
  return absl::OkStatus();
}

bool Filesystem::NoteDamage(uint64_t shard, uint64_t record, absl::string_view reason) {
  MutexLock lock(&damage_mu_);
  const uint64_t key = (shard << kRecordBits) | record;
  if (damage_.contains(key)) return false;
  if (damage_.size() < kMaxDamageNotes) damage_.try_emplace(key, std::string(reason));
  return true;
}

std::optional<std::string> Filesystem::DamageOf(uint64_t shard, uint64_t record) const {
  MutexLock lock(&damage_mu_);
  auto it = damage_.find((shard << kRecordBits) | record);
  if (it == damage_.end()) return std::nullopt;
  return it->second;
}

}  // namespace tfrecordfs::vfs
