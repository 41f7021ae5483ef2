// Fuzz target: the scan for copyable deflate runs of an old GZIP / ZLIB
// shard (record/deflate_runs.h), which a commit runs over a shard the user
// gave us. The input: byte 0 picks the codec (even GZIP, odd ZLIB), byte 1
// the record size of a grid of record offsets ((b + 1) * 16 bytes, up to
// 4 MiB), the rest is the file.
//
// Invariants:
//   * FindDeflateRuns never fails over a memfd (only a failed read is an
//     error) and never crashes, whatever the bytes;
//   * its runs are non-empty, in order, inside the file, and start and end
//     on given record offsets;
//   * each run, inflated by zlib from a fresh state as raw deflate, gives
//     exactly end - begin bytes whose CRC-32 (GZIP) / Adler-32 (ZLIB) is
//     the run's check, and ends without a final block: bytes a commit may
//     copy into another stream as they are.
#include <sys/mman.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/record/deflate_runs.h"

namespace tfrecordfs::fuzz {
namespace {

// Raw inflate of `in` from a fresh state: its bytes, and whether it used
// all of `in` without error and without reaching a final block.
std::string InflateRaw(absl::string_view in, bool* clean) {
  z_stream z{};
  *clean = false;
  if (inflateInit2(&z, -15) != Z_OK) return "";
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  std::string out;
  char buf[1 << 15];
  int r = Z_OK;
  while (r == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    r = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
    if (r == Z_BUF_ERROR && z.avail_in == 0) break;
  }
  *clean = r == Z_BUF_ERROR && z.avail_in == 0;
  inflateEnd(&z);
  return out;
}

void Check(absl::string_view input) {
  if (input.size() < 2) return;
  const source::Codec codec = input[0] % 2 == 0 ? source::Codec::kGzip : source::Codec::kZlib;
  const uint64_t step = (static_cast<uint8_t>(input[1]) + uint64_t{1}) * 16;
  const absl::string_view file = input.substr(2);
  std::vector<uint64_t> offsets;
  for (uint64_t at = 0; at <= (uint64_t{4} << 20); at += step) offsets.push_back(at);
  const int raw = ::memfd_create("deflate_runs_fuzz", MFD_CLOEXEC);
  if (raw < 0) return;
  UniqueFd fd(raw);
  if (!WriteFull(fd.get(), file.data(), file.size(), "memfd").ok()) return;
  auto runs = record::FindDeflateRuns(fd.get(), "memfd", codec, offsets);
  FUZZ_CHECK(runs.ok(), runs.status().ToString());
  uint64_t file_at = 0, framed_at = 0;
  for (const record::DeflateRun& r : *runs) {
    FUZZ_CHECK(r.file_begin >= file_at && r.file_begin < r.file_end && r.file_end <= file.size());
    FUZZ_CHECK(r.begin >= framed_at && r.begin < r.end);
    FUZZ_CHECK(std::binary_search(offsets.begin(), offsets.end(), r.begin) &&
                   std::binary_search(offsets.begin(), offsets.end(), r.end),
               "run ", r.begin, "-", r.end, " off the record offsets");
    bool clean = false;
    const std::string bytes =
        InflateRaw(file.substr(r.file_begin, r.file_end - r.file_begin), &clean);
    FUZZ_CHECK(clean, "run at file byte ", r.file_begin, " does not inflate alone");
    FUZZ_CHECK(bytes.size() == r.end - r.begin, bytes.size(), " != ", r.end - r.begin);
    const auto* p = reinterpret_cast<const Bytef*>(bytes.data());
    const uint32_t check =
        codec == source::Codec::kGzip
            ? static_cast<uint32_t>(crc32(crc32(0, nullptr, 0), p, static_cast<uInt>(bytes.size())))
            : static_cast<uint32_t>(
                  adler32(adler32(0, nullptr, 0), p, static_cast<uInt>(bytes.size())));
    FUZZ_CHECK(check == r.check, "run at file byte ", r.file_begin, ": check differs");
    file_at = r.file_end;
    framed_at = r.end;
  }
}

}  // namespace
}  // namespace tfrecordfs::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tfrecordfs::fuzz::Check(absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
