#include "tfrecordfs/source/stored_bytes.h"

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"

namespace tfrecordfs::source {

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
  auto got = in.object()->ReadAt(offset, static_cast<char*>(buf), n);
  if (!got.ok()) return got.status();
  if (*got != n) {
    return absl::OutOfRangeError(absl::StrCat(path, ": unexpected end of object at byte offset ",
                                              offset + *got, " (wanted ", n, " bytes at ", offset,
                                              ")"));
  }
  return absl::OkStatus();
}

}  // namespace tfrecordfs::source
