// LruMap: a map that remembers the order its entries were last used in and
// stays within a count and a byte budget by dropping the least recently used.
//
// Each entry carries a size in bytes given by the caller (what the value
// holds on the heap, as the caller counts it). Put() inserts or replaces an
// entry as the most recent and then evicts from the least recent end until
// both budgets hold, but never the entry just put: a single entry larger
// than the byte budget is kept alone (a cache that kept nothing would make
// its caller redo the work on every call). The evicted values are handed
// back, so that a caller holding a lock can destroy them after releasing it.
//
//   LruMap<uint64_t, std::shared_ptr<const std::string>> blocks({.max_bytes = 32 << 20});
//   blocks.Put(7, bytes, bytes->size());
//   if (auto* hit = blocks.Get(7)) Use(**hit);   // and 7 is now the most recent
//
// Get() returns a pointer into the map that stays valid until the entry is
// evicted, taken or erased (any later Put may evict it).
//
// Thread-safety: none; callers synchronise (the caches that use it hold a
// leaf Mutex around every call).
#ifndef TFRECORDFS_BASE_LRU_H_
#define TFRECORDFS_BASE_LRU_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <list>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace tfrecordfs {

template <typename K, typename V>
class LruMap {
 public:
  struct Limits {
    size_t max_count = std::numeric_limits<size_t>::max();
    size_t max_bytes = std::numeric_limits<size_t>::max();
  };

  explicit LruMap(Limits limits = {}) : limits_(limits) {}
  LruMap(const LruMap&) = delete;
  LruMap& operator=(const LruMap&) = delete;

  // The value for `key`, now the most recently used; nullptr when absent.
  V* Get(const K& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return &it->second->value;
  }
  // The value for `key` without touching the order; nullptr when absent.
  const V* Peek(const K& key) const {
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : &it->second->value;
  }
  bool contains(const K& key) const { return map_.contains(key); }
  // Makes `key` the least recently used entry, the next to be evicted (a
  // value its user is done with, kept while there is room). False when
  // absent.
  bool Demote(const K& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return false;
    order_.splice(order_.end(), order_, it->second);
    return true;
  }

  // Removes `key` and returns its value (nullopt when absent).
  std::optional<V> Take(const K& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return std::nullopt;
    auto node = it->second;
    map_.erase(it);
    bytes_ -= node->bytes;
    std::optional<V> out(std::move(node->value));
    order_.erase(node);
    return out;
  }
  bool Erase(const K& key) { return Take(key).has_value(); }

  // Inserts (or replaces) `key` as the most recently used entry, counting
  // `bytes` against the byte budget, then evicts least recently used
  // entries (never this one) until within both budgets. Returns what was
  // evicted, and the replaced value if any.
  std::vector<V> Put(K key, V value, size_t bytes) {
    std::vector<V> dropped;
    if (std::optional<V> old = Take(key)) dropped.push_back(std::move(*old));
    order_.push_front(Entry{key, std::move(value), bytes});
    map_.emplace(std::move(key), order_.begin());
    bytes_ += bytes;
    Trim(1, &dropped);
    return dropped;
  }

  // Evicts least recently used entries until within the budgets, keeping
  // at least the `keep` most recent. Evicted values are appended to *out
  // (destroyed here when out is null).
  void Trim(size_t keep, std::vector<V>* out = nullptr) {
    while (map_.size() > keep && (map_.size() > limits_.max_count || bytes_ > limits_.max_bytes)) {
      std::optional<std::pair<K, V>> victim = PopOldest();
      if (out != nullptr) out->push_back(std::move(victim->second));
    }
  }

  // Removes and returns the least recently used entry (nullopt when empty).
  std::optional<std::pair<K, V>> PopOldest() {
    if (order_.empty()) return std::nullopt;
    auto node = std::prev(order_.end());
    map_.erase(node->key);
    bytes_ -= node->bytes;
    std::optional<std::pair<K, V>> out(std::in_place, std::move(node->key), std::move(node->value));
    order_.erase(node);
    return out;
  }

  size_t size() const { return map_.size(); }
  bool empty() const { return map_.empty(); }
  // The sum of the entries' sizes.
  size_t bytes() const { return bytes_; }
  const Limits& limits() const { return limits_; }
  // New budgets apply from the next Put or Trim.
  void set_limits(Limits limits) { limits_ = limits; }

 private:
  struct Entry {
    K key;
    V value;
    size_t bytes;
  };
  Limits limits_;
  std::list<Entry> order_;  // front = most recently used
  absl::flat_hash_map<K, typename std::list<Entry>::iterator> map_;
  size_t bytes_ = 0;
};

}  // namespace tfrecordfs

#endif  // TFRECORDFS_BASE_LRU_H_
