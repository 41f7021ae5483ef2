#include "src/cli/runtime.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/objstore/listing.h"

namespace tfrecordfs::cli {
namespace {

std::string Home() {
  const char* h = std::getenv("HOME");
  return h && *h ? h : "/root";
}

std::string RuntimeDir() {
  if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && *x) {
    return absl::StrCat(x, "/tfrecordfs");
  }
  if (::geteuid() == 0) return "/run/tfrecordfs";
  return absl::StrCat("/tmp/tfrecordfs-", ::geteuid());
}

}  // namespace

std::string AbsolutePath(const std::string& path) {
  if (path.empty() || path.front() == '/') return path;
  char cwd[PATH_MAX];
  // No current directory (deleted, or too long a path): keep the relative
  // path, which then fails with the name the user gave rather than another.
  if (::getcwd(cwd, sizeof cwd) == nullptr) return path;
  const absl::string_view dir = cwd;
  return absl::StrCat(dir, dir.back() == '/' ? "" : "/", path);
}

std::string DefaultStagingDir(const std::vector<std::string>& sources) {
  std::string key;
  for (const auto& s : sources) {
    absl::StrAppend(&key, RealPath(s).value_or(s), std::string(1, '\0'));
  }
  // Named without a URL's query string (a presigned URL's credentials).
  std::string name =
      Basename(RealPath(sources.front()).value_or(objstore::RedactSource(sources.front())));
  for (char& c : name) {
    if (c == '/' || c == '.' || static_cast<unsigned char>(c) < 0x20) c = '_';
  }
  const char* state = std::getenv("XDG_STATE_HOME");
  const std::string base = state && *state ? state : Home() + "/.local/state";
  return absl::StrFormat("%s/tfrecordfs/staging/%s-%08x", base, name, crc32c::Value(key));
}

std::string DefaultLogPath(const std::string& mountpoint_realpath) {
  // systemd-escape --path: no leading/trailing '/', '/' -> '-', and bytes
  // other than [A-Za-z0-9:_.] (and a leading '.') as \xXX.
  absl::string_view p = mountpoint_realpath;
  while (!p.empty() && p.front() == '/') p.remove_prefix(1);
  while (!p.empty() && p.back() == '/') p.remove_suffix(1);
  std::string name;
  for (size_t i = 0; i < p.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(p[i]);
    if (c == '/') {
      name.push_back('-');
    } else if (std::isalnum(c) || c == ':' || c == '_' || (c == '.' && i > 0)) {
      name.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&name, absl::StrFormat("\\x%02x", c));
    }
  }
  if (name.empty()) name.push_back('-');  // the root directory
  const char* state = std::getenv("XDG_STATE_HOME");
  const std::string base = state && *state ? state : Home() + "/.local/state";
  return absl::StrCat(base, "/tfrecordfs/log/", name, ".log");
}

LogProblems ScanLog(const std::string& path, uint64_t start) {
  LogProblems out;
  auto text = ReadFileToString(path);
  if (!text.ok() || start > text->size()) return out;
  std::vector<absl::string_view> errors, warnings;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(*text).substr(start), '\n', absl::SkipEmpty())) {
    const bool error = absl::StrContains(line, "]: error: ");
    const bool warning = absl::StrContains(line, "]: warning: ");
    if (!error && !warning) continue;
    ++(error ? out.errors : out.warnings);
    (error ? errors : warnings).emplace_back(line);
  }
  // Errors first: an EIO's reason matters more than what the walk resynced.
  for (auto* lines : {&errors, &warnings}) {
    for (absl::string_view line : *lines) {
      if (out.first.size() < 5) out.first.emplace_back(line);
    }
  }
  return out;
}

