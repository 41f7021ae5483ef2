#include "tfrecordfs/fuse/session.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/base/mutex.h"

namespace tfrecordfs::fuse {
namespace {

// libfuse's errors and warnings ("fuse: failed to open /dev/fuse:
// Permission denied") go through our log (the terminal, the mount's log
// file, syslog once detached; the rest, -d's trace, to stderr as libfuse
// writes it), and the last error among them is kept so that the mount's
// own error names the real cause instead of guessing at one. libfuse's log
// function takes no user data: this is process-wide, set once, and only
// ever appended to under its lock.
Mutex g_fuse_error_mu;
std::string g_fuse_error ABSL_GUARDED_BY(g_fuse_error_mu);

void LogFromLibfuse(enum fuse_log_level level, const char* fmt, va_list ap) {
  if (level > FUSE_LOG_WARNING) {
    // -d's request trace and notices: to stderr as libfuse writes them
    // (tests and users read that trace as it is).
    std::vfprintf(stderr, fmt, ap);
    return;
  }
  char buf[1024];
  const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  if (n <= 0) return;
  absl::string_view text(buf, std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1));
  text = absl::StripTrailingAsciiWhitespace(text);
  absl::ConsumePrefix(&text, "fuse: ");
  if (level <= FUSE_LOG_ERR) {
    log::Error("libfuse: ", text);
    MutexLock lock(&g_fuse_error_mu);
    g_fuse_error = std::string(text);
  } else {
    log::Warning("libfuse: ", text);
  }
}

std::string TakeFuseError() {
  MutexLock lock(&g_fuse_error_mu);
  return std::exchange(g_fuse_error, "");
}

// The daemon serves from "/" so that it keeps no directory busy (every
// path it opens later is absolute). Failing that is harmless: say so.
void ChdirToRoot() {
  if (::chdir("/") != 0) log::Warning("cannot change to /: ", std::strerror(errno));
}

// Detaches like fuse_daemonize(), with one difference: the parent exits only
// once the child has run on_ready and written a byte to the pipe whose write
// end this returns, so that when `tfrecordfs SRC MNT` returns the mount's
// record exists and `tfrecordfs unmount MNT` finds it (fuse_daemonize lets
// the parent go as soon as the child has forked). The parent exits 1 if the
// child ends without saying so. Returns only in the child.
absl::StatusOr<int> Detach() {
  int waiter[2];
  if (::pipe2(waiter, O_CLOEXEC) != 0) return ErrnoError(errno, "cannot detach: pipe");
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(waiter[0]);
    ::close(waiter[1]);
    return ErrnoError(err, "cannot detach: fork");
  }
  if (pid > 0) {
    ::close(waiter[1]);
    char ready = 0;
    ssize_t n;
    do {
      n = ::read(waiter[0], &ready, 1);
    } while (n < 0 && errno == EINTR);
    ::_exit(n == 1 ? 0 : 1);
  }
  ::close(waiter[0]);
  (void)::setsid();
  ChdirToRoot();
  const int null_fd = ::open("/dev/null", O_RDWR);
  if (null_fd >= 0) {
    for (int fd : {0, 1, 2}) ::dup2(null_fd, fd);
    if (null_fd > 2) ::close(null_fd);
  }
  return waiter[1];
}

}  // namespace

absl::Status RunSession(vfs::Filesystem* fs, const SessionOptions& options) {
  std::vector<std::string> argv_store = {"tfrecordfs"};
  if (options.debug) argv_store.push_back("-d");
  if (!options.fuse_options.empty()) {
    argv_store.push_back("-o");
    argv_store.push_back(absl::StrJoin(options.fuse_options, ","));
  }
  std::vector<char*> argv;
  for (auto& a : argv_store) argv.push_back(a.data());
  argv.push_back(nullptr);
  struct fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv_store.size()), argv.data());

  fuse_set_log_func(LogFromLibfuse);
  (void)TakeFuseError();
  Ops ops{fs, options.ops};
  const fuse_lowlevel_ops& ll = LowLevelOps();
  struct fuse_session* se = fuse_session_new(&args, &ll, sizeof(ll), &ops);
  fuse_opt_free_args(&args);
  if (se == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("libfuse rejected the mount options: ",
                                                   absl::StrJoin(options.fuse_options, ",")));
  }
  if (fuse_set_signal_handlers(se) != 0) {
    fuse_session_destroy(se);
    return absl::InternalError("cannot install signal handlers");
  }
  if (fuse_session_mount(se, options.mountpoint.c_str()) != 0) {
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    // libfuse said why (logged as it did); fusermount3, when libfuse ran
    // it, printed its reason to our stderr itself.
    const std::string cause = TakeFuseError();
    return absl::FailedPreconditionError(
        cause.empty() ? absl::StrCat("cannot mount on ", options.mountpoint,
                                     " (is it an existing directory you may mount on?)")
                      : absl::StrCat("cannot mount on ", options.mountpoint, ": ", cause));
  }
  const bool foreground = options.foreground || options.debug;
  int ready_fd = -1;
  if (foreground) {
    ChdirToRoot();
  } else {
    auto detached = Detach();
    if (!detached.ok()) {
      fuse_session_unmount(se);
      fuse_remove_signal_handlers(se);
      fuse_session_destroy(se);
      return detached.status();
    }
    ready_fd = *detached;
    log::UseSyslog(true);
  }
  // What a commit while mounted makes wrong in the kernel's caches
  // (vfs::Filesystem::Commit). An entry or inode it does not have: -ENOENT,
  // nothing to do.
  fs->SetInvalidator(vfs::Filesystem::Invalidator{
      .inode = [se](uint64_t ino) { fuse_lowlevel_notify_inval_inode(se, ino, 0, 0); },
      .entry =
          [se](uint64_t parent, const std::string& name) {
            fuse_lowlevel_notify_inval_entry(se, parent, name.data(), name.size());
          },
  });
  if (options.on_ready) options.on_ready();
  if (ready_fd >= 0) {
    const char ready = 1;
    (void)!::write(ready_fd, &ready, 1);
    ::close(ready_fd);
  }

  int rc;
  if (options.single_threaded) {
    rc = fuse_session_loop(se);
  } else {
    struct fuse_loop_config* cfg = fuse_loop_cfg_create();
    fuse_loop_cfg_set_clone_fd(cfg, options.clone_fd ? 1 : 0);
    fuse_loop_cfg_set_max_threads(cfg, options.max_threads);
    fuse_loop_cfg_set_idle_threads(cfg, options.max_threads / 2 > 0 ? options.max_threads / 2 : 1);
    rc = fuse_session_loop_mt(se, cfg);
    fuse_loop_cfg_destroy(cfg);
  }
  fs->SetInvalidator(std::nullopt);
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  // -ECONNABORTED: the kernel tore the connection down rather than reporting
  // ENODEV (Linux 6.x does this when the last user of a lazily unmounted
  // mount goes away, and for /sys/fs/fuse/connections/N/abort). Either way
  // the mount is gone and nothing more will arrive: a normal end.
  if (rc == -ECONNABORTED) {
    log::Info("the kernel closed the FUSE connection (mount gone)");
    rc = 0;
  }
  if (rc != 0 && rc != SIGINT && rc != SIGTERM && rc != SIGHUP) {
    return absl::InternalError(absl::StrCat("FUSE loop ended with error ", rc));
  }
  return absl::OkStatus();
}

}  // namespace tfrecordfs::fuse
