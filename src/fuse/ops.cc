#include "tfrecordfs/fuse/ops.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <new>
#include <string>
#include <vector>

#include "tfrecordfs/base/file.h"
#include "tfrecordfs/fuse/errno.h"
#include "tfrecordfs/vfs/node_id.h"

namespace tfrecordfs::fuse {

// Node ids go to the kernel as fuse_ino_t unchanged (vfs/node_id.h).
static_assert(sizeof(fuse_ino_t) == sizeof(uint64_t));

namespace {

// The mounting user's ids. Read once: getuid()/getgid() are system calls,
// and a listing fills a stat per entry (12 calls per record folder showed in
// walk profiles). The daemon never changes its ids.
uid_t MountUid() {
  static const uid_t uid = ::getuid();
  return uid;
}
gid_t MountGid() {
  static const gid_t gid = ::getgid();
  return gid;
}

}  // namespace

void FillStat(const vfs::Attr& a, struct stat* st) {
  // Every node belongs to the mounting user but staged ones, which show
  // their backing file's owner (another user's, with allow_other).
  const uid_t uid = a.uid == vfs::kMountOwnerUid ? MountUid() : a.uid;
  const gid_t gid = a.gid == vfs::kMountOwnerGid ? MountGid() : a.gid;
  *st = {};
  st->st_ino = a.ino;
  st->st_mode = a.mode;
  st->st_nlink = a.nlink;
  st->st_size = static_cast<off_t>(a.size);
  st->st_blksize = 4096;
  st->st_blocks = static_cast<blkcnt_t>((a.size + 511) / 512);
  st->st_uid = uid;
  st->st_gid = gid;
  st->st_mtim = a.mtime;
  st->st_ctim = a.ctime.tv_sec || a.ctime.tv_nsec ? a.ctime : a.mtime;
  st->st_atim = a.atime.tv_sec || a.atime.tv_nsec ? a.atime : a.mtime;
}

namespace {

bool InStaging(uint64_t ino) { return vfs::SpaceOf(ino) == vfs::Space::kStaging; }

// Staging files opened or created now get no handle (OpsOptions::skip_open,
// staging_without_handles): their writes come with fh 0.
bool StagingWithoutHandles(const Ops& ops) {
  return ops.negotiated.no_open.load() || ops.options.staging_without_handles;
}

void FillEntry(const Ops& ops, const vfs::Attr& a, fuse_entry_param* e) {
  e->ino = a.ino;
  e->generation = a.generation;
  FillStat(a, &e->attr);
  const bool staging = InStaging(a.ino);
  e->attr_timeout = staging ? ops.options.staging_timeout : ops.options.attr_timeout;
  e->entry_timeout = staging ? ops.options.staging_timeout : ops.options.entry_timeout;
}

}  // namespace

EntryReply DoLookup(const Ops& ops, fuse_ino_t parent, absl::string_view name) {
  EntryReply r;
  auto a = ops.fs->Lookup(parent, name);
  if (!a.ok()) {
    if (InStaging(parent)) {
      r.err = ToErrno(a.status());  // never cache a miss where files appear
      return r;
    }
    if (absl::IsNotFound(a.status()) && ErrnoOf(a.status()) == 0) {
      // A cached negative entry: repeated lookups of a bogus name (shells,
      // image viewers probing for sidecar files) stay in the kernel.
      r.entry.ino = 0;
      r.entry.entry_timeout = ops.options.negative_timeout;
      return r;
    }
    r.err = ToErrno(a.status());
    return r;
  }
  FillEntry(ops, *a, &r.entry);
  return r;
}

AttrReply DoGetAttr(const Ops& ops, fuse_ino_t ino) {
  AttrReply r;
  auto a = ops.fs->GetAttr(ino);
  if (!a.ok()) {
    r.err = ToErrno(a.status());
    return r;
  }
  FillStat(*a, &r.st);
  r.timeout = InStaging(ino) ? ops.options.staging_timeout : ops.options.attr_timeout;
  return r;
}

DirReply DoReadDir(const Ops& ops, fuse_ino_t ino, size_t size, off_t offset, bool plus,
                   uint64_t fh) {
  DirReply r;
  // The buffer grows by each entry rather than starting at the kernel's
  // size (up to 128 KiB): zero-filling that for a four-entry record folder
  // showed in walk profiles.
  r.buf.reserve(std::min<size_t>(size, 4096));
  // libfuse's add functions return an entry's length and write it only when
  // it fits: ask with no room first, then make exactly that room.
  auto append = [&](auto add) {
    const size_t used = r.buf.size();
    const size_t need = add(nullptr, 0);
    if (need > size - used) return false;
    r.buf.resize(used + need);
    add(r.buf.data() + used, need);
    return true;
  };
  absl::Status s =
      ops.fs->ReadDir(ino, fh, static_cast<uint64_t>(offset),
                      [&](absl::string_view name, const vfs::Attr& a, uint64_t next) {
                        const std::string n(name);
                        const off_t off = static_cast<off_t>(next);
                        if (plus) {
                          fuse_entry_param e{};
                          e.ino = a.ino;
                          e.generation = a.generation;
                          FillStat(a, &e.attr);
                          e.attr_timeout = ops.options.attr_timeout;
                          e.entry_timeout = ops.options.entry_timeout;
                          if (name == "." || name == ".." || InStaging(a.ino)) {
                            // A zero ino makes the kernel skip this entry's lookup: it keeps
                            // no reference we would have to count (staging nodes are
                            // reference-counted; "." and ".." are never looked up).
                            e.ino = 0;
                          }
                          return append([&](char* buf, size_t room) {
                            return fuse_add_direntry_plus(nullptr, buf, room, n.c_str(), &e, off);
                          });
                        }
                        struct stat st;
                        FillStat(a, &st);
                        return append([&](char* buf, size_t room) {
                          return fuse_add_direntry(nullptr, buf, room, n.c_str(), &st, off);
                        });
                      });
  if (!s.ok()) {
    r.err = ToErrno(s);
    r.buf.clear();
  }
  return r;
}

OpenReply DoOpen(const Ops& ops, fuse_ino_t ino, int flags) {
  OpenReply r;
  auto fh = ops.fs->Open(ino, flags);
  if (!fh.ok()) {
    r.err = ToErrno(fh.status());
    return r;
  }
  if (ops.negotiated.no_open.load()) {
    // Checked, and now "opened, and no FLUSH or RELEASE will follow": from
    // here on the kernel opens files without asking
    // (FUSE_CAP_NO_OPEN_SUPPORT). CREATE then gives no handle either.
    ops.fs->Discard(*fh);
    r.err = ENOSYS;
    return r;
  }
  // Shard bytes never change under the mount; an edited record's do.
  const bool changing = ops.fs->Mutable(ino);
  r.keep_cache = !changing;
  // Shard bytes need no FLUSH; nor does a staging file without a handle.
  r.noflush = r.keep_cache;
  if (changing && ops.options.staging_without_handles) {
    ops.fs->Discard(*fh);
    r.noflush = true;
    return r;
  }
  r.fh = *fh;
  return r;
}

OpenReply DoOpenDir(const Ops& ops, fuse_ino_t ino) {
  OpenReply r;
  if (ops.negotiated.no_opendir.load()) {
    // "Opened, and no RELEASEDIR will follow": from now on the kernel opens
    // directories without asking (FUSE_CAP_NO_OPENDIR_SUPPORT).
    r.err = ENOSYS;
    return r;
  }
  auto fh = ops.fs->OpenDir(ino);
  if (!fh.ok()) {
    r.err = ToErrno(fh.status());
    return r;
  }
  r.fh = *fh;
  r.keep_cache = !ops.fs->Mutable(ino);
  return r;
}

int DoFlush(const Ops& ops, fuse_ino_t ino, uint64_t fh) {
  // No FLUSH for the rest of the connection: staged files are checked at
  // write() instead (staging/staged_file_checker.h), so close() costs no round trip.
  if (ops.negotiated.no_open.load()) return ENOSYS;
  return ToErrno(ops.fs->Flush(ino, fh));
}

ReadReply DoRead(const Ops& ops, fuse_ino_t ino, size_t size, off_t offset, uint64_t fh) {
  ReadReply r;
  if (offset < 0) {
    r.err = EINVAL;
    return r;
  }
  auto res = ops.fs->Read(ino, fh, static_cast<uint64_t>(offset), size);
  if (!res.ok()) {
    r.err = ToErrno(res.status());
    return r;
  }
  r.data = std::move(*res);
  return r;
}

StatfsReply DoStatfs(const Ops& ops) {
  StatfsReply r;
  const vfs::Stats s = ops.fs->GetStats();
  r.st.f_bsize = 4096;
  r.st.f_frsize = 4096;
  r.st.f_blocks = (s.shard_bytes + 4095) / 4096;
  r.st.f_files = s.records;
  r.st.f_namemax = 255;
  uint64_t free_bytes = 0, total = 0;
  if (ops.fs->StagingSpace(&free_bytes, &total)) {
    // Space for staged records is the staging store's free space.
    r.st.f_blocks += total / 4096;
    r.st.f_bfree = r.st.f_bavail = free_bytes / 4096;
  }
  return r;
}

CreateReply DoCreate(const Ops& ops, fuse_ino_t parent, absl::string_view name, mode_t mode,
                     int flags, std::optional<staging::Owner> caller) {
  CreateReply r;
  auto res = ops.fs->CreateFile(parent, name, mode, flags, caller);
  if (!res.ok()) {
    r.err = ToErrno(res.status());
    return r;
  }
  FillEntry(ops, res->first, &r.entry);
  r.fh = res->second;
  if (StagingWithoutHandles(ops)) {
    // Once OPEN was answered with ENOSYS the kernel sends no RELEASE for
    // any file, CREATE'd ones included (Linux 6.18, fuse_file_put): a handle
    // would never be closed. The file is written without one, like every
    // file the kernel opened itself (and every staging file under
    // staging_without_handles).
    ops.fs->Discard(r.fh);
    r.fh = 0;
  }
  return r;
}

EntryReply DoMknod(const Ops& ops, fuse_ino_t parent, absl::string_view name, mode_t mode,
                   std::optional<staging::Owner> caller) {
  EntryReply r;
  if (!S_ISREG(mode)) {
    // Only regular files and folders can be staged; outside staging/ every
    // write is EROFS, whatever the node type.
    r.err = InStaging(parent) ? EPERM : EROFS;
    return r;
  }
  CreateReply c = DoCreate(ops, parent, name, mode, O_WRONLY | O_EXCL, caller);
  if (c.err) {
    r.err = c.err;
    return r;
  }
  if (c.fh != 0) ops.fs->Release(c.fh);  // mknod opens nothing
  r.entry = c.entry;
  return r;
}

EntryReply DoMkdir(const Ops& ops, fuse_ino_t parent, absl::string_view name, mode_t mode,
                   std::optional<staging::Owner> caller) {
  EntryReply r;
  auto a = ops.fs->Mkdir(parent, name, mode, caller);
  if (!a.ok()) {
    r.err = ToErrno(a.status());
    return r;
  }
  FillEntry(ops, *a, &r.entry);
  return r;
}

AttrReply DoSetAttr(const Ops& ops, fuse_ino_t ino, const struct stat& to, int fuse_to_set,
                    uint64_t fh) {
  AttrReply r;
  int bits = 0;
  if (fuse_to_set & FUSE_SET_ATTR_MODE) bits |= staging::kSetMode;
  if (fuse_to_set & FUSE_SET_ATTR_SIZE) bits |= staging::kSetSize;
  if (fuse_to_set & FUSE_SET_ATTR_ATIME) bits |= staging::kSetAtime;
  if (fuse_to_set & FUSE_SET_ATTR_MTIME) bits |= staging::kSetMtime;
  if (fuse_to_set & FUSE_SET_ATTR_ATIME_NOW) bits |= staging::kSetAtimeNow;
  if (fuse_to_set & FUSE_SET_ATTR_MTIME_NOW) bits |= staging::kSetMtimeNow;
  if (fuse_to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
    // A chown to the owner the node shows (FillStat: the mounting user's, or
    // a staged node's creator's) is a no-op, as on any file system (cp -p,
    // cp -a and rsync -a send one); another owner is refused.
    auto now = ops.fs->GetAttr(ino);
    if (!now.ok()) {
      r.err = ToErrno(now.status());
      return r;
    }
    struct stat shown;
    FillStat(*now, &shown);
    const bool same_uid = !(fuse_to_set & FUSE_SET_ATTR_UID) || to.st_uid == shown.st_uid;
    const bool same_gid = !(fuse_to_set & FUSE_SET_ATTR_GID) || to.st_gid == shown.st_gid;
    if (!same_uid || !same_gid) {
      r.err = EPERM;
      return r;
    }
    if (bits == 0 && !InStaging(ino)) {
      r.err = EROFS;
      return r;
    }
  }
  if (bits == 0) return DoGetAttr(ops, ino);  // ctime-only updates
  auto a = ops.fs->SetAttr(ino, fh, to, bits);
  if (!a.ok()) {
    r.err = ToErrno(a.status());
    return r;
  }
  FillStat(*a, &r.st);
  r.timeout = ops.options.staging_timeout;
  return r;
}

int DoLink(const Ops&, fuse_ino_t new_parent) { return InStaging(new_parent) ? EPERM : EROFS; }

WriteReply DoWrite(const Ops& ops, fuse_ino_t ino, uint64_t fh, absl::string_view data,
                   off_t offset, bool writepage) {
  WriteReply r;
  if (offset < 0) {
    r.err = EINVAL;
    return r;
  }
  auto n = ops.fs->Write(ino, fh, data, static_cast<uint64_t>(offset));
  if (!n.ok()) {
    r.err = ToErrno(n.status());
    // A write() the daemon refuses leaves the kernel's pages as they were;
    // a refused write-back of a shared mapping does not.
    if (writepage) ops.fs->DropPagesLater(ino);
    return r;
  }
  r.written = *n;
  return r;
}

namespace {

XattrReply XattrError(int err) {
  XattrReply r;
  r.err = err;
  return r;
}

XattrReply SizedReply(std::string data, size_t size) {
  XattrReply r;
  if (size == 0) {
    r.size_only = true;
    r.size = data.size();
  } else if (data.size() > size) {
    r.err = ERANGE;
  } else {
    r.data = std::move(data);
  }
  return r;
}

}  // namespace

XattrReply DoGetXattr(const Ops& ops, fuse_ino_t ino, absl::string_view name, size_t size) {
  if (!ops.options.xattr) return XattrError(ENOSYS);
  auto value = ops.fs->GetXattr(ino, name);
  if (!value.ok()) return XattrError(ToErrno(value.status()));
  return SizedReply(std::move(*value), size);
}

XattrReply DoListXattr(const Ops& ops, fuse_ino_t ino, size_t size) {
  if (!ops.options.xattr) return XattrError(ENOSYS);
  auto names = ops.fs->ListXattr(ino);
  if (!names.ok()) return XattrError(ToErrno(names.status()));
  std::string data;
  for (const std::string& n : *names) {
    data += n;
    data.push_back('\0');
  }
  return SizedReply(std::move(data), size);
}

int DoSetXattr(const Ops& ops, fuse_ino_t ino, absl::string_view name) {
  return ToErrno(ops.fs->SetXattr(ino, name));
}

void Negotiate(Ops* ops, struct fuse_conn_info* conn) {
  if (ops->options.splice && (conn->capable & FUSE_CAP_SPLICE_WRITE)) {
    conn->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
  }
  if (conn->capable & FUSE_CAP_READDIRPLUS) conn->want |= FUSE_CAP_READDIRPLUS;
  // Always READDIRPLUS, never the kernel's "auto" guess: with it, only the
  // first batch of a large listing (a shard of hundreds of records) carries
  // attributes, and every later entry costs a LOOKUP when a walk enters it.
  // Attributes are free here (the index knows every record folder).
  conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
  if (conn->capable & FUSE_CAP_PARALLEL_DIROPS) conn->want |= FUSE_CAP_PARALLEL_DIROPS;
  if (ops->options.skip_opendir && (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT)) {
    conn->want |= FUSE_CAP_NO_OPENDIR_SUPPORT;
    ops->negotiated.no_opendir.store(true);
  }
  if (ops->options.skip_open && (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT)) {
    conn->want |= FUSE_CAP_NO_OPEN_SUPPORT;
    // With atomic O_TRUNC the kernel leaves truncation to OPEN, which it no
    // longer sends: without it, open(O_TRUNC) of a staged file arrives as a
    // SETATTR of size 0.
    conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
    ops->negotiated.no_open.store(true);
  }
  if (ops->options.staging_without_handles) {
    // Truncation by SETATTR, as above: an OPEN without a handle keeps no
    // record of having truncated the file for the checks.
    conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
  }
  // Reads are served from the page cache of immutable shards: ask for large
  // requests and generous read-ahead.
  conn->max_readahead = 1u << 20;
  if (ops->options.max_background > 0) {
    conn->max_background = ops->options.max_background;
    conn->congestion_threshold = std::max(1u, ops->options.max_background * 3 / 4);
  }
}

namespace {

const Ops& OpsOf(fuse_req_t req) { return *static_cast<const Ops*>(fuse_req_userdata(req)); }

// Who asked: new staged files and folders are made theirs (staging::Owner).
staging::Owner CallerOf(fuse_req_t req) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  return staging::Owner{ctx->uid, ctx->gid};
}

void LlInit(void* userdata, struct fuse_conn_info* conn) {
  Negotiate(static_cast<Ops*>(userdata), conn);
}

void ReplyEntry(fuse_req_t req, const EntryReply& r) {
  if (r.err) {
    fuse_reply_err(req, r.err);
  } else {
    fuse_reply_entry(req, &r.entry);
  }
}

void LlLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  ReplyEntry(req, DoLookup(OpsOf(req), parent, name));
}

