// ScanSnappy (source/snappy_source.h): blocks of changing sizes, many
// blocks read ahead by any number of workers and handed over in order,
// damage and a sink's error ending the scan. Run under TSan too (the
// workers share the slot window).
#include <snappy.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing/bytes.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/source/block_cache.h"
#include "tfrecordfs/source/snappy_source.h"

namespace tfrecordfs::source {
namespace {

using test::RandomBytes;
using test::TextLike;

// The blocks (by their compressed offsets `at` and first uncompressed bytes
// `out`) that start a checkpoint group (snappy_source.h): the first, and
// each one after a group of kSnappyGroupBytes compressed or uncompressed.
std::vector<size_t> GroupStarts(const std::vector<uint64_t>& at, const std::vector<uint64_t>& out) {
  std::vector<size_t> starts;
  for (size_t b = 0; b < at.size(); ++b) {
    if (starts.empty() || out[b] - out[starts.back()] >= kSnappyGroupBytes ||
        at[b] - at[starts.back()] >= kSnappyGroupBytes) {
      starts.push_back(b);
    }
  }
  return starts;
}

// ScanSnappy reads every block into buffers it reuses: blocks that grow,
// shrink and grow again still come out whole, each at its checkpoint, and
// damage after them still ends the stream where it starts.
TEST(ScanSnappy, BlocksOfChangingSizesThenStrayBytes) {
  std::string file, plain;
  std::vector<Checkpoint> want;
  uint64_t seed = 1;
  for (size_t n : {size_t{1000}, size_t{300000}, size_t{7}, size_t{200000}, size_t{0}}) {
    const std::string block = seed % 2 ? TextLike(n, seed) : RandomBytes(n, seed);
    ++seed;
    std::string compressed;
    snappy::Compress(block.data(), block.size(), &compressed);
    Checkpoint cp;
    cp.in = file.size();
    cp.out = plain.size();
    want.push_back(cp);
    char prefix[4];
    for (int i = 0; i < 4; ++i) prefix[i] = static_cast<char>(compressed.size() >> (24 - 8 * i));
    file.append(prefix, 4).append(compressed);
    plain += block;
  }
  const uint64_t stray_at = file.size();
  file += "xyz";
  UniqueFd fd(memfd_create("snappy", MFD_CLOEXEC));
  ASSERT_TRUE(WriteFull(fd.get(), file.data(), file.size(), "snappy").ok());

  std::string seen;
  auto scan = ScanSnappy(fd.get(), "snappy", file.size(), [&](absl::string_view bytes) {
    seen.append(bytes.data(), bytes.size());
    return absl::OkStatus();
  });
  ASSERT_TRUE(scan.ok()) << scan.status();
  EXPECT_TRUE(seen == plain) << seen.size() << " bytes, not " << plain.size();
  EXPECT_EQ(scan->table.data_size, plain.size());
  std::vector<uint64_t> at, out;
  for (const Checkpoint& cp : want) {
    at.push_back(cp.in);
    out.push_back(cp.out);
  }
  // Blocks 0 and 2 (after block 1's 300000 bytes) start groups.
  const std::vector<size_t> starts = GroupStarts(at, out);
  ASSERT_EQ(starts, (std::vector<size_t>{0, 2}));
  ASSERT_EQ(scan->table.points.size(), starts.size());
  for (size_t i = 0; i < starts.size(); ++i) {
    EXPECT_EQ(scan->table.points[i].in, want[starts[i]].in) << i;
    EXPECT_EQ(scan->table.points[i].out, want[starts[i]].out) << i;
    EXPECT_TRUE(scan->table.points[i].stream_start) << i;
  }
  ASSERT_TRUE(scan->problem.has_value());
  EXPECT_EQ(scan->problem->compressed_offset, stray_at);
  EXPECT_EQ(scan->problem->offset, plain.size());
}

// The workers read and decompress blocks ahead, out of order; the sink
// still gets every block in order, a damaged block in the middle (its
// length fine, its body not Snappy) ends the stream at that block with
// nothing after it fed, and a sink's error stops the scan: for any number
// of threads, with more blocks than the workers' window.
TEST(ScanSnappy, ManyBlocksInOrderWithAnyThreadsAndDamageOrASinkErrorStops) {
  std::string file, plain;
  std::vector<uint64_t> block_at, block_out;
  for (uint64_t b = 0; b < 60; ++b) {
    const std::string block = b % 2 ? TextLike(5000 + 997 * b, b) : RandomBytes(3000 + 31 * b, b);
    std::string compressed;
    snappy::Compress(block.data(), block.size(), &compressed);
    block_at.push_back(file.size());
    block_out.push_back(plain.size());
    char prefix[4];
    for (int i = 0; i < 4; ++i) prefix[i] = static_cast<char>(compressed.size() >> (24 - 8 * i));
    file.append(prefix, 4).append(compressed);
    plain += block;
  }
  std::string damaged = file;
  // Block 37's body: its varint header kept, the rest garbage.
  for (uint64_t i = block_at[37] + 4 + 3; i < block_at[38]; ++i) damaged[i] = '\xff';
  for (int threads : {1, 2, 3, 8}) {
    for (const std::string* bytes : {&file, &damaged}) {
      UniqueFd fd(memfd_create("snappy", MFD_CLOEXEC));
      ASSERT_TRUE(WriteFull(fd.get(), bytes->data(), bytes->size(), "snappy").ok());
      std::string seen;
      auto scan = ScanSnappy(
          fd.get(), "snappy", bytes->size(),
          [&](absl::string_view b) {
            seen.append(b.data(), b.size());
            return absl::OkStatus();
          },
          nullptr, threads);
      ASSERT_TRUE(scan.ok()) << scan.status();
      const size_t blocks = bytes == &file ? 60 : 37;
      EXPECT_TRUE(seen == plain.substr(0, blocks == 60 ? plain.size() : block_out[37]))
          << threads << " threads: " << seen.size() << " bytes";
      const std::vector<size_t> starts =
          GroupStarts(std::vector<uint64_t>(block_at.begin(), block_at.begin() + blocks),
                      std::vector<uint64_t>(block_out.begin(), block_out.begin() + blocks));
      ASSERT_GT(starts.size(), 1u);
      ASSERT_EQ(scan->table.points.size(), starts.size()) << threads;
      for (size_t i = 0; i < starts.size(); ++i) {
        EXPECT_EQ(scan->table.points[i].in, block_at[starts[i]]) << i;
        EXPECT_EQ(scan->table.points[i].out, block_out[starts[i]]) << i;
      }
      if (bytes == &file) {
        EXPECT_FALSE(scan->problem.has_value()) << threads;
      } else {
        ASSERT_TRUE(scan->problem.has_value()) << threads;
        EXPECT_EQ(scan->problem->compressed_offset, block_at[37]);
        EXPECT_EQ(scan->problem->offset, block_out[37]);
      }
    }
    UniqueFd fd(memfd_create("snappy", MFD_CLOEXEC));
    ASSERT_TRUE(WriteFull(fd.get(), file.data(), file.size(), "snappy").ok());
    int calls = 0;
    auto stopped = ScanSnappy(
        fd.get(), "snappy", file.size(),
        [&](absl::string_view) {
          return ++calls == 20 ? absl::CancelledError("enough") : absl::OkStatus();
        },
        nullptr, threads);
    EXPECT_TRUE(absl::IsCancelled(stopped.status())) << stopped.status();
    EXPECT_EQ(calls, 20);
  }
}

// A file of 300,000 empty blocks among small ones (issue 34 item 14:
// TensorFlow reads such a file; one checkpoint per block made its index and
// mount cost ~28 times its size): one checkpoint per kSnappyGroupBytes of
// file, and a SnappySource over that table reads every byte right, from
// any offset, each group decompressed at once.
TEST(SnappySource, TinyAndEmptyBlocksShareCheckpointsAndReadBack) {
  std::string file, plain;
  const std::string empty_block("\0\0\0\1\0", 5);  // length 1, a Snappy block of 0 bytes
  uint64_t seed = 3;
  for (int b = 0; b < 300000; ++b) {
    if (b % 1000 != 7) {
      file += empty_block;
      continue;
    }
    const std::string block = TextLike(1 + seed * 13 % 700, seed);
    ++seed;
    std::string compressed;
    snappy::Compress(block.data(), block.size(), &compressed);
    char prefix[4];
    for (int i = 0; i < 4; ++i) prefix[i] = static_cast<char>(compressed.size() >> (24 - 8 * i));
    file.append(prefix, 4).append(compressed);
    plain += block;
  }
  UniqueFd fd(memfd_create("snappy", MFD_CLOEXEC));
  ASSERT_TRUE(WriteFull(fd.get(), file.data(), file.size(), "snappy").ok());
  auto scan = ScanSnappy(fd.get(), "snappy", file.size(), nullptr);
  ASSERT_TRUE(scan.ok()) << scan.status();
  EXPECT_FALSE(scan->problem.has_value());
  EXPECT_EQ(scan->table.data_size, plain.size());
  EXPECT_LE(scan->table.points.size(), file.size() / kSnappyGroupBytes + 1);
  BlockCache cache(size_t{1} << 20);
  UniqueFd own(::dup(fd.get()));
  SnappySource src(ShardFile(std::move(own), "snappy"), file.size(),
                   std::make_shared<const CheckpointTable>(std::move(scan->table)), &cache);
  std::string back(plain.size(), '\0');
  // Backwards in pieces that straddle groups, then one whole read.
  for (uint64_t end = plain.size(); end > 0;) {
    const uint64_t begin = end > 4099 ? end - 4099 : 0;
    auto n = src.ReadAt(begin, back.data() + begin, end - begin);
    ASSERT_TRUE(n.ok()) << n.status();
    ASSERT_EQ(*n, end - begin);
    end = begin;
  }
  EXPECT_TRUE(back == plain);
  std::string whole(plain.size() + 10, '\0');
  auto n = src.ReadAt(0, whole.data(), whole.size());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, plain.size());
  EXPECT_TRUE(whole.substr(0, plain.size()) == plain);
}

}  // namespace
}  // namespace tfrecordfs::source
