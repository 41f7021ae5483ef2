#include "tfrecordfs/arrayrecord/chunk.h"

#include <brotli/decode.h>
#include <brotli/encode.h>
#include <snappy.h>
#include <zstd.h>

#include <algorithm>
#include <functional>
#include <memory>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/wire.h"

namespace tfrecordfs::arrayrecord {

namespace {

absl::Status Damage(absl::string_view path, uint64_t begin, absl::string_view why) {
  return absl::DataLossError(
      absl::StrCat(path, ": ArrayRecord chunk at byte offset ", begin, ": ", why));
}

// Copies `len` chunk bytes from `span` (the file's bytes from chunk_begin
// on), starting `skip` chunk bytes after the chunk's beginning, checking
// every block header met on the way (`chunk_end` 0: not yet known).
absl::Status Gather(absl::string_view span, absl::string_view path, uint64_t chunk_begin,
                    uint64_t chunk_end, uint64_t skip, uint64_t len, std::string* out) {
  out->clear();
  out->reserve(len);
  uint64_t pos = chunk_begin;  // file offset
  uint64_t done = 0;           // chunk bytes passed
  while (done < skip + len) {
    if (IsBlockBoundary(pos)) {
      if (pos - chunk_begin + kBlockHeaderSize > span.size()) {
        return Damage(path, chunk_begin, absl::StrCat("cut short at byte offset ", pos));
      }
      auto bh = ParseBlockHeader(span.substr(pos - chunk_begin, kBlockHeaderSize));
      if (!bh.ok()) {
        return Damage(
            path, chunk_begin,
            absl::StrCat("the block header at byte offset ", pos, ": ", bh.status().message()));
      }
      if (bh->previous_chunk != pos - chunk_begin ||
          (chunk_end != 0 && bh->next_chunk != chunk_end - pos)) {
        return Damage(path, chunk_begin,
                      absl::StrCat("the block header at byte offset ", pos,
                                   " points at another chunk (previous_chunk ", bh->previous_chunk,
                                   ", next_chunk ", bh->next_chunk, ")"));
      }
      pos += kBlockHeaderSize;
    }
    const uint64_t room = RemainingInBlock(pos) == 0 ? kBlockSize : RemainingInBlock(pos);
    uint64_t n = std::min(room, skip + len - done);
    if (pos - chunk_begin + n > span.size()) {
      return Damage(path, chunk_begin, absl::StrCat("cut short at byte offset ", pos));
    }
    if (done + n > skip) {
      const uint64_t from = done < skip ? skip - done : 0;
      out->append(span.data() + (pos - chunk_begin) + from, n - from);
    }
    done += n;
    pos += n;
  }
  return absl::OkStatus();
}

absl::StatusOr<Chunk> ReadWith(
    const std::function<absl::Status(uint64_t, uint64_t, std::string*)>& read,
    absl::string_view path, uint64_t file_size, uint64_t begin) {
  if (!IsPossibleChunkBoundary(begin)) {
    return Damage(path, begin, "not a possible chunk boundary (inside a block header)");
  }
  if (begin >= file_size) return Damage(path, begin, "past the end of the file");
  Chunk c;
  c.begin = begin;
  std::string span;
  const uint64_t head_end = AddWithOverhead(begin, kChunkHeaderSize);
  if (head_end > file_size)
    return Damage(path, begin, "the chunk header runs past the end of the file");
  if (auto s = read(begin, head_end - begin, &span); !s.ok()) return s;
  std::string head;
  if (auto s = Gather(span, path, begin, 0, 0, kChunkHeaderSize, &head); !s.ok()) return s;
  auto h = ParseChunkHeader(head);
  if (!h.ok()) return Damage(path, begin, h.status().message());
  c.header = *h;
  if (h->data_size > kMaxChunkData || h->data_size > file_size) {
    return Damage(path, begin,
                  absl::StrCat("data_size ", h->data_size, " is past the file or the limit (",
                               kMaxChunkData, " bytes)"));
  }
  if (h->num_records > file_size) {
    return Damage(path, begin, absl::StrCat("num_records ", h->num_records, " is impossible"));
  }
  c.end = ChunkEnd(*h, begin);
  const uint64_t data_end = AddWithOverhead(begin, kChunkHeaderSize + h->data_size);
  if (data_end > file_size) {
    return Damage(path, begin,
                  absl::StrCat("its ", h->data_size, " data bytes run past the end of the file (",
                               file_size, " bytes)"));
  }
  if (auto s = read(begin, data_end - begin, &span); !s.ok()) return s;
  if (auto s = Gather(span, path, begin, c.end, kChunkHeaderSize, h->data_size, &c.data); !s.ok()) {
    return s;
  }
  if (Hash(c.data) != h->data_hash) return Damage(path, begin, "data hash mismatch");
  return c;
}

}  // namespace

absl::StatusOr<Chunk> ReadChunk(source::StoredBytes in, absl::string_view path, uint64_t file_size,
                                uint64_t begin) {
  return ReadWith(
      [&](uint64_t at, uint64_t n, std::string* out) {
        out->resize(n);
        return source::PreadFull(in, out->data(), n, at, path);
      },
      path, file_size, begin);
}

absl::StatusOr<Chunk> ReadChunkFrom(absl::string_view file, absl::string_view path,
                                    uint64_t begin) {
  return ReadWith(
      [&](uint64_t at, uint64_t n, std::string* out) {
        {
          const absl::string_view part = file.substr(at, n);
          out->assign(part.data(), part.size());
        }
        return absl::OkStatus();
      },
      path, file.size(), begin);
}

namespace {

// One zstd context per thread, reused: ZSTD_compress and ZSTD_decompress
// make and free one per call, which cost more than the work itself on the
// small chunks of group size 1 (measured: 86 us a record converting small
// records with zstd:3). The bytes are the same (zstd's documentation:
// ZSTD_compress is ZSTD_compressCCtx with a fresh context).
ZSTD_CCtx* ThreadCCtx() {
  thread_local std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> ctx(ZSTD_createCCtx(),
                                                                      ZSTD_freeCCtx);
  return ctx.get();
}
ZSTD_DCtx* ThreadDCtx() {
  thread_local std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> ctx(ZSTD_createDCtx(),
                                                                      ZSTD_freeDCtx);
  return ctx.get();
}

}  // namespace

absl::StatusOr<std::string> Decompress(Compression c, absl::string_view stored, uint64_t max_size,
                                       bool exact, absl::string_view where) {
  auto bad = [&](absl::string_view why) {
    return absl::DataLossError(absl::StrCat(where, ": ", CompressionName(c), " buffer: ", why));
  };
  if (c == Compression::kNone) {
    if (stored.size() > max_size || (exact && stored.size() != max_size)) {
      return bad(absl::StrCat("holds ", stored.size(), " bytes where ", max_size,
                              exact ? "" : " at most", " are declared"));
    }
    return std::string(stored);
  }
  wire::Cursor cur(stored, 0, "compressed buffer", "byte");
  uint64_t declared = 0;
  if (auto s = cur.Varint(&declared); !s.ok()) return bad("its size prefix is not a varint");
  if (declared > max_size || (exact && declared != max_size)) {
    return bad(absl::StrCat("declares ", declared, " decompressed bytes where ", max_size,
                            exact ? "" : " at most", " are allowed"));
  }
  const absl::string_view body = stored.substr(cur.offset());
  std::string out(declared, '\0');
  switch (c) {
    case Compression::kBrotli: {
      size_t n = out.size();
      const auto r =
          BrotliDecoderDecompress(body.size(), reinterpret_cast<const uint8_t*>(body.data()), &n,
                                  reinterpret_cast<uint8_t*>(out.data()));
      if (r != BROTLI_DECODER_RESULT_SUCCESS || n != declared) {
        return bad("does not decompress to its declared size");
      }
      return out;
    }
    case Compression::kZstd: {
      ZSTD_DCtx* ctx = ThreadDCtx();
      if (ctx == nullptr) return bad("out of memory for a zstd context");
      const size_t n = ZSTD_decompressDCtx(ctx, out.data(), out.size(), body.data(), body.size());
      if (ZSTD_isError(n)) return bad(ZSTD_getErrorName(n));
      if (n != declared) return bad("does not decompress to its declared size");
      return out;
    }
    case Compression::kSnappy: {
      size_t n = 0;
      if (!snappy::GetUncompressedLength(body.data(), body.size(), &n) || n != declared ||
          !snappy::RawUncompress(body.data(), body.size(), out.data())) {
        return bad("does not decompress to its declared size");
      }
      return out;
    }
    case Compression::kNone:
      break;
  }
  return bad("unknown compression type");
}

absl::StatusOr<std::string> Compress(Compression c, int level, absl::string_view raw) {
  std::string out;
  if (c != Compression::kNone) wire::PutVarint(&out, raw.size());
  switch (c) {
    case Compression::kNone:
      out.append(raw.data(), raw.size());
      return out;
    case Compression::kBrotli: {
      size_t n = BrotliEncoderMaxCompressedSize(raw.size());
      if (n == 0) n = raw.size() + 1024;
      const size_t at = out.size();
      out.resize(at + n);
      if (!BrotliEncoderCompress(std::clamp(level, 0, 11), BROTLI_DEFAULT_WINDOW,
                                 BROTLI_MODE_GENERIC, raw.size(),
                                 reinterpret_cast<const uint8_t*>(raw.data()), &n,
                                 reinterpret_cast<uint8_t*>(out.data() + at))) {
        return absl::InternalError("brotli compression failed");
      }
      out.resize(at + n);
      return out;
    }
    case Compression::kZstd: {
      const size_t at = out.size();
      out.resize(at + ZSTD_compressBound(raw.size()));
      ZSTD_CCtx* ctx = ThreadCCtx();
      if (ctx == nullptr) return absl::ResourceExhaustedError("no memory for a zstd context");
      const size_t n =
          ZSTD_compressCCtx(ctx, out.data() + at, out.size() - at, raw.data(), raw.size(), level);
      if (ZSTD_isError(n)) return absl::InternalError(ZSTD_getErrorName(n));
      out.resize(at + n);
      return out;
    }
    case Compression::kSnappy: {
      std::string body;
      snappy::Compress(raw.data(), raw.size(), &body);
      out.append(body.data(), body.size());
      return out;
    }
  }
  return absl::InvalidArgumentError("unknown compression type");
}

namespace {
constexpr char kRefusedPayload[] = "tfrecordfs/arrayrecord-refused";
}  // namespace

absl::Status TransposedError(absl::string_view where) {
  absl::Status s = absl::UnimplementedError(absl::StrCat(
      where,
      ": a transposed chunk (riegeli's column-wise encoding of proto records, written with "
      "ArrayRecord's transpose option), which tfrecordfs does not decode"));
  s.SetPayload(kRefusedPayload, absl::Cord("1"));
  return s;
}

bool IsRefusedFile(const absl::Status& status) {
  return absl::IsUnimplemented(status) && status.GetPayload(kRefusedPayload).has_value();
}

absl::StatusOr<Records> DecodeChunk(const ChunkHeader& header, absl::string_view data,
                                    absl::string_view where) {
  if (header.type == kTransposedChunk) return TransposedError(where);
  auto bad = [&](absl::string_view why) {
    return absl::DataLossError(absl::StrCat(where, ": ", why));
  };
  if (header.type != kSimpleChunk) {
    return bad(absl::StrCat("chunk type 0x", absl::Hex(header.type), " holds no records"));
  }
  if (header.num_records > kMaxChunkRecords ||
      header.decoded_data_size >
          kMaxChunkDecoded - 16 * std::min(header.num_records, kMaxChunkRecords)) {
    return bad(absl::StrCat("declares ", header.num_records, " records of ",
                            header.decoded_data_size, " bytes, more than one chunk may hold (",
                            kMaxChunkRecords, " records, ", kMaxChunkDecoded, " bytes)"));
  }
  if (data.empty()) return bad("empty simple chunk");
  const auto c = static_cast<Compression>(static_cast<uint8_t>(data[0]));
  if (c != Compression::kNone && c != Compression::kBrotli && c != Compression::kZstd &&
      c != Compression::kSnappy) {
    return bad(
        absl::StrCat("unknown compression type 0x", absl::Hex(static_cast<uint8_t>(data[0]))));
  }
  wire::Cursor cur(data.substr(1), 1, "simple chunk", "chunk data byte");
  uint64_t sizes_size = 0;
  if (auto s = cur.Varint(&sizes_size); !s.ok())
    return bad("compressed_sizes_size is not a varint");
  const uint64_t sizes_at = cur.offset();
  if (sizes_size > data.size() - sizes_at) {
    return bad(absl::StrCat("compressed_sizes_size ", sizes_size, " runs past the chunk data (",
                            data.size(), " bytes)"));
  }
  auto sizes = Decompress(c, data.substr(sizes_at, sizes_size), header.num_records * 10, false,
                          absl::StrCat(where, ": record sizes"));
  if (!sizes.ok()) return sizes.status();
  Records r;
  r.limits.reserve(header.num_records);
  wire::Cursor sc(*sizes, 0, "record sizes", "byte");
  uint64_t limit = 0;
  for (uint64_t i = 0; i < header.num_records; ++i) {
    uint64_t n = 0;
    if (auto s = sc.Varint(&n); !s.ok()) {
      return bad(absl::StrCat("record sizes end before record ", i, " of ", header.num_records));
    }
    if (n > header.decoded_data_size - limit) {
      return bad(absl::StrCat("record ", i, "'s size ", n, " runs past decoded_data_size ",
                              header.decoded_data_size));
    }
    limit += n;
    r.limits.push_back(limit);
  }
  if (!sc.done()) return bad("record sizes hold bytes after the last record's");
  if (limit != header.decoded_data_size) {
    return bad(absl::StrCat("record sizes add up to ", limit, ", not decoded_data_size ",
                            header.decoded_data_size));
  }
  auto values = Decompress(c, data.substr(sizes_at + sizes_size), header.decoded_data_size, true,
                           absl::StrCat(where, ": record values"));
  if (!values.ok()) return values.status();
  r.values = std::move(*values);
  return r;
}

}  // namespace tfrecordfs::arrayrecord
