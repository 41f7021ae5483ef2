// `tfrecordfs index`: builds and saves the shard indexes a mount would,
// without mounting. It runs the mount's own source scan
// (vfs::Filesystem::Create) with the index store as the index loader, so the
// shards it finds and the names it stores them under are exactly the mount's.
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "commands.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/index/index_store.h"
#include "tfrecordfs/vfs/filesystem.h"

namespace tfrecordfs::cli {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

constexpr char kIndexUsage[] = R"(Usage: tfrecordfs index [options] SOURCE...

Walks the record headers of every shard in the SOURCEs (shard files, or
directories searched recursively, exactly as a mount would) and saves each
shard's index, so that a later mount of the same SOURCEs loads the indexes
instead of walking the shards. Indexes that are still valid are kept; a shard
that only grew is walked from its old end.

Options:
  --index-dir PATH  save the indexes under PATH, laid out like the mount
                    (PATH/<path in the mount>.tfri), for mounts with
                    -o index_dir=PATH, e.g. on storage that many machines
                    share; the per-user cache is then left alone
  --force           walk every shard even when its saved index is valid
  --threads N       shards walked in parallel (default: CPUs, at most 16)
  -q, --quiet       no progress bar and no summary
  -v, --verbose     say for each shard where its index came from
  -h, --help        show this help and exit

Without --index-dir the indexes go to the per-user cache,
${XDG_CACHE_HOME:-~/.cache}/tfrecordfs/index. On a terminal, a progress bar
(shards, records, bytes, rate, ETA) is drawn on stderr; a summary line goes
to stdout. Damaged shards are reported and indexed up to the damage, as a
mount shows them.

Exit status: 0 when every shard's index is saved (or was valid already), 1
when a SOURCE cannot be read or an index cannot be saved, 2 on a usage error.
)";

int Usage(const std::string& message) {
  std::cerr << "tfrecordfs index: " << message
            << "\nTry 'tfrecordfs index --help' for more information.\n";
  return kExitUsage;
}

// Bytes of the regular files under the sources: the denominator of the ETA
// (an estimate: files that are not shards count too).
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
    DIR* d = ::opendir(path.c_str());
    if (d == nullptr) continue;
    while (dirent* e = ::readdir(d)) {
      const absl::string_view n = e->d_name;
      if (n != "." && n != "..") todo.push_back(absl::StrCat(path, "/", n));
    }
    ::closedir(d);
  }
  return total;
}

std::string HumanBytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  return absl::StrFormat(u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
}

std::string HumanCount(double n) {
  if (n >= 1e6) return absl::StrFormat("%.2fM", n / 1e6);
  if (n >= 1e3) return absl::StrFormat("%.1fk", n / 1e3);
  return absl::StrFormat("%.0f", n);
}

// Draws "[####......] 312 shards  312.0k records  1.2 GB/4.0 GB  1.05M rec/s
// ETA 0:03" on stderr, ten times a second, while the work runs.
class ProgressBar {
 public:
  ProgressBar(uint64_t total_bytes, bool enabled) : total_bytes_(total_bytes), enabled_(enabled) {
    start_ = std::chrono::steady_clock::now();
    if (enabled_) thread_ = std::thread([this] { Loop(); });
  }
  ~ProgressBar() { Finish(); }

  void Add(uint64_t records, uint64_t bytes) {
    shards_.fetch_add(1, std::memory_order_relaxed);
    records_.fetch_add(records, std::memory_order_relaxed);
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }

  void Finish() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
    std::fputs("\r\033[K", stderr);  // leave the line to the summary
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return done_; })) Draw();
  }

  void Draw() {
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
    std::fprintf(stderr, "\r\033[K[%s] %llu shards  %s records  %s/%s  %s rec/s  ETA %s",
                 bar.c_str(), static_cast<unsigned long long>(shards_.load()),
                 HumanCount(static_cast<double>(records)).c_str(),
                 HumanBytes(static_cast<double>(bytes)).c_str(),
                 HumanBytes(static_cast<double>(total_bytes_)).c_str(),
                 HumanCount(secs > 0 ? records / secs : 0).c_str(), eta.c_str());
    std::fflush(stderr);
  }

  const uint64_t total_bytes_;
  const bool enabled_;
  std::chrono::steady_clock::time_point start_;
  std::atomic<uint64_t> shards_{0}, records_{0}, bytes_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace

