#include "tfrecordfs/index/index_file.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/arrayrecord/format.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/crc32c.h"

namespace tfrecordfs::index {

namespace {

// Field offsets in the fixed header (see the diagram in index_file.h).
constexpr size_t kVersionAt = 8;
constexpr size_t kFlagsAt = 12;
constexpr size_t kFileSizeAt = 16;
constexpr size_t kMtimeAt = 24;
constexpr size_t kFirstHeaderAt = 32;
constexpr size_t kLastHeaderAt = 44;
constexpr size_t kNumRecordsAt = 56;
constexpr size_t kNumProblemsAt = 64;
constexpr size_t kPathLengthAt = 68;
constexpr size_t kDataSizeAt = 72;
constexpr size_t kNumCheckpointsAt = 80;
constexpr size_t kReservedAt = 84;
constexpr size_t kWindowsSizeAt = 88;
constexpr size_t kMainSizeAt = 96;
constexpr size_t kInodeAt = 104;
constexpr size_t kCtimeAt = 112;
static_assert(kCtimeAt + 8 == kIndexHeaderSize);
constexpr uint32_t kCodecMask = 7;
constexpr uint8_t kStreamStartFlag = 1;
static_assert(kIndexHeaderSize % 8 == 0, "offsets must start 8-byte aligned");

absl::Status Bad(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("not a valid index file: ", what));
}

// What a header walk from offset 0 guarantees of its result (the list is in
// index_file.h, beside DecodeIndexFile). A CRC only proves the bytes are the
// ones written; these prove they could have come from a walk, so a wrong
// writer or a hand-edited file cannot shift or hide records.
absl::Status CheckWalkInvariants(const record::WalkResult& walk) {
  std::vector<uint64_t> at;  // where problems were recorded, sorted
  at.reserve(walk.problems.size());
  for (const auto& problem : walk.problems) {
    if (problem.offset > walk.file_size) {
      return Bad(absl::StrCat("a problem at byte offset ", problem.offset,
                              " lies outside the shard (", walk.file_size, " bytes)"));
    }
    if (problem.message.size() > kMaxProblemMessage) {
      return Bad(absl::StrCat("the problem message at byte offset ", problem.offset, " is ",
                              problem.message.size(), " bytes long"));
    }
    at.push_back(problem.offset);
  }
  std::sort(at.begin(), at.end());
  auto problem_at = [&at](uint64_t offset) {
    return std::binary_search(at.begin(), at.end(), offset);
  };
  const std::vector<uint64_t>& o = walk.offsets;
  if (o.front() != 0 && !problem_at(0)) {
    return Bad(absl::StrCat("the first record starts at byte offset ", o.front(),
                            ", not 0, and no damage was recorded at 0"));
  }
  for (size_t i = 1; i < o.size(); ++i) {
    if (o[i] <= o[i - 1]) {
      return Bad(absl::StrCat("offsets do not increase: record ", i - 1, " at byte offset ",
                              o[i - 1], ", then byte offset ", o[i]));
    }
    if (o[i] - o[i - 1] < record::kFramingOverhead && !problem_at(o[i])) {
      return Bad(absl::StrCat("record ", i - 1, " at byte offset ", o[i - 1], " spans only ",
                              o[i] - o[i - 1], " bytes"));
    }
  }
  if (o.back() != walk.file_size && !problem_at(o.back())) {
    return Bad(absl::StrCat("the records end at byte offset ", o.back(),
                            ", not at the shard's end (", walk.file_size,
                            "), and no damage was recorded there"));
  }
  return absl::OkStatus();
}

}  // namespace

