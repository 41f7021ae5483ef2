#include "tfrecordfs/vfs/staging_view.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/base/mutex.h"
#include "tfrecordfs/vfs/node_id.h"

namespace tfrecordfs::vfs {

// State behind a staging file handle (fuse_file_info::fh).
struct StagingView::FileHandle {
  UniqueFd fd;
  uint64_t node = 0;  // the store's node
  std::atomic<bool> written{false};
};

// State behind a staging directory handle: the backing directory stream.
struct StagingView::DirHandle {
  explicit DirHandle(ListDir d) : dir(std::move(d)) {}
  Mutex mu;
  ListDir dir ABSL_GUARDED_BY(mu);
};

namespace {

// A node of the store as the mount shows it, under node id `ino`.
Attr AttrOf(const struct stat& st, uint64_t ino) {
  Attr a;
  a.ino = ino;
  a.mode = st.st_mode;
  a.uid = st.st_uid;  // another user's (allow_other, staging::Owner)
  a.gid = st.st_gid;
  a.size = static_cast<uint64_t>(st.st_size);
  a.nlink = st.st_nlink;
  a.mtime = st.st_mtim;
  a.atime = st.st_atim;
  a.ctime = st.st_ctim;
  return a;
}

// A stream of the backing directory of a store node (OpenDir's descriptor,
// which the stream then owns).
absl::StatusOr<ListDir> OpenStream(staging::Store* store, uint64_t node) {
  auto fd = store->OpenDir(node);
  if (!fd.ok()) return fd.status();
  return ListDir::Adopt(UniqueFd(*fd), "opendir");
}

}  // namespace

StagingView::StagingView(staging::Store* store, naming::FeatureTypes* types, StagingViewIds ids)
    : store_(store), types_(types), ids_(ids), files_(ids.file_tag), dirs_(ids.dir_tag) {}

Attr StagingView::AttrOfStat(const struct stat& st) const { return AttrOf(st, IdOf(st.st_ino)); }

bool StagingView::OwnsHandle(uint64_t fh) const { return files_.Owns(fh) || dirs_.Owns(fh); }

std::vector<uint64_t> StagingView::OpenFileNodes() const {
  std::vector<uint64_t> out;
  files_.ForEach([&](const FileHandle& h) { out.push_back(h.node); });
  return out;
}

StagingView::~StagingView() = default;

uint64_t StagingView::root_id() const { return IdOf(store_->root()); }

absl::StatusOr<Attr> StagingView::GetAttr(uint64_t ino) {
  auto st = store_->GetAttr(NodeOf(ino));
  if (!st.ok()) return st.status();
  return AttrOf(*st, IdOf(st->st_ino));
}

absl::StatusOr<Attr> StagingView::Lookup(uint64_t parent, absl::string_view name) {
  auto st = store_->Lookup(NodeOf(parent), name);
  if (!st.ok()) return st.status();
  return AttrOf(*st, IdOf(st->st_ino));
}

void StagingView::Forget(uint64_t ino, uint64_t n) { store_->Forget(NodeOf(ino), n, *types_); }

absl::StatusOr<uint64_t> StagingView::Open(uint64_t ino, int flags) {
  auto fd = store_->Open(NodeOf(ino), flags);
  if (!fd.ok()) return fd.status();
  auto h = std::make_unique<FileHandle>();
  h->fd = UniqueFd(*fd);
  h->node = NodeOf(ino);
  if (flags & O_TRUNC) h->written = true;
  return files_.Add(std::move(h));
}

absl::StatusOr<std::pair<Attr, uint64_t>> StagingView::CreateFile(
    uint64_t parent, absl::string_view name, mode_t mode, int flags,
    std::optional<staging::Owner> owner) {
  auto r = store_->Create(NodeOf(parent), name, mode, flags, owner);
  if (!r.ok()) return r.status();
  auto h = std::make_unique<FileHandle>();
  h->fd = UniqueFd(r->second);
  h->node = r->first.st_ino;
  h->written = true;
  return std::make_pair(AttrOf(r->first, IdOf(r->first.st_ino)), files_.Add(std::move(h)));
}

absl::StatusOr<ReadResult> StagingView::Read(uint64_t ino, uint64_t fh, uint64_t offset,
                                             size_t size) {
  auto got_h = files_.Get(fh);
  if (!got_h.ok()) return got_h.status();
  FileHandle* h = *got_h;
  UniqueFd own;  // no handle: a read-only mount where the kernel opens files itself
  if (h == nullptr) {
    auto fd = store_->Open(NodeOf(ino), O_RDONLY);
    if (!fd.ok()) return fd.status();
    own = UniqueFd(*fd);
  }
  ReadResult out;
  out.data.resize(size);
  auto got = PreadUpTo(h ? h->fd.get() : own.get(), out.data.data(), size, offset, "staging");
  if (!got.ok()) return got.status();
  out.data.resize(*got);
  return out;
}

absl::StatusOr<size_t> StagingView::Write(uint64_t ino, uint64_t fh, absl::string_view data,
                                          uint64_t offset) {
  auto got_h = files_.Get(fh);
  if (!got_h.ok()) return got_h.status();
  FileHandle* h = *got_h;
  // No handle: the kernel opened the file itself (skip_open); write through
  // a descriptor of the store's.
  std::shared_ptr<const UniqueFd> own;
  if (h == nullptr) {
    auto fd = store_->WritableFd(NodeOf(ino));
    if (!fd.ok()) return fd.status();
    own = *fd;
  }
  // Every write lands, whatever it makes of the file: the file is checked
  // once whole, and flagged if it does not pass (staged_file_checker.h).
  const int fd = h != nullptr ? h->fd.get() : own->get();
  size_t done = 0;
  while (done < data.size()) {
    ssize_t w =
        ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, "write");
    }
    done += static_cast<size_t>(w);
  }
  if (h != nullptr) {
    h->written = true;
  } else {
    store_->checker().NoteWritten(NodeOf(ino), *types_, fd);  // no RELEASE will come
  }
  return done;
}