int IndexMain(int argc, char** argv) {
  index::StoreOptions store_options;
  int threads = 0;
  bool quiet = false;
  std::vector<std::string> sources;
  bool options_done = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (options_done || arg == "-" || !absl::StartsWith(arg, "-")) {
      sources.push_back(arg);
      continue;
    }
    if (arg == "--") {
      options_done = true;
    } else if (arg == "-h" || arg == "--help") {
      std::cout << kIndexUsage;
      return kExitOk;
    } else if (arg == "-q" || arg == "--quiet") {
      quiet = true;
    } else if (arg == "-v" || arg == "--verbose") {
      log::SetLevel(log::Level::kDebug);
    } else if (arg == "--force") {
      store_options.force_walk = true;
    } else {
      std::string flag = arg, value;
      if (const size_t eq = arg.find('='); eq != std::string::npos) {
        flag = arg.substr(0, eq);
        value = arg.substr(eq + 1);
      } else if (flag == "--index-dir" || flag == "--threads") {
        if (i + 1 >= argc) return Usage(flag + " needs a value");
        value = argv[++i];
      }
      if (flag == "--index-dir") {
        if (value.empty()) return Usage("--index-dir needs a directory");
        store_options.shared_dir = value;
        store_options.write_shared = true;
      } else if (flag == "--threads") {
        if (!absl::SimpleAtoi(value, &threads) || threads <= 0) {
          return Usage("--threads needs a positive number");
        }
      } else {
        return Usage("unknown option " + arg);
      }
    }
  }
  if (sources.empty()) return Usage("need at least one SOURCE");
  if (store_options.write_shared) {
    store_options.durable = true;  // other machines rely on these files
  } else {
    store_options.cache_dir = index::DefaultCacheDir();
    store_options.durable = false;  // a cache: a torn file is just rebuilt
    if (store_options.cache_dir.empty()) {
      std::cerr << "tfrecordfs index: no cache directory (neither XDG_CACHE_HOME nor HOME is "
                   "set); use --index-dir PATH\n";
      return kExitFailed;
    }
  }

  index::IndexStore store(store_options);
  const auto start = std::chrono::steady_clock::now();
  ProgressBar progress(quiet || !::isatty(2) ? 0 : TotalBytes(sources),
                       !quiet && ::isatty(2));
  std::atomic<bool> save_failed{false};
  std::atomic<uint64_t> compressed_shards{0}, compressed_bytes{0}, compressed_index_bytes{0};
  vfs::Options options;
  options.sources = sources;
  options.index_threads = threads;
  options.cache_records = 1;
  options.load_index = [&](int fd, const std::string& path, const std::string& mount_path,
                           const struct stat& st, source::Codec codec)
      -> absl::StatusOr<std::shared_ptr<const index::ShardIndex>> {
    index::LoadInfo info;
    auto idx = store.Load(fd, path, mount_path, st, codec, &info);
    if (!idx.ok()) return idx;
    progress.Add((*idx)->num_records(), static_cast<uint64_t>(st.st_size));
    if (!info.save_status.ok()) {
      save_failed = true;
      if (store_options.write_shared) {
        log::Error(path, ": cannot save its index: ", info.save_status.message());
      }
    }
    log::Debug(path, ": ", (*idx)->num_records(), " record(s), index ",
               index::IndexSourceName(info.source),
               info.stored_path.empty() ? "" : absl::StrCat(" (", info.stored_path, ")"));
    if (codec != source::Codec::kNone) {
      compressed_shards.fetch_add(1);
      compressed_bytes.fetch_add(static_cast<uint64_t>(st.st_size));
      compressed_index_bytes.fetch_add(info.index_bytes);
    }
    return idx;
  };
  auto fs = vfs::Filesystem::Create(options);
  progress.Finish();
  if (!fs.ok()) {
    log::Error(fs.status().message());
    return kExitFailed;
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const index::StoreStats s = store.stats();
  if (!quiet) {
    std::cout << absl::StrFormat(
        "indexed %d shard(s), %d record(s), %s in %.3f s (%s records/s): %d walked, %d grown, "
        "%d already valid; index files in %s\n",
        s.from_shared + s.from_cache + s.grown + s.walked, s.records,
        HumanBytes(static_cast<double>(s.bytes)), secs,
        HumanCount(secs > 0 ? static_cast<double>(s.records) / secs : 0), s.walked, s.grown,
        s.from_shared + s.from_cache,
        store_options.write_shared ? store_options.shared_dir : store_options.cache_dir);
  }
  if (!quiet && compressed_index_bytes > 0) {
    std::cout << absl::StrFormat(
        "%d compressed shard(s), %s: their new index files take %s (%.2f%% of the compressed "
        "size, %s per GiB)\n",
        compressed_shards.load(), HumanBytes(static_cast<double>(compressed_bytes.load())),
        HumanBytes(static_cast<double>(compressed_index_bytes.load())),
        100.0 * static_cast<double>(compressed_index_bytes.load()) /
            static_cast<double>(compressed_bytes.load()),
        HumanBytes(static_cast<double>(compressed_index_bytes.load()) * (1 << 30) /
                   static_cast<double>(compressed_bytes.load())));
  }
  if (save_failed) {
    log::Error(s.save_failures, " index file(s) could not be saved");
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace tfrecordfs::cli
