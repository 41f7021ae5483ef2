#include "tfrecordfs/source/readahead.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <utility>

namespace tfrecordfs::source {
namespace {
constexpr size_t kPage = 4096;
}  // namespace

Readahead::Readahead(size_t budget_bytes, int threads)
    : cache_(budget_bytes), thread_count_(std::max(threads, 1)) {}

Readahead::~Readahead() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    tasks_.clear();  // their promises break; nobody waits once reads have stopped
  }
  wake_.SignalAll();
  for (std::thread& t : threads_) t.join();
}

void Readahead::Submit(std::function<void()> task) {
  {
    MutexLock lock(&mu_);
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
  }
}

ReadaheadSource::ReadaheadSource(std::unique_ptr<ShardSource> inner, Readahead* readahead)
    : inner_(std::move(inner)), ra_(readahead), id_(readahead->cache_.NewSourceId()) {}

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
  return pending.get();
}

void ReadaheadSource::Track(uint64_t offset, uint64_t end, bool hit) const {
  const uint64_t size = inner_->size();
  MutexLock lock(&mu_);
  // A read served from blocks read ahead goes on with the stream, even when
  // a read elsewhere in the shard came in between (the feature-type sampler's).
  const bool sequential = hit || offset == next_offset_;
  next_offset_ = end;
  if (!sequential) return;
  const uint64_t first = std::max(ahead_, (end + Readahead::kBlock - 1) / Readahead::kBlock);
  const uint64_t last_block = size == 0 ? 0 : (size - 1) / Readahead::kBlock;
  const uint64_t stop = std::min(end / Readahead::kBlock + Readahead::kDepth, last_block + 1);
  for (uint64_t b = first; b < stop; ++b) {
    if (inflight_.contains(b) || ra_->cache_.Get(id_, b)) continue;
    auto promise = std::make_shared<std::promise<Block>>();
    inflight_.emplace(b, promise->get_future().share());
    ra_->Submit([this, b, size, promise] {
      const uint64_t begin = b * Readahead::kBlock;
      const size_t len = static_cast<size_t>(std::min<uint64_t>(Readahead::kBlock, size - begin));
      // A page-aligned buffer: an unaligned 1 MiB one spans 257 pages, which
      // a FUSE or O_DIRECT read cuts into two requests (two round trips).
      static thread_local std::unique_ptr<char, decltype(&std::free)> scratch(
          static_cast<char*>(std::aligned_alloc(kPage, Readahead::kBlock)), &std::free);
      Block result;
      if (scratch && inner_->ReadFull(begin, scratch.get(), len).ok()) {
        ra_->fetches_.fetch_add(1, std::memory_order_relaxed);
        result = std::make_shared<const std::string>(scratch.get(), len);
        ra_->cache_.Put(id_, b, result);
      }
      promise->set_value(result);
      MutexLock lock(&mu_);
      inflight_.erase(b);
    });
  }
  ahead_ = std::max(ahead_, stop);
}

absl::StatusOr<size_t> ReadaheadSource::ReadAt(uint64_t offset, char* buf, size_t n) const {
  const uint64_t size = inner_->size();
  if (offset >= size) return size_t{0};
  if (n > size - offset) n = static_cast<size_t>(size - offset);
  // Serve what fetched blocks hold, from the front; the rest (from the
  // first block not fetched) from the wrapped source.
  size_t done = 0;
  while (done < n) {
    const uint64_t at = offset + done;
    const uint64_t b = at / Readahead::kBlock;
    Block bytes = Find(b);
    if (!bytes) break;
    const size_t skip = static_cast<size_t>(at - b * Readahead::kBlock);
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
  Track(offset, offset + done, hit);
  return done;
}

// ---- PrefetchReader ----

PrefetchReader::PrefetchReader(StoredBytes in, std::string path, uint64_t size)
    : PrefetchReader(in, std::move(path), size, Options()) {}

PrefetchReader::PrefetchReader(StoredBytes in, std::string path, uint64_t size, Options options)
    : in_(in), path_(std::move(path)), size_(size), options_(options) {
  MutexLock lock(&mu_);
  part_size_ = std::max<size_t>(options_.first_part, 1);
}

PrefetchReader::~PrefetchReader() {
  MutexLock lock(&mu_);
  parts_.clear();  // waits for the reads in flight
}

size_t PrefetchReader::peak_bytes() const {
  MutexLock lock(&mu_);
  return peak_;
}

absl::StatusOr<PrefetchReader::Bytes> PrefetchReader::ReadPart(uint64_t offset, size_t len) const {
  reads_.fetch_add(1, std::memory_order_relaxed);
  Bytes bytes;
  bytes.data.reset(
      static_cast<char*>(std::aligned_alloc(kPage, (len + kPage - 1) / kPage * kPage)));
  if (!bytes.data) {
    return absl::ResourceExhaustedError(
        absl::StrCat(path_, ": no memory for a ", len, "-byte read at byte offset ", offset));
  }
  auto got = PreadUpTo(in_, bytes.data.get(), len, offset, path_);
  if (!got.ok()) return got.status();
  bytes.size = *got;
  return bytes;
}

void PrefetchReader::Fill() const {
  while (next_ < size_ && parts_.size() < std::max<size_t>(options_.max_parts, 1)) {
    const size_t len = static_cast<size_t>(std::min<uint64_t>(part_size_, size_ - next_));
    if (!parts_.empty() && held_ + len > options_.budget_bytes) break;
    const uint64_t offset = next_;
    auto read = [this, offset, len] { return ReadPart(offset, len); };
    std::shared_future<absl::StatusOr<Bytes>> bytes;
    try {
      bytes = std::async(std::launch::async, read).share();
    } catch (const std::system_error&) {
      // No thread to be had: the reader reads the part itself when it
      // gets there.
      bytes = std::async(std::launch::deferred, read).share();
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
    std::shared_future<absl::StatusOr<Bytes>> bytes;
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
          // here (at the page boundary: see Bytes), small again.
          parts_.clear();
          held_ = 0;
          next_ = at - at % kPage;
          part_size_ = std::max<size_t>(options_.first_part, 1);
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
    const absl::StatusOr<Bytes>& part = bytes.get();
    if (!part.ok()) return part.status();
    const size_t skip = static_cast<size_t>(at - part_offset);
    if (skip >= part->size) return done;  // the file ended early
    const size_t k = std::min(n - done, part->size - skip);
    std::memcpy(buf + done, part->data.get() + skip, k);
    done += k;
    if (part->size < part_len && skip + k == part->size) return done;
  }
  return done;
}

}  // namespace tfrecordfs::source
