#include "testing/files.h"

#include <fcntl.h>

#include <filesystem>
#include <system_error>

#include "gtest/gtest.h"
#include "tfrecordfs/base/file.h"

namespace tfrecordfs::test {

void WriteFile(const std::string& path, absl::string_view contents) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  ASSERT_FALSE(ec) << "mkdir -p " << parent << ": " << ec.message();
  auto fd = OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_TRUE(fd.ok()) << fd.status();
  ASSERT_TRUE(WriteFull(fd->get(), contents.data(), contents.size(), path).ok()) << path;
}

std::string ReadFile(const std::string& path) {
  auto bytes = ReadFileToString(path);
  if (!bytes.ok()) {
    ADD_FAILURE() << bytes.status();
    return "";
  }
  return *std::move(bytes);
}

}  // namespace tfrecordfs::test
