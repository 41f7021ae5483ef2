#include "shard.h"

#include <fcntl.h>

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

}  // namespace tfrecordfs::test
