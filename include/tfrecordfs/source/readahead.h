// Sequential readahead for shards on network storage (issue 12).
//
// Listing a record folder reads that one record; a `find`, `ls -R` or
// `cat */label` over a shard reads its records in order, one round trip each,
// and on network storage (milliseconds a read) that is the whole cost. A
// ReadaheadSource wraps a shard's source and watches its reads: once two
// reads follow each other (the second starts where the first ended), it
// reads the next kDepth aligned blocks of kBlock bytes ahead on the
// Readahead's threads, several at once, into a byte-bounded LRU shared by
// the mount (the memory budget: abandoned streams are simply evicted). A
// read of bytes in a block being fetched waits for that fetch instead of
// asking again. Random reads start nothing, and pay only the bookkeeping.
//
// The bytes served are the same as the wrapped source's: a block whose
// fetch failed is not kept, and the read goes to the wrapped source, which
// reports the error as it would have. Works over any ShardSource (plain or
// GZIP/ZLIB, in uncompressed coordinates). Spliceable() and
// CheckUnchanged() go straight to the wrapped source.
//
// Thread-safety: Readahead and ReadaheadSource are thread-safe. Lock order:
// ReadaheadSource::mu_, then Readahead::mu_ and the BlockCache's (leaves).
// A Readahead must outlive its sources' reads and be destroyed before the
// sources (it joins its threads, whose fetches use them).
#ifndef TFRECORDFS_SOURCE_READAHEAD_H_
#define TFRECORDFS_SOURCE_READAHEAD_H_

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/source/inflate.h"
#include "tfrecordfs/source/shard_source.h"
#include "tfrecordfs/source/stored_bytes.h"

namespace tfrecordfs::source {

// The threads and the memory budget shared by a mount's ReadaheadSources.
class Readahead {
 public:
  // Bytes of one fetch: the largest request FUSE and most network file
  // systems carry in one round trip.
  static constexpr size_t kBlock = size_t{1} << 20;
  // Blocks kept in flight or fetched ahead of a sequential reader.
  static constexpr uint64_t kDepth = 16;

  // `budget_bytes` of fetched blocks kept (LRU; at least one block),
  // `threads` fetches at once (started by the first fetch, so a process
  // may fork between construction and use).
  Readahead(size_t budget_bytes, int threads);
  ~Readahead();
  Readahead(const Readahead&) = delete;
  Readahead& operator=(const Readahead&) = delete;

  uint64_t fetches() const { return fetches_.load(std::memory_order_relaxed); }
  uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }

 private:
  friend class ReadaheadSource;
  void Submit(std::function<void()> task);
  void Work();

  BlockCache cache_;
  Mutex mu_;
  CondVar wake_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  const size_t thread_count_;
  // Started by the first Submit; joined by the destructor (which sets
  // stopping_ first, so no Submit starts more).
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> fetches_{0}, hits_{0};
};

class ReadaheadSource final : public ShardSource {
 public:
  ReadaheadSource(std::unique_ptr<ShardSource> inner, Readahead* readahead);

  Codec codec() const override { return inner_->codec(); }
  const std::string& path() const override { return inner_->path(); }
  uint64_t size() const override { return inner_->size(); }
  absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const override;
  absl::StatusOr<std::optional<FileRange>> Spliceable(uint64_t offset) const override {
    return inner_->Spliceable(offset);
  }
  absl::Status CheckUnchanged() const override { return inner_->CheckUnchanged(); }

 private:
  using Block = std::shared_ptr<const std::string>;  // null: the fetch failed
  // The bytes of block `b` if fetched or being fetched (waits), else null.
  Block Find(uint64_t b) const;
  // Notes a read of [offset, end) (`hit`: served partly from blocks read
  // ahead) and starts the fetches it calls for.
  void Track(uint64_t offset, uint64_t end, bool hit) const;

  const std::unique_ptr<ShardSource> inner_;
  Readahead* const ra_;
  const uint64_t id_;  // in ra_->cache_
  mutable Mutex mu_;
  // Where a sequential read starts.
  mutable uint64_t next_offset_ ABSL_GUARDED_BY(mu_) = ~uint64_t{0};
  mutable uint64_t ahead_ ABSL_GUARDED_BY(mu_) = 0;  // blocks below this are started
  mutable absl::flat_hash_map<uint64_t, std::shared_future<Block>> inflight_ ABSL_GUARDED_BY(mu_);
};

