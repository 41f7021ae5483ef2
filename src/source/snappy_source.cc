// TensorFlow's SNAPPY framing (snappy_source.h).
#include "tfrecordfs/source/snappy_source.h"

#include <snappy.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"

namespace tfrecordfs::source {
namespace {

uint32_t BigEndian32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | u[3];
}

absl::StatusOr<uint64_t> UncompressedLength(absl::string_view body) {
  size_t n = 0;
  if (!snappy::GetUncompressedLength(body.data(), body.size(), &n)) {
    return absl::DataLossError("not a Snappy block (bad length header)");
  }
  if (n > kMaxSnappyBlock) {
    return absl::DataLossError(absl::StrCat("a Snappy block claims ", n, " bytes, more than the ",
                                            kMaxSnappyBlock, " this reader accepts"));
  }
  return n;
}

// Reads the block at compressed offset `at`: its body, or DataLoss.
absl::StatusOr<std::string> ReadBody(StoredBytes fd, absl::string_view path, uint64_t file_size,
                                     uint64_t at) {
  if (file_size - at < kSnappyLengthSize) {
    return absl::DataLossError(absl::StrCat(file_size - at, " stray byte(s) after the last block"));
  }
  char prefix[kSnappyLengthSize];
  if (auto s = PreadFull(fd, prefix, sizeof prefix, at, path); !s.ok()) return s;
  const uint32_t len = BigEndian32(prefix);
  if (len > file_size - at - kSnappyLengthSize) {
    return absl::DataLossError(absl::StrCat("block length ", len,
                                            " runs past the end of the file (",
                                            file_size - at - kSnappyLengthSize, " bytes left)"));
  }
  // The Snappy header (a varint of the uncompressed size) first, so that a
  // file that is no SNAPPY shard costs a few bytes, not a huge allocation.
  char head[10];
  const size_t head_size = std::min<size_t>(len, sizeof head);
  if (auto s = PreadFull(fd, head, head_size, at + kSnappyLengthSize, path); !s.ok()) return s;
  auto n = UncompressedLength(absl::string_view(head, head_size));
  if (!n.ok()) return n.status();
  if (len > snappy::MaxCompressedLength(*n)) {
    return absl::DataLossError(absl::StrCat(
        "block length ", len, " is more than a Snappy block of ", *n, " bytes can take"));
  }
  std::string body(len, '\0');
  if (auto s = PreadFull(fd, body.data(), len, at + kSnappyLengthSize, path); !s.ok()) return s;
  return body;
}

}  // namespace

absl::StatusOr<SnappyBlock> ParseSnappyBlock(absl::string_view bytes) {
  if (bytes.size() < kSnappyLengthSize) {
    return absl::DataLossError("shorter than a block length prefix");
  }
  SnappyBlock block;
  block.compressed = BigEndian32(bytes.data());
  const absl::string_view rest = bytes.substr(kSnappyLengthSize);
  if (block.compressed > rest.size()) {
    return absl::DataLossError(absl::StrCat("block length ", block.compressed,
                                            " runs past the end (", rest.size(), " bytes left)"));
  }
  auto n = UncompressedLength(rest.substr(0, block.compressed));
  if (!n.ok()) return n.status();
  block.uncompressed = *n;
  return block;
}

absl::StatusOr<std::string> DecodeSnappyBlock(absl::string_view body) {
  auto n = UncompressedLength(body);
  if (!n.ok()) return n.status();
  std::string out(*n, '\0');
  if (!snappy::RawUncompress(body.data(), body.size(), out.data())) {
    return absl::DataLossError("the Snappy block does not decompress");
  }
  return out;
}

absl::StatusOr<ScanResult> ScanSnappy(StoredBytes fd, absl::string_view path, uint64_t file_size,
                                      const StreamSink& sink,
                                      const std::function<void(uint64_t)>& progress) {
  ScanResult result;
  result.table.codec = Codec::kSnappy;
  result.members = 1;
  uint64_t at = 0, out = 0;
  while (at < file_size) {
    auto body = ReadBody(fd, path, file_size, at);
    absl::StatusOr<std::string> data =
        body.ok() ? DecodeSnappyBlock(*body) : absl::StatusOr<std::string>(body.status());
    if (!data.ok()) {
      if (!absl::IsDataLoss(data.status())) return data.status();
      result.problem = StreamProblem{at, out, std::string(data.status().message())};
      break;
    }
    Checkpoint cp;
    cp.in = at;
    cp.out = out;
    cp.stream_start = true;  // a block needs nothing before it
    result.table.points.push_back(cp);
    if (sink && !data->empty()) {
      if (absl::Status s = sink(*data); !s.ok()) return s;
    }
    out += data->size();
    at += kSnappyLengthSize + body->size();
    if (progress) progress(at);
  }
  if (result.table.points.empty()) {
    Checkpoint start;
    start.stream_start = true;
    result.table.points.push_back(start);
  }
  result.table.data_size = out;
  result.table.windows = Windows::InMemory("");
  return result;
}

absl::StatusOr<bool> SnappyPrefix(StoredBytes fd, absl::string_view path, uint64_t file_size,
                                  size_t min_bytes, std::string* prefix) {
  auto body = ReadBody(fd, path, file_size, 0);
  if (!body.ok())
    return absl::IsDataLoss(body.status()) ? absl::StatusOr<bool>(false) : body.status();
  auto data = DecodeSnappyBlock(*body);
  if (!data.ok() || data->size() < min_bytes) return false;
  *prefix = data->substr(0, min_bytes);
  return true;
}

absl::StatusOr<std::shared_ptr<const std::string>> SnappySource::BlockAt(uint64_t offset,
                                                                         uint64_t* start) const {
  const auto& points = table_->points;
  const size_t i = std::upper_bound(points.begin(), points.end(), offset,
                                    [](uint64_t o, const Checkpoint& c) { return o < c.out; }) -
                   points.begin() - 1;
  const Checkpoint& cp = points[i];
  *start = cp.out;
  if (auto hit = cache_->Get(id_, i)) return hit;
  auto lease = file_.Open();
  if (!lease.ok()) return lease.status();
  const uint64_t end = i + 1 < points.size() ? points[i + 1].out : table_->data_size;
  auto body = ReadBody(lease->bytes(), path(), file_size_, cp.in);
  absl::StatusOr<std::string> data =
      body.ok() ? DecodeSnappyBlock(*body) : absl::StatusOr<std::string>(body.status());
  if (!data.ok() || data->size() != end - cp.out) {
    if (data.ok() || absl::IsDataLoss(data.status())) {
      return absl::DataLossError(
          absl::StrCat(path(), ": the SNAPPY block at compressed byte offset ", cp.in,
                       " no longer decompresses as it did when indexed",
                       data.ok() ? "" : absl::StrCat(" (", data.status().message(), ")")));
    }
    return data.status();
  }
  auto bytes = std::make_shared<const std::string>(std::move(*data));
  cache_->Put(id_, i, bytes);
  return bytes;
}

}  // namespace tfrecordfs::source
