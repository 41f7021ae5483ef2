// tfrecordfs: command line, options, daemon life cycle.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "tfrecordfs/base/log.h"
#include "tfrecordfs/fuse/session.h"
#include "tfrecordfs/vfs/filesystem.h"

#ifndef TFRECORDFS_VERSION
#define TFRECORDFS_VERSION "unknown"
#endif

namespace tfrecordfs {
namespace {

constexpr int kExitUsage = 2;
constexpr int kExitError = 1;

constexpr char kUsage[] = R"(Usage: tfrecordfs [options] SOURCE... MOUNTPOINT

Mounts TensorFlow TFRecord shards as directories: one directory per shard,
one per record, one file per feature. SOURCE is a shard file or a directory
(mirrored recursively; shards are recognised by content, other files are
shown as they are).

Options:
  -f                 stay in the foreground (default: detach once the mount
                     is ready to serve)
  -d                 debug: log every FUSE request (implies -f)
  -s                 single-threaded request loop
  -o OPT[,OPT...]    mount options: FUSE ones (allow_other, ro,
                     default_permissions, fsname=...) and these:
       cache_records=N   parsed records kept in memory (default 4096)
       index_threads=N   threads for the header walk (default: CPUs, max 16)
       nosplice          copy read data instead of splicing it from shards
       timeout=SECONDS   kernel cache time for names and attributes
                         (default 86400: shard data is immutable)
       verbose           log at debug level
  -h, --help         show this help and exit
  -V, --version      show the version and exit

Unmount with `fusermount3 -u MOUNTPOINT` (or `umount` as root).

Exit status: 0 on success, 1 when the mount or a source fails, 2 on a usage
error. With fstab: `SOURCE MOUNTPOINT fuse.tfrecordfs ro,allow_other 0 0`.
)";

struct CliOptions {
  vfs::Options vfs;
  fuse::SessionOptions session;
  std::vector<std::string> positional;
};

int Usage(const std::string& message) {
  std::cerr << "tfrecordfs: " << message << "\nTry 'tfrecordfs --help' for more information.\n";
  return kExitUsage;
}

// Splits -o options into ours and libfuse's. Returns an error message or "".
std::string TakeMountOptions(absl::string_view list, CliOptions* cli) {
  for (absl::string_view opt : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    auto value_of = [&](absl::string_view key) -> std::optional<absl::string_view> {
      if (absl::StartsWith(opt, key) && opt.size() > key.size() && opt[key.size()] == '=') {
        return opt.substr(key.size() + 1);
      }
      return std::nullopt;
    };
    if (auto v = value_of("cache_records")) {
      if (!absl::SimpleAtoi(*v, &cli->vfs.cache_records) || cli->vfs.cache_records == 0) {
        return "cache_records needs a positive number";
      }
    } else if (auto v = value_of("index_threads")) {
      if (!absl::SimpleAtoi(*v, &cli->vfs.index_threads) || cli->vfs.index_threads < 0) {
        return "index_threads needs a number";
      }
    } else if (auto v = value_of("timeout")) {
      double t;
      if (!absl::SimpleAtod(*v, &t) || t < 0) return "timeout needs a number of seconds";
      cli->session.ops.entry_timeout = cli->session.ops.attr_timeout =
          cli->session.ops.negative_timeout = t;
    } else if (opt == "nosplice") {
      cli->session.ops.splice = false;
    } else if (opt == "verbose") {
      log::SetLevel(log::Level::kDebug);
    } else if (opt == "rw" || opt == "defaults" || opt == "auto" || opt == "noauto" ||
               opt == "user" || opt == "nouser" || opt == "users" || opt == "_netdev" ||
               opt == "nofail") {
      // fstab/mount(8) words that mean nothing to a FUSE mount.
    } else {
      if (opt == "allow_other" || opt == "allow_root") {
        // Other users must not bypass the mode bits.
        cli->session.fuse_options.push_back("default_permissions");
      }
      cli->session.fuse_options.emplace_back(opt);
    }
  }
  return "";
}

int Main(int argc, char** argv) {
  CliOptions cli;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (a == "-V" || a == "--version") {
      std::cout << "tfrecordfs " << TFRECORDFS_VERSION << "\n";
      return 0;
    }
    if (a == "-f") {
      cli.session.foreground = true;
    } else if (a == "-d" || a == "--debug") {
      cli.session.debug = true;
      cli.session.foreground = true;
    } else if (a == "-s") {
      cli.session.single_threaded = true;
    } else if (a == "-o") {
      if (i + 1 >= argc) return Usage("-o needs an argument");
      if (std::string err = TakeMountOptions(argv[++i], &cli); !err.empty()) return Usage(err);
    } else if (absl::StartsWith(a, "-o") && a.size() > 2) {
      if (std::string err = TakeMountOptions(a.substr(2), &cli); !err.empty()) return Usage(err);
    } else if (a == "--") {
      for (++i; i < argc; ++i) cli.positional.emplace_back(argv[i]);
    } else if (a.size() > 1 && a[0] == '-') {
      return Usage("unknown option " + a);
    } else {
      cli.positional.push_back(a);
    }
  }
  if (cli.positional.size() < 2) return Usage("need at least one SOURCE and a MOUNTPOINT");
  cli.session.mountpoint = cli.positional.back();
  cli.positional.pop_back();
  cli.vfs.sources = cli.positional;

  bool has_fsname = false;
  for (const auto& o : cli.session.fuse_options) has_fsname |= absl::StartsWith(o, "fsname=");
  if (!has_fsname) {
    std::string fsname = cli.vfs.sources.front();
    for (char& c : fsname) {
      if (c == ',') c = '_';  // a comma would split the option list
    }
    cli.session.fuse_options.push_back("fsname=" + fsname);
  }
  cli.session.fuse_options.push_back("subtype=tfrecordfs");

  // One descriptor per shard stays open: lift the soft limit to the hard one.
  struct rlimit rl;
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }

  auto fs = vfs::Filesystem::Create(cli.vfs);
  if (!fs.ok()) {
    log::Error(fs.status().message());
    return kExitError;
  }
  const vfs::Stats stats = (*fs)->GetStats();
  log::Info("indexed ", stats.records, " record(s) in ", stats.shards, " shard(s); mounting on ",
            cli.session.mountpoint);
  absl::Status s = fuse::RunSession(fs->get(), cli.session);
  if (!s.ok()) {
    log::Error(s.message());
    return kExitError;
  }
  return 0;
}

}  // namespace
}  // namespace tfrecordfs

int main(int argc, char** argv) { return tfrecordfs::Main(argc, argv); }
