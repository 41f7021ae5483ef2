#include "tfrecordfs/vfs/record_cache.h"

#include <string>
#include <vector>

namespace tfrecordfs::vfs {

namespace {

// Heap bytes of a string: none while it fits in the object itself (the
// small-string buffer, already counted in sizeof(naming::Entry)).
size_t HeapBytes(const std::string& s) {
  static const size_t kInline = std::string().capacity();
  return s.capacity() > kInline ? s.capacity() + 1 : 0;
}

}  // namespace

size_t ParsedRecord::MemoryBytes() const {
  size_t n = sizeof(*this) + layout.entries.capacity() * sizeof(naming::Entry);
  for (const auto& e : layout.entries) n += HeapBytes(e.name) + HeapBytes(e.content);
  return n;
}

std::shared_ptr<const ParsedRecord> RecordCache::Get(uint64_t key) {
  MutexLock lock(&mu_);
  const auto* hit = lru_.Get(key);
  return hit != nullptr ? *hit : nullptr;
}

void RecordCache::Put(uint64_t key, std::shared_ptr<const ParsedRecord> value) {
  const size_t bytes = value ? value->MemoryBytes() : 0;
  std::vector<std::shared_ptr<const ParsedRecord>> dropped;  // released after the lock
  MutexLock lock(&mu_);
  dropped = lru_.Put(key, std::move(value), bytes);
}

void RecordCache::Clear() {
  std::vector<std::shared_ptr<const ParsedRecord>> dropped;  // released after the lock
  MutexLock lock(&mu_);
  while (auto oldest = lru_.PopOldest()) dropped.push_back(std::move(oldest->second));
}

size_t RecordCache::size() const {
  MutexLock lock(&mu_);
  return lru_.size();
}

size_t RecordCache::bytes() const {
  MutexLock lock(&mu_);
  return lru_.bytes();
}

}  // namespace tfrecordfs::vfs
