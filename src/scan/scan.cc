#include "tfrecordfs/scan/scan.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tfrecordfs/arrayrecord/file.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/base/parallel.h"
#include "tfrecordfs/index/index_file.h"
#include "tfrecordfs/objstore/listing.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/source/snappy_source.h"

namespace tfrecordfs::scan {
namespace {

// `X.tfri` beside `X` is X's index (index/index_store.h, "beside the
// shard"), not data: the mount does not show it. `names` is sorted.
void DropIndexesBesideShards(std::vector<std::string>* names) {
  const absl::string_view suffix = index::kIndexSuffix;
  std::vector<std::string> kept;
  kept.reserve(names->size());
  for (const std::string& n : *names) {
    const bool index_of_sibling =
        absl::EndsWith(n, suffix) &&
        std::binary_search(names->begin(), names->end(), n.substr(0, n.size() - suffix.size()));
    if (!index_of_sibling) kept.push_back(n);
  }
  names->swap(kept);
}

// Lists the directories and regular files under the sources, in the order
// and with the names a mount gives them.
class Collector {
 public:
  explicit Collector(const objstore::ObjectLister* lister) : lister_(lister) {}

  absl::Status AddSource(const std::string& src) {
    if (objstore::IsObjectUrl(src)) return AddObjects(src);
    struct stat st;
    if (::stat(src.c_str(), &st) != 0) return ErrnoError(errno, absl::StrCat("source ", src));
    if (S_ISDIR(st.st_mode)) {
      // A directory source's entries appear at the mount root.
      visited_.insert({st.st_dev, st.st_ino});
      return AddChildren(src, "", kAtRoot);
    }
    if (S_ISREG(st.st_mode)) return Add(Basename(src), src, st, kAtRoot);
    return absl::InvalidArgumentError(
        absl::StrCat("source ", src, " is neither a regular file nor a directory"));
  }

  std::vector<SourceEntry> TakeEntries() { return std::move(entries_); }
  bool has_objects() const { return has_objects_; }
  // The regular files, as indices into the entries.
  std::vector<size_t> TakeFiles() { return std::move(files_); }

 private:
  absl::Status Add(const std::string& mount_path, const std::string& path, const struct stat& st,
                   size_t parent) {
    auto [it, fresh] = taken_.emplace(mount_path, path);
    if (!fresh) {
      const std::string name = Basename(mount_path);
      return absl::AlreadyExistsError(absl::StrCat("two sources provide '", name,
                                                   "' in the same directory of the mount (", path,
                                                   " and ", it->second, ")"));
    }
    const size_t self = entries_.size();
    entries_.push_back({path, mount_path, st, parent, nullptr});
    if (!S_ISDIR(st.st_mode)) {
      files_.push_back(self);
      return absl::OkStatus();
    }
    if (!visited_.insert({st.st_dev, st.st_ino}).second) {
      log::Warning(path, ": directory already mirrored (symlink loop?); shown empty");
      return absl::OkStatus();
    }
    return AddChildren(path, mount_path, self);
  }

