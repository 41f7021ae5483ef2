#include "tfrecordfs/staging/record_folder.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <map>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/utf8.h"
#include "tfrecordfs/naming/naming.h"

namespace tfrecordfs::staging {

using example::Feature;
using example::Kind;

namespace {

struct DirEntry {
  std::string name;
  struct stat st;
};

absl::StatusOr<std::vector<DirEntry>> List(const std::string& dir, const std::string& rel) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return ErrnoError(errno, dir);
  std::vector<DirEntry> out;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == ".." || naming::IsIgnoredName(name)) continue;
    DirEntry de;
    de.name = name;
    if (::fstatat(dirfd(d), name.c_str(), &de.st, AT_SYMLINK_NOFOLLOW) != 0) {
      int err = errno;
      ::closedir(d);
      return ErrnoError(err, absl::StrCat(dir, "/", name));
    }
    if (!S_ISREG(de.st.st_mode) && !S_ISDIR(de.st.st_mode)) {
      ::closedir(d);
      return absl::InvalidArgumentError(
          absl::StrCat(rel, name, ": only regular files and folders can be staged",
                       S_ISLNK(de.st.st_mode) ? " (symlinks are refused)" : ""));
    }
    out.push_back(std::move(de));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(),
            [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return out;
}

Kind XattrKind(const std::string& path) {
  char buf[16];
  ssize_t n = ::lgetxattr(path.c_str(), kKindXattr, buf, sizeof buf);
  if (n <= 0) return Kind::kNone;
  absl::string_view v(buf, static_cast<size_t>(n));
  if (v == "int64") return Kind::kInt64;
  if (v == "float") return Kind::kFloat;
  return Kind::kNone;
}

class FolderReader {
 public:
  FolderReader(const KindHint& hint) : hint_(hint) {}

  absl::Status Walk(const std::string& dir, const std::string& rel,
                    std::vector<std::string>* escaped_dirs) {
    auto entries = List(dir, rel);
    if (!entries.ok()) return entries.status();
    for (const DirEntry& e : *entries) {
      const std::string path = absl::StrCat(dir, "/", e.name);
      const std::string erel = absl::StrCat(rel, e.name);
      if (S_ISDIR(e.st.st_mode)) {
        auto sub = List(path, erel + "/");
        if (!sub.ok()) return sub.status();
        std::vector<std::pair<std::string, bool>> kinds;
        for (const DirEntry& s : *sub) kinds.emplace_back(s.name, S_ISREG(s.st.st_mode));
        if (!naming::IsContinuation(e.name) && naming::IsListDirectory(kinds)) {
          Feature f;
          f.kind = Kind::kBytes;
          f.name = naming::FeatureNameFromPath(*escaped_dirs, e.name);
          std::vector<std::pair<uint64_t, std::string>> items;
          for (const DirEntry& s : *sub) {
            auto content = ReadFileToString(absl::StrCat(path, "/", s.name));
            if (!content.ok()) return content.status();
            items.emplace_back(*naming::ListItemIndex(s.name), std::move(*content));
          }
          std::sort(items.begin(), items.end());
          for (auto& [idx, bytes] : items) f.bytes.push_back(Keep(std::move(bytes)));
          if (auto s = Add(std::move(f), erel); !s.ok()) return s;
          continue;
        }
        escaped_dirs->push_back(e.name);
        absl::Status s = Walk(path, erel + "/", escaped_dirs);
        escaped_dirs->pop_back();
        if (!s.ok()) return s;
        continue;
      }
      const naming::LeafName leaf = naming::ParseLeafName(e.name);
      auto content = ReadFileToString(path);
      if (!content.ok()) return content.status();
      Feature f;
      f.name = naming::FeatureNameFromPath(*escaped_dirs, leaf.stem_escaped);
      switch (leaf.role) {
        case naming::FileRole::kNumeric: {
          // The shards' kind wins; the tag only stands in when they do not
          // know this name (after a restart). A file renamed from another
          // feature keeps that feature's tag, so the tag must not override.
          Kind h = hint_ ? hint_(f.name) : Kind::kNone;
          if (h != Kind::kInt64 && h != Kind::kFloat) h = XattrKind(path);
          auto parsed = naming::ParseNumeric(*content, h);
          if (!parsed.ok()) {
            return absl::InvalidArgumentError(
                absl::StrCat(erel, ": ", parsed.status().message()));
          }
          parsed->name = f.name;
          f = std::move(*parsed);
          break;
        }
        case naming::FileRole::kText: {
          const std::string& kept = Keep(std::move(*content));
          f.kind = Kind::kBytes;
          f.bytes = naming::ParseText(kept);
          break;
        }
        case naming::FileRole::kSingleBytes:
          f.kind = Kind::kBytes;
          f.bytes.push_back(Keep(std::move(*content)));
          break;
      }
      if (auto s = Add(std::move(f), erel); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  std::string Encode() {
    example::FeatureTable table;
    for (auto& [name, f] : features_) table.features.push_back(std::move(f.first));
    return example::EncodeExample(table);
  }

 private:
  const std::string& Keep(std::string s) {
    storage_.push_back(std::move(s));
    return storage_.back();
  }

  absl::Status Add(Feature f, const std::string& rel) {
    // Map keys are proto3 strings: a name that is not UTF-8 (raw bytes in a
    // file name, or a %XX escape of them) would pack into a record that no
    // protobuf parser, and not the read path, accepts as an Example.
    if (!IsValidUtf8(f.name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          rel, ": the feature name '", absl::CHexEscape(f.name), "' is not valid UTF-8"));
    }
    auto [it, inserted] = features_.try_emplace(f.name, std::move(f), rel);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(rel, " and ", it->second.second,
                                                     " both map to feature '", it->first, "'"));
    }
    return absl::OkStatus();
  }

  const KindHint& hint_;
  std::deque<std::string> storage_;  // owns bytes the features view
  std::map<std::string, std::pair<Feature, std::string>> features_;  // name -> (feature, file)
};

}  // namespace

absl::StatusOr<std::string> PayloadFromFolder(const std::string& path, const KindHint& hint) {
  auto top = List(path, "");
  if (!top.ok()) return top.status();
  if (top->size() == 1 && (*top)[0].name == naming::kRawRecordName &&
      S_ISREG((*top)[0].st.st_mode)) {
    return ReadFileToString(absl::StrCat(path, "/", naming::kRawRecordName));
  }
  FolderReader reader(hint);
  std::vector<std::string> dirs;
  if (auto s = reader.Walk(path, "", &dirs); !s.ok()) return s;
  return reader.Encode();
}

absl::StatusOr<Kind> ValidateNumeric(absl::string_view content, Kind hint) {
  auto f = naming::ParseNumeric(content, hint);
  if (!f.ok()) return f.status();
  return f->kind;
}

}  // namespace tfrecordfs::staging
