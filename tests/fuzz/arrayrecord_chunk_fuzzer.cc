// Fuzz target: an ArrayRecord (riegeli) file's chunk parser, and the scan
// and framed source above it (arrayrecord/chunk.h, arrayrecord/file.h). The
// input is a whole file; chunks are read at offset 64 (after the
// signature) and at an offset the first bytes choose.
//
// Invariants:
//   * ReadChunkFrom never crashes and fails only with DataLoss naming the
//     chunk's offset; an accepted chunk's data is exactly data_size bytes
//     whose hash matches, and its end lies after its beginning;
//   * DecodeChunk fails only with DataLoss or Unimplemented (transposed);
//     what it accepts holds num_records records of decoded_data_size bytes;
//   * Scan over the file (a memfd) fails only with InvalidArgument (no
//     signature), Unimplemented (transposed) or DataLoss (limits); its
//     table starts at {0, 0}, chunk offsets strictly increase inside the
//     file, framed offsets never decrease, data_size is what the sink got;
//   * an ArrayRecordSource over the table reads each chunk's framed bytes
//     back exactly, or DataLoss for a chunk the scan found damaged.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "fuzz_check.h"
#include "tfrecordfs/arrayrecord/chunk.h"
#include "tfrecordfs/arrayrecord/file.h"
#include "tfrecordfs/base/file.h"

namespace tfrecordfs::fuzz {
namespace {

void CheckChunk(absl::string_view file, uint64_t begin) {
  auto chunk = arrayrecord::ReadChunkFrom(file, "fuzz", begin);
  if (!chunk.ok()) {
    FUZZ_CHECK(absl::IsDataLoss(chunk.status()), chunk.status().ToString());
    return;
  }
  FUZZ_CHECK(chunk->data.size() == chunk->header.data_size);
  FUZZ_CHECK(arrayrecord::Hash(chunk->data) == chunk->header.data_hash);
  FUZZ_CHECK(chunk->end > begin);
  auto records = arrayrecord::DecodeChunk(chunk->header, chunk->data, "fuzz");
  if (!records.ok()) {
    FUZZ_CHECK(absl::IsDataLoss(records.status()) || absl::IsUnimplemented(records.status()),
               records.status().ToString());
    return;
  }
  FUZZ_CHECK(records->size() == chunk->header.num_records);
  FUZZ_CHECK(records->values.size() == chunk->header.decoded_data_size);
  FUZZ_CHECK(records->size() == 0 || records->limits.back() == records->values.size());
}

void CheckFile(absl::string_view bytes) {
  const int raw = ::memfd_create("ar_fuzz", MFD_CLOEXEC);
  if (raw < 0) return;
  UniqueFd fd(raw);
  if (!WriteFull(fd.get(), bytes.data(), bytes.size(), "memfd").ok()) return;
  std::string streamed;
  auto scan = arrayrecord::Scan(fd.get(), "memfd", bytes.size(), [&](absl::string_view b) {
    streamed.append(b.data(), b.size());
    return absl::OkStatus();
  });
  if (!scan.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(scan.status()) || absl::IsUnimplemented(scan.status()) ||
                   absl::IsDataLoss(scan.status()),
               scan.status().ToString());
    return;
  }
  const auto& points = scan->table.points;
  FUZZ_CHECK(!points.empty() && points[0].in == 0 && points[0].out == 0);
  for (size_t i = 1; i < points.size(); ++i) {
    FUZZ_CHECK(points[i - 1].in < points[i].in && points[i].in < bytes.size(), "point ", i);
    FUZZ_CHECK(points[i - 1].out <= points[i].out && points[i].out <= scan->table.data_size);
  }
  FUZZ_CHECK(streamed.size() == scan->table.data_size);
  source::BlockCache cache(1 << 20);
  auto table = std::make_shared<const source::CheckpointTable>(scan->table);
  arrayrecord::ArrayRecordSource src(source::ShardFile::Borrowed(fd.get(), "memfd"), bytes.size(),
                                     table, &cache);
  for (size_t i = 1; i < points.size(); ++i) {
    const uint64_t end = i + 1 < points.size() ? points[i + 1].out : table->data_size;
    if (end == points[i].out) continue;
    std::string got(end - points[i].out, '\0');
    auto n = src.ReadAt(points[i].out, got.data(), got.size());
    if (!n.ok()) {
      FUZZ_CHECK(absl::IsDataLoss(n.status()), n.status().ToString());
      continue;
    }
    FUZZ_CHECK(*n == got.size() && got == streamed.substr(points[i].out, got.size()), "chunk ", i);
  }
}

void Check(absl::string_view bytes) {
  Bytes in(bytes);
  const uint64_t pick = in.U32();
  CheckChunk(bytes, arrayrecord::kSignatureSize);
  if (!bytes.empty()) CheckChunk(bytes, pick % bytes.size());
  CheckFile(bytes);
}

}  // namespace
}  // namespace tfrecordfs::fuzz

TFRFS_FUZZ_ENTRY(tfrecordfs::fuzz::Check, 1 << 20)
