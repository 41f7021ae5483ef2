// Stress on a real mount, and unmounting under load.
//
// StressTest: 8 threads (TFRECORDFS_STRESS_THREADS) do random open / pread /
// readdir / stat / lookups of bogus names on a generated dataset for 20 s
// (TFRECORDFS_STRESS_SECONDS) while a child process runs `ls -lR` and
// `cp -r` of the mount in a loop. Every answer is checked against the
// dataset's expected tree: zero errors on good records. The daemon's VmRSS at
// the end must stay within a small factor of its value after a warm-up walk
// (memory flat), and the daemon must exit 0 on unmount (under ASan that
// includes LeakSanitizer finding no leaks).
//
// UnmountTest: lazy unmount (fusermount3 -u -z) while a file and a directory
// are open and while reader threads are in the middle of reads; plain
// fusermount3 -u of a busy mount; SIGTERM of the daemon under readers. None
// may hang (every wait is bounded) or crash (exit status checked).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "expectations.h"
#include "generated_dataset.h"
#include "gtest/gtest.h"
#include "mount_harness.h"

extern char** environ;

namespace tfrecordfs::mount_test {
namespace {

constexpr uint64_t kSeed = 7;

uint64_t EnvOr(const char* name, uint64_t def) {
  const char* e = std::getenv(name);
  uint64_t v;
  return e != nullptr && absl::SimpleAtoi(e, &v) && v > 0 ? v : def;
}

// Collects failures from many threads; reports the first few.
class Errors {
 public:
  void Add(std::string what) {
    std::lock_guard<std::mutex> lock(mu_);
    ++count_;
    if (first_.size() < 20) first_.push_back(std::move(what));
  }
  size_t count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }
  std::string Report() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string s;
    for (const auto& f : first_) absl::StrAppend(&s, "  ", f, "\n");
    return s;
  }

 private:
  mutable std::mutex mu_;
  size_t count_ = 0;
  std::vector<std::string> first_;
};

// The expected tree split for random access.
struct Catalog {
  std::vector<std::string> files;                         // rel paths
  std::vector<std::string> dirs;                          // rel paths ("" = root)
  std::map<std::string, std::set<std::string>> children;  // dir -> names
  const ExpectedTree* tree = nullptr;
};

Catalog MakeCatalog(const ExpectedTree& t) {
  Catalog c;
  c.tree = &t;
  c.dirs.push_back("");
  c.children[""];
  for (const auto& [rel, node] : t) {
    (node.is_dir ? c.dirs : c.files).push_back(rel);
    if (node.is_dir) c.children[rel];
    const size_t slash = rel.rfind('/');
    c.children[slash == std::string::npos ? "" : rel.substr(0, slash)].insert(
        slash == std::string::npos ? rel : rel.substr(slash + 1));
  }
  return c;
}

