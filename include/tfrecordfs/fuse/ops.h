// The FUSE low-level operations, split as in libfuse's passthrough_hp:
// Do*() decides a reply (an errno or the data to send) from the vfs and the
// negotiated connection, and never talks to the kernel, so tests call them
// without a mount; the Ll*() callbacks in ops.cc (installed by
// LowLevelOps()) only unpack a request, call one Do*() and send exactly the
// one reply it describes. Every policy (ENOSYS to hand opens to the kernel,
// negative entries, EROFS outside staging/) lives in a Do*().
//
// Writes: outside staging/ every write answers EROFS (links and special
// files in staging/: EPERM); inside, they go to vfs::Filesystem's staging
// operations.
//
// FUSE_USE_VERSION is set for the whole fuse module by meson.build
// (fuse_dep), never here, so every file sees one libfuse API.
//
// Thread-safety: as vfs::Filesystem (fully concurrent). Negotiate() runs
// once, for INIT, before the kernel sends any other request.
#ifndef TFRECORDFS_FUSE_OPS_H_
#define TFRECORDFS_FUSE_OPS_H_

#include <fuse_lowlevel.h>

#include <atomic>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "tfrecordfs/vfs/filesystem.h"

namespace tfrecordfs::fuse {

struct OpsOptions {
  // Shard data never changes under a mount, so the kernel may cache names,
  // attributes and negative lookups for a long time.
  double entry_timeout = 86400.0;
  double attr_timeout = 86400.0;
  double negative_timeout = 86400.0;
  // Reply to reads of contiguous shard bytes with an fd buffer (splice).
  bool splice = true;
  // The kernel's background queue (FUSE_INIT's max_background: read-ahead
  // and async reads in flight at once); 0 keeps the kernel's default (12).
  // Its congestion threshold is set to three quarters of it.
  unsigned max_background = 0;
  // The staging area changes: the kernel may cache it only briefly, and
  // never cache a miss there.
  double staging_timeout = 1.0;
  // Answer OPENDIR with ENOSYS where the kernel offers
  // FUSE_CAP_NO_OPENDIR_SUPPORT: it then opens and releases directories
  // itself and caches their listings, so a walk of record folders costs one
  // READDIR round trip per folder (none when warm) instead of three. Listings
  // then carry no handle (fh 0); staging listings open their backing
  // directory per READDIR. The kernel drops a cached listing whenever the
  // folder changes through the mount (the only way staging changes).
  bool skip_opendir = true;
  // Answer OPEN and FLUSH with ENOSYS where the kernel offers
  // FUSE_CAP_NO_OPEN_SUPPORT (and ask for no atomic O_TRUNC, so that
  // open(O_TRUNC) arrives as SETATTR): the kernel then opens, flushes and
  // releases files itself, so a warm read of a shard file costs no round
  // trip at all (and, on a read-only mount, no GETATTR for an atime
  // either). The first OPEN is still checked (a damaged record fails it);
  // after that a damaged record fails at read(). Staging files are then
  // read and written without a handle (vfs::Filesystem::Read/Write with fh
  // 0) except those made by CREATE, which keep theirs until RELEASE; with
  // no FLUSH, a staged file is checked once it looks whole and at RELEASE, and
  // close() never fails (staging::Store).
  // On a read-write mount nothing refuses open(O_RDWR) of a file then (root
  // may open any file whatever its mode): what is written is judged at
  // WRITE and SETATTR instead. A record file's write is an edit (its record
  // checked out then); a refused one (a plain file's: EROFS; a value the
  // feature cannot take: EINVAL) fails write(), the kernel keeping its
  // pages, and a refused write-back of a shared writable mapping drops the
  // file's cached pages (DoWrite), so no reader keeps seeing bytes the file
  // does not hold (issue 21, item 19). The CLI sets this unless `-o open`.
  //
  // What a read-write mount still costs on warm reads: on any superblock
  // but a read-only one the kernel drops the atime it has of an inode
  // whenever it fills the inode's pages or listing from the daemon
  // (fuse_invalidate_atime), so the next stat() of a file or folder read
  // through the daemon is one GETATTR (cat, find and ls make one each).
  // No reply or notification sets an atime, so that is one round trip per
  // inode served, once; a warm read after it costs none (issue 36: on the
  // sample dataset's 28,002 files and 10,005 folders, the second
  // `find -exec cat` sends 38,005 GETATTRs, the third nothing).
  bool skip_open = false;
  // Without FUSE_CAP_NO_OPEN_SUPPORT from the kernel (or with skip_open
  // false), read-write mounts without `-o open`: OPEN is
  // answered for every file (a writable open of anything outside staging/
  // fails with EROFS), but staging files get no handle, as with skip_open:
  // OPEN and CREATE reply fh 0 and FOPEN_NOFLUSH (no FLUSH follows; the
  // RELEASE that does finds no handle), writes come with fh 0 (the file is
  // checked once it looks whole), and atomic O_TRUNC is not asked for (a truncating open
  // arrives as SETATTR). Staged files behave exactly as under skip_open; the
  // cost is one OPEN round trip per open() of any file (and a RELEASE,
  // which close() does not wait for).
  bool staging_without_handles = false;
  // Answer getxattr/listxattr (user.tfrecordfs.*, vfs::Filesystem::GetXattr).
  // false (-o noxattr): they answer ENOSYS, after which the kernel asks no
  // more (no round trip for the security.* and ACL probes of ls -l, cp -a
  // and writes).
  bool xattr = true;
};

// What INIT settled that changes later replies. Written only by
// Negotiate(); atomics because INIT and the requests after it may be served
// by different threads, ordered by the kernel rather than by a lock.
struct Negotiated {
  // OPENDIR answers ENOSYS: the kernel opens directories itself.
  std::atomic<bool> no_opendir{false};
  // OPEN and FLUSH answer ENOSYS: the kernel opens and closes files itself,
  // and sends no RELEASE for any file, CREATE'd ones included.
  std::atomic<bool> no_open{false};
};

struct Ops {
  Ops(vfs::Filesystem* fs, OpsOptions options) : fs(fs), options(options) {}

