#include "tfrecordfs/source/shard_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/fs_util.h"

namespace tfrecordfs::source {

absl::string_view CodecName(Codec codec) {
  switch (codec) {
    case Codec::kNone:
      return "none";
    case Codec::kGzip:
      return "gzip";
    case Codec::kZlib:
      return "zlib";
    case Codec::kSnappy:
      return "snappy";
    case Codec::kArrayRecord:
      return "arrayrecord";
  }
  return "?";
}

std::optional<Codec> ParseCodecName(absl::string_view name) {
  for (Codec c : {Codec::kNone, Codec::kGzip, Codec::kZlib}) {
    if (name == CodecName(c)) return c;
  }
  return std::nullopt;
}

Codec DetectCodec(absl::string_view b) {
  if (b.size() >= 3 && static_cast<unsigned char>(b[0]) == 0x1f &&
      static_cast<unsigned char>(b[1]) == 0x8b && b[2] == 8) {
    return Codec::kGzip;
  }
  if (b.size() >= 2) {
    const unsigned cmf = static_cast<unsigned char>(b[0]);
    const unsigned flg = static_cast<unsigned char>(b[1]);
    const bool deflate = (cmf & 0x0f) == 8 && (cmf >> 4) <= 7;
    const bool check = (cmf * 256 + flg) % 31 == 0;
    const bool no_dict = (flg & 0x20) == 0;
    if (deflate && check && no_dict) return Codec::kZlib;
  }
  return Codec::kNone;
}

namespace {

bool RemoteType(int64_t type) {
  switch (static_cast<uint32_t>(type)) {
    case 0x65735546u:  // FUSE (gcsfuse, mountpoint-s3, s3fs, sshfs, ...)
    case 0x6969u:      // NFS
    case 0xFF534D42u:  // CIFS
    case 0xFE534D42u:  // SMB2
    case 0x517Bu:      // SMB
    case 0x0BD00BD0u:  // Lustre
    case 0x00C36400u:  // Ceph
    case 0x01021997u:  // 9p (v9fs)
    case 0x47504653u:  // GPFS
    case 0x5346414Fu:  // AFS
    case 0x73757245u:  // Coda
      return true;
    default:
      return false;
  }
}

}  // namespace

bool OnRemoteStorage(int fd) {
  struct statfs sf;
  return ::fstatfs(fd, &sf) == 0 && RemoteType(sf.f_type);
}

bool InodesPersist(int fd) {
  struct statfs sf;
  return ::fstatfs(fd, &sf) != 0 || static_cast<uint32_t>(sf.f_type) != 0x65735546u;
}

bool OnRemoteStorage(const std::string& path) {
  for (absl::string_view scheme : {"s3://", "gs://", "http://", "https://"}) {
    if (absl::StartsWith(path, scheme)) return true;  // an object source
  }
  struct statfs sf;
  return ::statfs(path.c_str(), &sf) == 0 && RemoteType(sf.f_type);
}

absl::Status ShardSource::ReadFull(uint64_t offset, char* buf, size_t n) const {
  auto got = ReadAt(offset, buf, n);
  if (!got.ok()) return got.status();
  if (*got < n) {
    return absl::DataLossError(
        absl::StrCat(path(), ": ", n, " byte(s) wanted at offset ", offset, ", but the ",
                     codec() == Codec::kNone ? "file" : "stream", " ends after ", *got));
  }
  return absl::OkStatus();
}

// ---- FdCache ----

absl::StatusOr<Lease> FdCache::Get(uint64_t key,
                                   const std::function<absl::StatusOr<UniqueFd>()>& open) {
  {
    MutexLock lock(&mu_);
    if (Fd* hit = fds_.Get(key)) return Lease{(*hit)->get(), *hit};
  }
  auto fd = open();  // outside the lock: an open on network storage is slow
  if (!fd.ok()) return fd.status();
  opens_.fetch_add(1, std::memory_order_relaxed);
  auto shared = std::make_shared<const UniqueFd>(std::move(*fd));
  std::vector<Fd> dropped;  // closed (once no lease holds them) after the lock
  MutexLock lock(&mu_);
  if (Fd* hit = fds_.Get(key)) {  // another reader opened it meanwhile: use that one
    return Lease{(*hit)->get(), *hit};
  }
  fds_.set_limits({.max_count = capacity_});
  dropped = fds_.Put(key, shared, 0);
  return Lease{shared->get(), shared};
}

void FdCache::Drop(uint64_t key) {
  std::optional<Fd> dropped;  // closed (once no lease holds it) after the lock
  MutexLock lock(&mu_);
  dropped = fds_.Take(key);
}

size_t FdCache::size() const {
  MutexLock lock(&mu_);
  return fds_.size();
}

// ---- ShardFile ----

FileIdentity FileIdentity::Of(const struct stat& st, int fd) {
  FileIdentity id;
  id.ino_persists = fd < 0 || InodesPersist(fd);
  id.dev = static_cast<uint64_t>(st.st_dev);
  id.ino = static_cast<uint64_t>(st.st_ino);
  id.size = static_cast<uint64_t>(st.st_size);
  id.mtime_ns = MtimeNs(st);
  return id;
}

namespace {

absl::Status Changed(const std::string& path, absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat(path, ": the shard changed under the mount (", what,
                   "); shards must not change while mounted: remount to index it again"));
}

absl::Status Compare(const std::string& path, const FileIdentity& want, const struct stat& st) {
  const FileIdentity now = FileIdentity::Of(st);
  if (want.ino_persists && (now.dev != want.dev || now.ino != want.ino)) {
    return Changed(path, "another file");
  }
  if (now.size != want.size) {
    return Changed(path, absl::StrCat("size ", want.size, " -> ", now.size, " bytes"));
  }
  if (now.mtime_ns != want.mtime_ns) return Changed(path, "mtime changed");
  return absl::OkStatus();
}

}  // namespace