// One reader thread's loop.
void Hammer(const std::string& mnt, const Catalog& cat, uint64_t seed,
            std::chrono::steady_clock::time_point until, Errors* errors,
            std::atomic<uint64_t>* ops) {
  std::mt19937_64 rng(seed);
  auto below = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  std::vector<char> buf(1 << 17);
  auto path = [&](const std::string& rel) { return rel.empty() ? mnt : mnt + "/" + rel; };
  while (std::chrono::steady_clock::now() < until) {
    ops->fetch_add(1, std::memory_order_relaxed);
    switch (below(5)) {
      case 0:
      case 1: {  // open + pread at a random offset, or all of it
        const std::string& rel = cat.files[below(cat.files.size())];
        const std::string& want = cat.tree->at(rel).content;
        const int fd = ::open(path(rel).c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
          errors->Add(absl::StrCat("open ", rel, ": ", std::strerror(errno)));
          break;
        }
        // Drop the kernel's cached pages so the read reaches the daemon.
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        const size_t off = want.empty() ? 0 : below(want.size() + 1);
        const size_t len = 1 + below(buf.size());
        const ssize_t n = ::pread(fd, buf.data(), len, static_cast<off_t>(off));
        const size_t expect_n = std::min(len, want.size() - off);
        if (n < 0) {
          errors->Add(absl::StrCat("pread ", rel, ": ", std::strerror(errno)));
        } else if (static_cast<size_t>(n) != expect_n ||
                   std::memcmp(buf.data(), want.data() + off, expect_n) != 0) {
          errors->Add(absl::StrCat("pread ", rel, " at ", off, ": wrong bytes (", n, " of ",
                                   expect_n, ")"));
        }
        ::close(fd);
        break;
      }
      case 2: {  // readdir
        const std::string& rel = cat.dirs[below(cat.dirs.size())];
        DIR* d = ::opendir(path(rel).c_str());
        if (d == nullptr) {
          errors->Add(absl::StrCat("opendir ", rel, ": ", std::strerror(errno)));
          break;
        }
        std::set<std::string> got;
        errno = 0;
        while (dirent* e = ::readdir(d)) {
          const std::string n = e->d_name;
          if (n != "." && n != "..") got.insert(n);
        }
        if (errno != 0) errors->Add(absl::StrCat("readdir ", rel, ": ", std::strerror(errno)));
        ::closedir(d);
        got.erase("staging");
        if (got != cat.children.at(rel))
          errors->Add(absl::StrCat("readdir ", rel, ": wrong names"));
        break;
      }
      case 3: {  // stat
        const bool dir = below(3) == 0;
        const std::string& rel =
            dir ? cat.dirs[below(cat.dirs.size())] : cat.files[below(cat.files.size())];
        struct stat st;
        if (::stat(path(rel).c_str(), &st) != 0) {
          errors->Add(absl::StrCat("stat ", rel, ": ", std::strerror(errno)));
        } else if (dir ? !S_ISDIR(st.st_mode)
                       : (!S_ISREG(st.st_mode) ||
                          static_cast<size_t>(st.st_size) != cat.tree->at(rel).content.size())) {
          errors->Add(absl::StrCat("stat ", rel, ": wrong type or size"));
        }
        break;
      }
      case 4: {  // lookups of names that do not exist
        static const char* kBogus[] = {"nope",  "0000000",     "-1",      "99999999999999999999",
                                       "%",     "record.bin~", ".hidden", "%2E%2E",
                                       "a%2Fb", "x.txt"};
        const std::string& rel = cat.dirs[below(cat.dirs.size())];
        std::string name = kBogus[below(sizeof kBogus / sizeof *kBogus)];
        if (cat.children.at(rel).count(name)) break;
        struct stat st;
        if (::stat((path(rel) + "/" + name).c_str(), &st) == 0 || errno != ENOENT) {
          errors->Add(absl::StrCat("stat of bogus ", rel, "/", name, ": ", std::strerror(errno),
                                   " (want ENOENT)"));
        }
        break;
      }
    }
  }
}

// The file's bytes, or "" when it does not exist (yet).
std::string ReadWholeFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

pid_t SpawnShell(const std::string& script) {
  std::vector<std::string> args = {"/bin/sh", "-c", script};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  if (::posix_spawn(&pid, "/bin/sh", nullptr, &attr, argv.data(), environ) != 0) pid = -1;
  posix_spawnattr_destroy(&attr);
  return pid;
}

class StressTest : public GeneratedMountTestBase {
 protected:
  // timeout=0: no kernel caching of names and attributes, so lookups and
  // stats reach the daemon every time.
  StressTest() : GeneratedMountTestBase(kSeed, {"-o", "timeout=0"}) {
#if defined(__SANITIZE_ADDRESS__)
    // ASan holds freed memory in a quarantine (256 MB by default), which
    // would read as growth; keep it small for the daemon SetUp starts.
    const char* asan = std::getenv("ASAN_OPTIONS");
    ::setenv(
        "ASAN_OPTIONS",
        absl::StrCat(asan ? asan : "", asan && *asan ? ":" : "", "quarantine_size_mb=16").c_str(),
        1);
#endif
  }
};

