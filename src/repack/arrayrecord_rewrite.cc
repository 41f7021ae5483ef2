#include "src/repack/arrayrecord_rewrite.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/arrayrecord/chunk.h"
#include "tfrecordfs/arrayrecord/file.h"
#include "tfrecordfs/arrayrecord/writer.h"
#include "tfrecordfs/base/crc32c.h"

namespace tfrecordfs::repack {
namespace {

struct OpenedFile {
  UniqueFd fd;
  uint64_t size = 0;
  arrayrecord::Layout layout;
};

absl::StatusOr<OpenedFile> OpenArrayRecord(const std::string& path) {
  auto fd = OpenFile(path, O_RDONLY | O_CLOEXEC);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return ErrnoError(errno, path);
  OpenedFile f;
  f.fd = *std::move(fd);
  f.size = static_cast<uint64_t>(st.st_size);
  auto layout = arrayrecord::ReadLayout(f.fd.get(), path, f.size);
  if (!layout.ok()) return layout.status();
  f.layout = *std::move(layout);
  return f;
}

}  // namespace

absl::Status WriteArrayRecordRewrite(const std::string& source, const std::set<uint64_t>& deleted,
                                     const staging::ShardEdits& edits, UniqueFd out,
                                     const std::string& temp, const std::function<void()>& half_way,
                                     ArrayRecordRewriteCounts* counts,
                                     ExpectedArrayRecord* expected) {
  auto in = OpenArrayRecord(source);
  if (!in.ok()) return in.status();
  const arrayrecord::Layout& layout = in->layout;
  if (!layout.from_footer) {
    return absl::FailedPreconditionError(absl::StrCat(
        source,
        ": a riegeli file without an ArrayRecord footer (its records were found by walking its "
        "chunks): tfrecordfs does not write such files in place (convert it with tfrecordfs "
        "reshard --format tfrecord or arrayrecord)"));
  }
  arrayrecord::WriterOptions options;
  if (!layout.writer_options.empty()) {
    auto parsed = arrayrecord::ParseOptionsText(layout.writer_options);
    if (!parsed.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(source, ": its footer's ", parsed.status().message()));
    }
    options = *std::move(parsed);
  } else if (!layout.chunks.empty()) {
    // No options recorded: the compression the first chunk says.
    auto first = arrayrecord::ReadChunk(in->fd.get(), source, in->size, layout.chunks[0].offset);
    if (!first.ok()) return first.status();
    if (!first->data.empty()) {
      const auto c = static_cast<arrayrecord::Compression>(first->data[0]);
      if (arrayrecord::CompressionName(c) != "unknown") options.compression = c;
      options.level = c == arrayrecord::Compression::kBrotli ? 6 : 3;
    }
  }
  // The reference reader's record group size (see the header).
  if (layout.chunks.size() > 1 && layout.chunks[0].num_records > 0) {
    options.group_size = layout.chunks[0].num_records;
  }
  const uint64_t group = options.group_size;
  expected->chunks.clear();
  expected->options_text =
      options.options_text.empty() ? arrayrecord::OptionsString(options) : options.options_text;
  arrayrecord::FileWriter writer(std::move(out), temp, options);

  const uint64_t total = layout.num_records + edits.added.size();
  uint64_t deleted_here = 0;
  for (uint64_t d : deleted) deleted_here += d < layout.num_records ? 1 : 0;
  const uint64_t records_out = total - deleted_here;
  bool halfway_called = half_way == nullptr;
  auto maybe_half_way = [&] {
    if (!halfway_called && writer.records() * 2 >= records_out) {
      halfway_called = true;
      half_way();
    }
  };
  // The expectation of the chunk being filled by Add (encoded).
  ExpectedArrayRecord::ChunkExpectation encoding;
  auto add = [&](absl::string_view payload) -> absl::Status {
    encoding.crcs.push_back(crc32c::Value(payload));
    if (auto s = writer.Append(payload); !s.ok()) return s;
    if (writer.at_chunk_boundary()) {
      expected->chunks.push_back(std::move(encoding));
      encoding = {};
      ++counts->chunks_encoded;
    }
    return absl::OkStatus();
  };

