#include "tfrecordfs/record/reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/record/format.h"

namespace tfrecordfs::record {

absl::StatusOr<uint64_t> ParseHeader(const char* header12) {
  const uint32_t stored = DecodeFixed32(header12 + kLengthSize);
  const uint32_t actual = crc32c::Mask(crc32c::Value(header12, kLengthSize));
  if (stored != actual) {
    return absl::DataLossError(
        absl::StrFormat("length CRC mismatch (stored 0x%08x, computed 0x%08x)", stored, actual));
  }
  return DecodeFixed64(header12);
}

bool IsPlausibleHeader(const char* header12, uint64_t offset, uint64_t file_size) {
  if (offset > file_size || file_size - offset < kFramingOverhead) return false;
  // Called at every byte offset while resynchronising: build no Status here.
  if (DecodeFixed32(header12 + kLengthSize) != crc32c::Mask(crc32c::Value(header12, kLengthSize))) {
    return false;
  }
  return DecodeFixed64(header12) <= file_size - offset - kFramingOverhead;
}

namespace {

// A read window over the shard: small records are walked from one 64 KiB
// read instead of a pread per header, and block walks (network storage) from
// one read per block.
//
// Reads land in a page-aligned buffer, and block reads start at the page
// boundary at or below the wanted offset: a FUSE (or O_DIRECT) file system
// carries a read of k whole pages in k * 4096 / max_read requests, while an
// unaligned 8 MiB read spans one page more and costs one more round trip.
// Header and 64 KiB window reads start where asked (aligning them would add
// up to a page to each, which a header-only walk pays per record).
class Window {
 public:
  explicit Window(const source::ShardSource& src) : src_(src) {}

  // Returns a pointer to n bytes at `offset`; if the window does not hold
  // them, reads `want` >= n bytes from `offset` (from the page boundary at or
  // below it when `want` is a block, and then more if n bytes past `offset`
  // need it). The caller guarantees offset + n <= file size.
  absl::StatusOr<const char*> Fetch(uint64_t offset, size_t n, size_t want) {
    if (offset >= start_ && offset + n <= start_ + size_) {
      return buf_.get() + (offset - start_);
    }
    const uint64_t start = want >= kAlignFrom ? offset - offset % kPage : offset;
    const size_t lead = static_cast<size_t>(offset - start);
    const size_t len = std::max(lead + n, want);
    if (len > capacity_) {
      capacity_ = (len + kPage - 1) / kPage * kPage;
      buf_.reset(static_cast<char*>(std::aligned_alloc(kPage, capacity_)));
      if (!buf_) {
        capacity_ = 0;
        return absl::ResourceExhaustedError(
            absl::StrCat(src_.path(), ": no memory for a ", len, "-byte read window"));
      }
    }
    size_ = 0;
    auto got = src_.ReadAt(start, buf_.get(), len);
    if (!got.ok()) return got.status();
    size_ = *got;
    start_ = start;
    if (*got < lead + n) {
      return absl::DataLossError(
          absl::StrCat(src_.path(), ": file shrank while indexing (offset ", offset, ")"));
    }
    return buf_.get() + lead;
  }

 private:
  static constexpr size_t kPage = 4096;
  static constexpr size_t kAlignFrom = size_t{1} << 20;
  const source::ShardSource& src_;
  std::unique_ptr<char, decltype(&std::free)> buf_{nullptr, &std::free};
  size_t capacity_ = 0;
  size_t size_ = 0;
  uint64_t start_ = 0;
};

constexpr size_t kSmallRecord = 4096;
constexpr size_t kWindow = 64 * 1024;
constexpr size_t kScanChunk = 1 << 20;

// Finds the first offset >= lo whose 12 bytes form a plausible header.
absl::StatusOr<std::optional<uint64_t>> ScanForHeader(const source::ShardSource& src, uint64_t lo,
                                                      uint64_t file_size) {
  std::string buf;
  for (uint64_t base = lo; base + kFramingOverhead <= file_size;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kScanChunk, file_size - base));
    buf.resize(n);
    auto got = src.ReadAt(base, buf.data(), n);
    if (!got.ok()) return got.status();
    if (*got < kHeaderSize) break;
    for (size_t i = 0; i + kHeaderSize <= *got; ++i) {
      if (IsPlausibleHeader(buf.data() + i, base + i, file_size)) return base + i;
    }
    base += *got - (kHeaderSize - 1);  // overlap so no position is skipped
  }
  return std::optional<uint64_t>();
}

}  // namespace

namespace {

constexpr absl::string_view kTooManyPayload = "tfrecordfs/too-many-records";

}  // namespace

