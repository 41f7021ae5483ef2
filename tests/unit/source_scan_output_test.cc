// The second stage of a compressed scan (source/scan_output.h): the sink,
// progress and the checkpoints' sparse windows on a thread beside the
// inflate. Also run under ThreadSanitizer (scripts/test's thread scope).
// Compressed inputs are made by zlib's deflate (reference/zlib_codec.h);
// windows are judged against the bytes deflated, not the code under test.
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/bytes.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/reference/zlib_codec.h"
#include "tfrecordfs/source/checkpoints.h"
#include "tfrecordfs/source/scan_output.h"
#include "tfrecordfs/source/stored_bytes.h"

namespace tfrecordfs::source {
namespace {

using reference::zlib::Deflate;
using reference::zlib::Wrap;
using test::TextLike;

// A file in memory that the code under test can pread.
UniqueFd MemFile(absl::string_view bytes) {
  UniqueFd fd(memfd_create("scan_output_test", MFD_CLOEXEC));
  EXPECT_GE(fd.get(), 0);
  EXPECT_TRUE(WriteFull(fd.get(), bytes.data(), bytes.size(), "memfd").ok());
  return fd;
}

// A stored window is the 32 KiB of the stream before its checkpoint, or
// the sparse form of them (source/window_use.h): every byte either that
// byte or zero.
::testing::AssertionResult IsWindowOf(absl::string_view w, absl::string_view whole) {
  if (w.size() != whole.size()) {
    return ::testing::AssertionFailure() << w.size() << " bytes, not " << whole.size();
  }
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] != whole[i] && w[i] != '\0') {
      return ::testing::AssertionFailure() << "byte " << i << " is neither the stream's nor zero";
    }
  }
  return ::testing::AssertionSuccess();
}

// The same bytes as an object (ObjectReader): a scan of an object keeps
// its output stage on the scan's own thread.
class BytesObject final : public ObjectReader {
 public:
  explicit BytesObject(std::string bytes) : bytes_(std::move(bytes)) {}
  const std::string& url() const override { return url_; }
  uint64_t size() const override { return bytes_.size(); }
  absl::StatusOr<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const override {
    if (offset >= bytes_.size()) return 0;
    const size_t k = std::min<size_t>(n, bytes_.size() - static_cast<size_t>(offset));
    std::memcpy(buf, bytes_.data() + offset, k);
    return k;
  }

 private:
  const std::string url_ = "mem://test.gz";
  const std::string bytes_;
};

