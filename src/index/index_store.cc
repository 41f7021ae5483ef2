#include "tfrecordfs/index/index_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/hash.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/index/dali_index.h"
#include "tfrecordfs/record/format.h"

namespace tfrecordfs::index {

namespace {

// Where a plain shard's stored offsets are checked against the shard itself
// before they are believed: the first, middle and last record. Each header
// there must state exactly its record's span, unless the walk recorded a
// problem where that span ends (a damaged or resynchronised record).
// Offsets shifted, dropped or repeated by a forged index (a valid CRC over
// wrong offsets, which DecodeIndexFile's invariants let through) fail here;
// three preads per shard keep a cached mount fast.
absl::Status CheckSampledHeaders(const IndexFile& f, source::StoredBytes fd,
                                 const std::string& path) {
  const uint64_t n = f.num_records();
  if (n == 0) return absl::OkStatus();
  std::vector<uint64_t> at;
  for (const auto& p : f.walk.problems) at.push_back(p.offset);
  std::sort(at.begin(), at.end());
  for (uint64_t i : {uint64_t{0}, n / 2, n - 1}) {
    const uint64_t begin = f.walk.offsets[i], end = f.walk.offsets[i + 1];
    if (std::binary_search(at.begin(), at.end(), end) ||
        std::binary_search(at.begin(), at.end(), begin)) {
      continue;
    }
    char h[record::kHeaderSize];
    if (auto s = PreadFull(fd, h, sizeof h, begin, path); !s.ok()) return s;
    auto len = record::ParseHeader(h);
    if (!len.ok() || *len + record::kFramingOverhead != end - begin) {
      return absl::DataLossError(absl::StrCat("record ", i, " at byte offset ", begin,
                                              " does not span what the index says"));
    }
  }
  return absl::OkStatus();
}

// The real path of the open file `fd`: one readlink of /proc/self/fd/N
// (realpath(3) costs a getcwd and a readlink per path component, which
// showed in the time to mount a thousand cached shards).
std::string RealPath(source::StoredBytes fd, const std::string& path) {
  if (fd.object() != nullptr) return fd.object()->url();  // an object is known by its URL
  char buf[PATH_MAX];
  const std::string link = ProcFdPath(fd.fd());
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  if (n > 0 && static_cast<size_t>(n) < sizeof buf && buf[0] == '/') return std::string(buf, n);
  return tfrecordfs::RealPath(path).value_or(path);
}

// The main part's size of an index file of `file_size` bytes that starts
// with `first`, for a shard of `shard_size` bytes: DataLoss unless its
// header implies that size.
absl::StatusOr<uint64_t> CheckedMainSize(absl::string_view first, uint64_t shard_size,
                                         uint64_t file_size) {
  auto main_size = IndexMainSize(first);
  if (!main_size.ok()) return main_size.status();
  auto range = IndexFileSizeRange(first, shard_size);
  if (!range.ok()) return range.status();
  if (*main_size < range->min || *main_size > range->max ||
      file_size != *main_size + range->windows) {
    return absl::DataLossError(
        absl::StrCat("not a valid index file: ", file_size, " bytes, but its header implies ",
                     range->min + range->windows, " to ", range->max + range->windows));
  }
  return *main_size;
}

// An object's `<object>.tfri` (ObjectReader::ReadBeside), read whole into
// `*whole` (the checkpoint windows are then served from memory), checked
// as ReadIndexMain checks a file; returns its main part. NotFound when
// there is none. At most the shard's size plus 64 MiB is read.
absl::StatusOr<std::string> ReadObjectIndexMain(const source::ObjectReader& object,
                                                uint64_t shard_size, uint64_t* file_size,
                                                std::string* whole) {
  auto bytes = object.ReadBeside(kIndexSuffix, shard_size + (uint64_t{64} << 20));
  if (!bytes.ok()) return bytes.status();
  *whole = std::move(*bytes);
  *file_size = whole->size();
  auto main_size = CheckedMainSize(*whole, shard_size, *file_size);
  if (!main_size.ok()) return main_size.status();
  return whole->substr(0, static_cast<size_t>(*main_size));
}

// Whether nobody but the mounting user (or root) could have written the file
// of `st`: it is theirs or root's, and neither its group nor others may
// write it. Such a file in index_dir or beside a shard is as much the
// user's word as their own cache is, and its checkpoints are used as they
// stand; another's file is checked against the stream first.
bool OnlyOursToWrite(const struct stat& st) {
  return (st.st_uid == ::geteuid() || st.st_uid == 0) && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

// Reads the main part of an index file (index_file.h: everything but the
// checkpoint windows, which are read on demand) for a shard of
// `shard_size` bytes. NotFound when absent. Nothing in an index directory
// is trusted, so: O_NONBLOCK (opening a FIFO does not wait for a writer),
// only a regular file is read, and its main part must have a size its own
// header implies (IndexFileSizeRange) and fit in the file before anything
// is allocated for it, so a huge or sparse file costs one small read. The
// first pread takes up to 64 KiB (an index of ~8,000 records): a typical
// index is one read. `*file_size` gets the whole file's size, `*identity`
// the file's (FileIdentity::Of), `*only_ours` whether nobody but the
// mounting user or root could have written it (OnlyOursToWrite).
absl::StatusOr<std::string> ReadIndexMain(const std::string& path, uint64_t shard_size,
                                          uint64_t* file_size, source::FileIdentity* identity,
                                          bool* only_ours) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return absl::NotFoundError(path);
    return ErrnoError(errno, path);
  }
  UniqueFd owner(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoError(errno, path);
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": not a regular file"));
  }
  *identity = source::FileIdentity::Of(st, fd);
  *only_ours = OnlyOursToWrite(st);
  *file_size = static_cast<uint64_t>(st.st_size);
  constexpr size_t kFirstRead = 64 * 1024;
  std::string first(static_cast<size_t>(std::min<uint64_t>(*file_size, kFirstRead)), '\0');
  auto got = PreadUpTo(fd, first.data(), first.size(), 0, path);
  if (!got.ok()) return got.status();
  first.resize(*got);
  auto main_size = CheckedMainSize(first, shard_size, *file_size);
  if (!main_size.ok()) return main_size.status();
  if (*main_size <= first.size()) {
    first.resize(static_cast<size_t>(*main_size));
    return first;
  }
  std::string out = std::move(first);
  const size_t have = out.size();
  out.resize(static_cast<size_t>(*main_size));
  auto rest = PreadUpTo(fd, out.data() + have, out.size() - have, have, path);
  if (!rest.ok()) return rest.status();
  out.resize(have + *rest);  // a file that shrank meanwhile fails the CRC
  return out;
}

