#include "tfrecordfs/vfs/class_groups.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/hash.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/example/record.h"
#include "tfrecordfs/index/index_file.h"
#include "tfrecordfs/naming/gallery.h"
#include "tfrecordfs/record/reader.h"

namespace tfrecordfs::vfs {

namespace {

constexpr char kMagic[] = "TFRC";
// 2: a whole float value's folder keeps its decimal point ("1.0", as its
// file reads; version 1 wrote "1"), so groupings saved before are rebuilt.
constexpr uint32_t kVersion = 2;
constexpr char kSuffix[] = ".tfrc";
// Records decoded per unit of work: shards of any size spread over threads.
constexpr uint64_t kChunkRecords = 256;

void PutString(std::string* out, absl::string_view s) {
  PutFixed32(out, static_cast<uint32_t>(s.size()));
  out->append(s.data(), s.size());
}

// A cursor over the stored bytes; every read checks the bounds.
class Reader {
 public:
  explicit Reader(absl::string_view bytes) : rest_(bytes) {}
  bool U32(uint32_t* v) {
    if (rest_.size() < 4) return false;
    *v = DecodeFixed32(rest_.data());
    rest_.remove_prefix(4);
    return true;
  }
  bool U64(uint64_t* v) {
    if (rest_.size() < 8) return false;
    *v = DecodeFixed64(rest_.data());
    rest_.remove_prefix(8);
    return true;
  }
  bool String(std::string* s) {
    uint32_t n;
    if (!U32(&n) || rest_.size() < n) return false;
    s->assign(rest_.data(), n);
    rest_.remove_prefix(n);
    return true;
  }
  size_t left() const { return rest_.size(); }

 private:
  absl::string_view rest_;
};

absl::Status Corrupt(absl::string_view why) {
  return absl::DataLossError(absl::StrCat("not a valid class grouping file: ", why));
}

// What stat(2) and the index say about a shard now, as a grouping stores it.
ShardGrouping Identity(const MountedShard& shard, const std::string& feature) {
  ShardGrouping g;
  g.feature = feature;
  const std::string& path = shard.index->path();
  g.real_path = RealPath(path).value_or(path);
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    g.file_size = static_cast<uint64_t>(st.st_size);
    g.mtime_ns = MtimeNs(st);
    g.ctime_ns = CtimeNs(st);
    g.inode = static_cast<uint64_t>(st.st_ino);
  }
  g.index_digest = IndexDigest(*shard.index);
  return g;
}

bool SameShard(const ShardGrouping& a, const ShardGrouping& b, uint64_t records) {
  return a.feature == b.feature && a.real_path == b.real_path && a.file_size == b.file_size &&
         a.mtime_ns == b.mtime_ns && a.ctime_ns == b.ctime_ns && a.inode == b.inode &&
         a.index_digest == b.index_digest && b.folder_of.size() == records;
}

}  // namespace

std::string EncodeGrouping(const ShardGrouping& g) {
  std::string out(kMagic, 4);
  PutFixed32(&out, kVersion);
  PutString(&out, g.feature);
  PutString(&out, g.real_path);
  PutFixed64(&out, g.file_size);
  PutFixed64(&out, static_cast<uint64_t>(g.mtime_ns));
  PutFixed64(&out, static_cast<uint64_t>(g.ctime_ns));
  PutFixed64(&out, g.inode);
  PutFixed64(&out, g.index_digest);
  PutFixed32(&out, static_cast<uint32_t>(g.folders.size()));
  for (const std::string& f : g.folders) PutString(&out, f);
  PutFixed64(&out, g.folder_of.size());
  for (uint32_t f : g.folder_of) PutFixed32(&out, f);
  PutFixed32(&out, crc32c::Mask(crc32c::Value(out)));
  return out;
}

