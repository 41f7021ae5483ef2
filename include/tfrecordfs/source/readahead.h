// Sequential readahead for shards on network storage (issue 12).
//
// Why: listing a record folder reads that one record; a `find`, `ls -R` or
// `cat */label` over a shard reads its records in order, one round trip
// each, and on network storage (milliseconds a read) that is the whole cost.
//
// What: a ReadaheadSource wraps a shard's source and watches its reads. It
// reads aligned blocks (Readahead::block(): 1 MiB on a network file system,
// 4 MiB, one ranged GET each, for objects) ahead on the Readahead's threads,
// several at once, into a byte-bounded LRU shared by the mount (the memory
// budget: abandoned streams are simply evicted).
//
// A source's stream, read by read:
//
//              a read that neither follows the last one
//              nor reads a block read ahead: window stopped
//        +----------------------------------------------+
//        v                                              |
//   [ random ] -- a read starting where the last --> [ sequential ]
//        |        one ended: window started             |  window of W blocks;
//        |                                              |  W doubles each time
//        | ExpectReadFromStart (its folder listed),     |  the reader enters a
//        | or PrimeNext (the shard before it in         |  new block, up to
//        | mount order started its last block)          |  kMaxWindowBytes
//        v                                              |
//   [ primed ] -- a read at offset 0 ------------------>+  every block to the
//     first window fetched                                 end started: prime
//                                                          the next shard
//
// - Window: a ReadaheadWindow, a few blocks when the stream starts, at most
//   half the budget, so blocks read ahead are not evicted before they are
//   read.
// - Drop-behind: blocks a stream has read past go to the cold end of the LRU
//   (and a shard's last block once its end was read), so blocks fetched ahead
//   and not read yet are the last to go. A block evicted before its reader got
//   there anyway is fetched again, with the window after it, rather than read
//   one direct read at a time.
// - Priming: the next shard registered with the same Readahead (the mount's
//   order: the order a `find` walks the shard folders) gets its first window
//   (as far as the budget holds it beside the stream's own), so a walk across
//   shards is one stream that waits no round trip at each shard's start.
// - A read of bytes in a block being fetched waits for that fetch instead of
//   asking again. Random reads start nothing, and pay only the bookkeeping.
//
// The bytes served are the same as the wrapped source's: a block whose
// fetch failed is not kept, and the read goes to the wrapped source, which
// reports the error as it would have. Works over any ShardSource (plain or
// GZIP/ZLIB, in uncompressed coordinates). Spliceable() and
// CheckUnchanged() go straight to the wrapped source.
//
// Thread-safety: Readahead and ReadaheadSource are thread-safe. Lock order:
// Readahead's registry lock (Registry::mu), then ReadaheadSource::mu_, then
// Readahead::mu_ and the BlockCache's (leaves). A Readahead must outlive
// its sources' reads; a ReadaheadSource's destructor waits for its fetches
// in flight (a source replaced while the mount lives), and a Readahead's
// destructor joins its threads and drops fetches not started, so the two
// may be destroyed in either order.
#ifndef TFRECORDFS_SOURCE_READAHEAD_H_
#define TFRECORDFS_SOURCE_READAHEAD_H_

#include <algorithm>
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
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/source/inflate.h"
#include "tfrecordfs/source/shard_source.h"
#include "tfrecordfs/source/stored_bytes.h"

namespace tfrecordfs::source {

// How many blocks a sequential stream reads ahead of its reader: `first`
// when the stream starts, doubled each time the reader enters a block it
// had not reached before, up to `max`; a read that breaks the stream stops
// it (0 blocks). Not thread-safe (a ReadaheadSource's, under its lock).
class ReadaheadWindow {
 public:
  ReadaheadWindow(uint64_t first, uint64_t max)
      : first_(std::max<uint64_t>(first, 1)), max_(std::max(max, std::max<uint64_t>(first, 1))) {}
  uint64_t blocks() const { return blocks_; }
  uint64_t first() const { return first_; }
  void Start() { blocks_ = first_; }
  // Starts at `blocks` (within first and max): a stream carried on from
  // the shard before.
  void StartAt(uint64_t blocks) { blocks_ = std::clamp(blocks, first_, max_); }
  uint64_t max() const { return max_; }
  void Grow() { blocks_ = blocks_ == 0 ? first_ : std::min(blocks_ * 2, max_); }
  void Stop() { blocks_ = 0; }

