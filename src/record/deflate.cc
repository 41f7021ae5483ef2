#include "tfrecordfs/record/deflate.h"

#include <isa-l/crc.h>
#include <isa-l/igzip_lib.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/parallel.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/source/window_use.h"

namespace tfrecordfs::record {

// One piece: its input (a view into the block it is cut from, which its
// pieces share), its deflated bytes and checksum, and the deflate state its
// slot keeps from piece to piece (reset, not reallocated).
struct ParallelDeflater::Block {
  std::shared_ptr<const std::string> src;  // keeps `in` alive
  absl::string_view in;                    // `dict` bytes of dictionary, then the bytes to deflate
  // Its deflated bytes: the first `out_size` of `out` (whose size only
  // grows: zero-filling the room deflate writes into was 1-2 % of a
  // commit's CPU).
  std::string out;
  size_t out_size = 0;
  size_t dict = 0;
  uint64_t at = 0;  // its first byte's input offset
  int flush = Z_FULL_FLUSH;
  bool gzip = true;
  int level = 6;
  uint32_t check = 0;
  absl::Status status;
  z_stream z;
  bool ready = false;  // z initialised
  // Copied: `out` holds raw deflate bytes made elsewhere (AddDeflated),
  // `raw_length` the bytes they inflate to, `check` their checksum,
  // `records` the records they hold.
  bool copied = false;
  uint64_t raw_length = 0;
  uint64_t records = 0;
  // CheckAndIndex: inflate the piece again and compare (Verify); the
  // window a reader resuming at its start needs, as stored in an index
  // (deflated; `window_crc` its crc32c).
  bool verify = false;
  std::string window, stored_window;
  std::string deflated_window;  // room for ISA-L's output, sized once
  uint32_t window_crc = 0;
  // The worker's buffers, kept from piece to piece.
  std::string inflated;
  std::unique_ptr<inflate_state> inflater;
  std::unique_ptr<isal_zstream> window_deflater;
  std::string level_buf;

  Block() { std::memset(&z, 0, sizeof z); }
  ~Block() {
    if (ready) deflateEnd(&z);
  }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  void Work() {
    Deflate();
    if (status.ok() && verify) Verify();
  }

  uint32_t Sum(uint32_t sum, const char* bytes, size_t n) const {
    // ISA-L's checksums: the same values as zlib's crc32 and adler32,
    // several times faster (zlib's crc32 was 1.3 % of a commit's CPU).
    const auto* data = reinterpret_cast<const uint8_t*>(bytes);
    return gzip ? crc32_gzip_refl(sum, data, n) : isal_adler32(sum, data, n);
  }

  void Deflate() {
    status = absl::OkStatus();
    if (copied) return;
    out_size = 0;
    check = gzip ? static_cast<uint32_t>(crc32(0, nullptr, 0))
                 : static_cast<uint32_t>(adler32(1, nullptr, 0));
    const auto* data = reinterpret_cast<const Bytef*>(in.data() + dict);
    const auto size = static_cast<uInt>(in.size() - dict);
    if (size > 0) check = Sum(check, in.data() + dict, size);
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
    const size_t bound = deflateBound(&z, z.avail_in) + 64;
    if (out.size() < bound) out.resize(bound);
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
    out_size = used;
  }