TEST_F(StressTest, ReadersListersAndCopiersSeeNoErrorsAndMemoryStaysFlat) {
  const ExpectedTree expected = ds_.Expected();
  const Catalog cat = MakeCatalog(expected);
  ASSERT_GT(cat.files.size(), 100u);
  const std::string mnt = mount_.mountpoint();

  const uint64_t threads = EnvOr("TFRECORDFS_STRESS_THREADS", 8);
  const uint64_t seconds = EnvOr("TFRECORDFS_STRESS_SECONDS", 20);
  Errors errors;
  std::atomic<uint64_t> ops{0};
  auto hammer = [&](std::chrono::steady_clock::time_point until, uint64_t seed_base) {
    std::vector<std::thread> pool;
    for (uint64_t t = 0; t < threads; ++t) {
      pool.emplace_back(Hammer, mnt, std::cref(cat), seed_base + t, until, &errors, &ops);
    }
    for (auto& t : pool) t.join();
  };

  // Warm-up: one full walk, so caches are as full as they will get, then a
  // short concurrent hammering, so libfuse has started the worker threads a
  // loaded machine makes it start (each with its own stack, buffer and
  // malloc arena) before the baseline is taken.
  auto walked = WalkTree(mnt);
  walked.erase("staging");
  EXPECT_EQ(CompareTrees(expected, walked), 0u);
  hammer(std::chrono::steady_clock::now() + std::chrono::seconds(2), kSeed * 2000);
  const long warm_rss = RssKiB(mount_.pid());
  ASSERT_GT(warm_rss, 0);
  ops = 0;  // the report counts the measured phase; errors count from the start

  // The other process: list and copy in a loop, logging any failure.
  const std::string copy_dir = tmp_.Subdir("copies");
  const std::string child_log = tmp_.path() + "/child.log";
  const std::string script = absl::StrCat(
      "while :; do ls -lR ", ShellQuote(mnt), " >/dev/null 2>>", ShellQuote(child_log),
      " || echo 'ls -lR failed' >>", ShellQuote(child_log), "; rm -rf ",
      ShellQuote(copy_dir + "/c"), "; cp -r ", ShellQuote(mnt + "/" + kShardBig), " ",
      ShellQuote(copy_dir + "/c"), " 2>>", ShellQuote(child_log), " || echo 'cp -r failed' >>",
      ShellQuote(child_log), "; echo round >>", ShellQuote(child_log + ".rounds"), "; done");
  const pid_t child = SpawnShell(script);
  ASSERT_GT(child, 0);

  hammer(std::chrono::steady_clock::now() + std::chrono::seconds(seconds), kSeed * 1000);
  // Let the other process finish at least one list + copy round (slow
  // machines, sanitizer builds), bounded like every wait.
  EXPECT_TRUE(WaitUntil([&] {
    const std::string r = ReadWholeFileOrEmpty(child_log + ".rounds");
    return !r.empty();
  })) << "the lister never finished a round";
  ::kill(-child, SIGTERM);
  int status;
  ::waitpid(child, &status, 0);

  EXPECT_EQ(errors.count(), 0u) << errors.count() << " error(s) in " << ops.load()
                                << " operations, first ones:\n"
                                << errors.Report();
  const std::string child_errors = ReadWholeFileOrEmpty(child_log);
  EXPECT_EQ(child_errors, "") << "ls -lR / cp -r in the other process failed";
  const std::string rounds = ReadWholeFileOrEmpty(child_log + ".rounds");
  std::printf("stress: %llu operations in %llu s on %llu threads; %zu list+copy rounds\n",
              static_cast<unsigned long long>(ops.load()), static_cast<unsigned long long>(seconds),
              static_cast<unsigned long long>(threads),
              static_cast<size_t>(std::count(rounds.begin(), rounds.end(), '\n')));

  // A final copy is exact.
  CommandResult cp = mount_test::Run({"cp", "-r", mnt + "/" + kShardBig, copy_dir + "/final"});
  ASSERT_EQ(cp.exit_code, 0) << cp.err;
  ExpectedTree want_copy;
  for (const auto& [rel, node] : expected) {
    const std::string prefix = std::string(kShardBig) + "/";
    if (rel.rfind(prefix, 0) == 0) want_copy[rel.substr(prefix.size())] = node;
  }
  const auto copied = WalkTree(copy_dir + "/final");
  size_t diffs = 0;
  for (const auto& [rel, node] : want_copy) {
    auto it = copied.find(rel);
    if (it == copied.end() || S_ISDIR(it->second.mode) != node.is_dir ||
        (!node.is_dir && it->second.content != node.content)) {
      ++diffs;
    }
  }
  EXPECT_EQ(diffs, 0u);
  EXPECT_EQ(copied.size(), want_copy.size());

  // Memory flat: after thousands of operations the daemon holds about what
  // it held after one walk (caches are bounded; nothing accumulates).
  const long end_rss = RssKiB(mount_.pid());
  std::printf("stress: daemon VmRSS %ld KiB after warm-up, %ld KiB at the end\n", warm_rss,
              end_rss);
  const long limit = kSanitized ? warm_rss * 2 + 96 * 1024 : warm_rss * 3 / 2 + 32 * 1024;
  EXPECT_LT(end_rss, limit) << "daemon VmRSS grew from " << warm_rss << " KiB to " << end_rss
                            << " KiB";
  EXPECT_EQ(::kill(mount_.pid(), 0), 0);
}

