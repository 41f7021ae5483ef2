// PendingShard: temporary name, then rename; ShardSyncer: their fsyncs on
// a thread of their own (reshape.h). RunCopier (internal.h).
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/reshape/internal.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/reshape/reshape.h"

namespace tfrecordfs::reshape {

std::string TempPathFor(absl::string_view final_path) {
  return JoinPath(Dirname(final_path), absl::StrCat(".", Basename(final_path), ".tmp"));
}

absl::StatusOr<std::vector<std::string>> RemoveStaleTemps(const std::string& dir,
                                                          absl::string_view prefix) {
  std::vector<std::string> removed;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return removed;
    return ErrnoError(errno, dir);
  }
  const std::string head = absl::StrCat(".", prefix, "-");
  std::vector<std::string> candidates;
  while (const struct dirent* e = ::readdir(d)) {
    const absl::string_view name = e->d_name;
    if (!absl::StartsWith(name, head) || !absl::EndsWith(name, ".tmp")) continue;
    // <prefix>-NNNNN-of-NNNNN.tfrecord...: the digits after the prefix.
    absl::string_view rest = name.substr(head.size());
    const size_t of = rest.find("-of-");
    if (of == absl::string_view::npos || of == 0 ||
        !std::all_of(rest.begin(), rest.begin() + of, absl::ascii_isdigit) ||
        rest.find(".tfrecord", of) == absl::string_view::npos) {
      continue;
    }
    candidates.emplace_back(name);
  }
  ::closedir(d);
  for (const std::string& name : candidates) {
    const std::string path = JoinPath(dir, name);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    // Removed while locked: a run starting now cannot take it meanwhile
    // (it creates its own file under the name, after the unlink).
    if (free && ::unlink(path.c_str()) == 0) removed.push_back(path);
    ::close(fd);
  }
  return removed;
}

PendingShard::PendingShard(std::string final_path, std::string temp_path,
                           std::unique_ptr<record::ShardWriter> writer,
                           std::unique_ptr<arrayrecord::FileWriter> ar)
    : final_path_(std::move(final_path)),
      temp_path_(std::move(temp_path)),
      writer_(std::move(writer)),
      ar_(std::move(ar)) {}

absl::StatusOr<std::unique_ptr<PendingShard>> PendingShard::Create(
    std::string final_path, source::Codec codec, const arrayrecord::WriterOptions& array_record) {
  std::string temp = TempPathFor(final_path);
  auto fd = OpenFile(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (!fd.ok()) return fd.status();
  // Held until the writer closes the descriptor: another run's
  // RemoveStaleTemps sees the file in use.
  if (::flock(fd->get(), LOCK_EX | LOCK_NB) != 0) {
    return ErrnoError(errno, absl::StrCat(temp, ": being written by another process"));
  }
  if (codec == source::Codec::kArrayRecord) {
    auto ar = std::make_unique<arrayrecord::FileWriter>(std::move(*fd), temp, array_record);
    return std::unique_ptr<PendingShard>(
        new PendingShard(std::move(final_path), std::move(temp), nullptr, std::move(ar)));
  }
  auto writer = std::make_unique<record::ShardWriter>(std::move(*fd), temp,
                                                      record::WriterOptions{.codec = codec});
  return std::unique_ptr<PendingShard>(
      new PendingShard(std::move(final_path), std::move(temp), std::move(writer), nullptr));
}

PendingShard::~PendingShard() {
  if (committed_) return;
  writer_.reset();  // closes the descriptor (dropping buffered records)
  ar_.reset();
  ::unlink(temp_path_.c_str());
}

absl::Status PendingShard::AppendFramedBytes(absl::string_view framed, uint64_t records) {
  if (ar_) {
    return absl::FailedPreconditionError(
        absl::StrCat(final_path_, ": framed bytes are written into TFRecord output only"));
  }
  return writer_->AppendFramedBytes(framed, records);
}

void PendingShard::StartWriteback(uint64_t min_bytes) {
  const uint64_t written = file_bytes();
  if (finished_ || written < writeback_started_ + std::max<uint64_t>(min_bytes, 1)) return;
  if (!writeback_fd_.valid()) {
    // A descriptor of our own (the writer's is its own): sync_file_range
    // acts on the file's pages, whichever descriptor names it.
    auto fd = OpenFile(temp_path_, O_RDONLY | O_CLOEXEC);
    if (!fd.ok()) return;
    writeback_fd_ = std::move(*fd);
  }
  // SYNC_FILE_RANGE_WRITE: the write-out of the range is queued, not
  // waited for; it promises nothing about durability (neither the data nor
  // the file's metadata: Finish's fsync does). A refusal is ignored: the
  // fsync still writes everything and reports any write error.
  (void)::sync_file_range(writeback_fd_.get(), static_cast<off64_t>(writeback_started_),
                          static_cast<off64_t>(written - writeback_started_),
                          SYNC_FILE_RANGE_WRITE);
  writeback_started_ = written;
}

absl::Status PendingShard::Finish() {
  if (auto s = ar_ ? ar_->Close(/*sync=*/true) : writer_->Close(/*sync=*/true); !s.ok()) return s;
  finished_ = true;
  return absl::OkStatus();
}

absl::Status PendingShard::Commit(bool sync_dir) {
  if (!finished_) return absl::FailedPreconditionError(absl::StrCat(temp_path_, ": not finished"));
  if (auto s = RenameNoReplace(temp_path_, final_path_); !s.ok()) return s;
  committed_ = true;
  return sync_dir ? FsyncDir(Dirname(final_path_)) : absl::OkStatus();
}

// ---- ShardSyncer ----

struct ShardSyncer::State {
  State(bool commit, size_t depth, bool sync_dirs)
      : commit(commit), sync_dirs(sync_dirs), depth(depth == 0 ? 1 : depth) {}
  void Loop();

  const bool commit, sync_dirs;
  const size_t depth;
  mutable Mutex mu;
  CondVar changed;
  std::deque<std::unique_ptr<PendingShard>> queue ABSL_GUARDED_BY(mu);
  size_t in_hand ABSL_GUARDED_BY(mu) = 0;  // queued or being finished
  std::vector<Synced> done ABSL_GUARDED_BY(mu);
  absl::Status error ABSL_GUARDED_BY(mu);
  bool stop ABSL_GUARDED_BY(mu) = false;
  std::thread thread;  // last: starts once the rest is built
};

void ShardSyncer::State::Loop() {
  for (;;) {
    std::unique_ptr<PendingShard> shard;
    {
      MutexLock lock(&mu);
      while (queue.empty() && !stop) changed.Wait(&mu);
      if (stop) return;  // the queue goes with the syncer: temporary files removed
      shard = std::move(queue.front());
      queue.pop_front();
    }
    absl::Status s = shard->Finish();
    if (s.ok() && commit) {
      bool stopping;
      {
        MutexLock lock(&mu);
        stopping = stop;
      }
      // Interrupted meanwhile: no new final name (the file is removed).
      s = stopping ? absl::CancelledError(
                         absl::StrCat("interrupted before renaming to ", shard->final_path()))
                   : shard->Commit(sync_dirs);
    }
    Synced synced{shard->final_path(), s, nullptr};
    if (s.ok()) {
      synced.shard = std::move(shard);
    } else {
      shard.reset();  // removes the temporary file now
    }
    MutexLock lock(&mu);
    if (!s.ok() && error.ok()) error = s;
    done.push_back(std::move(synced));
    --in_hand;
    changed.SignalAll();
  }
}

ShardSyncer::ShardSyncer(bool commit, size_t depth, bool sync_dirs)
    : state_(std::make_unique<State>(commit, depth, sync_dirs)) {
  state_->thread = std::thread([s = state_.get()] { s->Loop(); });
}

ShardSyncer::~ShardSyncer() {
  {
    MutexLock lock(&state_->mu);
    state_->stop = true;
    state_->changed.SignalAll();
  }
  state_->thread.join();
}

void ShardSyncer::Add(std::unique_ptr<PendingShard> shard) {
  State& st = *state_;
  MutexLock lock(&st.mu);
  while (st.in_hand >= st.depth) st.changed.Wait(&st.mu);
  st.queue.push_back(std::move(shard));
  ++st.in_hand;
  st.changed.SignalAll();
}

std::vector<ShardSyncer::Synced> ShardSyncer::Wait() {
  State& st = *state_;
  MutexLock lock(&st.mu);
  while (st.in_hand > 0) st.changed.Wait(&st.mu);
  std::vector<Synced> out = std::move(st.done);
  st.done.clear();
  return out;
}

absl::Status ShardSyncer::error() const {
  MutexLock lock(&state_->mu);
  return state_->error;
}

// ---- RunCopier ----

RunCopier::RunCopier(PendingShard* out) : out_(out), thread_([this] { Loop(); }) {}

RunCopier::~RunCopier() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    changed_.SignalAll();
  }
  thread_.join();
}