absl::StatusOr<HeaderBytes> ReadHeaderAt(source::StoredBytes fd, const std::string& path,
                                         uint64_t offset) {
  HeaderBytes h{};
  if (auto s = PreadFull(fd, h.data(), h.size(), offset, path); !s.ok()) return s;
  return h;
}

enum class Verdict { kValid, kGrown, kStale };

struct Check {
  Verdict verdict = Verdict::kStale;
  std::string why;  // for kStale
};

// Compares a stored index with the shard as it is now. The stored real path
// must equal `real_path`, or with `same_name_only` (a shared directory, seen
// from machines that mount the data at different paths) only its base name.
// The raw 12 bytes of a shard file at `offset` (for compressed shards the
// fingerprint is taken from the file itself: its start and its trailer).
absl::StatusOr<HeaderBytes> RawBytesAt(source::StoredBytes fd, const std::string& path,
                                       uint64_t size, uint64_t offset) {
  HeaderBytes h{};
  if (size < h.size()) return h;
  if (auto s = PreadFull(fd, h.data(), h.size(), offset, path); !s.ok()) return s;
  return h;
}

Check CheckStored(const IndexFile& f, source::StoredBytes fd, const std::string& shard_path,
                  const std::string& real_path, bool same_name_only, const struct stat& st,
                  source::Codec codec) {
  Check c;
  if (f.codec != codec) {
    c.why = absl::StrCat("made for a ", source::CodecName(f.codec), " shard, this one is ",
                         source::CodecName(codec));
    return c;
  }
  if (same_name_only ? Basename(f.path) != Basename(real_path) : f.path != real_path) {
    c.why = absl::StrCat("made for ", f.path);
    return c;
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  // Inode and ctime only where the index was written (the cache): another
  // machine sharing an index_dir sees other numbers for the same file.
  // (Not the inode on FUSE, which may renumber a file: source::InodesPersist.)
  // An object's ctime is its ETag's stamp (objstore::EtagStamp), the same
  // on every machine: compared wherever its index was written (an index
  // beside an object that a commit replaced with one of the same size and
  // second is stale by its ETag only).
  const bool same_file =
      fd.object() != nullptr
          ? f.ctime_ns == CtimeNs(st)
          : same_name_only ||
                ((f.inode == static_cast<uint64_t>(st.st_ino) || !source::InodesPersist(fd.fd())) &&
                 f.ctime_ns == CtimeNs(st));
  const bool same = f.file_size == size && f.mtime_ns == MtimeNs(st) && same_file;
  // Only plain shards grow by appending records; a compressed one is walked
  // again (its end holds a trailer).
  const bool grown = codec == source::Codec::kNone && f.file_size < size &&
                     f.walk.problems.empty() && f.walk.offsets.back() == f.file_size;
  if (!same && !grown) {
    c.why = f.file_size != size
                ? absl::StrCat("size changed from ", f.file_size, " to ", size, " bytes")
            : f.mtime_ns != MtimeNs(st) ? "mtime changed"
            : fd.object() != nullptr    ? "another object (its ETag changed)"
                                        : "another file (inode or ctime changed)";
    return c;
  }
  const uint64_t n = f.num_records();
  if (codec != source::Codec::kNone) {
    auto first = RawBytesAt(fd, shard_path, size, 0);
    auto last = RawBytesAt(fd, shard_path, size, size >= 12 ? size - 12 : 0);
    if (!first.ok() || !last.ok() || *first != f.first_header || *last != f.last_header) {
      c.why = "the first or last bytes of the file differ";
      return c;
    }
  } else if (n > 0) {
    auto first = ReadHeaderAt(fd, shard_path, f.walk.offsets[0]);
    auto last = ReadHeaderAt(fd, shard_path, f.walk.offsets[n - 1]);
    if (!first.ok() || !last.ok() || *first != f.first_header || *last != f.last_header) {
      c.why = "the first or last record header differs";
      return c;
    }
    if (auto s = CheckSampledHeaders(f, fd, shard_path); !s.ok()) {
      c.why = std::string(s.message());
      log::Warning(shard_path, ": its stored index does not match the shard (", s.message(),
                   "); walking it again");
      return c;
    }
  }
  c.verdict = same ? Verdict::kValid : Verdict::kGrown;
  return c;
}

absl::StatusOr<IndexFile> Fingerprint(source::StoredBytes fd, const std::string& path,
                                      const std::string& real_path, const struct stat& st,
                                      record::WalkResult walk,
                                      const source::CheckpointTable* checkpoints) {
  IndexFile f;
  f.file_size = static_cast<uint64_t>(st.st_size);
  f.mtime_ns = MtimeNs(st);
  f.inode = static_cast<uint64_t>(st.st_ino);
  f.ctime_ns = CtimeNs(st);
  f.path = real_path;
  f.walk = std::move(walk);
  f.data_size = f.file_size;
  const uint64_t n = f.num_records();
  if (checkpoints != nullptr) {
    f.codec = checkpoints->codec;
    f.data_size = checkpoints->data_size;
    f.checkpoints = checkpoints->points;
    auto first = RawBytesAt(fd, path, f.file_size, 0);
    if (!first.ok()) return first.status();
    auto last = RawBytesAt(fd, path, f.file_size, f.file_size >= 12 ? f.file_size - 12 : 0);
    if (!last.ok()) return last.status();
    f.first_header = *first;
    f.last_header = *last;
  } else if (n > 0) {
    auto first = ReadHeaderAt(fd, path, f.walk.offsets[0]);
    if (!first.ok()) return first.status();
    auto last = ReadHeaderAt(fd, path, f.walk.offsets[n - 1]);
    if (!last.ok()) return last.status();
    f.first_header = *first;
    f.last_header = *last;
  }
  return f;
}

}  // namespace

