// Fuzz target: TFRecord framing. The input is a whole shard file. It goes
// into a memfd and through what the mount does with it: ProbeFile, the header
// walk (with resynchronisation) and a checked read of every record found.
//
// Invariants:
//   * the walk only fails on I/O errors (never here), its offsets are
//     non-decreasing, inside the file, and end with the end of the last
//     record; every problem it reports lies inside the file;
//   * a checked read either returns exactly the bytes the framing holds, or
//     a DataLoss error naming the record index and byte offset;
//   * a clean shard (ForEachRecordInBuffer accepts it) walks without
//     problems to the same records, and the reverse.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fuzz_check.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/index/shard_index.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/reader.h"

namespace tfrecordfs::fuzz {
namespace {

constexpr absl::string_view kPath = "fuzz.tfrecord";

void CheckShard(absl::string_view shard, int fd) {
  const uint64_t size = shard.size();
  auto walk = record::WalkHeaders(fd, kPath, size, 0);
  FUZZ_CHECK(walk.ok(), walk.status().ToString());
  const std::vector<uint64_t>& off = walk->offsets;
  FUZZ_CHECK(!off.empty());
  FUZZ_CHECK(walk->file_size == size);
  for (size_t i = 0; i < off.size(); ++i) {
    FUZZ_CHECK(off[i] <= size, "offset ", off[i], " past size ", size);
    if (i > 0) FUZZ_CHECK(off[i - 1] <= off[i], "offsets decrease at ", i);
  }
  for (const auto& p : walk->problems) {
    FUZZ_CHECK(p.offset <= size, "problem offset ", p.offset);
    FUZZ_CHECK(!p.message.empty());
  }

  const uint64_t n = off.size() - 1;
  std::vector<std::string> payloads;
  bool all_ok = true;
  for (uint64_t i = 0; i < n; ++i) {
    auto data = record::ReadRecord(fd, kPath, i, off[i], off[i + 1]);
    if (data.ok()) {
      FUZZ_CHECK(off[i + 1] - off[i] == data->size() + record::kFramingOverhead);
      FUZZ_CHECK(*data == shard.substr(off[i] + record::kHeaderSize, data->size()));
      FUZZ_CHECK(DecodeFixed64(shard.data() + off[i]) == data->size());
      payloads.push_back(*std::move(data));
    } else {
      all_ok = false;
      FUZZ_CHECK(absl::IsDataLoss(data.status()), data.status().ToString());
      const std::string where =
          absl::StrCat(kPath, ": record ", i, " at byte offset ", off[i], ": ");
      FUZZ_CHECK(absl::StartsWith(data.status().message(), where), data.status().message());
    }
  }
  // A record index past the walk (or a reversed span) is refused, not read.
  if (n > 0) {
    auto bad = record::ReadRecord(fd, kPath, n, off[n], off[0]);
    FUZZ_CHECK(!bad.ok() || off[n] == off[0]);
  }

  std::vector<std::string> strict;
  const absl::Status clean =
      record::ForEachRecordInBuffer(shard, [&](uint64_t index, absl::string_view data) {
        FUZZ_CHECK(index == strict.size());
        strict.emplace_back(data);
      });
  if (clean.ok()) {
    FUZZ_CHECK(walk->problems.empty(), walk->problems.front().message);
    FUZZ_CHECK(all_ok);
    FUZZ_CHECK(payloads == strict);
    FUZZ_CHECK(off.back() == size);
  } else {
    FUZZ_CHECK(absl::IsDataLoss(clean), clean.ToString());
    FUZZ_CHECK(
        !(all_ok && walk->problems.empty() && off.back() == size),
        "walk and checked reads accept what ForEachRecordInBuffer refuses: ", clean.message());
  }

  // The index probe and build see the same file.
  auto probe = index::ProbeFile(fd, kPath, size);
  FUZZ_CHECK(probe.ok(), probe.status().ToString());
  if (size >= record::kFramingOverhead && record::IsPlausibleHeader(shard.data(), 0, size)) {
    FUZZ_CHECK(*probe == index::Probe::kShard);
    FUZZ_CHECK(!off.empty() && n >= 1 && off[0] == 0);
  }
  struct stat st = {};
  st.st_size = static_cast<off_t>(size);
  auto idx = index::BuildShardIndex(fd, std::string(kPath), st);
  FUZZ_CHECK(idx.ok(), idx.status().ToString());
  FUZZ_CHECK((*idx)->num_records() == n);
}

}  // namespace
}  // namespace tfrecordfs::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("walker_fuzzer", MFD_CLOEXEC);
  if (fd < 0) return 0;
  tfrecordfs::UniqueFd owned(fd);
  if (!tfrecordfs::WriteFull(fd, data, size, "memfd").ok()) return 0;
  tfrecordfs::fuzz::CheckShard(absl::string_view(reinterpret_cast<const char*>(data), size), fd);
  return 0;
}