absl::Status StagingView::Flush(uint64_t ino, uint64_t fh) {
  auto h = files_.Get(fh);
  if (!h.ok()) return h.status();
  if (*h == nullptr || !(*h)->written.exchange(false)) return absl::OkStatus();
  return store_->checker().ValidateOnClose(NodeOf(ino), (*h)->fd.get(), *types_);
}

void StagingView::Release(uint64_t fh) {
  auto h = files_.Remove(fh);
  if (!h.ok()) {
    log::Warning("staging: release of ", h.status().message());
    return;
  }
  if (*h == nullptr) return;
  // Without FLUSH (skip_open), the last close is the first moment the whole
  // file is there: check it and remember its kind. A refusal is logged; the
  // pack refuses the record with the same reason.
  if ((*h)->written.exchange(false)) {
    (void)store_->checker().ValidateOnClose((*h)->node, (*h)->fd.get(), *types_);
  }
}  // *h goes here, closing its descriptor

void StagingView::Discard(uint64_t fh) {
  auto h = files_.Remove(fh);  // closes its descriptor
  if (!h.ok()) log::Warning("staging: discard of ", h.status().message());
}

absl::Status StagingView::Fsync(uint64_t ino, uint64_t fh, bool datasync) {
  auto got_h = files_.Get(fh);
  if (!got_h.ok()) return got_h.status();
  FileHandle* h = *got_h;
  UniqueFd own;
  if (h == nullptr) {
    auto fd = store_->Open(NodeOf(ino), O_RDONLY);
    if (!fd.ok()) return fd.status();
    own = UniqueFd(*fd);
  }
  const int fd = h != nullptr ? h->fd.get() : own.get();
  if ((datasync ? ::fdatasync(fd) : ::fsync(fd)) != 0) return ErrnoError(errno, "fsync");
  return absl::OkStatus();
}

absl::StatusOr<Attr> StagingView::SetAttr(uint64_t ino, uint64_t fh, const struct stat& to,
                                          int bits) {
  auto got_h = files_.Get(fh);
  if (!got_h.ok()) return got_h.status();
  FileHandle* h = *got_h;
  auto st = store_->SetAttr(NodeOf(ino), h ? h->fd.get() : -1, to, bits);
  if (!st.ok()) return st.status();
  if (h && (bits & staging::kSetSize)) h->written = true;
  if (!h && (bits & staging::kSetSize)) store_->checker().NoteWritten(NodeOf(ino), *types_);
  return AttrOf(*st, IdOf(st->st_ino));
}