std::string DefaultCacheDir() { return UserCacheDir("index"); }

absl::string_view IndexSourceName(IndexSource source) {
  switch (source) {
    case IndexSource::kBeside:
      return "beside";
    case IndexSource::kSharedDir:
      return "index_dir";
    case IndexSource::kCache:
      return "cache";
    case IndexSource::kGrown:
      return "grown";
    case IndexSource::kWalked:
      return "walked";
  }
  return "?";
}

IndexStore::IndexStore(StoreOptions options) : options_(std::move(options)) {}

std::string IndexStore::CachePath(const std::string& real_path) const {
  std::string name = Basename(real_path);
  if (name.size() > 64) name.resize(64);
  return absl::StrFormat("%s/%s-%016x%s", options_.cache_dir, name, Fnv1a64(real_path),
                         kIndexSuffix);
}

std::string IndexStore::SharedPath(const std::string& mount_path) const {
  return absl::StrCat(options_.shared_dir, "/", mount_path, kIndexSuffix);
}

absl::StatusOr<record::WalkResult> WalkGrownTail(source::StoredBytes fd, absl::string_view path,
                                                 const IndexFile& old, uint64_t file_size,
                                                 uint64_t max_records) {
  const uint64_t old_records = old.walk.offsets.size() - 1;
  if (old_records > max_records) {
    return record::TooManyRecords(path, max_records, old.walk.offsets[max_records], false);
  }
  auto tail = record::WalkHeaders(fd, path, file_size, old.file_size, max_records - old_records);
  if (!tail.ok()) return tail.status();
  if (!tail->problems.empty()) {
    // A damaged tail could resynchronise differently from a full walk (which
    // may scan from inside the last old record): only a full walk is exact.
    return absl::NotFoundError("the new tail is damaged");
  }
  record::WalkResult out;
  out.file_size = file_size;
  out.offsets.reserve(old.walk.offsets.size() + tail->offsets.size() - 1);
  out.offsets.assign(old.walk.offsets.begin(), old.walk.offsets.end() - 1);
  out.offsets.insert(out.offsets.end(), tail->offsets.begin(), tail->offsets.end());
  return out;
}