EncodedIndexFile EncodeIndexFilePieces(const IndexFile& file) {
  EncodedIndexFile e;
  std::string& out = e.head;
  out.reserve(kIndexHeaderSize);
  out.append(kIndexMagic, sizeof kIndexMagic);
  PutFixed32(&out, kIndexVersion);
  PutFixed32(&out, static_cast<uint32_t>(file.codec));  // flags
  PutFixed64(&out, file.file_size);
  PutFixed64(&out, static_cast<uint64_t>(file.mtime_ns));
  out.append(file.first_header.data(), file.first_header.size());
  out.append(file.last_header.data(), file.last_header.size());
  PutFixed64(&out, file.num_records());
  PutFixed32(&out, static_cast<uint32_t>(file.walk.problems.size()));
  PutFixed32(&out, static_cast<uint32_t>(file.path.size()));
  PutFixed64(&out, file.codec == source::Codec::kNone ? file.file_size : file.data_size);
  PutFixed32(&out, static_cast<uint32_t>(file.checkpoints.size()));
  PutFixed32(&out, 0);
  PutFixed64(&out, file.windows.size());
  PutFixed64(&out, EncodedMainSize(file));
  PutFixed64(&out, file.inode);
  PutFixed64(&out, static_cast<uint64_t>(file.ctime_ns));
  // The offsets: on a little-endian machine, the vector's own bytes are
  // the table (8 bytes each, little-endian), written without a copy.
  const std::vector<uint64_t>& offsets = file.walk.offsets;
  if (offsets.empty()) {
    PutFixed64(&e.offsets_encoded, 0);
  } else if constexpr (std::endian::native == std::endian::little) {
    e.offsets = absl::string_view(reinterpret_cast<const char*>(offsets.data()),
                                  offsets.size() * sizeof(uint64_t));
  } else {
    e.offsets_encoded.resize(offsets.size() * 8);
    for (size_t i = 0; i < offsets.size(); ++i) {
      EncodeFixed64(e.offsets_encoded.data() + 8 * i, offsets[i]);
    }
  }
  std::string& rest = e.rest;
  for (const auto& p : file.walk.problems) {
    PutFixed64(&rest, p.offset);
    PutFixed32(&rest, static_cast<uint32_t>(p.message.size()));
    rest.append(p.message);
  }
  rest.append(file.path);
  const size_t before = out.size() + e.offsets_piece().size() + rest.size();
  rest.append((before + 7) / 8 * 8 - before, '\0');
  for (const source::Checkpoint& c : file.checkpoints) {
    PutFixed64(&rest, c.in);
    PutFixed64(&rest, c.out);
    PutFixed64(&rest, c.window_offset);
    PutFixed32(&rest, c.window_length);
    PutFixed32(&rest, c.window_crc);
    rest.push_back(static_cast<char>(c.bits));
    rest.push_back(static_cast<char>(c.stream_start ? kStreamStartFlag : 0));
    rest.append(6, '\0');
  }
  uint32_t crc = crc32c::Value(out);
  crc = crc32c::Extend(crc, e.offsets_piece().data(), e.offsets_piece().size());
  crc = crc32c::Extend(crc, rest.data(), rest.size());
  PutFixed32(&rest, crc);
  e.windows = file.windows;
  return e;
}

std::string EncodeIndexFile(const IndexFile& file) {
  const EncodedIndexFile e = EncodeIndexFilePieces(file);
  std::string out;
  const auto pieces = e.pieces();
  size_t n = 0;
  for (absl::string_view p : pieces) n += p.size();
  out.reserve(n);
  for (absl::string_view p : pieces) out.append(p.data(), p.size());
  return out;
}

uint64_t EncodedMainSize(const IndexFile& file) {
  uint64_t n = kIndexHeaderSize + 8 * std::max<uint64_t>(file.walk.offsets.size(), 1);
  for (const auto& p : file.walk.problems) n += 12 + p.message.size();
  n += file.path.size();
  n = (n + 7) / 8 * 8;
  return n + kCheckpointSize * file.checkpoints.size() + kIndexTrailerSize;
}

absl::StatusOr<uint64_t> IndexMainSize(absl::string_view header) {
  if (header.size() < kIndexHeaderSize) return Bad("too short");
  if (std::memcmp(header.data(), kIndexMagic, sizeof kIndexMagic) != 0) return Bad("bad magic");
  const uint32_t version = DecodeFixed32(header.data() + kVersionAt);
  if (version != kIndexVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("index file version ", version, " (this build reads ", kIndexVersion, ")"));
  }
  const uint64_t main_size = DecodeFixed64(header.data() + kMainSizeAt);
  if (main_size < kIndexHeaderSize + 8 + kIndexTrailerSize) return Bad("main part too short");
  return main_size;
}