  vfs::Filesystem* fs;
  OpsOptions options;
  Negotiated negotiated;
};

// INIT: fills conn->want from what the kernel offers (conn->capable) and
// ops->options, and records in ops->negotiated what was agreed.
void Negotiate(Ops* ops, struct fuse_conn_info* conn);

void FillStat(const vfs::Attr& a, struct stat* st);

struct EntryReply {
  int err = 0;               // non-zero: reply with this errno
  fuse_entry_param entry{};  // entry.ino == 0 is a cached negative entry
};
// A name missing from the shard tree is a negative entry the kernel keeps
// for negative_timeout (the tree never changes, and shells and image viewers
// probe for sidecar files again and again). A miss that carries an errno
// (an I/O error, a damaged record: base::ErrnoOf) and any miss under
// staging/ (where names appear) are errors, never cached.
EntryReply DoLookup(const Ops& ops, fuse_ino_t parent, absl::string_view name);

struct AttrReply {
  int err = 0;
  struct stat st {};
  double timeout = 0;
};
AttrReply DoGetAttr(const Ops& ops, fuse_ino_t ino);

// Fills up to `size` bytes of directory entries starting at `offset`, in the
// kernel's format (plus = READDIRPLUS).
struct DirReply {
  int err = 0;
  std::string buf;
};
// `fh` is the handle DoOpenDir returned (0 outside the staging area).
DirReply DoReadDir(const Ops& ops, fuse_ino_t ino, size_t size, off_t offset, bool plus,
                   uint64_t fh = 0);

struct OpenReply {
  int err = 0;
  bool keep_cache = false;
  bool noflush = false;  // FOPEN_NOFLUSH: close() sends no FLUSH
  uint64_t fh = 0;
};
// OPEN: checks the file (a damaged record fails here, a writable open
// outside staging/ fails with EROFS) and returns a handle.
// With negotiated.no_open, a file that passes answers ENOSYS instead, its
// handle discarded: "opened, and no FLUSH or RELEASE will follow", so the
// kernel opens every later file itself. With
// options.staging_without_handles, a staging file's handle is discarded and
// the reply is fh 0 with noflush.
OpenReply DoOpen(const Ops& ops, fuse_ino_t ino, int flags);
// OPENDIR: a handle for staging listings (0 elsewhere); ENOSYS, without
// asking the vfs, once negotiated.no_opendir.
OpenReply DoOpenDir(const Ops& ops, fuse_ino_t ino);
// FLUSH (close()): the staged file's checks with a handle; ENOSYS once
// negotiated.no_open (staged files are then checked once they look whole).
int DoFlush(const Ops& ops, fuse_ino_t ino, uint64_t fh);

struct ReadReply {
  int err = 0;
  vfs::ReadResult data;
};
ReadReply DoRead(const Ops& ops, fuse_ino_t ino, size_t size, off_t offset, uint64_t fh = 0);

// Staging-area operations (EROFS elsewhere).
struct CreateReply {
  int err = 0;
  fuse_entry_param entry{};
  // 0 once negotiated.no_open (no RELEASE would close it) and with
  // options.staging_without_handles.
  uint64_t fh = 0;
};
// `caller`: the requesting user's ids (fuse_req_ctx), who get what is made
// where the daemon can give it (staging::Owner); none: the daemon's.
CreateReply DoCreate(const Ops& ops, fuse_ino_t parent, absl::string_view name, mode_t mode,
                     int flags, std::optional<staging::Owner> caller = std::nullopt);
// MKNOD: a regular file is created (and closed) as by CREATE; any other
// type is EPERM in staging/ (only files and folders are staged).
EntryReply DoMknod(const Ops& ops, fuse_ino_t parent, absl::string_view name, mode_t mode,
                   std::optional<staging::Owner> caller = std::nullopt);
EntryReply DoMkdir(const Ops& ops, fuse_ino_t parent, absl::string_view name, mode_t mode,
                   std::optional<staging::Owner> caller = std::nullopt);
// SYMLINK and LINK: links could point outside the store or alias staged
// files, so they are refused: EPERM in staging/, EROFS elsewhere.
int DoLink(const Ops& ops, fuse_ino_t new_parent);
// A chown to the node's own owner and group is a no-op (cp -p, cp -a and
// rsync -a send one); any other owner is EPERM.
AttrReply DoSetAttr(const Ops& ops, fuse_ino_t ino, const struct stat& to, int fuse_to_set,
                    uint64_t fh);
struct WriteReply {
  int err = 0;
  size_t written = 0;
};
// `writepage`: the kernel writes back a shared writable mapping (the
// caller's msync() or the kernel's flusher). Refused, the file's cached
// pages are dropped (vfs::Filesystem::DropPagesLater): they hold bytes the
// file does not.
WriteReply DoWrite(const Ops& ops, fuse_ino_t ino, uint64_t fh, absl::string_view data,
                   off_t offset, bool writepage = false);

struct StatfsReply {
  int err = 0;
  struct statvfs st {};
};
StatfsReply DoStatfs(const Ops& ops);

// getxattr / listxattr with the kernel's size probe: `size` 0 asks for the
// length (reply with fuse_reply_xattr(size)); a value longer than a non-zero
// `size` is ERANGE; otherwise `data` is sent (fuse_reply_buf). listxattr's
// data is the names, each followed by a NUL. A name the node lacks: ENODATA.
struct XattrReply {
  int err = 0;
  bool size_only = false;  // reply with `size` alone
  size_t size = 0;
  std::string data;
};
XattrReply DoGetXattr(const Ops& ops, fuse_ino_t ino, absl::string_view name, size_t size);
XattrReply DoListXattr(const Ops& ops, fuse_ino_t ino, size_t size);
// setxattr and removexattr: the errno to reply (EPERM; ENOTSUP in staging).
int DoSetXattr(const Ops& ops, fuse_ino_t ino, absl::string_view name);

// The callback table the session installs; its userdata is an Ops*.
const fuse_lowlevel_ops& LowLevelOps();

}  // namespace tfrecordfs::fuse

#endif  // TFRECORDFS_FUSE_OPS_H_
