#include "tfrecordfs/vfs/record_cache.h"

namespace tfrecordfs::vfs {

size_t ParsedRecord::MemoryBytes() const {
  size_t n = sizeof(*this) + layout.entries.capacity() * sizeof(naming::Entry);
  for (const auto& e : layout.entries) n += e.name.capacity() + e.content.capacity();
  return n;
}

std::shared_ptr<const ParsedRecord> RecordCache::Get(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.value;
}

void RecordCache::Put(uint64_t key, std::shared_ptr<const ParsedRecord> value) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it != map_.end()) {
    it->second.value = std::move(value);
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return;
  }
  lru_.push_front(key);
  map_.emplace(key, Slot{std::move(value), lru_.begin()});
  while (map_.size() > capacity_) {
    map_.erase(lru_.back());
    lru_.pop_back();
  }
}

size_t RecordCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.size();
}

}  // namespace tfrecordfs::vfs
