#include "tfrecordfs/arrayrecord/writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <charconv>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tfrecordfs/arrayrecord/chunk.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/wire.h"

namespace tfrecordfs::arrayrecord {

absl::Status ParseCompression(absl::string_view text, WriterOptions* options) {
  absl::string_view name = text, level;
  if (const size_t colon = text.find(':'); colon != absl::string_view::npos) {
    name = text.substr(0, colon);
    level = text.substr(colon + 1);
  }
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("compression '", text, "': ", why));
  };
  int lo = 0, hi = 0, def = 0;
  if (name == "none" || name == "uncompressed") {
    options->compression = Compression::kNone;
  } else if (name == "brotli") {
    options->compression = Compression::kBrotli;
    lo = 0, hi = 11, def = 6;
  } else if (name == "zstd") {
    options->compression = Compression::kZstd;
    lo = -131072, hi = 22, def = 3;
  } else if (name == "snappy") {
    options->compression = Compression::kSnappy;
  } else {
    return bad("not none, brotli, zstd or snappy");
  }
  options->level = def;
  if (!level.empty() || text.find(':') != absl::string_view::npos) {
    if (lo == hi) return bad(absl::StrCat(name, " takes no level"));
    int v = 0;
    const auto [end, ec] = std::from_chars(level.data(), level.data() + level.size(), v);
    if (ec != std::errc() || end != level.data() + level.size() || v < lo || v > hi) {
      return bad(absl::StrCat("the level must be an integer from ", lo, " to ", hi));
    }
    options->level = v;
  }
  return absl::OkStatus();
}

std::string OptionsString(const WriterOptions& o) {
  std::string out =
      absl::StrCat("group_size:", o.group_size, ",transpose:false,pad_to_block_boundary:false,");
  switch (o.compression) {
    case Compression::kNone:
      absl::StrAppend(&out, "uncompressed");
      break;
    case Compression::kBrotli:
      absl::StrAppend(&out, "brotli:", o.level);
      break;
    case Compression::kZstd:
      absl::StrAppend(&out, "zstd:", o.level);
      break;
    case Compression::kSnappy:
      absl::StrAppend(&out, "snappy");
      break;
  }
  // One chunk encoded at a time, as the reference records a writer
  // without a thread pool.
  absl::StrAppend(&out, ",max_parallelism:1");
  return out;
}

absl::StatusOr<WriterOptions> ParseOptionsText(absl::string_view text) {
  WriterOptions o;
  o.options_text = std::string(text);
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("writer options '", text, "': ", why));
  };
  if (text == "default") return o;
  bool compression_seen = false;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    absl::string_view key = item, value;
    const bool has_value = item.find(':') != absl::string_view::npos;
    if (has_value) {
      key = item.substr(0, item.find(':'));
      value = item.substr(item.find(':') + 1);
    }
    auto flag = [&](bool bare, bool* out) -> absl::Status {
      if (!has_value || value.empty()) {
        *out = bare;
      } else if (value == "true" || value == "false") {
        *out = value == "true";
      } else {
        return bad(absl::StrCat(key, " is true or false"));
      }
      return absl::OkStatus();
    };
    if (key == "group_size") {
      uint64_t n = 0;
      if (!absl::SimpleAtoi(value, &n) || n == 0 || n > INT32_MAX) {
        return bad("group_size is an integer from 1 to 2147483647");
      }
      o.group_size = n;
    } else if (key == "transpose") {
      bool t = false;
      if (auto s = flag(true, &t); !s.ok()) return s;
      if (t) {
        return absl::FailedPreconditionError(
            absl::StrCat("writer options '", text,
                         "': transposed chunks (tfrecordfs writes simple chunks only)"));
      }
    } else if (key == "pad_to_block_boundary") {
      // The reference reads a bare "pad_to_block_boundary" as false.
      if (auto s = flag(false, &o.pad_to_block_boundary); !s.ok()) return s;
    } else if (key == "uncompressed" || key == "brotli" || key == "zstd" || key == "snappy") {
      if (auto s = ParseCompression(key == "uncompressed" ? absl::string_view("none") : item, &o);
          !s.ok()) {
        return bad(s.message());
      }
      compression_seen = true;
    } else if (key == "max_parallelism" || key == "saturation_delay_ms" ||
               key == "transpose_bucket_size" || key == "window_log") {
      // How the reference works, or what only transposed or zstd window
      // sizes depend on: nothing of the layout.
    } else {
      return bad(absl::StrCat("unknown option '", key, "'"));
    }
  }
  if (!compression_seen) {
    o.compression = Compression::kZstd;
    o.level = 3;
  }
  return o;
}