ShardFile::ShardFile(std::string path, FileIdentity identity, FdCache* cache)
    : path_(std::move(path)), cache_(cache), key_(cache->NewKey()), identity_(identity) {}

ShardFile::ShardFile(UniqueFd fd, std::string path)
    : path_(std::move(path)), owned_(std::make_shared<const UniqueFd>(std::move(fd))) {}

ShardFile::ShardFile(std::shared_ptr<const ObjectReader> object)
    : path_(object->url()), object_(std::move(object)) {}

ShardFile ShardFile::Borrowed(StoredBytes in, std::string path) {
  ShardFile f(UniqueFd(), std::move(path));
  f.owned_.reset();
  f.borrowed_ = in.fd();
  f.borrowed_object_ = in.object();
  return f;
}

absl::StatusOr<Lease> ShardFile::Open() const {
  if (object_) return Lease{-1, object_, object_.get()};
  if (borrowed_object_ != nullptr) return Lease{-1, nullptr, borrowed_object_};
  if (owned_) return Lease{owned_->get(), owned_};
  if (cache_ == nullptr) return Lease{borrowed_, nullptr};
  return cache_->Get(key_, [this]() -> absl::StatusOr<UniqueFd> {
    // Non-blocking (a shard swapped for a FIFO must not hang the reader),
    // and it must still be the file that was indexed.
    auto fd = OpenFile(path_, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (!fd.ok()) return fd.status();
    struct stat st;
    if (::fstat(fd->get(), &st) != 0) return ErrnoError(errno, path_);
    if (!S_ISREG(st.st_mode)) return Changed(path_, "no longer a regular file");
    if (auto s = Compare(path_, identity_, st); !s.ok()) return s;
    return std::move(*fd);
  });
}

absl::Status ShardFile::CheckUnchanged() const {
  if (cache_ == nullptr) return absl::OkStatus();
  auto lease = Open();
  if (!lease.ok()) return lease.status();
  struct stat st;
  if (::fstat(lease->fd, &st) != 0) return ErrnoError(errno, path_);
  return Compare(path_, identity_, st);
}

// ---- PlainSource ----

absl::StatusOr<size_t> PlainSource::ReadAt(uint64_t offset, char* buf, size_t n) const {
  if (offset >= size_) return size_t{0};
  if (n > size_ - offset) n = static_cast<size_t>(size_ - offset);
  auto lease = file_.Open();
  if (!lease.ok()) return lease.status();
  auto got = PreadUpTo(lease->bytes(), buf, n, offset, path());
  if (!got.ok()) return got.status();
  if (*got < n) {
    return Changed(path(), absl::StrCat("it ends before byte offset ", offset + n,
                                        " of its indexed ", size_, " bytes"));
  }
  return got;
}

absl::StatusOr<std::optional<FileRange>> PlainSource::Spliceable(uint64_t offset) const {
  auto lease = file_.Open();
  if (!lease.ok()) return lease.status();
  if (lease->fd < 0) return std::optional<FileRange>();  // an object: bytes are copied
  return std::optional<FileRange>(FileRange{lease->fd, offset, std::move(lease->hold)});
}

}  // namespace tfrecordfs::source