void IndexStore::Drop(const std::string& path) {
  if (options_.cache_dir.empty()) return;
  const std::string key = tfrecordfs::RealPath(path).value_or(path);
  ::unlink(CachePath(key).c_str());
}

std::shared_ptr<const ShardIndex> IndexStore::Replaced(const std::string& path,
                                                       const std::string& mount_path,
                                                       source::Codec codec,
                                                       const std::vector<uint64_t>* offsets,
                                                       WalkedShard* walked) {
  const bool use_cache =
      !options_.write_shared && !options_.write_beside && !options_.cache_dir.empty();
  const std::string real_path = tfrecordfs::RealPath(path).value_or(path);
  std::vector<std::string> others;  // index files of the old shard that exist
  for (const std::string& f : {BesidePath(path), options_.shared_dir.empty() || mount_path.empty()
                                                     ? std::string()
                                                     : SharedPath(mount_path)}) {
    if (!f.empty() && ::access(f.c_str(), F_OK) == 0) others.push_back(f);
  }
  std::optional<IndexFile> file;
  std::shared_ptr<const source::CheckpointTable> table;  // GZIP / ZLIB
  struct stat st;
  if ((codec == source::Codec::kGzip || codec == source::Codec::kZlib) && offsets != nullptr &&
      walked != nullptr && walked->checkpoints != nullptr && walked->checkpoints->codec == codec &&
      walked->walk.offsets == *offsets) {
    // The check after write inflated the whole new file and found these
    // records (the offsets the rewrite wrote), these checkpoints and
    // windows: what WalkShard would find, without inflating it again.
    auto fd = OpenFile(path, O_RDONLY | O_CLOEXEC);
    if (fd.ok() && ::fstat(fd->get(), &st) == 0) {
      auto f = Fingerprint(fd->get(), path, real_path, st, std::move(walked->walk),
                           walked->checkpoints.get());
      if (f.ok()) {
        file = std::move(*f);
        file->windows = std::move(walked->windows_blob);
        table = std::move(walked->checkpoints);
      } else {
        log::Warning(path,
                     ": cannot index the rewritten shard from its check: ", f.status().message());
      }
    }
  } else if (codec == source::Codec::kNone && offsets != nullptr && !offsets->empty()) {
    auto fd = OpenFile(path, O_RDONLY | O_CLOEXEC);
    if (fd.ok() && ::fstat(fd->get(), &st) == 0) {
      record::WalkResult walk;
      walk.offsets = *offsets;
      walk.file_size = static_cast<uint64_t>(st.st_size);
      auto f = Fingerprint(fd->get(), path, real_path, st, std::move(walk), nullptr);
      if (f.ok()) {
        file = std::move(*f);
      } else {
        log::Warning(path,
                     ": cannot index the rewritten shard from its offsets: ", f.status().message());
      }
    }
  }
  if (!file) {
    if (use_cache) ::unlink(CachePath(real_path).c_str());
    for (const std::string& f : others) {
      if (::unlink(f.c_str()) == 0) {
        log::Info("removed ", f, ", the index of ", path, " before its rewrite");
      } else {
        log::Warning("cannot remove ", f, ", the index of ", path,
                     " before its rewrite: ", std::strerror(errno), " (found stale and ignored)");
      }
    }
    return nullptr;
  }
  if (use_cache && Save(CachePath(real_path), *file).ok() && table != nullptr) {
    // As Load: the windows now live in the index file, not in memory.
    auto t = std::make_shared<source::CheckpointTable>(*table);
    t->windows =
        source::Windows::InFile(CachePath(real_path), EncodedMainSize(*file), file->windows.size());
    table = std::move(t);
  }
  const std::string bytes = EncodeIndexFile(*file);
  for (const std::string& f : others) {
    if (auto s = WriteFileAtomically(f, bytes); s.ok()) {
      log::Info("rewrote ", f, ", the index of ", path);
    } else {
      log::Warning("cannot rewrite ", f, ", the index of ", path,
                   " before its rewrite: ", s.message(), " (found stale and ignored)");
    }
  }
  const uint64_t size = file->file_size;
  return std::make_shared<const ShardIndex>(path, size, MtimeNs(st), std::move(file->walk),
                                            std::move(table));
}

