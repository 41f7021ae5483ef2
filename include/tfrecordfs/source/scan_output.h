// The second stage of a compressed scan (ScanCompressed,
// source/checkpoints.h): what is done with the bytes the scan inflates.
//
// The scan's own thread only inflates: it fills chunks of output (Take,
// Push) and notes in each the checkpoints it laid there. ScanOutput hands
// every chunk, in order, to the scan's sink, reports progress, and makes the
// windows of the checkpoints: the kWindowSize bytes of output before each
// checkpoint, made sparse once the kWindowSize bytes after it are known
// (source/window_use.h), and kept sparse only when inflating from the
// checkpoint with the sparse window gives exactly those bytes after it
// (otherwise the whole window is stored); then compressed for the index
// (raw deflate by ISA-L at its level 1, which on these mostly-zero windows
// is about 2.5x as fast as zlib's level 1 and a few percent smaller). With a thread
// (Options::threaded), all of that runs beside the inflate, which on two cores hides it behind the
// inflate; without, Push does it before it returns. Either way the results are the same bytes:
// nothing here depends on timing.
//
// The scan decides where checkpoints go by the size of the windows stored so
// far (the index budget); it asks StoredPrefix for the windows of
// checkpoints far enough behind the output it pushed that their windows are
// certain to be made (KnownWindows), which waits only when the stage has
// fallen that far behind.
//
// Thread-safety: Take, Push, KnownWindows, StoredPrefix, failed and Finish
// are called by one thread (the scan's); the sink and progress callbacks
// are called by one thread at a time, in order: the stage's own thread
// with Options::threaded, else the scan's (inside Push and Finish).
#ifndef TFRECORDFS_SOURCE_SCAN_OUTPUT_H_
#define TFRECORDFS_SOURCE_SCAN_OUTPUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/source/checkpoints.h"
#include "tfrecordfs/source/inflater.h"

struct isal_zstream;  // ISA-L's (isa-l/igzip_lib.h)

namespace tfrecordfs::source {

// Output bytes per chunk handed from the scan to its output stage.
inline constexpr size_t kScanChunk = 512 << 10;
// Chunks in flight between the two (the stage's lag at most).
inline constexpr size_t kScanChunksInFlight = 6;
// How far behind the output pushed a checkpoint's window counts as known
// for the budget (KnownWindows): 2 chunks, so the scan waits only when the
// stage lags by more.
inline constexpr uint64_t kKnownWindowLag = 2 * kScanChunk;

// A stretch of the stream's output and the checkpoints laid in it.
struct ScanChunk {
  std::string bytes;  // kScanChunk bytes of room; the first `size` are output
  size_t size = 0;
  uint64_t in_end = 0;  // compressed bytes consumed once its last byte was out
  // A checkpoint (not a stream start) whose output starts at bytes[at].
  struct Laid {
    size_t at = 0;
    Checkpoint cp;
  };
  std::vector<Laid> laid;
};

// Where a window went in the windows blob.
struct StoredWindowRef {
  uint64_t offset = 0;
  uint32_t length = 0;
  uint32_t crc = 0;  // crc32c of the stored bytes
};

class ScanOutput {
 public:
  struct Options {
    // Work on a thread of its own (see the top of this file).
    bool threaded = true;
    // Check sparse windows with ISA-L (else zlib) (source/inflater.h).
    bool isal = true;
  };
  // `fd` is read (the deflate data after each checkpoint, to make and check
  // its sparse window); it, `path`, `sink` and `progress` must outlive
  // this. `progress` (may be null) is called with the compressed bytes
  // consumed, every MiB or so of them.
  ScanOutput(StoredBytes fd, absl::string_view path, uint64_t file_size, Codec codec,
             const StreamSink& sink, const std::function<void(uint64_t)>& progress,
             Options options);
  // Stops the stage (what is queued is dropped) and waits for its thread.
  ~ScanOutput();
  ScanOutput(const ScanOutput&) = delete;
  ScanOutput& operator=(const ScanOutput&) = delete;

  // An empty chunk to fill; waits until one is free.
  ScanChunk* Take();
  // Hands `chunk` (from Take) over: its bytes follow the previous chunk's.
  void Push(ScanChunk* chunk);
  // Whether the stage failed (the sink's error or an I/O error): the scan
  // stops, and Finish says why.
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // The windows stored for the first `n` checkpoints with windows, in
  // bytes, waiting for them; n must not exceed KnownWindows. (Failed: 0.)
  uint64_t StoredPrefix(size_t n);
  // How many of the checkpoints with windows laid so far, whose output
  // starts at `outs` (in order), are certain to have their windows made
  // from the output pushed so far, at kKnownWindowLag behind it.
  size_t KnownWindows(const std::vector<uint64_t>& outs) const;
  // The end of the stream: the windows still waiting for output after
  // them are made from what there is, and the thread is done. The first
  // error of the stage, if any.
  absl::Status Finish();
  // After Finish: every window, in the order of their checkpoints, and the
  // blob holding them.
  std::vector<StoredWindowRef>& windows() { return refs_; }
  std::string& blob() { return blob_; }

 private:
  struct Pending;
  void Run();
  // One chunk: to the sink, progress, windows.
  absl::Status Process(const ScanChunk& chunk);
  // Bytes of output after the pending windows' checkpoints.
  absl::Status Feed(absl::string_view bytes);
  absl::Status Store(Pending& p);
  void Fail(absl::Status s);

  const StoredBytes fd_;
  const absl::string_view path_;
  const StreamSink& sink_;
  const std::function<void(uint64_t)>& progress_;
  const Options options_;
  // The stage's state (its thread's, or the scan's without one).
  std::unique_ptr<Inflater> check_;
  std::deque<Pending> pending_;
  std::string history_;  // the last kWindowSize bytes of output (fewer at first)
  uint64_t out_ = 0;     // output processed
  uint64_t last_progress_ = 0;
  std::unique_ptr<isal_zstream> deflate_;
  std::string deflate_level_buf_;
  std::string deflated_;
  std::vector<StoredWindowRef> refs_;
  std::string blob_;
  absl::Status status_;  // the first error (the stage's thread, then Finish)
  // The scan's side.
  uint64_t pushed_ = 0;  // output handed over
  std::vector<std::unique_ptr<ScanChunk>> chunks_;
  bool finished_ = false;

  std::atomic<bool> failed_{false};
  Mutex mu_;
  CondVar work_cv_;  // for the stage: a chunk queued, the end, stop
  CondVar done_cv_;  // for the scan: a chunk freed, a window stored, a failure
  std::deque<ScanChunk*> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<ScanChunk*> free_ ABSL_GUARDED_BY(mu_);
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Bytes of the first k windows stored, k = 0..stored.
  std::vector<uint64_t> prefix_ ABSL_GUARDED_BY(mu_) = {0};
  std::thread thread_;
};

}  // namespace tfrecordfs::source

#endif  // TFRECORDFS_SOURCE_SCAN_OUTPUT_H_
