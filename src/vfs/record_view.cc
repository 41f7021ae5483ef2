#include "tfrecordfs/vfs/record_view.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/example/record.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/tensor/png.h"
#include "tfrecordfs/vfs/node_id.h"

namespace tfrecordfs::vfs {

namespace {

// Reasons kept for the `error` attribute; beyond that, records are simply
// read again.
constexpr size_t kMaxDamageNotes = 65536;

}  // namespace

RecordView::RecordView(const std::vector<MountedShard>& shards, RecordViewOptions options)
    : shards_(shards),
      on_index_mismatch_(std::move(options.on_index_mismatch)),
      deletions_(options.deletions),
      dir_mode_(options.writable ? S_IFDIR | 0755 : S_IFDIR | 0555),
      file_mode_(options.writable ? S_IFREG | 0644 : S_IFREG | 0444),
      cache_(options.cache_records, options.cache_bytes) {
  for (const MountedShard& s : shards_) checked_.AddShard(s.records_shown());
  sampler_ = std::make_unique<FeatureTypeSampler>(shards_, &checked_, options.kind_sample_per_call,
                                                  options.kind_sample_total);
}

RecordView::~RecordView() = default;

absl::StatusOr<RecordView::Node> RecordView::Resolve(uint64_t ino) const {
  if (SpaceOf(ino) == Space::kRecord) {
    Node node;
    node.shard = ShardOf(ino);
    node.record = RecordOf(ino);
    node.entry = static_cast<uint32_t>(EntryOf(ino));
    // An id of another generation of the shard names a record of another
    // file (Filesystem serves the previous one's from a view of its own).
    if (node.shard < shards_.size() && shards_[node.shard].index != nullptr &&
        GenerationBitOf(ino) == (shards_[node.shard].generation & 1) &&
        node.record < shards_[node.shard].records_shown() &&
        !(deletions_ != nullptr && deletions_->IsDeleted(node.shard, node.record))) {
      return node;
    }
  }
  return absl::NotFoundError("stale node id");
}

std::string RecordView::RecordName(uint64_t shard, uint64_t record) const {
  std::string digits = absl::StrCat(record);
  const size_t width = static_cast<size_t>(shards_[shard].name_width);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

void RecordView::IndexDisagrees(uint64_t shard, uint64_t record) {
  const index::ShardIndex& idx = *shards_[shard].index;
  // A record next to damage the walk recorded is expected not to frame.
  for (const auto& p : idx.problems()) {
    if (p.offset == idx.begin(record) || p.offset == idx.end(record)) return;
  }
  log::Error("the index of ", idx.path(), " disagrees with the shard at record ", record,
             " (byte offset ", idx.begin(record),
             "): its stored index is dropped; remount to "
             "index the shard again");
  if (on_index_mismatch_) on_index_mismatch_(idx.path());
}

Attr RecordView::RecordDirAttr(uint64_t shard, uint64_t record) const {
  Attr a;
  a.ino = RecordId(shard, record, 0, shards_[shard].generation);
  a.generation = shards_[shard].generation;
  a.mode = dir_mode_;
  a.nlink = 1;
  a.mtime = shards_[shard].mtime;
  return a;
}

Attr RecordView::EntryAttr(uint64_t shard, uint64_t record, uint32_t entry,
                           const ParsedRecord& rec) const {
  const naming::Entry& e = rec.layout.entries[entry];
  Attr a;
  a.ino = RecordId(shard, record, entry, shards_[shard].generation);
  a.generation = shards_[shard].generation;
  a.mode = e.is_dir ? dir_mode_ : file_mode_;
  a.size = e.is_dir ? 0 : e.size();
  a.nlink = 1;
  a.mtime = shards_[shard].mtime;
  return a;
}

absl::StatusOr<std::shared_ptr<const ParsedRecord>> RecordView::Parse(uint64_t shard,
                                                                      uint64_t record) {
  std::shared_ptr<const ParsedRecord> rec = cache_.Get(RecordKey(shard, record));
  if (!rec) {
    const index::ShardIndex& idx = *shards_[shard].index;
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

std::shared_ptr<const ParsedRecord> RecordView::ReadAndParse(uint64_t shard, uint64_t record) {
  auto parsed = std::make_shared<ParsedRecord>();
  const index::ShardIndex& idx = *shards_[shard].index;
  parsed->data_offset = idx.begin(record) + record::kHeaderSize;
  // The record's bytes are needed only while it is parsed (the layout keeps
  // offsets): parsed where a readahead block holds them (no copy), else in
  // a buffer kept per thread for records up to kKeptRecordBytes, so a
  // `find` does not allocate, zero-fill and page-fault each record's bytes
  // (threads * kKeptRecordBytes held at most); larger ones get their own,
  // freed after.
  static constexpr size_t kKeptRecordBytes = size_t{1} << 20;
  thread_local record::RecordBuffer kept;
  record::RecordBuffer own;
  record::RecordBuffer* const buf =
      idx.end(record) - idx.begin(record) <= kKeptRecordBytes ? &kept : &own;
  auto data = record::ReadRecordInto(*shards_[shard].source, record, idx.begin(record),
                                     idx.end(record), buf);
  if (!data.ok() && record::IsFramingMismatch(data.status())) IndexDisagrees(shard, record);
  if (!data.ok()) {
    parsed->status = data.status();
    // Once per record: a mount read epoch after epoch (the record cache
    // forgets) would otherwise log the same damage every time.
    if (NoteDamage(shard, record, data.status().message())) {
      log::Error(data.status().message());
    } else {
      log::Debug(data.status().message());
    }
  } else {
    const example::DecodedRecord decoded = example::DecodeRecord(*data);
    switch (decoded.kind) {
      case example::PayloadKind::kExample:
        sampler_->Learn(decoded.example);
        parsed->layout = naming::LayoutExample(decoded.example, *data);
        break;
      case example::PayloadKind::kSequenceExample:
        sampler_->Learn(decoded.sequence);
        parsed->layout = naming::LayoutSequence(decoded.sequence, *data);
        break;
      case example::PayloadKind::kExampleList:
        sampler_->Learn(decoded.list);
        parsed->layout = naming::LayoutExampleList(decoded.list, *data);
        break;
      case example::PayloadKind::kExampleInExample:
        sampler_->Learn(decoded.list);
        parsed->layout =
            naming::LayoutExampleList(decoded.list, *data, /*example_in_example=*/true);
        break;
      case example::PayloadKind::kRaw:
        log::Debug(idx.path(), ": record ", record, " at byte offset ", idx.begin(record), ": ",
                   decoded.raw_reason, "; shown raw");
        parsed->layout = naming::LayoutRaw(data->size());
        break;
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
  }
  buf->held.reset();  // the readahead block: its budget's, not this thread's
  // Cached layouts are charged by their memory: no growth slack.
  parsed->layout.entries.shrink_to_fit();
  records_read_.fetch_add(1, std::memory_order_relaxed);
  if (parsed->status.ok()) checked_.MarkChecked(shard, record);
  cache_.Put(RecordKey(shard, record), parsed);
  return parsed;
}

absl::StatusOr<std::shared_ptr<const ParsedRecord>> RecordView::ParseEntry(const Node& node) {
  auto rec = Parse(node.shard, node.record);
  if (!rec.ok()) return rec.status();
  if (node.entry >= (*rec)->layout.entries.size()) return absl::NotFoundError("stale node id");
  return rec;
}

absl::StatusOr<RecordView::ParsedNode> RecordView::ResolveParsed(uint64_t ino) {
  auto node = Resolve(ino);
  if (!node.ok()) return node.status();
  auto rec = ParseEntry(*node);
  if (!rec.ok()) return rec.status();
  return ParsedNode{*node, std::move(*rec)};
}

absl::StatusOr<uint64_t> RecordView::Open(uint64_t ino, int flags) {
  const bool writes = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
  auto node = Resolve(ino);
  if (!node.ok()) return node.status();
  if (node->entry != 0 && checked_.Checked(node->shard, node->record)) {
    // The common open of a warm file: the record was found intact before and
    // the kernel only opens ids it was given. Its layout may have left the
    // cache; reading and checking the whole record again is not needed to
    // open one of its files (the data comes from the page cache).
    if (writes) return ReadOnlyError();
    return uint64_t{0};
  }
  auto a = GetAttr(ino);
  if (!a.ok()) return a.status();
  if (writes) return ReadOnlyError();
  if (node->entry != 0) {
    // Check the record now, so that a damaged record fails at open().
    auto rec = Parse(node->shard, node->record);
    if (!rec.ok()) return rec.status();
  }
  return uint64_t{0};
}

absl::StatusOr<Attr> RecordView::LookupRecord(uint64_t shard, absl::string_view name) const {
  // The name is a record index, padded or not.
  uint64_t record;
  const bool digits =
      !name.empty() && name.size() <= 19 &&
      std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || !absl::SimpleAtoi(name, &record)) return absl::NotFoundError(name);
  if (record >= shards_[shard].records_shown()) return absl::NotFoundError(name);
  const bool canonical = name == RecordName(shard, record) || name == absl::StrCat(record);
  if (!canonical) return absl::NotFoundError(name);
  if (deletions_ != nullptr && deletions_->IsDeleted(shard, record)) {
    return absl::NotFoundError(name);
  }
  return RecordDirAttr(shard, record);
}

void RecordView::ReadShardDir(uint64_t shard, const Attr& self, uint64_t offset,
                              const EmitFn& emit) const {
  if (!EmitDots(self, &offset, emit)) return;
  const uint64_t count = shards_[shard].records_shown();
  for (uint64_t r = offset - 2; r < count; ++r) {
    // Offsets stay those of the records: a deletion between two calls
    // neither skips nor repeats a record.
    if (deletions_ != nullptr && deletions_->IsDeleted(shard, r)) continue;
    if (!emit(RecordName(shard, r), RecordDirAttr(shard, r), r + 3)) break;
  }
}

absl::StatusOr<Attr> RecordView::GetAttr(uint64_t ino) {
  auto n = Resolve(ino);
  if (!n.ok()) return n.status();
  const Node& node = *n;
  if (node.entry == 0) return RecordDirAttr(node.shard, node.record);
  auto rec = ParseEntry(node);
  if (!rec.ok()) return rec.status();
  return EntryAttr(node.shard, node.record, node.entry, **rec);
}

absl::StatusOr<Attr> RecordView::Lookup(uint64_t parent_ino, absl::string_view name) {
  auto p = ResolveParsed(parent_ino);
  if (!p.ok()) return p.status();
  const Node& parent = p->node;
  if (!p->entry().is_dir) return PosixError(ENOTDIR, "not a directory");
  auto child = naming::FindChild(p->rec->layout, parent.entry, name);
  if (!child) return absl::NotFoundError(name);
  return EntryAttr(parent.shard, parent.record, *child, *p->rec);
}

absl::Status RecordView::ReadDir(uint64_t ino, uint64_t /*fh*/, uint64_t offset,
                                 const EmitFn& emit) {
  auto n = ResolveParsed(ino);
  if (!n.ok()) return n.status();
  const Node& dir = n->node;
  const ParsedRecord& rec = *n->rec;
  const naming::Entry& d = n->entry();
  if (!d.is_dir) return PosixError(ENOTDIR, "not a directory");
  if (!EmitDots(EntryAttr(dir.shard, dir.record, dir.entry, rec), &offset, emit)) {
    return absl::OkStatus();
  }
  for (uint64_t k = offset - 2; k < d.num_children; ++k) {
    const uint32_t c = d.first_child + static_cast<uint32_t>(k);
    if (!emit(rec.layout.entries[c].name, EntryAttr(dir.shard, dir.record, c, rec), k + 3)) {
      break;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ReadResult> RecordView::Read(uint64_t ino, uint64_t /*fh*/, uint64_t offset,
                                            size_t size) {
  auto resolved = ResolveParsed(ino);
  if (!resolved.ok()) return resolved.status();
  const naming::Entry& e = resolved->entry();
  if (e.is_dir) return PosixError(EISDIR, "is a directory");
  const uint64_t total = e.size();
  const size_t n =
      offset >= total ? 0 : static_cast<size_t>(std::min<uint64_t>(size, total - offset));
  return ReadPieces(resolved->node.shard, resolved->rec->data_offset, e, offset, n);
}

absl::StatusOr<ReadResult> RecordView::ReadPieces(uint64_t shard, uint64_t data_offset,
                                                  const naming::Entry& e, uint64_t offset,
                                                  size_t n) const {
  const source::ShardSource& src = *shards_[shard].source;
  std::vector<ReadBuffer> bufs;
  auto each = [&](const naming::Piece& p, uint64_t from, size_t len) -> absl::Status {
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
    return absl::OkStatus();
  };
  if (auto s = naming::ForEachPieceIn(e, offset, n, each); !s.ok()) return s;
  ReadResult out;
  if (bufs.empty()) return out;
  static_cast<ReadBuffer&>(out) = std::move(bufs[0]);
  out.more.assign(std::make_move_iterator(bufs.begin() + 1), std::make_move_iterator(bufs.end()));
  return out;
}

// ---- Extended attributes of record folders and feature files ----

absl::Status RecordView::Xattrs(uint64_t ino, bool read_error, XattrList* out) {
  auto n = Resolve(ino);
  if (!n.ok()) return n.status();
  const Node& node = *n;
  const uint64_t shard = node.shard, record = node.record;
  const index::ShardIndex& idx = *shards_[shard].index;
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
  if (info->example) {
    AddXattr(out, "section", "examples");
    AddXattr(out, "example", absl::StrCat(*info->example));
  }
  if (info->step) AddXattr(out, "step", absl::StrCat(*info->step));
  if (info->value) AddXattr(out, "value", absl::StrCat(*info->value));
  return absl::OkStatus();
}

void RecordView::ResetShard(uint64_t shard) {
  cache_.Clear();
  checked_.ResetShard(shard, shards_[shard].records_shown());
  MutexLock lock(&damage_mu_);
  absl::erase_if(damage_, [&](const auto& kv) { return ShardOfKey(kv.first) == shard; });
}

bool RecordView::NoteDamage(uint64_t shard, uint64_t record, absl::string_view reason) {
  MutexLock lock(&damage_mu_);
  const uint64_t key = RecordKey(shard, record);
  if (damage_.contains(key)) return false;
  if (damage_.size() < kMaxDamageNotes) damage_.try_emplace(key, std::string(reason));
  return true;
}

std::optional<std::string> RecordView::DamageOf(uint64_t shard, uint64_t record) const {
  MutexLock lock(&damage_mu_);
  auto it = damage_.find(RecordKey(shard, record));
  if (it == damage_.end()) return std::nullopt;
  return it->second;
}

// ---- Deletions (record_deletions.h) ----

absl::Status RecordView::RmdirInShard(uint64_t shard, absl::string_view name) {
  auto attr = LookupRecord(shard, name);
  if (!attr.ok()) return attr.status();
  if (deletions_ == nullptr) return ReadOnlyError();
  const Node node{shard, RecordOf(attr->ino), 0};
  auto rec = Parse(node.shard, node.record);
  // A damaged record lists nothing: it can be removed as it is; so can a
  // record without features. The others' files go first (rm -r: their
  // unlinks edit the record, record_edits.h).
  if (rec.ok() && (*rec)->layout.entries[0].num_children > 0) {
    return PosixError(ENOTEMPTY, "directory not empty");
  }
  if (!rec.ok() && !absl::IsDataLoss(rec.status())) return rec.status();
  return deletions_->DeleteRecord(node.shard, node.record);
}

}  // namespace tfrecordfs::vfs
