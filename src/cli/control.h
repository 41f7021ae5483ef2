// The control socket: how `tfrecordfs commit` asks a live daemon to commit,
// and gets the answer back on the same connection.
//
// The daemon of a read-write mount listens on a Unix stream socket in its
// staging store, <store>/control.sock (mode 0600; the store is locked by the
// mount, so a socket found there when it starts is stale and replaced).
// A client connects, sends one request line ("commit\n") and reads the answer
// until the daemon closes the connection: its length in bytes on a line of
// its own, then the answer (for a commit: a result line, kResultOk or
// "result: failed", then the report text), so an answer cut short by a
// daemon that ended is told from a whole one. Requests are served one at a time
// in the order they connect; a peer of another user (SO_PEERCRED; root
// excepted) is answered "result: refused" and nothing is done.
#ifndef TFRECORDFS_CLI_CONTROL_H_
#define TFRECORDFS_CLI_CONTROL_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tfrecordfs::cli {

// <store>/control.sock.
std::string ControlSocketFile(absl::string_view store);

// The daemon's side. Thread-safety: Serve() runs on one thread; Stop() may
// be called from any thread, once Serve() may have started or not.
class ControlServer {
 public:
  // Answers a request line (without its newline) with the text sent back.
  using Handler = std::function<std::string(absl::string_view request)>;

  // Binds and listens on `socket_path` (a stale socket there is removed).
  static absl::StatusOr<std::unique_ptr<ControlServer>> Listen(const std::string& socket_path);
  ~ControlServer();  // closes the socket and removes its file
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Serves connections until Stop(): each one's request line is passed to
  // `handler`, its answer sent back, the connection closed.
  void Serve(const Handler& handler);
  void Stop();

 private:
  ControlServer(int listen_fd, int stop_fd, std::string path)
      : listen_fd_(listen_fd), stop_fd_(stop_fd), path_(std::move(path)) {}
  void ServeOne(int fd, const Handler& handler);
  const int listen_fd_;
  const int stop_fd_;  // an eventfd: Stop() makes it readable
  const std::string path_;
};

// The client's side: sends `request` to the daemon listening on
// `socket_path` and returns its whole answer. Fails with kUnavailable when
// nothing listens there, kAborted when the daemon closed the connection
// without a whole answer (it ended), kDeadlineExceeded after `timeout`.
absl::StatusOr<std::string> AskDaemon(const std::string& socket_path, absl::string_view request,
                                      std::chrono::duration<double> timeout);

}  // namespace tfrecordfs::cli

#endif  // TFRECORDFS_CLI_CONTROL_H_