absl::StatusOr<ShardGrouping> DecodeGrouping(absl::string_view bytes) {
  if (bytes.size() < 12 || !absl::StartsWith(bytes, absl::string_view(kMagic, 4))) {
    return Corrupt("no TFRC header");
  }
  const absl::string_view body = bytes.substr(0, bytes.size() - 4);
  if (crc32c::Unmask(DecodeFixed32(bytes.data() + body.size())) != crc32c::Value(body)) {
    return Corrupt("CRC mismatch");
  }
  Reader r(body.substr(4));
  ShardGrouping g;
  uint32_t version, folders;
  uint64_t mtime, ctime, records;
  if (!r.U32(&version)) return Corrupt("cut short");
  if (version != kVersion) return Corrupt(absl::StrCat("version ", version));
  if (!r.String(&g.feature) || !r.String(&g.real_path) || !r.U64(&g.file_size) || !r.U64(&mtime) ||
      !r.U64(&ctime) || !r.U64(&g.inode) || !r.U64(&g.index_digest) || !r.U32(&folders)) {
    return Corrupt("cut short");
  }
  g.mtime_ns = static_cast<int64_t>(mtime);
  g.ctime_ns = static_cast<int64_t>(ctime);
  if (folders > r.left() / 4) return Corrupt("more folders than bytes");
  g.folders.resize(folders);
  for (std::string& f : g.folders) {
    if (!r.String(&f)) return Corrupt("cut short");
  }
  if (!r.U64(&records) || records != r.left() / 4 || r.left() % 4 != 0) {
    return Corrupt("record count does not match the file size");
  }
  g.folder_of.resize(records);
  for (uint32_t& f : g.folder_of) {
    r.U32(&f);
    if (f != kNotGrouped && f >= folders) return Corrupt("folder index out of range");
  }
  return g;
}

uint64_t IndexDigest(const index::ShardIndex& idx) {
  const std::vector<uint64_t>& offsets = idx.offsets();
  return Fnv1a64(absl::string_view(reinterpret_cast<const char*>(offsets.data()),
                                   offsets.size() * sizeof(uint64_t)));
}

std::string GroupingPath(const index::IndexStore& store, const std::string& real_path,
                         absl::string_view feature) {
  if (store.options().cache_dir.empty()) return "";
  return absl::StrFormat("%s.%016x%s",
                         absl::StripSuffix(store.CachePath(real_path), index::kIndexSuffix),
                         Fnv1a64(feature), kSuffix);
}