  absl::Status AddChildren(const std::string& dir, const std::string& mount_dir, size_t self) {
    auto listed = ListNames(dir);
    if (!listed.ok()) {
      return ErrnoError(ErrnoOf(listed.status()),
                        absl::StrCat("cannot list source directory ", dir));
    }
    std::vector<std::string> names = std::move(*listed);
    std::sort(names.begin(), names.end());
    DropIndexesBesideShards(&names);
    for (const std::string& n : names) {
      const std::string child = JoinPath(dir, n);
      struct stat cst;
      if (::stat(child.c_str(), &cst) != 0) {
        log::Warning(child, ": skipped: ", std::strerror(errno));
        continue;
      }
      if (!S_ISDIR(cst.st_mode) && !S_ISREG(cst.st_mode)) continue;  // fifos, sockets, devices
      const std::string mount_path = mount_dir.empty() ? n : absl::StrCat(mount_dir, "/", n);
      if (auto s = Add(mount_path, child, cst, self); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // The objects of a URL SOURCE, as a directory source's entries: at the
  // root, folders before their entries, by name within a folder.
  absl::Status AddObjects(const std::string& src) {
    has_objects_ = true;
    auto urls = objstore::ExpandShardSpec(src);
    if (!urls.ok()) return urls.status();
    struct Folder {
      std::map<std::string, Folder> folders;
      std::map<std::string, const objstore::FoundObject*> objects;
    };
    Folder root;
    std::vector<objstore::FoundObject> found;
    for (const std::string& url : *urls) {
      auto listed = lister_->List(url);
      if (!listed.ok()) return listed.status();
      for (objstore::FoundObject& f : *listed) found.push_back(std::move(f));
    }
    for (const objstore::FoundObject& f : found) {
      Folder* at = &root;
      std::vector<std::string> parts = absl::StrSplit(f.relative, '/');
      for (size_t k = 0; k + 1 < parts.size(); ++k) at = &at->folders[parts[k]];
      at->objects[parts.back()] = &f;
    }
    const std::function<absl::Status(const Folder&, const std::string&, size_t)> add =
        [&](const Folder& folder, const std::string& mount_dir, size_t parent) -> absl::Status {
      std::vector<std::string> names;
      for (const auto& [n, sub] : folder.folders) names.push_back(n);
      for (const auto& [n, obj] : folder.objects) {
        if (!folder.folders.contains(n)) names.push_back(n);
      }
      std::sort(names.begin(), names.end());
      DropIndexesBesideShards(&names);
      for (const std::string& n : names) {
        const std::string mount_path = mount_dir.empty() ? n : absl::StrCat(mount_dir, "/", n);
        auto sub = folder.folders.find(n);
        struct stat st = {};
        if (sub != folder.folders.end()) {
          st.st_mode = S_IFDIR | 0555;
          st.st_nlink = 2;
          const std::string path =
              absl::StrCat(src, absl::EndsWith(src, "/") ? "" : "/", mount_path);
          if (auto s = AddEntry(mount_path, path, st, parent, nullptr); !s.ok()) return s;
          if (auto s = add(sub->second, mount_path, entries_.size() - 1); !s.ok()) return s;
          continue;
        }
        const objstore::FoundObject& f = *folder.objects.at(n);
        st.st_mode = S_IFREG | 0444;
        st.st_nlink = 1;
        st.st_size = static_cast<off_t>(f.object->size());
        st.st_mtim.tv_sec = f.mtime;
        // ctime: a fingerprint of the ETag, which the index cache compares
        // (an index is reused for the same URL, size and ETag only).
        st.st_ctim = objstore::EtagStamp(f.object->etag());
        if (auto s = AddEntry(mount_path, f.object->url(), st, parent, f.object); !s.ok()) return s;
      }
      return absl::OkStatus();
    };
    return add(root, "", kAtRoot);
  }

  absl::Status AddEntry(const std::string& mount_path, const std::string& path,
                        const struct stat& st, size_t parent,
                        std::shared_ptr<const source::ObjectReader> object) {
    auto [it, fresh] = taken_.emplace(mount_path, path);
    if (!fresh) {
      return absl::AlreadyExistsError(absl::StrCat("two sources provide '", Basename(mount_path),
                                                   "' in the same directory of the mount (", path,
                                                   " and ", it->second, ")"));
    }
    if (!S_ISDIR(st.st_mode)) files_.push_back(entries_.size());
    entries_.push_back({path, mount_path, st, parent, std::move(object)});
    return absl::OkStatus();
  }

  const objstore::ObjectLister* lister_;
  bool has_objects_ = false;
  std::set<std::pair<dev_t, ino_t>> visited_;
  // Each mount path taken, and the real path that took it.
  absl::flat_hash_map<std::string, std::string> taken_;
  std::vector<SourceEntry> entries_;
  std::vector<size_t> files_;
};

struct Probed {
  absl::Status status;
  bool is_shard = false;
  ScannedShard shard;
  OtherFile other;
};

// Probes the stored bytes `in` of `file` (`st` as stat says, `identity` as
// the shard's cache key) and, for a shard, loads or builds its index.
Probed ProbeAndIndexBytes(const SourceEntry& file, size_t entry, source::StoredBytes in,
                          const struct stat& st, const source::FileIdentity& identity,
                          index::IndexStore* store) {
  Probed out;
  source::Codec codec = source::Codec::kNone;
  auto probe = index::ProbeFile(in, file.path, static_cast<uint64_t>(st.st_size), &codec);
  if (!probe.ok()) {
    out.status = probe.status();
    return out;
  }
  if (*probe != index::Probe::kShard) {
    out.other = {file.path, file.mount_path, codec, NamedLikeAShard(Basename(file.mount_path)),
                 entry};
    return out;
  }
  ScannedShard& shard = out.shard;
  shard.path = file.path;
  shard.mount_path = file.mount_path;
  shard.codec = codec;
  shard.st = st;
  shard.identity = identity;
  shard.entry = entry;
  shard.object = file.object;
  auto idx = store != nullptr ? store->Load(in, file.path, file.mount_path, st, codec, &shard.info)
                              : index::BuildShardIndex(in, file.path, st, codec);
  if (!idx.ok()) {
    out.status = idx.status();
    return out;
  }
  shard.index = std::move(*idx);
  out.is_shard = true;
  return out;
}

Probed ProbeAndIndex(const SourceEntry& file, size_t entry, index::IndexStore* store) {
  if (file.object != nullptr) {
    // An object's size is the listing's (file.st), and its inode number is
    // made up at each scan.
    source::FileIdentity identity = source::FileIdentity::Of(file.st);
    identity.ino_persists = false;
    return ProbeAndIndexBytes(file, entry, file.object.get(), file.st, identity, store);
  }
  Probed out;
  auto fd = OpenFile(file.path, O_RDONLY);
  if (!fd.ok()) {
    out.status = fd.status();
    return out;
  }
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) {
    out.status = ErrnoError(errno, file.path);
    return out;
  }
  return ProbeAndIndexBytes(file, entry, fd->get(), st, source::FileIdentity::Of(st, fd->get()),
                            store);
}

// Leaves out the entries `drop` marks (objects that could not be read),
// renumbering the entries that stay.
void DropEntries(ScanResult* result, const std::vector<bool>& drop) {
  std::vector<size_t> renumbered(result->entries.size(), kAtRoot);
  std::vector<SourceEntry> kept;
  for (size_t e = 0; e < result->entries.size(); ++e) {
    if (drop[e]) continue;
    renumbered[e] = kept.size();
    kept.push_back(std::move(result->entries[e]));
    if (kept.back().parent != kAtRoot) kept.back().parent = renumbered[kept.back().parent];
  }
  for (ScannedShard& s : result->shards) s.entry = renumbered[s.entry];
  for (OtherFile& o : result->others) o.entry = renumbered[o.entry];
  for (RefusedShard& r : result->refused) r.entry = renumbered[r.entry];
  result->entries = std::move(kept);
}

}  // namespace

absl::StatusOr<ScanResult> Scan(const ScanOptions& options) {
  if (options.sources.empty()) return absl::InvalidArgumentError("no SOURCE given");
  objstore::ObjectLister lister(options.object_cache != nullptr
                                    ? options.object_cache
                                    : std::make_shared<source::BlockCache>(kObjectCacheBytes),
                                options.objects.value_or(objstore::DefaultObjectOptions()));
  Collector collector(&lister);
  for (const std::string& src : options.sources) {
    if (auto s = collector.AddSource(src); !s.ok()) return s;
  }
  ScanResult result;
  result.entries = collector.TakeEntries();
  std::vector<size_t> files = collector.TakeFiles();
  if (options.select) {
    std::vector<const SourceEntry*> listed;
    for (size_t f : files) listed.push_back(&result.entries[f]);
    const std::vector<bool> keep = options.select(listed);
    std::vector<size_t> kept;
    for (size_t k = 0; k < files.size(); ++k) {
      if (k < keep.size() && keep[k]) kept.push_back(files[k]);
    }
    files = std::move(kept);
  }

  std::vector<Probed> probed(files.size());
  int threads = options.threads;
  if (threads <= 0) {
    const bool remote =
        collector.has_objects() ||
        std::any_of(options.sources.begin(), options.sources.end(),
                    [](const std::string& p) { return source::OnRemoteStorage(p); });
    threads = remote
                  ? index::kRemoteWalkThreads
                  : std::clamp<int>(static_cast<int>(std::thread::hardware_concurrency()), 1, 16);
  }
  threads = std::min<int>(threads, static_cast<int>(std::max<size_t>(files.size(), 1)));
  if (options.before_probe) options.before_probe(files.size(), threads);
  ParallelFor(files.size(), threads, [&](size_t k) {
    probed[k] = ProbeAndIndex(result.entries[files[k]], files[k], options.store);
    if (!probed[k].status.ok()) return;
    if (probed[k].is_shard && options.on_shard) options.on_shard(probed[k].shard);
    if (!probed[k].is_shard && options.on_other) options.on_other(probed[k].other);
  });

  std::vector<bool> drop(result.entries.size(), false);
  for (size_t k = 0; k < probed.size(); ++k) {
    Probed& p = probed[k];
    if (record::IsTooManyRecords(p.status) || arrayrecord::IsRefusedFile(p.status)) {
      result.refused.push_back(
          {std::move(p.shard.path), std::move(p.shard.mount_path), p.status, p.shard.entry});
      continue;
    }
    if (!p.status.ok() && result.entries[files[k]].object != nullptr) {
      // One object that cannot be read (a server that fails, stalls or
      // lies about it) does not hide the others.
      const SourceEntry& e = result.entries[files[k]];
      result.unreadable.push_back({e.path, e.mount_path, p.status, files[k]});
      drop[files[k]] = true;
      continue;
    }
    if (!p.status.ok()) return p.status;
    if (p.is_shard) {
      result.shards.push_back(std::move(p.shard));
    } else {
      result.others.push_back(std::move(p.other));
    }
  }
  if (!result.unreadable.empty()) {
    DropEntries(&result, drop);
    for (RefusedShard& u : result.unreadable) u.entry = kAtRoot;
  }
  return result;
}

bool NamedLikeAShard(absl::string_view name) {
  absl::ConsumeSuffix(&name, ".gz") || absl::ConsumeSuffix(&name, ".zlib");
  for (absl::string_view ext :
       {".tfrecord", ".tfrecords", ".record", ".records", ".tfrec", ".tfr"}) {
    if (name.size() > ext.size() && absl::EndsWith(name, ext)) return true;
  }
  // "...-DDD-of-DDD", three or more digits each.
  const auto consume_digits = [&name] {
    size_t n = 0;
    while (n < name.size() && absl::ascii_isdigit(name[name.size() - 1 - n])) ++n;
    name.remove_suffix(n);
    return n >= 3;
  };
  return consume_digits() && absl::ConsumeSuffix(&name, "-of-") && consume_digits() &&
         absl::EndsWith(name, "-");
}

std::string NotAShardNote(const OtherFile& file) {
  // Other files (a .json.gz, a README) are shown as they are, unremarked.
  if (!file.shard_like_name) return "";
  if (file.codec != source::Codec::kNone) {
    return absl::StrCat(file.path, ": a ", source::CodecName(file.codec),
                        " stream whose first 12 decompressed bytes are not a record header with "
                        "a valid length CRC: it holds no TFRecord");
  }
  return absl::StrCat(file.path,
                      ": named like a TFRecord shard, but its first 12 bytes are not a record "
                      "header with a valid length CRC (byte offset 0)");
}

absl::StatusOr<std::unique_ptr<source::ShardSource>> OpenShard(const ScannedShard& shard,
                                                               source::BlockCache* cache,
                                                               source::FdCache* fds) {
  const index::ShardIndex& idx = *shard.index;
  std::optional<source::ShardFile> file;
  if (shard.object != nullptr) {
    file.emplace(shard.object);  // every GET is pinned to the listed ETag
  } else if (fds != nullptr) {
    file.emplace(idx.path(), shard.identity, fds);
  } else {
    auto fd = OpenFile(shard.path, O_RDONLY);
    if (!fd.ok()) return fd.status();
    struct stat st;
    if (::fstat(fd->get(), &st) != 0) return ErrnoError(errno, shard.path);
    if (static_cast<uint64_t>(st.st_size) != idx.file_size() || MtimeNs(st) != idx.mtime_ns()) {
      return absl::FailedPreconditionError(
          absl::StrCat(shard.path, ": changed since it was indexed (size ", idx.file_size(), " -> ",
                       st.st_size, "); run the command again"));
    }
    file.emplace(std::move(*fd), shard.path);
  }
  if (idx.codec() == source::Codec::kArrayRecord) {
    return std::make_unique<arrayrecord::ArrayRecordSource>(std::move(*file), idx.file_size(),
                                                            idx.checkpoints(), cache);
  }
  if (idx.codec() == source::Codec::kSnappy) {
    return std::make_unique<source::SnappySource>(std::move(*file), idx.file_size(),
                                                  idx.checkpoints(), cache);
  }
  if (idx.checkpoints()) {
    return std::make_unique<source::InflateSource>(std::move(*file), idx.file_size(),
                                                   idx.checkpoints(), cache);
  }
  return std::make_unique<source::PlainSource>(std::move(*file), idx.file_size());
}

absl::StatusOr<ScannedShard> ScanOne(const std::string& path, index::IndexStore* store,
                                     std::optional<objstore::ObjectOptions> objects) {
  if (objstore::IsObjectUrl(path)) {
    ScanOptions options;
    options.sources = {path};
    options.store = store;
    options.objects = std::move(objects);
    auto scanned = Scan(options);
    if (!scanned.ok()) return scanned.status();
    if (!scanned->unreadable.empty()) return scanned->unreadable.front().why;
    if (scanned->shards.size() != 1) {
      return absl::InvalidArgumentError(
          scanned->shards.empty()
              ? absl::StrCat(path, ": not a TFRecord shard")
              : absl::StrCat(path, ": ", scanned->shards.size(), " shards, not one"));
    }
    return std::move(scanned->shards.front());
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoError(errno, path);
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  Probed p = ProbeAndIndex({path, Basename(path), st, kAtRoot, nullptr}, 0, store);
  if (!p.status.ok()) return p.status;
  if (!p.is_shard) {
    return absl::InvalidArgumentError(
        p.other.codec != source::Codec::kNone
            ? absl::StrCat(path, ": a ", source::CodecName(p.other.codec),
                           " stream that holds no TFRecord framing")
            : absl::StrCat(path,
                           ": not a TFRecord shard (its first 12 bytes are not a record "
                           "header with a valid length CRC)"));
  }
  return std::move(p.shard);
}

}  // namespace tfrecordfs::scan
