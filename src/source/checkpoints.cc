#include "tfrecordfs/source/checkpoints.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <optional>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/source/window_use.h"

namespace tfrecordfs::source {

namespace {

constexpr int kRawBits = -15;

// Raw deflate of a window for storage (level 1: windows are written once per
// checkpoint during the scan, and level 1 keeps the scan near inflate speed).
std::string CompressWindow(absl::string_view window) {
  z_stream z;
  std::memset(&z, 0, sizeof z);
  deflateInit2(&z, 1, Z_DEFLATED, kRawBits, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, window.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(window.data()));
  z.avail_in = static_cast<uInt>(window.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(out.size() - z.avail_out);
  deflateEnd(&z);
  return out;
}

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

// The compressed bytes from the first bit of the deflate data after `cp`
// (enough for SparseWindow: 32 KiB of output takes at most about 37 KiB
// of fixed-code or stored blocks), and the bit of the first byte it starts
// at.
absl::StatusOr<std::string> DataAfter(StoredBytes fd, absl::string_view path, const Checkpoint& cp,
                                      int* first_bit, size_t bytes = 48 << 10) {
  const uint64_t at = cp.bits > 0 ? cp.in - 1 : cp.in;
  *first_bit = cp.bits > 0 ? 8 - cp.bits : 0;
  std::string in(bytes, '\0');
  auto got = PreadUpTo(fd, in.data(), in.size(), at, path);
  if (!got.ok()) return got.status();
  in.resize(*got);
  return in;
}

// A checkpoint laid by the scan whose window is not stored yet: the window
// is made sparse (source/window_use.h) once the kWindowSize bytes of output
// after the checkpoint are known, which check it.
struct PendingWindow {
  size_t point = 0;    // index in the table
  std::string window;  // the whole window
  std::string after;   // the output after the checkpoint, up to kWindowSize bytes
};

// The window of `cp` as stored: sparse when the deflate data after it
// shows which bytes it reads, and when inflating from `cp` with the sparse
// window (`check`, an inflater over the same stream) gives the output the
// scan saw after it (`after`); else whole.
absl::StatusOr<std::string> StoredWindow(StoredBytes fd, absl::string_view path, Inflater* check,
                                         const Checkpoint& cp, const PendingWindow& p) {
  // Most windows need a few KiB of the data after them (32 KiB of output
  // at the ratio of the data): a small read first, a whole one if short.
  int first_bit = 0;
  auto in = DataAfter(fd, path, cp, &first_bit, 12 << 10);
  if (!in.ok()) return in.status();
  auto sparse = SparseWindow(p.window, *in, first_bit);
  if (absl::IsOutOfRange(sparse.status()) && in->size() == (12 << 10)) {
    in = DataAfter(fd, path, cp, &first_bit);
    if (!in.ok()) return in.status();
    sparse = SparseWindow(p.window, *in, first_bit);
  }
  if (!sparse.ok() || *sparse == p.window) return CompressWindow(p.window);
  if (auto st = check->Start(cp, *sparse); !st.ok()) return st;
  std::string again(p.after.size(), '\0');
  size_t have = 0;
  while (have < again.size() && !check->finished()) {
    auto got = check->Read(again.data() + have, again.size() - have, /*z_block=*/false);
    if (!got.ok()) return got.status();
    if (*got == 0) break;
    have += *got;
  }
  if (have != again.size() || again != p.after) return CompressWindow(p.window);
  return CompressWindow(*sparse);
}

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
  // Checks sparse windows (StoredWindow), with zlib when the scan is zlib's.
  Inflater check(fd, path, file_size, codec, /*fast=*/isal);
  constexpr size_t kChunk = 1 << 20;
  // The last kWindowSize bytes of output stay at the front of the buffer
  // (when there are that many), so a checkpoint's window is always in it.
  std::string buf(kWindowSize + kChunk, '\0');
  size_t have = 0;
  uint64_t last_in = 0, last_out = 0, last_progress = 0;
  if (span == 0) span = kDefaultSpan;
  std::deque<PendingWindow> pending;
  uint64_t windows_stored = 0;
  auto store = [&](PendingWindow& p) -> absl::Status {
    Checkpoint& cp = result.table.points[p.point];
    auto stored = StoredWindow(fd, path, &check, cp, p);
    if (!stored.ok()) return stored.status();
    cp.window_offset = result.windows_blob.size();
    cp.window_length = static_cast<uint32_t>(stored->size());
    cp.window_crc = crc32c::Value(*stored);
    result.windows_blob += *stored;
    ++windows_stored;
    return absl::OkStatus();
  };
  // Whether a checkpoint `in` compressed and `out` uncompressed bytes after
  // the last one may be laid now (CheckpointAllowed), with the windows
  // stored so far (those pending counted at the mean size so far) and the
  // table within kCheckpointBudget of the compressed bytes read.
  auto allowed = [&](uint64_t in_now, uint64_t in, uint64_t out) {
    if (CheckpointDue(in, out, span)) return true;
    if (!CheckpointAllowed(in, out, span)) return false;
    const double mean = windows_stored > 0 ? static_cast<double>(result.windows_blob.size()) /
                                                 static_cast<double>(windows_stored)
                                           : kWindowSize / 4.0;
    const double bytes =
        static_cast<double>(result.windows_blob.size()) +
        mean * static_cast<double>(pending.size() + 1) +
        static_cast<double>(kCheckpointEntryBytes * (result.table.points.size() + 1));
    return bytes <= kCheckpointBudget * static_cast<double>(in_now);
  };
  while (!inf.finished()) {
    if (have == buf.size()) {
      std::memmove(buf.data(), buf.data() + have - kWindowSize, kWindowSize);
      have = kWindowSize;
    }
    // A checkpoint may be laid once span / kDenseSpans of compressed or of
    // uncompressed bytes has passed since the last one, and is due after a
    // span (see allowed). Stop at block boundaries (Z_BLOCK) only then:
    // every return from inflate() copies up to 32 KiB into zlib's window,
    // which, once per deflate block, cost as much as a third of the scan.
    // Until then, ask for about as much output as is left before the
    // smaller span (at least 4 KiB, estimating the compressed side from the
    // ratio so far), so the checkpoint still lands near it.
    const uint64_t in_now = inf.in_pos();
    const uint64_t out_now = inf.out_pos();
    const bool due = allowed(in_now, in_now - last_in, out_now - last_out);
    size_t want = buf.size() - have;
    if (!due) {
      const uint64_t dense = std::max<uint64_t>(span / kDenseSpans, 1);
      const uint64_t next_in = std::max(in_now - last_in, dense);
      const uint64_t next_out = std::max(out_now - last_out, dense);
      const double ratio =
          in_now > 0 ? static_cast<double>(out_now) / static_cast<double>(in_now) : 1.0;
      const double left_in =
          static_cast<double>(next_in - (in_now - last_in)) * std::max(ratio, 1.0);
      const double left_out = static_cast<double>(next_out - (out_now - last_out));
      want = static_cast<size_t>(
          std::clamp(std::min(left_in, left_out), 4096.0, static_cast<double>(want)));
    }
    auto got = inf.Read(buf.data() + have, want, /*z_block=*/due, /*stop_at_members=*/true);
    if (!got.ok()) return got.status();
    if (*got > 0) {
      const absl::string_view bytes(buf.data() + have, *got);
      if (absl::Status s = sink(bytes); !s.ok()) return s;
      for (PendingWindow& p : pending) {
        const size_t take = std::min(kWindowSize - p.after.size(), bytes.size());
        p.after.append(bytes.data(), take);
      }
      while (!pending.empty() && pending.front().after.size() == kWindowSize) {
        if (auto s = store(pending.front()); !s.ok()) return s;
        pending.pop_front();
      }
    }
    have += *got;
    const uint64_t in = inf.in_pos();
    if (progress && in - last_progress >= kChunk) {
      progress(in);
      last_progress = in;
    }
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
    if (inf.at_boundary() && allowed(in, in - last_in, inf.out_pos() - last_out) &&
        inf.out_pos() > result.table.points.back().out) {
      Checkpoint cp;
      cp.in = in;
      cp.out = inf.out_pos();
      cp.bits = static_cast<uint8_t>(inf.bits());
      const size_t wlen = static_cast<size_t>(std::min<uint64_t>(cp.out, kWindowSize));
      PendingWindow p;
      p.point = result.table.points.size();
      p.window.assign(buf.data() + have - wlen, wlen);
      result.table.points.push_back(cp);
      pending.push_back(std::move(p));
      last_in = in;
      last_out = cp.out;
    }
  }
  for (PendingWindow& p : pending) {
    if (auto s = store(p); !s.ok()) return s;
  }
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
