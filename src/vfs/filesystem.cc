#include "tfrecordfs/vfs/filesystem.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/sequence.h"
#include "tfrecordfs/index/index_file.h"
#include "tfrecordfs/tensor/png.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/vfs/node_id.h"

namespace tfrecordfs::vfs {

namespace {

enum class NodeType { kDir, kPlainFile, kShard, kStaging };

struct TreeNode {
  std::string name;
  uint64_t parent = 0;
  NodeType type = NodeType::kDir;
  std::vector<uint64_t> children;  // tree indices, sorted by name
  std::string real_path;
  struct stat st = {};
  uint64_t shard = 0;  // kShard
};

constexpr mode_t kDirMode = S_IFDIR | 0555;
constexpr mode_t kFileMode = S_IFREG | 0444;

int Digits(uint64_t n) {
  int d = 1;
  while (n >= 10) {
    n /= 10;
    ++d;
  }
  return d;
}

}  // namespace

class Filesystem::Tree {
 public:
  std::vector<TreeNode> nodes;
  // Lazily opened descriptors of plain files, by tree index.
  std::mutex mu;
  absl::flat_hash_map<uint64_t, int> plain_fds ABSL_GUARDED_BY(mu);

  std::optional<uint64_t> Find(uint64_t dir, absl::string_view name) const {
    const auto& ch = nodes[dir].children;
    auto it = std::lower_bound(ch.begin(), ch.end(), name,
                               [&](uint64_t i, absl::string_view n) { return nodes[i].name < n; });
    if (it == ch.end() || nodes[*it].name != name) return std::nullopt;
    return *it;
  }

  // The open descriptor of plain file i. Opened outside the lock, without
  // blocking (a source replaced by a FIFO must not hang this reader, nor
  // every other reader behind the lock), and only a regular file is read,
  // as at scan time.
  absl::StatusOr<int> PlainFd(uint64_t i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = plain_fds.find(i);
      if (it != plain_fds.end()) return it->second;
    }
    const std::string& path = nodes[i].real_path;
    auto fd = OpenFile(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (!fd.ok()) return fd.status();
    struct stat st;
    if (::fstat(fd->get(), &st) != 0) return ErrnoError(errno, path);
    if (!S_ISREG(st.st_mode)) {
      log::Error(path, ": no longer a regular file; sources must not change under the mount "
                       "(remount to see it as it is now)");
      return PosixError(EIO, absl::StrCat(path, ": not a regular file"));
    }
    std::lock_guard<std::mutex> lock(mu);
    auto [it, inserted] = plain_fds.emplace(i, fd->get());
    if (inserted) fd->release();  // else another reader won: ours closes
    return it->second;
  }

  ~Tree() {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [i, fd] : plain_fds) ::close(fd);
  }
};

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

// Adds `path` (already stat'ed) under tree node `parent` as `name`, recursing
// into directories. `visited` breaks symlink loops.
absl::Status AddPath(Filesystem::Tree* tree, uint64_t parent, const std::string& name,
                     const std::string& path, const struct stat& st,
                     std::set<std::pair<dev_t, ino_t>>* visited) {
  if (tree->Find(parent, name)) {
    return absl::AlreadyExistsError(
        absl::StrCat("two sources provide '", name, "' in the same directory of the mount (",
                     path, " and ", tree->nodes[*tree->Find(parent, name)].real_path, ")"));
  }
  const uint64_t self = tree->nodes.size();
  TreeNode node;
  node.name = name;
  node.parent = parent;
  node.real_path = path;
  node.st = st;
  node.type = S_ISDIR(st.st_mode) ? NodeType::kDir : NodeType::kPlainFile;
  tree->nodes.push_back(std::move(node));
  auto& ch = tree->nodes[parent].children;
  ch.insert(std::lower_bound(ch.begin(), ch.end(), name,
                             [&](uint64_t i, const std::string& n) {
                               return tree->nodes[i].name < n;
                             }),
            self);
  if (!S_ISDIR(st.st_mode)) return absl::OkStatus();
  if (!visited->insert({st.st_dev, st.st_ino}).second) {
    log::Warning(path, ": directory already mirrored (symlink loop?); shown empty");
    return absl::OkStatus();
  }
  DIR* d = ::opendir(path.c_str());
  if (!d) return ErrnoError(errno, absl::StrCat("cannot list source directory ", path));
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    absl::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    names.emplace_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  DropIndexesBesideShards(&names);
  for (const std::string& n : names) {
    const std::string child = absl::StrCat(path, "/", n);
    struct stat cst;
    if (::stat(child.c_str(), &cst) != 0) {
      log::Warning(child, ": skipped: ", std::strerror(errno));
      continue;
    }
    if (!S_ISDIR(cst.st_mode) && !S_ISREG(cst.st_mode)) continue;  // fifos, sockets, devices
    if (auto s = AddPath(tree, self, n, child, cst, visited); !s.ok()) return s;
  }
  return absl::OkStatus();
}

struct Probed {
  absl::Status status;
  bool is_shard = false;
  // What the shard file was when indexed: its source reopens it on demand
  // (no descriptor is held per shard) and checks it is still that file.
  source::FileIdentity identity;
  std::shared_ptr<const index::ShardIndex> index;
};

// The node's path inside the mount ("train/x.tfrecord").
std::string MountPath(const Filesystem::Tree& tree, uint64_t i) {
  std::vector<uint64_t> chain;
  for (; i != 0; i = tree.nodes[i].parent) chain.push_back(i);
  std::string out;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    absl::StrAppend(&out, out.empty() ? "" : "/", tree.nodes[*it].name);
  }
  return out;
}

Probed ProbeAndIndex(const Filesystem::Tree& tree, uint64_t i, const Options& options) {
  const TreeNode& node = tree.nodes[i];
  Probed out;
  auto fd = OpenFile(node.real_path, O_RDONLY);
  if (!fd.ok()) {
    out.status = fd.status();
    return out;
  }
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) {
    out.status = ErrnoError(errno, node.real_path);
    return out;
  }
  source::Codec codec = source::Codec::kNone;
  auto probe =
      index::ProbeFile(fd->get(), node.real_path, static_cast<uint64_t>(st.st_size), &codec);
  if (!probe.ok()) {
    out.status = probe.status();
    return out;
  }
  if (*probe != index::Probe::kShard) {
    if (codec != source::Codec::kNone) {
      log::Warning(node.real_path, ": a ", source::CodecName(codec),
                   " stream whose first 12 decompressed bytes are not a record header with a "
                   "valid length CRC: it holds no TFRecord; shown as a plain file");
    } else if (index::LooksLikeShardName(node.name)) {
      log::Warning(node.real_path,
                   ": named like a TFRecord shard, but its first 12 bytes are not a record "
                   "header with a valid length CRC (byte offset 0); shown as a plain file");
    }
    return out;
  }
  auto idx = options.load_index
                 ? options.load_index(fd->get(), node.real_path, MountPath(tree, i), st, codec)
                 : index::BuildShardIndex(fd->get(), node.real_path, st, codec);
  if (!idx.ok()) {
    out.status = idx.status();
    return out;
  }
  out.is_shard = true;
  out.index = std::move(*idx);
  out.identity = source::FileIdentity::Of(st);
  return out;
}

}  // namespace

