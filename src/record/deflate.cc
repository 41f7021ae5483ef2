#include "tfrecordfs/record/deflate.h"

#include <isa-l/crc.h>
#include <isa-l/igzip_lib.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/parallel.h"

namespace tfrecordfs::record {

// One block: its input, its deflated bytes and checksum, and the deflate
// state its slot keeps from block to block (reset, not reallocated).
struct ParallelDeflater::Block {
  std::string in, out;  // in: `dict` bytes of dictionary, then the bytes to deflate
  size_t dict = 0;
  uint64_t at = 0;  // its first byte's input offset (for messages)
  int flush = Z_FULL_FLUSH;
  bool gzip = true;
  int level = 6;
  uint32_t check = 0;
  absl::Status status;
  z_stream z;
  bool ready = false;  // z initialised
  // Copied: `out` holds raw deflate bytes made elsewhere (AddDeflated),
  // `raw_length` the bytes they inflate to, `check` their checksum.
  bool copied = false;
  uint64_t raw_length = 0;

  Block() { std::memset(&z, 0, sizeof z); }
  ~Block() {
    if (ready) deflateEnd(&z);
  }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  void Deflate() {
    status = absl::OkStatus();
    if (copied) return;
    out.clear();
    check = gzip ? static_cast<uint32_t>(crc32(0, nullptr, 0))
                 : static_cast<uint32_t>(adler32(1, nullptr, 0));
    const auto* data = reinterpret_cast<const Bytef*>(in.data() + dict);
    const auto size = static_cast<uInt>(in.size() - dict);
    if (size > 0) {
      // ISA-L's checksums: the same values as zlib's crc32 and adler32,
      // several times faster (zlib's crc32 was 1.3 % of a commit's CPU).
      check = gzip ? crc32_gzip_refl(check, data, size) : isal_adler32(check, data, size);
    }
    // Raw deflate (windowBits -15): the wrapper is the deflater's. memLevel 8
    // and the default strategy are what TensorFlow's ZlibOutputBuffer uses.
    const int ret =
        ready ? deflateReset(&z) : deflateInit2(&z, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
    if (ret != Z_OK) {
      status = absl::InternalError(absl::StrCat("deflateInit2: ", zError(ret)));
      return;
    }
    ready = true;
    if (dict > 0) {
      // The bytes before it, as pigz primes its blocks: matches may reach
      // back into them as into one stream's window.
      const int d = deflateSetDictionary(&z, reinterpret_cast<const Bytef*>(in.data()),
                                         static_cast<uInt>(dict));
      if (d != Z_OK) {
        status = absl::InternalError(absl::StrCat("deflateSetDictionary: ", zError(d)));
        return;
      }
    }
    z.next_in = const_cast<Bytef*>(data);
    z.avail_in = size;
    // A flush can need more than deflateBound (its markers): grow until
    // deflate leaves output space unused.
    size_t used = 0;
    out.resize(deflateBound(&z, z.avail_in) + 64);
    for (;;) {
      z.next_out = reinterpret_cast<Bytef*>(out.data() + used);
      z.avail_out = static_cast<uInt>(out.size() - used);
      const int r = deflate(&z, flush);
      if (r != Z_OK && r != Z_STREAM_END && r != Z_BUF_ERROR) {
        status = absl::InternalError(absl::StrCat("deflate: ", zError(r)));
        return;
      }
      used = out.size() - z.avail_out;
      if (r == Z_STREAM_END || (z.avail_out > 0 && z.avail_in == 0)) break;
      out.resize(out.size() + (out.size() >> 3) + 64);
    }
    out.resize(used);
  }
};

struct ParallelDeflater::Pipeline {
  Pipeline(int workers, size_t window) : pipe(workers, window, [](Block& b) { b.Deflate(); }) {}
  OrderedPipeline<Block> pipe;
};

ParallelDeflater::ParallelDeflater(source::Codec codec, int level, int threads, std::string name,
                                   Sink sink)
    : codec_(codec), level_(level), name_(std::move(name)), sink_(std::move(sink)) {
  const int n = threads <= 0 ? std::min(DefaultThreads(), kDefaultMaxThreads) : threads;
  // One worker per core (the owner mostly waits for them); four pieces per
  // worker in flight, at least kMinPiecesInFlight, so a worker finds the
  // next one ready while the owner is away (deflate.h).
  const int workers = n <= 1 ? 0 : n;
  const size_t window = 4 * static_cast<size_t>(std::max(n, 1));
  pipe_ = std::make_unique<Pipeline>(workers,
                                     workers > 0 ? std::max(window, kMinPiecesInFlight) : window);
  check_ = codec_ == source::Codec::kGzip ? static_cast<uint32_t>(crc32(0, nullptr, 0))
                                          : static_cast<uint32_t>(adler32(1, nullptr, 0));
  if (codec_ != source::Codec::kGzip && codec_ != source::Codec::kZlib) {
    status_ = absl::InvalidArgumentError(
        absl::StrCat(name_, ": ", source::CodecName(codec_), " is not deflate"));
  } else if (level_ < 0 || level_ > 9) {
    status_ = absl::InvalidArgumentError(absl::StrCat(name_, ": deflate level ", level_));
  }
}

ParallelDeflater::~ParallelDeflater() = default;

absl::Status ParallelDeflater::Emit(absl::string_view bytes) {
  if (!status_.ok()) return status_;
  status_ = sink_(bytes);
  return status_;
}

absl::Status ParallelDeflater::WriteFront() {
  Block& b = pipe_->pipe.Front();
  if (!b.status.ok()) {
    status_ = absl::InternalError(
        absl::StrCat(name_, ": ", b.status.message(), " in the block at uncompressed byte ", b.at));
  }
  if (status_.ok()) status_ = Emit(b.out);
  if (status_.ok()) {
    const uint64_t n = b.copied ? b.raw_length : b.in.size() - b.dict;
    const auto len = static_cast<z_off_t>(n);
    check_ = codec_ == source::Codec::kGzip
                 ? static_cast<uint32_t>(crc32_combine(check_, b.check, len))
                 : static_cast<uint32_t>(adler32_combine(check_, b.check, len));
    written_in_ += n;
  }
  pipe_->pipe.Pop();
  return status_;
}

absl::Status ParallelDeflater::WriteHeader() {
  if (!header_written_) {
    header_written_ = true;
    if (codec_ == source::Codec::kGzip) {
      // RFC 1952: no name, no time; XFL as zlib sets it; OS 3 (Unix).
      const char xfl = level_ == 9 ? 2 : level_ == 1 ? 4 : 0;
      const char header[10] = {'\x1f', '\x8b', 8, 0, 0, 0, 0, 0, xfl, 3};
      if (auto s = Emit(absl::string_view(header, sizeof header)); !s.ok()) return s;
    } else {
      // RFC 1950: 32 KiB window, FLEVEL as zlib sets it, FCHECK.
      const unsigned flevel = level_ < 2 ? 0 : level_ < 6 ? 1 : level_ == 6 ? 2 : 3;
      unsigned h = (0x78u << 8) | (flevel << 6);
      h += 31 - h % 31;
      const char header[2] = {static_cast<char>(h >> 8), static_cast<char>(h & 0xff)};
      if (auto s = Emit(absl::string_view(header, sizeof header)); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ParallelDeflater::SubmitHeld(bool last) {
  if (auto s = WriteHeader(); !s.ok()) return s;
  // The block in pieces of kDeflatePiece bytes, each primed with the
  // kDeflateDictionary bytes before it (none for the first: the block
  // starts after a full flush), ending with a sync flush; the last piece
  // ends with a full flush, or ends the stream.
  const uint64_t block_at = input_ - held_.size();
  size_t off = 0;
  do {
    while (pipe_->pipe.full()) {
      if (auto s = WriteFront(); !s.ok()) return s;
    }
    const size_t n = std::min(kDeflatePiece, held_.size() - off);
    const size_t dict = std::min(kDeflateDictionary, off);
    Block& b = pipe_->pipe.Next();
    b.in.assign(held_, off - dict, dict + n);
    b.dict = dict;
    b.at = block_at + off;
    off += n;
    b.flush = off < held_.size() ? Z_SYNC_FLUSH : last ? Z_FINISH : Z_FULL_FLUSH;
    b.gzip = codec_ == source::Codec::kGzip;
    b.level = level_;
    b.copied = false;
    pipe_->pipe.Submit();
  } while (off < held_.size());
  held_.clear();
  return absl::OkStatus();
}

absl::Status ParallelDeflater::AddBlock(std::string* block) {
  if (!status_.ok()) return status_;
  if (finished_) {
    return status_ = absl::FailedPreconditionError(absl::StrCat(name_, ": block after the end"));
  }
  if (block->empty()) return absl::OkStatus();
  if (!held_.empty()) {
    if (auto s = SubmitHeld(false); !s.ok()) return s;
  }
  // held_ is now empty: take the caller's bytes and give it held_'s
  // buffer back.
  held_.swap(*block);
  block->clear();
  input_ += held_.size();
  return absl::OkStatus();
}

absl::Status ParallelDeflater::AddDeflated(std::string* deflated, uint64_t length, uint32_t check) {
  if (!status_.ok()) return status_;
  if (finished_) {
    return status_ = absl::FailedPreconditionError(absl::StrCat(name_, ": block after the end"));
  }
  if (length == 0) return absl::OkStatus();
  // The held block ends with a full flush: the copied bytes start at a
  // byte boundary, and need nothing before them.
  if (!held_.empty()) {
    if (auto s = SubmitHeld(false); !s.ok()) return s;
  }
  if (auto s = WriteHeader(); !s.ok()) return s;
  while (pipe_->pipe.full()) {
    if (auto s = WriteFront(); !s.ok()) return s;
  }
  Block& b = pipe_->pipe.Next();
  b.out.swap(*deflated);
  deflated->clear();
  b.in.clear();
  b.dict = 0;
  b.at = input_;
  b.copied = true;
  b.raw_length = length;
  b.check = check;
  pipe_->pipe.Submit();
  input_ += length;
  return absl::OkStatus();
}

absl::Status ParallelDeflater::Finish() {
  if (!status_.ok()) return status_;
  if (finished_) {
    return status_ = absl::FailedPreconditionError(absl::StrCat(name_, ": finished twice"));
  }
  finished_ = true;
  if (auto s = SubmitHeld(true); !s.ok()) return s;
  while (pipe_->pipe.pending() > 0) {
    if (auto s = WriteFront(); !s.ok()) return s;
  }
  char trailer[8];
  size_t n = 0;
  if (codec_ == source::Codec::kGzip) {
    const auto size = static_cast<uint32_t>(written_in_);  // ISIZE: modulo 2^32
    for (int i = 0; i < 4; ++i) trailer[n++] = static_cast<char>(check_ >> (8 * i));
    for (int i = 0; i < 4; ++i) trailer[n++] = static_cast<char>(size >> (8 * i));
  } else {
    for (int i = 3; i >= 0; --i) trailer[n++] = static_cast<char>(check_ >> (8 * i));
  }
  return Emit(absl::string_view(trailer, n));
}

}  // namespace tfrecordfs::record
