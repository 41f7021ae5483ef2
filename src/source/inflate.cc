#include "tfrecordfs/source/inflate.h"

#include <fcntl.h>
#include <isa-l/igzip_lib.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/log.h"

namespace tfrecordfs::source {

namespace {

// Compressed bytes per pread: the first after a Start is small (a random
// read needs a few hundred KiB at most), later ones double up to kInChunk.
constexpr size_t kInChunk = 1 << 20;
constexpr size_t kFirstInChunk = 64 << 10;
constexpr int kGzipBits = 15 + 16;
constexpr int kZlibBits = 15;
constexpr int kRawBits = -15;

// A z_stream over a compressed file, with positions in both coordinates,
// that steps over GZIP member boundaries. Not thread-safe.
//
// With `fast`, the deflate data itself is inflated by ISA-L's isal_inflate
// (3-4x zlib's speed) from every point where the stream is at a block
// boundary: a checkpoint (its window set with isal_inflate_set_dict, its
// bits primed into the bit buffer, read_in/read_in_length, as zlib's
// inflatePrime does) or the end of a GZIP/ZLIB header, which zlib parses
// (Z_BLOCK stops right after it, byte-aligned). At the end of the member's
// last block, zlib takes over again for the trailer and the next header.
// Stock ISA-L cannot stop at a block boundary (it reads the next block's
// header as soon as one ends), so the scan, which must record boundaries,
// stays with zlib.
class Inflater {
 public:
  Inflater(int fd, absl::string_view path, uint64_t file_size, Codec codec, bool fast = false)
      : fd_(fd), path_(path), file_size_(file_size), codec_(codec), fast_(fast) {
    std::memset(&z_, 0, sizeof z_);
    ok_ = inflateInit2(&z_, kRawBits) == Z_OK;
    if (fast_) isal_ = std::make_unique<inflate_state>();
  }
  ~Inflater() {
    if (ok_) inflateEnd(&z_);
  }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  // Positions the stream at `cp`; `window` is its window (ignored for stream
  // starts).
  absl::Status Start(const Checkpoint& cp, absl::string_view window) {
    if (!ok_) return absl::ResourceExhaustedError("inflateInit failed");
    finished_ = false;
    problem_.reset();
    out_pos_ = cp.out;
    in_len_ = 0;
    next_chunk_ = kFirstInChunk;
    z_.next_in = nullptr;
    z_.avail_in = 0;
    isal_active_ = false;
    header_pending_ = false;
    if (cp.stream_start) {
      raw_ = false;
      in_off_ = cp.in;
      header_pending_ = fast_;
      return Zcheck(inflateReset2(&z_, codec_ == Codec::kGzip ? kGzipBits : kZlibBits));
    }
    raw_ = true;
    if (fast_) return StartIsal(cp.in, cp.bits, window);
    if (auto s = Zcheck(inflateReset2(&z_, kRawBits)); !s.ok()) return s;
    if (cp.bits > 0) {
      if (cp.in == 0) return absl::DataLossError("checkpoint with bits at offset 0");
      unsigned char byte;
      if (auto s = PreadFull(fd_, &byte, 1, cp.in - 1, path_); !s.ok()) return s;
      if (auto s = Zcheck(inflatePrime(&z_, cp.bits, byte >> (8 - cp.bits))); !s.ok()) return s;
    }
    in_off_ = cp.in;
    if (!window.empty()) {
      if (auto s = Zcheck(inflateSetDictionary(&z_, reinterpret_cast<const Bytef*>(window.data()),
                                               static_cast<uInt>(window.size())));
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  // Inflates up to n bytes into `out`. With `z_block`, returns early at
  // every deflate block boundary; with `stop_at_members` (implied by
  // z_block), at every stream start. Returns the bytes produced: 0 only
  // when finished(). I/O errors are errors; damage finishes the stream and
  // sets problem().
  absl::StatusOr<size_t> Read(char* out, size_t n, bool z_block, bool stop_at_members = false) {
    stop_at_members |= z_block;
    at_boundary_ = false;
    at_stream_start_ = false;
    const size_t want = std::min<size_t>(n, 1u << 30);
    size_t done = 0;
    while (!finished_ && done < want) {
      if (isal_active_) {
        if (z_block) return absl::InternalError("Z_BLOCK reads never use ISA-L");
        auto got = ReadIsal(out + done, want - done);
        if (!got.ok()) return got.status();
        done += *got;
        if (at_stream_start_ && stop_at_members) break;
        continue;
      }
      z_.next_out = reinterpret_cast<Bytef*>(out + done);
      z_.avail_out = static_cast<uInt>(want - done);
      if (z_.avail_in == 0) {
        auto got = Refill();
        if (!got.ok()) return got.status();
        if (*got == 0) {
          Finish(in_pos(), "truncated compressed stream (zlib: unexpected end of file)");
          break;
        }
      }
      const uint64_t before_out = z_.avail_out;
      const int ret = inflate(&z_, z_block || header_pending_ ? Z_BLOCK : Z_NO_FLUSH);
      out_pos_ += before_out - z_.avail_out;
      done += before_out - z_.avail_out;
      if (ret == Z_STREAM_END) {
        auto s = EndOfStream();
        if (!s.ok()) return s;
        if (stop_at_members) break;
        continue;
      }
      if (ret == Z_BUF_ERROR && z_.avail_in == 0) continue;  // needs input: refilled above
      if (ret != Z_OK) {
        Finish(in_pos(), absl::StrCat("corrupt compressed data (zlib: ",
                                      z_.msg != nullptr ? z_.msg : zError(ret), ")"));
        break;
      }
      if (header_pending_ && (z_.data_type & 128)) {
        // The GZIP/ZLIB header is parsed; the first block starts at the
        // next byte (zlib's bit buffer is empty there).
        header_pending_ = false;
        if (bits() == 0 && !z_block) {
          if (auto s = StartIsal(in_pos(), 0, ""); !s.ok()) return s;
          continue;
        }
      }
      if (z_block && (z_.data_type & 128) && !(z_.data_type & 64)) {
        at_boundary_ = true;
        break;
      }
    }
    return done;
  }

  // The first compressed byte not wholly consumed.
  uint64_t in_pos() const {
    if (isal_active_) {
      return in_off_ + in_len_ - isal_->avail_in - static_cast<uint64_t>(isal_->read_in_length / 8);
    }
    return in_off_ + (in_len_ - z_.avail_in);
  }
  // The descriptor to read from next (a cursor outlives one lease of it).
  void SetFd(int fd) { fd_ = fd; }
  uint64_t out_pos() const { return out_pos_; }
  int bits() const { return isal_active_ ? isal_->read_in_length % 8 : z_.data_type & 7; }
  bool finished() const { return finished_; }
  bool at_boundary() const { return at_boundary_; }
  bool at_stream_start() const { return at_stream_start_; }
  const std::optional<StreamProblem>& problem() const { return problem_; }
  uint64_t members() const { return members_; }

 private:
  absl::Status Zcheck(int ret) {
    if (ret == Z_OK) return absl::OkStatus();
    return absl::InternalError(absl::StrCat(path_, ": zlib: ", zError(ret)));
  }

  // Reads the next chunk of compressed input, from in_pos() on (unread
  // input left in the buffer is read again). Returns the bytes read.
  absl::StatusOr<size_t> Refill() {
    const uint64_t pos = in_pos();
    in_off_ = pos;
    in_len_ = 0;
    z_.avail_in = 0;
    if (pos >= file_size_) return size_t{0};
    in_buf_.resize(static_cast<size_t>(std::min<uint64_t>(next_chunk_, file_size_ - pos)));
    next_chunk_ = std::min(next_chunk_ * 2, kInChunk);
    auto got = PreadUpTo(fd_, in_buf_.data(), in_buf_.size(), pos, path_);
    if (!got.ok()) return got.status();
    in_len_ = *got;
    z_.next_in = reinterpret_cast<Bytef*>(in_buf_.data());
    z_.avail_in = static_cast<uInt>(*got);
    return *got;
  }

  // Takes n bytes of input (a trailer) without inflating them. False when
  // the file ends first.
  absl::StatusOr<bool> Skip(size_t n) {
    while (n > 0) {
      if (z_.avail_in == 0) {
        auto got = Refill();
        if (!got.ok()) return got.status();
        if (*got == 0) return false;
      }
      const size_t k = std::min<size_t>(n, z_.avail_in);
      z_.next_in += k;
      z_.avail_in -= static_cast<uInt>(k);
      n -= k;
    }
    return true;
  }

  // Peeks at up to 2 bytes of input (refilling as needed).
  absl::StatusOr<std::string> Peek2() {
    if (z_.avail_in < 2) {
      auto got = Refill();  // from in_pos(): what is left is read again
      if (!got.ok()) return got.status();
    }
    return std::string(reinterpret_cast<const char*>(z_.next_in), std::min<uInt>(2, z_.avail_in));
  }

  absl::Status EndOfStream() {
    ++members_;
    if (raw_) {
      auto ok = Skip(codec_ == Codec::kGzip ? 8 : 4);  // CRC32+ISIZE or ADLER32
      if (!ok.ok()) return ok.status();
      if (!*ok) {
        Finish(in_pos(), "truncated compressed stream (the trailer is cut short)");
        return absl::OkStatus();
      }
    }
    const uint64_t end = in_pos();
    if (end >= file_size_) {
      finished_ = true;
      return absl::OkStatus();
    }
    if (codec_ == Codec::kZlib) {
      Finish(end, absl::StrCat(file_size_ - end,
                               " byte(s) after the end of the ZLIB stream are ignored (TensorFlow "
                               "reads no further)"));
      return absl::OkStatus();
    }
    auto next = Peek2();
    if (!next.ok()) return next.status();
    if (next->size() < 2 || static_cast<unsigned char>((*next)[0]) != 0x1f ||
        static_cast<unsigned char>((*next)[1]) != 0x8b) {
      Finish(end, absl::StrCat(file_size_ - end,
                               " byte(s) after the last GZIP member are not a GZIP member"));
      return absl::OkStatus();
    }
    raw_ = false;
    at_stream_start_ = true;
    header_pending_ = fast_;
    return Zcheck(inflateReset2(&z_, kGzipBits));
  }

  void Finish(uint64_t compressed_offset, std::string message) {
    finished_ = true;
    problem_ = StreamProblem{compressed_offset, out_pos_, std::move(message)};
  }

  // Hands the stream to ISA-L at compressed byte `in`, with `bits` bits of
  // byte in - 1 still to read and `window` as the history.
  absl::Status StartIsal(uint64_t in, int bits, absl::string_view window) {
    inflate_state& s = *isal_;
    isal_inflate_init(&s);
    s.crc_flag = ISAL_DEFLATE;
    if (!window.empty() &&
        isal_inflate_set_dict(&s, reinterpret_cast<uint8_t*>(const_cast<char*>(window.data())),
                              static_cast<uint32_t>(window.size())) != COMP_OK) {
      return absl::InternalError(absl::StrCat(path_, ": isal_inflate_set_dict failed"));
    }
    if (bits > 0) {
      if (in == 0) return absl::DataLossError("checkpoint with bits at offset 0");
      unsigned char byte;
      if (auto st = PreadFull(fd_, &byte, 1, in - 1, path_); !st.ok()) return st;
      s.read_in = byte >> (8 - bits);
      s.read_in_length = bits;
    }
    in_off_ = in;
    in_len_ = 0;
    s.next_in = nullptr;
    s.avail_in = 0;
    z_.next_in = nullptr;
    z_.avail_in = 0;
    isal_active_ = true;
    return absl::OkStatus();
  }

  // One isal_inflate call into [out, out + n); returns the bytes produced.
  // At the end of the member's last block, hands the stream back to zlib
  // (EndOfStream: trailer, next member).
  absl::StatusOr<size_t> ReadIsal(char* out, size_t n) {
    inflate_state& s = *isal_;
    if (s.avail_in == 0 && s.block_state != ISAL_BLOCK_FINISH) {
      // Everything loaded was consumed (some of it may wait in the bit
      // buffer): continue with the bytes after it.
      in_off_ += in_len_;
      in_len_ = 0;
      if (in_off_ < file_size_) {
        in_buf_.resize(static_cast<size_t>(std::min<uint64_t>(next_chunk_, file_size_ - in_off_)));
        next_chunk_ = std::min(next_chunk_ * 2, kInChunk);
        auto got = PreadUpTo(fd_, in_buf_.data(), in_buf_.size(), in_off_, path_);
        if (!got.ok()) return got.status();
        in_len_ = *got;
      }
      s.next_in = reinterpret_cast<uint8_t*>(in_buf_.data());
      s.avail_in = static_cast<uint32_t>(in_len_);
    }
    const uint32_t avail_in = s.avail_in;
    s.next_out = reinterpret_cast<uint8_t*>(out);
    s.avail_out = static_cast<uint32_t>(n);
    const int ret = s.block_state == ISAL_BLOCK_FINISH ? ISAL_DECOMP_OK : isal_inflate(&s);
    const size_t produced = n - s.avail_out;
    out_pos_ += produced;
    if (ret < 0) {
      Finish(in_pos(), absl::StrCat("corrupt compressed data (ISA-L: error ", ret, ")"));
      isal_active_ = false;
      return produced;
    }
    if (s.block_state == ISAL_BLOCK_FINISH) {
      if (s.tmp_in_size != 0) {
        return absl::InternalError(absl::StrCat(path_, ": ISA-L ended with input held back"));
      }
      // The trailer starts at in_pos(); zlib reads on from there.
      const uint64_t end = in_pos();
      isal_active_ = false;
      in_off_ = end;
      in_len_ = 0;
      z_.next_in = nullptr;
      z_.avail_in = 0;
      raw_ = true;
      if (auto st = EndOfStream(); !st.ok()) return st;
      return produced;
    }
    if (produced == 0 && s.avail_in == avail_in && avail_in > 0) {
      return absl::InternalError(absl::StrCat(path_, ": ISA-L made no progress"));
    }
    if (produced < n && s.avail_in == 0 && in_len_ == 0) {
      // The file ended inside the deflate data.
      Finish(in_off_, "truncated compressed stream (ISA-L: unexpected end of file)");
      isal_active_ = false;
    }
    return produced;
  }

  int fd_;
  absl::string_view path_;
  uint64_t file_size_;
  Codec codec_;
  const bool fast_;
  std::unique_ptr<inflate_state> isal_;  // with fast_
  bool isal_active_ = false;   // the deflate data is ISA-L's (else zlib's)
  bool header_pending_ = false;  // zlib is parsing a header to hand over after
  size_t next_chunk_ = kFirstInChunk;
  z_stream z_;
  bool ok_ = false;
  bool raw_ = false;
  bool finished_ = false;
  bool at_boundary_ = false;
  bool at_stream_start_ = false;
  std::optional<StreamProblem> problem_;
  std::string in_buf_;
  uint64_t in_off_ = 0;  // file offset of in_buf_[0]
  size_t in_len_ = 0;    // bytes of in_buf_ loaded (consumed: in_len_ - avail_in)
  uint64_t out_pos_ = 0;
  uint64_t members_ = 0;
};

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

 protected:
  absl::StatusOr<std::string> Raw(uint64_t offset, uint32_t length) const override {
    if (offset > blob_.size() || length > blob_.size() - offset) {
      return absl::DataLossError("checkpoint window out of range");
    }
    return blob_.substr(offset, length);
  }

 private:
  std::string blob_;
};

class FileWindows final : public Windows {
 public:
  FileWindows(std::string path, uint64_t base, uint64_t size)
      : path_(std::move(path)), base_(base), size_(size) {}

 protected:
  absl::StatusOr<std::string> Raw(uint64_t offset, uint32_t length) const override {
    if (offset > size_ || length > size_ - offset) {
      return absl::DataLossError(absl::StrCat(path_, ": checkpoint window out of range"));
    }
    // Opened per load: a window is read once per restart from a checkpoint,
    // and holding no descriptor keeps a mount of many shards within limits.
    auto fd = OpenFile(path_, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (!fd.ok()) return fd.status();
    std::string out(length, '\0');
    if (auto s = PreadFull(fd->get(), out.data(), length, base_ + offset, path_); !s.ok()) return s;
    return out;
  }

 private:
  std::string path_;
  uint64_t base_, size_;
};

}  // namespace

absl::StatusOr<std::string> Windows::Load(const Checkpoint& cp) const {
  if (cp.stream_start || cp.window_length == 0) return std::string();
  auto raw = Raw(cp.window_offset, cp.window_length);
  if (!raw.ok()) return raw.status();
  if (crc32c::Value(*raw) != cp.window_crc) {
    return absl::DataLossError("a stored checkpoint window fails its crc32c");
  }
  return InflateWindow(*raw);
}

std::shared_ptr<const Windows> Windows::InMemory(std::string blob) {
  return std::make_shared<MemoryWindows>(std::move(blob));
}

std::shared_ptr<const Windows> Windows::InFile(std::string path, uint64_t base, uint64_t size) {
  return std::make_shared<FileWindows>(std::move(path), base, size);
}

const Checkpoint& CheckpointTable::Before(uint64_t offset) const {
  auto it = std::upper_bound(points.begin(), points.end(), offset,
                             [](uint64_t o, const Checkpoint& c) { return o < c.out; });
  return it == points.begin() ? points.front() : *(it - 1);
}

absl::StatusOr<ScanResult> ScanCompressed(int fd, absl::string_view path, uint64_t file_size,
                                          Codec codec, uint64_t span,
                                          const std::function<void(absl::string_view)>& sink,
                                          const std::function<void(uint64_t)>& progress) {
  ScanResult result;
  result.table.codec = codec;
  Checkpoint start;
  start.stream_start = true;
  result.table.points.push_back(start);
  Inflater inf(fd, path, file_size, codec);
  if (auto s = inf.Start(start, ""); !s.ok()) return s;
  constexpr size_t kChunk = 1 << 20;
  // The last kWindowSize bytes of output stay at the front of the buffer
  // (when there are that many), so a checkpoint's window is always in it.
  std::string buf(kWindowSize + kChunk, '\0');
  size_t have = 0;
  uint64_t last_in = 0, last_out = 0, last_progress = 0;
  if (span == 0) span = kDefaultSpan;
  while (!inf.finished()) {
    if (have == buf.size()) {
      std::memmove(buf.data(), buf.data() + have - kWindowSize, kWindowSize);
      have = kWindowSize;
    }
    // A checkpoint is due once a span of compressed or of uncompressed bytes
    // has passed since the last one (CheckpointDue). Stop at block
    // boundaries (Z_BLOCK) only then: every return from inflate() copies up
    // to 32 KiB into zlib's window, which, once per deflate block, cost as
    // much as a third of the scan. Until then, ask for about as much output
    // as is left before the span (at least 4 KiB, estimating the compressed
    // side from the ratio so far), so the checkpoint still lands near the
    // span.
    const uint64_t in_now = inf.in_pos();
    const uint64_t out_now = inf.out_pos();
    const bool due = CheckpointDue(in_now - last_in, out_now - last_out, span);
    size_t want = buf.size() - have;
    if (!due) {
      const double ratio =
          in_now > 0 ? static_cast<double>(out_now) / static_cast<double>(in_now) : 1.0;
      const double left_in = static_cast<double>(span - (in_now - last_in)) * std::max(ratio, 1.0);
      const double left_out = static_cast<double>(span - (out_now - last_out));
      want = static_cast<size_t>(
          std::clamp(std::min(left_in, left_out), 4096.0, static_cast<double>(want)));
    }
    auto got = inf.Read(buf.data() + have, want, /*z_block=*/due, /*stop_at_members=*/true);
    if (!got.ok()) return got.status();
    if (*got > 0) sink(absl::string_view(buf.data() + have, *got));
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
    if (inf.at_boundary() && CheckpointDue(in - last_in, inf.out_pos() - last_out, span) &&
        inf.out_pos() > result.table.points.back().out) {
      Checkpoint cp;
      cp.in = in;
      cp.out = inf.out_pos();
      cp.bits = static_cast<uint8_t>(inf.bits());
      const size_t wlen = static_cast<size_t>(std::min<uint64_t>(cp.out, kWindowSize));
      const std::string stored = CompressWindow(absl::string_view(buf.data() + have - wlen, wlen));
      cp.window_offset = result.windows_blob.size();
      cp.window_length = static_cast<uint32_t>(stored.size());
      cp.window_crc = crc32c::Value(stored);
      result.windows_blob += stored;
      result.table.points.push_back(cp);
      last_in = in;
      last_out = cp.out;
    }
  }
  if (progress) progress(inf.in_pos());
  result.table.data_size = inf.out_pos();
  result.problem = inf.problem();
  result.members = inf.members();
  result.table.points.shrink_to_fit();
  result.table.windows = Windows::InMemory(result.windows_blob);
  return result;
}

absl::StatusOr<std::string> InflatePrefix(int fd, absl::string_view path, uint64_t file_size,
                                          Codec codec, size_t n) {
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

// ---- BlockCache ----

std::shared_ptr<const std::string> BlockCache::Get(uint64_t source, uint64_t block) {
  MutexLock lock(&mu_);
  auto it = map_.find(Key{source, block});
  if (it == map_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.bytes;
}

void BlockCache::Put(uint64_t source, uint64_t block, std::shared_ptr<const std::string> bytes) {
  MutexLock lock(&mu_);
  const Key key{source, block};
  if (map_.contains(key)) return;
  lru_.push_front(key);
  bytes_ += bytes->size();
  map_.emplace(key, Slot{std::move(bytes), lru_.begin()});
  // Keep at least the newest block, whatever the budget.
  while (bytes_ > max_bytes_ && lru_.size() > 1) {
    auto victim = map_.find(lru_.back());
    bytes_ -= victim->second.bytes->size();
    map_.erase(victim);
    lru_.pop_back();
  }
}

size_t BlockCache::bytes() const {
  MutexLock lock(&mu_);
  return bytes_;
}

// ---- InflateSource ----

struct InflateSource::Cursor {
  Cursor(int fd, absl::string_view path, uint64_t file_size, Codec codec, bool fast)
      : inf(fd, path, file_size, codec, fast) {}
  Inflater inf;
};

InflateSource::InflateSource(ShardFile file, uint64_t file_size,
                             std::shared_ptr<const CheckpointTable> table, BlockCache* cache)
    : file_(std::move(file)),
      file_size_(file_size),
      table_(std::move(table)),
      cache_(cache),
      id_(cache->NewSourceId()) {}

InflateSource::~InflateSource() = default;

absl::StatusOr<std::shared_ptr<const std::string>> InflateSource::Block(uint64_t block) const {
  if (auto hit = cache_->Get(id_, block)) return hit;
  MutexLock lock(&mu_);
  if (auto hit = cache_->Get(id_, block)) return hit;  // another reader inflated it
  auto lease = file_.Open();
  if (!lease.ok()) return lease.status();
  auto result = InflateBlock(block, *lease);
  if (!result.ok() && !zlib_only_ &&
      (absl::IsDataLoss(result.status()) || absl::IsInternal(result.status()))) {
    // The index was made with zlib, and only zlib's verdict on a damaged
    // stream counts: should ISA-L stop short of bytes zlib produced (or fail
    // in any other way), this shard is read with zlib from now on.
    log::Warning(file_.path(), ": ", result.status().message(), "; reading with zlib instead");
    zlib_only_ = true;
    cursor_.reset();
    result = InflateBlock(block, *lease);
  }
  return result;
}

absl::StatusOr<std::shared_ptr<const std::string>> InflateSource::InflateBlock(
    uint64_t block, const Lease& lease) const {
  const uint64_t target = block * kBlockSize;
  const uint64_t target_end = std::min<uint64_t>(target + kBlockSize, table_->data_size);
  const Checkpoint* cp = &table_->Before(target);
  // Resume where the cursor stopped when it is at or past the checkpoint:
  // sequential reads (a walk, a cat of every record) never restart.
  if (!cursor_ || cursor_->inf.finished() || cursor_->inf.out_pos() > target ||
      cursor_->inf.out_pos() < cp->out) {
    if (!cursor_) {
      cursor_ = std::make_unique<Cursor>(lease.fd, file_.path(), file_size_, table_->codec,
                                         /*fast=*/!zlib_only_);
    }
    // Start reads (the byte holding a checkpoint's leftover bits): through
    // this read's lease. The descriptor an earlier lease gave the cursor may
    // be closed by now, or its number reused for another file.
    cursor_->inf.SetFd(lease.fd);
    auto window = table_->windows->Load(*cp);
    if (!window.ok()) {
      // The index file changed under the mount, or its window is damaged:
      // fall back to the stream start before it (always present), slower
      // but exact.
      log::Error(file_.path(), ": checkpoint at compressed byte offset ", cp->in, ": ",
                 window.status().message(), "; inflating from an earlier stream start");
      while (cp != table_->points.data() && !cp->stream_start) --cp;
      window = std::string();
    }
    if (auto s = cursor_->inf.Start(*cp, *window); !s.ok()) return s;
    restarts_.fetch_add(1, std::memory_order_relaxed);
  }
  Inflater& inf = cursor_->inf;
  inf.SetFd(lease.fd);
  std::shared_ptr<const std::string> result;
  std::string acc;
  bool acc_whole = inf.out_pos() % kBlockSize == 0;  // acc starts at a block boundary
  uint64_t acc_block = inf.out_pos() / kBlockSize;
  char tmp[64 * 1024];
  while (inf.out_pos() < target_end) {
    const uint64_t pos = inf.out_pos();
    const size_t want = static_cast<size_t>(std::min<uint64_t>(
        {sizeof tmp, target_end - pos, kBlockSize - pos % kBlockSize}));
    auto got = inf.Read(tmp, want, /*z_block=*/false);
    if (!got.ok()) {
      cursor_.reset();
      return got.status();
    }
    if (*got == 0) {
      cursor_.reset();
      return absl::DataLossError(absl::StrCat(
          file_.path(), ": the compressed stream ends at uncompressed offset ", pos, ", before the ",
          table_->data_size, " bytes it held when it was indexed; the shard changed under the "
          "mount (remount to re-index it)"));
    }
    if (acc_whole) acc.append(tmp, *got);
    const uint64_t now = inf.out_pos();
    if (now % kBlockSize == 0 || now == table_->data_size) {
      if (acc_whole) {
        auto bytes = std::make_shared<const std::string>(std::move(acc));
        blocks_inflated_.fetch_add(1, std::memory_order_relaxed);
        cache_->Put(id_, acc_block, bytes);
        if (acc_block == block) result = bytes;
      }
      acc.clear();
      acc_whole = true;
      acc_block = now / kBlockSize;
    }
  }
  if (!result) return absl::InternalError(absl::StrCat(file_.path(), ": block ", block, " not produced"));
  return result;
}

absl::StatusOr<size_t> InflateSource::ReadAt(uint64_t offset, char* buf, size_t n) const {
  const uint64_t size = table_->data_size;
  if (offset >= size) return size_t{0};
  if (n > size - offset) n = static_cast<size_t>(size - offset);
  size_t done = 0;
  while (done < n) {
    const uint64_t pos = offset + done;
    auto block = Block(pos / kBlockSize);
    if (!block.ok()) return block.status();
    const size_t in_block = static_cast<size_t>(pos % kBlockSize);
    if (in_block >= (*block)->size()) {
      return absl::DataLossError(absl::StrCat(file_.path(), ": short block at offset ", pos));
    }
    const size_t k = std::min(n - done, (*block)->size() - in_block);
    std::memcpy(buf + done, (*block)->data() + in_block, k);
    done += k;
  }
  return done;
}

}  // namespace tfrecordfs::source
