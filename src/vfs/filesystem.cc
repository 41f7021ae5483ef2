#include "tfrecordfs/vfs/filesystem.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/sequence.h"
#include "tfrecordfs/tensor/png.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/reader.h"
#include "tfrecordfs/scan/scan.h"
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
  Mutex mu;
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
      MutexLock lock(&mu);
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
    MutexLock lock(&mu);
    auto [it, inserted] = plain_fds.emplace(i, fd->get());
    if (inserted) fd->release();  // else another reader won: ours closes
    return it->second;
  }

  ~Tree() {
    MutexLock lock(&mu);
    for (auto& [i, fd] : plain_fds) ::close(fd);
  }
};

Filesystem::Filesystem(const Options& options)
    : tree_(std::make_unique<Tree>()),
      fd_cache_(options.max_open_shards),
      inflate_cache_(options.inflate_cache_bytes) {}

Filesystem::~Filesystem() = default;

absl::StatusOr<std::unique_ptr<Filesystem>> Filesystem::Create(const Options& options) {
  if (options.sources.empty()) return absl::InvalidArgumentError("no SOURCE given");
  std::unique_ptr<Filesystem> fs(new Filesystem(options));
  // Walks and reads wait on I/O, not CPU, where every read is a network
  // round trip: read ahead there (scan::Scan keeps many shards in flight).
  const bool remote = std::any_of(options.sources.begin(), options.sources.end(),
                                  [](const std::string& p) { return source::OnRemoteStorage(p); });
  if (remote && options.readahead_bytes > 0) {
    fs->readahead_ = std::make_unique<source::Readahead>(options.readahead_bytes,
                                                         kReadaheadThreads);
  }
  scan::ScanOptions scan_options;
  scan_options.sources = options.sources;
  scan_options.store = options.index_store;
  scan_options.threads = options.index_threads;
  scan_options.before_probe = [&](size_t files, int threads) {
    // Shards are opened on demand, at most max_open_shards at once (plus one
    // per walk thread while indexing): lift the soft limit, and grow the
    // table before the threads exist (growing it under them waits for an RCU
    // grace period each time).
    const size_t allowed =
        ReserveDescriptors(std::min(files, options.max_open_shards) + threads + 64);
    // Half of what the limit allows at most: staged files, plain source
    // files, index files and FUSE need the rest.
    fs->fd_cache_.set_capacity(
        std::min(options.max_open_shards, std::max<size_t>(allowed / 2, 16)));
  };
  scan_options.on_other = [](const scan::OtherFile& f) {
    if (const std::string note = scan::NotAShardNote(f); !note.empty()) {
      log::Warning(note, "; shown as a plain file");
    }
  };
  auto scanned = scan::Scan(scan_options);
  if (!scanned.ok()) return scanned.status();

  // The mirrored tree: node 0 is the root, node e + 1 is scanned->entries[e].
  Tree& tree = *fs->tree_;
  tree.nodes.resize(scanned->entries.size() + 1);
  ::clock_gettime(CLOCK_REALTIME, &tree.nodes[0].st.st_mtim);
  for (size_t e = 0; e < scanned->entries.size(); ++e) {
    scan::SourceEntry& entry = scanned->entries[e];
    TreeNode& node = tree.nodes[e + 1];
    node.name = Basename(entry.mount_path);
    node.parent = entry.parent == scan::kAtRoot ? 0 : entry.parent + 1;
    node.type = S_ISDIR(entry.st.st_mode) ? NodeType::kDir : NodeType::kPlainFile;
    node.real_path = std::move(entry.path);
    node.st = entry.st;
    tree.nodes[node.parent].children.push_back(e + 1);
  }
  // Sources are merged at the root; below it, entries come sorted already.
  for (TreeNode& node : tree.nodes) {
    std::sort(node.children.begin(), node.children.end(),
              [&](uint64_t a, uint64_t b) { return tree.nodes[a].name < tree.nodes[b].name; });
  }

  for (scan::ScannedShard& shard : scanned->shards) {
    const uint64_t i = shard.entry + 1;
    TreeNode& node = tree.nodes[i];
    if (fs->shards_.size() >= kMaxShards) {
      return absl::ResourceExhaustedError(
          absl::StrCat("more than ", kMaxShards, " shards in the sources"));
    }
    for (const std::string& line : index::FormatProblems(node.real_path, shard.index->problems())) {
      log::Warning(line);
    }
    if (!shard.index->problems().empty()) {
      log::Warning(node.real_path, ": damaged shard: ", shard.index->num_records(),
                   " record(s) indexed");
    }
    node.type = NodeType::kShard;
    node.shard = fs->shards_.size();
    fs->shard_mtime_.push_back(node.st.st_mtim);
    uint64_t n = shard.index->num_records();
    if (n > kMaxRecordsPerShard) {
      log::Warning(node.real_path, ": only the first ", kMaxRecordsPerShard, " of ", n,
                   " records are shown");
    }
    fs->shard_name_width_.push_back(Digits(n == 0 ? 0 : n - 1));
    const index::ShardIndex& idx = *shard.index;
    source::ShardFile file(idx.path(), shard.identity, &fs->fd_cache_);
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
    fs->shards_.push_back(std::move(shard.index));
  }
  fs->cache_ = std::make_unique<RecordCache>(options.cache_records, options.cache_bytes);
  for (const auto& idx : fs->shards_) fs->checked_.AddShard(idx->num_records());
  fs->sampler_ = std::make_unique<KindSampler>(fs->shards_, fs->sources_, &fs->checked_,
                                               options.kind_sample_per_call,
                                               options.kind_sample_total);
  fs->on_index_mismatch_ = options.on_index_mismatch;
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
    fs->staging_hints_ = options.staging_hints;
    if (!fs->staging_hints_) {
      fs->staging_hints_ = [sampler = fs->sampler_.get()](absl::string_view name) {
        return sampler->HintOf(name);
      };
    }
    fs->staging_ = std::make_unique<StagingView>(options.staging, fs->staging_hints_);
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

absl::StatusOr<Filesystem::Node> Filesystem::Resolve(uint64_t ino) const {
  Node node;
  node.space = SpaceOf(ino);
  switch (node.space) {
    case Space::kTree:
      node.tree = TreeIndex(ino);
      if (node.tree < tree_->nodes.size()) return node;
      break;
    case Space::kRecord:
      node.shard = ShardOf(ino);
      node.record = RecordOf(ino);
      node.entry = static_cast<uint32_t>(EntryOf(ino));
      if (node.shard < shards_.size() && node.record < shards_[node.shard]->num_records()) {
        return node;
      }
      break;
    case Space::kStaging:
      if (staging_ != nullptr) return node;
      break;
  }
  return absl::NotFoundError("stale node id");
}

absl::StatusOr<Attr> Filesystem::GetAttr(uint64_t ino) {
  auto node = Resolve(ino);
  if (!node.ok()) return node.status();
  switch (node->space) {
    case Space::kTree: {
      const TreeNode& n = tree_->nodes[node->tree];
      if (n.type == NodeType::kStaging) return staging_->GetAttr(staging_->root_id());
      Attr a;
      a.ino = ino;
      a.mtime = n.st.st_mtim;
      if (n.type == NodeType::kPlainFile) {
        a.mode = kFileMode;
        a.size = static_cast<uint64_t>(n.st.st_size);
      } else if (n.type == NodeType::kShard) {
        a.mode = kDirMode;
        a.nlink = 2 + RecordsShown(n.shard);
      } else {
        a.mode = node->tree == 0 && staging_ ? (S_IFDIR | 0755) : kDirMode;
        a.nlink = 2;
        for (uint64_t c : n.children) a.nlink += tree_->nodes[c].type != NodeType::kPlainFile;
      }
      return a;
    }
    case Space::kRecord:
      return RecordGetAttr(*node);
    case Space::kStaging: {
      return staging_->GetAttr(ino);
    }
  }
  return absl::NotFoundError("stale node id");
}

absl::StatusOr<Attr> Filesystem::Lookup(uint64_t parent, absl::string_view name) {
  auto node = Resolve(parent);
  if (!node.ok()) return node.status();
  switch (node->space) {
    case Space::kTree: {
      const TreeNode& n = tree_->nodes[node->tree];
      if (n.type == NodeType::kPlainFile) return PosixError(ENOTDIR, "not a directory");
      if (n.type == NodeType::kDir) {
        auto c = tree_->Find(node->tree, name);
        if (!c) return absl::NotFoundError(name);
        return GetAttr(TreeId(*c));
      }
      return LookupRecord(n.shard, name);
    }
    case Space::kRecord:
      return RecordLookup(*node, name);
    case Space::kStaging: {
      return staging_->Lookup(parent, name);
    }
  }
  return absl::NotFoundError("stale node id");
}

absl::Status Filesystem::ReadDir(uint64_t ino, uint64_t fh, uint64_t offset, const EmitFn& emit) {
  if (SpaceOf(ino) == Space::kStaging) {
    if (!staging_) return PosixError(EBADF, "no directory handle");
    return staging_->ReadDir(ino, fh, offset, emit);
  }
  auto node = Resolve(ino);
  if (!node.ok()) return node.status();
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
  if (node->space == Space::kRecord) return RecordReadDir(*node, first, emit);
  const TreeNode& n = tree_->nodes[node->tree];
  if (n.type == NodeType::kShard) {
    ListRecords(n.shard, first, emit);
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

namespace {

absl::Status ReadOnly() { return PosixError(EROFS, "read-only: only the staging area is writable"); }

}  // namespace

absl::StatusOr<uint64_t> Filesystem::Open(uint64_t ino, int flags) {
  if (SpaceOf(ino) == Space::kStaging && staging_) return staging_->Open(ino, flags);
  const bool writes = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
  if (SpaceOf(ino) == Space::kRecord && EntryOf(ino) != 0 &&
      checked_.Checked(ShardOf(ino), RecordOf(ino))) {
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
  if (SpaceOf(ino) == Space::kStaging && staging_) return staging_->OpenDir(ino);
  auto a = GetAttr(ino);
  if (!a.ok()) return a.status();
  if (!S_ISDIR(a->mode)) return PosixError(ENOTDIR, "not a directory");
  return uint64_t{0};
}

// Only staging directories hold handles (the tree's OpenDir returns 0).
void Filesystem::ReleaseDir(uint64_t fh) {
  if (staging_) staging_->ReleaseDir(fh);
}

// ---- Staging: which calls reach the store is decided here; the
// passthrough itself is StagingView (staging_view.cc) ----

absl::StatusOr<std::pair<Attr, uint64_t>> Filesystem::CreateFile(uint64_t parent,
                                                                 absl::string_view name,
                                                                 mode_t mode, int flags) {
  if (SpaceOf(parent) != Space::kStaging || !staging_) return ReadOnly();
  return staging_->CreateFile(parent, name, mode, flags);
}

absl::StatusOr<Attr> Filesystem::Mkdir(uint64_t parent, absl::string_view name, mode_t mode) {
  if (SpaceOf(parent) != Space::kStaging || !staging_) return ReadOnly();
  return staging_->Mkdir(parent, name, mode);
}

absl::StatusOr<size_t> Filesystem::Write(uint64_t ino, uint64_t fh, absl::string_view data,
                                         uint64_t offset) {
  if (SpaceOf(ino) != Space::kStaging || staging_ == nullptr) return ReadOnly();
  return staging_->Write(ino, fh, data, offset);
}

absl::Status Filesystem::Flush(uint64_t ino, uint64_t fh) {
  if (SpaceOf(ino) != Space::kStaging || !staging_) return absl::OkStatus();
  return staging_->Flush(ino, fh);
}

// Only staging files hold handles (the tree's Open returns 0), so without a
// staging area every handle is 0.
void Filesystem::Release(uint64_t fh) {
  if (staging_) staging_->Release(fh);
}

void Filesystem::Discard(uint64_t fh) {
  if (staging_) staging_->Discard(fh);
}

absl::Status Filesystem::Fsync(uint64_t ino, uint64_t fh, bool datasync) {
  // A handle is a staging file's; without one, only a staging file has
  // anything to sync (the rest is read-only).
  if (fh == 0 && (SpaceOf(ino) != Space::kStaging || staging_ == nullptr)) {
    return absl::OkStatus();
  }
  return staging_->Fsync(ino, fh, datasync);
}

absl::StatusOr<Attr> Filesystem::SetAttr(uint64_t ino, uint64_t fh, const struct stat& to,
                                         int bits) {
  if (SpaceOf(ino) != Space::kStaging || !staging_) return ReadOnly();
  return staging_->SetAttr(ino, fh, to, bits);
}

absl::Status Filesystem::Unlink(uint64_t parent, absl::string_view name) {
  if (SpaceOf(parent) != Space::kStaging || !staging_) return ReadOnly();
  return staging_->Unlink(parent, name);
}

absl::Status Filesystem::Rmdir(uint64_t parent, absl::string_view name) {
  if (SpaceOf(parent) != Space::kStaging || !staging_) return ReadOnly();
  return staging_->Rmdir(parent, name);
}

absl::Status Filesystem::Rename(uint64_t parent, absl::string_view name, uint64_t new_parent,
                                absl::string_view new_name, unsigned flags) {
  const bool from = SpaceOf(parent) == Space::kStaging, to = SpaceOf(new_parent) == Space::kStaging;
  if (!staging_ || (!from && !to)) return ReadOnly();
  if (from != to) return PosixError(EXDEV, "cannot move across the staging boundary");
  return staging_->Rename(parent, name, new_parent, new_name, flags);
}

void Filesystem::Forget(uint64_t ino, uint64_t n) {
  if (SpaceOf(ino) == Space::kStaging && staging_) staging_->Forget(ino, n);
}

bool Filesystem::StagingSpace(uint64_t* free_bytes, uint64_t* total_bytes) const {
  return staging_ && staging_->Space(free_bytes, total_bytes);
}

// ---- Sampling ----

staging::FeatureHint Filesystem::HintOf(absl::string_view feature_name) {
  return sampler_->HintOf(feature_name);
}

absl::StatusOr<ReadResult> Filesystem::Read(uint64_t ino, uint64_t fh, uint64_t offset, size_t size) {
  ReadResult out;
  switch (SpaceOf(ino)) {
    case Space::kTree: {
      auto node = Resolve(ino);
      if (!node.ok()) return node.status();
      const TreeNode& n = tree_->nodes[node->tree];
      if (n.type != NodeType::kPlainFile) return PosixError(EISDIR, "is a directory");
      auto fd = tree_->PlainFd(node->tree);
      if (!fd.ok()) return fd.status();
      const uint64_t fsize = static_cast<uint64_t>(n.st.st_size);
      out.fd = *fd;
      out.offset = offset;
      out.length = offset >= fsize ? 0 : static_cast<size_t>(std::min<uint64_t>(size, fsize - offset));
      return out;
    }
    case Space::kRecord: {
      auto node = Resolve(ino);
      if (!node.ok()) return node.status();
      return RecordRead(*node, offset, size);
    }
    case Space::kStaging:
      if (!staging_) return absl::NotFoundError("stale node id");
      return staging_->Read(ino, fh, offset, size);
  }
  return absl::NotFoundError("stale node id");
}

Stats Filesystem::GetStats() const {
  Stats s;
  s.shards = shards_.size();
  for (const auto& idx : shards_) {
    s.records += idx->num_records();
    s.shard_bytes += idx->file_size();
    s.index_bytes += idx->MemoryBytes();
  }
  s.index_bytes += checked_.MemoryBytes();
  s.records_read = records_read_.load(std::memory_order_relaxed);
  s.records_sampled = sampler_->records_sampled();
  s.bytes_sampled = sampler_->bytes_sampled();
  return s;
}

// ---- Extended attributes ----

namespace {

absl::Status NoXattr(absl::string_view name) {
  return PosixError(ENODATA, absl::StrCat("no attribute ", name));
}

}  // namespace

absl::StatusOr<Filesystem::XattrList> Filesystem::Xattrs(uint64_t ino, bool read_error) {
  auto node = Resolve(ino);
  if (!node.ok()) return node.status();
  XattrList out;
  if (node->space == Space::kTree) {
    const TreeNode& n = tree_->nodes[node->tree];
    if (n.type == NodeType::kShard) ShardXattrs(n.shard, &out);
  } else if (node->space == Space::kRecord) {
    if (auto s = RecordXattrs(*node, read_error, &out); !s.ok()) return s;
  } else if (node->space == Space::kStaging && staging_) {
    // Why the pack would leave it staged: asked by name, judged now (reads
    // the file or the record); listed only for a refused write's mark.
    if (read_error) {
      auto why = staging_->Error(ino);
      if (why.ok()) AddXattr(&out, "error", std::move(*why));
      if (!why.ok() && !absl::IsNotFound(why.status())) return why.status();
    } else if (staging_->HasRefusalMark(ino)) {
      AddXattr(&out, "error", "");
    }
  }
  return out;
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
  // and the kernel itself) are answered without looking at the node, and
  // as unsupported (this file system keeps no security labels or ACLs):
  // `ls -l` then stops asking for the rest of the mount (coreutils
  // remembers a device whose answer was ENOTSUP), where ENODATA cost two
  // round trips per entry listed.
  if (!absl::StartsWith(name, "user.")) {
    return PosixError(EOPNOTSUPP, absl::StrCat(name, ": no security labels or ACLs here"));
  }
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
