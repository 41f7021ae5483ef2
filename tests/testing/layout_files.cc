#include "testing/layout_files.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/naming/naming.h"

namespace tfrecordfs::test {

absl::Status WriteLayout(const naming::Layout& layout, uint32_t entry, const std::string& dir,
                         absl::string_view payload) {
  const naming::Entry& e = layout.entries[entry];
  for (uint32_t c = e.first_child; c < e.first_child + e.num_children; ++c) {
    const naming::Entry& child = layout.entries[c];
    const std::string path = dir + "/" + child.name;
    if (child.is_dir) {
      if (::mkdir(path.c_str(), 0755) != 0) return ErrnoError(errno, absl::StrCat("mkdir ", path));
      if (auto s = WriteLayout(layout, c, path, payload); !s.ok()) return s;
      continue;
    }
    auto content = naming::FileContent(child, payload);
    if (!content.ok()) return content.status();
    auto fd = OpenFile(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (!fd.ok()) return fd.status();
    if (auto s = WriteFull(fd->get(), content->data(), content->size(), path); !s.ok()) return s;
    if (auto s = fd->Close(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace tfrecordfs::test
