// The control socket between `tfrecordfs commit` and the daemon
// (src/cli/control.h), both ends in one process: the answer comes back
// whole on the connection that asked, a cut answer or a silent daemon is
// told apart from a whole one, and the socket is private to its user.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "src/cli/control.h"
#include "testing/temp_dir.h"

namespace tfrecordfs::cli {
namespace {

using test::TempDir;

// A store path longer than sockaddr_un's 108 bytes, as deep home
// directories and XDG state paths give.
std::string DeepStore(const TempDir& tmp) {
  return tmp.Subdir(std::string(60, 'a') + "/" + std::string(60, 'b') + "/store");
}

TEST(ControlSocketTest, AnswersEachRequestOnItsOwnConnection) {
  TempDir tmp;
  const std::string path = ControlSocketFile(DeepStore(tmp));
  ASSERT_GT(path.size(), sizeof(sockaddr_un{}.sun_path));
  auto server = ControlServer::Listen(path);
  ASSERT_TRUE(server.ok()) << server.status();
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "other users must not connect";

  std::vector<std::string> seen;
  int n = 0;
  std::thread serving([&] {
    (*server)->Serve([&](absl::string_view request) {
      seen.emplace_back(request);
      // Large enough to take several reads.
      return absl::StrCat("result: ok\n", ++n, "\n", std::string(100000, 'x'), "\nend\n");
    });
  });
  for (int i = 1; i <= 3; ++i) {
    auto answer = AskDaemon(path, "commit", std::chrono::seconds(30));
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(*answer, absl::StrCat("result: ok\n", i, "\n", std::string(100000, 'x'), "\nend\n"));
  }
  (*server)->Stop();
  serving.join();
  EXPECT_EQ(seen, (std::vector<std::string>{"commit", "commit", "commit"}));
  server->reset();
  EXPECT_NE(::access(path.c_str(), F_OK), 0) << "the socket outlived its server";
}

TEST(ControlSocketTest, AStaleSocketIsReplaced) {
  TempDir tmp;
  const std::string path = ControlSocketFile(tmp.path());
  {
    auto first = ControlServer::Listen(path);
    ASSERT_TRUE(first.ok()) << first.status();
    // A daemon killed with -9 leaves its socket file behind.
    const std::string kept = tmp.Join("kept");
    ASSERT_EQ(::link(path.c_str(), kept.c_str()), 0);
    first->reset();
    ASSERT_EQ(::rename(kept.c_str(), path.c_str()), 0);
  }
  EXPECT_TRUE(absl::IsUnavailable(AskDaemon(path, "commit", std::chrono::seconds(5)).status()));
  auto second = ControlServer::Listen(path);
  ASSERT_TRUE(second.ok()) << second.status();
  std::thread serving([&] { (*second)->Serve([](absl::string_view) { return "fine\n"; }); });
  auto answer = AskDaemon(path, "commit", std::chrono::seconds(30));
  (*second)->Stop();
  serving.join();
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(*answer, "fine\n");
}

TEST(ControlSocketTest, NothingListeningIsUnavailable) {
  TempDir tmp;
  EXPECT_TRUE(absl::IsUnavailable(
      AskDaemon(ControlSocketFile(tmp.path()), "commit", std::chrono::seconds(5)).status()));
}

// A peer that is not a ControlServer: accepts one connection, reads the
// request, sends `reply` and closes (or, with `hang`, keeps it open).
class RawPeer {
 public:
  RawPeer(const std::string& path, std::string reply, bool hang) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(fd_, 1), 0);
    thread_ = std::thread([this, reply, hang] {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[64];
      [[maybe_unused]] ssize_t n = ::recv(c, buf, sizeof(buf), 0);
      n = ::send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
      if (hang) {
        // Until the client gives up and closes its end.
        while (::recv(c, buf, sizeof(buf), 0) > 0) {
        }
      }
      ::close(c);
    });
  }
  ~RawPeer() {
    thread_.join();
    ::close(fd_);
  }

 private:
  int fd_ = -1;
  std::thread thread_;
};

TEST(ControlSocketTest, AnAnswerCutShortIsAborted) {
  TempDir tmp;
  const std::string path = tmp.Join("control.sock");
  {
    // Says 20 bytes, sends 11, ends: a daemon killed while it answered.
    RawPeer peer(path, "20\nresult: ok", /*hang=*/false);
    auto answer = AskDaemon(path, "commit", std::chrono::seconds(30));
    EXPECT_TRUE(absl::IsAborted(answer.status())) << answer.status();
  }
  ::unlink(path.c_str());
  {
    // Closes without a word: killed before it answered.
    RawPeer peer(path, "", /*hang=*/false);
    auto answer = AskDaemon(path, "commit", std::chrono::seconds(30));
    EXPECT_TRUE(absl::IsAborted(answer.status())) << answer.status();
  }
}

TEST(ControlSocketTest, ASilentDaemonRunsIntoTheTimeout) {
  TempDir tmp;
  const std::string path = tmp.Join("control.sock");
  RawPeer peer(path, "", /*hang=*/true);
  auto answer = AskDaemon(path, "commit", std::chrono::milliseconds(300));
  EXPECT_TRUE(absl::IsDeadlineExceeded(answer.status())) << answer.status();
}

TEST(ControlSocketTest, StopEndsServeWithNoClient) {
  TempDir tmp;
  auto server = ControlServer::Listen(ControlSocketFile(tmp.path()));
  ASSERT_TRUE(server.ok()) << server.status();
  std::thread serving([&] { (*server)->Serve([](absl::string_view) { return ""; }); });
  (*server)->Stop();
  serving.join();  // hangs (and the test times out) if Stop() did not wake Serve()
}

}  // namespace
}  // namespace tfrecordfs::cli