 private:
  const uint64_t first_, max_;
  uint64_t blocks_ = 0;
};

class ReadaheadSource;

// The threads and the memory budget shared by a mount's ReadaheadSources.
class Readahead {
 public:
  // Bytes of one fetch on a network file system: the largest request FUSE
  // and most network file systems carry in one round trip.
  static constexpr size_t kBlock = size_t{1} << 20;
  // Bytes of one fetch of an object (one ranged GET): a round trip costs
  // the same for 1 MiB and 4 MiB, and fewer requests cost the store less.
  static constexpr size_t kObjectBlock = size_t{4} << 20;
  // A stream's window: kFirstWindowBytes when it starts (at least one
  // block), growing to kMaxWindowBytes, and never more than half the budget.
  static constexpr size_t kFirstWindowBytes = size_t{8} << 20;
  static constexpr size_t kMaxWindowBytes = size_t{32} << 20;

  // `budget_bytes` of fetched blocks kept (LRU; at least one block; for
  // blocks larger than kBlock, the spare strings kept for the next fetches
  // count in it),
  // `threads` fetches at once (started by the first fetch, so a process
  // may fork between construction and use), `block` bytes a fetch.
  Readahead(size_t budget_bytes, int threads, size_t block = kBlock);
  ~Readahead();
  Readahead(const Readahead&) = delete;
  Readahead& operator=(const Readahead&) = delete;

  size_t block() const { return block_; }
  // A new stream's window, in blocks.
  ReadaheadWindow NewWindow() const;

  uint64_t fetches() const { return fetches_.load(std::memory_order_relaxed); }
  uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  // Shards primed by the shard before them (their first window fetched
  // before their first read).
  uint64_t primed() const { return primed_.load(std::memory_order_relaxed); }
  // Of those, shards primed because their folder was listed
  // (ReadaheadSource::ExpectReadFromStart).
  uint64_t expected() const { return expected_.load(std::memory_order_relaxed); }
  // Object block fetches that reused the string of an evicted block.
  uint64_t reused() const { return reused_.load(std::memory_order_relaxed); }

 private:
  friend class ReadaheadSource;
  // The sources in the order they were made, for priming the next one;
  // shared with the sources (a source may outlive its Readahead).
  struct Registry {
    Mutex mu;
    std::vector<const ReadaheadSource*> sources ABSL_GUARDED_BY(mu);  // null: destroyed
  };
  // Strings of object blocks the cache let go, for the next fetches: their
  // pages stay mapped (no page faults, no zero fill of kObjectBlock bytes a
  // GET). Shared with the blocks' deleters, which may run after the
  // Readahead is gone.
  struct Spares {
    static constexpr size_t kMax = 2;  // within the budget: the cache keeps the rest
    Mutex mu;
    std::vector<std::unique_ptr<std::string>> free ABSL_GUARDED_BY(mu);
  };
  void Submit(std::function<void()> task);
  void Work();
  // A string of `len` bytes for a fetch (a spare one when there is one,
  // counted in fetching_ until the fetch puts its block or fails), and the
  // block that owns it (its deleter gives it back).
  std::unique_ptr<std::string> TakeSpare(size_t len);
  std::shared_ptr<const std::string> Own(std::unique_ptr<std::string> bytes);

  const size_t block_;
  const size_t budget_bytes_;
  const std::shared_ptr<Spares> spares_ = std::make_shared<Spares>();
  BlockCache cache_;
  const std::shared_ptr<Registry> registry_ = std::make_shared<Registry>();
  Mutex mu_;
  CondVar wake_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  const size_t thread_count_;
  // Started by the first Submit; joined by the destructor (which sets
  // stopping_ first, so no Submit starts more).
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> fetches_{0}, hits_{0}, primed_{0}, reused_{0}, expected_{0};
  // A source was primed by ExpectReadFromStart and no source has been
  // read since: a listing primes no other.
  std::atomic<bool> expecting_{false};
  std::atomic<size_t> fetching_{0};  // bytes of object blocks being fetched
};

class ReadaheadSource final : public ShardSource {
 public:
  ReadaheadSource(std::unique_ptr<ShardSource> inner, Readahead* readahead);
  // Waits for this source's fetches in flight.
  ~ReadaheadSource() override;

  Codec codec() const override { return inner_->codec(); }
  const std::string& path() const override { return inner_->path(); }
  uint64_t size() const override { return inner_->size(); }
  absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const override;
  absl::StatusOr<std::optional<FileRange>> Spliceable(uint64_t offset) const override {
    return inner_->Spliceable(offset);
  }
  absl::Status CheckUnchanged() const override { return inner_->CheckUnchanged(); }
  // Primes this source (fetches its first window, a read at offset 0 goes
  // on with it) unless a stream has started here, or another source of the
  // Readahead was primed this way and no source has been read since (so
  // `ls MOUNT/*` fetches the first window of one shard, not of each).
  void ExpectReadFromStart() const override;
  // The bytes when they lie in one block fetched or being fetched (waits
  // for it); a read of them as ReadAt's (the stream goes on).
  std::optional<HeldBytes> Held(uint64_t offset, size_t n) const override;

