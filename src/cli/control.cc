#include "src/cli/control.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/log.h"

namespace tfrecordfs::cli {
namespace {

constexpr size_t kMaxRequest = 256;
// How long a connected client may take to send its request line.
constexpr int kRequestTimeoutMs = 5000;

// A new Unix stream socket and the address of `path` for it. sockaddr_un
// holds 108 bytes of path, and a store's path may be longer: the socket is
// named through /proc/self/fd/<dir>/<name>, which always fits; `dir` stays
// open for as long as the address is used.
struct Endpoint {
  UniqueFd fd;
  UniqueFd dir;
  sockaddr_un addr{};
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&addr); }
};
absl::StatusOr<Endpoint> NewEndpoint(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  Endpoint e;
  e.dir = UniqueFd(::open(dir.empty() ? "/" : dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!e.dir.valid()) return ErrnoError(errno, dir);
  e.addr.sun_family = AF_UNIX;
  const std::string short_path = absl::StrCat("/proc/self/fd/", e.dir.get(), "/", name);
  if (short_path.size() >= sizeof(e.addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": socket name too long"));
  }
  std::memcpy(e.addr.sun_path, short_path.c_str(), short_path.size() + 1);
  e.fd = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!e.fd.valid()) return ErrnoError(errno, "socket");
  return e;
}

// Waits until `fd` has `events` or `stop_fd` is readable (-1: none), up to
// `timeout_ms` (-1: no limit). Returns the fd that is ready, 0 on timeout.
int WaitFor(int fd, short events, int stop_fd, int timeout_ms) {
  pollfd p[2] = {{fd, events, 0}, {stop_fd, POLLIN, 0}};
  const int n = ::poll(p, stop_fd >= 0 ? 2 : 1, timeout_ms);
  if (n <= 0) return n < 0 && errno != EINTR ? -1 : 0;
  if (stop_fd >= 0 && p[1].revents != 0) return stop_fd;
  return fd;
}

bool SendAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

std::string ControlSocketFile(absl::string_view store) {
  return absl::StrCat(store, "/control.sock");
}

absl::StatusOr<std::unique_ptr<ControlServer>> ControlServer::Listen(
    const std::string& socket_path) {
  auto e = NewEndpoint(socket_path);
  if (!e.ok()) return e.status();
  // Stale: the store is locked by this mount, so no other daemon listens.
  ::unlink(socket_path.c_str());
  // Mode 0600 before it listens (a socket's mode decides who may connect;
  // not through umask, which is the whole process's: FUSE workers may be
  // creating files in staging at this moment). Until then nobody can
  // connect, and SO_PEERCRED is checked on every connection anyway.
  if (::bind(e->fd.get(), e->sa(), sizeof(e->addr)) != 0 || ::chmod(e->addr.sun_path, 0600) != 0 ||
      ::listen(e->fd.get(), 16) != 0) {
    const int err = errno;
    ::unlink(socket_path.c_str());
    return ErrnoError(err, socket_path);
  }
  const int stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd < 0) {
    const int err = errno;
    ::unlink(socket_path.c_str());
    return ErrnoError(err, "eventfd");
  }
  return std::unique_ptr<ControlServer>(new ControlServer(e->fd.release(), stop_fd, socket_path));
}

ControlServer::~ControlServer() {
  ::close(listen_fd_);
  ::close(stop_fd_);
  ::unlink(path_.c_str());
}

void ControlServer::Stop() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(stop_fd_, &one, sizeof(one));
}

void ControlServer::Serve(const Handler& handler) {
  while (true) {
    const int ready = WaitFor(listen_fd_, POLLIN, stop_fd_, -1);
    if (ready == stop_fd_) return;
    if (ready != listen_fd_) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    ServeOne(fd, handler);
    ::close(fd);
  }
}

void ControlServer::ServeOne(int fd, const Handler& handler) {
  ucred peer{};
  socklen_t len = sizeof(peer);
  std::string answer;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 ||
      (peer.uid != ::geteuid() && peer.uid != 0)) {
    log::Warning("control socket: refused a request of uid ", peer.uid);
    answer = "result: refused\nthe mount belongs to another user\n";
  } else {
    std::string request;
    char buf[kMaxRequest];
    while (request.find('\n') == std::string::npos && request.size() < kMaxRequest) {
      if (WaitFor(fd, POLLIN, stop_fd_, kRequestTimeoutMs) != fd) return;
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      request.append(buf, static_cast<size_t>(n));
    }
    const size_t eol = request.find('\n');
    if (eol == std::string::npos) return;  // too long: not one of ours
    answer = handler(absl::string_view(request).substr(0, eol));
  }
  // The client may have given up; what it misses is in the log.
  SendAll(fd, absl::StrCat(answer.size(), "\n", answer));
}

absl::StatusOr<std::string> AskDaemon(const std::string& socket_path, absl::string_view request,
                                      std::chrono::duration<double> timeout) {
  auto e = NewEndpoint(socket_path);
  if (!e.ok()) return e.status();
  if (::connect(e->fd.get(), e->sa(), sizeof(e->addr)) != 0) {
    return absl::UnavailableError(
        absl::StrCat("nothing answers on ", socket_path, ": ", std::strerror(errno)));
  }
  const int fd = e->fd.get();
  if (!SendAll(fd, absl::StrCat(request, "\n"))) {
    return absl::AbortedError(
        absl::StrCat("the daemon closed ", socket_path, ": ", std::strerror(errno)));
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string got;
  char buf[1 << 14];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return absl::DeadlineExceededError("no answer in time");
    const int ready =
        WaitFor(fd, POLLIN, -1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready == 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  const size_t eol = got.find('\n');
  uint64_t size = 0;
  if (eol == std::string::npos || !absl::SimpleAtoi(got.substr(0, eol), &size) ||
      got.size() - eol - 1 != size) {
    return absl::AbortedError("the daemon closed the connection before it answered");
  }
  return got.substr(eol + 1);
}

}  // namespace tfrecordfs::cli
