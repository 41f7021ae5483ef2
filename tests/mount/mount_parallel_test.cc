// Parallel readers: 8 threads read random files in full and compare them
// with the expectation while another thread walks the tree with readdir.
// The daemon runs its multi-threaded loop; a small record cache forces
// concurrent parses and evictions.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "expectations.h"
#include "generated_dataset.h"
#include "gtest/gtest.h"
#include "mount_harness.h"
#include "tfrecordfs/base/hash.h"

namespace tfrecordfs::mount_test {
namespace {

constexpr int kReaders = 8;
constexpr int kFilesPerReader = 400;

// A digest to compare whole files by.
uint64_t Digest(const std::string& s) { return Fnv1a64(s); }

void RunParallelReaders(const std::vector<std::string>& mount_args) {
  TempDir tmp;
  const std::string src = tmp.Subdir("src");
  const GenDataset ds = WriteDataset(src, 4242);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  const ExpectedTree expected = ds.Expected();
  struct Want {
    std::string rel;
    uint64_t size, digest;
  };
  std::vector<Want> files;
  size_t dirs = 0;
  for (const auto& [rel, node] : expected) {
    if (node.is_dir) {
      ++dirs;
    } else {
      files.push_back({rel, node.content.size(), Digest(node.content)});
    }
  }

  Mount m;
  const absl::Status err = m.Start({src}, mount_args);
  ASSERT_TRUE(err.ok()) << err;

  std::mutex mu;
  std::vector<std::string> errors;  // guarded by mu
  auto fail = [&](std::string msg) {
    std::lock_guard<std::mutex> lock(mu);
    errors.push_back(std::move(msg));
  };
  std::atomic<int> readers_left{kReaders};
  std::atomic<uint64_t> files_read{0}, walks{0};

  std::vector<std::thread> threads;
  for (int t = 0; t < kReaders; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      for (int k = 0; k < kFilesPerReader; ++k) {
        const Want& w = files[std::uniform_int_distribution<size_t>(0, files.size() - 1)(rng)];
        WalkedNode node;
        const std::string path = m.path(w.rel);
        int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
          fail(w.rel + ": open: " + std::strerror(errno));
          continue;
        }
        std::string content;
        char buf[65536];
        for (;;) {
          ssize_t n = ::read(fd, buf, sizeof buf);
          if (n < 0 && errno == EINTR) continue;
          if (n < 0) {
            fail(w.rel + ": read: " + std::strerror(errno));
            break;
          }
          if (n == 0) break;
          content.append(buf, static_cast<size_t>(n));
        }
        ::close(fd);
        if (content.size() != w.size || Digest(content) != w.digest) {
          fail(w.rel + ": " + std::to_string(content.size()) + " bytes, digest differs");
        }
        files_read.fetch_add(1);
      }
      readers_left.fetch_sub(1);
    });
  }
  // The walker: full readdir + lstat walks (no reads) until the readers are
  // done, and at least one.
  threads.emplace_back([&] {
    do {
      DIR* probe = ::opendir(m.mountpoint().c_str());
      if (probe == nullptr) {
        fail(std::string("opendir root: ") + std::strerror(errno));
        return;
      }
      ::closedir(probe);
      std::map<std::string, WalkedNode> walked;
      {
        // WalkTree reports through gtest, which is thread-safe on Linux.
        walked = WalkTree(m.mountpoint(), /*read_files=*/false);
      }
      if (!RemoveEmptyStaging(&walked)) fail("no empty staging/ folder at the root");
      size_t got_files = 0, got_dirs = 0, bad = 0;
      for (const auto& [rel, node] : walked) {
        if (node.error != 0) ++bad;
        if (S_ISDIR(node.mode)) ++got_dirs;
        if (S_ISREG(node.mode)) ++got_files;
      }
      if (bad != 0 || got_files != files.size() || got_dirs != dirs) {
        fail("walk " + std::to_string(walks.load()) + ": " + std::to_string(got_files) +
             " files, " + std::to_string(got_dirs) + " dirs, " + std::to_string(bad) + " errors");
      }
      walks.fetch_add(1);
    } while (readers_left.load() > 0);
  });
  for (auto& t : threads) t.join();

  EXPECT_EQ(files_read.load(), uint64_t{kReaders} * kFilesPerReader);
  EXPECT_GE(walks.load(), 1u);
  EXPECT_TRUE(errors.empty()) << errors.size() << " errors; first: " << errors.front();

  std::string stop_err;
  EXPECT_EQ(m.Stop(&stop_err), 0) << stop_err << "\nstderr:\n" << m.Stderr();
}

TEST(ParallelReadersTest, EightReadersAndAWalkerSeeNoErrors) {
  TFRFS_SKIP_WITHOUT_FUSE();
  // A tiny cache: every thread keeps parsing and evicting records.
  RunParallelReaders({"-o", "cache_records=3"});
}

TEST(ParallelReadersTest, SameWithoutSpliceAndWithoutKernelCaching) {
  TFRFS_SKIP_WITHOUT_FUSE();
  RunParallelReaders({"-o", "nosplice,timeout=0,cache_records=16"});
}

}  // namespace
}  // namespace tfrecordfs::mount_test