 private:
  using Block = std::shared_ptr<const std::string>;  // null: the fetch failed
  // The bytes of block `b` if fetched or being fetched (waits), else null.
  Block Find(uint64_t b) const;
  // Whether block `b` is fetched or being fetched (does not wait).
  bool Started(uint64_t b) const;
  // A read took the shard's last bytes from its last block: that block goes
  // to the cold end of the cache too (drop-behind).
  void DoneWithEnd() const;
  // Notes a read of [offset, end) (`hit`: its first block is fetched or
  // being fetched), before the read waits for any block, and starts the
  // fetches it calls for. When the stream has now
  // started every block to the end of the shard, the window the next shard
  // is primed with (this stream's, as far as the cache holds it beside
  // the blocks of this shard not read yet; at least half of it); else 0.
  uint64_t Track(uint64_t offset, uint64_t end, bool hit) const;
  // Starts fetches of the blocks from ahead_ up to `stop` (not past the
  // end) that are neither cached nor in flight.
  void StartUpTo(uint64_t stop) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Primes this source if no stream has started here: fetches its first
  // `blocks` and takes a read at offset 0 as sequential, going on with a
  // window of `blocks`. False when a stream had started.
  bool Prime(uint64_t blocks) const;
  // Primes the first live source registered after this one.
  void PrimeNext(uint64_t blocks) const;

  const std::unique_ptr<ShardSource> inner_;
  Readahead* const ra_;
  const std::shared_ptr<Readahead::Registry> registry_;
  const uint64_t id_;  // in ra_->cache_
  size_t seq_ = 0;     // in registry_->sources
  mutable Mutex mu_;
  // Where a sequential read starts.
  mutable uint64_t next_offset_ ABSL_GUARDED_BY(mu_) = ~uint64_t{0};
  mutable uint64_t ahead_ ABSL_GUARDED_BY(mu_) = 0;    // blocks below this are started
  mutable uint64_t reached_ ABSL_GUARDED_BY(mu_) = 0;  // 1 + the last block the reader entered
  // Blocks of the stream below this are demoted in the cache (read past).
  mutable uint64_t behind_ ABSL_GUARDED_BY(mu_) = 0;
  // Blocks whose fetch failed: not started again (the reads go to the
  // wrapped source, which reports the error).
  mutable absl::flat_hash_set<uint64_t> failed_ ABSL_GUARDED_BY(mu_);
  mutable ReadaheadWindow window_ ABSL_GUARDED_BY(mu_);
  mutable bool primed_next_ ABSL_GUARDED_BY(mu_) = false;
  mutable absl::flat_hash_map<uint64_t, std::shared_future<Block>> inflight_ ABSL_GUARDED_BY(mu_);
};

// The bytes a process's walks (PrefetchReader) hold or have in flight, all
// walks together, and the part buffers they reuse (a buffer given back is
// kept, within the budget, for the next part: its pages stay mapped, so a
// walk of gigabytes does not page-fault its way through fresh memory). Each
// walk keeps to its share, the budget divided by the walks open at once,
// or by kMinShares when fewer are (the first walks of an `index` do not
// take it all and starve the rest).
// A walk with no part held or in flight may always take one part of at
// most its first_part beyond the budget, so every walk progresses: the
// bytes held stay within budget + (walks at once) * first_part.
//
// Thread-safety: thread-safe (mu_ is a leaf lock).
class PrefetchBudget {
 public:
  // The process's walks share one: kProcessBytes.
  static constexpr size_t kProcessBytes = size_t{64} << 20;
  static PrefetchBudget& Process();

  explicit PrefetchBudget(size_t budget_bytes) : budget_(budget_bytes) {}
  ~PrefetchBudget();
  PrefetchBudget(const PrefetchBudget&) = delete;
  PrefetchBudget& operator=(const PrefetchBudget&) = delete;