absl::Status TooManyRecords(absl::string_view path, uint64_t max_records, uint64_t offset,
                            bool uncompressed) {
  absl::Status s = absl::ResourceExhaustedError(
      absl::StrCat(path, ": more than ", max_records, " records (record ", max_records, " at ",
                   uncompressed ? "uncompressed " : "", "byte offset ", offset,
                   "); not indexed, to bound memory (8 bytes per record): raise the limit with "
                   "-o max_shard_records=N or --max-shard-records N"));
  s.SetPayload(kTooManyPayload, absl::Cord("1"));
  return s;
}

bool IsTooManyRecords(const absl::Status& status) {
  return status.GetPayload(kTooManyPayload).has_value();
}

absl::StatusOr<WalkResult> WalkHeaders(source::StoredBytes fd, absl::string_view path,
                                       uint64_t file_size, uint64_t start, uint64_t max_records) {
  return WalkHeaders(source::PlainSource::Borrowing(fd, std::string(path), file_size), start, 0,
                     max_records);
}

namespace {

// Grows the offsets of a walk that has reached `pos` (from `start`) of
// result->file_size once to the record count the walk so far predicts
// (records per byte times the bytes left, and 1/32 more), instead of by
// doubling: each doubling moved every offset into fresh pages (on 2M
// records of 100 B, the copies and their page faults were most of a
// `tfrecordfs index --part`'s faults). A prediction made before
// kPredictAfter records is not trusted: doubling until then. Records that
// turn out smaller than predicted double from the reservation on, and the
// next prediction (at that capacity) is made on more of the walk.
constexpr size_t kPredictAfter = 1024;
void ReserveOffsets(WalkResult* result, uint64_t start, uint64_t pos, uint64_t max_records) {
  std::vector<uint64_t>& offsets = result->offsets;
  if (offsets.size() < kPredictAfter || pos <= start || result->file_size <= pos) return;
  const double predicted = static_cast<double>(offsets.size()) *
                           static_cast<double>(result->file_size - start) /
                           static_cast<double>(pos - start);
  // At most one record per 16 bytes (the framing), and max_records (and
  // the final offset); clamped as a double before the cast.
  const double most = std::min(static_cast<double>(offsets.size() + (result->file_size - pos) / 16),
                               static_cast<double>(max_records)) +
                      1;
  const uint64_t want = static_cast<uint64_t>(std::min(predicted * (1.0 + 1.0 / 32) + 16, most));
  if (want > offsets.size() * 2) offsets.reserve(want);
}

}  // namespace

absl::StatusOr<WalkResult> WalkHeaders(const source::ShardSource& src, uint64_t start, size_t block,
                                       uint64_t max_records,
                                       const std::function<void(uint64_t walked)>& progress) {
  const uint64_t file_size = src.size();
  WalkResult result;
  result.file_size = file_size;
  Window window(src);
  uint64_t pos = start;
  std::optional<uint64_t> prev;  // start of the last accepted record
  uint64_t last_len = 0;
  uint64_t reported = start;
  while (pos < file_size) {
    if (progress && pos >= reported + kWalkProgressStep) {
      reported = pos;
      progress(pos);
    }
    if (file_size - pos < kHeaderSize) {
      result.problems.push_back(
          {pos, absl::StrCat(file_size - pos, " stray byte(s) after the last record")});
      break;
    }
    const size_t want = block > 0 ? static_cast<size_t>(std::min<uint64_t>(block, file_size - pos))
                        : last_len < kSmallRecord ? kWindow
                                                  : kHeaderSize;
    auto hdr = window.Fetch(pos, kHeaderSize, want);
    if (!hdr.ok()) return hdr.status();
    auto len = ParseHeader(*hdr);
    const uint64_t avail = file_size - pos;
    if (len.ok() && avail >= kFramingOverhead && *len <= avail - kFramingOverhead) {
      if (result.offsets.size() >= max_records) {
        return TooManyRecords(src.path(), max_records, pos, src.codec() != source::Codec::kNone);
      }
      if (result.offsets.size() == result.offsets.capacity())
        ReserveOffsets(&result, start, pos, max_records);
      result.offsets.push_back(pos);
      prev = pos;
      last_len = *len;
      pos += kFramingOverhead + *len;
      continue;
    }
    if (!len.ok()) {
      result.problems.push_back({pos, absl::StrCat("header ", len.status().message())});
    } else if (avail < kFramingOverhead) {
      result.problems.push_back({pos, absl::StrCat("truncated header: ", file_size - pos,
                                                   " byte(s) after the last record")});
    } else {
      result.problems.push_back(
          {pos,
           absl::StrCat("record length ", *len, " runs past the end of the file (",
                        avail - kFramingOverhead, " data bytes available): truncated record")});
    }
    // The previous record may be the one that is short; look from just after
    // its header so that the true next header is found even if it is earlier.
    const uint64_t lo = prev ? *prev + kHeaderSize : pos + 1;
    auto next = ScanForHeader(src, lo, file_size);
    if (!next.ok()) return next.status();
    if (!next->has_value()) break;
    const uint64_t q = **next;
    result.problems.push_back(
        {q, absl::StrCat("resynchronised: next valid header found at byte offset ", q,
                         q < pos ? absl::StrCat(" (", pos - q,
                                                " byte(s) before the position "
                                                "the previous record's length gives)")
                                 : absl::StrCat(" (", q - pos, " byte(s) skipped)"))});
    if (q >= pos + kFramingOverhead) {
      // The damage is at `pos` itself (e.g. a flipped bit in a header): keep
      // [pos, q) as one unreadable record, so that the previous record keeps
      // its exact span and stays readable, and later records keep their
      // indices.
      if (result.offsets.size() >= max_records) {
        return TooManyRecords(src.path(), max_records, pos, src.codec() != source::Codec::kNone);
      }
      result.offsets.push_back(pos);
    }
    pos = q;
    last_len = kSmallRecord;  // use exact header reads near damage
  }
  result.offsets.push_back(std::min(pos, file_size));
  if (result.offsets.size() >= 2 &&
      result.offsets.back() < result.offsets[result.offsets.size() - 2]) {
    result.offsets.back() = result.offsets[result.offsets.size() - 2];
  }
  return result;
}

