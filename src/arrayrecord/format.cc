#include "tfrecordfs/arrayrecord/format.h"

#include <highwayhash/c_bindings.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/coding.h"

namespace tfrecordfs::arrayrecord {

const unsigned char kSignature[kSignatureSize] = {
    0x83, 0xaf, 0x70, 0xd1, 0x0d, 0x88, 0x4a, 0x3f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x91, 0xba, 0xc2, 0x3c, 0x92, 0x87, 0xe1, 0xa9,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe1, 0x9f, 0x13, 0xc0, 0xe9, 0xb1, 0xc3, 0x72,
    0x73, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

absl::string_view CompressionName(Compression c) {
  switch (c) {
    case Compression::kNone:
      return "none";
    case Compression::kBrotli:
      return "brotli";
    case Compression::kZstd:
      return "zstd";
    case Compression::kSnappy:
      return "snappy";
  }
  return "unknown";
}

uint64_t Hash(absl::string_view data) {
  // 'Riegeli/', 'records\n', twice (the format's key).
  alignas(32) static const uint64_t kKey[4] = {0x2f696c6567656952, 0x0a7364726f636572,
                                               0x2f696c6567656952, 0x0a7364726f636572};
  return HighwayHash64(kKey, data.data(), data.size());
}

bool HasSignature(absl::string_view first) {
  return first.size() >= kSignatureSize &&
         std::memcmp(first.data(), kSignature, kSignatureSize) == 0;
}

std::string EncodeChunkHeader(const ChunkHeader& h) {
  std::string out(8, '\0');
  PutFixed64(&out, h.data_size);
  PutFixed64(&out, h.data_hash);
  PutFixed64(&out, uint64_t{h.type} | (h.num_records << 8));
  PutFixed64(&out, h.decoded_data_size);
  const uint64_t hash = Hash(absl::string_view(out).substr(8));
  std::string head;
  PutFixed64(&head, hash);
  out.replace(0, 8, head);
  return out;
}

absl::StatusOr<ChunkHeader> ParseChunkHeader(absl::string_view bytes) {
  if (bytes.size() < kChunkHeaderSize) {
    return absl::InvalidArgumentError("chunk header cut short");
  }
  const char* p = bytes.data();
  if (DecodeFixed64(p) != Hash(bytes.substr(8, kChunkHeaderSize - 8))) {
    return absl::InvalidArgumentError("chunk header hash mismatch");
  }
  ChunkHeader h;
  h.data_size = DecodeFixed64(p + 8);
  h.data_hash = DecodeFixed64(p + 16);
  const uint64_t tn = DecodeFixed64(p + 24);
  h.type = static_cast<uint8_t>(tn & 0xff);
  h.num_records = tn >> 8;
  h.decoded_data_size = DecodeFixed64(p + 32);
  return h;
}

std::string EncodeBlockHeader(const BlockHeader& h) {
  std::string body;
  PutFixed64(&body, h.previous_chunk);
  PutFixed64(&body, h.next_chunk);
  std::string out;
  PutFixed64(&out, Hash(body));
  return out + body;
}

absl::StatusOr<BlockHeader> ParseBlockHeader(absl::string_view bytes) {
  if (bytes.size() < kBlockHeaderSize) {
    return absl::InvalidArgumentError("block header cut short");
  }
  const char* p = bytes.data();
  if (DecodeFixed64(p) != Hash(bytes.substr(8, kBlockHeaderSize - 8))) {
    return absl::InvalidArgumentError("block header hash mismatch");
  }
  BlockHeader h;
  h.previous_chunk = DecodeFixed64(p + 8);
  h.next_chunk = DecodeFixed64(p + 16);
  if (h.previous_chunk % kBlockSize >= kUsableBlockSize || h.next_chunk == 0 ||
      (h.next_chunk - 1) % kBlockSize < kBlockHeaderSize) {
    return absl::InvalidArgumentError(absl::StrCat("block header distances ", h.previous_chunk,
                                                   " and ", h.next_chunk, " are impossible"));
  }
  return h;
}

}  // namespace tfrecordfs::arrayrecord