void LlForget(fuse_req_t req, fuse_ino_t ino, uint64_t n) {
  OpsOf(req).fs->Forget(ino, n);
  fuse_reply_none(req);
}

void LlForgetMulti(fuse_req_t req, size_t count, struct fuse_forget_data* forgets) {
  for (size_t i = 0; i < count; ++i) OpsOf(req).fs->Forget(forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

void LlGetAttr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info*) {
  AttrReply r = DoGetAttr(OpsOf(req), ino);
  if (r.err) {
    fuse_reply_err(req, r.err);
  } else {
    fuse_reply_attr(req, &r.st, r.timeout);
  }
}

void ReplyDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus, uint64_t fh) {
  DirReply r = DoReadDir(OpsOf(req), ino, size, off, plus, fh);
  if (r.err) {
    fuse_reply_err(req, r.err);
  } else {
    fuse_reply_buf(req, r.buf.data(), r.buf.size());
  }
}

void LlReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info* fi) {
  ReplyDir(req, ino, size, off, false, fi->fh);
}

void LlReadDirPlus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                   struct fuse_file_info* fi) {
  ReplyDir(req, ino, size, off, true, fi->fh);
}

// Sends the reply to OPEN (`dir` false) or OPENDIR: the error, or the
// handle and its flags. A handle the kernel never got (the request was
// interrupted) is released here.
void ReplyOpen(fuse_req_t req, const OpenReply& r, bool dir, struct fuse_file_info* fi) {
  if (r.err) {
    fuse_reply_err(req, r.err);
    return;
  }
  fi->fh = r.fh;
  fi->keep_cache = r.keep_cache;
  if (dir) {
    fi->cache_readdir = r.keep_cache;
  } else {
    // Immutable shard data, or a staging file without a handle: close()
    // need not wait for a FLUSH round trip (FOPEN_NOFLUSH; staging files
    // with a handle keep theirs, it validates what was written).
    fi->noflush = r.noflush;
  }
  if (fuse_reply_open(req, fi) != -ENOENT) return;
  if (dir) {
    OpsOf(req).fs->ReleaseDir(r.fh);
  } else {
    OpsOf(req).fs->Release(r.fh);
  }
}