  // Inflates `out` (ISA-L, raw) from a fresh state primed with `primer`
  // into `inflated`; whether it gave exactly `n` bytes from all of `out`,
  // ending the stream when the piece is the last and not before.
  bool InflateWith(absl::string_view primer, size_t n) {
    if (!inflater) inflater = std::make_unique<inflate_state>();
    inflate_state& st = *inflater;
    isal_inflate_init(&st);
    st.crc_flag = ISAL_DEFLATE;
    if (!primer.empty() &&
        isal_inflate_set_dict(&st, reinterpret_cast<uint8_t*>(const_cast<char*>(primer.data())),
                              static_cast<uint32_t>(primer.size())) != COMP_OK) {
      return false;
    }
    if (inflated.size() < n + 1) inflated.resize(n + 1);
    st.next_in = reinterpret_cast<uint8_t*>(out.data());
    st.avail_in = static_cast<uint32_t>(out_size);
    st.next_out = reinterpret_cast<uint8_t*>(inflated.data());
    st.avail_out = static_cast<uint32_t>(n + 1);  // one more: a piece that gives more fails
    for (;;) {
      const uint32_t before_in = st.avail_in, before_out = st.avail_out;
      // Negative: damage; a dictionary it asks for: not raw deflate. (Input
      // or output used up is seen below.)
      const int r = isal_inflate(&st);
      if (r < 0 || r == ISAL_NEED_DICT) return false;
      if (st.block_state == ISAL_BLOCK_FINISH || st.avail_in == 0 || st.avail_out == 0) break;
      if (st.avail_in == before_in && st.avail_out == before_out) return false;
    }
    const bool ended = st.block_state == ISAL_BLOCK_FINISH;
    return st.total_out == n && st.avail_in == 0 && ended == (flush == Z_FINISH && !copied);
  }