absl::StatusOr<SizeRange> IndexFileSizeRange(absl::string_view header, uint64_t max_shard_size) {
  if (header.size() < kIndexHeaderSize) return Bad("too short");
  const char* h = header.data();
  if (std::memcmp(h, kIndexMagic, sizeof kIndexMagic) != 0) return Bad("bad magic");
  const uint32_t version = DecodeFixed32(h + kVersionAt);
  if (version != kIndexVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("index file version ", version, " (this build reads ", kIndexVersion, ")"));
  }
  const uint64_t file_size = DecodeFixed64(h + kFileSizeAt);
  const uint64_t data_size = DecodeFixed64(h + kDataSizeAt);
  const uint64_t n = DecodeFixed64(h + kNumRecordsAt);
  const uint64_t num_problems = DecodeFixed32(h + kNumProblemsAt);
  const uint64_t path_length = DecodeFixed32(h + kPathLengthAt);
  const uint64_t num_checkpoints = DecodeFixed32(h + kNumCheckpointsAt);
  const uint32_t codec = DecodeFixed32(h + kFlagsAt) & kCodecMask;
  const bool plain = codec == 0;
  // A usable index describes the shard as it is or a prefix of it (grown).
  if (file_size > max_shard_size) {
    return absl::FailedPreconditionError(
        absl::StrCat("stale (size changed from ", file_size, " to ", max_shard_size, " bytes)"));
  }
  // Deflate expands at most 1032:1; a GZIP member takes at least 18 bytes.
  // An ArrayRecord file's framed records: each chunk (40 bytes or more)
  // holds at most kMaxChunkDecoded bytes framed (arrayrecord/chunk.h).
  const bool array_record = codec == static_cast<uint32_t>(source::Codec::kArrayRecord);
  const uint64_t max_framed =
      (file_size / arrayrecord::kChunkHeaderSize + 1) * arrayrecord::kMaxChunkDecoded;
  if (plain          ? data_size != file_size
      : array_record ? data_size > max_framed
                     : data_size / 1032 > file_size + 1) {
    return Bad("data size does not fit the shard");
  }
  if (num_checkpoints > file_size / 18 + 1) return Bad("checkpoint count does not fit");
  // Each record takes at least 16 bytes; the walk records at most two
  // problems per resynchronisation, and each moves it at least 12 bytes on.
  // (num_problems is a u32 and n <= 2^61: no product below overflows.)
  if (n > data_size / record::kFramingOverhead) return Bad("record count does not fit");
  if (num_problems > 2 && num_problems - 2 > data_size) return Bad("problem count does not fit");
  if (path_length > kMaxIndexPath) return Bad("path too long");
  SizeRange r;
  r.min = kIndexHeaderSize + 8 * (n + 1) + 12 * num_problems + path_length +
          kCheckpointSize * num_checkpoints + kIndexTrailerSize;
  r.max = r.min + num_problems * kMaxProblemMessage + 7;
  r.windows = DecodeFixed64(h + kWindowsSizeAt);
  // A stored window is a raw deflate of at most 32 KiB: < 33 KiB.
  if (r.windows > num_checkpoints * (uint64_t{33} << 10)) return Bad("windows area does not fit");
  return r;
}