void LlOpenDir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  ReplyOpen(req, DoOpenDir(OpsOf(req), ino), /*dir=*/true, fi);
}

void LlReleaseDir(fuse_req_t req, fuse_ino_t, struct fuse_file_info* fi) {
  OpsOf(req).fs->ReleaseDir(fi->fh);
  fuse_reply_err(req, 0);
}

void LlOpen(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  ReplyOpen(req, DoOpen(OpsOf(req), ino, fi->flags), /*dir=*/false, fi);
}

void LlRelease(fuse_req_t req, fuse_ino_t, struct fuse_file_info* fi) {
  OpsOf(req).fs->Release(fi->fh);
  fuse_reply_err(req, 0);
}

void LlFlush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  fuse_reply_err(req, DoFlush(OpsOf(req), ino, fi->fh));
}

void LlFsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info* fi) {
  fuse_reply_err(req, ToErrno(OpsOf(req).fs->Fsync(ino, fi->fh, datasync != 0)));
}

void LlRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info* fi) {
  const Ops& ops = OpsOf(req);
  ReadReply r = DoRead(ops, ino, size, off, fi->fh);
  if (r.err) {
    fuse_reply_err(req, r.err);
    return;
  }
  // Every buffer of the reply in order (a file of several pieces gives
  // several: ReadResult).
  std::vector<const vfs::ReadBuffer*> parts{&r.data};
  for (const vfs::ReadBuffer& b : r.data.more) parts.push_back(&b);
  if (parts.size() == 1 && r.data.fd < 0) {
    fuse_reply_buf(req, r.data.data.data(), r.data.data.size());
    return;
  }
  // fuse_bufvec ends in a one-element array: room for the others follows.
  std::vector<char> storage(sizeof(fuse_bufvec) + (parts.size() - 1) * sizeof(fuse_buf));
  auto* vec = new (storage.data()) fuse_bufvec{};
  vec->count = parts.size();
  for (size_t i = 0; i < parts.size(); ++i) {
    fuse_buf& b = vec->buf[i];
    b = fuse_buf{};
    b.size = parts[i]->size();
    if (parts[i]->fd >= 0) {
      // FD_RETRY: libfuse's copy then reads until the piece is complete or
      // the shard ends (a short read), as a pread loop does.
      b.flags = static_cast<fuse_buf_flags>(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK |
                                            (ops.options.splice ? 0 : FUSE_BUF_FD_RETRY));
      b.fd = parts[i]->fd;
      b.pos = static_cast<off_t>(parts[i]->offset);
    } else {
      b.mem = const_cast<char*>(parts[i]->data.data());
    }
  }
  // As libfuse's passthrough_hp: spliced from the shard when splice is on,
  // else libfuse copies the pieces into one buffer and sends it (a read
  // error before any byte is the reply's errno; one after some bytes, or
  // the shard ending early, makes the reply short).
  fuse_reply_data(req, vec, ops.options.splice ? FUSE_BUF_SPLICE_MOVE : FUSE_BUF_NO_SPLICE);
}