  // A page-aligned buffer of `len` bytes charged to the budget, or null when
  // the budget cannot take it and `always` is false (or no memory).
  char* Take(size_t len, bool always);
  // Gives back a buffer Take returned for `len` bytes.
  void Give(char* data, size_t len);
  // A walk opens (PrefetchReader's constructor) and closes (destructor).
  void Join();
  void Leave();
  // The bytes one walk may hold: the budget divided by the open walks, and
  // by at least kMinShares (the first walks of an `index` start before the
  // others join: a walk alone does not take what they will need).
  static constexpr size_t kMinShares = 4;
  size_t Share() const;

  size_t budget() const { return budget_; }
  // Bytes charged now; the most charged at once.
  size_t held() const;
  size_t peak() const;

 private:
  static size_t Capacity(size_t len);  // what a buffer for `len` bytes is
  const size_t budget_;
  mutable Mutex mu_;
  size_t held_ ABSL_GUARDED_BY(mu_) = 0;
  size_t peak_ ABSL_GUARDED_BY(mu_) = 0;
  size_t spare_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  size_t walks_ ABSL_GUARDED_BY(mu_) = 0;
  // Buffers given back, by capacity; held_ + spare_bytes_ stay within
  // budget_ (spares are freed to make room).
  std::vector<std::pair<size_t, char*>> spares_ ABSL_GUARDED_BY(mu_);
};

// A walk's reads ahead (issue 25): a header walk on remote storage reads a
// shard front to back, and one read at a time waits a round trip per read
// (per 128 KiB on a FUSE network mount that carries no more per request,
// per GET on an object store). A PrefetchReader wraps the stored bytes for
// one such walk and keeps several ranged reads in flight ahead of the
// reader, each on a thread of its own (a pread of a local descriptor, a
// ranged GET of an object: both block), the way mountpoint-s3's and
// gcsfuse's prefetchers do: an object's parts start at `first_part` bytes
// and double, up to `max_part` (and to half the walk's share of the budget,
// so two are in flight), while the reads stay sequential (a file's stay at
// `first_part`: a network file system serves a pread in requests of at
// most 1 MiB one after the other, so more preads at once, not larger ones,
// go faster), and the bytes in flight or
// fetched but not yet read stay within the walk's share of a
// PrefetchBudget shared by the process's walks (PrefetchBudget::Process()
// unless Options say another), at most `max_parts` parts per walk.
//
// ReadAt serves the bytes of the parts; a part the reader has passed is
// dropped (its buffer goes back to the budget). A read before the parts
// held (a walk resynchronising backwards) goes to the stored bytes directly
// and leaves the stream alone; a read past the parts scheduled restarts the
// stream there (from its page boundary) at `first_part`. The bytes
// are exactly the stored bytes': a part that failed fails the reads that
// need its bytes with the stored bytes' own error (which names the file or
// URL and the byte offset), and reads before it are served. Reads stop at
// size() (no range past it is requested); a file that turns out shorter
// gives short reads, as the stored bytes would.
//
// Thread-safety: thread-safe (meant for one sequential reader; concurrent
// readers serialise on the stream's bookkeeping, not on the reads). The
// destructor waits for the reads in flight. `in` and the budget must
// outlive it.
class PrefetchReader final : public ObjectReader {
 public:
  struct Options {
    size_t first_part = size_t{1} << 20;
    size_t max_part = size_t{8} << 20;
    // Bytes in flight or held, shared with other walks; null: the
    // process's (64 MiB: 8 parts of 8 MiB in flight, however many walks).
    PrefetchBudget* budget = nullptr;
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
  // The most bytes this walk had in flight or held at once.
  size_t peak_bytes() const;

 private:
  // A part's bytes, in a page-aligned buffer of the budget's: a direct read
  // (FUSE direct_io, O_DIRECT) of whole pages into it then takes
  // len / max_read requests, not one more for a buffer straddling an extra
  // page. Given back to the budget when the last reference goes.
  struct Bytes {
    Bytes(PrefetchBudget* budget, char* data, size_t len) : budget(budget), data(data), len(len) {}
    ~Bytes() { budget->Give(data, len); }
    Bytes(const Bytes&) = delete;
    Bytes& operator=(const Bytes&) = delete;
    PrefetchBudget* const budget;
    char* const data;
    const size_t len;  // charged
    size_t size = 0;   // read
  };
  using PartBytes = std::shared_ptr<Bytes>;
  struct Part {
    uint64_t offset;
    size_t len;
    std::shared_future<absl::StatusOr<PartBytes>> bytes;
  };
  // Starts parts at next_ while the budget allows.
  void Fill() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<PartBytes> ReadPart(const PartBytes& bytes, uint64_t offset) const;

  const StoredBytes in_;
  const std::string path_;
  const uint64_t size_;
  const Options options_;
  PrefetchBudget* const budget_;
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
