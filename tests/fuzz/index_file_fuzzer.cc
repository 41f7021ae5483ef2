// Fuzz target: index files (index/index_file.h), which a shared index_dir
// makes untrusted input. The input is a whole .tfri file; it is checked as
// it is, and again with its trailing CRC recomputed (as a hostile writer
// would), so that mutations reach the structural checks behind the CRC.
//
// Invariants:
//   * DecodeIndexFile never crashes; it fails only with DataLoss or
//     FailedPrecondition;
//   * whatever it accepts satisfies the header's promises: offsets start at
//     0 (unless a problem is at 0), strictly increase, end at data_size
//     (unless a problem is there), problems lie inside the data with
//     bounded messages; a plain shard has no checkpoints and data_size ==
//     file_size; checkpoints are ordered, inside the file and the data,
//     their windows inside the windows area;
//   * IndexMainSize and IndexFileSizeRange agree with the decoded sizes;
//   * encoding the decoded file gives back the same main part, byte for
//     byte;
//   * loading each window from the bytes after the main part returns a
//     window of at most 32 KiB or DataLoss, never a crash.
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "fuzz_check.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/index/index_file.h"
#include "tfrecordfs/source/inflate.h"

namespace tfrecordfs::fuzz {
namespace {

bool ProblemAt(const index::IndexFile& f, uint64_t offset) {
  for (const auto& p : f.walk.problems) {
    if (p.offset == offset) return true;
  }
  return false;
}

void Check(absl::string_view bytes) {
  auto decoded = index::DecodeIndexFile(bytes);
  if (!decoded.ok()) {
    FUZZ_CHECK(absl::IsDataLoss(decoded.status()) || absl::IsFailedPrecondition(decoded.status()),
               decoded.status().ToString());
    return;
  }
  const index::IndexFile& f = *decoded;
  const auto& off = f.walk.offsets;
  FUZZ_CHECK(!off.empty());
  FUZZ_CHECK(off[0] == 0 || ProblemAt(f, 0), "first offset ", off[0]);
  for (size_t i = 1; i < off.size(); ++i) FUZZ_CHECK(off[i - 1] < off[i], "offsets at ", i);
  FUZZ_CHECK(off.back() == f.data_size || ProblemAt(f, off.back()), "last offset ", off.back());
  FUZZ_CHECK(off.back() <= f.data_size);
  for (const auto& p : f.walk.problems) {
    FUZZ_CHECK(p.offset <= f.data_size);
    FUZZ_CHECK(p.message.size() <= index::kMaxProblemMessage);
  }
  FUZZ_CHECK(f.path.size() <= index::kMaxIndexPath);
  FUZZ_CHECK(static_cast<uint8_t>(f.codec) <= source::kMaxCodec);
  if (f.codec == source::Codec::kNone) {
    FUZZ_CHECK(f.checkpoints.empty() && f.data_size == f.file_size && f.windows_size == 0);
  }
  for (size_t i = 0; i < f.checkpoints.size(); ++i) {
    const source::Checkpoint& c = f.checkpoints[i];
    FUZZ_CHECK(c.in <= f.file_size && c.out <= f.data_size && c.bits < 8);
    if (i > 0) FUZZ_CHECK(f.checkpoints[i - 1].out <= c.out && f.checkpoints[i - 1].in <= c.in);
    if (!c.stream_start) {
      FUZZ_CHECK(c.window_offset <= f.windows_size &&
                 c.window_length <= f.windows_size - c.window_offset);
    }
  }
  FUZZ_CHECK(f.main_size <= bytes.size());
  auto main_size = index::IndexMainSize(bytes.substr(0, index::kIndexHeaderSize));
  FUZZ_CHECK(main_size.ok() && *main_size == f.main_size);
  auto range = index::IndexFileSizeRange(bytes.substr(0, index::kIndexHeaderSize), f.file_size);
  FUZZ_CHECK(range.ok(), range.status().ToString());
  FUZZ_CHECK(range->min <= f.main_size && f.main_size <= range->max, f.main_size, " not in [",
             range->min, ", ", range->max, "]");
  FUZZ_CHECK(range->windows == f.windows_size);
  FUZZ_CHECK(index::EncodedMainSize(f) == f.main_size);

  // Re-encoding gives the same main part (the windows are not decoded).
  index::IndexFile again = f;
  // EncodeIndexFile takes windows_size from the blob: give it one of that
  // size (its bytes are not part of the main part).
  if (f.windows_size <= (uint64_t{1} << 24)) {
    again.windows.assign(f.windows_size, '\0');
    const std::string same = index::EncodeIndexFile(again);
    FUZZ_CHECK(same.substr(0, f.main_size) == bytes.substr(0, f.main_size),
               "re-encoding changes the main part");
  }

  // Windows from whatever follows the main part: loaded or refused.
  auto windows = source::Windows::InMemory(std::string(bytes.substr(f.main_size)));
  for (size_t i = 0; i < f.checkpoints.size() && i < 16; ++i) {
    auto w = windows->Load(f.checkpoints[i]);
    if (w.ok()) {
      FUZZ_CHECK(w->size() <= source::kWindowSize);
    } else {
      FUZZ_CHECK(absl::IsDataLoss(w.status()), w.status().ToString());
    }
  }
}

// The input as it came, and with its trailer's CRC made right.
void FuzzOne(absl::string_view bytes) {
  Check(bytes);
  const size_t size = bytes.size();
  if (size < index::kIndexHeaderSize) return;
  auto main_size = index::IndexMainSize(bytes.substr(0, index::kIndexHeaderSize));
  if (!main_size.ok() || *main_size < index::kIndexHeaderSize + index::kIndexTrailerSize ||
      *main_size > size) {
    return;
  }
  std::string fixed(bytes);
  const size_t at = static_cast<size_t>(*main_size) - index::kIndexTrailerSize;
  EncodeFixed32(fixed.data() + at, crc32c::Value(fixed.data(), at));
  if (fixed != bytes) Check(fixed);
}

}  // namespace
}  // namespace tfrecordfs::fuzz

TFRFS_FUZZ_ENTRY(tfrecordfs::fuzz::FuzzOne, size_t{1} << 30)
