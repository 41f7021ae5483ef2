// Sources that change under a mount (issue 15, items 4 and 5): a shard is
// immutable by contract, so a breach must never give wrong or short bytes
// silently, nor hang readers. Each test mounts for real.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "mount_harness.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/record/writer.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::mount_test {
namespace {

// `records` Examples with one bytes feature "v" of `size` bytes of one
// letter (shown as "v.txt", a line of letters).
std::string Shard(int records, size_t size) {
  std::string out;
  for (int i = 0; i < records; ++i) {
    const std::string value(size, static_cast<char>('A' + i % 26));
    example::FeatureTable table;
    example::Feature f;
    f.name = "v";
    f.kind = example::Kind::kBytes;
    f.bytes = {value};
    table.features.push_back(f);
    record::AppendFramed(&out, example::EncodeExample(table));
  }
  return out;
}

// Item 4: a plain (non-shard) source file replaced by a FIFO while mounted.
// Reading it fails with EIO at once (no reader blocks in open), and the
// other plain files keep reading.
TEST(ChangedSourcesTest, PlainFileReplacedByAFifoDoesNotBlockReaders) {
  TFRFS_SKIP_WITHOUT_FUSE();
  TempDir tmp;
  const std::string src = tmp.Subdir("src");
  WriteWholeFile(src + "/notes.txt", "hello\n");
  WriteWholeFile(src + "/other.txt", "world\n");
  WriteWholeFile(src + "/data.tfrecord", Shard(3, 10));
  Mount m;
  ASSERT_EQ(m.Start({src}), "");
  ASSERT_EQ(::unlink((src + "/notes.txt").c_str()), 0);
  ASSERT_EQ(::mkfifo((src + "/notes.txt").c_str(), 0644), 0);

  std::atomic<int> result{-1};
  std::thread reader([&] {
    const int fd = ::open(m.path("notes.txt").c_str(), O_RDONLY);
    if (fd < 0) {
      result = errno;
      return;
    }
    char buf[16];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    result = n < 0 ? errno : 0;
    ::close(fd);
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (result.load() == -1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (result.load() == -1) {
    // Unblock the reader so the test can end, then fail.
    const int w = ::open((src + "/notes.txt").c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0) ::close(w);
  }
  reader.join();
  EXPECT_EQ(result.load(), EIO) << "a read of a source swapped for a FIFO must fail, not block";
  EXPECT_EQ(ReadWholeFile(m.path("other.txt")), "world\n");
  // Our own mount is FUSE: a walk of shards in it would read large blocks
  // (issue 12), where one on the local source reads headers.
  EXPECT_TRUE(source::OnRemoteStorage(m.path("other.txt")));
  EXPECT_FALSE(source::OnRemoteStorage(src));
  EXPECT_EQ(ReadWholeFile(m.path("data.tfrecord/0/v.txt")), std::string(10, 'A') + "\n");
  std::string err;
  EXPECT_EQ(m.Stop(&err), 0) << err;
  EXPECT_NE(m.Stderr().find("no longer a regular file"), std::string::npos) << m.Stderr();
}

}  // namespace
}  // namespace tfrecordfs::mount_test