absl::Status RunCopier::Push(int fd, uint64_t offset, uint64_t length, uint64_t records) {
  MutexLock lock(&mu_);
  while (queue_.size() >= kQueued && status_.ok()) changed_.Wait(&mu_);
  if (!status_.ok()) return status_;
  queue_.push_back({fd, offset, length, records, {}});
  changed_.SignalAll();
  return absl::OkStatus();
}

absl::Status RunCopier::PushBytes(std::string buffer, uint64_t length, uint64_t records) {
  MutexLock lock(&mu_);
  while (queue_.size() >= kQueued && status_.ok()) changed_.Wait(&mu_);
  if (!status_.ok()) return status_;
  queue_.push_back({-1, 0, length, records, std::move(buffer)});
  changed_.SignalAll();
  return absl::OkStatus();
}

std::string RunCopier::Recycled() {
  MutexLock lock(&mu_);
  if (written_.empty()) return {};
  std::string buffer = std::move(written_.back());
  written_.pop_back();
  return buffer;
}

absl::Status RunCopier::Finish() {
  MutexLock lock(&mu_);
  while (!queue_.empty()) changed_.Wait(&mu_);
  return status_;
}

void RunCopier::Loop() {
  for (;;) {
    Run run;
    {
      MutexLock lock(&mu_);
      while (queue_.empty() && !stop_) changed_.Wait(&mu_);
      if (stop_) return;  // an interrupted copy: what is queued is not copied
      if (!status_.ok()) {
        queue_.clear();
        changed_.SignalAll();
        continue;
      }
      // Moved out, popped once copied: Finish() waits for it.
      run = std::move(queue_.front());
    }
    absl::Status s = run.fd < 0
                         ? out_->AppendFramedBytes(
                               absl::string_view(run.buffer).substr(0, run.length), run.records)
                         : out_->AppendFramedRange(run.fd, run.offset, run.length, run.records);
    // The disk starts on what is written while the next runs are: the
    // file's fsync (ShardSyncer, or a part's last file) waits for little.
    if (s.ok()) out_->StartWriteback(kWritebackEvery);
    MutexLock lock(&mu_);
    if (status_.ok()) status_ = std::move(s);
    if (run.fd < 0 && written_.size() < kQueued + 1) written_.push_back(std::move(run.buffer));
    queue_.pop_front();
    changed_.SignalAll();
  }
}

}  // namespace tfrecordfs::reshape