namespace {

constexpr absl::string_view kFramingPayload = "tfrecordfs/framing-mismatch";

absl::Status MarkFraming(absl::Status s) {
  s.SetPayload(kFramingPayload, absl::Cord("1"));
  return s;
}

}  // namespace

bool IsFramingMismatch(const absl::Status& status) {
  return status.GetPayload(kFramingPayload).has_value();
}

absl::StatusOr<std::string> ReadRecord(int fd, absl::string_view path, uint64_t index,
                                       uint64_t begin, uint64_t end) {
  struct stat st;
  const uint64_t size = ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : end;
  return ReadRecord(source::PlainSource::Borrowing(fd, std::string(path), std::max(size, end)),
                    index, begin, end);
}

namespace {

// "<path>: record i at [uncompressed ]byte offset N: ", the prefix of every
// ReadRecord error.
std::string RecordWhere(const source::ShardSource& src, uint64_t index, uint64_t begin) {
  return absl::StrCat(src.path(), ": record ", index, " at ",
                      src.codec() == source::Codec::kNone ? "" : "uncompressed ", "byte offset ",
                      begin, ": ");
}

// Checks the framing of record `index` held in data[0, n): the header's CRC,
// a stated length that fills the span, the data CRC. Returns the data bytes.
absl::StatusOr<absl::string_view> CheckFraming(const source::ShardSource& src, uint64_t index,
                                               uint64_t begin, const char* data, size_t n) {
  auto len = ParseHeader(data);
  if (!len.ok()) {
    return MarkFraming(
        absl::DataLossError(absl::StrCat(RecordWhere(src, index, begin), len.status().message())));
  }
  if (*len != n - kFramingOverhead) {
    return MarkFraming(absl::DataLossError(
        absl::StrCat(RecordWhere(src, index, begin), "stated length ", *len, " does not match the ",
                     n - kFramingOverhead,
                     " bytes before the next record (the record is damaged or shortened)")));
  }
  const uint32_t stored = DecodeFixed32(data + kHeaderSize + *len);
  const uint32_t actual = crc32c::Mask(crc32c::Value(data + kHeaderSize, *len));
  if (stored != actual) {
    return absl::DataLossError(
        absl::StrFormat("%sdata CRC mismatch (stored 0x%08x, computed 0x%08x)",
                        RecordWhere(src, index, begin), stored, actual));
  }
  return absl::string_view(data + kHeaderSize, static_cast<size_t>(*len));
}

absl::Status CheckSpan(const source::ShardSource& src, uint64_t index, uint64_t begin,
                       uint64_t end) {
  if (end < begin || end - begin < kFramingOverhead) {
    return absl::DataLossError(
        absl::StrCat(RecordWhere(src, index, begin), "framing shorter than 16 bytes"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<absl::string_view> ReadRecordInto(const source::ShardSource& src, uint64_t index,
                                                 uint64_t begin, uint64_t end, char* dst) {
  if (absl::Status s = CheckSpan(src, index, begin, end); !s.ok()) return s;
  const size_t n = static_cast<size_t>(end - begin);
  if (absl::Status s = src.ReadFull(begin, dst, n); !s.ok()) {
    if (absl::IsDataLoss(s)) {
      return absl::DataLossError(absl::StrCat(RecordWhere(src, index, begin), s.message()));
    }
    return s;
  }
  return CheckFraming(src, index, begin, dst, n);
}

absl::StatusOr<absl::string_view> ReadRecordInto(const source::ShardSource& src, uint64_t index,
                                                 uint64_t begin, uint64_t end, RecordBuffer* buf) {
  buf->held.reset();
  if (absl::Status s = CheckSpan(src, index, begin, end); !s.ok()) return s;
  const size_t n = static_cast<size_t>(end - begin);
  if (std::optional<source::HeldBytes> held = src.Held(begin, n)) {
    buf->held = std::move(held->owner);
    return CheckFraming(src, index, begin, held->bytes.data(), n);
  }
  if (buf->bytes.size() < n) buf->bytes.resize(n);
  return ReadRecordInto(src, index, begin, end, buf->bytes.data());
}

absl::StatusOr<std::string> ReadRecord(const source::ShardSource& src, uint64_t index,
                                       uint64_t begin, uint64_t end) {
  RecordBuffer buf;
  auto data = ReadRecordInto(src, index, begin, end, &buf);
  if (!data.ok()) return data.status();
  if (buf.held) return std::string(*data);
  const size_t len = data->size();
  buf.bytes.resize(kHeaderSize + len);
  buf.bytes.erase(0, kHeaderSize);
  return std::move(buf.bytes);
}

absl::Status StreamWalker::Feed(absl::string_view bytes) {
  if (!clean_) return absl::OkStatus();
  const uint64_t end = pos_ + bytes.size();
  while (clean_) {
    if (next_ >= end) break;
    if (next_ + header_have_ < pos_) {  // cannot happen: kept in step below
      clean_ = false;
      break;
    }
    // Collect the header at next_ (it may straddle feeds). Most headers lie
    // whole inside one feed: parse those in place (a memcpy call per record
    // was a visible share of a GZIP index build of small records).
    const size_t at = static_cast<size_t>(next_ + header_have_ - pos_);
    const char* header = bytes.data() + at;
    if (header_have_ != 0 || bytes.size() - at < kHeaderSize) {
      const size_t take = std::min<size_t>(kHeaderSize - header_have_, bytes.size() - at);
      std::memcpy(header_ + header_have_, bytes.data() + at, take);
      header_have_ += take;
      if (header_have_ < kHeaderSize) break;
      header = header_;
    }
    auto len = ParseHeader(header);
    if (!len.ok() || *len > (uint64_t{1} << 62)) {
      clean_ = false;
      break;
    }
    if (result_.offsets.size() >= max_records_) {
      return TooManyRecords(path_, max_records_, next_, /*uncompressed=*/true);
    }
    std::vector<uint64_t>& offsets = result_.offsets;
    if (offsets.size() == offsets.capacity() && expected_bytes_ > next_ && next_ > 0) {
      // Records per byte so far times the bytes expected, and 1/32 more.
      const double predicted = static_cast<double>(offsets.size()) *
                               static_cast<double>(expected_bytes_) / static_cast<double>(next_);
      // Clamped as a double: a cast of a double past uint64_t's range is
      // undefined.
      const uint64_t want = static_cast<uint64_t>(
          std::min(predicted * (1.0 + 1.0 / 32) + 16, static_cast<double>(most_records_) + 1));
      if (want > offsets.size()) offsets.reserve(want);
    }
    offsets.push_back(next_);
    next_ += kFramingOverhead + *len;
    header_have_ = 0;
  }
  pos_ = end;
  return absl::OkStatus();
}

bool StreamWalker::Finish(uint64_t total) {
  if (clean_ && (header_have_ != 0 || next_ != total || pos_ != total)) clean_ = false;
  if (!clean_) return false;
  result_.offsets.push_back(total);
  result_.file_size = total;
  return true;
}

absl::Status ForEachRecordInBuffer(absl::string_view shard,
                                   const std::function<void(uint64_t, absl::string_view)>& fn) {
  uint64_t pos = 0;
  for (uint64_t index = 0; pos < shard.size(); ++index) {
    if (shard.size() - pos < kFramingOverhead) {
      return absl::DataLossError(
          absl::StrCat("record ", index, " at byte offset ", pos, ": truncated header"));
    }
    auto len = ParseHeader(shard.data() + pos);
    if (!len.ok()) {
      return absl::DataLossError(
          absl::StrCat("record ", index, " at byte offset ", pos, ": ", len.status().message()));
    }
    if (*len > shard.size() - pos - kFramingOverhead) {
      return absl::DataLossError(
          absl::StrCat("record ", index, " at byte offset ", pos, ": truncated record"));
    }
    absl::string_view data = shard.substr(pos + kHeaderSize, *len);
    if (DecodeFixed32(shard.data() + pos + kHeaderSize + *len) !=
        crc32c::Mask(crc32c::Value(data))) {
      return absl::DataLossError(
          absl::StrCat("record ", index, " at byte offset ", pos, ": data CRC mismatch"));
    }
    fn(index, data);
    pos += kFramingOverhead + *len;
  }
  return absl::OkStatus();
}

}  // namespace tfrecordfs::record
