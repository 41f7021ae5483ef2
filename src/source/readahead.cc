#include "tfrecordfs/source/readahead.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <utility>

namespace tfrecordfs::source {
namespace {
constexpr size_t kPage = 4096;
}  // namespace

Readahead::Readahead(size_t budget_bytes, int threads, size_t block)
    : block_(std::max<size_t>(block, kPage)),
      budget_bytes_(budget_bytes),
      // Spare strings of object blocks are kept within the budget too.
      cache_(block_ > kBlock && budget_bytes > (Spares::kMax + 1) * block_
                 ? budget_bytes - Spares::kMax * block_
                 : budget_bytes),
      thread_count_(std::max(threads, 1)) {}

Readahead::~Readahead() {
  std::vector<std::thread> threads;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    tasks_.clear();  // their promises break; nobody waits once reads have stopped
    threads.swap(threads_);
  }
  wake_.SignalAll();
  for (std::thread& t : threads) t.join();
}

ReadaheadWindow Readahead::NewWindow() const {
  const uint64_t budget_blocks = budget_bytes_ / block_;
  const uint64_t max = std::clamp<uint64_t>(budget_blocks / 2, 1, kMaxWindowBytes / block_);
  const uint64_t first = std::clamp<uint64_t>(kFirstWindowBytes / block_, 1, max);
  return ReadaheadWindow(first, max);
}

std::unique_ptr<std::string> Readahead::TakeSpare(size_t len) {
  std::unique_ptr<std::string> bytes;
  // The cache would evict as much when this block (and the others being
  // fetched) are put: evict it now, so that the fetch reuses the evicted
  // block's string rather than fresh pages.
  cache_.MakeRoom(fetching_.fetch_add(len, std::memory_order_relaxed) + len);
  {
    MutexLock lock(&spares_->mu);
    if (!spares_->free.empty()) {
      bytes = std::move(spares_->free.back());
      spares_->free.pop_back();
    }
  }
  if (bytes) {
    reused_.fetch_add(1, std::memory_order_relaxed);
  } else {
    bytes = std::make_unique<std::string>();
    bytes->reserve(len);
    // Fresh memory (a block this size is mapped on its own): its pages
    // faulted in by one call, not by a trap per 4 KiB page as the fill
    // below and the GET touch them (1024 traps a block; on the benchmark
    // guest the first blocks of a mount spent a fifth of the daemon's time
    // in page faults). Best effort: the fill faults in whatever it left.
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(bytes->data()) + kPage - 1) & ~(kPage - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(bytes->data()) + len) & ~(kPage - 1);
    if (end > begin) {
      ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
    }
  }
  bytes->resize(len);  // a spare of the same length: no fill
  return bytes;
}

std::shared_ptr<const std::string> Readahead::Own(std::unique_ptr<std::string> bytes) {
  return std::shared_ptr<const std::string>(
      bytes.release(), [spares = spares_](const std::string* p) {
        // Declared before the lock: a string not kept is freed after it.
        std::unique_ptr<std::string> back(const_cast<std::string*>(p));
        MutexLock lock(&spares->mu);
        if (spares->free.size() < Spares::kMax) spares->free.push_back(std::move(back));
      });
}

void Readahead::Submit(std::function<void()> task) {
  {
    MutexLock lock(&mu_);
    if (stopping_) return;  // the task (and its promise) is dropped: waiters see a broken promise
    // Started on first use, not at construction: the daemon forks into the
    // background after the mount is built, and threads do not survive a fork.
    while (threads_.size() < thread_count_) threads_.emplace_back([this] { Work(); });
    tasks_.push_back(std::move(task));
  }
  wake_.Signal();
}

