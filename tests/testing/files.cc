#include "testing/files.h"

#include <dirent.h>
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
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

std::vector<std::string> SortedNames(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    ADD_FAILURE() << "opendir " << dir << ": " << std::strerror(errno);
    return out;
  }
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace tfrecordfs::test
