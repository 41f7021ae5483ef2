// The commit target for objects in a bucket (repack/bucket_rewrite.h): the
// layout of an object after record edits, and RewriteObject's requests
// against tests/objstore/object_server.py (started here on 127.0.0.1 with
// SigV4 checked by its own code and botocore's): unchanged ranges copied
// server-side (the server's --stats counters), the result byte for byte,
// a second writer's object never overwritten (ESTALE, the upload aborted),
// small objects as one conditional PUT, a crash's uploads aborted.
// The server part skips without python3 or OBJECT_SERVER (meson sets it).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/temp_dir.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/objstore/http.h"
#include "tfrecordfs/objstore/sigv4.h"
#include "tfrecordfs/record/writer.h"
#include "tfrecordfs/repack/bucket_rewrite.h"

namespace tfrecordfs::repack {
namespace {

using objstore::RewritePiece;
constexpr uint64_t kMiB = uint64_t{1} << 20;

TEST(LayoutAfterEditsTest, KeptRangesNewBytesAndAppended) {
  const std::vector<uint64_t> offsets = {0, 10, 25, 40, 60};
  std::map<uint64_t, std::optional<std::string>> changes;
  changes[1] = std::string("NEW1");
  changes[2] = std::nullopt;  // deleted
  auto l = LayoutAfterEdits(offsets, changes, {"APP"});
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->pieces, (std::vector<RewritePiece>{{RewritePiece::From::kOld, 0, 10},
                                                  {RewritePiece::From::kNew, 0, 4},
                                                  {RewritePiece::From::kOld, 40, 20},
                                                  {RewritePiece::From::kNew, 4, 3}}));
  EXPECT_EQ(l->new_bytes, "NEW1APP");
  EXPECT_EQ(l->size, 37u);
  changes.clear();
  changes[0] = std::nullopt;
  changes[3] = std::nullopt;
  l = LayoutAfterEdits(offsets, changes, {});
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->pieces, (std::vector<RewritePiece>{{RewritePiece::From::kOld, 10, 30}}));
  changes[4] = std::nullopt;
  EXPECT_EQ(LayoutAfterEdits(offsets, changes, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

constexpr char kKey[] = "AKIDTFRECORDFSTEST";
constexpr char kSecret[] = "c2VjcmV0IHRoYXQgaXMgbm90IGxvZ2dlZA";

// object_server.py on 127.0.0.1 serving `root`, killed at the end.
class Server {
 public:
  Server(const std::string& root, const std::string& stats) {
    const char* script = std::getenv("OBJECT_SERVER");
    if (script == nullptr || ::access("/usr/bin/python3", X_OK) != 0) return;
    int fds[2];
    if (::pipe(fds) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      ::close(fds[0]);
      ::execl("/usr/bin/python3", "python3", script, "--root", root.c_str(), "--access-key", kKey,
              "--secret-key", kSecret, "--botocore", "--stats", stats.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(fds[1]);
    FILE* f = ::fdopen(fds[0], "r");
    if (f != nullptr && std::fscanf(f, "%d", &port_) != 1) port_ = 0;
    if (f != nullptr) std::fclose(f);
  }
  ~Server() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

class BucketRewriteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.Subdir("root");
    dir_.Subdir("root/b/ds");
    server_ = std::make_unique<Server>(root_, dir_.Join("stats.json"));
    if (server_->port() == 0) GTEST_SKIP() << "no python3 or OBJECT_SERVER to serve a bucket";
    target_.base = absl::StrCat("http://127.0.0.1:", server_->port(), "/b");
    target_.name = "s3://b";
    target_.key_prefix = "ds/";
    target_.signer = std::make_shared<objstore::SigV4Signer>(
        objstore::AwsCredentials{kKey, kSecret, ""}, "us-east-1");
    target_.client = std::make_shared<objstore::HttpClient>();
    writer_ = std::make_unique<objstore::BucketWriter>(target_);
  }

  // Writes `records` framed into the object ds/KEY; its offsets.
  std::vector<uint64_t> Put(const std::string& key, const std::vector<std::string>& records) {
    std::string bytes;
    std::vector<uint64_t> offsets = {0};
    for (const std::string& r : records) {
      record::AppendFramed(&bytes, r);
      offsets.push_back(bytes.size());
    }
    WriteAll(Path(key), bytes);
    return offsets;
  }
  std::string Path(const std::string& key) const { return root_ + "/b/ds/" + key; }
  std::string Etag(const std::string& key) const {
    auto r = target_.client->Send("HEAD", writer_->Url("ds/" + key), {}, target_.signer.get(), 0,
                                  "HEAD");
    return r.ok() ? r->etag : "";
  }
  std::string Stats() const { return ReadAll(dir_.Join("stats.json")); }
  ReadOldBytes FromCopy(const std::string& old) {
    return [old](uint64_t offset, uint64_t size, std::string* out) {
      *out = old.substr(offset, size);
      return absl::OkStatus();
    };
  }

  test::TempDir dir_{"bucket_rewrite"};
  std::string root_;
  std::unique_ptr<Server> server_;
  objstore::UploadTarget target_;
  std::unique_ptr<objstore::BucketWriter> writer_;
};

// Distinct records of 100 KiB.
std::vector<std::string> Records(int n, char salt) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    std::string r(100 << 10, salt);
    const std::string tag = absl::StrCat("record ", i, " ");
    for (size_t at = 0; at + tag.size() <= r.size(); at += 997) r.replace(at, tag.size(), tag);
    out.push_back(std::move(r));
  }
  return out;
}

TEST_F(BucketRewriteTest, EditsCopyTheUnchangedRangesServerSide) {
  std::vector<std::string> records = Records(250, 'a');
  const std::vector<uint64_t> offsets = Put("obj", records);
  const std::string old = ReadAll(Path("obj"));
  const std::string etag = Etag("obj");
  ASSERT_FALSE(etag.empty());
  std::map<uint64_t, std::optional<std::string>> changes;
  std::string edited;
  record::AppendFramed(&edited, "a new label");
  changes[130] = edited;
  changes[3] = std::nullopt;
  std::string appended;
  record::AppendFramed(&appended, "appended");
  auto layout = LayoutAfterEdits(offsets, changes, {appended});
  ASSERT_TRUE(layout.ok()) << layout.status();
  auto stats = RewriteObject(*writer_, {"ds/obj", etag, old.size(), ""}, *layout, FromCopy(old));
  ASSERT_TRUE(stats.ok()) << stats.status();
  // What the object must hold: every record but 3, 60 replaced, one more.
  std::string want;
  for (size_t i = 0; i < records.size(); ++i) {
    if (i == 3) continue;  // deleted
    record::AppendFramed(&want, i == 130 ? "a new label" : records[i]);
  }
  record::AppendFramed(&want, "appended");
  EXPECT_TRUE(ReadAll(Path("obj")) == want) << "the object is not the edit";
  EXPECT_GT(stats->parts, 1u);
  EXPECT_GE(stats->copied, old.size() - 3 * objstore::kMinPartSize);
  // Uploaded: the changes and at most a part's worth of old bytes after each.
  EXPECT_LE(stats->uploaded, 3 * objstore::kMinPartSize + edited.size() + appended.size());
  // The server saw as much: the copies' bytes never crossed the network.
  const std::string s = Stats();
  EXPECT_NE(s.find(absl::StrCat("\"UploadPartCopy\": {\"bytes_copied\": ", stats->copied,
                                ", \"bytes_in\": 0")),
            std::string::npos)
      << s;
  EXPECT_NE(
      s.find(absl::StrCat("\"UploadPart\": {\"bytes_copied\": 0, \"bytes_in\": ", stats->uploaded)),
      std::string::npos)
      << s;
  auto left = writer_->ListUploads("ds/");
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_TRUE(left->empty());
}

TEST_F(BucketRewriteTest, ASecondWritersObjectIsNeverOverwritten) {
  const std::vector<uint64_t> offsets = Put("obj", Records(80, 'b'));
  const std::string old = ReadAll(Path("obj"));
  const std::string listed = Etag("obj");
  // Another writer replaces the object after the mount listed it.
  const std::string theirs = "their object, written between listing and commit";
  WriteAll(Path("obj") + ".new", theirs);
  ASSERT_EQ(::rename((Path("obj") + ".new").c_str(), Path("obj").c_str()), 0);
  std::map<uint64_t, std::optional<std::string>> changes;
  changes[40] = std::nullopt;
  auto layout = LayoutAfterEdits(offsets, changes, {});
  ASSERT_TRUE(layout.ok());
  auto stats = RewriteObject(*writer_, {"ds/obj", listed, old.size(), ""}, *layout, FromCopy(old));
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(ErrnoOf(stats.status()), ESTALE) << stats.status();
  EXPECT_NE(stats.status().message().find("s3://b/ds/obj"), std::string::npos);
  EXPECT_EQ(ReadAll(Path("obj")), theirs);
  auto left = writer_->ListUploads("ds/");
  ASSERT_TRUE(left.ok()) << left.status();
  EXPECT_TRUE(left->empty()) << "the upload was not aborted";
}

TEST_F(BucketRewriteTest, ASmallObjectIsOneConditionalPut) {
  std::vector<std::string> records = {"one", "two", "three"};
  const std::vector<uint64_t> offsets = Put("small", records);
  const std::string old = ReadAll(Path("small"));
  std::map<uint64_t, std::optional<std::string>> changes;
  std::string two;
  record::AppendFramed(&two, "TWO");
  changes[1] = two;
  auto layout = LayoutAfterEdits(offsets, changes, {});
  ASSERT_TRUE(layout.ok());
  const std::string etag = Etag("small");
  auto stats = RewriteObject(*writer_, {"ds/small", etag, old.size(), ""}, *layout, FromCopy(old));
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->parts, 0u);
  std::string want;
  for (const char* r : {"one", "TWO", "three"}) record::AppendFramed(&want, r);
  EXPECT_EQ(ReadAll(Path("small")), want);
  // The same rewrite again, pinned to the ETag that is gone: refused.
  auto again = RewriteObject(*writer_, {"ds/small", etag, old.size(), ""}, *layout, FromCopy(old));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(ErrnoOf(again.status()), ESTALE) << again.status();
  EXPECT_EQ(ReadAll(Path("small")), want);
}

TEST_F(BucketRewriteTest, UploadsACrashLeftAreAbortedOnlyForTheGivenKeys) {
  Put("obj", {"x"});
  Put("other", {"y"});
  auto mine = writer_->CreateMultipart("ds/obj");
  auto theirs = writer_->CreateMultipart("ds/other");
  ASSERT_TRUE(mine.ok() && theirs.ok());
  auto lines = AbortLeftUploads(*writer_, "ds/", {"ds/obj"});
  ASSERT_TRUE(lines.ok()) << lines.status();
  ASSERT_EQ(lines->size(), 1u);
  EXPECT_NE((*lines)[0].find("s3://b/ds/obj"), std::string::npos);
  auto left = writer_->ListUploads("ds/");
  ASSERT_TRUE(left.ok());
  ASSERT_EQ(left->size(), 1u);
  EXPECT_EQ((*left)[0].key, "ds/other");
  EXPECT_EQ((*left)[0].id, *theirs);
}

}  // namespace
}  // namespace tfrecordfs::repack
