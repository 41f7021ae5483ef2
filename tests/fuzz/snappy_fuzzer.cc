// Fuzz target: TensorFlow's SNAPPY framing (source/snappy_source.h), the
// block parser a hostile shard reaches first. The input is a whole file.
//
// Invariants:
//   * ParseSnappyBlock / DecodeSnappyBlock never crash and fail only with
//     DataLoss; an accepted block lies inside the input, claims at most
//     kMaxSnappyBlock bytes, and decodes to exactly the size it claims;
//   * ScanSnappy over the file (in a memfd) never fails (no I/O errors
//     there): its checkpoints start at 0, their compressed offsets strictly
//     increase inside the file, their uncompressed offsets never decrease,
//     and the bytes handed to the sink number data_size;
//   * a SnappySource over that table reads back exactly the sink's bytes,
//     whole and from a few offsets inside.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "fuzz_check.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/source/snappy_source.h"

namespace tfrecordfs::fuzz {
namespace {

void CheckBlock(absl::string_view bytes) {
  auto block = source::ParseSnappyBlock(bytes);
  if (!block.ok()) {
    FUZZ_CHECK(absl::IsDataLoss(block.status()), block.status().ToString());
    return;
  }
  FUZZ_CHECK(block->compressed <= bytes.size() - source::kSnappyLengthSize);
  FUZZ_CHECK(block->uncompressed <= source::kMaxSnappyBlock);
  auto data = source::DecodeSnappyBlock(bytes.substr(source::kSnappyLengthSize, block->compressed));
  if (!data.ok()) {
    FUZZ_CHECK(absl::IsDataLoss(data.status()), data.status().ToString());
    return;
  }
  FUZZ_CHECK(data->size() == block->uncompressed, data->size(), " != ", block->uncompressed);
}

void CheckFile(absl::string_view bytes) {
  const int raw = ::memfd_create("snappy_fuzz", MFD_CLOEXEC);
  if (raw < 0) return;  // no memfd here: the block checks above still ran
  UniqueFd fd(raw);
  if (!WriteFull(fd.get(), bytes.data(), bytes.size(), "memfd").ok()) return;
  std::string streamed;
  auto scan = source::ScanSnappy(fd.get(), "memfd", bytes.size(), [&](absl::string_view b) {
    streamed.append(b.data(), b.size());
    return absl::OkStatus();
  });
  FUZZ_CHECK(scan.ok(), scan.status().ToString());
  const auto& points = scan->table.points;
  FUZZ_CHECK(!points.empty() && points[0].in == 0 && points[0].out == 0);
  for (size_t i = 1; i < points.size(); ++i) {
    FUZZ_CHECK(points[i - 1].in < points[i].in && points[i].in < bytes.size(), "point ", i);
    FUZZ_CHECK(points[i - 1].out <= points[i].out && points[i].out <= scan->table.data_size);
  }
  FUZZ_CHECK(streamed.size() == scan->table.data_size);
  source::BlockCache cache(1 << 20);
  source::SnappySource src(source::ShardFile::Borrowed(fd.get(), "memfd"), bytes.size(),
                           std::make_shared<const source::CheckpointTable>(scan->table), &cache);
  std::string all(streamed.size(), '\0');
  auto n = src.ReadAt(0, all.data(), all.size());
  FUZZ_CHECK(n.ok() && *n == all.size() && all == streamed);
  for (uint64_t at : {streamed.size() / 3, streamed.size() / 2, streamed.size() - 1}) {
    if (at >= streamed.size()) continue;
    char c = 0;
    auto one = src.ReadAt(at, &c, 1);
    FUZZ_CHECK(one.ok() && *one == 1 && c == streamed[at], "byte ", at);
  }
}

}  // namespace
}  // namespace tfrecordfs::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  tfrecordfs::fuzz::CheckBlock(bytes);
  tfrecordfs::fuzz::CheckFile(bytes);
  return 0;
}