  uint64_t first = 0;  // the chunk's first record
  for (size_t c = 0; c < layout.chunks.size(); ++c) {
    const arrayrecord::ChunkEntry& entry = layout.chunks[c];
    const uint64_t end = first + entry.num_records;
    const auto d = deleted.lower_bound(first);
    const auto r = edits.replaced.lower_bound(first);
    const bool touched =
        (d != deleted.end() && *d < end) || (r != edits.replaced.end() && r->first < end);
    const bool last = c + 1 == layout.chunks.size();
    auto chunk = arrayrecord::ReadChunk(in->fd.get(), source, in->size, entry.offset);
    if (!chunk.ok()) return chunk.status();
    if (chunk->header.num_records != entry.num_records) {
      return absl::DataLossError(absl::StrCat(source, ": the chunk at byte offset ", entry.offset,
                                              " holds ", chunk->header.num_records,
                                              " records, its footer says ", entry.num_records));
    }
    if (!touched && chunk->header.type == arrayrecord::kSimpleChunk && writer.at_chunk_boundary() &&
        (entry.num_records == group || (last && edits.added.empty()))) {
      // The whole chunk, as it is.
      if (auto s = writer.AppendChunk(chunk->header, chunk->data); !s.ok()) return s;
      ExpectedArrayRecord::ChunkExpectation e;
      e.copied = true;
      e.header = chunk->header;
      e.source_offset = entry.offset;
      expected->chunks.push_back(std::move(e));
      counts->kept += entry.num_records;
      ++counts->chunks_copied;
    } else {
      const std::string where = absl::StrCat(source, ": chunk at byte offset ", entry.offset);
      auto records = arrayrecord::DecodeChunk(chunk->header, chunk->data, where);
      if (!records.ok()) return records.status();
      for (uint64_t j = 0; j < records->size(); ++j) {
        const uint64_t i = first + j;
        if (deleted.count(i)) {
          ++counts->deleted;
          counts->bytes_delta -= static_cast<int64_t>(records->at(j).size());
          continue;
        }
        if (auto e = edits.replaced.find(i); e != edits.replaced.end()) {
          if (auto s = add(e->second); !s.ok()) return s;
          ++counts->changed;
          counts->bytes_delta +=
              static_cast<int64_t>(e->second.size()) - static_cast<int64_t>(records->at(j).size());
          continue;
        }
        if (auto s = add(records->at(j)); !s.ok()) return s;
        ++counts->kept;
      }
    }
    maybe_half_way();
    first = end;
  }
  for (const auto& [name, payload] : edits.added) {
    if (auto s = add(payload); !s.ok()) return s;
    ++counts->added;
    counts->bytes_delta += static_cast<int64_t>(payload.size());
    maybe_half_way();
  }
  if (!encoding.crcs.empty()) {
    expected->chunks.push_back(std::move(encoding));
    ++counts->chunks_encoded;
  }
  expected->records = writer.records();
  if (auto s = writer.Close(/*sync=*/false); !s.ok()) return s;
  counts->file_bytes = writer.file_bytes();
  return absl::OkStatus();
}

absl::Status CheckArrayRecordRewrite(const std::string& temp, const ExpectedArrayRecord& expected) {
  auto bad = [&](uint64_t offset, absl::string_view why) {
    return absl::DataLossError(
        absl::StrCat(temp, ": check after write failed at byte offset ", offset, ": ", why));
  };
  auto in = OpenArrayRecord(temp);
  if (!in.ok()) return in.status();
  const arrayrecord::Layout& layout = in->layout;
  if (!layout.from_footer || !layout.problems.empty()) {
    return bad(0, layout.problems.empty() ? "no footer" : layout.problems[0].message);
  }
  if (layout.writer_options != expected.options_text) {
    return bad(0, absl::StrCat("the footer's options read '", layout.writer_options, "', written '",
                               expected.options_text, "'"));
  }
  if (layout.chunks.size() != expected.chunks.size() || layout.num_records != expected.records) {
    return bad(
        0, absl::StrCat(layout.chunks.size(), " chunks of ", layout.num_records,
                        " records, written ", expected.chunks.size(), " of ", expected.records));
  }
  for (size_t c = 0; c < layout.chunks.size(); ++c) {
    const uint64_t offset = layout.chunks[c].offset;
    const ExpectedArrayRecord::ChunkExpectation& e = expected.chunks[c];
    auto chunk = arrayrecord::ReadChunk(in->fd.get(), temp, in->size, offset);
    if (!chunk.ok()) return bad(offset, chunk.status().message());
    const arrayrecord::ChunkHeader& h = chunk->header;
    if (e.copied) {
      if (h.data_size != e.header.data_size || h.data_hash != e.header.data_hash ||
          h.type != e.header.type || h.num_records != e.header.num_records ||
          h.decoded_data_size != e.header.decoded_data_size) {
        return bad(offset, absl::StrCat("the chunk copied from byte offset ", e.source_offset,
                                        " of the old file reads back different"));
      }
      continue;
    }
    auto records = arrayrecord::DecodeChunk(h, chunk->data, temp);
    if (!records.ok()) return bad(offset, records.status().message());
    if (records->size() != e.crcs.size()) {
      return bad(offset, absl::StrCat(records->size(), " records, written ", e.crcs.size()));
    }
    for (size_t j = 0; j < e.crcs.size(); ++j) {
      if (crc32c::Value(records->at(j)) != e.crcs[j]) {
        return bad(offset, absl::StrCat("record ", j, " of the chunk reads back different"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tfrecordfs::repack
