#include "tfrecordfs/vfs/record_cache.h"

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
  auto it = map_.find(key);
  if (it == map_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.value;
}

void RecordCache::Put(uint64_t key, std::shared_ptr<const ParsedRecord> value) {
  const size_t bytes = value ? value->MemoryBytes() : 0;
  MutexLock lock(&mu_);
  auto it = map_.find(key);
  if (it != map_.end()) {
    bytes_ -= it->second.bytes;
    it->second.value = std::move(value);
    it->second.bytes = bytes;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
  } else {
    lru_.push_front(key);
    map_.emplace(key, Slot{std::move(value), lru_.begin(), bytes});
  }
  bytes_ += bytes;
  EvictLocked();
}

void RecordCache::EvictLocked() {
  while (map_.size() > 1 && (map_.size() > max_records_ || bytes_ > max_bytes_)) {
    auto it = map_.find(lru_.back());
    bytes_ -= it->second.bytes;
    map_.erase(it);
    lru_.pop_back();
  }
}

size_t RecordCache::size() const {
  MutexLock lock(&mu_);
  return map_.size();
}

size_t RecordCache::bytes() const {
  MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace tfrecordfs::vfs
