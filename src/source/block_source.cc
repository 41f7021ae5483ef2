#include "tfrecordfs/source/block_source.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tfrecordfs::source {

BlockSource::BlockSource(ShardFile file, uint64_t file_size,
                         std::shared_ptr<const CheckpointTable> table, BlockCache* cache)
    : file_(std::move(file)),
      file_size_(file_size),
      table_(std::move(table)),
      cache_(cache),
      id_(cache->NewSourceId()) {}

absl::StatusOr<size_t> BlockSource::ReadAt(uint64_t offset, char* buf, size_t n) const {
  if (offset >= size()) return size_t{0};
  n = static_cast<size_t>(std::min<uint64_t>(n, size() - offset));
  size_t done = 0;
  while (done < n) {
    const uint64_t pos = offset + done;
    uint64_t start = 0;
    auto block = BlockFor(pos, offset + n, &start);
    if (!block.ok()) return block.status();
    const uint64_t within = pos - start;
    if (within >= (*block)->size()) {
      return absl::DataLossError(absl::StrCat(path(), ": short block at offset ", pos));
    }
    const size_t k = static_cast<size_t>(std::min<uint64_t>(n - done, (*block)->size() - within));
    std::memcpy(buf + done, (*block)->data() + within, k);
    done += k;
  }
  return done;
}

}  // namespace tfrecordfs::source
