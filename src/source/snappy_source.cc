// TensorFlow's SNAPPY framing (snappy_source.h).
#include "tfrecordfs/source/snappy_source.h"

#include <snappy.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/mutex.h"

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

// Reads the body of the block at compressed offset `at` into *body (resized
// to it; a caller reading many blocks passes the same string, whose capacity
// is then reused), or DataLoss.
absl::Status ReadBodyInto(StoredBytes fd, absl::string_view path, uint64_t file_size, uint64_t at,
                          std::string* body) {
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
  body->resize(len);
  return PreadFull(fd, body->data(), len, at + kSnappyLengthSize, path);
}

absl::StatusOr<std::string> ReadBody(StoredBytes fd, absl::string_view path, uint64_t file_size,
                                     uint64_t at) {
  std::string body;
  if (auto s = ReadBodyInto(fd, path, file_size, at, &body); !s.ok()) return s;
  return body;
}

// DecodeSnappyBlock into *out (resized to the block; its capacity reused).
absl::Status DecodeSnappyBlockInto(absl::string_view body, std::string* out) {
  auto n = UncompressedLength(body);
  if (!n.ok()) return n.status();
  out->resize(*n);
  if (!snappy::RawUncompress(body.data(), body.size(), out->data())) {
    return absl::DataLossError("the Snappy block does not decompress");
  }
  return absl::OkStatus();
}

// Checkpoints to reserve for a file of `file_size` bytes whose first block
// took `first_block` bytes (prefix included): as many as blocks of that
// size would make (TensorFlow's blocks all hold 256 KiB of input), but
// never more than kMaxReservedPoints, so that a tiny first block in a
// large file does not reserve more than the table will likely need.
constexpr uint64_t kMaxReservedPoints = uint64_t{1} << 16;
size_t PointsToReserve(uint64_t file_size, uint64_t first_block) {
  return static_cast<size_t>(std::min(file_size / first_block + 1, kMaxReservedPoints));
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
  std::string out;
  if (auto s = DecodeSnappyBlockInto(body, &out); !s.ok()) return s;
  return out;
}

absl::StatusOr<ScanResult> ScanSnappy(StoredBytes fd, absl::string_view path, uint64_t file_size,
                                      const StreamSink& sink,
                                      const std::function<void(uint64_t)>& progress, int threads) {
  ScanResult result;
  result.table.codec = Codec::kSnappy;
  result.members = 1;
  // Blocks are independent: `threads` workers read and decompress them
  // (only finding where the next block starts is sequential: a 4-byte
  // read), and this thread hands them to the sink in order. A window of
  // slots bounds the memory to a few blocks per worker, each slot's two
  // buffers reused (blocks are alike in size, so they seldom grow).
  const int workers = std::clamp(threads, 1, 8);
  const size_t window = 2 * static_cast<size_t>(workers);
  struct Slot {
    uint64_t index = 0;  // the block it holds (valid when done)
    uint64_t at = 0;     // its compressed offset
    uint64_t size = 0;   // compressed bytes, prefix included
    absl::Status status;
    bool done = false;
    std::string body, data;
  };
  std::vector<Slot> slots(window);
  Mutex mu;
  CondVar changed;
  uint64_t next_index = 0;  // the next block a worker takes
  uint64_t next_at = 0;     // where it starts
  uint64_t consumed = 0;    // blocks the sink has had
  bool stop = false;        // a block failed or the sink did: take no more
  auto work = [&] {
    for (;;) {
      uint64_t index, at;
      uint32_t len = 0;
      absl::Status framing;
      {
        MutexLock lock(&mu);
        while (!stop && next_at < file_size && next_index >= consumed + window) changed.Wait(&mu);
        if (stop || next_at >= file_size) return;
        index = next_index++;
        at = next_at;
        // Where the next block starts: this block's length prefix.
        char prefix[kSnappyLengthSize];
        if (file_size - at < kSnappyLengthSize) {
          framing = absl::DataLossError(
              absl::StrCat(file_size - at, " stray byte(s) after the last block"));
        } else {
          framing = PreadFull(fd, prefix, sizeof prefix, at, path);
          if (framing.ok()) len = BigEndian32(prefix);
        }
        // A bad block ends the stream: no block after it is taken.
        next_at = framing.ok() ? at + kSnappyLengthSize + len : file_size;
      }
      Slot& slot = slots[index % window];
      absl::Status s = framing;
      if (s.ok()) s = ReadBodyInto(fd, path, file_size, at, &slot.body);
      if (s.ok()) s = DecodeSnappyBlockInto(slot.body, &slot.data);
      MutexLock lock(&mu);
      slot.index = index;
      slot.at = at;
      slot.size = kSnappyLengthSize + len;
      slot.status = std::move(s);
      slot.done = true;
      if (!slot.status.ok()) next_at = file_size;
      changed.SignalAll();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < workers; ++t) pool.emplace_back(work);
  auto finish = [&] {
    {
      MutexLock lock(&mu);
      stop = true;
      changed.SignalAll();
    }
    for (std::thread& t : pool) t.join();
  };
  uint64_t out = 0;
  for (uint64_t index = 0;; ++index) {
    Slot* slot = &slots[index % window];
    {
      MutexLock lock(&mu);
      while (!(slot->done && slot->index == index) &&
             !(next_at >= file_size && next_index == index)) {
        changed.Wait(&mu);
      }
      if (!slot->done || slot->index != index) break;  // no block `index`: the end
    }
    if (!slot->status.ok()) {
      if (!absl::IsDataLoss(slot->status)) {
        absl::Status s = slot->status;
        finish();
        return s;
      }
      result.problem = StreamProblem{slot->at, out, std::string(slot->status.message())};
      break;
    }
    if (index == 0) {
      result.table.points.reserve(PointsToReserve(file_size, slot->size));
    }
    Checkpoint cp;
    cp.in = slot->at;
    cp.out = out;
    cp.stream_start = true;  // a block needs nothing before it
    result.table.points.push_back(cp);
    if (sink && !slot->data.empty()) {
      if (absl::Status s = sink(slot->data); !s.ok()) {
        finish();
        return s;
      }
    }
    out += slot->data.size();
    if (progress) progress(slot->at + slot->size);
    MutexLock lock(&mu);
    slot->done = false;
    ++consumed;
    changed.SignalAll();
  }
  finish();
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
  // The compressed body in a buffer kept per thread: a miss then costs no
  // allocation and no zero fill of it (about 70 KiB for TensorFlow's blocks).
  thread_local std::string body;
  absl::Status read = ReadBodyInto(lease->bytes(), path(), file_size_, cp.in, &body);
  absl::StatusOr<std::string> data =
      read.ok() ? DecodeSnappyBlock(body) : absl::StatusOr<std::string>(read);
  if (body.capacity() > (size_t{4} << 20)) std::string().swap(body);  // an outsized block's
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
