#include "tfrecordfs/staging/edit_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/staging/edits.h"

namespace tfrecordfs::staging {
namespace {

constexpr absl::string_view kMovePrefix = ".move-";

absl::Status WriteNewFile(const std::string& path, absl::string_view data) {
  auto fd = OpenFile(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (!fd.ok()) return fd.status();
  return WriteFull(fd->get(), data.data(), data.size(), path);
}

std::string HiddenPath(const std::string& dir, absl::string_view folder) {
  return absl::StrCat(dir, "/.", folder, ".tmp");
}

}  // namespace

std::string EditStore::PathOf(absl::string_view folder) const {
  return absl::StrCat(records_dir_, "/", folder);
}

absl::Status EditStore::CheckOut(absl::string_view folder, const std::vector<Entry>& entries,
                                 const std::function<absl::StatusOr<std::string>(size_t)>& content,
                                 struct timespec times) const {
  const std::string final_path = PathOf(folder);
  if (struct stat st; ::lstat(final_path.c_str(), &st) == 0) {
    return PosixError(EEXIST, absl::StrCat(final_path, ": exists"));
  }
  const std::string tmp = HiddenPath(records_dir_, folder);
  if (auto s = RemoveTree(tmp); !s.ok()) return s;
  if (::mkdir(tmp.c_str(), 0755) != 0) return ErrnoError(errno, tmp);
  auto build = [&]() -> absl::Status {
    for (size_t i = 0; i < entries.size(); ++i) {
      const std::string path = absl::StrCat(tmp, "/", entries[i].rel);
      if (entries[i].is_dir) {
        if (::mkdir(path.c_str(), 0755) != 0) return ErrnoError(errno, path);
        continue;
      }
      auto bytes = content(i);
      if (!bytes.ok()) return bytes.status();
      if (auto s = WriteNewFile(path, *bytes); !s.ok()) return s;
    }
    // Times last: setting one changes no folder's mtime, but creating a
    // file in a folder does.
    const struct timespec both[2] = {times, times};
    for (size_t i = 0; i <= entries.size(); ++i) {
      const std::string path = i == 0 ? tmp : absl::StrCat(tmp, "/", entries[i - 1].rel);
      if (::utimensat(AT_FDCWD, path.c_str(), both, AT_SYMLINK_NOFOLLOW) != 0) {
        return ErrnoError(errno, path);
      }
    }
    return RenameNoReplace(tmp, final_path);
  };
  absl::Status s = build();
  if (!s.ok()) (void)RemoveTree(tmp);
  return s;
}

absl::Status EditStore::Drop(absl::string_view folder, absl::Status* leftover) const {
  const std::string dir = PathOf(folder);
  const std::string gone = HiddenPath(records_dir_, folder);
  if (auto s = RemoveTree(gone); !s.ok()) return s;
  if (::rename(dir.c_str(), gone.c_str()) != 0) return ErrnoError(errno, dir);
  absl::Status removed = RemoveTree(gone);
  if (leftover != nullptr) *leftover = std::move(removed);
  return absl::OkStatus();
}

absl::Status EditStore::MoveOut(absl::string_view folder, const std::string& dest_dir,
                                absl::string_view dest_name,
                                const std::function<absl::Status()>& delete_record,
                                const std::function<void()>& after_step1,
                                const std::function<void()>& after_step2) const {
  const std::string source = PathOf(folder);
  const std::string temp = absl::StrCat(dest_dir, "/", kMovePrefix, folder, "-", dest_name);
  const std::string target = absl::StrCat(dest_dir, "/", dest_name);
  if (struct stat st; ::lstat(target.c_str(), &st) == 0) {
    return PosixError(EEXIST, absl::StrCat(dest_name, ": exists"));
  }
  if (auto s = RenameNoReplace(source, temp); !s.ok()) return s;  // 1
  if (after_step1) after_step1();
  if (auto s = delete_record(); !s.ok()) {  // 2
    if (auto back = RenameNoReplace(temp, source); !back.ok()) {
      return Annotate(s, absl::StrCat("and ", back.message(), " (the next mount puts it back)"));
    }
    return s;
  }
  if (after_step2) after_step2();
  return RenameNoReplace(temp, target);  // 3
}

std::vector<EditStore::InterruptedMove> EditStore::FindInterruptedMoves(const std::string& dir) {
  std::vector<InterruptedMove> out;
  auto list = ListDir::Open(dir);
  if (!list.ok()) return out;
  for (absl::string_view name; list->Next(&name);) {
    absl::string_view rest = name;
    if (!absl::ConsumePrefix(&rest, kMovePrefix)) continue;
    // `<16 hex key>-<record>-<dest name>`: the record's digits end at the
    // first '-' after the key's.
    const size_t dash = rest.find('-', 17);
    if (dash == absl::string_view::npos) continue;
    auto f = ParseEditFolder(rest.substr(0, dash));
    if (!f || !f->record) continue;
    out.push_back({dir, std::string(name), f->key, *f->record, std::string(rest.substr(dash + 1))});
  }
  return out;
}

absl::StatusOr<std::string> EditStore::ResolveMove(const InterruptedMove& m,
                                                   bool record_deleted) const {
  const std::string from = absl::StrCat(m.dir, "/", m.temp);
  const std::string to = record_deleted ? absl::StrCat(m.dir, "/", m.dest_name)
                                        : PathOf(EditedFolderName(m.key, m.record));
  if (auto s = RenameNoReplace(from, to); !s.ok()) return s;
  return to;
}

}  // namespace tfrecordfs::staging