  // CheckAndIndex's work on the piece (deflate.h).
  void Verify() {
    const size_t n = copied ? static_cast<size_t>(raw_length) : in.size() - dict;
    const size_t wlen = static_cast<size_t>(std::min<uint64_t>(at, source::kWindowSize));
    // What a reader resuming at the piece's start holds: the dictionary (a
    // piece inside a block: the whole window before it), made sparse where
    // the piece reads only some of it; at a block start and a copied block,
    // nothing of the bytes before is read: zeros.
    const absl::string_view prior = in.substr(0, dict);
    bool ok = false;
    if (dict > 0 && dict == wlen) {
      auto sparse = source::SparseWindow(prior, absl::string_view(out.data(), out_size), 0);
      if (sparse.ok() && *sparse != prior) {
        window = *std::move(sparse);
        ok = InflateWith(window, n) && std::memcmp(inflated.data(), in.data() + dict, n) == 0;
      }
      if (!ok) {
        window.assign(prior.data(), prior.size());
        ok = InflateWith(window, n) && std::memcmp(inflated.data(), in.data() + dict, n) == 0;
      }
    } else if (dict == 0) {
      window.assign(wlen, '\0');
      ok = InflateWith(window, n);
      if (ok && copied) {
        uint64_t seen = 0;
        const uint32_t empty = gzip ? 0u : 1u;
        ok = Sum(empty, inflated.data(), n) == check &&
             record::ForEachRecordInBuffer(absl::string_view(inflated.data(), n),
                                           [&](uint64_t, absl::string_view) { ++seen; })
                 .ok() &&
             seen == records;
      } else if (ok) {
        ok = std::memcmp(inflated.data(), in.data(), n) == 0;
      }
    }
    if (!ok) {
      status = absl::DataLossError(
          copied ? "the copied deflate bytes do not inflate (from nothing before them) to the "
                   "records, length and checksum they were taken for"
                 : "the deflated piece does not inflate back to its input");
      return;
    }
    if (at == 0) {  // the stream start: a checkpoint without a window
      stored_window.clear();
      return;
    }
    // Stored as the scan stores windows (source/scan_output.h): raw deflate
    // by ISA-L at level 1, in one call.
    if (!window_deflater) {
      window_deflater = std::make_unique<isal_zstream>();
      level_buf.resize(ISAL_DEF_LVL1_DEFAULT);
    }
    if (deflated_window.empty()) deflated_window.resize(2 * source::kWindowSize + 1024);
    isal_zstream& w = *window_deflater;
    isal_deflate_stateless_init(&w);
    w.level = 1;
    w.level_buf = reinterpret_cast<uint8_t*>(level_buf.data());
    w.level_buf_size = static_cast<uint32_t>(level_buf.size());
    w.end_of_stream = 1;
    w.flush = NO_FLUSH;
    w.next_in = reinterpret_cast<uint8_t*>(window.data());
    w.avail_in = static_cast<uint32_t>(window.size());
    w.next_out = reinterpret_cast<uint8_t*>(deflated_window.data());
    w.avail_out = static_cast<uint32_t>(deflated_window.size());
    if (const int ret = isal_deflate_stateless(&w); ret != COMP_OK || w.avail_in != 0) {
      status = absl::InternalError(absl::StrCat("ISA-L's deflate of a window failed (", ret, ")"));
      return;
    }
    stored_window.assign(deflated_window.data(), deflated_window.size() - w.avail_out);
    window_crc = crc32c::Value(stored_window.data(), stored_window.size());
  }
};

struct ParallelDeflater::Pipeline {
  Pipeline(int workers, size_t window) : pipe(workers, window, [](Block& b) { b.Work(); }) {}
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
  sum_ = codec_ == source::Codec::kGzip ? static_cast<uint32_t>(crc32(0, nullptr, 0))
                                        : static_cast<uint32_t>(adler32(1, nullptr, 0));
  if (codec_ != source::Codec::kGzip && codec_ != source::Codec::kZlib) {
    status_ = absl::InvalidArgumentError(
        absl::StrCat(name_, ": ", source::CodecName(codec_), " is not deflate"));
  } else if (level_ < 0 || level_ > 9) {
    status_ = absl::InvalidArgumentError(absl::StrCat(name_, ": deflate level ", level_));
  }
}

ParallelDeflater::~ParallelDeflater() = default;

void ParallelDeflater::CheckAndIndex(uint64_t span) {
  check_ = true;
  span_ = span == 0 ? source::kDefaultSpan : span;
  index_ = DeflateIndex();
  source::Checkpoint start;
  start.stream_start = true;
  index_.points.push_back(start);
}

absl::Status ParallelDeflater::Emit(absl::string_view bytes) {
  if (!status_.ok()) return status_;
  status_ = sink_(bytes);
  if (status_.ok()) emitted_ += bytes.size();
  return status_;
}

absl::Status ParallelDeflater::WriteFront() {
  Block& b = pipe_->pipe.Front();
  if (!b.status.ok()) {
    const absl::Status& e = b.status;
    status_ = absl::Status(e.code(), absl::StrCat(name_, ": ", e.message(), " in the ",
                                                  b.copied ? "copied block" : "piece",
                                                  " at uncompressed byte ", b.at));
  }
  const uint64_t n = b.copied ? b.raw_length : b.in.size() - b.dict;
  if (status_.ok() && check_ && n > 0 && b.at > 0) {
    // A checkpoint at the piece's start (a byte-aligned block boundary)
    // where the scan would lay one (source/checkpoints.h): due after a
    // span, allowed after span / kDenseSpans while the index stays within
    // kCheckpointBudget of the compressed bytes so far.
    const source::Checkpoint& last = index_.points.back();
    const uint64_t in = emitted_ - last.in, out = b.at - last.out;
    const double bytes =
        static_cast<double>(index_.windows_blob.size() + b.stored_window.size() +
                            source::kCheckpointEntryBytes * (index_.points.size() + 1));
    if (source::CheckpointDue(in, out, span_) ||
        (source::CheckpointAllowed(in, out, span_) &&
         bytes <= source::kCheckpointBudget * static_cast<double>(emitted_))) {
      source::Checkpoint cp;
      cp.in = emitted_;
      cp.out = b.at;
      cp.window_offset = index_.windows_blob.size();
      cp.window_length = static_cast<uint32_t>(b.stored_window.size());
      cp.window_crc = b.window_crc;
      index_.windows_blob.append(b.stored_window);
      index_.points.push_back(cp);
    }
  }
  if (status_.ok()) status_ = Emit(absl::string_view(b.out.data(), b.out_size));
  if (status_.ok()) {
    const auto len = static_cast<z_off_t>(n);
    sum_ = codec_ == source::Codec::kGzip
               ? static_cast<uint32_t>(crc32_combine(sum_, b.check, len))
               : static_cast<uint32_t>(adler32_combine(sum_, b.check, len));
    written_in_ += n;
  }
  b.src.reset();  // its block may be reused once no piece holds it
  b.in = absl::string_view();
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
  static const std::string kNothing;
  const std::string& held = held_ ? *held_ : kNothing;
  const uint64_t block_at = input_ - held.size();
  size_t off = 0;
  do {
    while (pipe_->pipe.full()) {
      if (auto s = WriteFront(); !s.ok()) return s;
    }
    const size_t n = std::min(kDeflatePiece, held.size() - off);
    const size_t dict = std::min(kDeflateDictionary, off);
    Block& b = pipe_->pipe.Next();
    b.src = held_;
    b.in = absl::string_view(held.data() + off - dict, dict + n);
    b.dict = dict;
    b.at = block_at + off;
    off += n;
    b.flush = off < held.size() ? Z_SYNC_FLUSH : last ? Z_FINISH : Z_FULL_FLUSH;
    b.gzip = codec_ == source::Codec::kGzip;
    b.level = level_;
    b.copied = false;
    b.verify = check_;
    pipe_->pipe.Submit();
  } while (off < held.size());
  held_.reset();
  return absl::OkStatus();
}

absl::Status ParallelDeflater::AddBlock(std::string* block) {
  if (!status_.ok()) return status_;
  if (finished_) {
    return status_ = absl::FailedPreconditionError(absl::StrCat(name_, ": block after the end"));
  }
  if (block->empty()) return absl::OkStatus();
  if (held_) {
    if (auto s = SubmitHeld(false); !s.ok()) return s;
  }
  // Take the caller's bytes into a buffer no piece holds any more, and
  // give the caller that buffer's room back.
  for (const std::shared_ptr<std::string>& p : pool_) {
    if (p.use_count() == 1) {
      held_ = p;
      break;
    }
  }
  if (!held_) {
    held_ = std::make_shared<std::string>();
    pool_.push_back(held_);
  }
  held_->swap(*block);
  block->clear();
  input_ += held_->size();
  return absl::OkStatus();
}

absl::Status ParallelDeflater::AddDeflated(std::string* deflated, uint64_t length, uint32_t check,
                                           uint64_t records) {
  if (!status_.ok()) return status_;
  if (finished_) {
    return status_ = absl::FailedPreconditionError(absl::StrCat(name_, ": block after the end"));
  }
  if (length == 0) return absl::OkStatus();
  // The held block ends with a full flush: the copied bytes start at a
  // byte boundary, and need nothing before them.
  if (held_) {
    if (auto s = SubmitHeld(false); !s.ok()) return s;
  }
  if (auto s = WriteHeader(); !s.ok()) return s;
  while (pipe_->pipe.full()) {
    if (auto s = WriteFront(); !s.ok()) return s;
  }
  Block& b = pipe_->pipe.Next();
  b.out.swap(*deflated);
  b.out_size = b.out.size();
  deflated->clear();
  b.src.reset();
  b.in = absl::string_view();
  b.dict = 0;
  b.at = input_;
  b.gzip = codec_ == source::Codec::kGzip;
  b.copied = true;
  b.raw_length = length;
  b.check = check;
  b.records = records;
  b.verify = check_;
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
  index_.data_size = written_in_;
  char trailer[8];
  size_t n = 0;
  if (codec_ == source::Codec::kGzip) {
    const auto size = static_cast<uint32_t>(written_in_);  // ISIZE: modulo 2^32
    for (int i = 0; i < 4; ++i) trailer[n++] = static_cast<char>(sum_ >> (8 * i));
    for (int i = 0; i < 4; ++i) trailer[n++] = static_cast<char>(size >> (8 * i));
  } else {
    for (int i = 3; i >= 0; --i) trailer[n++] = static_cast<char>(sum_ >> (8 * i));
  }
  return Emit(absl::string_view(trailer, n));
}

}  // namespace tfrecordfs::record
