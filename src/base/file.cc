#include "tfrecordfs/base/file.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tfrecordfs {

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status UniqueFd::Close() {
  if (fd_ < 0) return absl::OkStatus();
  int fd = release();
  if (::close(fd) != 0 && errno != EINTR) return ErrnoError(errno, "close");
  return absl::OkStatus();
}

namespace {
constexpr absl::string_view kErrnoPayload = "tfrecordfs/errno";

absl::Status CodeForErrno(int err, std::string msg) {
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EEXIST:
      return absl::AlreadyExistsError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case EROFS:
      return absl::FailedPreconditionError(msg);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(msg);
    case EINVAL:
    case ENAMETOOLONG:
      return absl::InvalidArgumentError(msg);
    case ENOTDIR:
    case EISDIR:
    case ENOTEMPTY:
      return absl::FailedPreconditionError(msg);
    case EIO:
      return absl::DataLossError(msg);
    default:
      return absl::InternalError(msg);
  }
}
}  // namespace

absl::Status PosixError(int err, absl::string_view message) {
  absl::Status s = CodeForErrno(err, std::string(message));
  s.SetPayload(kErrnoPayload, absl::Cord(absl::StrCat(err)));
  return s;
}

int ErrnoOf(const absl::Status& status) {
  auto p = status.GetPayload(kErrnoPayload);
  int err = 0;
  if (!p || !absl::SimpleAtoi(std::string(*p), &err)) return 0;
  return err;
}

absl::Status SetMessage(const absl::Status& status, absl::string_view message) {
  if (status.ok()) return status;
  absl::Status out(status.code(), message);
  status.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok() || context.empty()) return status;
  return SetMessage(status, absl::StrCat(context, ": ", status.message()));
}

absl::Status ErrnoError(int err, absl::string_view context) {
  return PosixError(err, absl::StrCat(context, ": ", std::strerror(err)));
}

absl::StatusOr<UniqueFd> OpenFile(const std::string& path, int flags, mode_t mode) {
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoError(errno, path);
  return UniqueFd(fd);
}

absl::StatusOr<size_t> PreadUpTo(int fd, void* buf, size_t n, uint64_t offset,
                                 absl::string_view path) {
  auto* p = static_cast<char*>(buf);
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, p + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, absl::StrCat(path, " at byte offset ", offset + done));
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return done;
}

absl::Status ExpectFullRead(const absl::StatusOr<size_t>& read, size_t n, uint64_t offset,
                            absl::string_view path, absl::string_view what) {
  if (!read.ok()) return read.status();
  if (*read != n) {
    return absl::OutOfRangeError(absl::StrCat(path, ": unexpected end of ", what,
                                              " at byte offset ", offset + *read, " (wanted ", n,
                                              " bytes at ", offset, ")"));
  }
  return absl::OkStatus();
}

absl::Status PreadFull(int fd, void* buf, size_t n, uint64_t offset, absl::string_view path) {
  return ExpectFullRead(PreadUpTo(fd, buf, n, offset, path), n, offset, path, "file");
}

absl::Status WriteFull(int fd, const void* buf, size_t n, absl::string_view path) {
  const auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, path);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

size_t ReserveDescriptors(size_t count) {
  struct rlimit rl;
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
    ::getrlimit(RLIMIT_NOFILE, &rl);
  }
  const size_t limit = rl.rlim_cur == RLIM_INFINITY ? SIZE_MAX : static_cast<size_t>(rl.rlim_cur);
  const size_t top = std::min<size_t>({count, limit, size_t{1} << 20});
  if (top > 1) {
    // A descriptor at or above top-1 makes the table grow to hold it.
    const int any = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (any >= 0) {
      const int fd = ::fcntl(any, F_DUPFD_CLOEXEC, static_cast<int>(top - 1));
      if (fd >= 0) ::close(fd);
      ::close(any);
    }
  }
  return limit;
}

absl::Status FsyncDir(const std::string& dir) {
  auto fd = OpenFile(dir, O_RDONLY | O_DIRECTORY);
  if (!fd.ok()) return fd.status();
  if (::fsync(fd->get()) != 0) return ErrnoError(errno, absl::StrCat("fsync ", dir));
  return absl::OkStatus();
}

namespace {

// Writes `pieces`, one after the other, to the new file `tmp` (created with
// `flags`), fsyncs it when `durable`, and renames it over `path`; on failure
// `tmp` is removed.
absl::Status WriteThenRename(const std::string& tmp, int flags, bool durable,
                             const std::string& path, absl::Span<const absl::string_view> pieces) {
  auto fd = OpenFile(tmp, flags, 0644);
  if (!fd.ok()) return fd.status();
  absl::Status s;
  for (absl::string_view piece : pieces) {
    if (s.ok()) s = WriteFull(fd->get(), piece.data(), piece.size(), tmp);
  }
  if (s.ok() && durable && ::fsync(fd->get()) != 0) {
    s = ErrnoError(errno, absl::StrCat("fsync ", tmp));
  }
  if (s.ok()) s = fd->Close();
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    s = ErrnoError(errno, absl::StrCat("rename ", tmp, " -> ", path));
  }
  if (!s.ok()) ::unlink(tmp.c_str());
  return s;
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  return WriteFileAtomically(path, absl::MakeConstSpan(&contents, 1));
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::Span<const absl::string_view> pieces) {
  // One writer per path at a time: `<path>.tmp.<pid>` is the name recovery
  // (repack/recover.cc) looks for after a crash.
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  if (auto s = WriteThenRename(tmp, O_WRONLY | O_CREAT | O_TRUNC, /*durable=*/true, path, pieces);
      !s.ok()) {
    return s;
  }
  return FsyncDir(Dirname(path));
}

absl::Status WriteFileReplacing(const std::string& path, absl::string_view contents) {
  return WriteFileReplacing(path, absl::MakeConstSpan(&contents, 1));
}

absl::Status WriteFileReplacing(const std::string& path,
                                absl::Span<const absl::string_view> pieces) {
  // Threads and processes may replace the same path at once: each has a
  // temp file of its own (pid and a counter, O_EXCL).
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid(), ".", counter.fetch_add(1));
  return WriteThenRename(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, /*durable=*/false, path,
                         pieces);
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  auto fd = OpenFile(path, O_RDONLY);
  if (!fd.ok()) return fd.status();
  std::string out;
  char buf[65536];
  uint64_t off = 0;
  for (;;) {
    auto got = PreadUpTo(fd->get(), buf, sizeof buf, off, path);
    if (!got.ok()) return got.status();
    out.append(buf, *got);
    off += *got;
    if (*got < sizeof buf) break;
  }
  return out;
}

std::string Dirname(absl::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  size_t slash = path.rfind('/');
  if (slash == absl::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

std::string Basename(absl::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  size_t slash = path.rfind('/');
  if (slash == absl::string_view::npos) return std::string(path);
  return std::string(path.substr(slash + 1));
}

}  // namespace tfrecordfs
