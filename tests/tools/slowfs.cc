// slowfs: a read-only FUSE passthrough of a directory that waits a fixed time
// before serving every read and counts the reads: a stand-in for network
// storage (gcsfuse, mountpoint-s3, NFS), where each read is a round trip of
// milliseconds however few bytes it asks for. Tests assert how many reads a
// walk makes (a count, never a time); scripts/bench times work behind it.
//
//   slowfs [-f] [-o delay_ms=N] [-o max_read_kb=K] [-o page_cache] [-o FUSE option...]
//          SOURCE_DIR MOUNTPOINT
//
// delay_ms     milliseconds slept before each read of a file (default 10)
// max_read_kb  the largest read request, in KiB (default 1024; 128 is what
//              the kernel and s3fs negotiate by default, issue 25)
// page_cache   files are opened without direct_io (see below), as libfuse's
//              passthrough example opens them: the kernel's page cache and
//              readahead sit above slowfs, so a sequential reader such as
//              `cat` gets its next requests sent ahead of it (asynchronous
//              readahead, up to max_read each, several in flight) and a
//              reader's small reads are gathered into requests of up to
//              max_read. Each request still pays the delay. This is the
//              harness an outside check of issue 36 used (passthrough plus a
//              sleep): the stricter one for tfrecordfs, whose own parallel
//              reads no longer stand against a `cat` that waits for every
//              request in turn. The page cache of a file is dropped when it
//              is opened (no kernel_cache), so every run starts cold.
//
// `MOUNTPOINT/.slowfs-stats` (not counted, not in SOURCE_DIR) reads
// "reads N\nbytes B\n": the read requests served so far and their bytes.
// Tests take the difference of two readings.
//
// Why every read reaches us: files are opened with direct_io, so the page
// cache neither absorbs repeated reads nor turns a 12-byte pread into a
// 128 KiB readahead. A read request is then what a remote file system sees:
// what the application asked for, cut by the kernel into requests of at
// most max_read (1 MiB, the kernel's largest FUSE request, unless
// max_read_kb says less), each of which pays the delay; the kernel sends
// the requests of one direct read one after another. The mount is read-only (writes fail with
// EROFS) and multithreaded (up to 64 requests in flight, as on a network file system).
#define FUSE_USE_VERSION 35

#include <dirent.h>
#include <fcntl.h>
#include <fuse.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

constexpr char kStatsName[] = ".slowfs-stats";
constexpr unsigned kMaxRequest = 1u << 20;

struct Config {
  unsigned delay_ms = 10;
  unsigned max_read_kb = kMaxRequest >> 10;
  int page_cache = 0;
  const char* source = nullptr;
};

// The one instance, reached through fuse_get_context()->private_data.
struct State {
  int dirfd = -1;
  unsigned delay_ms = 0;
  unsigned max_request = kMaxRequest;
  bool page_cache = false;
  std::atomic<uint64_t> reads{0};
  std::atomic<uint64_t> bytes{0};
};

State* Self() { return static_cast<State*>(fuse_get_context()->private_data); }

// "/a/b" -> "a/b"; "/" -> ".".
std::string Rel(const char* path) {
  while (*path == '/') ++path;
  return *path ? std::string(path) : std::string(".");
}

bool IsStats(const char* path) { return std::strcmp(path + 1, kStatsName) == 0 && path[0] == '/'; }

// fi->fh for the stats file (real files hold their descriptor).
constexpr uint64_t kStatsFh = ~uint64_t{0};

void* Init(fuse_conn_info* conn, fuse_config* cfg) {
  const unsigned max_request = Self()->max_request;
  conn->max_write = max_request;  // lets the kernel negotiate 256 pages per request
  conn->max_read = max_request;
  conn->max_readahead = max_request;
  cfg->direct_io = Self()->page_cache ? 0 : 1;
  cfg->kernel_cache = 0;
  cfg->entry_timeout = cfg->attr_timeout = 3600;
  return fuse_get_context()->private_data;
}