std::string DefaultOutputDir(const std::vector<std::string>& sources) {
  const std::string first =
      RealPath(sources.front()).value_or(objstore::RedactSource(sources.front()));
  struct stat st;
  if (::stat(first.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return first;
  return Dirname(first);
}

std::string RegistryPath(const std::string& mountpoint_realpath) {
  return absl::StrFormat("%s/%08x.mount", RuntimeDir(), crc32c::Value(mountpoint_realpath));
}

absl::Status WriteMountRecord(const MountRecord& r) {
  const std::string dir = RuntimeDir();
  // One level, not MakeDirs: its parent ($XDG_RUNTIME_DIR, /run, /tmp)
  // belongs to the system, and a missing one is not ours to create.
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoError(errno, dir);
  return WriteFileAtomically(
      RegistryPath(r.mountpoint),
      absl::StrCat("mountpoint=", r.mountpoint, "\nstore=", r.store, "\npid=", r.pid,
                   "\nread_only=", r.read_only ? 1 : 0, "\nlog=", r.log,
                   "\nlog_start=", r.log_start, "\nstaging=", r.staging, "\n"));
}

absl::StatusOr<MountRecord> ReadMountRecord(const std::string& mountpoint_realpath) {
  auto text = ReadFileToString(RegistryPath(mountpoint_realpath));
  if (!text.ok()) return text.status();
  MountRecord r;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    if (kv.first == "mountpoint") r.mountpoint = kv.second;
    if (kv.first == "store") r.store = kv.second;
    if (kv.first == "pid") (void)absl::SimpleAtoi(kv.second, &r.pid);
    if (kv.first == "read_only") r.read_only = kv.second == "1";
    if (kv.first == "log") r.log = kv.second;
    if (kv.first == "log_start") (void)absl::SimpleAtoi(kv.second, &r.log_start);
    if (kv.first == "staging") r.staging = kv.second;
  }
  if (r.mountpoint != mountpoint_realpath || (r.store.empty() && !r.read_only)) {
    return absl::NotFoundError("stale mount record");
  }
  return r;
}

void RemoveMountRecord(const std::string& mountpoint_realpath) {
  ::unlink(RegistryPath(mountpoint_realpath).c_str());
}

absl::StatusOr<std::string> ReadProcFile(const std::string& path) {
  auto fd = OpenFile(path, O_RDONLY);
  if (!fd.ok()) return fd.status();
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd->get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(errno, path);
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

bool ProcessAlive(long pid) {
  auto stat = ReadProcFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) return false;
  const size_t paren = stat->rfind(')');
  return paren != std::string::npos && paren + 2 < stat->size() && (*stat)[paren + 2] != 'Z';
}

namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string UnescapeMountinfo(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\') {
      int v = 0;
      bool octal = true;
      for (size_t k = 1; k <= 3; ++k) {
        if (i + k >= s.size() || s[i + k] < '0' || s[i + k] > '7') {
          octal = false;
          break;
        }
        v = v * 8 + (s[i + k] - '0');
      }
      if (octal) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<MountinfoEntry>> ReadMountinfo() {
  auto text = ReadProcFile("/proc/self/mountinfo");
  if (!text.ok()) return text.status();
  std::vector<MountinfoEntry> out;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    // id parent maj:min root mountpoint options [optional...] - fstype source superopts
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (f.size() < 5 || dash + 2 >= f.size()) continue;
    out.push_back(
        {UnescapeMountinfo(f[4]), std::string(f[dash + 1]), UnescapeMountinfo(f[dash + 2])});
  }
  return out;
}

std::optional<MountinfoEntry> FindTfrecordfsMount(const std::string& mountpoint_realpath) {
  auto mounts = ReadMountinfo();
  if (!mounts.ok()) return std::nullopt;
  for (MountinfoEntry& m : *mounts) {
    if (m.mountpoint == mountpoint_realpath && m.fstype == "fuse.tfrecordfs") return std::move(m);
  }
  return std::nullopt;
}

absl::StatusOr<MountRecord> AwaitMountRecord(const std::string& mountpoint_realpath) {
  auto record = ReadMountRecord(mountpoint_realpath);
  for (int i = 0; i < 500 && !record.ok() && FindTfrecordfsMount(mountpoint_realpath); ++i) {
    ::usleep(10000);
    record = ReadMountRecord(mountpoint_realpath);
  }
  return record;
}

std::optional<MountRecord> LiveMountRecord(const std::string& mountpoint,
                                           absl::string_view command) {
  auto real = RealPath(mountpoint);
  if (!real.ok()) {
    std::cerr << "tfrecordfs " << command << ": " << real.status().message() << "\n";
    return std::nullopt;
  }
  auto record = AwaitMountRecord(*real);
  if (!record.ok() || !FindTfrecordfsMount(*real)) {
    std::cerr << "tfrecordfs " << command << ": " << *real
              << " is not a live tfrecordfs mount of this user (no record in "
              << RegistryPath(*real) << ")\n";
    return std::nullopt;
  }
  return *std::move(record);
}

}  // namespace tfrecordfs::cli