// A walk's reads ahead (issue 25): a header walk on remote storage reads a
// shard front to back, and one read at a time waits a round trip per read
// (per 128 KiB on a FUSE network mount that carries no more per request,
// per GET on an object store). A PrefetchReader wraps the stored bytes for
// one such walk and keeps several ranged reads in flight ahead of the
// reader, each on a thread of its own (a pread of a local descriptor, a
// ranged GET of an object: both block), the way mountpoint-s3's and
// gcsfuse's prefetchers do: parts start at `first_part` bytes and double,
// up to `max_part`, while the reads stay sequential, and the bytes in
// flight or fetched but not yet read stay within `budget_bytes` (at least
// one part is always allowed, so a part larger than the budget still
// progresses).
//
// ReadAt serves the bytes of the parts; a part the reader has passed is
// dropped. A read before the parts held (a walk resynchronising backwards)
// goes to the stored bytes directly and leaves the stream alone; a read past
// the parts scheduled restarts the stream there (from its page boundary) at
// `first_part`. The bytes
// are exactly the stored bytes': a part that failed fails the reads that
// need its bytes with the stored bytes' own error (which names the file or
// URL and the byte offset), and reads before it are served. Reads stop at
// size() (no range past it is requested); a file that turns out shorter
// gives short reads, as the stored bytes would.
//
// Thread-safety: thread-safe (meant for one sequential reader; concurrent
// readers serialise on the stream's bookkeeping, not on the reads). The
// destructor waits for the reads in flight. `in` must outlive it.
class PrefetchReader final : public ObjectReader {
 public:
  struct Options {
    size_t first_part = size_t{1} << 20;
    size_t max_part = size_t{8} << 20;
    // Bytes in flight or held: 32 MiB keeps 4 parts of 8 MiB (or 32 of
    // 1 MiB) in flight per walk.
    size_t budget_bytes = size_t{32} << 20;
    size_t max_parts = 32;  // reads in flight or held at once
  };

  PrefetchReader(StoredBytes in, std::string path, uint64_t size);
  PrefetchReader(StoredBytes in, std::string path, uint64_t size, Options options);
  ~PrefetchReader() override;
  PrefetchReader(const PrefetchReader&) = delete;
  PrefetchReader& operator=(const PrefetchReader&) = delete;

  const std::string& url() const override { return path_; }
  uint64_t size() const override { return size_; }
  absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const override;

  // Ranged reads issued to the stored bytes (parts and direct reads).
  uint64_t reads() const { return reads_.load(std::memory_order_relaxed); }
  // The most bytes in flight or held at once.
  size_t peak_bytes() const;

 private:
  // A part's bytes, in a page-aligned buffer: a direct read (FUSE
  // direct_io, O_DIRECT) of whole pages into it then takes len / max_read
  // requests, not one more for a buffer straddling an extra page.
  struct Bytes {
    std::unique_ptr<char, decltype(&std::free)> data{nullptr, &std::free};
    size_t size = 0;
  };
  struct Part {
    uint64_t offset;
    size_t len;
    std::shared_future<absl::StatusOr<Bytes>> bytes;
  };
  // Starts parts at next_ while the budget allows.
  void Fill() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Bytes> ReadPart(uint64_t offset, size_t len) const;

  const StoredBytes in_;
  const std::string path_;
  const uint64_t size_;
  const Options options_;
  mutable std::atomic<uint64_t> reads_{0};
  mutable Mutex mu_;
  mutable uint64_t next_ ABSL_GUARDED_BY(mu_) = 0;  // where the next part starts
  mutable size_t part_size_ ABSL_GUARDED_BY(mu_);   // the next part's length
  mutable size_t held_ ABSL_GUARDED_BY(mu_) = 0;    // bytes of parts_
  mutable size_t peak_ ABSL_GUARDED_BY(mu_) = 0;
  mutable bool started_ ABSL_GUARDED_BY(mu_) = false;
  // In offset order, contiguous, ending at next_. Last member: destroyed
  // (their reads waited for) before what the reads use.
  mutable std::deque<Part> parts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tfrecordfs::source

#endif  // TFRECORDFS_SOURCE_READAHEAD_H_
