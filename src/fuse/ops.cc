#include "tfrecordfs/fuse/ops.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "tfrecordfs/base/file.h"
#include "tfrecordfs/fuse/errno.h"

namespace tfrecordfs::fuse {

void FillStat(const vfs::Attr& a, struct stat* st) {
  *st = {};
  st->st_ino = a.ino;
  st->st_mode = a.mode;
  st->st_nlink = a.nlink;
  st->st_size = static_cast<off_t>(a.size);
  st->st_blksize = 4096;
  st->st_blocks = static_cast<blkcnt_t>((a.size + 511) / 512);
  st->st_uid = ::getuid();
  st->st_gid = ::getgid();
  st->st_mtim = a.mtime;
  st->st_ctim = a.mtime;
  st->st_atim = a.mtime;
}

EntryReply DoLookup(const Ops& ops, fuse_ino_t parent, absl::string_view name) {
  EntryReply r;
  auto a = ops.fs->Lookup(parent, name);
  if (!a.ok()) {
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
  r.entry.ino = a->ino;
  r.entry.generation = 1;
  FillStat(*a, &r.entry.attr);
  r.entry.attr_timeout = ops.options.attr_timeout;
  r.entry.entry_timeout = ops.options.entry_timeout;
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
  r.timeout = ops.options.attr_timeout;
  return r;
}

DirReply DoReadDir(const Ops& ops, fuse_ino_t ino, size_t size, off_t offset, bool plus) {
  DirReply r;
  r.buf.resize(size);
  size_t used = 0;
  absl::Status s = ops.fs->ReadDir(
      ino, static_cast<uint64_t>(offset),
      [&](absl::string_view name, const vfs::Attr& a, uint64_t next) {
        const std::string n(name);
        size_t need;
        if (plus) {
          fuse_entry_param e{};
          e.ino = a.ino;
          e.generation = 1;
          FillStat(a, &e.attr);
          e.attr_timeout = ops.options.attr_timeout;
          e.entry_timeout = ops.options.entry_timeout;
          if (name == "." || name == "..") {
            // The kernel does not look these up; a zero ino keeps it from
            // counting a lookup reference it would never forget.
            e.ino = 0;
          }
          need = fuse_add_direntry_plus(nullptr, r.buf.data() + used, size - used, n.c_str(), &e,
                                        static_cast<off_t>(next));
        } else {
          struct stat st;
          FillStat(a, &st);
          need = fuse_add_direntry(nullptr, r.buf.data() + used, size - used, n.c_str(), &st,
                                   static_cast<off_t>(next));
        }
        if (need > size - used) return false;
        used += need;
        return true;
      });
  if (!s.ok()) {
    r.err = ToErrno(s);
    r.buf.clear();
    return r;
  }
  r.buf.resize(used);
  return r;
}

OpenReply DoOpen(const Ops& ops, fuse_ino_t ino, int flags) {
  OpenReply r;
  absl::Status s = ops.fs->Open(ino, flags);
  if (!s.ok()) {
    r.err = ToErrno(s);
    return r;
  }
  r.keep_cache = true;  // shard bytes never change under the mount
  return r;
}

ReadReply DoRead(const Ops& ops, fuse_ino_t ino, size_t size, off_t offset) {
  ReadReply r;
  if (offset < 0) {
    r.err = EINVAL;
    return r;
  }
  auto res = ops.fs->Read(ino, static_cast<uint64_t>(offset), size);
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
  return r;
}

namespace {

const Ops& OpsOf(fuse_req_t req) { return *static_cast<const Ops*>(fuse_req_userdata(req)); }

void LlInit(void* userdata, struct fuse_conn_info* conn) {
  const Ops& ops = *static_cast<const Ops*>(userdata);
  if (ops.options.splice && (conn->capable & FUSE_CAP_SPLICE_WRITE)) {
    conn->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
  }
  if (conn->capable & FUSE_CAP_READDIRPLUS) conn->want |= FUSE_CAP_READDIRPLUS;
  if (conn->capable & FUSE_CAP_PARALLEL_DIROPS) conn->want |= FUSE_CAP_PARALLEL_DIROPS;
  // Reads are served from the page cache of immutable shards: ask for large
  // requests and generous read-ahead.
  conn->max_readahead = 1u << 20;
}

void LlLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  EntryReply r = DoLookup(OpsOf(req), parent, name);
  if (r.err) {
    fuse_reply_err(req, r.err);
  } else {
    fuse_reply_entry(req, &r.entry);
  }
}

void LlForget(fuse_req_t req, fuse_ino_t, uint64_t) { fuse_reply_none(req); }

void LlForgetMulti(fuse_req_t req, size_t, struct fuse_forget_data*) { fuse_reply_none(req); }

void LlGetAttr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info*) {
  AttrReply r = DoGetAttr(OpsOf(req), ino);
  if (r.err) {
    fuse_reply_err(req, r.err);
  } else {
    fuse_reply_attr(req, &r.st, r.timeout);
  }
}

void ReplyDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus) {
  DirReply r = DoReadDir(OpsOf(req), ino, size, off, plus);
  if (r.err) {
    fuse_reply_err(req, r.err);
  } else {
    fuse_reply_buf(req, r.buf.data(), r.buf.size());
  }
}

void LlReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info*) {
  ReplyDir(req, ino, size, off, false);
}

void LlReadDirPlus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                   struct fuse_file_info*) {
  ReplyDir(req, ino, size, off, true);
}

void LlOpenDir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  AttrReply a = DoGetAttr(OpsOf(req), ino);
  if (a.err) {
    fuse_reply_err(req, a.err);
    return;
  }
  if (!S_ISDIR(a.st.st_mode)) {
    fuse_reply_err(req, ENOTDIR);
    return;
  }
  fi->cache_readdir = 1;
  fi->keep_cache = 1;
  fuse_reply_open(req, fi);
}

void LlOpen(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  OpenReply r = DoOpen(OpsOf(req), ino, fi->flags);
  if (r.err) {
    fuse_reply_err(req, r.err);
    return;
  }
  fi->keep_cache = r.keep_cache;
  fuse_reply_open(req, fi);
}

void LlRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info*) {
  const Ops& ops = OpsOf(req);
  ReadReply r = DoRead(ops, ino, size, off);
  if (r.err) {
    fuse_reply_err(req, r.err);
    return;
  }
  if (r.data.fd < 0) {
    fuse_reply_buf(req, r.data.data.data(), r.data.data.size());
    return;
  }
  if (ops.options.splice) {
    struct fuse_bufvec buf = FUSE_BUFVEC_INIT(r.data.length);
    buf.buf[0].flags = static_cast<fuse_buf_flags>(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
    buf.buf[0].fd = r.data.fd;
    buf.buf[0].pos = static_cast<off_t>(r.data.offset);
    fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
    return;
  }
  std::string tmp(r.data.length, '\0');
  auto got = PreadUpTo(r.data.fd, tmp.data(), tmp.size(), r.data.offset, "read");
  if (!got.ok()) {
    fuse_reply_err(req, ToErrno(got.status()));
    return;
  }
  fuse_reply_buf(req, tmp.data(), *got);
}

void LlStatfs(fuse_req_t req, fuse_ino_t) {
  StatfsReply r = DoStatfs(OpsOf(req));
  fuse_reply_statfs(req, &r.st);
}

// Everything that would change the tree outside the staging area.
void LlMkdir(fuse_req_t req, fuse_ino_t, const char*, mode_t) { fuse_reply_err(req, EROFS); }
void LlMknod(fuse_req_t req, fuse_ino_t, const char*, mode_t, dev_t) {
  fuse_reply_err(req, EROFS);
}
void LlUnlink(fuse_req_t req, fuse_ino_t, const char*) { fuse_reply_err(req, EROFS); }
void LlRmdir(fuse_req_t req, fuse_ino_t, const char*) { fuse_reply_err(req, EROFS); }
void LlSymlink(fuse_req_t req, const char*, fuse_ino_t, const char*) {
  fuse_reply_err(req, EROFS);
}
void LlRename(fuse_req_t req, fuse_ino_t, const char*, fuse_ino_t, const char*, unsigned) {
  fuse_reply_err(req, EROFS);
}
void LlLink(fuse_req_t req, fuse_ino_t, fuse_ino_t, const char*) { fuse_reply_err(req, EROFS); }
void LlSetAttr(fuse_req_t req, fuse_ino_t, struct stat*, int, struct fuse_file_info*) {
  fuse_reply_err(req, EROFS);
}
void LlCreate(fuse_req_t req, fuse_ino_t, const char*, mode_t, struct fuse_file_info*) {
  fuse_reply_err(req, EROFS);
}
void LlWrite(fuse_req_t req, fuse_ino_t, const char*, size_t, off_t, struct fuse_file_info*) {
  fuse_reply_err(req, EROFS);
}

fuse_lowlevel_ops MakeOps() {
  fuse_lowlevel_ops o{};
  o.init = LlInit;
  o.lookup = LlLookup;
  o.forget = LlForget;
  o.forget_multi = LlForgetMulti;
  o.getattr = LlGetAttr;
  o.opendir = LlOpenDir;
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
  return o;
}

}  // namespace

const fuse_lowlevel_ops& LowLevelOps() {
  static const fuse_lowlevel_ops kOps = MakeOps();
  return kOps;
}

}  // namespace tfrecordfs::fuse
