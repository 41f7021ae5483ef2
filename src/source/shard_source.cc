#include "tfrecordfs/source/shard_source.h"

#include "absl/strings/str_cat.h"

namespace tfrecordfs::source {

absl::string_view CodecName(Codec codec) {
  switch (codec) {
    case Codec::kNone:
      return "none";
    case Codec::kGzip:
      return "gzip";
    case Codec::kZlib:
      return "zlib";
  }
  return "?";
}

std::optional<Codec> ParseCodecName(absl::string_view name) {
  for (Codec c : {Codec::kNone, Codec::kGzip, Codec::kZlib}) {
    if (name == CodecName(c)) return c;
  }
  return std::nullopt;
}

Codec DetectCodec(absl::string_view b) {
  if (b.size() >= 3 && static_cast<unsigned char>(b[0]) == 0x1f &&
      static_cast<unsigned char>(b[1]) == 0x8b && b[2] == 8) {
    return Codec::kGzip;
  }
  if (b.size() >= 2) {
    const unsigned cmf = static_cast<unsigned char>(b[0]);
    const unsigned flg = static_cast<unsigned char>(b[1]);
    const bool deflate = (cmf & 0x0f) == 8 && (cmf >> 4) <= 7;
    const bool check = (cmf * 256 + flg) % 31 == 0;
    const bool no_dict = (flg & 0x20) == 0;
    if (deflate && check && no_dict) return Codec::kZlib;
  }
  return Codec::kNone;
}

absl::Status ShardSource::ReadFull(uint64_t offset, char* buf, size_t n) const {
  auto got = ReadAt(offset, buf, n);
  if (!got.ok()) return got.status();
  if (*got < n) {
    return absl::DataLossError(absl::StrCat(path(), ": ", n, " byte(s) wanted at offset ", offset,
                                            ", but the ", codec() == Codec::kNone ? "file" : "stream",
                                            " ends after ", *got));
  }
  return absl::OkStatus();
}

PlainSource::PlainSource(UniqueFd fd, std::string path, uint64_t size)
    : owned_(std::move(fd)), path_(std::move(path)), size_(size) {
  fd_ = owned_.get();
}

PlainSource PlainSource::Borrowing(int fd, std::string path, uint64_t size) {
  return PlainSource(fd, std::move(path), size);
}

absl::StatusOr<size_t> PlainSource::ReadAt(uint64_t offset, char* buf, size_t n) const {
  if (offset >= size_) return size_t{0};
  if (n > size_ - offset) n = static_cast<size_t>(size_ - offset);
  return PreadUpTo(fd_, buf, n, offset, path_);
}

}  // namespace tfrecordfs::source
