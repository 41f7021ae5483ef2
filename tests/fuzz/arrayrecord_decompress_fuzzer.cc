// Fuzz target: the decompressors a hostile ArrayRecord chunk reaches
// (arrayrecord/chunk.h Decompress: brotli, zstd, snappy, none). The input:
// a byte choosing the compression and whether the size must be exact, four
// bytes of the most it may decompress to (at most 1 MiB), then the stored
// buffer (its varint size prefix included).
//
// Invariants: Decompress never crashes, never allocates past the limit,
// and fails only with DataLoss naming the buffer; what it accepts is at
// most the limit (exactly it when exact); and for every compression,
// Compress of the stored bytes decompresses back to them.
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "fuzz_check.h"
#include "tfrecordfs/arrayrecord/chunk.h"

namespace tfrecordfs::fuzz {
namespace {

void Check(absl::string_view bytes) {
  Bytes in(bytes);
  const uint8_t mode = in.U8();
  static constexpr arrayrecord::Compression kAll[] = {
      arrayrecord::Compression::kNone, arrayrecord::Compression::kBrotli,
      arrayrecord::Compression::kZstd, arrayrecord::Compression::kSnappy};
  const arrayrecord::Compression c = kAll[mode % 4];
  const bool exact = (mode & 4) != 0;
  const uint64_t max = in.U32() % ((uint64_t{1} << 20) + 1);
  const absl::string_view stored = in.Rest();
  auto out = arrayrecord::Decompress(c, stored, max, exact, "fuzz buffer");
  if (!out.ok()) {
    FUZZ_CHECK(absl::IsDataLoss(out.status()), out.status().ToString());
    FUZZ_CHECK(out.status().message().find("fuzz buffer") != std::string::npos);
  } else {
    FUZZ_CHECK(out->size() <= max && (!exact || out->size() == max));
  }
  auto packed = arrayrecord::Compress(c, (mode >> 3) % 8, stored);
  FUZZ_CHECK(packed.ok(), packed.status().ToString());
  auto back = arrayrecord::Decompress(c, *packed, stored.size(), true, "round trip");
  FUZZ_CHECK(back.ok() && *back == stored, back.status().ToString());
}

}  // namespace
}  // namespace tfrecordfs::fuzz

TFRFS_FUZZ_ENTRY(tfrecordfs::fuzz::Check, 1 << 18)
