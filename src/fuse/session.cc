#include "tfrecordfs/fuse/session.h"

#include <cerrno>
#include <csignal>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tfrecordfs/base/log.h"

namespace tfrecordfs::fuse {

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

  Ops ops{fs, options.ops};
  const fuse_lowlevel_ops& ll = LowLevelOps();
  struct fuse_session* se = fuse_session_new(&args, &ll, sizeof(ll), &ops);
  fuse_opt_free_args(&args);
  if (se == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("libfuse rejected the mount options: ", absl::StrJoin(options.fuse_options, ",")));
  }
  if (fuse_set_signal_handlers(se) != 0) {
    fuse_session_destroy(se);
    return absl::InternalError("cannot install signal handlers");
  }
  if (fuse_session_mount(se, options.mountpoint.c_str()) != 0) {
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot mount on ", options.mountpoint,
                     " (is it an existing directory you may mount on?)"));
  }
  const bool foreground = options.foreground || options.debug;
  if (!foreground) log::UseSyslog(true);
  fuse_daemonize(foreground ? 1 : 0);
  if (options.on_ready) options.on_ready();

  int rc;
  if (options.single_threaded) {
    rc = fuse_session_loop(se);
  } else {
    struct fuse_loop_config* cfg = fuse_loop_cfg_create();
    fuse_loop_cfg_set_clone_fd(cfg, 0);
    fuse_loop_cfg_set_max_threads(cfg, options.max_threads);
    fuse_loop_cfg_set_idle_threads(cfg, options.max_threads / 2 > 0 ? options.max_threads / 2 : 1);
    rc = fuse_session_loop_mt(se, cfg);
    fuse_loop_cfg_destroy(cfg);
  }
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
