#include "testing/index_files.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

#include "gtest/gtest.h"
#include "tfrecordfs/base/file.h"

namespace tfrecordfs::test {

absl::StatusOr<std::shared_ptr<const index::ShardIndex>> LoadShardIndex(index::IndexStore& store,
                                                                        const std::string& path,
                                                                        source::Codec codec,
                                                                        index::LoadInfo* info) {
  auto fd = OpenFile(path, O_RDONLY);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return ErrnoError(errno, path);
  return store.Load(fd->get(), path, Basename(path), st, codec, info);
}

void EditIndexFile(const std::string& path, absl::FunctionRef<void(index::IndexFile*)> edit) {
  auto bytes = ReadFileToString(path);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto main_size = index::IndexMainSize(*bytes);
  ASSERT_TRUE(main_size.ok()) << path << ": " << main_size.status();
  auto f = index::DecodeIndexFile(*bytes);
  ASSERT_TRUE(f.ok()) << path << ": " << f.status();
  f->windows = bytes->substr(*main_size);  // Decode leaves it empty
  edit(&*f);
  const std::string edited = index::EncodeIndexFile(*f);
  auto fd = OpenFile(path, O_WRONLY | O_TRUNC);
  ASSERT_TRUE(fd.ok()) << fd.status();
  ASSERT_TRUE(WriteFull(fd->get(), edited.data(), edited.size(), path).ok()) << path;
}

void ForgeMiddleCheckpoint(const std::string& path, uint64_t shift) {
  bool enough = false;
  EditIndexFile(path, [&](index::IndexFile* f) {
    if (f->checkpoints.size() <= 4) return;
    enough = true;
    const size_t k = f->checkpoints.size() / 2;
    f->checkpoints[k].out += shift;
    enough = f->checkpoints[k].out < f->checkpoints[k + 1].out;
  });
  ASSERT_TRUE(enough) << path << ": too few checkpoints to forge one, or too large a shift";
  auto bytes = ReadFileToString(path);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  ASSERT_TRUE(index::DecodeIndexFile(*bytes).ok()) << path << ": the forged file must decode";
}

}  // namespace tfrecordfs::test