Filesystem::Filesystem(const Options& options)
    : tree_(std::make_unique<Tree>()),
      fd_cache_(options.max_open_shards),
      inflate_cache_(options.inflate_cache_bytes) {}

Filesystem::~Filesystem() = default;

absl::StatusOr<std::unique_ptr<Filesystem>> Filesystem::Create(const Options& options) {
  if (options.sources.empty()) return absl::InvalidArgumentError("no SOURCE given");
  std::unique_ptr<Filesystem> fs(new Filesystem(options));
  Tree& tree = *fs->tree_;
  tree.nodes.emplace_back();  // the root
  tree.nodes[0].type = NodeType::kDir;
  ::clock_gettime(CLOCK_REALTIME, &tree.nodes[0].st.st_mtim);
  std::set<std::pair<dev_t, ino_t>> visited;
  for (const std::string& src : options.sources) {
    struct stat st;
    if (::stat(src.c_str(), &st) != 0) {
      return ErrnoError(errno, absl::StrCat("source ", src));
    }
    if (S_ISDIR(st.st_mode)) {
      // A directory source's entries appear at the mount root.
      visited.insert({st.st_dev, st.st_ino});
      DIR* d = ::opendir(src.c_str());
      if (!d) return ErrnoError(errno, absl::StrCat("cannot list source directory ", src));
      std::vector<std::string> names;
      while (dirent* e = ::readdir(d)) {
        absl::string_view n = e->d_name;
        if (n != "." && n != "..") names.emplace_back(n);
      }
      ::closedir(d);
      std::sort(names.begin(), names.end());
      DropIndexesBesideShards(&names);
  DropIndexesBesideShards(&names);
      for (const std::string& n : names) {
        const std::string child = absl::StrCat(src, src.back() == '/' ? "" : "/", n);
        struct stat cst;
        if (::stat(child.c_str(), &cst) != 0) {
          log::Warning(child, ": skipped: ", std::strerror(errno));
          continue;
        }
        if (!S_ISDIR(cst.st_mode) && !S_ISREG(cst.st_mode)) continue;
        if (auto s = AddPath(&tree, 0, n, child, cst, &visited); !s.ok()) return s;
      }
    } else if (S_ISREG(st.st_mode)) {
      if (auto s = AddPath(&tree, 0, Basename(src), src, st, &visited); !s.ok()) return s;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("source ", src, " is neither a regular file nor a directory"));
    }
  }

  // Probe every regular file and walk the shards, in parallel.
  std::vector<uint64_t> files;
  for (uint64_t i = 0; i < tree.nodes.size(); ++i) {
    if (tree.nodes[i].type == NodeType::kPlainFile) files.push_back(i);
  }
  std::vector<Probed> probed(files.size());
  int threads = options.index_threads;
  // Walks and reads wait on I/O, not CPU, where every read is a network
  // round trip: keep many shards in flight there, and read ahead.
  const bool remote = std::any_of(options.sources.begin(), options.sources.end(),
                                  [](const std::string& p) { return source::OnRemoteStorage(p); });
  if (remote && options.readahead_bytes > 0) {
    fs->readahead_ = std::make_unique<source::Readahead>(options.readahead_bytes,
                                                         kReadaheadThreads);
  }
  if (threads <= 0) {
    threads = remote ? kRemoteIndexThreads
                     : std::clamp<int>(static_cast<int>(std::thread::hardware_concurrency()), 1, 16);
  }
  threads = std::min<int>(threads, std::max<size_t>(files.size(), 1));
  // Shards are opened on demand, at most max_open_shards at once (plus one
  // per walk thread while indexing): lift the soft limit, and grow the
  // table before the threads exist (growing it under them waits for an RCU
  // grace period each time).
  const size_t allowed =
      ReserveDescriptors(std::min(files.size(), options.max_open_shards) + threads + 64);
  // Half of what the limit allows at most: staged files, plain source
  // files, index files and FUSE need the rest.
  fs->fd_cache_.set_capacity(std::min(options.max_open_shards, std::max<size_t>(allowed / 2, 16)));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t k; (k = next.fetch_add(1)) < files.size();) {
      probed[k] = ProbeAndIndex(tree, files[k], options);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();

  for (size_t k = 0; k < files.size(); ++k) {
    Probed& p = probed[k];
    TreeNode& node = tree.nodes[files[k]];
    if (!p.status.ok()) return p.status;
    if (!p.is_shard) continue;
    if (fs->shards_.size() >= kMaxShards) {
      return absl::ResourceExhaustedError(
          absl::StrCat("more than ", kMaxShards, " shards in the sources"));
    }
    for (const std::string& line : index::FormatProblems(node.real_path, p.index->problems())) {
      log::Warning(line);
    }
    if (!p.index->problems().empty()) {
      log::Warning(node.real_path, ": damaged shard: ", p.index->num_records(),
                   " record(s) indexed");
    }
    node.type = NodeType::kShard;
    node.shard = fs->shards_.size();
    fs->shard_tree_node_.push_back(files[k]);
    uint64_t n = p.index->num_records();
    if (n > kMaxRecordsPerShard) {
      log::Warning(node.real_path, ": only the first ", kMaxRecordsPerShard, " of ", n,
                   " records are shown");
    }
    fs->shard_name_width_.push_back(Digits(n == 0 ? 0 : n - 1));
    const index::ShardIndex& idx = *p.index;
    source::ShardFile file(idx.path(), p.identity, &fs->fd_cache_);
    std::unique_ptr<source::ShardSource> src;
    if (idx.checkpoints()) {
      src = std::make_unique<source::InflateSource>(std::move(file), idx.file_size(),
                                                    idx.checkpoints(), &fs->inflate_cache_);
    } else {
      src = std::make_unique<source::PlainSource>(std::move(file), idx.file_size());
    }
    if (fs->readahead_) {
      src = std::make_unique<source::ReadaheadSource>(std::move(src), fs->readahead_.get());
    }
    fs->sources_.push_back(std::move(src));
    fs->shards_.push_back(std::move(p.index));
  }
  fs->cache_ = std::make_unique<RecordCache>(options.cache_records, options.cache_bytes);
  for (const auto& idx : fs->shards_) {
    fs->checked_.push_back(std::make_unique<std::atomic<uint64_t>[]>(CheckedWords(*idx)));  // zeroed
    fs->sample_rounds_ =
        std::max(fs->sample_rounds_, std::min<uint64_t>(idx->num_records(), kMaxRecordsPerShard));
  }
  fs->sample_per_call_ = options.kind_sample_per_call;
  fs->on_index_mismatch_ = options.on_index_mismatch;
  {
    std::lock_guard<std::mutex> lock(fs->sample_mu_);
    fs->sample_left_ = options.kind_sample_total;
    fs->sample_done_ = options.kind_sample_per_call.records == 0;
  }
  if (options.staging != nullptr) {
    if (auto clash = tree.Find(0, options.staging_name)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "the staging folder name '", options.staging_name, "' clashes with ",
          tree.nodes[*clash].real_path, " at the mount root; choose another with -o staging=NAME"));
    }
    if (auto s = staging::CheckName(options.staging_name); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid staging folder name '", options.staging_name, "'"));
    }
    fs->staging_ = options.staging;
    TreeNode node;
    node.name = options.staging_name;
    node.type = NodeType::kStaging;
    fs->staging_tree_node_ = tree.nodes.size();
    tree.nodes.push_back(std::move(node));
    auto& ch = tree.nodes[0].children;
    ch.insert(std::lower_bound(ch.begin(), ch.end(), options.staging_name,
                               [&](uint64_t i, const std::string& n) {
                                 return tree.nodes[i].name < n;
                               }),
              fs->staging_tree_node_);
  }
  return fs;
}