namespace {

// Each of `shards`' grouping: loaded when stored and valid, else decoded
// and stored (GroupByClass's contract, per shard).
std::vector<ShardGrouping> GroupShards(const std::vector<const MountedShard*>& shards,
                                       const GroupOptions& options, GroupStats* stats) {
  // Per shard: its stored grouping, or the folder name of each record to be
  // filled by the pass (disjoint chunks: no lock).
  std::vector<ShardGrouping> ids(shards.size());
  std::vector<std::string> paths(shards.size());
  std::vector<uint8_t> loaded(shards.size(), 0);  // not vector<bool>: written by many threads
  std::vector<std::vector<std::string>> names(shards.size());
  std::vector<std::vector<uint8_t>> damaged(shards.size());
  const int max_threads = std::max(1, options.threads);

  // Stored groupings, read and checked in parallel (a second mount's whole
  // cost: a stat, a read and a CRC per shard).
  {
    std::atomic<size_t> next{0};
    auto load = [&] {
      for (size_t s = next.fetch_add(1); s < shards.size(); s = next.fetch_add(1)) {
        ids[s] = Identity(*shards[s], options.feature);
        if (options.store != nullptr) {
          paths[s] = GroupingPath(*options.store, ids[s].real_path, options.feature);
        }
        if (paths[s].empty()) continue;
        auto bytes = ReadFileToString(paths[s]);
        if (!bytes.ok()) continue;
        auto stored = DecodeGrouping(*bytes);
        if (stored.ok() && SameShard(ids[s], *stored, shards[s]->records_shown())) {
          ids[s] = *std::move(stored);
          loaded[s] = 1;
          log::Debug(shards[s]->index->path(), ": class grouping loaded from ", paths[s]);
          continue;
        }
        log::Debug(shards[s]->index->path(), ": stored class grouping not used (",
                   stored.ok() ? "the shard or its index changed" : stored.status().message(), ")");
      }
    };
    std::vector<std::thread> pool;
    for (size_t t = 1; t < std::min<size_t>(max_threads, shards.size()); ++t) {
      pool.emplace_back(load);
    }
    load();
    for (std::thread& t : pool) t.join();
  }

  struct Chunk {
    uint32_t shard;
    uint64_t begin, end;
  };
  std::vector<Chunk> chunks;
  for (size_t s = 0; s < shards.size(); ++s) {
    if (loaded[s]) {
      ++stats->shards_loaded;
      continue;
    }
    const uint64_t n = shards[s]->records_shown();
    names[s].resize(n);
    damaged[s].assign(n, 0);
    ++stats->shards_decoded;
    for (uint64_t b = 0; b < n; b += kChunkRecords) {
      chunks.push_back({static_cast<uint32_t>(s), b, std::min(n, b + kChunkRecords)});
    }
  }

  std::atomic<size_t> next{0};
  std::atomic<uint64_t> decoded{0}, bad{0};
  auto work = [&] {
    for (size_t c = next.fetch_add(1); c < chunks.size(); c = next.fetch_add(1)) {
      const Chunk& chunk = chunks[c];
      const MountedShard& shard = *shards[chunk.shard];
      const index::ShardIndex& idx = *shard.index;
      uint64_t bytes = 0;
      for (uint64_t r = chunk.begin; r < chunk.end; ++r) {
        bytes += idx.end(r) - idx.begin(r);
        auto payload = record::ReadRecord(*shard.source, r, idx.begin(r), idx.end(r));
        if (!payload.ok()) {
          log::Warning(payload.status().message(), "; the record is left out of the class view");
          damaged[chunk.shard][r] = 1;
          bad.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        names[chunk.shard][r] =
            naming::ClassFolder(example::DecodeRecord(*payload), options.feature);
      }
      decoded.fetch_add(chunk.end - chunk.begin, std::memory_order_relaxed);
      if (options.progress) options.progress(chunk.end - chunk.begin, bytes);
    }
  };
  const int threads = static_cast<int>(std::min<size_t>(max_threads, chunks.size()));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  stats->records_decoded = decoded.load();
  stats->records_damaged = bad.load();

  // Each decoded shard's table, saved for the next mount.
  bool made_dir = false;
  for (size_t s = 0; s < shards.size(); ++s) {
    if (loaded[s]) continue;
    ShardGrouping& g = ids[s];
    absl::flat_hash_map<std::string, uint32_t> local;
    g.folder_of.resize(names[s].size());
    for (size_t r = 0; r < names[s].size(); ++r) {
      if (damaged[s][r]) {
        g.folder_of[r] = kNotGrouped;
        continue;
      }
      auto [it, added] = local.try_emplace(names[s][r], static_cast<uint32_t>(g.folders.size()));
      if (added) g.folders.push_back(names[s][r]);
      g.folder_of[r] = it->second;
    }
    names[s] = {};
    if (paths[s].empty()) continue;
    if (!made_dir) {
      (void)MakeDirs(Dirname(paths[s]), 0755);
      made_dir = true;
    }
    if (auto w = WriteFileReplacing(paths[s], EncodeGrouping(g)); w.ok()) {
      ++stats->saved;
    } else {
      log::Debug("class grouping not saved: ", w.message());
    }
  }

  return ids;
}

}  // namespace

ShardGrouping GroupShard(const MountedShard& shard, const GroupOptions& options,
                         GroupStats* stats) {
  GroupStats local_stats;
  return std::move(GroupShards({&shard}, options, stats ? stats : &local_stats).front());
}

ClassGroups GroupByClass(const std::vector<MountedShard>& shards, const GroupOptions& options,
                         GroupStats* stats) {
  GroupStats local_stats;
  if (stats == nullptr) stats = &local_stats;
  *stats = GroupStats();
  std::vector<const MountedShard*> borrowed;
  for (const MountedShard& shard : shards) borrowed.push_back(&shard);
  const std::vector<ShardGrouping> ids = GroupShards(borrowed, options, stats);
  // One sorted table for the mount.
  ClassGroups out;
  out.feature = options.feature;
  // Distinct names first (shards share most of theirs), then sorted: a
  // mount's start-up sorts as many names as there are classes, not records.
  {
    absl::flat_hash_set<absl::string_view> seen;
    for (const ShardGrouping& g : ids) {
      for (const std::string& f : g.folders) {
        if (seen.insert(f).second) out.folders.push_back(f);
      }
    }
  }
  std::sort(out.folders.begin(), out.folders.end());
  absl::flat_hash_map<absl::string_view, uint32_t> index_of;
  index_of.reserve(out.folders.size());
  for (size_t f = 0; f < out.folders.size(); ++f) {
    index_of.emplace(out.folders[f], static_cast<uint32_t>(f));
  }
  out.folder_of.resize(shards.size());
  for (size_t s = 0; s < shards.size(); ++s) {
    std::vector<uint32_t> remap(ids[s].folders.size());
    for (size_t f = 0; f < remap.size(); ++f) remap[f] = index_of.at(ids[s].folders[f]);
    out.folder_of[s].reserve(ids[s].folder_of.size());
    for (uint32_t f : ids[s].folder_of) {
      out.folder_of[s].push_back(f == kNotGrouped ? kNotGrouped : remap[f]);
    }
  }
  return out;
}

}  // namespace tfrecordfs::vfs