// A scan of a local file big enough for its output stage to run on a
// thread of its own (sink, progress and the sparse windows beside the
// inflate) lays the same checkpoints and stores the same windows, byte for
// byte, as the scan of the same bytes with the stage on the scan's thread:
// where checkpoints go depends on the stream alone, not on how far the
// stage has got. Three GZIP members (checkpoints at member starts between
// windowed ones), well past several chunks of output; then the same for a
// ZLIB stream, and with zlib inflating instead of ISA-L.
TEST(ScanOutputStage, ThreadedScanIsTheSameAsTheScanOnOneThread) {
  const std::string data = TextLike(9 << 20, 111);
  const std::string gzip = Deflate(data.substr(0, 3 << 20), Wrap::kGzip, 6) +
                           Deflate(data.substr(3 << 20, 5 << 20), Wrap::kGzip, 1) +
                           Deflate(data.substr(8 << 20), Wrap::kGzip, 9);
  const std::string zlib = Deflate(data, Wrap::kZlib, 6);
  for (const bool isal : {true, false}) {
    for (const auto& [file, codec] : {std::pair{&gzip, Codec::kGzip}, {&zlib, Codec::kZlib}}) {
      SCOPED_TRACE(absl::StrCat(codec == Codec::kGzip ? "gzip" : "zlib", isal ? " isal" : " zlib"));
      ASSERT_GE(file->size(), 2 * kScanChunk);
      const UniqueFd fd = MemFile(*file);
      std::string threaded_sunk;
      auto threaded = ScanCompressed(
          fd.get(), "test.gz", file->size(), codec, kDefaultSpan,
          [&](absl::string_view b) {
            threaded_sunk.append(b.data(), b.size());
            return absl::OkStatus();
          },
          nullptr, isal);
      ASSERT_TRUE(threaded.ok()) << threaded.status();
      const BytesObject object(*file);
      std::string sunk;
      std::vector<uint64_t> progress;
      auto one = ScanCompressed(
          &object, "test.gz", file->size(), codec, kDefaultSpan,
          [&](absl::string_view b) {
            sunk.append(b.data(), b.size());
            return absl::OkStatus();
          },
          [&](uint64_t in) { progress.push_back(in); }, isal);
      ASSERT_TRUE(one.ok()) << one.status();
      EXPECT_TRUE(threaded_sunk == data) << threaded_sunk.size();
      EXPECT_TRUE(sunk == data) << sunk.size();
      ASSERT_FALSE(one->problem);
      ASSERT_FALSE(threaded->problem);
      const auto& a = threaded->table.points;
      const auto& b = one->table.points;
      ASSERT_EQ(a.size(), b.size());
      size_t members = 0, sparse = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].in, b[i].in) << i;
        EXPECT_EQ(a[i].out, b[i].out) << i;
        EXPECT_EQ(a[i].bits, b[i].bits) << i;
        EXPECT_EQ(a[i].stream_start, b[i].stream_start) << i;
        EXPECT_EQ(a[i].window_offset, b[i].window_offset) << i;
        EXPECT_EQ(a[i].window_length, b[i].window_length) << i;
        EXPECT_EQ(a[i].window_crc, b[i].window_crc) << i;
        members += a[i].stream_start ? 1 : 0;
        if (!a[i].stream_start) {
          auto w = threaded->table.windows->Load(a[i]);
          ASSERT_TRUE(w.ok()) << w.status();
          const size_t wlen = static_cast<size_t>(std::min<uint64_t>(a[i].out, kWindowSize));
          const absl::string_view whole = absl::string_view(data).substr(a[i].out - wlen, wlen);
          EXPECT_TRUE(IsWindowOf(*w, whole)) << a[i].out;
          sparse += *w != whole ? 1 : 0;
        }
      }
      EXPECT_EQ(members, codec == Codec::kGzip ? 3u : 1u);
      EXPECT_GT(a.size(), data.size() / kDefaultSpan + members);
      EXPECT_GE(2 * sparse, a.size() - members);
      EXPECT_TRUE(threaded->windows_blob == one->windows_blob);
      EXPECT_TRUE(VerifyCheckpoints(fd.get(), "test.gz", file->size(), threaded->table).ok());
      // Progress: in order, and at the end the whole file.
      ASSERT_FALSE(progress.empty());
      EXPECT_TRUE(std::is_sorted(progress.begin(), progress.end()));
      EXPECT_EQ(progress.back(), file->size());
    }
  }
}

// A sink that fails stops a threaded scan with its error, and is not
// called again after it failed.
TEST(ScanOutputStage, ASinkErrorStopsTheThreadedScan) {
  const std::string data = TextLike(8 << 20, 112);
  const std::string file = Deflate(data, Wrap::kGzip, 6);
  ASSERT_GE(file.size(), 2 * kScanChunk);
  const UniqueFd fd = MemFile(file);
  size_t calls_after = 0, taken = 0;
  bool failed = false;
  auto r = ScanCompressed(fd.get(), "test.gz", file.size(), Codec::kGzip, kDefaultSpan,
                          [&](absl::string_view b) {
                            if (failed) {
                              ++calls_after;
                              return absl::OkStatus();
                            }
                            taken += b.size();
                            if (taken < (2 << 20)) return absl::OkStatus();
                            failed = true;
                            return absl::ResourceExhaustedError("too many records");
                          });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_EQ(r.status().message(), "too many records");
  EXPECT_EQ(calls_after, 0u);
}

}  // namespace
}  // namespace tfrecordfs::source
