#include "tfrecordfs/arrayrecord/file.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/wire.h"

namespace tfrecordfs::arrayrecord {

namespace {

absl::Status BadFooter(absl::string_view path, uint64_t at, absl::string_view why) {
  return absl::DataLossError(
      absl::StrCat(path, ": ArrayRecord footer at byte offset ", at, ": ", why));
}

}  // namespace

absl::StatusOr<uint64_t> ParsePostscript(const Records& postscript, uint64_t file_size,
                                         absl::string_view path) {
  for (size_t i = 0; i < postscript.size(); ++i) {
    wire::Cursor cur(postscript.at(i), 0, "RiegeliPostscript");
    uint64_t footer_offset = 0, magic = 0;
    bool has_offset = false, ok = true;
    while (!cur.done()) {
      wire::Field f;
      if (!cur.Next(&f).ok()) {
        ok = false;
        break;
      }
      if (f.number == 1 && f.type == wire::kVarint) {
        footer_offset = f.scalar;
        has_offset = true;
      } else if (f.number == 2 && f.type == wire::kVarint) {
        magic = f.scalar;
      }
    }
    if (ok && has_offset && magic == kArrayRecordMagic && file_size >= kBlockSize &&
        footer_offset < file_size - kBlockSize && footer_offset >= kSignatureSize) {
      return footer_offset;
    }
  }
  return absl::DataLossError(absl::StrCat(path, ": ArrayRecord postscript at byte offset ",
                                          file_size - std::min(file_size, kBlockSize),
                                          ": no copy holds a footer offset and the magic"));
}

absl::StatusOr<Layout> ParseFooter(const Records& footer, uint64_t footer_offset,
                                   absl::string_view path) {
  if (footer.size() == 0) return BadFooter(path, footer_offset, "no metadata record");
  Layout out;
  out.from_footer = true;
  uint64_t version = 0, num_chunks = 0, num_records = 0;
  bool has_metadata = false;
  {
    wire::Cursor cur(footer.at(0), 0, "RiegeliFooterMetadata");
    while (!cur.done()) {
      wire::Field f;
      if (auto s = cur.Next(&f); !s.ok()) return BadFooter(path, footer_offset, s.message());
      if (f.number != 1 || f.type != wire::kLen) continue;
      has_metadata = true;
      wire::Cursor m(f.bytes, 0, "ArrayRecordMetadata");
      while (!m.done()) {
        wire::Field g;
        if (auto s = m.Next(&g); !s.ok()) return BadFooter(path, footer_offset, s.message());
        if (g.type == wire::kVarint) {
          if (g.number == 1) version = g.scalar;
          if (g.number == 2) num_chunks = g.scalar;
          if (g.number == 3) num_records = g.scalar;
        } else if (g.number == 4 && g.type == wire::kLen) {
          out.writer_options = std::string(g.bytes);
        }
      }
    }
  }
  if (!has_metadata) return BadFooter(path, footer_offset, "no ArrayRecordMetadata");
  if (version != kArrayRecordVersion) {
    return BadFooter(
        path, footer_offset,
        absl::StrCat("version ", version, " (this build reads version ", kArrayRecordVersion, ")"));
  }
  if (num_chunks != footer.size() - 1) {
    return BadFooter(
        path, footer_offset,
        absl::StrCat("num_chunks ", num_chunks, " but ", footer.size() - 1, " chunk entries"));
  }
  out.chunks.reserve(footer.size() - 1);
  uint64_t total = 0;
  for (size_t i = 1; i < footer.size(); ++i) {
    wire::Cursor cur(footer.at(i), 0, "ArrayRecordFooter");
    ChunkEntry e;
    while (!cur.done()) {
      wire::Field f;
      if (auto s = cur.Next(&f); !s.ok()) return BadFooter(path, footer_offset, s.message());
      if (f.type != wire::kVarint) continue;
      if (f.number == 1) e.offset = f.scalar;
      if (f.number == 2) e.decoded_data_size = f.scalar;
      if (f.number == 3) e.num_records = f.scalar;
    }
    const uint64_t floor =
        out.chunks.empty() ? kSignatureSize : out.chunks.back().offset + kChunkHeaderSize;
    if (e.offset < floor || e.offset > footer_offset - std::min(footer_offset, kChunkHeaderSize) ||
        !IsPossibleChunkBoundary(e.offset)) {
      return BadFooter(path, footer_offset,
                       absl::StrCat("chunk ", i - 1, "'s offset ", e.offset,
                                    " is out of order, overlaps the chunk before it, or lies "
                                    "past the footer"));
    }
    if (e.num_records > kMaxChunkRecords || e.decoded_data_size > kMaxChunkDecoded) {
      return BadFooter(path, footer_offset,
                       absl::StrCat("chunk ", i - 1, " at byte offset ", e.offset, " claims ",
                                    e.num_records, " records of ", e.decoded_data_size,
                                    " bytes, more than one chunk may hold"));
    }
    total += e.num_records;
    out.chunks.push_back(e);
  }
  if (total != num_records) {
    return BadFooter(path, footer_offset,
                     absl::StrCat("num_records ", num_records, " but the chunks hold ", total));
  }
  out.num_records = total;
  return out;
}

namespace {

absl::StatusOr<Records> ReadRecordsAt(source::StoredBytes in, absl::string_view path,
                                      uint64_t file_size, uint64_t at) {
  auto chunk = ReadChunk(in, path, file_size, at);
  if (!chunk.ok()) return chunk.status();
  return DecodeChunk(chunk->header, chunk->data,
                     absl::StrCat(path, ": ArrayRecord chunk at byte offset ", at));
}

absl::StatusOr<Layout> ReadFooterLayout(source::StoredBytes in, absl::string_view path,
                                        uint64_t file_size, uint64_t* footer_offset) {
  auto ps = ReadRecordsAt(in, path, file_size, file_size - kBlockSize);
  if (!ps.ok()) return ps.status();
  auto at = ParsePostscript(*ps, file_size, path);
  if (!at.ok()) return at.status();
  *footer_offset = *at;
  auto footer = ReadRecordsAt(in, path, file_size, *at);
  if (!footer.ok()) return footer.status();
  return ParseFooter(*footer, *at, path);
}

// The header of the chunk at `begin`, hash checked.
absl::StatusOr<ChunkHeader> HeaderAt(source::StoredBytes in, absl::string_view path,
                                     uint64_t file_size, uint64_t begin) {
  const uint64_t end = AddWithOverhead(begin, kChunkHeaderSize);
  if (end > file_size) return absl::DataLossError("the chunk header runs past the end of the file");
  std::string span(end - begin, '\0');
  if (auto s = source::PreadFull(in, span.data(), span.size(), begin, path); !s.ok()) return s;
  std::string head;
  for (uint64_t pos = begin; pos < end;) {
    if (IsBlockBoundary(pos)) {
      pos += kBlockHeaderSize;
      continue;
    }
    const uint64_t n = std::min(end - pos, RemainingInBlock(pos));
    head.append(span, pos - begin, n);
    pos += n;
  }
  return ParseChunkHeader(head);
}

// The walk from the signature (no footer): see file.h.
absl::StatusOr<Layout> WalkLayout(source::StoredBytes in, absl::string_view path,
                                  uint64_t file_size, uint64_t limit) {
  Layout out;
  uint64_t pos = kSignatureSize;
  // Each step moves pos forward by at least one byte: the walk ends.
  while (pos < limit) {
    auto h = HeaderAt(in, path, file_size, pos);
    if (!h.ok() && !absl::IsDataLoss(h.status()) && !absl::IsInvalidArgument(h.status())) {
      return h.status();
    }
    if (h.ok() && h->data_size <= file_size && h->num_records <= file_size) {
      const uint64_t end = ChunkEnd(*h, pos);
      if (h->type == kTransposedChunk && h->num_records > 0) {
        return TransposedError(absl::StrCat(path, ": ArrayRecord chunk at byte offset ", pos));
      }
      if (h->type == kSimpleChunk && h->num_records > 0) {
        if (h->num_records > kMaxChunkRecords) {
          return absl::DataLossError(absl::StrCat(path, ": chunk at byte offset ", pos, " claims ",
                                                  h->num_records, " records"));
        }
        out.chunks.push_back({pos, h->num_records, h->decoded_data_size});
        out.num_records += h->num_records;
      }
      if (end > file_size) {
        out.problems.push_back({pos, absl::StrCat(path, ": the chunk at byte offset ", pos,
                                                  " runs past the end of the file")});
        break;
      }
      pos = end;
      continue;
    }
    out.problems.push_back(
        {pos, absl::StrCat(path, ": riegeli chunk header at byte offset ", pos, ": ",
                           h.ok() ? "sizes past the file" : h.status().message(),
                           "; skipped to the next chunk a block header names")});
    // Resynchronise: the next valid block header names the chunk it
    // interrupts (or, when it lies between chunks, the next one).
    uint64_t b = pos - pos % kBlockSize + kBlockSize;
    uint64_t next = 0;
    for (; b + kBlockHeaderSize <= file_size && next == 0; b += kBlockSize) {
      std::string bh(kBlockHeaderSize, '\0');
      if (auto s = source::PreadFull(in, bh.data(), bh.size(), b, path); !s.ok()) return s;
      auto parsed = ParseBlockHeader(bh);
      if (!parsed.ok()) continue;
      const uint64_t cand = parsed->previous_chunk == 0 ? b : b + parsed->next_chunk;
      if (cand > pos && IsPossibleChunkBoundary(cand)) next = cand;
    }
    if (next == 0) break;
    pos = next;
  }
  return out;
}

}  // namespace

absl::StatusOr<Layout> ReadLayout(source::StoredBytes in, absl::string_view path,
                                  uint64_t file_size) {
  std::string first(kSignatureSize, '\0');
  if (file_size < kSignatureSize ||
      !source::PreadFull(in, first.data(), first.size(), 0, path).ok() || !HasSignature(first)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a riegeli/ArrayRecord file (no signature at byte offset 0)"));
  }
  uint64_t footer_offset = 0;
  if (file_size >= 2 * kBlockSize && file_size % kBlockSize == 0) {
    auto footer = ReadFooterLayout(in, path, file_size, &footer_offset);
    if (footer.ok()) return footer;
    if (absl::IsUnavailable(footer.status()) || absl::IsUnknown(footer.status())) {
      return footer.status();
    }
    // A footer the postscript named but that does not parse: walk instead
    // (up to it), and say so.
    if (footer_offset != 0) {
      auto walked = WalkLayout(in, path, file_size, footer_offset);
      if (!walked.ok()) return walked.status();
      walked->problems.insert(walked->problems.begin(),
                              {footer_offset, absl::StrCat(footer.status().message(),
                                                           "; the chunks were found by walking "
                                                           "the file instead")});
      return walked;
    }
  }
  return WalkLayout(in, path, file_size, file_size);
}

void AppendFramed(std::string* out, absl::string_view record) {
  char head[12];
  EncodeFixed64(head, record.size());
  EncodeFixed32(head + 8, crc32c::Mask(crc32c::Value(head, 8)));
  out->append(head, sizeof head);
  out->append(record.data(), record.size());
  char tail[4];
  EncodeFixed32(tail, crc32c::Mask(crc32c::Value(record)));
  out->append(tail, sizeof tail);
}

std::string Frame(const Records& records) {
  std::string out;
  out.reserve(records.values.size() + 16 * records.size());
  for (size_t i = 0; i < records.size(); ++i) AppendFramed(&out, records.at(i));
  return out;
}

absl::StatusOr<ScanResult> Scan(source::StoredBytes in, absl::string_view path, uint64_t file_size,
                                const source::StreamSink& sink,
                                const std::function<void(uint64_t)>& progress,
                                std::optional<Layout> given) {
  absl::StatusOr<Layout> layout =
      given ? absl::StatusOr<Layout>(std::move(*given)) : ReadLayout(in, path, file_size);
  if (!layout.ok()) return layout.status();
  ScanResult out;
  out.table.codec = source::Codec::kArrayRecord;
  source::Checkpoint start;
  start.stream_start = true;
  out.table.points.push_back(start);
  for (const auto& p : layout->problems) out.problems.push_back(p);
  uint64_t framed_at = 0;
  for (const ChunkEntry& e : layout->chunks) {
    if (e.num_records == 0) continue;
    const std::string where = absl::StrCat(path, ": ArrayRecord chunk at byte offset ", e.offset);
    std::string framed;
    auto chunk = ReadChunk(in, path, file_size, e.offset);
    absl::Status damage;
    if (!chunk.ok()) {
      damage = chunk.status();
    } else if (chunk->header.num_records != e.num_records ||
               chunk->header.decoded_data_size != e.decoded_data_size) {
      damage = absl::DataLossError(absl::StrCat(where, ": holds ", chunk->header.num_records,
                                                " records of ", chunk->header.decoded_data_size,
                                                " bytes where the footer says ", e.num_records,
                                                " of ", e.decoded_data_size));
    } else {
      auto records = DecodeChunk(chunk->header, chunk->data, where);
      if (absl::IsUnimplemented(records.status())) return records.status();
      if (!records.ok()) {
        damage = records.status();
      } else {
        framed = Frame(*records);
      }
    }
    if (!absl::IsDataLoss(damage) && !damage.ok()) return damage;  // I/O
    if (!damage.ok()) {
      // Empty records stand for the chunk's: their reads decode the chunk
      // again and fail (file.h).
      for (uint64_t i = 0; i < e.num_records; ++i) AppendFramed(&framed, "");
      out.problems.push_back({e.offset, absl::StrCat(damage.message(), "; its ", e.num_records,
                                                     " record(s) read as I/O errors")});
    }
    source::Checkpoint cp;
    cp.in = e.offset;
    cp.out = framed_at;
    cp.stream_start = true;
    out.table.points.push_back(cp);
    framed_at += framed.size();
    if (auto s = sink(framed); !s.ok()) return s;
    if (progress) progress(e.offset);
  }
  out.table.data_size = framed_at;
  if (progress) progress(file_size);
  out.layout = std::move(*layout);
  return out;
}

absl::StatusOr<std::vector<std::string>> ReadAllRecords(source::StoredBytes in,
                                                        absl::string_view path,
                                                        uint64_t file_size) {
  auto layout = ReadLayout(in, path, file_size);
  if (!layout.ok()) return layout.status();
  if (!layout->problems.empty()) return absl::DataLossError(layout->problems.front().message);
  std::vector<std::string> out;
  for (const ChunkEntry& e : layout->chunks) {
    auto records = ReadRecordsAt(in, path, file_size, e.offset);
    if (!records.ok()) return records.status();
    if (records->size() != e.num_records) {
      return absl::DataLossError(absl::StrCat(path, ": chunk at byte offset ", e.offset, " holds ",
                                              records->size(), " records, the footer says ",
                                              e.num_records));
    }
    for (size_t i = 0; i < records->size(); ++i) out.emplace_back(records->at(i));
  }
  return out;
}

absl::StatusOr<std::shared_ptr<const std::string>> ArrayRecordSource::BlockAt(
    uint64_t offset, uint64_t* start) const {
  const auto& points = table_->points;
  const size_t i =
      std::upper_bound(points.begin(), points.end(), offset,
                       [](uint64_t o, const source::Checkpoint& c) { return o < c.out; }) -
      points.begin() - 1;
  if (i == 0) {
    return absl::DataLossError(
        absl::StrCat(path(), ": no ArrayRecord chunk holds record byte offset ", offset));
  }
  const source::Checkpoint& cp = points[i];
  *start = cp.out;
  if (auto hit = cache_->Get(id_, i)) return hit;
  auto lease = file_.Open();
  if (!lease.ok()) return lease.status();
  const uint64_t end = i + 1 == points.size() ? table_->data_size : points[i + 1].out;
  const std::string where = absl::StrCat(path(), ": ArrayRecord chunk at byte offset ", cp.in);
  auto chunk = ReadChunk(lease->bytes(), path(), file_size_, cp.in);
  if (!chunk.ok()) return chunk.status();
  auto records = DecodeChunk(chunk->header, chunk->data, where);
  if (!records.ok()) return records.status();
  auto framed = std::make_shared<std::string>(Frame(*records));
  if (framed->size() != end - cp.out) {
    return absl::DataLossError(absl::StrCat(where, ": its records take ", framed->size(),
                                            " bytes framed where the index says ", end - cp.out));
  }
  cache_->MakeRoom(framed->size());
  std::shared_ptr<const std::string> block = std::move(framed);
  cache_->Put(id_, i, block);
  return block;
}

}  // namespace tfrecordfs::arrayrecord