void LlStatfs(fuse_req_t req, fuse_ino_t) {
  StatfsReply r = DoStatfs(OpsOf(req));
  fuse_reply_statfs(req, &r.st);
}

void LlMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  ReplyEntry(req, DoMkdir(OpsOf(req), parent, name, mode, CallerOf(req)));
}

void LlCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
              struct fuse_file_info* fi) {
  CreateReply r = DoCreate(OpsOf(req), parent, name, mode, fi->flags, CallerOf(req));
  if (r.err) {
    fuse_reply_err(req, r.err);
    return;
  }
  fi->fh = r.fh;
  fi->noflush = r.fh == 0;  // nothing to check at close() without a handle
  if (fuse_reply_create(req, &r.entry, fi) == -ENOENT && r.fh != 0) {
    OpsOf(req).fs->Release(r.fh);  // interrupted
  }
}

void LlMknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t) {
  ReplyEntry(req, DoMknod(OpsOf(req), parent, name, mode, CallerOf(req)));
}

void LlUnlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_reply_err(req, ToErrno(OpsOf(req).fs->Unlink(parent, name)));
}

void LlRmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_reply_err(req, ToErrno(OpsOf(req).fs->Rmdir(parent, name)));
}

void LlRename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent,
              const char* new_name, unsigned flags) {
  fuse_reply_err(req, ToErrno(OpsOf(req).fs->Rename(parent, name, new_parent, new_name, flags)));
}

