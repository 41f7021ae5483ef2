#include "tfrecordfs/vfs/class_groups.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/hash.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/base/parallel.h"
#include "tfrecordfs/example/record.h"
#include "tfrecordfs/index/index_file.h"
#include "tfrecordfs/naming/gallery.h"
#include "tfrecordfs/record/reader.h"

namespace tfrecordfs::vfs {

namespace {

// Records decoded per unit of work: shards of any size spread over threads.
constexpr uint64_t kChunkRecords = 256;

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
  g.index_digest = index::IndexDigest(*shard.index);
  return g;
}

bool SameShard(const ShardGrouping& a, const ShardGrouping& b, uint64_t records) {
  return a.feature == b.feature && a.real_path == b.real_path && a.file_size == b.file_size &&
         a.mtime_ns == b.mtime_ns && a.ctime_ns == b.ctime_ns && a.inode == b.inode &&
         a.index_digest == b.index_digest && b.folder_of.size() == records;
}

}  // namespace

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
  std::vector<std::vector<naming::RecordClass>> names(shards.size());
  std::vector<std::vector<uint8_t>> damaged(shards.size());
  const int max_threads = std::max(1, options.threads);

  // Stored groupings, read and checked in parallel (a second mount's whole
  // cost: a stat, a read and a CRC per shard).
  ParallelFor(shards.size(), max_threads, [&](size_t s) {
    ids[s] = Identity(*shards[s], options.feature);
    if (options.store != nullptr) {
      paths[s] = index::GroupingPath(*options.store, ids[s].real_path, options.feature);
    }
    if (paths[s].empty()) return;
    auto bytes = ReadFileToString(paths[s]);
    if (!bytes.ok()) return;
    auto stored = index::DecodeGrouping(*bytes);
    if (stored.ok() && SameShard(ids[s], *stored, shards[s]->records_shown())) {
      ids[s] = *std::move(stored);
      loaded[s] = 1;
      log::Debug(shards[s]->index->path(), ": class grouping loaded from ", paths[s]);
      return;
    }
    log::Debug(shards[s]->index->path(), ": stored class grouping not used (",
               stored.ok() ? "the shard or its index changed" : stored.status().message(), ")");
  });

  struct Chunk {
    uint32_t shard;
    uint64_t begin, end;
  };
  std::vector<Chunk> chunks;
  // Per shard: its chunks not decoded yet (the one that takes it to 0
  // reports the shard done).
  std::unique_ptr<std::atomic<uint64_t>[]> chunks_left(new std::atomic<uint64_t>[shards.size()]);
  for (size_t s = 0; s < shards.size(); ++s) {
    chunks_left[s].store(0, std::memory_order_relaxed);
    if (loaded[s]) {
      ++stats->shards_loaded;
      if (options.progress) {
        options.progress(1, 0, shards[s]->index->file_size());
      }
      continue;
    }
    const uint64_t n = shards[s]->records_shown();
    names[s].resize(n);
    damaged[s].assign(n, 0);
    ++stats->shards_decoded;
    for (uint64_t b = 0; b < n; b += kChunkRecords) {
      chunks.push_back({static_cast<uint32_t>(s), b, std::min(n, b + kChunkRecords)});
      chunks_left[s].fetch_add(1, std::memory_order_relaxed);
    }
    if (n == 0 && options.progress) options.progress(1, 0, 0);
  }

  std::atomic<uint64_t> decoded{0}, bad{0};
  ParallelFor(chunks.size(), max_threads, [&](size_t c) {
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
      names[chunk.shard][r] = naming::ClassOf(example::DecodeRecord(*payload), options.feature);
    }
    decoded.fetch_add(chunk.end - chunk.begin, std::memory_order_relaxed);
    const bool shard_done = chunks_left[chunk.shard].fetch_sub(1) == 1;
    if (options.progress) options.progress(shard_done ? 1 : 0, chunk.end - chunk.begin, bytes);
  });
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
      naming::RecordClass& c = names[s][r];
      auto [it, added] = local.try_emplace(c.folder, static_cast<uint32_t>(g.folders.size()));
      if (added) {
        g.folders.push_back(c.folder);
        g.values.push_back(c.has_value ? std::optional<std::string>(std::move(c.value))
                                       : std::nullopt);
      }
      g.folder_of[r] = it->second;
    }
    names[s] = {};
    if (paths[s].empty()) continue;
    if (!made_dir) {
      (void)MakeDirs(Dirname(paths[s]), 0755);
      made_dir = true;
    }
    if (auto w = WriteFileReplacing(paths[s], index::EncodeGrouping(g)); w.ok()) {
      ++stats->saved;
    } else {
      log::Debug("class grouping not saved: ", w.message());
    }
  }

  return ids;
}

}  // namespace