std::string Filesystem::RecordName(uint64_t shard, uint64_t record) const {
  std::string digits = absl::StrCat(record);
  const size_t width = static_cast<size_t>(shard_name_width_[shard]);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

size_t Filesystem::CheckedWords(const index::ShardIndex& idx) { return (idx.num_records() + 63) / 64; }

bool Filesystem::Checked(uint64_t shard, uint64_t record) const {
  if (shard >= checked_.size() || record >= shards_[shard]->num_records()) return false;
  return (checked_[shard][record / 64].load(std::memory_order_relaxed) >> (record % 64)) & 1;
}

void Filesystem::MarkChecked(uint64_t shard, uint64_t record) {
  checked_[shard][record / 64].fetch_or(uint64_t{1} << (record % 64), std::memory_order_relaxed);
}

void Filesystem::IndexDisagrees(uint64_t shard, uint64_t record) {
  const index::ShardIndex& idx = *shards_[shard];
  // A record next to damage the walk recorded is expected not to frame.
  for (const auto& p : idx.problems()) {
    if (p.offset == idx.begin(record) || p.offset == idx.end(record)) return;
  }
  log::Error("the index of ", idx.path(), " disagrees with the shard at record ", record,
             " (byte offset ", idx.begin(record), "): its stored index is dropped; remount to "
             "index the shard again");
  if (on_index_mismatch_) on_index_mismatch_(idx.path());
}

Attr Filesystem::RecordDirAttr(uint64_t shard, uint64_t record) const {
  Attr a;
  a.ino = RecordId(shard, record, 0);
  a.mode = kDirMode;
  a.nlink = 1;
  a.mtime = tree_->nodes[shard_tree_node_[shard]].st.st_mtim;
  return a;
}

Attr Filesystem::EntryAttr(uint64_t shard, uint64_t record, uint32_t entry,
                           const ParsedRecord& rec) const {
  const naming::Entry& e = rec.layout.entries[entry];
  Attr a;
  a.ino = RecordId(shard, record, entry);
  a.mode = e.is_dir ? kDirMode : kFileMode;
  a.size = e.is_dir ? 0 : e.size();
  a.nlink = 1;
  a.mtime = tree_->nodes[shard_tree_node_[shard]].st.st_mtim;
  return a;
}

absl::StatusOr<std::shared_ptr<const ParsedRecord>> Filesystem::Parse(uint64_t shard,
                                                                       uint64_t record) {
  const uint64_t key = (shard << kRecordBits) | record;
  std::shared_ptr<const ParsedRecord> rec = cache_->Get(key);
  if (!rec) {
    auto parsed = std::make_shared<ParsedRecord>();
    const index::ShardIndex& idx = *shards_[shard];
    parsed->data_offset = idx.begin(record) + record::kHeaderSize;
    std::unique_lock<std::mutex> big;
    if (idx.end(record) - idx.begin(record) > kBigRecord) {
      // Parsing holds the whole record in memory: one huge record at a time,
      // so concurrent listings of 2 GiB records cannot multiply that.
      big = std::unique_lock<std::mutex>(big_record_mu_);
    }
    auto data = record::ReadRecord(*sources_[shard], record, idx.begin(record), idx.end(record));
    if (!data.ok() && record::IsFramingMismatch(data.status())) IndexDisagrees(shard, record);
    absl::StatusOr<example::FeatureTable> table = absl::UnknownError("not read");
    absl::StatusOr<example::SequenceTable> seq = absl::UnknownError("not tried");
    if (data.ok()) {
      // An Example first: a SequenceExample without feature_lists is byte
      // for byte one (example/sequence.h).
      table = example::DecodeExample(*data);
      if (!table.ok()) seq = example::DecodeSequenceExample(*data);
    }
    if (!data.ok()) {
      parsed->status = data.status();
      log::Error(data.status().message());
      NoteDamage(shard, record, data.status().message());
    } else if (table.ok() || seq.ok()) {
      if (table.ok()) {
        LearnKinds(*table);
        parsed->layout = naming::LayoutExample(*table, *data);
      } else {
        LearnKinds(*seq);
        parsed->layout = naming::LayoutSequence(*seq, *data);
      }
      if (parsed->layout.entries.size() > kMaxEntriesPerRecord) {
        log::Warning(idx.path(), ": record ", record, " at byte offset ", idx.begin(record),
                     ": ", parsed->layout.entries.size(),
                     " files are more than one record can show; shown raw as ",
                     naming::kRawRecordName);
        parsed->layout = naming::LayoutRaw(data->size());
      }
    } else {
      log::Debug(idx.path(), ": record ", record, " at byte offset ", idx.begin(record), ": ",
                 table.status().message(), "; ", seq.status().message(), "; shown raw");
      parsed->layout = naming::LayoutRaw(data->size());
    }
    // Cached layouts are charged by their memory: no growth slack.
    parsed->layout.entries.shrink_to_fit();
    records_read_.fetch_add(1, std::memory_order_relaxed);
    if (parsed->status.ok()) MarkChecked(shard, record);
    rec = parsed;
    cache_->Put(key, rec);
  }
  if (!rec->status.ok()) return rec->status;
  return rec;
}

absl::StatusOr<Attr> Filesystem::GetAttr(uint64_t ino) {
  switch (SpaceOf(ino)) {
    case Space::kTree: {
      const uint64_t i = TreeIndex(ino);
      if (i >= tree_->nodes.size()) return absl::NotFoundError("stale node id");
      const TreeNode& n = tree_->nodes[i];
      if (n.type == NodeType::kStaging) return GetAttr(StagingId(staging_->root()));
      Attr a;
      a.ino = ino;
      a.mtime = n.st.st_mtim;
      if (n.type == NodeType::kPlainFile) {
        a.mode = kFileMode;
        a.size = static_cast<uint64_t>(n.st.st_size);
      } else if (n.type == NodeType::kShard) {
        a.mode = kDirMode;
        a.nlink = 2 + std::min<uint64_t>(shards_[n.shard]->num_records(), kMaxRecordsPerShard);
      } else {
        a.mode = i == 0 && staging_ ? (S_IFDIR | 0755) : kDirMode;
        a.nlink = 2;
        for (uint64_t c : n.children) a.nlink += tree_->nodes[c].type != NodeType::kPlainFile;
      }
      return a;
    }
    case Space::kRecord: {
      const uint64_t shard = ShardOf(ino), record = RecordOf(ino);
      if (shard >= shards_.size() || record >= shards_[shard]->num_records()) {
        return absl::NotFoundError("stale node id");
      }
      if (EntryOf(ino) == 0) return RecordDirAttr(shard, record);
      auto rec = Parse(shard, record);
      if (!rec.ok()) return rec.status();
      const uint32_t entry = static_cast<uint32_t>(EntryOf(ino));
      if (entry >= (*rec)->layout.entries.size()) return absl::NotFoundError("stale node id");
      return EntryAttr(shard, record, entry, **rec);
    }
    case Space::kStaging: {
      if (!staging_) break;
      auto st = staging_->GetAttr(StagingIndex(ino));
      if (!st.ok()) return st.status();
      return StagingAttr(*st);
    }
  }
  return absl::NotFoundError("stale node id");
}

absl::StatusOr<Attr> Filesystem::Lookup(uint64_t parent, absl::string_view name) {
  switch (SpaceOf(parent)) {
    case Space::kTree: {
      const uint64_t i = TreeIndex(parent);
      if (i >= tree_->nodes.size()) return absl::NotFoundError("stale node id");
      const TreeNode& n = tree_->nodes[i];
      if (n.type == NodeType::kPlainFile) return PosixError(ENOTDIR, "not a directory");
      if (n.type == NodeType::kDir) {
        auto c = tree_->Find(i, name);
        if (!c) return absl::NotFoundError(name);
        return GetAttr(TreeId(*c));
      }
      // A shard: the name is a record index, padded or not.
      uint64_t record;
      const bool digits = !name.empty() && name.size() <= 19 &&
                          std::all_of(name.begin(), name.end(),
                                      [](char c) { return c >= '0' && c <= '9'; });
      if (!digits || !absl::SimpleAtoi(name, &record)) return absl::NotFoundError(name);
      const uint64_t count = std::min<uint64_t>(shards_[n.shard]->num_records(), kMaxRecordsPerShard);
      if (record >= count) return absl::NotFoundError(name);
      const bool canonical = name == RecordName(n.shard, record) ||
                             name == absl::StrCat(record);
      if (!canonical) return absl::NotFoundError(name);
      return RecordDirAttr(n.shard, record);
    }
    case Space::kRecord: {
      const uint64_t shard = ShardOf(parent), record = RecordOf(parent);
      if (shard >= shards_.size() || record >= shards_[shard]->num_records()) {
        return absl::NotFoundError("stale node id");
      }
      auto rec = Parse(shard, record);
      if (!rec.ok()) return rec.status();
      const uint32_t dir = static_cast<uint32_t>(EntryOf(parent));
      if (dir >= (*rec)->layout.entries.size()) return absl::NotFoundError("stale node id");
      if (!(*rec)->layout.entries[dir].is_dir) return PosixError(ENOTDIR, "not a directory");
      auto child = naming::FindChild((*rec)->layout, dir, name);
      if (!child) return absl::NotFoundError(name);
      return EntryAttr(shard, record, *child, **rec);
    }
    case Space::kStaging: {
      if (!staging_) break;
      auto st = staging_->Lookup(StagingIndex(parent), name);
      if (!st.ok()) return st.status();
      return StagingAttr(*st);
    }
  }
  return absl::NotFoundError("stale node id");
}

absl::Status Filesystem::ReadDir(uint64_t ino, uint64_t fh, uint64_t offset, const EmitFn& emit) {
  if (SpaceOf(ino) == Space::kStaging) return StagingReadDir(ino, fh, offset, emit);
  auto self = GetAttr(ino);
  if (!self.ok()) return self.status();
  if (!S_ISDIR(self->mode)) return PosixError(ENOTDIR, "not a directory");
  // "." and ".." first; ".." gets the parent's attributes when cheap, else
  // the directory's own (the kernel ignores them for "..").
  if (offset == 0) {
    if (!emit(".", *self, 1)) return absl::OkStatus();
    offset = 1;
  }
  if (offset == 1) {
    if (!emit("..", *self, 2)) return absl::OkStatus();
    offset = 2;
  }
  const uint64_t first = offset - 2;
  switch (SpaceOf(ino)) {
    case Space::kTree: {
      const TreeNode& n = tree_->nodes[TreeIndex(ino)];
      if (n.type == NodeType::kShard) {
        const uint64_t count =
            std::min<uint64_t>(shards_[n.shard]->num_records(), kMaxRecordsPerShard);
        for (uint64_t r = first; r < count; ++r) {
          if (!emit(RecordName(n.shard, r), RecordDirAttr(n.shard, r), r + 3)) break;
        }
        return absl::OkStatus();
      }
      for (uint64_t k = first; k < n.children.size(); ++k) {
        const uint64_t c = n.children[k];
        auto a = GetAttr(TreeId(c));
        if (!a.ok()) return a.status();
        if (!emit(tree_->nodes[c].name, *a, k + 3)) break;
      }
      return absl::OkStatus();
    }
    case Space::kRecord: {
      const uint64_t shard = ShardOf(ino), record = RecordOf(ino);
      auto rec = Parse(shard, record);
      if (!rec.ok()) return rec.status();
      const naming::Entry& d = (*rec)->layout.entries[EntryOf(ino)];
      for (uint64_t k = first; k < d.num_children; ++k) {
        const uint32_t c = d.first_child + static_cast<uint32_t>(k);
        if (!emit((*rec)->layout.entries[c].name, EntryAttr(shard, record, c, **rec), k + 3)) break;
      }
      return absl::OkStatus();
    }
    case Space::kStaging:
      break;
  }
  return absl::NotFoundError("stale node id");
}


namespace {

// State behind a staging file handle (fuse_file_info::fh).
struct FileHandle {
  int fd = -1;
  uint64_t node = 0;  // the store's node
  std::atomic<bool> written{false};
};

// State behind a staging directory handle: the backing directory stream.
struct DirHandle {
  std::mutex mu;
  DIR* dir ABSL_GUARDED_BY(mu) = nullptr;
};

absl::Status ReadOnly() { return PosixError(EROFS, "read-only: only the staging area is writable"); }

}  // namespace

Attr Filesystem::StagingAttr(const struct stat& st) const {
  Attr a;
  a.ino = StagingId(st.st_ino);
  a.mode = st.st_mode;
  a.size = static_cast<uint64_t>(st.st_size);
  a.nlink = st.st_nlink;
  a.mtime = st.st_mtim;
  a.atime = st.st_atim;
  a.ctime = st.st_ctim;
  return a;
}

absl::StatusOr<uint64_t> Filesystem::Open(uint64_t ino, int flags) {
  if (SpaceOf(ino) == Space::kStaging && staging_) {
    auto fd = staging_->Open(StagingIndex(ino), flags);
    if (!fd.ok()) return fd.status();
    auto* h = new FileHandle;
    h->fd = *fd;
    h->node = StagingIndex(ino);
    if (flags & O_TRUNC) h->written = true;
    return reinterpret_cast<uint64_t>(h);
  }
  const bool writes = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
  if (SpaceOf(ino) == Space::kRecord && EntryOf(ino) != 0 && Checked(ShardOf(ino), RecordOf(ino))) {
    // The common open of a warm file: the record was found intact before and
    // the kernel only opens ids it was given. Its layout may have left the
    // cache; reading and checking the whole record again is not needed to
    // open one of its files (the data comes from the page cache).
    if (writes) return ReadOnly();
    return uint64_t{0};
  }
  auto a = GetAttr(ino);
  if (!a.ok()) return a.status();
  if (writes) return ReadOnly();
  if (SpaceOf(ino) == Space::kRecord && EntryOf(ino) != 0) {
    // Check the record now, so that a damaged record fails at open().
    auto rec = Parse(ShardOf(ino), RecordOf(ino));
    if (!rec.ok()) return rec.status();
  }
  return uint64_t{0};
}

absl::StatusOr<uint64_t> Filesystem::OpenDir(uint64_t ino) {
  if (SpaceOf(ino) == Space::kStaging && staging_) {
    auto fd = staging_->OpenDir(StagingIndex(ino));
    if (!fd.ok()) return fd.status();
    DIR* d = ::fdopendir(*fd);
    if (d == nullptr) {
      int err = errno;
      ::close(*fd);
      return ErrnoError(err, "opendir");
    }
    auto* h = new DirHandle;
    std::lock_guard<std::mutex> lock(h->mu);
    h->dir = d;
    return reinterpret_cast<uint64_t>(h);
  }
  auto a = GetAttr(ino);
  if (!a.ok()) return a.status();
  if (!S_ISDIR(a->mode)) return PosixError(ENOTDIR, "not a directory");
  return uint64_t{0};
}

void Filesystem::ReleaseDir(uint64_t fh) {
  auto* h = reinterpret_cast<DirHandle*>(fh);
  if (h == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(h->mu);
    if (h->dir) ::closedir(h->dir);
  }
  delete h;
}

absl::Status Filesystem::StagingReadDir(uint64_t ino, uint64_t fh, uint64_t offset,
                                        const EmitFn& emit) {
  if (!staging_) return PosixError(EBADF, "no directory handle");
  auto self = GetAttr(ino);
  if (!self.ok()) return self.status();
  // With a handle (OpenDir), its stream; without one (the kernel opens
  // directories itself, FUSE_CAP_NO_OPENDIR_SUPPORT), a stream of our own
  // for this call. Offsets are the backing directory's own telldir cookies,
  // valid in any stream of it, so entries removed while listing (rm -r)
  // neither skip nor repeat others.
  auto* h = reinterpret_cast<DirHandle*>(fh);
  std::unique_lock<std::mutex> lock;
  DIR* dir = nullptr;
  if (h != nullptr) {
    lock = std::unique_lock<std::mutex>(h->mu);
    dir = h->dir;
  } else {
    auto fd = staging_->OpenDir(StagingIndex(ino));
    if (!fd.ok()) return fd.status();
    dir = ::fdopendir(*fd);
    if (dir == nullptr) {
      const int err = errno;
      ::close(*fd);
      return ErrnoError(err, "opendir");
    }
  }
  std::unique_ptr<DIR, int (*)(DIR*)> own(h == nullptr ? dir : nullptr, ::closedir);
  if (offset == 0) {
    ::rewinddir(dir);
  } else {
    ::seekdir(dir, static_cast<long>(offset));
  }
  for (;;) {
    errno = 0;
    long before = ::telldir(dir);
    dirent* e = ::readdir(dir);
    if (e == nullptr) {
      if (errno != 0) return ErrnoError(errno, "readdir");
      break;
    }
    const absl::string_view name = e->d_name;
    Attr a;
    if (name == "." || name == "..") {
      a = *self;
    } else {
      struct stat st;
      if (::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) continue;  // never shown
      a = StagingAttr(st);
    }
    if (!emit(name, a, static_cast<uint64_t>(e->d_off))) {
      ::seekdir(dir, before);
      break;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<Attr, uint64_t>> Filesystem::Create(uint64_t parent,
                                                             absl::string_view name, mode_t mode,
                                                             int flags) {
  if (SpaceOf(parent) != Space::kStaging || !staging_) return ReadOnly();
  auto r = staging_->Create(StagingIndex(parent), name, mode, flags);
  if (!r.ok()) return r.status();
  auto* h = new FileHandle;
  h->fd = r->second;
  h->node = r->first.st_ino;
  h->written = true;
  return std::make_pair(StagingAttr(r->first), reinterpret_cast<uint64_t>(h));
}

absl::StatusOr<Attr> Filesystem::Mkdir(uint64_t parent, absl::string_view name, mode_t mode) {
  if (SpaceOf(parent) != Space::kStaging || !staging_) return ReadOnly();
  auto st = staging_->Mkdir(StagingIndex(parent), name, mode);
  if (!st.ok()) return st.status();
  return StagingAttr(*st);
}

absl::StatusOr<size_t> Filesystem::Write(uint64_t ino, uint64_t fh, absl::string_view data,
                                         uint64_t offset) {
  auto* h = reinterpret_cast<FileHandle*>(fh);
  if (SpaceOf(ino) != Space::kStaging || staging_ == nullptr) return ReadOnly();
  // No handle: the kernel opened the file itself (skip_open); write through
  // a descriptor of the store's.
  std::shared_ptr<const UniqueFd> own;
  if (h == nullptr) {
    auto fd = staging_->WritableFd(StagingIndex(ino));
    if (!fd.ok()) return fd.status();
    own = *fd;
  }
  const int fd = h != nullptr ? h->fd : own->get();
  // A bad value of a checked file fails write() itself, so that
  // `echo hello > label` reports it (the shell ignores close()'s error).
  if (auto s = staging_->ValidateOnWrite(StagingIndex(ino), fd, offset, data); !s.ok()) return s;
  size_t done = 0;
  while (done < data.size()) {
    ssize_t w = ::pwrite(fd, data.data() + done, data.size() - done,
                         static_cast<off_t>(offset + done));
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, "write");
    }
    done += static_cast<size_t>(w);
  }
  if (h != nullptr) {
    h->written = true;
  } else {
    staging_->NoteWritten(StagingIndex(ino), fd);  // no RELEASE will come
  }
  return done;
}

absl::Status Filesystem::Flush(uint64_t ino, uint64_t fh) {
  auto* h = reinterpret_cast<FileHandle*>(fh);
  if (SpaceOf(ino) != Space::kStaging || h == nullptr || !staging_) return absl::OkStatus();
  if (!h->written.exchange(false)) return absl::OkStatus();
  return staging_->ValidateOnClose(StagingIndex(ino), h->fd);
}

void Filesystem::Release(uint64_t fh) {
  auto* h = reinterpret_cast<FileHandle*>(fh);
  if (h == nullptr) return;
  // Without FLUSH (skip_open), the last close is the first moment the whole
  // file is there: check it and remember its kind. A refusal is logged; the
  // pack refuses the record with the same reason.
  if (h->written.exchange(false) && staging_ != nullptr) {
    (void)staging_->ValidateOnClose(h->node, h->fd);
  }
  Discard(fh);
}

void Filesystem::Discard(uint64_t fh) {
  auto* h = reinterpret_cast<FileHandle*>(fh);
  if (h == nullptr) return;
  ::close(h->fd);
  delete h;
}

absl::Status Filesystem::Fsync(uint64_t ino, uint64_t fh, bool datasync) {
  auto* h = reinterpret_cast<FileHandle*>(fh);
  UniqueFd own;
  if (h == nullptr) {
    if (SpaceOf(ino) != Space::kStaging || staging_ == nullptr) return absl::OkStatus();
    auto fd = staging_->Open(StagingIndex(ino), O_RDONLY);
    if (!fd.ok()) return fd.status();
    own = UniqueFd(*fd);
  }
  const int fd = h != nullptr ? h->fd : own.get();
  if ((datasync ? ::fdatasync(fd) : ::fsync(fd)) != 0) return ErrnoError(errno, "fsync");
  return absl::OkStatus();
}

absl::StatusOr<Attr> Filesystem::SetAttr(uint64_t ino, uint64_t fh, const struct stat& to,
                                         int bits) {
  if (SpaceOf(ino) != Space::kStaging || !staging_) return ReadOnly();
  auto* h = reinterpret_cast<FileHandle*>(fh);
  auto st = staging_->SetAttr(StagingIndex(ino), h ? h->fd : -1, to, bits);
  if (!st.ok()) return st.status();
  if (h && (bits & staging::kSetSize)) h->written = true;
  if (!h && (bits & staging::kSetSize)) staging_->NoteWritten(StagingIndex(ino));
  return StagingAttr(*st);
}

absl::Status Filesystem::Unlink(uint64_t parent, absl::string_view name) {
  if (SpaceOf(parent) != Space::kStaging || !staging_) return ReadOnly();
  return staging_->Unlink(StagingIndex(parent), name);
}

absl::Status Filesystem::Rmdir(uint64_t parent, absl::string_view name) {
  if (SpaceOf(parent) != Space::kStaging || !staging_) return ReadOnly();
  return staging_->Rmdir(StagingIndex(parent), name);
}

absl::Status Filesystem::Rename(uint64_t parent, absl::string_view name, uint64_t new_parent,
                                absl::string_view new_name, unsigned flags) {
  const bool from = SpaceOf(parent) == Space::kStaging, to = SpaceOf(new_parent) == Space::kStaging;
  if (!staging_ || (!from && !to)) return ReadOnly();
  if (from != to) return PosixError(EXDEV, "cannot move across the staging boundary");
  return staging_->Rename(StagingIndex(parent), name, StagingIndex(new_parent), new_name, flags);
}

void Filesystem::Forget(uint64_t ino, uint64_t n) {
  if (SpaceOf(ino) == Space::kStaging && staging_) staging_->Forget(StagingIndex(ino), n);
}

bool Filesystem::StagingSpace(uint64_t* free_bytes, uint64_t* total_bytes) const {
  if (!staging_) return false;
  struct statvfs sv;
  if (::statvfs(staging_->dir().c_str(), &sv) != 0) return false;
  *free_bytes = static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize;
  *total_bytes = static_cast<uint64_t>(sv.f_blocks) * sv.f_frsize;
  return true;
}

void Filesystem::LearnKind(absl::string_view name, const example::Feature& f) {
  if (f.kind == example::Kind::kNone) return;
  auto it = kinds_.find(name);
  if (it == kinds_.end()) {
    kinds_.try_emplace(std::string(name), staging::HintOf(f));
  } else {
    staging::MergeHint(&it->second, f);  // a first byte per value, for most values
  }
}

void Filesystem::LearnKinds(const example::FeatureTable& table) {
  std::lock_guard<std::mutex> lock(kinds_mu_);
  for (const auto& f : table.features) LearnKind(f.name, f);
}

void Filesystem::LearnKinds(const example::SequenceTable& table) {
  LearnKinds(table.context);
  std::lock_guard<std::mutex> lock(kinds_mu_);
  std::string key;
  for (const auto& list : table.lists) {
    for (const auto& step : list.steps) {
      if (step.kind == example::Kind::kNone) continue;
      key.assign(naming::kFeatureListsDir.data(), naming::kFeatureListsDir.size());
      absl::StrAppend(&key, "/", list.name);
      LearnKind(key, step);
      break;
    }
  }
}

staging::FeatureHint Filesystem::HintOf(absl::string_view feature_name) {
  const std::string name(feature_name);
  auto known = [&]() -> std::optional<staging::FeatureHint> {
    std::lock_guard<std::mutex> lock(kinds_mu_);
    auto it = kinds_.find(name);
    if (it == kinds_.end()) return std::nullopt;
    return it->second;
  };
  if (auto kind = known()) return *kind;
  std::lock_guard<std::mutex> lock(sample_mu_);
  // Another caller may have sampled while this one waited.
  if (auto kind = known()) return *kind;
  // A name is sampled for once: its files are validated at every close() and
  // again by the pack, and each would otherwise spend a per-call budget.
  if (sample_done_ || !sampled_names_.insert(name).second) return {};
  SampleKinds(name);
  // The tree's own reads may have taught it meanwhile, too.
  return known().value_or(staging::FeatureHint{});
}

void Filesystem::SampleKinds(absl::string_view name) {
  // Round-robin over the shards, record index by record index: shards are
  // often written by different workers from different inputs, so spreading
  // the reads meets more of the features sooner than reading one shard
  // through would.
  SampleBudget spent;
  auto finish = [this] {  // every record seen, or the whole-mount budget spent
    sample_done_ = true;
    sampled_names_.clear();  // only asked while sampling goes on
  };
  while (!sample_done_) {
    if (sample_shard_ >= shards_.size()) {
      sample_shard_ = 0;
      ++sample_round_;
    }
    if (sample_round_ >= sample_rounds_ || sample_left_.records == 0) {
      finish();
      break;
    }
    if (spent.records >= sample_per_call_.records) break;
    const uint64_t shard = sample_shard_, record = sample_round_;
    const index::ShardIndex& idx = *shards_[shard];
    // Records read for the tree (checked) have taught their kinds already.
    if (record >= std::min<uint64_t>(idx.num_records(), kMaxRecordsPerShard) ||
        Checked(shard, record)) {
      ++sample_shard_;
      continue;
    }
    const uint64_t size = idx.end(record) - idx.begin(record);
    if (size > sample_per_call_.bytes) {  // never fits: passed over for good
      ++sample_shard_;
      continue;
    }
    if (size > sample_per_call_.bytes - spent.bytes) break;  // the next call's
    if (size > sample_left_.bytes) {
      finish();
      break;
    }
    ++sample_shard_;
    ++spent.records;
    spent.bytes += size;
    --sample_left_.records;
    sample_left_.bytes -= size;
    records_sampled_.fetch_add(1, std::memory_order_relaxed);
    bytes_sampled_.fetch_add(size, std::memory_order_relaxed);
    // Read and decoded as Parse does, but not cached: sampling many records
    // must not evict the records the user is working with.
    auto data = record::ReadRecord(*sources_[shard], record, idx.begin(record), idx.end(record));
    if (!data.ok()) {
      // Reported (as EIO) when the record itself is opened.
      log::Debug("sampling feature kinds: ", data.status().message());
      continue;
    }
    MarkChecked(shard, record);  // intact: what Parse would have found
    auto table = example::DecodeExample(*data);
    if (!table.ok()) {
      auto seq = example::DecodeSequenceExample(*data);
      if (seq.ok()) {
        LearnKinds(*seq);
        std::lock_guard<std::mutex> lock(kinds_mu_);
        if (kinds_.contains(std::string(name))) return;
      }
      continue;  // a raw record has no feature kinds
    }
    LearnKinds(*table);
    auto it =
        std::lower_bound(table->features.begin(), table->features.end(), name,
                         [](const example::Feature& f, absl::string_view n) { return f.name < n; });
    if (it != table->features.end() && it->name == name && it->kind != example::Kind::kNone) {
      return;
    }
  }
}

absl::StatusOr<ReadResult> Filesystem::Read(uint64_t ino, uint64_t fh, uint64_t offset, size_t size) {
  ReadResult out;
  switch (SpaceOf(ino)) {
    case Space::kTree: {
      const uint64_t i = TreeIndex(ino);
      if (i >= tree_->nodes.size()) return absl::NotFoundError("stale node id");
      const TreeNode& n = tree_->nodes[i];
      if (n.type != NodeType::kPlainFile) return PosixError(EISDIR, "is a directory");
      auto fd = tree_->PlainFd(i);
      if (!fd.ok()) return fd.status();
      const uint64_t fsize = static_cast<uint64_t>(n.st.st_size);
      out.fd = *fd;
      out.offset = offset;
      out.length = offset >= fsize ? 0 : static_cast<size_t>(std::min<uint64_t>(size, fsize - offset));
      return out;
    }
    case Space::kRecord: {
      const uint64_t shard = ShardOf(ino), record = RecordOf(ino);
      if (shard >= shards_.size() || record >= shards_[shard]->num_records()) {
        return absl::NotFoundError("stale node id");
      }
      auto rec = Parse(shard, record);
      if (!rec.ok()) return rec.status();
      const uint32_t entry = static_cast<uint32_t>(EntryOf(ino));
      if (entry >= (*rec)->layout.entries.size()) return absl::NotFoundError("stale node id");
      const naming::Entry& e = (*rec)->layout.entries[entry];
      if (e.is_dir) return PosixError(EISDIR, "is a directory");
      const uint64_t total = e.size();
      const size_t n =
          offset >= total ? 0 : static_cast<size_t>(std::min<uint64_t>(size, total - offset));
      return ReadPieces(shard, (*rec)->data_offset, e, offset, n);
    }
    case Space::kStaging: {
      auto* h = reinterpret_cast<FileHandle*>(fh);
      UniqueFd own;  // no handle: a read-only mount where the kernel opens files itself
      if (h == nullptr) {
        if (!staging_) return absl::NotFoundError("stale node id");
        auto fd = staging_->Open(StagingIndex(ino), O_RDONLY);
        if (!fd.ok()) return fd.status();
        own = UniqueFd(*fd);
      }
      out.data.resize(size);
      auto got = PreadUpTo(h ? h->fd : own.get(), out.data.data(), size, offset, "staging");
      if (!got.ok()) return got.status();
      out.data.resize(*got);
      return out;
    }
  }
  return absl::NotFoundError("stale node id");
}

absl::StatusOr<ReadResult> Filesystem::ReadPieces(uint64_t shard, uint64_t data_offset,
                                                  const naming::Entry& e, uint64_t offset,
                                                  size_t n) const {
  const source::ShardSource& src = *sources_[shard];
  std::vector<ReadBuffer> bufs;
  uint64_t begin = 0;  // file offset of the current piece
  for (const naming::Piece& p : e.Pieces()) {
    const uint64_t end = begin + p.size;
    const uint64_t piece_begin = begin;
    begin = end;
    if (end <= offset || piece_begin >= offset + n) continue;
    const uint64_t from = std::max(offset, piece_begin) - piece_begin;
    const size_t len = static_cast<size_t>(std::min<uint64_t>(end, offset + n) - piece_begin - from);
    ReadBuffer b;
    switch (p.type) {
      case naming::Piece::Type::kInline:
        b.data.assign(p.bytes.data() + from, len);
        break;
      case naming::Piece::Type::kSpan: {
        const uint64_t at = data_offset + p.offset + from;
        auto range = src.Spliceable(at);
        if (!range.ok()) {
          log::Error(range.status().message());
          return absl::DataLossError(range.status().message());
        }
        if (range->has_value()) {
          // The kernel splices straight from the shard: make sure it is
          // still the file that was indexed (one fstat), or the bytes could
          // be another file's or short.
          if (auto s = src.CheckUnchanged(); !s.ok()) {
            log::Error(s.message());
            return absl::DataLossError(s.message());
          }
          b.fd = (*range)->fd;
          b.offset = (*range)->offset;
          b.length = len;
          b.hold = std::move((*range)->hold);
          break;
        }
        // A compressed shard: the bytes come from its decompression cache.
        b.data.resize(len);
        if (auto s = src.ReadFull(at, b.data.data(), len); !s.ok()) {
          log::Error(s.message());
          return absl::DataLossError(s.message());
        }
        break;
      }
      case naming::Piece::Type::kPng: {
        // The PNG's bytes are made from the pixels in the shard (stored
        // deflate blocks: tensor/png.h), a range at a time.
        b.data.resize(len);
        const uint64_t pixels = data_offset + p.offset;
        const tensor::PixelSource source = [&](uint64_t at, char* buf, size_t k) {
          return src.ReadFull(pixels + at, buf, k);
        };
        if (auto s = tensor::ReadPngRange(p.png, source, from, b.data.data(), len); !s.ok()) {
          log::Error(s.message());
          return absl::DataLossError(s.message());
        }
        break;
      }
    }
    if (!bufs.empty() && bufs.back().fd < 0 && b.fd < 0) {
      bufs.back().data += b.data;
    } else {
      bufs.push_back(std::move(b));
    }
  }
  ReadResult out;
  if (bufs.empty()) return out;
  static_cast<ReadBuffer&>(out) = std::move(bufs[0]);
  out.more.assign(std::make_move_iterator(bufs.begin() + 1), std::make_move_iterator(bufs.end()));
  return out;
}

Stats Filesystem::GetStats() const {
  Stats s;
  s.shards = shards_.size();
  for (const auto& idx : shards_) {
    s.records += idx->num_records();
    s.shard_bytes += idx->file_size();
    s.index_bytes += idx->MemoryBytes() + CheckedWords(*idx) * sizeof(uint64_t);
  }
  s.records_read = records_read_.load(std::memory_order_relaxed);
  s.records_sampled = records_sampled_.load(std::memory_order_relaxed);
  s.bytes_sampled = bytes_sampled_.load(std::memory_order_relaxed);
  return s;
}

// ---- Extended attributes ----

namespace {

constexpr absl::string_view kXattrPrefix = "user.tfrecordfs.";
constexpr size_t kMaxDamageNotes = 65536;

absl::Status NoXattr(absl::string_view name) {
  return PosixError(ENODATA, absl::StrCat("no attribute ", name));
}

}  // namespace

void Filesystem::NoteDamage(uint64_t shard, uint64_t record, absl::string_view reason) {
  std::lock_guard<std::mutex> lock(damage_mu_);
  if (damage_.size() < kMaxDamageNotes) {
    damage_.try_emplace((shard << kRecordBits) | record, std::string(reason));
  }
}

std::optional<std::string> Filesystem::DamageOf(uint64_t shard, uint64_t record) const {
  std::lock_guard<std::mutex> lock(damage_mu_);
  auto it = damage_.find((shard << kRecordBits) | record);
  if (it == damage_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> Filesystem::Xattrs(
    uint64_t ino, bool read_error) {
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&](absl::string_view key, std::string value) {
    out.emplace_back(absl::StrCat(kXattrPrefix, key), std::move(value));
  };
  switch (SpaceOf(ino)) {
    case Space::kTree: {
      const uint64_t i = TreeIndex(ino);
      if (i >= tree_->nodes.size()) return absl::NotFoundError("stale node id");
      const TreeNode& n = tree_->nodes[i];
      if (n.type != NodeType::kShard) return out;
      const index::ShardIndex& idx = *shards_[n.shard];
      add("shard", idx.path());
      add("records", absl::StrCat(idx.num_records()));
      add("codec", idx.codec() == source::Codec::kNone ? std::string("none")
                                                       : std::string(source::CodecName(idx.codec())));
      if (!idx.problems().empty()) {
        std::string lines;
        for (const std::string& line : index::FormatProblems(idx.path(), idx.problems())) {
          absl::StrAppend(&lines, lines.empty() ? "" : "\n", line);
        }
        add("error", std::move(lines));
      }
      return out;
    }
    case Space::kRecord: {
      const uint64_t shard = ShardOf(ino), record = RecordOf(ino);
      if (shard >= shards_.size() || record >= shards_[shard]->num_records()) {
        return absl::NotFoundError("stale node id");
      }
      const index::ShardIndex& idx = *shards_[shard];
      const uint32_t entry = static_cast<uint32_t>(EntryOf(ino));
      if (entry == 0) {
        add("shard", idx.path());
        add("record", absl::StrCat(record));
        add("offset", absl::StrCat(idx.begin(record)));
        add("length", absl::StrCat(idx.end(record) - idx.begin(record) - record::kFramingOverhead));
        if (idx.checkpoints()) {
          add("compressed_offset", absl::StrCat(idx.checkpoints()->Before(idx.begin(record)).in));
        }
        std::optional<std::string> damage = DamageOf(shard, record);
        if (!damage && read_error && !Checked(shard, record)) {
          (void)Parse(shard, record);  // a damaged record notes its reason
          damage = DamageOf(shard, record);
        }
        if (damage) add("error", std::move(*damage));
        return out;
      }
      auto rec = Parse(shard, record);
      if (!rec.ok()) return rec.status();
      const naming::Layout& layout = (*rec)->layout;
      if (entry >= layout.entries.size()) return absl::NotFoundError("stale node id");
      auto info = naming::FeatureOf(layout, entry);
      if (!info) return out;
      add("feature", info->name);
      add("kind", naming::RoleName(info->role, info->dtype));
      if (info->context) add("section", "context");
      if (info->feature_list) add("section", "feature_list");
      if (info->step) add("step", absl::StrCat(*info->step));
      if (info->value) add("value", absl::StrCat(*info->value));
      return out;
    }
    case Space::kStaging:
      if (!staging_) break;
      return out;
  }
  return absl::NotFoundError("stale node id");
}

absl::StatusOr<std::vector<std::string>> Filesystem::ListXattr(uint64_t ino) {
  auto all = Xattrs(ino, /*read_error=*/false);
  if (!all.ok()) return all.status();
  std::vector<std::string> names;
  for (auto& [name, value] : *all) names.push_back(std::move(name));
  return names;
}

absl::StatusOr<std::string> Filesystem::GetXattr(uint64_t ino, absl::string_view name) {
  // Other namespaces (security.*, system.posix_acl_*: asked by ls -l, cp -a
  // and the kernel itself) are answered without looking at the node.
  if (!absl::StartsWith(name, kXattrPrefix)) return NoXattr(name);
  auto all = Xattrs(ino, /*read_error=*/name == absl::StrCat(kXattrPrefix, "error"));
  if (!all.ok()) return all.status();
  for (auto& [n, value] : *all) {
    if (n == name) return std::move(value);
  }
  return NoXattr(name);
}

absl::Status Filesystem::SetXattr(uint64_t ino, absl::string_view name) {
  if (SpaceOf(ino) == Space::kStaging) {
    return PosixError(ENOTSUP, absl::StrCat(name, ": staged files keep no extended attributes"));
  }
  return PosixError(EPERM, absl::StrCat(name, ": the attributes of the mounted shards are fixed"));
}

}  // namespace tfrecordfs::vfs
