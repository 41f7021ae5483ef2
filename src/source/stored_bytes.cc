#include "tfrecordfs/source/stored_bytes.h"

#include "tfrecordfs/base/file.h"

namespace tfrecordfs::source {

const std::string& ObjectReader::etag() const {
  static const std::string* const kNone = new std::string();
  return *kNone;
}

absl::StatusOr<std::string> ObjectReader::ReadBeside(absl::string_view suffix, uint64_t) const {
  return absl::NotFoundError(absl::StrCat(url(), suffix));
}

absl::Status ObjectReader::WriteBeside(absl::string_view suffix, absl::string_view) const {
  return absl::UnimplementedError(
      absl::StrCat(url(), suffix, ": this store takes no objects beside its shards"));
}

absl::StatusOr<size_t> PreadUpTo(StoredBytes in, void* buf, size_t n, uint64_t offset,
                                 absl::string_view path) {
  if (in.object() == nullptr) return tfrecordfs::PreadUpTo(in.fd(), buf, n, offset, path);
  return in.object()->ReadAt(offset, static_cast<char*>(buf), n);
}

absl::Status PreadFull(StoredBytes in, void* buf, size_t n, uint64_t offset,
                       absl::string_view path) {
  if (in.object() == nullptr) return tfrecordfs::PreadFull(in.fd(), buf, n, offset, path);
  return ExpectFullRead(in.object()->ReadAt(offset, static_cast<char*>(buf), n), n, offset, path,
                        "object");
}

}  // namespace tfrecordfs::source
