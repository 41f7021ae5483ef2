#include "shard.h"

#include <fcntl.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/record/writer.h"

namespace tfrecordfs::test {

void WriteShard(const std::string& path, const std::vector<std::string>& payloads) {
  auto fd = OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_TRUE(fd.ok()) << fd.status();
  record::ShardWriter w(std::move(*fd), path);
  for (const std::string& p : payloads) ASSERT_TRUE(w.Append(p).ok()) << path;
  ASSERT_TRUE(w.Close(/*sync=*/false).ok()) << path;
}

void WriteCompressibleShard(const std::string& path, source::Codec codec, int count, size_t size) {
  auto fd = OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_TRUE(fd.ok()) << fd.status();
  record::ShardWriter w(std::move(*fd), path, {codec, 6});
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < count; ++i) {
    std::string p = absl::StrCat("record ", i, " ");
    while (p.size() < size) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      p += static_cast<char>('a' + x % 16);
    }
    p.resize(size);
    ASSERT_TRUE(w.Append(p).ok()) << path;
  }
  ASSERT_TRUE(w.Close(/*sync=*/false).ok()) << path;
}

}  // namespace tfrecordfs::test
