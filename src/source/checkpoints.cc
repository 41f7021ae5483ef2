#include "tfrecordfs/source/checkpoints.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/source/scan_output.h"
#include "tfrecordfs/source/window_use.h"

namespace tfrecordfs::source {

namespace {

constexpr int kRawBits = -15;

absl::StatusOr<std::string> InflateWindow(absl::string_view stored) {
  z_stream z;
  std::memset(&z, 0, sizeof z);
  if (inflateInit2(&z, kRawBits) != Z_OK) return absl::ResourceExhaustedError("inflateInit");
  std::string out(kWindowSize, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(stored.data()));
  z.avail_in = static_cast<uInt>(stored.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int ret = inflate(&z, Z_FINISH);
  out.resize(out.size() - z.avail_out);
  const bool whole = ret == Z_STREAM_END && z.avail_in == 0;
  inflateEnd(&z);
  if (!whole) return absl::DataLossError("a stored checkpoint window does not inflate");
  return out;
}

class MemoryWindows final : public Windows {
 public:
  explicit MemoryWindows(std::string blob) : blob_(std::move(blob)) {}

  uint64_t size() const override { return blob_.size(); }

 protected:
  absl::StatusOr<std::string> Raw(uint64_t offset, uint64_t length) const override {
    if (offset > blob_.size() || length > blob_.size() - offset) {
      return absl::DataLossError("checkpoint window out of range");
    }
    return blob_.substr(static_cast<size_t>(offset), static_cast<size_t>(length));
  }

 private:
  std::string blob_;
};

// The index files whose windows are read, open: a random read of a
// compressed shard loads one window, and an open (a path walk, on network
// storage a round trip) per window cost as much as the window itself. One
// cache for the process, so that a mount of any number of compressed shards
// holds at most this many index files open (plus those leased for a load in
// flight); one evicted is opened again, and checked again, at its next load.
FdCache& WindowFiles() {
  static FdCache* cache = new FdCache(kOpenWindowFiles);
  return *cache;
}

class FileWindows final : public Windows {
 public:
  FileWindows(std::string path, uint64_t base, uint64_t size, std::optional<FileIdentity> identity)
      : path_(std::move(path)),
        base_(base),
        size_(size),
        identity_(identity),
        key_(WindowFiles().NewKey()) {}
  ~FileWindows() override { WindowFiles().Drop(key_); }

  uint64_t size() const override { return size_; }

 protected:
  absl::StatusOr<std::string> Raw(uint64_t offset, uint64_t length) const override {
    if (offset > size_ || length > size_ - offset) {
      return absl::DataLossError(absl::StrCat(path_, ": checkpoint window out of range"));
    }
    auto lease = WindowFiles().Get(key_, [this] { return OpenChecked(); });
    if (!lease.ok()) return lease.status();
    std::string out(static_cast<size_t>(length), '\0');
    if (auto s = PreadFull(lease->fd, out.data(), out.size(), base_ + offset, path_); !s.ok()) {
      return s;
    }
    return out;
  }

 private:
  // Opens the file, and with an identity, checks that it is still the one
  // the table was read from: a file put in its place since (a rename over
  // it) serves no window. Once open, the descriptor reads that file
  // whatever is renamed over its path later.
  absl::StatusOr<UniqueFd> OpenChecked() const {
    auto fd = OpenFile(path_, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (!fd.ok()) return fd.status();
    if (identity_) {
      struct stat st;
      if (::fstat(fd->get(), &st) != 0) return ErrnoError(errno, path_);
      const FileIdentity now = FileIdentity::Of(st);
      if ((identity_->ino_persists && (now.dev != identity_->dev || now.ino != identity_->ino)) ||
          now.size != identity_->size || now.mtime_ns != identity_->mtime_ns) {
        return absl::DataLossError(
            absl::StrCat(path_, ": the index file changed after it was loaded"));
      }
    }
    return fd;
  }

  std::string path_;
  uint64_t base_, size_;
  std::optional<FileIdentity> identity_;
  const uint64_t key_;  // in WindowFiles()
};

}  // namespace

absl::StatusOr<std::string> Windows::Load(const Checkpoint& cp) const {
  if (cp.stream_start || cp.window_length == 0) return std::string();
  auto raw = Raw(cp.window_offset, cp.window_length);
  if (!raw.ok()) return raw.status();
  return Decode(cp, *raw);
}

absl::StatusOr<std::string> Windows::Decode(const Checkpoint& cp, absl::string_view stored) {
  if (cp.stream_start || cp.window_length == 0) return std::string();
  if (stored.size() != cp.window_length || crc32c::Value(stored) != cp.window_crc) {
    return absl::DataLossError("a stored checkpoint window fails its crc32c");
  }
  return InflateWindow(stored);
}

std::shared_ptr<const Windows> Windows::InMemory(std::string blob) {
  return std::make_shared<MemoryWindows>(std::move(blob));
}

std::shared_ptr<const Windows> Windows::InFile(std::string path, uint64_t base, uint64_t size) {
  return std::make_shared<FileWindows>(std::move(path), base, size, std::nullopt);
}

std::shared_ptr<const Windows> Windows::InFile(std::string path, uint64_t base, uint64_t size,
                                               FileIdentity identity) {
  return std::make_shared<FileWindows>(std::move(path), base, size, identity);
}

const Checkpoint& CheckpointTable::Before(uint64_t offset) const {
  auto it = std::upper_bound(points.begin(), points.end(), offset,
                             [](uint64_t o, const Checkpoint& c) { return o < c.out; });
  return it == points.begin() ? points.front() : *(it - 1);
}

namespace {
absl::StatusOr<ScanResult> ScanOnce(StoredBytes fd, absl::string_view path, uint64_t file_size,
                                    Codec codec, uint64_t span, const StreamSink& sink,
                                    const std::function<void(uint64_t)>& progress, bool isal,
                                    bool* overran);
}  // namespace

absl::StatusOr<ScanResult> ScanCompressed(StoredBytes fd, absl::string_view path,
                                          uint64_t file_size, Codec codec, uint64_t span,
                                          const StreamSink& sink,
                                          const std::function<void(uint64_t)>& progress, bool isal,
                                          const std::function<void()>& restart) {
  bool overran = false;
  auto scan = ScanOnce(fd, path, file_size, codec, span, sink, progress, isal, &overran);
  if (scan.ok() && overran && restart) {
    // ISA-L handed out bytes zlib does not produce (a block zlib refuses):
    // the sink starts over, and zlib inflates the stream from its start.
    restart();
    return ScanOnce(fd, path, file_size, codec, span, sink, progress, /*isal=*/false, &overran);
  }
  return scan;
}

namespace {

absl::StatusOr<ScanResult> ScanOnce(StoredBytes fd, absl::string_view path, uint64_t file_size,
                                    Codec codec, uint64_t span, const StreamSink& sink,
                                    const std::function<void(uint64_t)>& progress, bool isal,
                                    bool* overran) {
  ScanResult result;
  result.table.codec = codec;
  Checkpoint start;
  start.stream_start = true;
  result.table.points.push_back(start);
  Inflater inf(fd, path, file_size, codec, /*fast=*/isal, /*exact_problems=*/true);
  if (auto s = inf.Start(start, ""); !s.ok()) return s;
  // The sink, progress and the windows, beside the inflate
  // (source/scan_output.h): on a thread of their own, unless the stream is
  // too small to pay for one, or its bytes come from a reader that reads
  // ahead of one sequential reader (an object, a network file system: the
  // windows' reads behind the inflate would each be another request).
  ScanOutput::Options stage_options;
  stage_options.isal = isal;
  stage_options.threaded = file_size >= kScanChunk && fd.object() == nullptr;
  ScanOutput stage(fd, path, file_size, codec, sink, progress, stage_options);
  uint64_t last_in = 0, last_out = 0;
  if (span == 0) span = kDefaultSpan;
  // Where the output of each checkpoint with a window starts, in order.
  std::vector<uint64_t> windowed;
  // Whether a checkpoint `in` compressed and `out` uncompressed bytes after
  // the last one may be laid now (CheckpointAllowed), with the table and
  // the windows so far within kCheckpointBudget of the compressed bytes
  // read. The windows are counted at their stored size for those the
  // stage has certainly made from the output pushed so far (KnownWindows:
  // waiting for them if it lags), the newer ones at the mean size of
  // those (or a quarter of a window before there is one); so the
  // checkpoints depend on the stream alone, not on the stage's timing.
  // When the budget is what says no, *budget_in is the compressed offset
  // from which it would say yes (0 otherwise).
  auto allowed = [&](uint64_t in_now, uint64_t in, uint64_t out, uint64_t* budget_in) {
    *budget_in = 0;
    if (CheckpointDue(in, out, span)) return true;
    if (!CheckpointAllowed(in, out, span)) return false;
    const size_t known = stage.KnownWindows(windowed);
    const uint64_t known_bytes = stage.StoredPrefix(known);
    const double mean = known > 0 ? static_cast<double>(known_bytes) / static_cast<double>(known)
                                  : kWindowSize / 4.0;
    const double bytes =
        static_cast<double>(known_bytes) + mean * static_cast<double>(windowed.size() - known + 1) +
        static_cast<double>(kCheckpointEntryBytes * (result.table.points.size() + 1));
    if (bytes <= kCheckpointBudget * static_cast<double>(in_now)) return true;
    *budget_in = static_cast<uint64_t>(bytes / kCheckpointBudget) + 1;
    return false;
  };
  // A read to the next block boundary into less room than this stops
  // where the room ends more often than at the boundary.
  constexpr size_t kMinZBlockRoom = 64 << 10;
  ScanChunk* chunk = stage.Take();
  while (!inf.finished() && !stage.failed()) {
    // A checkpoint may be laid once span / kDenseSpans of compressed or of
    // uncompressed bytes has passed since the last one (and the budget
    // allows), and is due after a span (see allowed). Stop at block
    // boundaries (Z_BLOCK) only then: every return from inflate() copies up
    // to 32 KiB into zlib's window (ISA-L: 32-64 KiB into and out of its
    // own buffer), which, once per deflate block, cost as much as a third
    // of the scan. Until then, ask for about as much output as is left
    // before that point (at least 4 KiB, estimating the compressed side
    // from the ratio so far), so the checkpoint still lands near it.
    const uint64_t in_now = inf.in_pos();
    const uint64_t out_now = inf.out_pos();
    uint64_t budget_in = 0;
    const bool due = allowed(in_now, in_now - last_in, out_now - last_out, &budget_in);
    size_t want = kScanChunk;
    if (!due) {
      const double ratio =
          in_now > 0 ? std::max(static_cast<double>(out_now) / static_cast<double>(in_now), 1.0)
                     : 1.0;
      // Output left until `in` compressed or `out` uncompressed bytes since
      // the last checkpoint, whichever comes first.
      auto until = [&](uint64_t in, uint64_t out) {
        const uint64_t in_left = in > in_now - last_in ? in - (in_now - last_in) : 0;
        const uint64_t out_left = out > out_now - last_out ? out - (out_now - last_out) : 0;
        return std::min(static_cast<double>(in_left) * ratio, static_cast<double>(out_left));
      };
      const uint64_t dense = std::max<uint64_t>(span / kDenseSpans, 1);
      double left = until(dense, dense);
      if (budget_in > in_now) {
        const double to_budget = static_cast<double>(budget_in - in_now) * ratio;
        left = std::min(std::max(left, to_budget), until(span, span));
      }
      want = static_cast<size_t>(std::clamp(left, 4096.0, static_cast<double>(kScanChunk)));
    }
    // A read is not cut short by the end of a chunk (a new one is taken
    // first), but where it asks to stop: ISA-L decodes ahead of what it
    // hands out, and passes the block boundaries there unseen.
    if (want > kScanChunk - chunk->size && (!due || kScanChunk - chunk->size < kMinZBlockRoom)) {
      stage.Push(chunk);
      chunk = stage.Take();
      continue;  // the stage may have failed
    }
    want = std::min(want, kScanChunk - chunk->size);
    auto got = inf.Read(chunk->bytes.data() + chunk->size, want, /*z_block=*/due,
                        /*stop_at_members=*/true);
    if (!got.ok()) return got.status();
    chunk->size += *got;
    const uint64_t in = inf.in_pos();
    chunk->in_end = in;
    if (inf.finished()) break;
    if (inf.at_stream_start()) {
      Checkpoint cp;
      cp.in = in;
      cp.out = inf.out_pos();
      cp.stream_start = true;
      if (cp.in > result.table.points.back().in) result.table.points.push_back(cp);
      last_in = in;
      last_out = cp.out;
      continue;
    }
    if (inf.at_boundary() && allowed(in, in - last_in, inf.out_pos() - last_out, &budget_in) &&
        inf.out_pos() > result.table.points.back().out) {
      Checkpoint cp;
      cp.in = in;
      cp.out = inf.out_pos();
      cp.bits = static_cast<uint8_t>(inf.bits());
      result.table.points.push_back(cp);
      windowed.push_back(cp.out);
      chunk->laid.push_back({chunk->size, cp});
      last_in = in;
      last_out = cp.out;
    }
  }
  stage.Push(chunk);
  if (absl::Status s = stage.Finish(); !s.ok()) return s;
  // The windows, in the order of their checkpoints.
  const std::vector<StoredWindowRef>& refs = stage.windows();
  size_t k = 0;
  for (Checkpoint& cp : result.table.points) {
    if (cp.stream_start) continue;
    if (k == refs.size()) return absl::InternalError(absl::StrCat(path, ": a window is missing"));
    cp.window_offset = refs[k].offset;
    cp.window_length = refs[k].length;
    cp.window_crc = refs[k].crc;
    ++k;
  }
  result.windows_blob = std::move(stage.blob());
  if (progress) progress(inf.in_pos());
  result.table.data_size = inf.out_pos();
  result.problem = inf.problem();
  result.members = inf.members();
  result.table.points.shrink_to_fit();
  result.table.windows = Windows::InMemory(result.windows_blob);
  *overran = inf.overran();
  return result;
}

}  // namespace

absl::Status VerifyCheckpoints(StoredBytes fd, absl::string_view path, uint64_t file_size,
                               const CheckpointTable& table, size_t first, size_t last) {
  const std::vector<Checkpoint>& pts = table.points;
  if (pts.empty() || last >= pts.size() || first > last) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no such checkpoints"));
  }
  const bool to_end = last + 1 == pts.size();
  if (first == last && !to_end) return absl::OkStatus();
  auto mismatch = [&](size_t k, absl::string_view why) {
    return absl::DataLossError(absl::StrCat(path, ": checkpoint ", k, " (compressed byte offset ",
                                            pts[k].in, ", uncompressed ", pts[k].out,
                                            ") does not match the stream: ", why));
  };
  // The windows checked, read in runs of up to kWindowRunBytes stored bytes
  // (one open and one pread of an index file per run, not per window).
  constexpr uint64_t kWindowRunBytes = 4 << 20;
  uint64_t stored_end = 0;  // the end of the last stored window checked
  for (size_t k = first; k <= last; ++k) {
    if (!pts[k].stream_start && pts[k].window_length > 0) {
      stored_end = std::max(stored_end, pts[k].window_offset + pts[k].window_length);
    }
  }
  stored_end = std::min(stored_end, table.windows->size());
  std::string run;  // stored bytes [run_at, run_at + run.size())
  uint64_t run_at = 0;
  auto load = [&](const Checkpoint& cp) -> absl::StatusOr<std::string> {
    if (cp.stream_start || cp.window_length == 0) return std::string();
    if (cp.window_offset < run_at || cp.window_offset - run_at > run.size() ||
        cp.window_length > run.size() - (cp.window_offset - run_at)) {
      const uint64_t rest = stored_end > cp.window_offset ? stored_end - cp.window_offset : 0;
      auto raw = table.windows->Stored(
          cp.window_offset, std::max<uint64_t>(cp.window_length, std::min(rest, kWindowRunBytes)));
      if (!raw.ok()) return raw.status();
      run = std::move(*raw);
      run_at = cp.window_offset;
    }
    return Windows::Decode(
        cp, absl::string_view(run).substr(static_cast<size_t>(cp.window_offset - run_at),
                                          cp.window_length));
  };
  Inflater inf(fd, path, file_size, table.codec);
  auto window = load(pts[first]);
  if (!window.ok()) return mismatch(first, window.status().message());
  if (auto s = inf.Start(pts[first], *window); !s.ok()) return s;
  // The last kWindowSize bytes of output, to compare with stored windows.
  std::string tail = *window;
  std::string buf(256 << 10, '\0');
  size_t next = first + 1;
  // A position in the stream in bits, to order boundaries and checkpoints.
  auto bit_pos = [](uint64_t in, int bits) { return in * 8 - static_cast<uint64_t>(bits); };
  while (next <= last || to_end) {
    if (next <= last) {
      const Checkpoint& cp = pts[next];
      const bool start = inf.at_stream_start();
      const bool stopped = start || inf.at_boundary();
      // zlib's bit count is exact at a block boundary; a stream start is
      // byte-aligned.
      const int bits = start ? 0 : inf.bits();
      if (stopped && inf.in_pos() == cp.in && bits == cp.bits && start == cp.stream_start) {
        if (inf.out_pos() != cp.out) {
          return mismatch(
              next, absl::StrCat("the stream is at uncompressed offset ", inf.out_pos(), " there"));
        }
        if (!cp.stream_start) {
          auto stored = load(cp);
          if (!stored.ok()) return mismatch(next, stored.status().message());
          const size_t wlen = static_cast<size_t>(std::min<uint64_t>(cp.out, kWindowSize));
          if (tail.size() < wlen) {
            return mismatch(next, "its window is not the 32 KiB of the stream before it");
          }
          const absl::string_view whole = absl::string_view(tail).substr(tail.size() - wlen);
          if (*stored != whole) {
            // A sparse window must be exactly the one the stream after the
            // checkpoint makes of the whole.
            int first_bit = 0;
            auto in = DataAfter(fd, path, cp, &first_bit);
            if (!in.ok()) return in.status();
            auto sparse = SparseWindow(whole, *in, first_bit);
            if (!sparse.ok() || *stored != *sparse) {
              return mismatch(next, "its window is not the 32 KiB of the stream before it");
            }
          }
        }
        ++next;
        continue;  // the next checkpoint may lie at the same place
      }
      if (inf.finished()) return mismatch(next, "the stream ends before it");
      if (stopped && bit_pos(inf.in_pos(), bits) > bit_pos(cp.in, cp.bits)) {
        return mismatch(next, "the stream has no deflate block boundary there");
      }
    }
    if (inf.finished()) break;
    auto got = inf.Read(buf.data(), buf.size(), /*z_block=*/true, /*stop_at_members=*/true);
    if (!got.ok()) return got.status();
    tail.append(buf.data(), *got);
    if (tail.size() > 2 * kWindowSize) tail.erase(0, tail.size() - kWindowSize);
  }
  if (to_end && inf.out_pos() != table.data_size) {
    return absl::DataLossError(absl::StrCat(path, ": the stream holds ", inf.out_pos(),
                                            " uncompressed bytes, not the ", table.data_size,
                                            " its index names"));
  }
  return absl::OkStatus();
}

absl::Status VerifyCheckpoints(StoredBytes fd, absl::string_view path, uint64_t file_size,
                               const CheckpointTable& table) {
  if (table.points.empty()) return absl::DataLossError(absl::StrCat(path, ": no checkpoints"));
  return VerifyCheckpoints(fd, path, file_size, table, 0, table.points.size() - 1);
}

absl::StatusOr<std::string> InflatePrefix(StoredBytes fd, absl::string_view path,
                                          uint64_t file_size, Codec codec, size_t n) {
  Inflater inf(fd, path, file_size, codec);
  Checkpoint start;
  start.stream_start = true;
  if (auto s = inf.Start(start, ""); !s.ok()) return s;
  std::string out(n, '\0');
  size_t have = 0;
  while (have < n && !inf.finished()) {
    auto got = inf.Read(out.data() + have, n - have, /*z_block=*/false);
    if (!got.ok()) return got.status();
    have += *got;
  }
  out.resize(have);
  return out;
}

}  // namespace tfrecordfs::source