std::vector<std::string> ClassNamesBeside(const std::vector<MountedShard>& shards,
                                          absl::string_view feature) {
  const std::string file = absl::StrCat(absl::StrReplaceAll(feature, {{"/", "-"}}), ".labels.txt");
  std::vector<std::string> names;
  std::string from;
  absl::flat_hash_set<std::string> tried;
  for (const MountedShard& shard : shards) {
    const std::string dir = Dirname(shard.index->path());
    if (!tried.insert(dir).second) continue;
    const std::string path = absl::StrCat(dir, "/", file);
    auto bytes = ReadFileToString(path);
    if (!bytes.ok()) {
      if (ErrnoOf(bytes.status()) != ENOENT && ErrnoOf(bytes.status()) != ENOTDIR) {
        log::Warning("class names not read: ", bytes.status().message());
      }
      continue;
    }
    std::vector<std::string> lines;
    for (absl::string_view line : absl::StrSplit(*bytes, '\n')) {
      lines.emplace_back(absl::StripSuffix(line, "\r"));
    }
    if (!lines.empty() && lines.back().empty()) lines.pop_back();
    if (from.empty()) {
      names = std::move(lines);
      from = path;
      log::Info("class folders named by ", path, " (", names.size(), " class(es))");
    } else if (lines != names) {
      log::Warning(path, " differs from ", from, "; the folders are named by ", from);
    }
  }
  return names;
}

std::string ShownFolder(absl::string_view folder, const std::optional<std::string>& value,
                        const std::vector<std::string>& class_names) {
  uint64_t i;
  if (!value || *value != folder || class_names.empty() || !absl::SimpleAtoi(*value, &i) ||
      absl::StrCat(i) != *value || i >= class_names.size()) {
    return std::string(folder);
  }
  std::string name = naming::EscapeNamePart(class_names[i]);
  int64_t other;
  if (name.empty() || name == naming::kNoValueFolder || name == naming::kSeveralValuesFolder ||
      (absl::SimpleAtoi(name, &other) && name != folder)) {
    return std::string(folder);
  }
  return name;
}

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
  // One sorted table for the mount, by the names shown.
  ClassGroups out;
  out.feature = options.feature;
  out.class_names = options.class_names;
  // Distinct names first (shards share most of theirs), then sorted: a
  // mount's start-up sorts as many names as there are classes, not records.
  std::vector<std::vector<std::string>> shown(ids.size());
  {
    absl::flat_hash_map<std::string, std::optional<std::string>> seen;
    for (size_t s = 0; s < ids.size(); ++s) {
      const ShardGrouping& g = ids[s];
      for (size_t f = 0; f < g.folders.size(); ++f) {
        const std::optional<std::string>& value = f < g.values.size() ? g.values[f] : std::nullopt;
        shown[s].push_back(ShownFolder(g.folders[f], value, options.class_names));
        seen.try_emplace(shown[s].back(), value);
      }
    }
    for (auto& [name, value] : seen) out.folders.push_back(name);
    std::sort(out.folders.begin(), out.folders.end());
    for (const std::string& name : out.folders) out.values.push_back(seen.at(name));
  }
  absl::flat_hash_map<absl::string_view, uint32_t> index_of;
  index_of.reserve(out.folders.size());
  for (size_t f = 0; f < out.folders.size(); ++f) {
    index_of.emplace(out.folders[f], static_cast<uint32_t>(f));
  }
  out.folder_of.resize(shards.size());
  for (size_t s = 0; s < shards.size(); ++s) {
    std::vector<uint32_t> remap(ids[s].folders.size());
    for (size_t f = 0; f < remap.size(); ++f) remap[f] = index_of.at(shown[s][f]);
    out.folder_of[s].reserve(ids[s].folder_of.size());
    for (uint32_t f : ids[s].folder_of) {
      out.folder_of[s].push_back(f == kNotGrouped ? kNotGrouped : remap[f]);
    }
  }
  return out;
}

}  // namespace tfrecordfs::vfs
