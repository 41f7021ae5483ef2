#include "tfrecordfs/vfs/tree_view.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/vfs/node_id.h"

namespace tfrecordfs::vfs {

namespace {

constexpr mode_t kDirMode = S_IFDIR | 0555;
constexpr mode_t kFileMode = S_IFREG | 0444;

}  // namespace

TreeView::TreeView(const std::vector<scan::SourceEntry>& entries,
                   const std::vector<size_t>& shard_entries,
                   const std::vector<MountedShard>& shards, source::FdCache* fds, bool shards_only,
                   bool writable_shards)
    : shards_(shards), fds_(fds), shard_mode_(writable_shards ? S_IFDIR | 0755 : kDirMode) {
  nodes_.resize(entries.size() + 1);
  ::clock_gettime(CLOCK_REALTIME, &nodes_[0].st.st_mtim);
  for (size_t e = 0; e < entries.size(); ++e) {
    const scan::SourceEntry& entry = entries[e];
    Node& node = nodes_[e + 1];
    node.name = Basename(entry.mount_path);
    node.parent = entry.parent == scan::kAtRoot ? 0 : entry.parent + 1;
    node.type = S_ISDIR(entry.st.st_mode) ? Type::kDir : Type::kPlainFile;
    node.real_path = entry.path;
    node.st = entry.st;
    node.object = entry.object;
    if (node.type == Type::kPlainFile && node.object == nullptr) node.fd_key = fds_->NewKey();
  }
  for (size_t s = 0; s < shard_entries.size(); ++s) {
    shard_folder_ids_.push_back(TreeId(shard_entries[s] + 1));
    Node& node = nodes_[shard_entries[s] + 1];
    node.type = Type::kShard;
    node.shard = s;
  }
  for (size_t i = 1; i < nodes_.size(); ++i) {
    // An unlisted node keeps its id but no name leads to it.
    if (shards_only && nodes_[i].type == Type::kPlainFile) continue;
    nodes_[nodes_[i].parent].children.push_back(i);
  }
  // Sources are merged at the root; below it, entries come sorted already.
  for (Node& node : nodes_) {
    std::sort(node.children.begin(), node.children.end(),
              [&](uint64_t a, uint64_t b) { return nodes_[a].name < nodes_[b].name; });
  }
}

absl::Status TreeView::AddGraft(absl::string_view name, View* view, uint64_t root) {
  if (auto clash = Find(0, name)) {
    return absl::AlreadyExistsError(
        absl::StrCat("'", name, "' clashes with ", nodes_[*clash].real_path, " at the mount root"));
  }
  Node node;
  node.name = std::string(name);
  node.type = Type::kGraft;
  node.graft = view;
  node.graft_root = root;
  const uint64_t i = nodes_.size();
  nodes_.push_back(std::move(node));
  auto& ch = nodes_[0].children;
  ch.insert(std::lower_bound(ch.begin(), ch.end(), name,
                             [&](uint64_t c, absl::string_view n) { return nodes_[c].name < n; }),
            i);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> TreeView::Resolve(uint64_t ino) const {
  if (SpaceOf(ino) == Space::kTree && TreeIndex(ino) < nodes_.size()) return TreeIndex(ino);
  return absl::NotFoundError("stale node id");
}

std::optional<uint64_t> TreeView::Find(uint64_t dir, absl::string_view name) const {
  const auto& ch = nodes_[dir].children;
  auto it = std::lower_bound(ch.begin(), ch.end(), name,
                             [&](uint64_t i, absl::string_view n) { return nodes_[i].name < n; });
  if (it == ch.end() || nodes_[*it].name != name) return std::nullopt;
  return *it;
}

std::pair<uint64_t, std::string> TreeView::ShardFolderEntry(uint64_t shard) const {
  const Node& node = nodes_[shard_folder_ids_[shard] - TreeId(0)];
  return {TreeId(node.parent), node.name};
}

std::optional<uint64_t> TreeView::ShardFolder(uint64_t ino) const {
  auto i = Resolve(ino);
  if (!i.ok() || nodes_[*i].type != Type::kShard) return std::nullopt;
  return nodes_[*i].shard;
}

absl::StatusOr<Attr> TreeView::GetAttr(uint64_t ino) {
  auto i = Resolve(ino);
  if (!i.ok()) return i.status();
  const Node& n = nodes_[*i];
  if (n.type == Type::kGraft) return n.graft->GetAttr(n.graft_root);
  Attr a;
  a.ino = ino;
  a.mtime = n.st.st_mtim;
  switch (n.type) {
    case Type::kPlainFile:
      a.mode = kFileMode;
      a.size = static_cast<uint64_t>(n.st.st_size);
      break;
    case Type::kShard:
      a.mode = shard_mode_;
      a.nlink = 2 + shards_[n.shard].records_shown();
      break;
    default: {
      // The root of a mount with a writable graft (staging/) is writable.
      const bool grafted =
          *i == 0 && std::any_of(n.children.begin(), n.children.end(),
                                 [&](uint64_t c) { return nodes_[c].type == Type::kGraft; });
      a.mode = grafted ? (S_IFDIR | 0755) : kDirMode;
      a.nlink = 2;
      for (uint64_t c : n.children) a.nlink += nodes_[c].type != Type::kPlainFile;
      break;
    }
  }
  return a;
}

absl::StatusOr<Attr> TreeView::Lookup(uint64_t parent, absl::string_view name) {
  auto i = Resolve(parent);
  if (!i.ok()) return i.status();
  const Node& n = nodes_[*i];
  if (n.type == Type::kPlainFile) return PosixError(ENOTDIR, "not a directory");
  if (n.type != Type::kDir) return absl::InternalError("a shard folder's children are records");
  auto c = Find(*i, name);
  if (!c) return absl::NotFoundError(name);
  return GetAttr(TreeId(*c));
}

absl::Status TreeView::ReadDir(uint64_t ino, uint64_t /*fh*/, uint64_t offset, const EmitFn& emit) {
  auto i = Resolve(ino);
  if (!i.ok()) return i.status();
  const Node& n = nodes_[*i];
  if (n.type == Type::kPlainFile) return PosixError(ENOTDIR, "not a directory");
  if (n.type != Type::kDir) return absl::InternalError("a shard folder's children are records");
  auto self = GetAttr(ino);
  if (!self.ok()) return self.status();
  if (!EmitDots(*self, &offset, emit)) return absl::OkStatus();
  for (uint64_t k = offset - 2; k < n.children.size(); ++k) {
    const uint64_t c = n.children[k];
    auto a = GetAttr(TreeId(c));
    if (!a.ok()) return a.status();
    if (!emit(nodes_[c].name, *a, k + 3)) break;
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> TreeView::Open(uint64_t ino, int flags) {
  auto a = GetAttr(ino);
  if (!a.ok()) return a.status();
  if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC)) return ReadOnlyError();
  return uint64_t{0};
}

absl::StatusOr<ReadResult> TreeView::Read(uint64_t ino, uint64_t /*fh*/, uint64_t offset,
                                          size_t size) {
  auto i = Resolve(ino);
  if (!i.ok()) return i.status();
  const Node& n = nodes_[*i];
  if (n.type != Type::kPlainFile) return PosixError(EISDIR, "is a directory");
  const uint64_t fsize = static_cast<uint64_t>(n.st.st_size);
  if (n.object != nullptr) {
    ReadResult out;
    if (offset >= fsize || size == 0) return out;
    out.data.resize(static_cast<size_t>(std::min<uint64_t>(size, fsize - offset)));
    auto got = n.object->ReadAt(offset, out.data.data(), out.data.size());
    if (!got.ok()) return got.status();
    out.data.resize(*got);
    return out;
  }
  const std::string& path = n.real_path;
  auto lease = fds_->Get(n.fd_key, [&]() -> absl::StatusOr<UniqueFd> {
    auto fd = OpenFile(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (!fd.ok()) return fd.status();
    struct stat st;
    if (::fstat(fd->get(), &st) != 0) return ErrnoError(errno, path);
    if (!S_ISREG(st.st_mode)) {
      log::Error(path,
                 ": no longer a regular file; sources must not change under the mount "
                 "(remount to see it as it is now)");
      return PosixError(EIO, absl::StrCat(path, ": not a regular file"));
    }
    return fd;
  });
  if (!lease.ok()) return lease.status();
  ReadResult out;
  out.fd = lease->fd;
  out.hold = std::move(lease->hold);
  out.offset = offset;
  out.length = offset >= fsize ? 0 : static_cast<size_t>(std::min<uint64_t>(size, fsize - offset));
  return out;
}

absl::Status TreeView::Xattrs(uint64_t ino, bool /*read_error*/, XattrList* out) {
  auto s = ShardFolder(ino);
  if (!s) return Resolve(ino).status();
  const index::ShardIndex& idx = *shards_[*s].index;
  AddXattr(out, "shard", idx.path());
  AddXattr(out, "records", absl::StrCat(idx.num_records()));
  AddXattr(out, "codec",
           idx.codec() == source::Codec::kNone ? std::string("none")
                                               : std::string(source::CodecName(idx.codec())));
  if (!idx.problems().empty()) {
    std::string lines;
    for (const std::string& line : index::FormatProblems(idx.path(), idx.problems())) {
      absl::StrAppend(&lines, lines.empty() ? "" : "\n", line);
    }
    AddXattr(out, "error", std::move(lines));
  }
  return absl::OkStatus();
}

}  // namespace tfrecordfs::vfs