WriterOptions OptionsOfFiles(const std::vector<std::string>& paths) {
  WriterOptions defaults;
  defaults.group_size = 1;
  std::optional<std::string> shared;
  for (const std::string& path : paths) {
    auto fd = OpenFile(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (!fd.ok() || ::fstat(fd->get(), &st) != 0) return defaults;
    auto layout = ReadLayout(fd->get(), path, static_cast<uint64_t>(st.st_size));
    if (!layout.ok() || !layout->from_footer || layout->writer_options.empty() ||
        (shared && *shared != layout->writer_options)) {
      return defaults;
    }
    shared = layout->writer_options;
  }
  if (!shared) return defaults;
  auto parsed = ParseOptionsText(*shared);
  return parsed.ok() ? *parsed : defaults;
}

Writer::Writer(Sink sink, WriterOptions options) : sink_(std::move(sink)), options_(options) {
  if (options_.group_size == 0) options_.group_size = 1;
  status_ = Emit(absl::string_view(reinterpret_cast<const char*>(kSignature), kSignatureSize));
}

absl::Status Writer::Emit(absl::string_view bytes) {
  if (bytes.empty()) return absl::OkStatus();
  pos_ += bytes.size();
  return sink_(bytes);
}

absl::Status Writer::Add(absl::string_view record) {
  if (closed_) return absl::FailedPreconditionError("ArrayRecord writer already closed");
  if (!status_.ok()) return status_;
  pending_.emplace_back(record);
  ++records_;
  if (pending_.size() >= options_.group_size) status_ = Flush();
  return status_;
}

absl::StatusOr<std::string> Writer::Encode(const std::vector<std::string>& records,
                                           Compression compression, int level) {
  std::string sizes, values;
  for (const auto& r : records) {
    wire::PutVarint(&sizes, r.size());
    values += r;
  }
  auto cs = Compress(compression, level, sizes);
  if (!cs.ok()) return cs.status();
  auto cv = Compress(compression, level, values);
  if (!cv.ok()) return cv.status();
  std::string data(1, static_cast<char>(compression));
  wire::PutVarint(&data, cs->size());
  data += *cs;
  data += *cv;
  return data;
}

// Records (with 16 bytes each for their overhead) a batch of chunks
// gathers before a worker encodes it.
constexpr uint64_t kBatchBytes = uint64_t{1} << 20;

absl::Status Writer::Flush() {
  if (pending_.empty()) return absl::OkStatus();
  if (filling_.used == filling_.groups.size()) filling_.groups.emplace_back();
  Group& g = filling_.groups[filling_.used++];
  g.records.swap(pending_);
  pending_.clear();
  g.decoded = 0;
  for (const auto& r : g.records) g.decoded += r.size();
  filling_.bytes += g.decoded + 16 * g.records.size();
  if (filling_.bytes >= kBatchBytes) return SubmitBatch(/*inline_ok=*/false);
  return absl::OkStatus();
}

void Writer::EncodeBatch(Batch& batch, Compression compression, int level) {
  for (size_t i = 0; i < batch.used; ++i) {
    Group& g = batch.groups[i];
    g.data = Encode(g.records, compression, level);
    if (g.data.ok()) g.hash = Hash(*g.data);
  }
}

absl::Status Writer::WriteBatch(Batch& batch) {
  absl::Status status;
  for (size_t i = 0; i < batch.used && status.ok(); ++i) {
    Group& g = batch.groups[i];
    if (!g.data.ok()) {
      status = g.data.status();
      break;
    }
    chunks_.push_back({pos_, g.records.size(), g.decoded});
    ChunkHeader h;
    h.data_size = g.data->size();
    h.data_hash = g.hash;
    h.type = kSimpleChunk;
    h.num_records = g.records.size();
    h.decoded_data_size = g.decoded;
    status = WriteChunkAs(h, *g.data);
    if (status.ok()) status = AfterDataChunk();
  }
  batch.used = 0;
  batch.bytes = 0;
  return status;
}

absl::Status Writer::SubmitBatch(bool inline_ok) {
  if (filling_.used == 0) return absl::OkStatus();
  const int threads = options_.threads == 0 ? DefaultThreads() : options_.threads;
  if (pipeline_ == nullptr && (inline_ok || threads <= 1)) {
    EncodeBatch(filling_, options_.compression, options_.level);
    return WriteBatch(filling_);
  }
  if (pipeline_ == nullptr) {
    pipeline_ = std::make_unique<OrderedPipeline<Batch>>(
        threads, static_cast<size_t>(threads),
        [c = options_.compression, level = options_.level](Batch& b) { EncodeBatch(b, c, level); });
  }
  if (pipeline_->full()) {
    if (auto s = WriteFront(); !s.ok()) return s;
  }
  std::swap(pipeline_->Next(), filling_);
  filling_.used = 0;
  filling_.bytes = 0;
  pipeline_->Submit();
  return absl::OkStatus();
}

absl::Status Writer::WriteFront() {
  absl::Status s = WriteBatch(pipeline_->Front());
  pipeline_->Pop();
  return s;
}

absl::Status Writer::Drain() {
  if (auto s = SubmitBatch(/*inline_ok=*/true); !s.ok()) return s;
  while (pipeline_ != nullptr && pipeline_->pending() > 0) {
    if (auto s = WriteFront(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Writer::AfterDataChunk() {
  return options_.pad_to_block_boundary ? PadToBlockBoundary() : absl::OkStatus();
}

absl::Status Writer::AddChunk(const ChunkHeader& header, absl::string_view data) {
  if (closed_) return absl::FailedPreconditionError("ArrayRecord writer already closed");
  if (!status_.ok()) return status_;
  if (!pending_.empty()) {
    return status_ = absl::FailedPreconditionError(
               "ArrayRecord writer: a stored chunk added while records wait for theirs");
  }
  if (header.type != kSimpleChunk || header.data_size != data.size()) {
    return status_ = absl::InvalidArgumentError(
               "ArrayRecord writer: a stored chunk must be a simple chunk with its data");
  }
  // The chunks before it first, in order.
  if (auto s = Drain(); !s.ok()) return status_ = s;
  chunks_.push_back({pos_, header.num_records, header.decoded_data_size});
  records_ += header.num_records;
  status_ = WriteChunkAs(header, data);
  if (status_.ok()) status_ = AfterDataChunk();
  return status_;
}

absl::Status Writer::WriteChunk(uint8_t type, uint64_t num_records, uint64_t decoded_data_size,
                                absl::string_view data) {
  ChunkHeader h;
  h.data_size = data.size();
  h.data_hash = Hash(data);
  h.type = type;
  h.num_records = num_records;
  h.decoded_data_size = decoded_data_size;
  return WriteChunkAs(h, data);
}

absl::Status Writer::WriteChunkAs(const ChunkHeader& h, absl::string_view data) {
  const uint64_t begin = pos_;
  const uint64_t end = ChunkEnd(h, begin);
  const std::string header = EncodeChunkHeader(h);
  // The chunk's bytes (header, data, zero padding), a block header at
  // every block boundary they cross.
  std::string out;
  out.reserve(end - begin);
  uint64_t pos = begin;
  auto put = [&](absl::string_view bytes) {
    while (!bytes.empty()) {
      if (IsBlockBoundary(pos)) {
        out += EncodeBlockHeader({pos - begin, end - pos});
        pos += kBlockHeaderSize;
      }
      const uint64_t n = std::min<uint64_t>(bytes.size(), RemainingInBlock(pos));
      out.append(bytes.data(), n);
      bytes.remove_prefix(n);
      pos += n;
    }
  };
  put(header);
  put(data);
  while (pos < end) {
    if (IsBlockBoundary(pos)) {
      out += EncodeBlockHeader({pos - begin, end - pos});
      pos += kBlockHeaderSize;
      continue;
    }
    const uint64_t n = std::min(end - pos, RemainingInBlock(pos));
    out.append(n, '\0');
    pos += n;
  }
  return Emit(out);
}

absl::Status Writer::PadToBlockBoundary() {
  if (IsBlockBoundary(pos_)) return absl::OkStatus();
  // The padding chunk's end: the next block boundary with room for its
  // header (riegeli's PosAfterPadding).
  uint64_t length = RemainingInBlock(pos_);
  while (length < kChunkHeaderSize) length += kBlockSize;
  const uint64_t end = pos_ + length;
  const uint64_t data_size = DistanceWithoutOverhead(pos_, end) - kChunkHeaderSize;
  return WriteChunk(kPaddingChunk, 0, 0, std::string(data_size, '\0'));
}

absl::Status Writer::Close() {
  if (closed_) return status_;
  closed_ = true;
  if (!status_.ok()) return status_;
  if (auto s = Flush(); !s.ok()) return status_ = s;
  if (auto s = Drain(); !s.ok()) return status_ = s;
  // Its threads and batches are not needed any more (a sealed file may
  // wait a while for its fsync).
  pipeline_.reset();
  filling_ = Batch();
  // Footer: RiegeliFooterMetadata, then one ArrayRecordFooter per chunk.
  std::vector<std::string> footer;
  std::string meta, inner;
  wire::PutVarint(&inner, 1 << 3);  // version
  wire::PutVarint(&inner, kArrayRecordVersion);
  wire::PutVarint(&inner, 2 << 3);  // num_chunks
  wire::PutVarint(&inner, chunks_.size());
  wire::PutVarint(&inner, 3 << 3);  // num_records
  wire::PutVarint(&inner, records_);
  const std::string opts =
      options_.options_text.empty() ? OptionsString(options_) : options_.options_text;
  wire::PutVarint(&inner, (4 << 3) | 2);
  wire::PutVarint(&inner, opts.size());
  inner += opts;
  wire::PutVarint(&meta, (1 << 3) | 2);
  wire::PutVarint(&meta, inner.size());
  meta += inner;
  footer.push_back(meta);
  for (const ChunkEntry& e : chunks_) {
    std::string f;
    wire::PutVarint(&f, 1 << 3);
    wire::PutVarint(&f, e.offset);
    wire::PutVarint(&f, 2 << 3);
    wire::PutVarint(&f, e.decoded_data_size);
    wire::PutVarint(&f, 3 << 3);
    wire::PutVarint(&f, e.num_records);
    footer.push_back(std::move(f));
  }
  const uint64_t footer_offset = pos_;
  uint64_t footer_bytes = 0;
  for (const auto& r : footer) footer_bytes += r.size();
  auto data = Encode(footer, options_.compression, options_.level);
  if (!data.ok()) return status_ = data.status();
  if (auto s = WriteChunk(kSimpleChunk, footer.size(), footer_bytes, *data); !s.ok()) {
    return status_ = s;
  }
  if (auto s = PadToBlockBoundary(); !s.ok()) return status_ = s;
  std::string ps;
  wire::PutVarint(&ps, 1 << 3);
  wire::PutVarint(&ps, footer_offset);
  wire::PutVarint(&ps, 2 << 3);
  wire::PutVarint(&ps, kArrayRecordMagic);
  std::vector<std::string> three(3, ps);
  auto ps_data = Encode(three, Compression::kNone, 0);
  if (!ps_data.ok()) return status_ = ps_data.status();
  if (auto s = WriteChunk(kSimpleChunk, 3, 3 * ps.size(), *ps_data); !s.ok()) return status_ = s;
  status_ = PadToBlockBoundary();
  return status_;
}

FileWriter::FileWriter(UniqueFd fd, std::string path, WriterOptions options)
    : fd_(std::move(fd)),
      path_(std::move(path)),
      writer_([this](absl::string_view b) { return Out(b); }, options) {}

absl::Status FileWriter::Out(absl::string_view b) {
  buf_.append(b.data(), b.size());
  if (buf_.size() < (size_t{1} << 20)) return absl::OkStatus();
  absl::Status s = WriteFull(fd_.get(), buf_.data(), buf_.size(), path_);
  buf_.clear();
  return s;
}

absl::Status FileWriter::Append(absl::string_view payload) {
  if (sealed_) return absl::FailedPreconditionError(absl::StrCat(path_, ": already sealed"));
  bytes_ += payload.size() + 16;
  return writer_.Add(payload);
}

absl::Status FileWriter::AppendChunk(const ChunkHeader& header, absl::string_view data) {
  if (sealed_) return absl::FailedPreconditionError(absl::StrCat(path_, ": already sealed"));
  bytes_ += header.decoded_data_size + 16 * header.num_records;
  return writer_.AddChunk(header, data);
}

absl::Status FileWriter::AppendFramedRange(int, uint64_t, uint64_t, uint64_t) {
  return absl::UnimplementedError(
      absl::StrCat(path_, ": an ArrayRecord file takes records, not TFRecord framing"));
}

absl::Status FileWriter::Seal() {
  if (sealed_) return absl::OkStatus();
  sealed_ = true;
  if (auto s = writer_.Close(); !s.ok()) return s;
  absl::Status s = WriteFull(fd_.get(), buf_.data(), buf_.size(), path_);
  buf_.clear();
  return s;
}

absl::Status FileWriter::Close(bool sync) {
  if (auto s = Seal(); !s.ok()) return s;
  if (sync && ::fsync(fd_.get()) != 0) return ErrnoError(errno, path_);
  fd_ = UniqueFd();
  return absl::OkStatus();
}

absl::StatusOr<std::string> WriteToString(const std::vector<std::string>& records,
                                          WriterOptions options) {
  std::string out;
  Writer w(
      [&](absl::string_view b) {
        out.append(b.data(), b.size());
        return absl::OkStatus();
      },
      options);
  for (const auto& r : records) {
    if (auto s = w.Add(r); !s.ok()) return s;
  }
  if (auto s = w.Close(); !s.ok()) return s;
  return out;
}

}  // namespace tfrecordfs::arrayrecord