absl::StatusOr<Attr> StagingView::Mkdir(uint64_t parent, absl::string_view name, mode_t mode,
                                        std::optional<staging::Owner> owner) {
  auto st = store_->Mkdir(NodeOf(parent), name, mode, owner);
  if (!st.ok()) return st.status();
  return AttrOf(*st, IdOf(st->st_ino));
}

absl::Status StagingView::Unlink(uint64_t parent, absl::string_view name) {
  return store_->Unlink(NodeOf(parent), name);
}

absl::Status StagingView::Rmdir(uint64_t parent, absl::string_view name) {
  return store_->Rmdir(NodeOf(parent), name);
}

absl::Status StagingView::Rename(uint64_t parent, absl::string_view name, uint64_t new_parent,
                                 absl::string_view new_name, unsigned flags) {
  return store_->Rename(NodeOf(parent), name, NodeOf(new_parent), new_name, flags, *types_);
}

absl::StatusOr<uint64_t> StagingView::OpenDir(uint64_t ino) {
  auto d = OpenStream(store_, NodeOf(ino));
  if (!d.ok()) return d.status();
  return dirs_.Add(std::make_unique<DirHandle>(std::move(*d)));
}

void StagingView::ReleaseDir(uint64_t fh) {
  auto h = dirs_.Remove(fh);  // closes the stream
  if (!h.ok()) log::Warning("staging: release of directory ", h.status().message());
}

namespace {

// Emits the entries of `dir` from `offset` on (see StagingView::ReadDir);
// "." and ".." get `self`. Reads the stream itself rather than through
// ListDir::Next: the kernel resumes at the d_off of any entry, "." and ".."
// included, so the positions (telldir / seekdir) are part of the listing.
absl::Status ListStream(DIR* dir, uint64_t offset, const Attr& self, uint64_t node_tag,
                        const EmitFn& emit) {
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
      a = self;
    } else {
      struct stat st;
      if (::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) continue;  // never shown
      a = AttrOf(st, StagingId(node_tag | st.st_ino));
    }
    if (!emit(name, a, static_cast<uint64_t>(e->d_off))) {
      ::seekdir(dir, before);
      break;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status StagingView::ReadDir(uint64_t ino, uint64_t fh, uint64_t offset, const EmitFn& emit) {
  auto self = GetAttr(ino);
  if (!self.ok()) return self.status();
  // With a handle (OpenDir), its stream, under its lock (readdir and seekdir
  // move the stream's position); without one (the kernel opens directories
  // itself, FUSE_CAP_NO_OPENDIR_SUPPORT), a stream of our own for this call.
  auto h = dirs_.Get(fh);
  if (!h.ok()) return h.status();
  if (*h != nullptr) {
    MutexLock lock(&(*h)->mu);
    return ListStream((*h)->dir.stream(), offset, *self, ids_.node_tag, emit);
  }
  auto d = OpenStream(store_, NodeOf(ino));
  if (!d.ok()) return d.status();
  return ListStream(d->stream(), offset, *self, ids_.node_tag, emit);
}

absl::Status StagingView::Xattrs(uint64_t ino, bool read_error, XattrList* out) {
  if (!read_error) {
    if (store_->checker().HasRefusalMark(NodeOf(ino))) AddXattr(out, "error", "");
    return absl::OkStatus();
  }
  auto why = store_->checker().ErrorOf(NodeOf(ino), *types_);
  if (why.ok()) {
    AddXattr(out, "error", std::move(*why));
    return absl::OkStatus();
  }
  return absl::IsNotFound(why.status()) ? absl::OkStatus() : why.status();
}

bool StagingView::Space(uint64_t* free_bytes, uint64_t* total_bytes) const {
  struct statvfs sv;
  if (::statvfs(store_->dir().c_str(), &sv) != 0) return false;
  *free_bytes = static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize;
  *total_bytes = static_cast<uint64_t>(sv.f_blocks) * sv.f_frsize;
  return true;
}

}  // namespace tfrecordfs::vfs