// ---- Unmounting under load ----

// These tests end the daemon themselves (lazy unmount, SIGTERM) and then
// wait for it to exit.
class UnmountTest : public GeneratedMountTestBase {
 protected:
  UnmountTest() : GeneratedMountTestBase(kSeed) {}
  // Nothing to unmount: each test ends the daemon (ExpectCleanExit), and
  // after a failure the Mount's destructor cleans up.
  void TearDown() override {}

  // The largest file of the dataset, and its content.
  std::pair<std::string, std::string> BigFile() {
    std::pair<std::string, std::string> best;
    for (const auto& [rel, node] : ds_.Expected()) {
      if (!node.is_dir && node.content.size() >= best.second.size()) best = {rel, node.content};
    }
    return best;
  }

  void ExpectCleanExit() {
    int status = 0;
    ASSERT_TRUE(mount_.WaitExit(&status))
        << "daemon still running " << kWaitLimit.count() << " s after its mount went away";
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << (WIFSIGNALED(status) ? "killed by signal " : "exit status ")
        << (WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status)) << "\nstderr:\n"
        << mount_.Stderr();
    EXPECT_FALSE(IsMounted(mount_.mountpoint()));
  }
};

TEST_F(UnmountTest, LazyUnmountWithOpenFileAndDirectory) {
  const auto [rel, content] = BigFile();
  ASSERT_FALSE(content.empty());
  const int fd = ::open(mount_.path(rel).c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  DIR* dir = ::opendir(mount_.path(kShardBig).c_str());
  ASSERT_NE(dir, nullptr);

  // A plain unmount of a busy mount is refused, and the mount keeps serving.
  CommandResult busy = mount_test::Run({"fusermount3", "-u", mount_.mountpoint()});
  EXPECT_NE(busy.exit_code, 0) << "unmount of a busy mount succeeded";
  EXPECT_TRUE(IsMounted(mount_.mountpoint(), "fuse.tfrecordfs"));
  std::string buf(content.size(), '\0');
  EXPECT_EQ(::pread(fd, buf.data(), buf.size(), 0), static_cast<ssize_t>(content.size()));
  EXPECT_TRUE(buf == content);

  // A lazy unmount detaches at once; open handles keep working.
  CommandResult lazy = mount_test::Run({"fusermount3", "-u", "-z", mount_.mountpoint()});
  ASSERT_EQ(lazy.exit_code, 0) << lazy.err;
  EXPECT_FALSE(IsMounted(mount_.mountpoint()));
  buf.assign(content.size(), '\0');
  EXPECT_EQ(::pread(fd, buf.data(), buf.size(), 0), static_cast<ssize_t>(content.size()));
  EXPECT_TRUE(buf == content);
  errno = 0;
  size_t n = 0;
  while (dirent* e = ::readdir(dir)) n += e->d_name[0] != '.';
  EXPECT_EQ(errno, 0);
  EXPECT_EQ(n, ds_.Shard(kShardBig).records.size());
  EXPECT_EQ(::kill(mount_.pid(), 0), 0) << "daemon exited with handles still open";

  // When the last handle goes, the daemon exits cleanly.
  ::closedir(dir);
  ::close(fd);
  ExpectCleanExit();
}

// Reader threads loop over reads of a large file while the mount goes away
// (a lazy unmount, or SIGTERM to the daemon). Reads either return the right
// bytes or fail (ENOTCONN after the daemon is gone); none hangs, and the
// daemon exits 0.
void ReadersDuringUnmount(Mount* daemon, const std::string& rel, const std::string& content,
                          bool sigterm) {
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0}, bad{0}, failed{0};
  std::atomic<int> running{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 4; ++r) {
    running.fetch_add(1);
    readers.emplace_back([&, r] {
      const int fd = ::open(daemon->path(rel).c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        failed.fetch_add(1);
        running.fetch_sub(1);
        return;
      }
      std::string buf(content.size(), '\0');
      while (!stop.load()) {
        const size_t off = (reads.load() * 4093 + static_cast<size_t>(r) * 7) % content.size();
        const ssize_t n = ::pread(fd, buf.data(), content.size() - off, static_cast<off_t>(off));
        if (n < 0) {
          failed.fetch_add(1);
          if (errno == ENOTCONN || errno == ENODEV) break;
          continue;
        }
        if (static_cast<size_t>(n) != content.size() - off ||
            std::memcmp(buf.data(), content.data() + off, static_cast<size_t>(n)) != 0) {
          bad.fetch_add(1);
        }
        reads.fetch_add(1);
      }
      ::close(fd);
      running.fetch_sub(1);
    });
  }
  EXPECT_TRUE(WaitUntil([&] { return reads.load() >= 50; })) << "readers made no progress";
  if (sigterm) {
    EXPECT_EQ(::kill(daemon->pid(), SIGTERM), 0);
  } else {
    CommandResult lazy = mount_test::Run({"fusermount3", "-u", "-z", daemon->mountpoint()});
    EXPECT_EQ(lazy.exit_code, 0) << lazy.err;
    EXPECT_FALSE(IsMounted(daemon->mountpoint()));
    const uint64_t before = reads.load();
    EXPECT_TRUE(WaitUntil([&] { return reads.load() >= before + 50; }))
        << "reads through open handles stopped after a lazy unmount";
  }
  stop.store(true);
  // Bounded: a reader stuck in the kernel would show here, not hang the test
  // (the Mount destructor's SIGTERM, then SIGKILL, aborts the connection and frees it).
  const bool finished = WaitUntil([&] { return running.load() == 0; });
  EXPECT_TRUE(finished) << running.load() << " reader(s) still inside read()";
  if (!finished) {
    for (auto& th : readers) th.detach();
    return;
  }
  for (auto& th : readers) th.join();
  EXPECT_EQ(bad.load(), 0u) << "wrong bytes read";
}

TEST_F(UnmountTest, LazyUnmountWhileReadersAreMidRead) {
  const auto [rel, content] = BigFile();
  ASSERT_GE(content.size(), 4096u);
  ReadersDuringUnmount(&mount_, rel, content, /*sigterm=*/false);
  ExpectCleanExit();
}

TEST_F(UnmountTest, SigtermWhileReadersAreMidRead) {
  const auto [rel, content] = BigFile();
  ASSERT_GE(content.size(), 4096u);
  ReadersDuringUnmount(&mount_, rel, content, /*sigterm=*/true);
  ExpectCleanExit();
}

}  // namespace
}  // namespace tfrecordfs::mount_test
