#include "tfrecordfs/source/inflater.h"

#include <isa-l/crc.h>
#include <isa-l/igzip_lib.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/source/checkpoints.h"

namespace tfrecordfs::source {

namespace {

// Compressed bytes per pread: the first after a Start is small (a random
// read needs a few hundred KiB at most), later ones double up to kInChunk.
constexpr size_t kInChunk = 1 << 20;
constexpr size_t kFirstInChunk = 64 << 10;
constexpr int kGzipBits = 15 + 16;
constexpr int kZlibBits = 15;
constexpr int kRawBits = -15;
// What zlib allocates for an inflate stream: its state (about 7 KiB) and,
// once output was produced, its 32 KiB window.
constexpr size_t kZlibStateBytes = (7 << 10) + kWindowSize;

}  // namespace

Inflater::Inflater(StoredBytes fd, absl::string_view path, uint64_t file_size, Codec codec,
                   bool fast, bool exact_problems)
    : fd_(fd),
      path_(path),
      file_size_(file_size),
      codec_(codec),
      fast_(fast),
      exact_problems_(exact_problems),
      next_chunk_(kFirstInChunk) {
  std::memset(&z_, 0, sizeof z_);
  ok_ = inflateInit2(&z_, kRawBits) == Z_OK;
  if (fast_) isal_ = std::make_unique<inflate_state>();
}

Inflater::~Inflater() {
  if (ok_) inflateEnd(&z_);
}

uint64_t Inflater::in_pos() const {
  if (isal_active_) {
    return in_off_ + in_len_ - isal_->avail_in - static_cast<uint64_t>(isal_->read_in_length / 8);
  }
  return in_off_ + (in_len_ - z_.avail_in);
}

int Inflater::bits() const { return isal_active_ ? isal_->read_in_length % 8 : z_.data_type & 7; }

void Inflater::Park() {
  if (isal_active_) {
    // ISA-L keeps the bits it took from the buffer in its own state:
    // only the bytes it has not taken are read again.
    in_off_ += in_len_ - isal_->avail_in;
    isal_->next_in = nullptr;
    isal_->avail_in = 0;
  } else {
    in_off_ = in_pos();
    z_.next_in = nullptr;
    z_.avail_in = 0;
  }
  in_len_ = 0;
  // A buffer of one first read is kept (the next random read of this shard
  // reuses it instead of allocating and faulting in another); a larger one
  // is released.
  if (in_buf_.capacity() > kFirstInChunk) std::string().swap(in_buf_);
  next_chunk_ = kFirstInChunk;
}

size_t Inflater::MemoryBytes() const {
  return sizeof(*this) + in_buf_.capacity() + kZlibStateBytes +
         (isal_ ? sizeof(inflate_state) : 0) + (snapshot_ ? sizeof(inflate_state) : 0);
}

absl::Status Inflater::Start(const Checkpoint& cp, absl::string_view window) {
  if (!ok_) return absl::ResourceExhaustedError("inflateInit failed");
  finished_ = false;
  problem_.reset();
  out_pos_ = cp.out;
  in_len_ = 0;
  next_chunk_ = kFirstInChunk;
  z_.next_in = nullptr;
  z_.avail_in = 0;
  isal_active_ = false;
  isal_disabled_ = false;
  boundary_pending_ = false;
  header_pending_ = false;
  member_known_ = cp.stream_start;
  if (cp.stream_start) {
    raw_ = false;
    in_off_ = cp.in;
    member_in_ = cp.in;
    member_out_ = cp.out;
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

absl::StatusOr<size_t> Inflater::Read(char* out, size_t n, bool z_block, bool stop_at_members) {
  stop_at_members |= z_block;
  at_boundary_ = false;
  at_stream_start_ = false;
  const size_t want = std::min<size_t>(n, 1u << 30);
  size_t done = 0;
  while (!finished_ && done < want) {
    if (isal_active_) {
      auto got =
          z_block ? ReadIsalToBoundary(out + done, want - done) : ReadIsal(out + done, want - done);
      if (!got.ok()) return got.status();
      done += *got;
      if (at_boundary_) break;
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
      if (bits() == 0) {
        member_sum_ = codec_ == Codec::kGzip ? 0 : 1;
        if (auto s = StartIsal(in_pos(), 0, ""); !s.ok()) return s;
        if (z_block) {
          at_boundary_ = true;  // as zlib's Z_BLOCK stops after the header
          break;
        }
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

absl::Status Inflater::Zcheck(int ret) {
  if (ret == Z_OK) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(path_, ": zlib: ", zError(ret)));
}

absl::Status Inflater::LoadInput(uint64_t pos) {
  in_off_ = pos;
  in_len_ = 0;
  if (pos >= file_size_) return absl::OkStatus();
  in_buf_.resize(static_cast<size_t>(std::min<uint64_t>(next_chunk_, file_size_ - pos)));
  next_chunk_ = std::min(next_chunk_ * 2, kInChunk);
  auto got = PreadUpTo(fd_, in_buf_.data(), in_buf_.size(), pos, path_);
  if (!got.ok()) return got.status();
  in_len_ = *got;
  return absl::OkStatus();
}

absl::StatusOr<size_t> Inflater::Refill() {
  z_.avail_in = 0;
  if (auto s = LoadInput(in_pos()); !s.ok()) return s;
  z_.next_in = reinterpret_cast<Bytef*>(in_buf_.data());
  z_.avail_in = static_cast<uInt>(in_len_);
  return in_len_;
}

absl::StatusOr<bool> Inflater::Skip(size_t n) {
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

absl::StatusOr<std::string> Inflater::Peek2() {
  if (z_.avail_in < 2) {
    auto got = Refill();  // from in_pos(): what is left is read again
    if (!got.ok()) return got.status();
  }
  return std::string(reinterpret_cast<const char*>(z_.next_in), std::min<uInt>(2, z_.avail_in));
}

absl::Status Inflater::EndOfStream() {
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
  member_in_ = end;
  member_out_ = out_pos_;
  header_pending_ = fast_ && !isal_disabled_;
  return Zcheck(inflateReset2(&z_, kGzipBits));
}

void Inflater::Finish(uint64_t compressed_offset, std::string message) {
  finished_ = true;
  problem_ = StreamProblem{compressed_offset, out_pos_, std::move(message)};
}

absl::Status Inflater::StartIsal(uint64_t in, int bits, absl::string_view window) {
  inflate_state& s = *isal_;
  isal_inflate_init(&s);
  s.crc_flag = ISAL_DEFLATE;
  if (!window.empty() &&
      isal_inflate_set_dict(&s, reinterpret_cast<uint8_t*>(const_cast<char*>(window.data())),
                            static_cast<uint32_t>(window.size())) != COMP_OK) {
    return absl::InternalError(absl::StrCat(path_, ": isal_inflate_set_dict failed"));
  }
  if (bits > 0 && in == 0) return absl::DataLossError("checkpoint with bits at offset 0");
  // The bytes from `in` on (and the one holding the bits) may be loaded
  // already (a boundary the scan stopped at): ISA-L goes on with them.
  const uint64_t first = bits > 0 ? in - 1 : in;
  if (in_len_ > 0 && first >= in_off_ && in <= in_off_ + in_len_) {
    if (bits > 0) {
      s.read_in = static_cast<unsigned char>(in_buf_[first - in_off_]) >> (8 - bits);
      s.read_in_length = bits;
    }
    s.next_in = reinterpret_cast<uint8_t*>(in_buf_.data() + (in - in_off_));
    s.avail_in = static_cast<uint32_t>(in_off_ + in_len_ - in);
    z_.next_in = nullptr;
    z_.avail_in = 0;
    isal_active_ = true;
    return absl::OkStatus();
  }
  if (bits > 0) {
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

absl::Status Inflater::IsalInput() {
  inflate_state& s = *isal_;
  if (s.avail_in == 0 && s.block_state != ISAL_BLOCK_FINISH) {
    // Everything loaded was consumed (some of it may wait in the bit
    // buffer): continue with the bytes after it.
    if (auto l = LoadInput(in_off_ + in_len_); !l.ok()) return l;
    s.next_in = reinterpret_cast<uint8_t*>(in_buf_.data());
    s.avail_in = static_cast<uint32_t>(in_len_);
  }
  return absl::OkStatus();
}

absl::Status Inflater::IsalProblem(std::string message) {
  isal_active_ = false;
  boundary_pending_ = false;
  if (!exact_problems_ || !member_known_) {
    Finish(in_pos(), std::move(message));
    return absl::OkStatus();
  }
  // zlib inflates the member again from its start, header and trailer
  // included; the bytes handed out already are skipped.
  const uint64_t reached = out_pos_;
  isal_disabled_ = true;
  raw_ = false;
  header_pending_ = false;
  if (auto s = Zcheck(inflateReset2(&z_, codec_ == Codec::kGzip ? kGzipBits : kZlibBits));
      !s.ok()) {
    return s;
  }
  in_off_ = member_in_;
  in_len_ = 0;
  z_.next_in = nullptr;
  z_.avail_in = 0;
  next_chunk_ = kFirstInChunk;
  out_pos_ = member_out_;
  std::string scratch(static_cast<size_t>(std::min<uint64_t>(reached - out_pos_, 1 << 16)), '\0');
  while (!finished_ && out_pos_ < reached) {
    auto got = Read(scratch.data(),
                    static_cast<size_t>(std::min<uint64_t>(reached - out_pos_, scratch.size())),
                    /*z_block=*/false, /*stop_at_members=*/true);
    if (!got.ok()) return got.status();
    if (*got == 0 || at_stream_start_) break;
  }
  if (out_pos_ < reached) overran_ = true;
  return absl::OkStatus();
}

void Inflater::Sum(const char* p, size_t n) {
  if (!exact_problems_ || n == 0) return;
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  member_sum_ =
      codec_ == Codec::kGzip ? crc32_gzip_refl(member_sum_, b, n) : isal_adler32(member_sum_, b, n);
}

absl::StatusOr<bool> Inflater::TrailerMatches() {
  const size_t n = codec_ == Codec::kGzip ? 8 : 4;
  unsigned char t[8];
  auto got = PreadUpTo(fd_, t, n, in_pos(), path_);
  if (!got.ok()) return got.status();
  if (*got < n) return false;
  if (codec_ == Codec::kGzip) {
    const uint32_t crc = t[0] | (t[1] << 8) | (t[2] << 16) | (static_cast<uint32_t>(t[3]) << 24);
    const uint32_t size = t[4] | (t[5] << 8) | (t[6] << 16) | (static_cast<uint32_t>(t[7]) << 24);
    return crc == member_sum_ && size == static_cast<uint32_t>(out_pos_ - member_out_);
  }
  const uint32_t adler = (static_cast<uint32_t>(t[0]) << 24) | (t[1] << 16) | (t[2] << 8) | t[3];
  return adler == member_sum_;
}

absl::StatusOr<size_t> Inflater::IsalReply(int ret, const char* out, size_t produced) {
  if (ret < 0 && exact_problems_ && member_known_) {
    // ISA-L may write a few bytes ahead of the symbol it fails on (zlib
    // writes none): this call's bytes are zlib's to produce again.
    produced = 0;
  }
  out_pos_ += produced;
  Sum(out, produced);
  if (ret < 0) {
    if (auto st = IsalProblem(absl::StrCat("corrupt compressed data (ISA-L: error ", ret, ")"));
        !st.ok()) {
      return st;
    }
  }
  return produced;
}

absl::StatusOr<size_t> Inflater::ReadIsal(char* out, size_t n) {
  inflate_state& s = *isal_;
  if (auto l = IsalInput(); !l.ok()) return l;
  const uint32_t avail_in = s.avail_in;
  s.next_out = reinterpret_cast<uint8_t*>(out);
  s.avail_out = static_cast<uint32_t>(n);
  const int ret = s.block_state == ISAL_BLOCK_FINISH ? ISAL_DECOMP_OK : isal_inflate(&s);
  auto reply = IsalReply(ret, out, n - s.avail_out);
  if (!reply.ok() || ret < 0) return reply;
  const size_t produced = *reply;
  if (s.block_state == ISAL_BLOCK_FINISH) {
    if (s.tmp_in_size != 0) {
      return absl::InternalError(absl::StrCat(path_, ": ISA-L ended with input held back"));
    }
    // The trailer starts at in_pos(); zlib reads on from there.
    if (exact_problems_ && member_known_) {
      auto match = TrailerMatches();
      if (!match.ok()) return match.status();
      if (!*match) {
        if (auto st = IsalProblem(""); !st.ok()) return st;
        return produced;
      }
    }
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
    if (!exact_problems_) {
      Finish(in_off_, "truncated compressed stream (ISA-L: unexpected end of file)");
      isal_active_ = false;
    } else if (auto st = IsalProblem(""); !st.ok()) {
      return st;
    }
  }
  return produced;
}

void Inflater::MarkBoundary() {
  const inflate_state& s = *isal_;
  // Bits taken from the file: the loaded bytes given to ISA-L, less those
  // it buffered.
  const uint64_t taken = in_off_ + in_len_ - s.avail_in;
  const uint64_t bit = taken * 8 - static_cast<uint64_t>(s.read_in_length);
  boundary_in_ = (bit + 7) / 8;
  boundary_bits_ = static_cast<int>(boundary_in_ * 8 - bit);
  boundary_pending_ = true;
}

absl::StatusOr<size_t> Inflater::DeliverToBoundary(char* out, size_t n) {
  inflate_state& s = *isal_;
  const size_t held = static_cast<size_t>(s.tmp_out_valid - s.tmp_out_processed);
  const size_t k = std::min(n, held);
  std::memcpy(out, s.tmp_out_buffer + s.tmp_out_processed, k);
  s.tmp_out_processed += static_cast<int32_t>(k);
  out_pos_ += k;
  Sum(out, k);
  if (k < held) return k;
  // Everything before the boundary is out: restart there, the last 32 KiB
  // ISA-L produced (its buffer holds them, history first) as the window.
  const size_t wlen = std::min<size_t>(static_cast<size_t>(s.tmp_out_valid), kWindowSize);
  const std::string window(reinterpret_cast<const char*>(s.tmp_out_buffer) + s.tmp_out_valid - wlen,
                           wlen);
  boundary_pending_ = false;
  if (auto st = StartIsal(boundary_in_, boundary_bits_, window); !st.ok()) return st;
  at_boundary_ = true;
  return k;
}

absl::StatusOr<size_t> Inflater::ReadIsalToBoundary(char* out, size_t n) {
  inflate_state& s = *isal_;
  if (boundary_pending_) return DeliverToBoundary(out, n);
  if (auto l = IsalInput(); !l.ok()) return l;
  if ((s.block_state == ISAL_BLOCK_NEW_HDR || s.block_state == ISAL_BLOCK_HDR) && s.avail_in > 0) {
    // At a boundary (just started there, or the input ran out in a header):
    // as zlib's Z_BLOCK, go on to the next one.
    // ISA-L reads the next header with a few bytes of input at a time, so
    // that it is inside the next block (its sentinel can be set) before
    // that block can end (only a block of fewer bytes is passed unseen).
    constexpr uint32_t kHeaderBite = 32;
    const uint32_t withheld = s.avail_in > kHeaderBite ? s.avail_in - kHeaderBite : 0;
    s.avail_in -= withheld;
    in_len_ -= withheld;  // as if not loaded: in_pos() stays right
    auto got = ReadIsal(out, 0);
    if (isal_active_ && s.block_state != ISAL_BLOCK_FINISH) {
      s.avail_in += withheld;
      in_len_ += withheld;
    }
    return got;
  }
  // The member's last block ends at the member's end (zlib's Z_BLOCK does
  // not stop there either); near the end of the file ISA-L's lookahead
  // cannot be held back: plain reads.
  if ((s.block_state != ISAL_BLOCK_CODED && s.block_state != ISAL_BLOCK_TYPE0) || s.bfinal != 0 ||
      s.avail_in == 0) {
    return ReadIsal(out, n);
  }
  const uint32_t held = static_cast<uint32_t>(s.tmp_out_valid - s.tmp_out_processed);
  if (held == 0) {
    if (!snapshot_) snapshot_ = std::make_unique<inflate_state>();
    std::memcpy(snapshot_.get(), &s, sizeof s);
  }
  s.bfinal = 2;  // the sentinel: this block's end stops ISA-L
  s.next_out = reinterpret_cast<uint8_t*>(out);
  s.avail_out = static_cast<uint32_t>(std::min<size_t>(n, held > 0 ? held - 1 : 0));
  const uint32_t asked = s.avail_out;
  const int ret = isal_inflate(&s);
  auto reply = IsalReply(ret, out, asked - s.avail_out);
  if (!reply.ok() || ret < 0) return reply;
  const size_t produced = *reply;
  if (s.block_state == ISAL_BLOCK_INPUT_DONE) {
    s.bfinal = 0;
    MarkBoundary();
    auto more = DeliverToBoundary(out + produced, n - produced);
    if (!more.ok()) return more.status();
    return produced + *more;
  }
  if (s.block_state == ISAL_BLOCK_FINISH) {
    // The block ended before any byte came out: ISA-L dropped its bit
    // buffer. Decode from the copy without the sentinel instead.
    if (held != 0 || produced != 0) {
      return absl::InternalError(absl::StrCat(path_, ": ISA-L stopped with no state to go on"));
    }
    std::memcpy(&s, snapshot_.get(), sizeof s);
    return ReadIsal(out, n);
  }
  s.bfinal = 0;
  return produced;
}

}  // namespace tfrecordfs::source
