// Fuzz target: the ArrayRecord footer and postscript (arrayrecord/file.h),
// what says where a hostile file's chunks are. The input: a footer offset
// (8 bytes), then records, each a length byte and that many bytes (the
// first the RiegeliFooterMetadata, the rest ArrayRecordFooter entries); the
// same records are then read as postscripts of a file of `footer offset +
// 64 KiB` bytes.
//
// Invariants: ParseFooter and ParsePostscript fail only with DataLoss
// naming the footer's offset; an accepted footer lists num_chunks chunks
// whose offsets are past the signature, strictly increasing by at least a
// chunk header, before the footer, each at a possible chunk boundary, each
// within the per-chunk limits, and their record counts add up to
// num_records; an accepted postscript's footer offset is past the
// signature and before the postscript.
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "fuzz_check.h"
#include "tfrecordfs/arrayrecord/file.h"

namespace tfrecordfs::fuzz {
namespace {

void Check(absl::string_view bytes) {
  Bytes in(bytes);
  const uint64_t footer_offset = in.U64() % (uint64_t{1} << 40);
  arrayrecord::Records records;
  while (!in.empty()) {
    const absl::string_view r = in.Str(255);
    records.values.append(r.data(), r.size());
    records.limits.push_back(records.values.size());
  }
  auto footer = arrayrecord::ParseFooter(records, footer_offset, "fuzz");
  if (!footer.ok()) {
    FUZZ_CHECK(absl::IsDataLoss(footer.status()), footer.status().ToString());
    FUZZ_CHECK(footer.status().message().find(absl::StrCat("byte offset ", footer_offset)) !=
               std::string::npos);
  } else {
    FUZZ_CHECK(footer->chunks.size() + 1 == records.size());
    uint64_t total = 0, prev = 0;
    for (size_t i = 0; i < footer->chunks.size(); ++i) {
      const auto& c = footer->chunks[i];
      FUZZ_CHECK(c.offset >= arrayrecord::kSignatureSize, "chunk ", i);
      FUZZ_CHECK(i == 0 || c.offset >= prev + arrayrecord::kChunkHeaderSize, "chunk ", i);
      FUZZ_CHECK(c.offset + arrayrecord::kChunkHeaderSize <= footer_offset, "chunk ", i);
      FUZZ_CHECK(arrayrecord::IsPossibleChunkBoundary(c.offset));
      FUZZ_CHECK(c.decoded_data_size <= arrayrecord::kMaxChunkDecoded);
      total += c.num_records;
      prev = c.offset;
    }
    FUZZ_CHECK(total == footer->num_records);
  }
  const uint64_t file_size = footer_offset + arrayrecord::kBlockSize;
  auto ps = arrayrecord::ParsePostscript(records, file_size, "fuzz");
  if (!ps.ok()) {
    FUZZ_CHECK(absl::IsDataLoss(ps.status()), ps.status().ToString());
  } else {
    FUZZ_CHECK(*ps >= arrayrecord::kSignatureSize && *ps < file_size - arrayrecord::kBlockSize);
  }
}

}  // namespace
}  // namespace tfrecordfs::fuzz

TFRFS_FUZZ_ENTRY(tfrecordfs::fuzz::Check, 1 << 16)