absl::StatusOr<IndexFile> DecodeIndexFile(absl::string_view bytes) {
  auto main_size = IndexMainSize(bytes);
  if (!main_size.ok()) return main_size.status();
  if (*main_size > bytes.size()) return Bad("truncated");
  bytes = bytes.substr(0, *main_size);
  const char* h = bytes.data();
  const uint32_t stored_crc = DecodeFixed32(h + bytes.size() - kIndexTrailerSize);
  if (crc32c::Value(h, bytes.size() - kIndexTrailerSize) != stored_crc) {
    return Bad("checksum mismatch (torn or damaged)");
  }
  const uint32_t flags = DecodeFixed32(h + kFlagsAt);
  if ((flags & ~kCodecMask) != 0 || (flags & kCodecMask) > source::kMaxCodec) {
    return Bad("unknown flags");
  }
  // Reserved bytes must be zero (here, in the padding and in each
  // checkpoint), so that one index has one encoding and a later version can
  // give them a meaning. The header bounds IndexFileSizeRange applies hold
  // too: a reader that skipped it must not accept more.
  if (DecodeFixed32(h + kReservedAt) != 0) return Bad("reserved header bytes are not zero");
  if (auto range = IndexFileSizeRange(bytes, DecodeFixed64(h + kFileSizeAt)); !range.ok()) {
    return range.status();
  }
  IndexFile out;
  out.codec = static_cast<source::Codec>(flags & kCodecMask);
  out.main_size = *main_size;
  out.data_size = DecodeFixed64(h + kDataSizeAt);
  out.windows_size = DecodeFixed64(h + kWindowsSizeAt);
  out.inode = DecodeFixed64(h + kInodeAt);
  out.ctime_ns = static_cast<int64_t>(DecodeFixed64(h + kCtimeAt));
  const uint32_t num_checkpoints = DecodeFixed32(h + kNumCheckpointsAt);
  out.file_size = DecodeFixed64(h + kFileSizeAt);
  out.mtime_ns = static_cast<int64_t>(DecodeFixed64(h + kMtimeAt));
  std::memcpy(out.first_header.data(), h + kFirstHeaderAt, out.first_header.size());
  std::memcpy(out.last_header.data(), h + kLastHeaderAt, out.last_header.size());
  const uint64_t n = DecodeFixed64(h + kNumRecordsAt);
  const uint32_t num_problems = DecodeFixed32(h + kNumProblemsAt);
  const uint32_t path_length = DecodeFixed32(h + kPathLengthAt);
  const size_t body = bytes.size() - kIndexHeaderSize - kIndexTrailerSize;
  const bool plain = out.codec == source::Codec::kNone;
  if (plain ? (out.data_size != out.file_size || num_checkpoints != 0 || out.windows_size != 0)
            : num_checkpoints == 0) {
    return Bad("codec, data size and checkpoints disagree");
  }
  // Every record takes at least 16 bytes of the data, which bounds n
  // before any multiplication can overflow.
  if (n > out.data_size / record::kFramingOverhead || (n + 1) > body / 8) {
    return Bad("record count does not fit");
  }
  const char* p = h + kIndexHeaderSize;
  const char* const end = h + bytes.size() - kIndexTrailerSize;
  out.walk.file_size = out.data_size;
  out.walk.offsets.resize(n + 1);
  uint64_t prev = 0;
  for (uint64_t i = 0; i <= n; ++i, p += 8) {
    const uint64_t v = DecodeFixed64(p);
    if (v < prev || v > out.data_size) return Bad("offsets out of order or past the shard size");
    out.walk.offsets[i] = v;
    prev = v;
  }
  // Each problem takes at least 12 bytes of what is left: bound the count
  // by that before reserving (a forged count would ask for tens of GB).
  if (uint64_t{num_problems} * 12 > static_cast<uint64_t>(end - p)) {
    return Bad("problem count does not fit");
  }
  out.walk.problems.reserve(num_problems);
  for (uint32_t i = 0; i < num_problems; ++i) {
    if (end - p < 12) return Bad("truncated problem list");
    record::WalkProblem problem;
    problem.offset = DecodeFixed64(p);
    const uint32_t len = DecodeFixed32(p + 8);
    p += 12;
    if (static_cast<size_t>(end - p) < len) return Bad("truncated problem message");
    problem.message.assign(p, len);
    p += len;
    out.walk.problems.push_back(std::move(problem));
  }
  if (static_cast<size_t>(end - p) < path_length) return Bad("truncated path");
  out.path.assign(p, path_length);
  p += path_length;
  const size_t pad = (8 - static_cast<size_t>(p - h) % 8) % 8;
  if (static_cast<size_t>(end - p) != pad + uint64_t{num_checkpoints} * kCheckpointSize) {
    return Bad("sizes do not add up");
  }
  for (size_t i = 0; i < pad; ++i) {
    if (p[i] != 0) return Bad("padding is not zero");
  }
  p += pad;
  out.checkpoints.reserve(num_checkpoints);
  for (uint32_t i = 0; i < num_checkpoints; ++i, p += kCheckpointSize) {
    source::Checkpoint c;
    c.in = DecodeFixed64(p);
    c.out = DecodeFixed64(p + 8);
    c.window_offset = DecodeFixed64(p + 16);
    c.window_length = DecodeFixed32(p + 24);
    c.window_crc = DecodeFixed32(p + 28);
    c.bits = static_cast<uint8_t>(p[32]);
    const uint8_t cflags = static_cast<uint8_t>(p[33]);
    c.stream_start = (cflags & kStreamStartFlag) != 0;
    const bool first = i == 0;
    const source::Checkpoint* prev_cp = first ? nullptr : &out.checkpoints.back();
    bool reserved_zero = true;
    for (size_t k = 34; k < kCheckpointSize; ++k) reserved_zero &= p[k] == 0;
    if (!reserved_zero || (cflags & ~kStreamStartFlag) != 0 || c.bits > 7 ||
        (c.stream_start && (c.bits != 0 || c.window_offset != 0 || c.window_crc != 0)) ||
        (first && (c.in != 0 || c.out != 0 || !c.stream_start)) ||
        (prev_cp && (c.in <= prev_cp->in || c.out < prev_cp->out)) || c.in > out.file_size ||
        c.out > out.data_size || (c.bits != 0 && c.in == 0) ||
        (c.stream_start ? c.window_length != 0
                        : (c.window_length == 0 || c.window_offset > out.windows_size ||
                           c.window_length > out.windows_size - c.window_offset))) {
      return Bad(absl::StrCat("checkpoint ", i, " is inconsistent"));
    }
    out.checkpoints.push_back(c);
  }
  if (auto s = CheckWalkInvariants(out.walk); !s.ok()) return s;
  return out;
}

}  // namespace tfrecordfs::index
