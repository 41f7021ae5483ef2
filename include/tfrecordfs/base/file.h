// File-descriptor helpers: RAII ownership, full pread/write loops that retry
// on EINTR and short transfers, and durable replacement of a file.
//
// All functions return absl::Status values whose messages name the path and,
// for reads, the byte offset. Thread-safety: UniqueFd is not synchronised; the
// free functions are safe to call concurrently on a shared descriptor (pread
// and pwrite do not move the file offset).
#ifndef TFRECORDFS_BASE_FILE_H_
#define TFRECORDFS_BASE_FILE_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace tfrecordfs {

// Owns one file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // Closes now and reports the error close() returned (matters for writes on
  // NFS and for detecting deferred write errors).
  absl::Status Close();

 private:
  int fd_ = -1;
};

// Maps errno to an absl::Status with `context` (usually a path) in the message.
// The errno itself rides along as a payload (see ErrnoOf), so the FUSE layer
// can answer with exactly it.
absl::Status ErrnoError(int err, absl::string_view context);

// A status that carries `err` for the FUSE reply and `message` for the log.
absl::Status PosixError(int err, absl::string_view message);

// The errno a status carries (PosixError / ErrnoError), or 0 if none.
int ErrnoOf(const absl::Status& status);

// `status` with its message replaced by `message`, keeping its code and
// every payload (the errno of ErrnoOf among them). An OK status stays OK.
// Rebuilding a status from its code instead (absl::Status(s.code(), ...))
// drops the payloads, and with them the errno the FUSE layer answers with.
absl::Status SetMessage(const absl::Status& status, absl::string_view message);

// `status` with `context` put before its message ("<context>: <message>"),
// keeping its code and every payload, as SetMessage does. An OK status, or an
// empty `context`, leaves `status` as it is.
absl::Status Annotate(const absl::Status& status, absl::string_view context);

absl::StatusOr<UniqueFd> OpenFile(const std::string& path, int flags, mode_t mode = 0);

// Reads up to n bytes at offset; returns the number read, which is less than n
// only at end of file.
absl::StatusOr<size_t> PreadUpTo(int fd, void* buf, size_t n, uint64_t offset,
                                 absl::string_view path);

// Reads exactly n bytes or fails (OutOfRange at end of file).
absl::Status PreadFull(int fd, void* buf, size_t n, uint64_t offset, absl::string_view path);

// PreadFull's verdict on `read`, the result of reading up to `n` bytes at
// `offset` of `path` (a file, an object: `what` says which): its error, or
// OutOfRange "<path>: unexpected end of <what> at byte offset ..." when
// fewer than `n` bytes were there, else OK.
absl::Status ExpectFullRead(const absl::StatusOr<size_t>& read, size_t n, uint64_t offset,
                            absl::string_view path, absl::string_view what);

absl::Status WriteFull(int fd, const void* buf, size_t n, absl::string_view path);

// fsync of a directory, so that a rename or unlink inside it is durable.
absl::Status FsyncDir(const std::string& dir);

// Writes `contents` to `path` durably: temp file in the same directory, fsync,
// rename over `path`, fsync of the directory. Readers see the old or the new
// file, never a torn one.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// Replaces `path` with `contents` through a temp file of its own (safe to
// call concurrently for the same path) and a rename, without fsync: readers
// see the old file or the new one, but after a power cut the new one may be
// torn. For caches whose files carry a checksum (the index cache, class
// groupings) that is the right trade: a torn file is rebuilt, and a durable
// write would cost two fsyncs per file.
absl::Status WriteFileReplacing(const std::string& path, absl::string_view contents);

// The same two with the contents in pieces, written one after the other
// (a large part need not be copied into one string first).
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::Span<const absl::string_view> pieces);
absl::Status WriteFileReplacing(const std::string& path,
                                absl::Span<const absl::string_view> pieces);

absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Makes room for `count` open descriptors: lifts the soft RLIMIT_NOFILE to
// the hard one, and grows the kernel's descriptor table to hold them
// now. Growing that table in a process with several threads waits for an RCU
// grace period (milliseconds) at every doubling; done up front, before the
// threads exist, it costs nothing. Returns how many descriptors the soft
// limit allows. Call it while the process is still single-threaded.
size_t ReserveDescriptors(size_t count);

// Directory part of a path ("." when there is none) and the last component.
std::string Dirname(absl::string_view path);
std::string Basename(absl::string_view path);

}  // namespace tfrecordfs

#endif  // TFRECORDFS_BASE_FILE_H_
