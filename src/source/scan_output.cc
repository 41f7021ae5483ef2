#include "tfrecordfs/source/scan_output.h"

#include <isa-l/igzip_lib.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/source/window_use.h"

namespace tfrecordfs::source {

namespace {

// Compressed bytes between progress reports.
constexpr uint64_t kProgressStep = 1 << 20;

// Bytes of the stored file held in memory: `bytes` from file offset `at`
// (the deflate data after a checkpoint, read once for its sparse window and
// again by the check from here). Reads past them are short.
class BytesAt final : public ObjectReader {
 public:
  BytesAt(std::string url, uint64_t at, absl::string_view bytes)
      : url_(std::move(url)), at_(at), bytes_(bytes) {}
  const std::string& url() const override { return url_; }
  uint64_t size() const override { return at_ + bytes_.size(); }
  absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const override {
    if (offset < at_)
      return absl::InternalError(absl::StrCat(url_, ": read before the bytes held"));
    if (offset >= size()) return 0;
    const size_t k = static_cast<size_t>(std::min<uint64_t>(n, size() - offset));
    std::memcpy(buf, bytes_.data() + (offset - at_), k);
    return k;
  }

 private:
  const std::string url_;
  const uint64_t at_;
  const absl::string_view bytes_;
};

}  // namespace

// A checkpoint whose window is not stored yet: it is made sparse once the
// kWindowSize bytes of output after the checkpoint are known, which check
// it.
struct ScanOutput::Pending {
  Checkpoint cp;
  std::string window;  // the whole window
  std::string after;   // the output after the checkpoint, up to kWindowSize bytes
};

ScanOutput::ScanOutput(StoredBytes fd, absl::string_view path, uint64_t file_size, Codec codec,
                       const StreamSink& sink, const std::function<void(uint64_t)>& progress,
                       Options options)
    : fd_(fd), path_(path), sink_(sink), progress_(progress), options_(options) {
  check_ = std::make_unique<Inflater>(fd, path, file_size, codec, /*fast=*/options.isal);
  deflate_ = std::make_unique<isal_zstream>();
  deflate_level_buf_.resize(ISAL_DEF_LVL1_DEFAULT);
  // Room for a whole window that does not compress, in stored blocks.
  deflated_.resize(2 * kWindowSize + 1024);
  if (options_.threaded) thread_ = std::thread([this] { Run(); });
}

ScanOutput::~ScanOutput() {
  if (thread_.joinable()) {
    {
      MutexLock lock(&mu_);
      stopping_ = true;
    }
    work_cv_.SignalAll();
    thread_.join();
  }
}

ScanChunk* ScanOutput::Take() {
  MutexLock lock(&mu_);
  for (;;) {
    if (!free_.empty()) {
      ScanChunk* c = free_.back();
      free_.pop_back();
      return c;
    }
    if (chunks_.size() < (options_.threaded ? kScanChunksInFlight : 1)) {
      chunks_.push_back(std::make_unique<ScanChunk>());
      chunks_.back()->bytes.resize(kScanChunk);
      return chunks_.back().get();
    }
    done_cv_.Wait(&mu_);
  }
}

void ScanOutput::Push(ScanChunk* chunk) {
  pushed_ += chunk->size;
  if (!options_.threaded) {
    if (!failed()) {
      if (absl::Status s = Process(*chunk); !s.ok()) Fail(std::move(s));
    }
    chunk->size = 0;
    chunk->laid.clear();
    MutexLock lock(&mu_);
    free_.push_back(chunk);
    return;
  }
  {
    MutexLock lock(&mu_);
    queue_.push_back(chunk);
  }
  work_cv_.Signal();
}

size_t ScanOutput::KnownWindows(const std::vector<uint64_t>& outs) const {
  if (pushed_ < kWindowSize + kKnownWindowLag) return 0;
  const uint64_t limit = pushed_ - kWindowSize - kKnownWindowLag;
  return static_cast<size_t>(std::upper_bound(outs.begin(), outs.end(), limit) - outs.begin());
}

uint64_t ScanOutput::StoredPrefix(size_t n) {
  MutexLock lock(&mu_);
  while (prefix_.size() <= n && !failed()) done_cv_.Wait(&mu_);
  return prefix_.size() > n ? prefix_[n] : 0;
}

absl::Status ScanOutput::Finish() {
  if (finished_) return status_;
  finished_ = true;
  if (thread_.joinable()) {
    {
      MutexLock lock(&mu_);
      closing_ = true;
    }
    work_cv_.SignalAll();
    thread_.join();  // the thread stores what is pending before it ends
  } else if (!failed()) {
    while (!pending_.empty()) {
      if (absl::Status s = Store(pending_.front()); !s.ok()) {
        Fail(std::move(s));
        break;
      }
      pending_.pop_front();
    }
  }
  return status_;
}

void ScanOutput::Run() {
  for (;;) {
    ScanChunk* c = nullptr;
    {
      MutexLock lock(&mu_);
      while (queue_.empty() && !closing_ && !stopping_) work_cv_.Wait(&mu_);
      if (stopping_) return;
      if (queue_.empty()) break;  // closing, all processed
      c = queue_.front();
      queue_.pop_front();
    }
    if (!failed()) {
      if (absl::Status s = Process(*c); !s.ok()) Fail(std::move(s));
    }
    c->size = 0;
    c->laid.clear();
    {
      MutexLock lock(&mu_);
      free_.push_back(c);
    }
    done_cv_.SignalAll();
  }
  while (!failed() && !pending_.empty()) {
    if (absl::Status s = Store(pending_.front()); !s.ok()) {
      Fail(std::move(s));
      break;
    }
    pending_.pop_front();
  }
}

void ScanOutput::Fail(absl::Status s) {
  status_ = std::move(s);
  {
    MutexLock lock(&mu_);
    failed_.store(true, std::memory_order_release);
  }
  done_cv_.SignalAll();
}

absl::Status ScanOutput::Process(const ScanChunk& chunk) {
  const absl::string_view bytes(chunk.bytes.data(), chunk.size);
  if (!bytes.empty()) {
    if (absl::Status s = sink_(bytes); !s.ok()) return s;
  }
  if (progress_ && chunk.in_end - last_progress_ >= kProgressStep) {
    progress_(chunk.in_end);
    last_progress_ = chunk.in_end;
  }
  size_t from = 0;
  for (const ScanChunk::Laid& l : chunk.laid) {
    if (absl::Status s = Feed(bytes.substr(from, l.at - from)); !s.ok()) return s;
    from = l.at;
    // Its window: the output before it, from the history and this chunk.
    const size_t wlen = static_cast<size_t>(std::min<uint64_t>(l.cp.out, kWindowSize));
    Pending p;
    p.cp = l.cp;
    p.window.reserve(wlen);
    if (l.at < wlen) {
      p.window.assign(history_, history_.size() - (wlen - l.at), wlen - l.at);
      p.window.append(bytes.data(), l.at);
    } else {
      p.window.assign(bytes.data() + l.at - wlen, wlen);
    }
    p.after.reserve(kWindowSize);
    pending_.push_back(std::move(p));
  }
  if (absl::Status s = Feed(bytes.substr(from)); !s.ok()) return s;
  out_ += bytes.size();
  if (bytes.size() >= kWindowSize) {
    history_.assign(bytes.data() + bytes.size() - kWindowSize, kWindowSize);
  } else {
    history_.append(bytes.data(), bytes.size());
    if (history_.size() > kWindowSize) history_.erase(0, history_.size() - kWindowSize);
  }
  return absl::OkStatus();
}

absl::Status ScanOutput::Feed(absl::string_view bytes) {
  if (bytes.empty()) return absl::OkStatus();
  for (Pending& p : pending_) {
    if (p.after.size() == kWindowSize) continue;
    p.after.append(bytes.data(), std::min(kWindowSize - p.after.size(), bytes.size()));
  }
  while (!pending_.empty() && pending_.front().after.size() == kWindowSize) {
    if (absl::Status s = Store(pending_.front()); !s.ok()) return s;
    pending_.pop_front();
  }
  return absl::OkStatus();
}

absl::Status ScanOutput::Store(Pending& p) {
  // The window as stored: sparse when the deflate data after the
  // checkpoint shows which bytes it reads, and when inflating from the
  // checkpoint with the sparse window gives the output the scan saw after
  // it; else whole. Most windows need a few KiB of the data after them (32
  // KiB of output at the ratio of the data): a small read first, a whole
  // one if short.
  absl::string_view keep = p.window;
  std::string sparse_bytes;
  int first_bit = 0;
  auto in = DataAfter(fd_, path_, p.cp, &first_bit, 12 << 10);
  if (!in.ok()) return in.status();
  auto sparse = SparseWindow(p.window, *in, first_bit);
  if (absl::IsOutOfRange(sparse.status()) && in->size() == (12 << 10)) {
    in = DataAfter(fd_, path_, p.cp, &first_bit);
    if (!in.ok()) return in.status();
    sparse = SparseWindow(p.window, *in, first_bit);
  }
  if (sparse.ok() && *sparse != p.window) {
    // The check inflates the same compressed bytes, from memory (those
    // SparseWindow decoded hold the 32 KiB of output; if ISA-L wants more,
    // the check fails and the whole window is kept).
    const BytesAt data(std::string(path_), p.cp.bits > 0 ? p.cp.in - 1 : p.cp.in, *in);
    check_->SetFd(&data);
    if (absl::Status st = check_->Start(p.cp, *sparse); !st.ok()) return st;
    std::string again(p.after.size(), '\0');
    size_t have = 0;
    while (have < again.size() && !check_->finished()) {
      auto got = check_->Read(again.data() + have, again.size() - have, /*z_block=*/false);
      if (!got.ok()) return got.status();
      if (*got == 0) break;
      have += *got;
    }
    check_->SetFd(fd_);
    if (have == again.size() && again == p.after) {
      sparse_bytes = std::move(*sparse);
      keep = sparse_bytes;
    }
  }
  // Raw deflate of the window, in one call (ISA-L's stateless deflate).
  isal_zstream& z = *deflate_;
  isal_deflate_stateless_init(&z);
  z.level = 1;
  z.level_buf = reinterpret_cast<uint8_t*>(deflate_level_buf_.data());
  z.level_buf_size = static_cast<uint32_t>(deflate_level_buf_.size());
  z.end_of_stream = 1;
  z.flush = NO_FLUSH;
  z.next_in = reinterpret_cast<uint8_t*>(const_cast<char*>(keep.data()));
  z.avail_in = static_cast<uint32_t>(keep.size());
  z.next_out = reinterpret_cast<uint8_t*>(deflated_.data());
  z.avail_out = static_cast<uint32_t>(deflated_.size());
  if (const int ret = isal_deflate_stateless(&z); ret != COMP_OK || z.avail_in != 0) {
    return absl::InternalError(
        absl::StrCat(path_, ": ISA-L's deflate of a checkpoint window failed (", ret, ")"));
  }
  const size_t n = deflated_.size() - z.avail_out;
  StoredWindowRef ref;
  ref.offset = blob_.size();
  ref.length = static_cast<uint32_t>(n);
  ref.crc = crc32c::Value(deflated_.data(), n);
  blob_.append(deflated_.data(), n);
  refs_.push_back(ref);
  {
    MutexLock lock(&mu_);
    prefix_.push_back(blob_.size());
  }
  if (options_.threaded) done_cv_.SignalAll();
  return absl::OkStatus();
}

}  // namespace tfrecordfs::source