void Readahead::Work() {
  for (;;) {
    std::function<void()> task;
    {
      MutexLock lock(&mu_);
      while (!stopping_ && tasks_.empty()) wake_.Wait(&mu_);
      if (stopping_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
    // Now, not when the next task comes: a fetch's promise holds its block,
    // which then goes back to the spares as soon as the cache lets it go.
    task = nullptr;
  }
}

ReadaheadSource::ReadaheadSource(std::unique_ptr<ShardSource> inner, Readahead* readahead)
    : inner_(std::move(inner)),
      ra_(readahead),
      registry_(readahead->registry_),
      id_(readahead->cache_.NewSourceId()),
      window_(readahead->NewWindow()) {
  MutexLock lock(&registry_->mu);
  seq_ = registry_->sources.size();
  registry_->sources.push_back(this);
}

ReadaheadSource::~ReadaheadSource() {
  {
    // After this, no other source primes this one.
    MutexLock lock(&registry_->mu);
    registry_->sources[seq_] = nullptr;
  }
  std::vector<std::shared_future<Block>> pending;
  {
    MutexLock lock(&mu_);
    for (const auto& [b, f] : inflight_) pending.push_back(f);
  }
  // A fetch erases itself from inflight_ before it sets its value, and
  // touches nothing of this source after; a fetch dropped by a stopping
  // Readahead breaks its promise, which ends the wait as well.
  for (const auto& f : pending) f.wait();
}

void ReadaheadSource::DoneWithEnd() const {
  // After the read's own lookup of the block, which made it the most
  // recently used.
  const uint64_t size = inner_->size();
  ra_->cache_.Demote(id_, (size - 1) / ra_->block_);
}

bool ReadaheadSource::Started(uint64_t b) const {
  MutexLock lock(&mu_);
  return inflight_.contains(b) || ra_->cache_.Contains(id_, b);
}

ReadaheadSource::Block ReadaheadSource::Find(uint64_t b) const {
  if (Block bytes = ra_->cache_.Get(id_, b)) return bytes;
  std::shared_future<Block> pending;
  {
    MutexLock lock(&mu_);
    auto it = inflight_.find(b);
    // A fetch that ended since the cache was asked has put its bytes there.
    if (it == inflight_.end()) return ra_->cache_.Get(id_, b);
    pending = it->second;
  }
  pending.wait();
  try {
    return pending.get();
  } catch (const std::future_error&) {
    return nullptr;  // dropped by a Readahead being destroyed: read it directly
  }
}

void ReadaheadSource::StartUpTo(uint64_t stop) const {
  const uint64_t size = inner_->size();
  const size_t block = ra_->block_;
  const uint64_t blocks = (size + block - 1) / block;
  stop = std::min(stop, blocks);
  for (uint64_t b = ahead_; b < stop; ++b) {
    if (inflight_.contains(b) || failed_.contains(b) || ra_->cache_.Contains(id_, b)) continue;
    auto promise = std::make_shared<std::promise<Block>>();
    inflight_.emplace(b, promise->get_future().share());
    ra_->Submit([this, b, size, block, promise] {
      const uint64_t begin = b * block;
      const size_t len = static_cast<size_t>(std::min<uint64_t>(block, size - begin));
      Block result;
      if (block <= Readahead::kBlock) {
        // A page-aligned buffer: an unaligned 1 MiB one spans 257 pages,
        // which a FUSE or O_DIRECT read cuts into two requests (two round
        // trips). Only network file systems read in such blocks.
        static thread_local std::unique_ptr<char, decltype(&std::free)> scratch(
            static_cast<char*>(std::aligned_alloc(kPage, Readahead::kBlock)), &std::free);
        if (scratch && inner_->ReadFull(begin, scratch.get(), len).ok()) {
          result = std::make_shared<const std::string>(scratch.get(), len);
          ra_->cache_.Put(id_, b, result);
        }
      } else {
        // An object's block: one ranged GET straight into the block's bytes
        // (no scratch of kObjectBlock per thread, no copy).
        std::unique_ptr<std::string> bytes = ra_->TakeSpare(len);
        if (inner_->ReadFull(begin, bytes->data(), len).ok()) result = ra_->Own(std::move(bytes));
        if (result) ra_->cache_.Put(id_, b, result);
        ra_->fetching_.fetch_sub(len, std::memory_order_relaxed);
      }
      if (result) ra_->fetches_.fetch_add(1, std::memory_order_relaxed);
      {
        MutexLock lock(&mu_);
        inflight_.erase(b);
        if (!result) failed_.insert(b);
      }
      // Last: once the value is set, the source may be destroyed.
      promise->set_value(std::move(result));
    });
  }
  ahead_ = std::max(ahead_, stop);
}

uint64_t ReadaheadSource::Track(uint64_t offset, uint64_t end, bool hit) const {
  const uint64_t size = inner_->size();
  const size_t block = ra_->block_;
  MutexLock lock(&mu_);
  // A read of blocks read ahead (fetched or being fetched) goes on with the
  // stream, even when a read elsewhere in the shard came in between (the
  // feature-type sampler's).
  const bool sequential = hit || offset == next_offset_;
  next_offset_ = end;
  if (!sequential) {
    window_.Stop();
    return 0;
  }
  // The block the reader is in now: entering a new one widens the window.
  const uint64_t at = (end == 0 ? 0 : end - 1) / block;
  if (window_.blocks() == 0) {
    window_.Start();
    reached_ = at + 1;
    behind_ = offset / block;
  } else if (at + 1 > reached_) {
    window_.Grow();
    reached_ = at + 1;
  }
  // Drop-behind: the blocks this stream has read past go to the cold end of
  // the cache, to be evicted before blocks fetched ahead and not read yet
  // (plain LRU took the next shard's primed blocks, untouched since their
  // fetch, before the blocks just read: a `find` then read them again
  // 1 MiB at a time). The last block goes once a read has taken the
  // shard's end from it (DoneWithEnd).
  for (; behind_ < offset / block; ++behind_) ra_->cache_.Demote(id_, behind_);
  const uint64_t from = end / block;
  if (!hit && from < ahead_) {
    // Part of the read came from the wrapped source: a block started here
    // was evicted before the reader got to it (more streams than the
    // budget holds). Start it and the window after it again rather than
    // read on one direct read at a time (a block whose fetch failed is left
    // to the direct reads, which report the error).
    for (uint64_t b = from; b < ahead_ && b < from + window_.blocks(); ++b) {
      if (!inflight_.contains(b) && !failed_.contains(b) && !ra_->cache_.Contains(id_, b)) {
        ahead_ = b;
        break;
      }
    }
  }
  // From the block the read ended in: the rest of it is read ahead too
  // (not left to one direct read per record).
  ahead_ = std::max(ahead_, from);
  StartUpTo(from + window_.blocks());
  const uint64_t blocks = (size + block - 1) / block;
  if (ahead_ < blocks || primed_next_) return 0;
  primed_next_ = true;
  // The next shard's first window: as much of this stream's window as the
  // cache holds beside it (with drop-behind, the blocks of this shard not
  // read yet are at most a window). Half a window made a `find` wait at
  // each shard for the blocks after it: their fetch started a few records
  // in, and the reader got there before they came.
  const uint64_t window = window_.blocks();
  const uint64_t room = ra_->cache_.max_bytes() / block;
  return std::max<uint64_t>({window / 2, std::min(window, room > window ? room - window : 0), 1});
}

bool ReadaheadSource::Prime(uint64_t blocks) const {
  MutexLock lock(&mu_);
  if (next_offset_ != ~uint64_t{0} || ahead_ > 0) return false;  // read already, or primed
  next_offset_ = 0;
  window_.StartAt(blocks);
  reached_ = 0;
  behind_ = 0;
  StartUpTo(window_.blocks());
  ra_->primed_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void ReadaheadSource::ExpectReadFromStart() const {
  if (inner_->size() == 0) return;
  // One listed shard primed and not read at a time: a listing of many
  // shard folders is not followed by reads of them all.
  bool idle = false;
  if (!ra_->expecting_.compare_exchange_strong(idle, true, std::memory_order_relaxed)) return;
  if (Prime(ra_->NewWindow().first())) {
    ra_->expected_.fetch_add(1, std::memory_order_relaxed);
  } else {
    ra_->expecting_.store(false, std::memory_order_relaxed);
  }
}

void ReadaheadSource::PrimeNext(uint64_t blocks) const {
  MutexLock lock(&registry_->mu);
  for (size_t k = seq_ + 1; k < registry_->sources.size(); ++k) {
    if (const ReadaheadSource* next = registry_->sources[k]) {
      next->Prime(blocks);
      return;
    }
  }
}

std::optional<HeldBytes> ReadaheadSource::Held(uint64_t offset, size_t n) const {
  const uint64_t size = inner_->size();
  const size_t block = ra_->block_;
  if (n == 0 || offset >= size || n > size - offset) return std::nullopt;
  const uint64_t b = offset / block;
  if ((offset + n - 1) / block != b) return std::nullopt;
  if (!Started(b)) return std::nullopt;  // ReadAt reads it and notes the read
  if (ra_->expecting_.load(std::memory_order_relaxed)) {
    ra_->expecting_.store(false, std::memory_order_relaxed);
  }
  // The stream goes on (its next fetches start) before the read waits for
  // its block.
  if (const uint64_t prime = Track(offset, offset + n, true); prime > 0) PrimeNext(prime);
  Block bytes = Find(b);
  const size_t skip = static_cast<size_t>(offset - b * block);
  if (!bytes || skip + n > bytes->size()) return std::nullopt;
  ra_->hits_.fetch_add(1, std::memory_order_relaxed);
  if (offset + n == size) DoneWithEnd();
  const absl::string_view view(bytes->data() + skip, n);
  return HeldBytes{std::move(bytes), view};
}

absl::StatusOr<size_t> ReadaheadSource::ReadAt(uint64_t offset, char* buf, size_t n) const {
  // A read: a listing may prime a shard again (loaded first, so that reads
  // do not all write the shared flag).
  if (ra_->expecting_.load(std::memory_order_relaxed)) {
    ra_->expecting_.store(false, std::memory_order_relaxed);
  }
  const uint64_t size = inner_->size();
  if (offset >= size) return size_t{0};
  if (n > size - offset) n = static_cast<size_t>(size - offset);
  const size_t block = ra_->block_;
  // The read is noted first: the fetches it calls for start before it waits
  // for a block being fetched (noted after, a stream's window grew a round
  // trip late, and a `find` waited at each shard's start).
  if (const uint64_t prime = Track(offset, offset + n, Started(offset / block)); prime > 0) {
    PrimeNext(prime);
  }
  // Serve what fetched blocks hold, from the front; the rest (from the
  // first block not fetched) from the wrapped source.
  size_t done = 0;
  while (done < n) {
    const uint64_t at = offset + done;
    const uint64_t b = at / block;
    Block bytes = Find(b);
    if (!bytes) break;
    const size_t skip = static_cast<size_t>(at - b * block);
    if (skip >= bytes->size()) break;
    const size_t take = std::min(n - done, bytes->size() - skip);
    std::memcpy(buf + done, bytes->data() + skip, take);
    done += take;
  }
  const bool hit = done > 0;
  if (hit) ra_->hits_.fetch_add(1, std::memory_order_relaxed);
  if (done < n) {
    auto got = inner_->ReadAt(offset + done, buf + done, n - done);
    if (!got.ok()) return got.status();
    done += *got;
  }
  if (hit && offset + done == size) DoneWithEnd();
  return done;
}

// ---- PrefetchBudget ----

PrefetchBudget& PrefetchBudget::Process() {
  // Never destroyed: parts may be given back as the process exits.
  static PrefetchBudget* const process = new PrefetchBudget(kProcessBytes);
  return *process;
}

PrefetchBudget::~PrefetchBudget() {
  MutexLock lock(&mu_);
  for (auto& [cap, data] : spares_) std::free(data);
}

size_t PrefetchBudget::Capacity(size_t len) {
  // Powers of two from a page: parts of 1, 2, 4 and 8 MiB reuse each
  // other's buffers exactly.
  return std::bit_ceil(std::max(len, kPage));
}

void PrefetchBudget::Join() {
  MutexLock lock(&mu_);
  ++walks_;
}

void PrefetchBudget::Leave() {
  MutexLock lock(&mu_);
  --walks_;
}

size_t PrefetchBudget::Share() const {
  MutexLock lock(&mu_);
  return budget_ / std::max(walks_, kMinShares);
}

size_t PrefetchBudget::held() const {
  MutexLock lock(&mu_);
  return held_;
}

size_t PrefetchBudget::peak() const {
  MutexLock lock(&mu_);
  return peak_;
}

char* PrefetchBudget::Take(size_t len, bool always) {
  const size_t cap = Capacity(len);
  std::vector<char*> freed;  // freed after the lock
  char* data = nullptr;
  {
    MutexLock lock(&mu_);
    if (held_ + cap > budget_ && !always) return nullptr;
    for (size_t i = 0; i < spares_.size(); ++i) {
      if (spares_[i].first == cap) {
        data = spares_[i].second;
        spares_.erase(spares_.begin() + static_cast<ptrdiff_t>(i));
        spare_bytes_ -= cap;
        break;
      }
    }
    // Room for a new buffer: spares of other sizes go first.
    while (data == nullptr && !spares_.empty() && held_ + spare_bytes_ + cap > budget_) {
      spare_bytes_ -= spares_.back().first;
      freed.push_back(spares_.back().second);
      spares_.pop_back();
    }
    held_ += cap;
    peak_ = std::max(peak_, held_);
  }
  for (char* f : freed) std::free(f);
  if (data == nullptr) data = static_cast<char*>(std::aligned_alloc(kPage, cap));
  if (data == nullptr) {
    MutexLock lock(&mu_);
    held_ -= cap;
  }
  return data;
}

void PrefetchBudget::Give(char* data, size_t len) {
  const size_t cap = Capacity(len);
  std::vector<char*> freed;
  {
    MutexLock lock(&mu_);
    held_ -= cap;
    if (held_ + spare_bytes_ + cap <= budget_) {
      spares_.emplace_back(cap, data);
      spare_bytes_ += cap;
      data = nullptr;
    }
    if (held_ == 0) {
      // No walk reads ahead now: the spares would only sit in memory (a
      // daemon's, after its mount's walks).
      for (auto& [c, d] : spares_) freed.push_back(d);
      spares_.clear();
      spare_bytes_ = 0;
    }
  }
  std::free(data);
  for (char* f : freed) std::free(f);
}

// ---- PrefetchReader ----

PrefetchReader::PrefetchReader(StoredBytes in, std::string path, uint64_t size)
    : PrefetchReader(in, std::move(path), size, Options()) {}

PrefetchReader::PrefetchReader(StoredBytes in, std::string path, uint64_t size, Options options)
    : in_(in),
      path_(std::move(path)),
      size_(size),
      options_(options),
      budget_(options.budget != nullptr ? options.budget : &PrefetchBudget::Process()) {
  budget_->Join();
  MutexLock lock(&mu_);
  part_size_ = std::max<size_t>(options_.first_part, 1);
}

PrefetchReader::~PrefetchReader() {
  {
    MutexLock lock(&mu_);
    parts_.clear();  // waits for the reads in flight
  }
  budget_->Leave();
}

size_t PrefetchReader::peak_bytes() const {
  MutexLock lock(&mu_);
  return peak_;
}

absl::StatusOr<PrefetchReader::PartBytes> PrefetchReader::ReadPart(const PartBytes& bytes,
                                                                   uint64_t offset) const {
  reads_.fetch_add(1, std::memory_order_relaxed);
  auto got = PreadUpTo(in_, bytes->data, bytes->len, offset, path_);
  if (!got.ok()) return got.status();
  bytes->size = *got;
  return bytes;
}

void PrefetchReader::Fill() const {
  const size_t first = std::max<size_t>(options_.first_part, 1);
  const size_t share = budget_->Share();
  // An object's parts: two in flight within the share, whatever max_part
  // says (a power of two: the budget's buffers are), since one GET costs a
  // round trip whatever its size. A file's stay at first_part, as many in
  // flight as the share holds: a network file system carries a pread in
  // requests of 128 KiB to 1 MiB, one after the other, so only more preads
  // at once go faster.
  const size_t largest = in_.object() != nullptr
                             ? std::max(first, std::bit_floor(std::max<size_t>(share / 2, 1)))
                             : first;
  while (next_ < size_ && parts_.size() < std::max<size_t>(options_.max_parts, 1)) {
    size_t len =
        static_cast<size_t>(std::min<uint64_t>(std::min(part_size_, largest), size_ - next_));
    char* data = nullptr;
    if (parts_.empty() || held_ + len <= share) data = budget_->Take(len, false);
    if (data == nullptr) {
      if (!parts_.empty()) break;  // the walk has parts to read meanwhile
      // Nothing held: one small part beyond the budget, so the walk goes on.
      len = std::min(len, first);
      data = budget_->Take(len, true);
    }
    const uint64_t offset = next_;
    std::shared_future<absl::StatusOr<PartBytes>> bytes;
    if (data == nullptr) {
      std::promise<absl::StatusOr<PartBytes>> failed;
      failed.set_value(absl::ResourceExhaustedError(
          absl::StrCat(path_, ": no memory for a ", len, "-byte read at byte offset ", offset)));
      bytes = failed.get_future().share();
    } else {
      auto part = std::make_shared<Bytes>(budget_, data, len);
      auto read = [this, part, offset] { return ReadPart(part, offset); };
      try {
        bytes = std::async(std::launch::async, read).share();
      } catch (const std::system_error&) {
        // No thread to be had: the reader reads the part itself when it
        // gets there.
        bytes = std::async(std::launch::deferred, read).share();
      }
    }
    parts_.push_back(Part{offset, len, std::move(bytes)});
    held_ += len;
    peak_ = std::max(peak_, held_);
    next_ += len;
    part_size_ = std::min(part_size_ * 2, std::max(options_.max_part, options_.first_part));
  }
}

absl::StatusOr<size_t> PrefetchReader::ReadAt(uint64_t offset, char* buf, size_t n) const {
  if (offset >= size_) return size_t{0};
  n = static_cast<size_t>(std::min<uint64_t>(n, size_ - offset));
  size_t done = 0;
  while (done < n) {
    const uint64_t at = offset + done;
    std::shared_future<absl::StatusOr<PartBytes>> bytes;
    uint64_t part_offset = 0;
    size_t part_len = 0;
    bool direct = false;
    {
      MutexLock lock(&mu_);
      const uint64_t front = parts_.empty() ? next_ : parts_.front().offset;
      if (started_ && at < front) {
        direct = true;
      } else {
        if (!started_ || at > next_) {
          // First read, or a jump past what was started: begin the stream
          // here (at the page boundary: see Bytes), small again unless the
          // jump skipped less than a part (a header walk skipping the rest
          // of a record body that no part held: a walk short of budget).
          const bool skip = started_ && at - next_ <= part_size_;
          parts_.clear();
          held_ = 0;
          next_ = at - at % kPage;
          if (!skip) part_size_ = std::max<size_t>(options_.first_part, 1);
          started_ = true;
        }
        while (!parts_.empty() && parts_.front().offset + parts_.front().len <= at) {
          held_ -= parts_.front().len;
          parts_.pop_front();
        }
        Fill();
        for (const Part& part : parts_) {
          if (at < part.offset + part.len) {
            bytes = part.bytes;
            part_offset = part.offset;
            part_len = part.len;
            break;
          }
        }
      }
    }
    if (direct) {
      // Behind the stream (a walk resynchronising): read it as asked.
      reads_.fetch_add(1, std::memory_order_relaxed);
      auto got = PreadUpTo(in_, buf + done, n - done, at, path_);
      if (!got.ok()) return got.status();
      return done + *got;
    }
    if (!bytes.valid()) return done;  // unreachable: at < size_ = the last part's end
    const absl::StatusOr<PartBytes>& part = bytes.get();
    if (!part.ok()) return part.status();
    const Bytes& got = **part;
    const size_t skip = static_cast<size_t>(at - part_offset);
    if (skip >= got.size) return done;  // the file ended early
    const size_t k = std::min(n - done, got.size - skip);
    std::memcpy(buf + done, got.data + skip, k);
    done += k;
    if (got.size < part_len && skip + k == got.size) return done;
  }
  return done;
}

}  // namespace tfrecordfs::source