void LlSymlink(fuse_req_t req, const char*, fuse_ino_t parent, const char*) {
  fuse_reply_err(req, DoLink(OpsOf(req), parent));
}

void LlLink(fuse_req_t req, fuse_ino_t, fuse_ino_t parent, const char*) {
  fuse_reply_err(req, DoLink(OpsOf(req), parent));
}

void LlSetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set,
               struct fuse_file_info* fi) {
  AttrReply r = DoSetAttr(OpsOf(req), ino, *attr, to_set, fi ? fi->fh : 0);
  if (r.err) {
    fuse_reply_err(req, r.err);
  } else {
    fuse_reply_attr(req, &r.st, r.timeout);
  }
}

void LlWrite(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off,
             struct fuse_file_info* fi) {
  WriteReply r =
      DoWrite(OpsOf(req), ino, fi->fh, absl::string_view(buf, size), off, fi->writepage != 0);
  if (r.err) {
    fuse_reply_err(req, r.err);
  } else {
    fuse_reply_write(req, r.written);
  }
}

void ReplyXattr(fuse_req_t req, const XattrReply& r) {
  if (r.err) {
    fuse_reply_err(req, r.err);
  } else if (r.size_only) {
    fuse_reply_xattr(req, r.size);
  } else {
    fuse_reply_buf(req, r.data.data(), r.data.size());
  }
}

void LlGetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  ReplyXattr(req, DoGetXattr(OpsOf(req), ino, name, size));
}

void LlListXattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  ReplyXattr(req, DoListXattr(OpsOf(req), ino, size));
}

void LlSetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char*, size_t, int) {
  fuse_reply_err(req, DoSetXattr(OpsOf(req), ino, name));
}

void LlRemoveXattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  fuse_reply_err(req, DoSetXattr(OpsOf(req), ino, name));
}

fuse_lowlevel_ops MakeOps() {
  fuse_lowlevel_ops o{};
  o.init = LlInit;
  o.lookup = LlLookup;
  o.forget = LlForget;
  o.forget_multi = LlForgetMulti;
  o.getattr = LlGetAttr;
  o.opendir = LlOpenDir;
  o.releasedir = LlReleaseDir;
  o.release = LlRelease;
  o.flush = LlFlush;
  o.fsync = LlFsync;
  o.readdir = LlReadDir;
  o.readdirplus = LlReadDirPlus;
  o.open = LlOpen;
  o.read = LlRead;
  o.statfs = LlStatfs;
  o.mkdir = LlMkdir;
  o.mknod = LlMknod;
  o.unlink = LlUnlink;
  o.rmdir = LlRmdir;
  o.symlink = LlSymlink;
  o.rename = LlRename;
  o.link = LlLink;
  o.setattr = LlSetAttr;
  o.create = LlCreate;
  o.write = LlWrite;
  o.getxattr = LlGetXattr;
  o.listxattr = LlListXattr;
  o.setxattr = LlSetXattr;
  o.removexattr = LlRemoveXattr;
  return o;
}

}  // namespace

const fuse_lowlevel_ops& LowLevelOps() {
  static const fuse_lowlevel_ops kOps = MakeOps();
  return kOps;
}

}  // namespace tfrecordfs::fuse
