#include "tfrecordfs/source/block_cache.h"

#include <utility>
#include <vector>

namespace tfrecordfs::source {

BlockCache::BlockCache(size_t max_bytes)
    : max_bytes_(max_bytes), cursors_({.max_count = kMaxIdleCursors, .max_bytes = max_bytes / 2}) {}

std::shared_ptr<const std::string> BlockCache::Get(uint64_t source, uint64_t block) {
  MutexLock lock(&mu_);
  Block* hit = blocks_.Get(Key{source, block});
  return hit != nullptr ? *hit : nullptr;
}

bool BlockCache::Contains(uint64_t source, uint64_t block) const {
  MutexLock lock(&mu_);
  return blocks_.contains(Key{source, block});
}

void BlockCache::Demote(uint64_t source, uint64_t block) {
  MutexLock lock(&mu_);
  blocks_.Demote(Key{source, block});
}

void BlockCache::TrimLocked(std::vector<Block>* blocks,
                            std::vector<std::unique_ptr<Inflater>>* cursors) {
  while (blocks_.bytes() + cursors_.bytes() > max_bytes_ && blocks_.size() > 1) {
    blocks->push_back(std::move(blocks_.PopOldest()->second));
  }
  while (blocks_.bytes() + cursors_.bytes() > max_bytes_ && cursors_.size() > 1) {
    cursors->push_back(std::move(cursors_.PopOldest()->second));
  }
}

void BlockCache::Put(uint64_t source, uint64_t block, std::shared_ptr<const std::string> bytes) {
  // Destroyed after the lock is released.
  std::vector<Block> dropped_blocks;
  std::vector<std::unique_ptr<Inflater>> dropped_cursors;
  MutexLock lock(&mu_);
  const Key key{source, block};
  if (blocks_.contains(key)) return;
  const size_t size = bytes->size();
  dropped_blocks = blocks_.Put(key, std::move(bytes), size);
  TrimLocked(&dropped_blocks, &dropped_cursors);
}

void BlockCache::MakeRoom(size_t bytes) {
  std::vector<Block> dropped;  // destroyed after the lock is released
  MutexLock lock(&mu_);
  while (blocks_.bytes() + cursors_.bytes() + bytes > max_bytes_ && blocks_.size() > 1) {
    dropped.push_back(std::move(blocks_.PopOldest()->second));
  }
}

std::unique_ptr<Inflater> BlockCache::TakeCursor(uint64_t source) {
  MutexLock lock(&mu_);
  std::optional<std::unique_ptr<Inflater>> cursor = cursors_.Take(source);
  return cursor ? std::move(*cursor) : nullptr;
}

void BlockCache::PutCursor(uint64_t source, std::unique_ptr<Inflater> cursor) {
  std::vector<Block> dropped_blocks;
  std::vector<std::unique_ptr<Inflater>> dropped_cursors;
  MutexLock lock(&mu_);
  const size_t size = cursor->MemoryBytes();
  dropped_cursors = cursors_.Put(source, std::move(cursor), size);
  TrimLocked(&dropped_blocks, &dropped_cursors);
}

void BlockCache::DropCursor(uint64_t source) {
  std::optional<std::unique_ptr<Inflater>> dropped;
  MutexLock lock(&mu_);
  dropped = cursors_.Take(source);
}

size_t BlockCache::bytes() const {
  MutexLock lock(&mu_);
  return blocks_.bytes();
}

size_t BlockCache::cursor_bytes() const {
  MutexLock lock(&mu_);
  return cursors_.bytes();
}

size_t BlockCache::idle_cursors() const {
  MutexLock lock(&mu_);
  return cursors_.size();
}

}  // namespace tfrecordfs::source
