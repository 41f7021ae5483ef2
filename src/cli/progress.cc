#include "src/cli/progress.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/fs_util.h"

namespace tfrecordfs::cli {

std::string HumanBytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  // Two calls, not one with a chosen format: absl::StrFormat checks its
  // format at compile time, which clang requires to be a constant.
  if (u == 0) return absl::StrFormat("%.0f %s", b, units[u]);
  return absl::StrFormat("%.1f %s", b, units[u]);
}

std::string HumanCount(double n) {
  if (n >= 1e6) return absl::StrFormat("%.2fM", n / 1e6);
  if (n >= 1e3) return absl::StrFormat("%.1fk", n / 1e3);
  return absl::StrFormat("%.0f", n);
}

uint64_t TotalBytes(const std::vector<std::string>& sources) {
  uint64_t total = 0;
  std::set<std::pair<dev_t, ino_t>> seen;
  std::vector<std::string> todo(sources.begin(), sources.end());
  while (!todo.empty()) {
    const std::string path = std::move(todo.back());
    todo.pop_back();
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) continue;
    if (S_ISREG(st.st_mode)) {
      total += static_cast<uint64_t>(st.st_size);
      continue;
    }
    if (!S_ISDIR(st.st_mode) || !seen.insert({st.st_dev, st.st_ino}).second) continue;
    // An estimate for the progress bar: what cannot be listed is skipped.
    auto d = ListDir::Open(path);
    if (!d.ok()) continue;
    for (absl::string_view n; d->Next(&n);) todo.push_back(JoinPath(path, n));
  }
  return total;
}

bool StderrIsTerminal() { return ::isatty(2) == 1; }

ProgressBar::ProgressBar(uint64_t total_bytes, bool enabled) : total_bytes_(total_bytes) {
  start_ = std::chrono::steady_clock::now();
  if (enabled) thread_ = std::thread([this] { Loop(); });
}

void ProgressBar::Finish() {
  if (!thread_.joinable()) return;
  {
    MutexLock lock(&mu_);
    done_ = true;
  }
  cv_.SignalAll();
  thread_.join();
  Draw();  // the final counts, then the line goes to the summary
  std::fputs("\r\033[K", stderr);
}

void ProgressBar::Loop() {
  MutexLock lock(&mu_);
  while (!done_) {
    if (!cv_.WaitFor(&mu_, std::chrono::milliseconds(100)) && !done_) Draw();
  }
}

void ProgressBar::Draw() {
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const uint64_t bytes = bytes_.load(), records = records_.load();
  const double frac =
      total_bytes_ == 0 ? 0 : std::min(1.0, static_cast<double>(bytes) / total_bytes_);
  constexpr int kWidth = 20;
  std::string bar(kWidth, '.');
  for (int i = 0; i < static_cast<int>(frac * kWidth); ++i) bar[i] = '#';
  std::string eta = "--:--";
  if (frac > 0.001 && secs > 0.2) {
    const int left = static_cast<int>(secs / frac - secs + 0.5);
    eta = absl::StrFormat("%d:%02d", left / 60, left % 60);
  }
  std::fprintf(stderr, "\r\033[K[%s] %llu shards  %s records  %s/%s  %s rec/s  ETA %s", bar.c_str(),
               static_cast<unsigned long long>(shards_.load()),
               HumanCount(static_cast<double>(records)).c_str(),
               HumanBytes(static_cast<double>(bytes)).c_str(),
               HumanBytes(static_cast<double>(total_bytes_)).c_str(),
               HumanCount(secs > 0 ? records / secs : 0).c_str(), eta.c_str());
  std::fflush(stderr);
}

void WalkMeter::Walked(const std::string& path, uint64_t walked) {
  MutexLock lock(&mu_);
  if (bar_ == nullptr) return;
  uint64_t& seen = walked_[path];
  if (walked > seen) {
    bar_->Add(0, 0, walked - seen);
    seen = walked;
  }
}

void WalkMeter::Done(const std::string& path, uint64_t records, uint64_t size) {
  MutexLock lock(&mu_);
  if (bar_ == nullptr) return;
  uint64_t seen = 0;
  if (auto it = walked_.find(path); it != walked_.end()) {
    seen = it->second;
    walked_.erase(it);
  }
  bar_->Add(1, records, size > seen ? size - seen : 0);
}

void WalkMeter::Detach() {
  MutexLock lock(&mu_);
  bar_ = nullptr;
}

}  // namespace tfrecordfs::cli