int GetAttr(const char* path, struct stat* st, fuse_file_info*) {
  if (IsStats(path)) {
    std::memset(st, 0, sizeof *st);
    st->st_mode = S_IFREG | 0444;
    st->st_nlink = 1;
    return 0;  // size 0: direct_io reads it to its end anyway
  }
  return ::fstatat(Self()->dirfd, Rel(path).c_str(), st, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno;
}

int ReadLink(const char* path, char* buf, size_t size) {
  const ssize_t n = ::readlinkat(Self()->dirfd, Rel(path).c_str(), buf, size - 1);
  if (n < 0) return -errno;
  buf[n] = '\0';
  return 0;
}

int ReadDir(const char* path, void* buf, fuse_fill_dir_t fill, off_t, fuse_file_info*,
            fuse_readdir_flags) {
  const int fd = ::openat(Self()->dirfd, Rel(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    const int e = errno;
    ::close(fd);
    return -e;
  }
  while (dirent* e = ::readdir(d)) fill(buf, e->d_name, nullptr, 0, fuse_fill_dir_flags{});
  ::closedir(d);
  if (std::strcmp(path, "/") == 0) fill(buf, kStatsName, nullptr, 0, fuse_fill_dir_flags{});
  return 0;
}

int Open(const char* path, fuse_file_info* fi) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY) return -EROFS;
  fi->direct_io = 1;
  if (IsStats(path)) {  // size 0: read through direct_io whatever page_cache says
    fi->fh = kStatsFh;
    return 0;
  }
  if (Self()->page_cache) fi->direct_io = 0;
  const int fd = ::openat(Self()->dirfd, Rel(path).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  fi->fh = static_cast<uint64_t>(fd);
  return 0;
}

int Read(const char*, char* buf, size_t size, off_t offset, fuse_file_info* fi) {
  State* s = Self();
  if (fi->fh == kStatsFh) {
    char text[128];
    const int n = std::snprintf(text, sizeof text, "reads %llu\nbytes %llu\n",
                                static_cast<unsigned long long>(s->reads.load()),
                                static_cast<unsigned long long>(s->bytes.load()));
    if (offset >= n) return 0;
    const size_t len = std::min(size, static_cast<size_t>(n - offset));
    std::memcpy(buf, text + offset, len);
    return static_cast<int>(len);
  }
  if (s->delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(s->delay_ms));
  const ssize_t got = ::pread(static_cast<int>(fi->fh), buf, size, offset);
  if (got < 0) return -errno;
  s->reads.fetch_add(1);
  s->bytes.fetch_add(static_cast<uint64_t>(got));
  return static_cast<int>(got);
}

int Release(const char*, fuse_file_info* fi) {
  if (fi->fh != kStatsFh) ::close(static_cast<int>(fi->fh));
  return 0;
}

int StatFs(const char*, struct statvfs* sv) {
  return ::fstatvfs(Self()->dirfd, sv) == 0 ? 0 : -errno;
}

int Access(const char* path, int mask) {
  if (mask & W_OK) return -EROFS;
  if (IsStats(path)) return 0;
  return ::faccessat(Self()->dirfd, Rel(path).c_str(), mask, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno;
}

const fuse_opt kOpts[] = {
    {"delay_ms=%u", offsetof(Config, delay_ms), 0},
    {"max_read_kb=%u", offsetof(Config, max_read_kb), 0},
    {"page_cache", offsetof(Config, page_cache), 1},
    FUSE_OPT_END,
};

int TakeArg(void* data, const char* arg, int key, fuse_args*) {
  auto* config = static_cast<Config*>(data);
  if (key == FUSE_OPT_KEY_NONOPT && config->source == nullptr) {
    config->source = arg;
    return 0;  // ours; the mountpoint goes on to libfuse
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  fuse_args args = FUSE_ARGS_INIT(argc, argv);
  Config config;
  if (fuse_opt_parse(&args, &config, kOpts, TakeArg) != 0) return 2;
  if (config.source == nullptr) {
    std::fprintf(stderr,
                 "Usage: slowfs [-f] [-o delay_ms=N] [-o max_read_kb=K] [-o page_cache] "
                 "[-o FUSE option...] SOURCE_DIR MOUNTPOINT\n");
    return 2;
  }
  if (config.max_read_kb < 4 || config.max_read_kb > (kMaxRequest >> 10)) {
    std::fprintf(stderr, "slowfs: max_read_kb must be from 4 to %u\n", kMaxRequest >> 10);
    return 2;
  }
  static State state;
  state.delay_ms = config.delay_ms;
  state.max_request = config.max_read_kb << 10;
  state.page_cache = config.page_cache != 0;
  state.dirfd = ::open(config.source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (state.dirfd < 0) {
    std::fprintf(stderr, "slowfs: %s: %s\n", config.source, std::strerror(errno));
    return 1;
  }
  const std::string fixed =
      "-oro,fsname=slowfs,subtype=slowfs,max_read=" + std::to_string(state.max_request);
  fuse_opt_add_arg(&args, fixed.c_str());
  fuse_opt_add_arg(&args, "-omax_threads=64");

  fuse_operations ops = {};
  ops.init = Init;
  ops.getattr = GetAttr;
  ops.readlink = ReadLink;
  ops.readdir = ReadDir;
  ops.open = Open;
  ops.read = Read;
  ops.release = Release;
  ops.statfs = StatFs;
  ops.access = Access;
  const int rc = fuse_main(args.argc, args.argv, &ops, &state);
  fuse_opt_free_args(&args);
  return rc;
}
