// PendingShard: temporary name, then rename (reshape.h).
#include <fcntl.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/reshape/reshape.h"

namespace tfrecordfs::reshape {

std::string TempPathFor(absl::string_view final_path) {
  return JoinPath(Dirname(final_path), absl::StrCat(".", Basename(final_path), ".tmp"));
}

PendingShard::PendingShard(std::string final_path, std::string temp_path,
                           std::unique_ptr<record::ShardWriter> writer)
    : final_path_(std::move(final_path)),
      temp_path_(std::move(temp_path)),
      writer_(std::move(writer)) {}

absl::StatusOr<std::unique_ptr<PendingShard>> PendingShard::Create(std::string final_path,
                                                                   source::Codec codec) {
  std::string temp = TempPathFor(final_path);
  auto fd = OpenFile(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (!fd.ok()) return fd.status();
  auto writer = std::make_unique<record::ShardWriter>(std::move(*fd), temp,
                                                      record::WriterOptions{.codec = codec});
  return std::unique_ptr<PendingShard>(
      new PendingShard(std::move(final_path), std::move(temp), std::move(writer)));
}

PendingShard::~PendingShard() {
  if (committed_) return;
  writer_.reset();  // closes the descriptor (dropping buffered records)
  ::unlink(temp_path_.c_str());
}

absl::Status PendingShard::Finish() {
  if (auto s = writer_->Close(/*sync=*/true); !s.ok()) return s;
  finished_ = true;
  return absl::OkStatus();
}

absl::Status PendingShard::Commit() {
  if (!finished_) return absl::FailedPreconditionError(absl::StrCat(temp_path_, ": not finished"));
  if (auto s = RenameNoReplace(temp_path_, final_path_); !s.ok()) return s;
  committed_ = true;
  return FsyncDir(Dirname(final_path_));
}

}  // namespace tfrecordfs::reshape
