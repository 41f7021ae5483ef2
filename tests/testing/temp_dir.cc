#include "temp_dir.h"

#include <limits.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tfrecordfs/base/fs_util.h"

namespace tfrecordfs::test {
namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string UnescapeMountinfo(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      const std::string oct = s.substr(i + 1, 3);
      if (oct.size() == 3 && oct.find_first_not_of("01234567") == std::string::npos) {
        out.push_back(static_cast<char>(std::stoi(oct, nullptr, 8)));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

struct MountinfoEntry {
  std::string mountpoint;
  std::string fstype;
};

std::vector<MountinfoEntry> ReadMountinfo() {
  std::vector<MountinfoEntry> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    std::string tok;
    while (fields >> tok) f.push_back(tok);
    // id parent maj:min root mountpoint options [optional...] - fstype source superopts
    if (f.size() < 7) continue;
    size_t dash = 6;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (dash + 1 >= f.size()) continue;
    out.push_back({UnescapeMountinfo(f[4]), f[dash + 1]});
  }
  return out;
}

void MakeOwnerWritable(const std::filesystem::path& root) {
  std::error_code ec;
  std::filesystem::permissions(root, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::add, ec);
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) {
      std::filesystem::permissions(it->path(), std::filesystem::perms::owner_all,
                                   std::filesystem::perm_options::add, ec);
    }
  }
}

}  // namespace

std::string TempRoot() {
  const char* t = std::getenv("TMPDIR");
  const std::string root = t != nullptr && *t != '\0' ? t : "/tmp";
  return RealPath(root).value_or(root);
}

bool IsMounted(const std::string& path, const std::string& fstype) {
  for (const auto& m : ReadMountinfo()) {
    if (m.mountpoint == path && (fstype.empty() || m.fstype == fstype)) return true;
  }
  return false;
}

TempDir::TempDir(absl::string_view stem) {
  std::string tmpl = absl::StrCat(TempRoot(), "/", stem, "-XXXXXX");
  if (::mkdtemp(tmpl.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp " << tmpl << ": " << std::strerror(errno);
    return;
  }
  path_ = tmpl;
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  for (const auto& m : ReadMountinfo()) {
    if (m.mountpoint == path_ || m.mountpoint.rfind(path_ + "/", 0) == 0) {
      std::cerr << "TempDir: leaving " << path_ << " in place: " << m.mountpoint
                << " is still mounted\n";
      return;
    }
  }
  MakeOwnerWritable(path_);
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::Join(absl::string_view rel) const { return absl::StrCat(path_, "/", rel); }

std::string TempDir::Subdir(absl::string_view rel) const {
  const std::string p = Join(rel);
  std::error_code ec;
  std::filesystem::create_directories(p, ec);
  if (ec) ADD_FAILURE() << "mkdir " << p << ": " << ec.message();
  return p;
}

}  // namespace tfrecordfs::test