std::shared_ptr<const ShardIndex> FollowRewrite(IndexStore* store, const std::string& path,
                                                const std::string& mount_path,
                                                const std::vector<uint64_t>* offsets,
                                                WalkedShard* checked) {
  source::Codec codec = source::Codec::kNone;
  std::vector<uint64_t> walked;
  {
    auto fd = OpenFile(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (!fd.ok() || ::fstat(fd->get(), &st) != 0) {
      log::Warning(path, ": cannot open the rewritten shard to update its indexes: ",
                   fd.ok() ? std::strerror(errno) : fd.status().message());
      return nullptr;
    }
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    if (auto probe = ProbeFile(fd->get(), path, size, &codec); !probe.ok()) {
      log::Warning(path, ": ", probe.status().message());
      return nullptr;
    }
    const bool needed =
        HasDaliIndex(path) ||
        (store != nullptr && ::access(IndexStore::BesidePath(path).c_str(), F_OK) == 0);
    if (offsets == nullptr && codec == source::Codec::kNone && needed) {
      auto walk = WalkShard(fd->get(), path, size, codec, source::kDefaultSpan, nullptr,
                            WalkMode::kHeaders);
      if (walk.ok() && walk->walk.problems.empty()) {
        walked = std::move(walk->walk.offsets);
        offsets = &walked;
      }
    }
  }
  std::shared_ptr<const ShardIndex> out;
  if (store != nullptr) out = store->Replaced(path, mount_path, codec, offsets, checked);
  if (codec == source::Codec::kNone && offsets != nullptr) {
    auto dali = FollowDaliIndex(path, *offsets);
    if (!dali.ok()) {
      log::Warning(path, ": cannot rewrite its DALI index: ", dali.status().message());
    } else if (*dali) {
      log::Info("rewrote ", **dali, ", the DALI index of ", path);
    }
  }
  return out;
}

std::string IndexStore::BesidePath(const std::string& shard_path) {
  return absl::StrCat(shard_path, kIndexSuffix);
}

absl::Status IndexStore::Save(const std::string& target, const IndexFile& file,
                              const source::ObjectReader* beside_object) {
  if (beside_object != nullptr) {
    // Beside an object: one PUT (stores replace an object whole, so readers
    // see the old index or the new one, never a torn one).
    absl::Status s = beside_object->WriteBeside(kIndexSuffix, EncodeIndexFile(file));
    if (!s.ok()) save_failures_.fetch_add(1, std::memory_order_relaxed);
    return s;
  }
  const bool to_cache = !options_.write_shared && !options_.write_beside;
  absl::Status s;
  if (!to_cache) {
    s = MakeDirs(Dirname(target), 0755);
  } else if (cache_unwritable_.load(std::memory_order_relaxed)) {
    s = absl::UnavailableError("the index cache is not writable");
  } else {
    std::call_once(made_cache_dir_,
                   [&] { cache_dir_status_ = MakeDirs(options_.cache_dir, 0755); });
    s = cache_dir_status_;
  }
  if (s.ok()) {
    // In pieces: the offsets table (8 bytes a record) is written from the
    // walk's own vector, not copied into one string first.
    const EncodedIndexFile encoded = EncodeIndexFilePieces(file);
    const auto pieces = encoded.pieces();
    s = options_.durable ? WriteFileAtomically(target, pieces) : WriteFileReplacing(target, pieces);
  }
  if (!s.ok()) {
    save_failures_.fetch_add(1, std::memory_order_relaxed);
    if (to_cache && !cache_unwritable_.exchange(true)) {
      log::Warning("cannot write the index cache in ", options_.cache_dir, ": ", s.message(),
                   "; going on without saving indexes (-o noindexcache silences this)");
    }
  }
  return s;
}

absl::StatusOr<std::shared_ptr<const ShardIndex>> IndexStore::Load(
    source::StoredBytes fd, const std::string& path, const std::string& mount_path,
    const struct stat& st, source::Codec codec, LoadInfo* info) {
  LoadInfo local;
  if (info == nullptr) info = &local;
  *info = LoadInfo();
  const bool use_cache =
      !options_.write_shared && !options_.write_beside && !options_.cache_dir.empty();
  const std::string real_path = RealPath(fd, path);
  const uint64_t size = static_cast<uint64_t>(st.st_size);

  struct Candidate {
    std::string file;
    bool shared;  // compared by base name, not real path
    bool beside = false;
    // An object's `<object>.tfri`: read with ObjectReader::ReadBeside (file
    // is its URL, for messages).
    const source::ObjectReader* object = nullptr;
  };
  std::vector<Candidate> candidates;
  if (!options_.shared_dir.empty()) candidates.push_back({SharedPath(mount_path), true});
  const source::ObjectReader* object = fd.object();
  if (options_.beside || options_.write_beside)
    candidates.push_back({BesidePath(path), true, true, object});
  if (use_cache) candidates.push_back({CachePath(real_path), false});
  const std::string target = options_.write_shared   ? SharedPath(mount_path)
                             : options_.write_beside ? BesidePath(path)
                             : use_cache             ? CachePath(real_path)
                                                     : "";

  std::optional<IndexFile> base;  // a clean index of a prefix of the shard
  std::string why;
  for (const Candidate& c : options_.force_walk ? std::vector<Candidate>{} : candidates) {
    uint64_t stored_size = 0;
    std::string whole;  // an object's index, read whole
    source::FileIdentity identity;
    bool only_ours = false;  // an object's: others' (its owner is not known)
    auto bytes = c.object != nullptr
                     ? ReadObjectIndexMain(*c.object, size, &stored_size, &whole)
                     : ReadIndexMain(c.file, size, &stored_size, &identity, &only_ours);
    if (!bytes.ok()) {
      if (!absl::IsNotFound(bytes.status())) {
        absl::StrAppend(&why, why.empty() ? "" : "; ", c.file, ": ", bytes.status().message());
      }
      continue;
    }
    auto file = DecodeIndexFile(*bytes);
    if (file.ok() && file->main_size + file->windows_size != stored_size) {
      file = absl::DataLossError("not a valid index file: the windows area is cut short");  // raced
    }
    if (!file.ok()) {
      absl::StrAppend(&why, why.empty() ? "" : "; ", c.file, ": ", file.status().message());
      continue;
    }
    Check check = CheckStored(*file, fd, path, real_path, c.shared, st, codec);
    if (check.verdict == Verdict::kValid && c.shared && options_.verify_shared) {
      // index_dir or beside files others may write: follow the header chain
      // (large sequential reads) before numbering records from it.
      auto chain = WalkShard(fd, path, size, codec, options_.span, nullptr, WalkMode::kBlocks,
                             options_.max_records);
      if (!chain.ok()) return chain.status();
      if (chain->walk.offsets != file->walk.offsets) {
        log::Warning(path, ": ", c.file, " does not follow the shard's header chain; not used");
        absl::StrAppend(&why, why.empty() ? "" : "; ", c.file,
                        ": stale (the header chain differs)");
        continue;
      }
    }
    std::shared_ptr<const source::CheckpointTable> table;
    if (check.verdict == Verdict::kValid && codec != source::Codec::kNone) {
      auto t = std::make_shared<source::CheckpointTable>();
      t->codec = codec;
      t->data_size = file->data_size;
      t->points = std::move(file->checkpoints);
      t->windows =
          c.object != nullptr
              ? source::Windows::InMemory(whole.substr(static_cast<size_t>(file->main_size),
                                                       static_cast<size_t>(file->windows_size)))
              : source::Windows::InFile(c.file, file->main_size, file->windows_size, identity);
      // index_dir and beside files may be others' to write: a forged
      // checkpoint (CRC and all) would serve other bytes of the stream. The
      // commands that vouch for an index (index_verify, `index`) check every
      // one; a mount checks them lazily, before a read resumes at one (which
      // costs an inflate of the stream before it), unless the file is one
      // only the mounting user or root could have written (OnlyOursToWrite:
      // then a read inflates from the checkpoint before it, as from the
      // cache; its windows are read from that file only, Windows::InFile).
      // (A SNAPPY table is checked by every block's own framing, as `verify`
      // says: VerifyCheckpoints inflates, and would refuse every one; an
      // ArrayRecord table's points are chunks, each checked by its hashes
      // and its framed size when read: arrayrecord/file.h.)
      t->trusted = !c.shared || only_ours;
      if (c.shared && codec != source::Codec::kSnappy && codec != source::Codec::kArrayRecord &&
          (options_.verify_shared || options_.write_shared || options_.write_beside)) {
        absl::Status v = source::VerifyCheckpoints(fd, path, size, *t);
        if (!v.ok() && !absl::IsDataLoss(v)) return v;
        if (!v.ok()) {
          log::Warning(path, ": ", c.file, " does not match the shard (", v.message(),
                       "); not used");
          absl::StrAppend(&why, why.empty() ? "" : "; ", c.file, ": stale (", v.message(), ")");
          continue;
        }
        t->trusted = true;
      }
      table = std::move(t);
    }
    if (check.verdict == Verdict::kValid && file->num_records() > options_.max_records) {
      // Made with a higher limit: refused like a walk that meets as many.
      return record::TooManyRecords(path, options_.max_records,
                                    file->walk.offsets[options_.max_records],
                                    codec != source::Codec::kNone);
    }
    if (check.verdict == Verdict::kValid) {
      info->source = c.beside   ? IndexSource::kBeside
                     : c.shared ? IndexSource::kSharedDir
                                : IndexSource::kCache;
      if (c.beside) from_beside_.fetch_add(1, std::memory_order_relaxed);
      info->stored_path = c.file;
      (c.shared ? from_shared_ : from_cache_).fetch_add(1, std::memory_order_relaxed);
      records_.fetch_add(file->num_records(), std::memory_order_relaxed);
      bytes_.fetch_add(size, std::memory_order_relaxed);
      log::Debug(path, ": index loaded ",
                 c.beside   ? "from beside the shard"
                 : c.shared ? "from the index_dir"
                            : "from the cache",
                 " (", c.file, "): ", file->num_records(), " record(s)");
      return std::make_shared<const ShardIndex>(path, size, MtimeNs(st), std::move(file->walk),
                                                std::move(table));
    }
    if (check.verdict == Verdict::kGrown) {
      if (!base) base = std::move(*file);
      absl::StrAppend(&why, why.empty() ? "" : "; ", c.file, ": the shard grew");
      continue;
    }
    absl::StrAppend(&why, why.empty() ? "" : "; ", c.file, ": stale (", check.why, ")");
  }
  if (options_.force_walk) why = "forced";
  if (why.empty()) why = "no stored index";

  std::optional<record::WalkResult> walk;
  if (base) {
    auto tail = WalkGrownTail(fd, path, *base, size, options_.max_records);
    if (tail.ok()) {
      walk = std::move(*tail);
      info->source = IndexSource::kGrown;
      grown_.fetch_add(1, std::memory_order_relaxed);
    } else if (!absl::IsNotFound(tail.status())) {
      return tail.status();
    }
  }
  std::shared_ptr<const source::CheckpointTable> table;
  std::string windows;
  if (!walk) {
    std::function<void(uint64_t)> progress;
    if (options_.on_walk_progress) {
      progress = [&](uint64_t walked) { options_.on_walk_progress(path, walked); };
    }
    auto full = WalkShard(fd, path, size, codec, options_.span, progress, options_.walk_mode,
                          options_.max_records);
    if (!full.ok()) return full.status();
    walk = std::move(full->walk);
    table = std::move(full->checkpoints);
    windows = std::move(full->windows_blob);
    info->source = IndexSource::kWalked;
    walked_.fetch_add(1, std::memory_order_relaxed);
  }
  info->why_walked = why;
  log::Debug(path, ": ", info->source == IndexSource::kGrown ? "walked the new tail" : "walked",
             " (", why, ")");
  auto file = Fingerprint(fd, path, real_path, st, std::move(*walk), table.get());
  if (!file.ok()) return file.status();
  file->windows = std::move(windows);
  records_.fetch_add(file->num_records(), std::memory_order_relaxed);
  bytes_.fetch_add(size, std::memory_order_relaxed);
  if (!target.empty()) {
    info->save_status = Save(target, *file, options_.write_beside ? object : nullptr);
    if (info->save_status.ok()) {
      info->stored_path = target;
      if (table && !(options_.write_beside && object != nullptr)) {
        // The windows now live in the index file: drop them from memory.
        auto t = std::make_shared<source::CheckpointTable>(*table);
        const uint64_t main_size = EncodedMainSize(*file);
        t->windows = source::Windows::InFile(target, main_size, file->windows.size());
        table = std::move(t);
      }
    }
  }
  info->index_bytes = EncodedMainSize(*file) + file->windows.size();
  return std::make_shared<const ShardIndex>(path, size, MtimeNs(st), std::move(file->walk),
                                            std::move(table));
}

StoreStats IndexStore::stats() const {
  StoreStats s;
  s.from_shared = from_shared_.load();
  s.from_beside = from_beside_.load();
  s.from_cache = from_cache_.load();
  s.grown = grown_.load();
  s.walked = walked_.load();
  s.records = records_.load();
  s.bytes = bytes_.load();
  s.save_failures = save_failures_.load();
  return s;
}

std::string IndexStore::Summary() const {
  const StoreStats s = stats();
  std::string out =
      absl::StrCat(s.from_shared + s.from_cache + s.grown + s.walked, " shard index(es): ");
  std::vector<std::string> parts;
  if (s.from_shared > s.from_beside) {
    parts.push_back(
        absl::StrCat(s.from_shared - s.from_beside, " from index_dir ", options_.shared_dir));
  }
  if (s.from_beside) parts.push_back(absl::StrCat(s.from_beside, " from beside the shards"));
  if (s.from_cache)
    parts.push_back(absl::StrCat(s.from_cache, " from the cache ", options_.cache_dir));
  if (s.grown) parts.push_back(absl::StrCat(s.grown, " grown (tail walked)"));
  if (s.walked) parts.push_back(absl::StrCat(s.walked, " walked"));
  if (parts.empty()) parts.push_back("none");
  for (size_t i = 0; i < parts.size(); ++i) absl::StrAppend(&out, i ? ", " : "", parts[i]);
  if (s.save_failures) absl::StrAppend(&out, "; ", s.save_failures, " not saved");
  return out;
}

}  // namespace tfrecordfs::index
