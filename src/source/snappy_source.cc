// TensorFlow's SNAPPY framing (snappy_source.h).
#include "tfrecordfs/source/snappy_source.h"

#include <snappy.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/parallel.h"

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

namespace {

// Small blocks are handed to a worker in runs of up to kRunBytes of
// compressed bytes (read at once), so that a file of millions of tiny or
// empty blocks costs no lock hand-over, thread wake-up and three reads per
// block; a larger block is a run of its own (TensorFlow's: one each, in
// parallel as before).
constexpr uint64_t kRunBytes = uint64_t{64} << 10;
constexpr size_t kRunBlocks = 16384;

// The blocks of one run: the worker's reads and output.
struct RunBlock {
  uint64_t at = 0;    // its length prefix's compressed offset
  uint64_t size = 0;  // uncompressed bytes (in Slot::data, in order)
};

}  // namespace

absl::StatusOr<ScanResult> ScanSnappy(StoredBytes fd, absl::string_view path, uint64_t file_size,
                                      const StreamSink& sink,
                                      const std::function<void(uint64_t)>& progress, int threads) {
  ScanResult result;
  result.table.codec = Codec::kSnappy;
  result.members = 1;
  // Runs of blocks are independent: `threads` workers read and decompress
  // them (base/parallel.h's ordered pipeline); this thread finds where each
  // run starts (the block length prefixes, read ahead into `ahead`: the
  // only sequential part) and hands the runs to the sink in order. The
  // pipeline's window bounds the memory to two runs per worker, each
  // slot's buffers reused.
  const int workers = std::clamp(threads, 1, 8);
  struct Slot {
    uint64_t at = 0;               // its compressed offset
    uint64_t end = 0;              // after its last block
    size_t count = 0;              // its blocks (claimed)
    absl::Status framing;          // of the block after the `count` claimed
    std::vector<RunBlock> blocks;  // those that decompressed, in order
    absl::Status status;           // of the block after them, if one failed
    uint64_t bad_at = 0;           // that block's compressed offset
    std::string body, data;
  };
  // A worker's part: the run's blocks read and decompressed.
  auto work = [&](Slot& slot) {
    const uint64_t at = slot.at, end = slot.end;
    const size_t count = slot.count;
    slot.blocks.clear();
    slot.data.clear();
    slot.status = absl::OkStatus();
    slot.bad_at = end;
    uint64_t block_at = at;
    if (count == 1 && end - at > kRunBytes) {
      // A large block: its header checked before its body is read.
      absl::Status s = ReadBodyInto(fd, path, file_size, at, &slot.body);
      if (s.ok()) s = DecodeSnappyBlockInto(slot.body, &slot.data);
      if (s.ok()) {
        slot.blocks.push_back({at, slot.data.size()});
      } else {
        slot.status = std::move(s);
        slot.bad_at = at;
      }
    } else if (count > 0) {
      // Small blocks: the run's bytes at once (at most kRunBytes, but
      // never past the end of the file), then each block from memory.
      const uint64_t n = std::min(end, file_size) - at;
      slot.body.resize(n);
      absl::Status s = PreadFull(fd, slot.body.data(), n, at, path);
      for (size_t b = 0; b < count && s.ok(); ++b) {
        auto block = ParseSnappyBlock(absl::string_view(slot.body).substr(block_at - at));
        if (block.ok() && block->compressed > snappy::MaxCompressedLength(block->uncompressed)) {
          block = absl::DataLossError(absl::StrCat("block length ", block->compressed,
                                                   " is more than a Snappy block of ",
                                                   block->uncompressed, " bytes can take"));
        }
        if (!block.ok()) {
          s = block.status();
          break;
        }
        const size_t was = slot.data.size();
        slot.data.resize(was + block->uncompressed);
        if (!snappy::RawUncompress(slot.body.data() + (block_at - at) + kSnappyLengthSize,
                                   block->compressed, slot.data.data() + was)) {
          slot.data.resize(was);
          s = absl::DataLossError("the Snappy block does not decompress");
          break;
        }
        slot.blocks.push_back({block_at, block->uncompressed});
        block_at += kSnappyLengthSize + block->compressed;
      }
      if (!s.ok()) {
        slot.status = std::move(s);
        slot.bad_at = block_at;
      }
    }
    if (slot.status.ok() && !slot.framing.ok()) {
      slot.status = slot.framing;
      slot.bad_at = end;
    }
  };
  OrderedPipeline<Slot> pipe(workers, 2 * static_cast<size_t>(workers), work);

  uint64_t next_at = 0;  // where the next run starts (file_size: no more runs)
  std::string ahead;     // file bytes [ahead_at, ahead_at + size)
  uint64_t ahead_at = 0;
  uint64_t last_len = 0;  // the previous block's compressed length
  // The length prefix of the block at `at`.
  auto prefix_at = [&](uint64_t at, uint32_t* len) -> absl::Status {
    if (file_size - at < kSnappyLengthSize) {
      return absl::DataLossError(
          absl::StrCat(file_size - at, " stray byte(s) after the last block"));
    }
    if (at < ahead_at || at + kSnappyLengthSize > ahead_at + ahead.size()) {
      // After a large block, the next one is likely large too: its prefix
      // only; after small ones, the prefixes of a run's worth at once.
      const uint64_t want =
          std::min(last_len > kRunBytes ? kSnappyLengthSize : kRunBytes, file_size - at);
      ahead.resize(want);
      ahead_at = at;
      if (auto s = PreadFull(fd, ahead.data(), want, at, path); !s.ok()) return s;
    }
    *len = BigEndian32(ahead.data() + (at - ahead_at));
    last_len = *len;
    return absl::OkStatus();
  };
  // Claims the next run into the pipeline: blocks while they fit in
  // kRunBytes, or one larger block.
  auto claim = [&] {
    Slot& slot = pipe.Next();
    const uint64_t at = next_at;
    uint64_t end = at;
    size_t count = 0;
    absl::Status framing;
    while (end < file_size && count < kRunBlocks) {
      uint32_t len = 0;
      framing = prefix_at(end, &len);
      if (!framing.ok()) break;
      const uint64_t next = end + kSnappyLengthSize + len;
      if (count > 0 && next - at > kRunBytes) break;
      ++count;
      end = next;
      if (next - at > kRunBytes || next > file_size) break;  // the worker reports the latter
    }
    // A bad block ends the stream: no block after it is taken.
    next_at = framing.ok() ? std::min(end, file_size) : file_size;
    slot.at = at;
    slot.end = end;
    slot.count = count;
    slot.framing = std::move(framing);
    pipe.Submit();
  };

  uint64_t out = 0;
  for (uint64_t index = 0;; ++index) {
    while (!pipe.full() && next_at < file_size) claim();
    if (pipe.pending() == 0) break;  // no run `index`: the end
    Slot* slot = &pipe.Front();
    if (index == 0 && !slot->blocks.empty()) {
      const uint64_t first = slot->count == 1 ? slot->end - slot->at : kRunBytes;
      result.table.points.reserve(PointsToReserve(file_size, first));
    }
    // A checkpoint at the first block of each group (snappy_source.h); the
    // sink gets each block's bytes as before.
    size_t from = 0;
    for (const RunBlock& block : slot->blocks) {
      const std::vector<Checkpoint>& points = result.table.points;
      if (points.empty() || out - points.back().out >= kSnappyGroupBytes ||
          block.at - points.back().in >= kSnappyGroupBytes) {
        Checkpoint cp;
        cp.in = block.at;
        cp.out = out;
        cp.stream_start = true;  // a block needs nothing before it
        result.table.points.push_back(cp);
      }
      if (sink && block.size > 0) {
        if (absl::Status s = sink(absl::string_view(slot->data).substr(from, block.size));
            !s.ok()) {
          return s;
        }
      }
      from += block.size;
      out += block.size;
    }
    if (!slot->status.ok()) {
      // The runs claimed after it are dropped with the pipeline.
      if (!absl::IsDataLoss(slot->status)) return slot->status;
      result.problem = StreamProblem{slot->bad_at, out, std::string(slot->status.message())};
      break;
    }
    if (progress) progress(std::min(slot->end, file_size));
    pipe.Pop();
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
  const bool last = i + 1 == points.size();
  const uint64_t end = last ? table_->data_size : points[i + 1].out;
  // The group's blocks, from its checkpoint to the next one (the last
  // group: until its bytes are all there). Their compressed bytes are read
  // in pieces of at least kSnappyGroupBytes, so a group of tiny blocks
  // costs a few reads, not two per block; the buffer is kept per thread.
  thread_local std::string buf;
  uint64_t buf_at = 0;
  buf.clear();
  // Bytes [at, at + n) of the file, from buf (read into it when needed).
  auto bytes = [&](uint64_t at, uint64_t n) -> absl::StatusOr<absl::string_view> {
    if (n > file_size_ - std::min(at, file_size_)) {
      return absl::DataLossError(
          absl::StrCat("a block runs past the end of the file at "
                       "compressed byte offset ",
                       at));
    }
    if (at < buf_at || at + n > buf_at + buf.size()) {
      const uint64_t want = std::min(std::max<uint64_t>(n, kSnappyGroupBytes), file_size_ - at);
      buf.resize(want);
      buf_at = at;
      if (auto s = PreadFull(lease->bytes(), buf.data(), want, at, path()); !s.ok()) return s;
    }
    return absl::string_view(buf).substr(at - buf_at, n);
  };
  std::string data;
  absl::Status status;
  uint64_t at = cp.in;
  while (status.ok() && (last ? cp.out + data.size() < end : at < points[i + 1].in)) {
    auto prefix = bytes(at, kSnappyLengthSize);
    if (!prefix.ok()) {
      status = prefix.status();
      break;
    }
    const uint32_t len = BigEndian32(prefix->data());
    auto body = bytes(at + kSnappyLengthSize, len);
    if (!body.ok()) {
      status = body.status();
      break;
    }
    auto n = UncompressedLength(*body);
    if (!n.ok() || cp.out + data.size() + *n > end) {
      status = n.ok() ? absl::DataLossError("more bytes than indexed") : n.status();
      break;
    }
    const size_t was = data.size();
    data.resize(was + *n);
    if (!snappy::RawUncompress(body->data(), body->size(), data.data() + was)) {
      status = absl::DataLossError("the Snappy block does not decompress");
    }
    at += kSnappyLengthSize + len;
  }
  if (buf.capacity() > (size_t{4} << 20)) std::string().swap(buf);  // an outsized block's
  if (status.ok() && data.size() != end - cp.out) {
    status = absl::DataLossError(absl::StrCat(data.size(), " bytes, ", end - cp.out, " indexed"));
  }
  if (!status.ok()) {
    if (absl::IsDataLoss(status)) {
      return absl::DataLossError(
          absl::StrCat(path(), ": the SNAPPY blocks at compressed byte offset ", cp.in,
                       " no longer decompress as they did when indexed (", status.message(), ")"));
    }
    return status;
  }
  auto shared = std::make_shared<const std::string>(std::move(data));
  cache_->Put(id_, i, shared);
  return shared;
}

}  // namespace tfrecordfs::source
