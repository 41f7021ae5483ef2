#include "tfrecordfs/staging/record_folder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/utf8.h"
#include "tfrecordfs/example/example_list.h"
#include "tfrecordfs/example/sequence.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/staging/staged_file.h"

namespace tfrecordfs::staging {

using example::Feature;
using example::Kind;
using naming::FeatureType;

namespace {

struct DirEntry {
  std::string name;
  struct stat st;
};

absl::StatusOr<std::vector<DirEntry>> List(const std::string& dir, const std::string& rel) {
  auto d = ListDir::Open(dir);
  if (!d.ok()) return d.status();
  std::vector<DirEntry> out;
  for (absl::string_view entry; d->Next(&entry);) {
    std::string name(entry);
    if (naming::IsIgnoredName(name)) continue;
    DirEntry de;
    de.name = name;
    if (::fstatat(d->fd(), name.c_str(), &de.st, AT_SYMLINK_NOFOLLOW) != 0) {
      return ErrnoError(errno, JoinPath(dir, name));
    }
    if (!S_ISREG(de.st.st_mode) && !S_ISDIR(de.st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat(rel, name, ": only regular files and folders can be staged",
                       S_ISLNK(de.st.st_mode) ? " (symlinks are refused)" : ""));
    }
    if (S_ISREG(de.st.st_mode)) {
      // A file a write() was refused for holds less than its writer meant.
      char why[1024];
      const ssize_t n = ::lgetxattr(JoinPath(dir, name).c_str(), kErrorXattr, why, sizeof why);
      if (n >= 0 || errno == ERANGE) {
        return absl::InvalidArgumentError(absl::StrCat(
            rel, name, ": ", absl::string_view(why, n >= 0 ? static_cast<size_t>(n) : sizeof why)));
      }
    }
    out.push_back(std::move(de));
  }
  if (!d->status().ok()) return d->status();
  std::sort(out.begin(), out.end(),
            [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return out;
}

// The tensor types a `.png`/`.npy` file of a feature may take: the shards'
// type when they know the name, else the file's tag. Empty: not a tensor.
std::vector<tensor::TensorType> ArrayTypes(const FeatureType& type, const std::string& path) {
  if (type.kind != Kind::kNone) return type.tensors;
  return KindTagAt(path).tensors;
}

// The bytes value a staged file gives: a TensorProto for a `.png`/`.npy` of
// a tensor feature, else the file's bytes.
absl::StatusOr<std::string> BytesValue(std::string content, absl::string_view ext,
                                       const FeatureType& type, const std::string& path,
                                       const std::string& rel) {
  if (!IsArrayExtension(ext)) return content;
  const std::vector<tensor::TensorType> types = ArrayTypes(type, path);
  if (types.empty()) return content;
  auto file = TensorFromFile(ext, content, types);
  if (!file.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(rel, ": ", file.status().message()));
  }
  return std::move(file->proto);
}

class FolderReader {
 public:
  FolderReader(naming::FeatureTypes& types, std::vector<InferredKind>* inferred)
      : types_(types), inferred_(inferred) {}

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
          std::optional<FeatureType> type;  // asked once, for the first array item
          std::vector<std::pair<uint64_t, std::string>> items;
          for (const DirEntry& s : *sub) {
            const std::string item = absl::StrCat(path, "/", s.name);
            auto content = ReadFileToString(item);
            if (!content.ok()) return content.status();
            const absl::string_view ext = ItemExtension(s.name);
            if (IsArrayExtension(ext) && !type) type = TypeOf(f.name);
            auto value = BytesValue(std::move(*content), ext, type.value_or(FeatureType{}), item,
                                    absl::StrCat(erel, "/", s.name));
            if (!value.ok()) return value.status();
            items.emplace_back(*naming::ListItemIndex(s.name), std::move(*value));
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
          Kind h = TypeOf(f.name).kind;
          if (h != Kind::kInt64 && h != Kind::kFloat) h = KindTagAt(path).kind;
          auto parsed = naming::ParseNumeric(*content, h);
          if (!parsed.ok()) {
            return absl::InvalidArgumentError(absl::StrCat(erel, ": ", parsed.status().message()));
          }
          if (inferred_ != nullptr && h != Kind::kInt64 && h != Kind::kFloat) {
            inferred_->push_back({erel, parsed->kind});
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
        case naming::FileRole::kKindless:
          // A kindless feature (Feature{}): the key without a value.
          if (!content->empty()) {
            return absl::InvalidArgumentError(absl::StrCat(
                erel, ": a kindless feature's file (", naming::kKindlessExtension,
                ") stays empty; give the feature a value in a file of its kind instead (",
                leaf.stem_escaped, " for numbers, ", leaf.stem_escaped, ".txt for text)"));
          }
          f.kind = Kind::kNone;
          break;
        case naming::FileRole::kSingleBytes: {
          const absl::string_view ext = absl::string_view(e.name).substr(leaf.stem_escaped.size());
          const FeatureType type = IsArrayExtension(ext) ? TypeOf(f.name) : FeatureType{};
          auto value = BytesValue(std::move(*content), ext, type, path, erel);
          if (!value.ok()) return value.status();
          f.kind = Kind::kBytes;
          f.bytes.push_back(Keep(std::move(*value)));
          break;
        }
      }
      if (auto s = Add(std::move(f), erel); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // The features read so far (views into this reader's storage).
  example::FeatureTable Table() {
    example::FeatureTable table;
    for (auto& [name, f] : features_) table.features.push_back(std::move(f.first));
    features_.clear();
    return table;
  }

  std::string Encode() { return example::EncodeExample(Table()); }

 private:
  FeatureType TypeOf(const std::string& name) const { return types_.Lookup(name); }

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
    auto it = features_.find(f.name);
    if (it != features_.end() &&
        (f.kind == Kind::kNone) != (it->second.first.kind == Kind::kNone)) {
      // A kindless feature's `.none` beside a file that gives it a value
      // (`echo 5 > x` next to `x.none`): the value wins.
      if (f.kind != Kind::kNone) it->second = {std::move(f), rel};
      return absl::OkStatus();
    }
    bool inserted = false;
    std::tie(it, inserted) = features_.try_emplace(f.name, std::move(f), rel);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat(rel, " and ", it->second.second, " both map to feature '", it->first, "'"));
    }
    return absl::OkStatus();
  }

  naming::FeatureTypes& types_;
  std::vector<InferredKind>* const inferred_;                        // may be null
  std::deque<std::string> storage_;                                  // owns bytes the features view
  std::map<std::string, std::pair<Feature, std::string>> features_;  // name -> (feature, file)
};

// feature_lists/ of a staged SequenceExample folder (naming.h): folders that
// hold steps (or nothing) are lists, other folders are '/' in list names.
class ListsReader {
 public:
  ListsReader(naming::FeatureTypes& types, std::vector<InferredKind>* inferred)
      : types_(types), inferred_(inferred) {}

  absl::Status Walk(const std::string& dir, const std::string& rel,
                    std::vector<std::string>* escaped_dirs, bool top) {
    auto entries = List(dir, rel);
    if (!entries.ok()) return entries.status();
    bool has_steps = false;
    for (const DirEntry& e : *entries) has_steps |= StepIndex(e.name).has_value();
    if (!top && (has_steps || entries->empty())) {
      if (auto s = ReadList(dir, rel, *entries, *escaped_dirs); !s.ok()) return s;
    }
    for (const DirEntry& e : *entries) {
      if (StepIndex(e.name) && top) {
        return absl::InvalidArgumentError(
            absl::StrCat(rel, e.name, ": steps belong in a list's folder, feature_lists/<name>/"));
      }
      if (StepIndex(e.name)) continue;
      if (!S_ISDIR(e.st.st_mode)) {
        return absl::InvalidArgumentError(absl::StrCat(
            rel, e.name,
            ": a file in feature_lists/ must be a step named by its index (07, 07.txt, "
            "07.jpg, 07.none)"));
      }
      escaped_dirs->push_back(e.name);
      absl::Status s =
          Walk(absl::StrCat(dir, "/", e.name), absl::StrCat(rel, e.name, "/"), escaped_dirs, false);
      escaped_dirs->pop_back();
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  example::SequenceTable Take(example::FeatureTable context) {
    example::SequenceTable t;
    t.context = std::move(context);
    for (auto& [name, list] : lists_) t.lists.push_back(std::move(list));
    return t;
  }

  const std::string& Keep(std::string s) {
    storage_.push_back(std::move(s));
    return storage_.back();
  }

 private:
  absl::Status ReadList(const std::string& dir, const std::string& rel,
                        const std::vector<DirEntry>& entries, std::vector<std::string> dirs) {
    // The list's own folder is the last component: FeatureNameFromPath
    // joins (and undoes `%+` chunks and the empty list's `%-`).
    std::string leaf = dirs.back();
    dirs.pop_back();
    example::FeatureList list;
    list.name = naming::FeatureNameFromPath(dirs, leaf);
    const FeatureType list_type =
        types_.Lookup(absl::StrCat(naming::kFeatureListsDir, "/", list.name));
    Kind hint = list_type.kind;
    std::map<uint64_t, std::pair<const DirEntry*, std::string>> steps;  // index -> (entry, content)
    for (const DirEntry& e : entries) {
      auto idx = StepIndex(e.name);
      if (!idx) continue;
      if (!steps.try_emplace(*idx, &e, "").second) {
        return absl::InvalidArgumentError(
            absl::StrCat(rel, e.name, ": step ", *idx, " given twice"));
      }
    }
    if (!steps.empty() && steps.rbegin()->first + 1 != steps.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(rel, ": steps must be numbered 0..", steps.size() - 1, " without gaps"));
    }
    // Numeric steps share the list's kind: the shards' kind, else float when
    // any step is not all integers.
    bool any_float = hint == Kind::kFloat;
    std::vector<Feature> out(steps.size());
    for (auto& [idx, step] : steps) {
      const DirEntry& e = *step.first;
      const std::string path = absl::StrCat(dir, "/", e.name);
      const std::string erel = absl::StrCat(rel, e.name);
      Feature& f = out[idx];
      if (S_ISDIR(e.st.st_mode)) {
        auto sub = List(path, erel + "/");
        if (!sub.ok()) return sub.status();
        std::vector<std::pair<std::string, bool>> kinds;
        for (const DirEntry& s : *sub) kinds.emplace_back(s.name, S_ISREG(s.st.st_mode));
        if (!naming::IsListDirectory(kinds)) {
          return absl::InvalidArgumentError(
              absl::StrCat(erel, ": a step folder holds 0<ext>, 1<ext>, ... only"));
        }
        std::vector<std::pair<uint64_t, std::string>> items;
        for (const DirEntry& s : *sub) {
          const std::string item = absl::StrCat(path, "/", s.name);
          auto content = ReadFileToString(item);
          if (!content.ok()) return content.status();
          auto value = BytesValue(std::move(*content), ItemExtension(s.name), list_type, item,
                                  absl::StrCat(erel, "/", s.name));
          if (!value.ok()) return value.status();
          items.emplace_back(*naming::ListItemIndex(s.name), std::move(*value));
        }
        std::sort(items.begin(), items.end());
        f.kind = Kind::kBytes;
        for (auto& [i, bytes] : items) f.bytes.push_back(Keep(std::move(bytes)));
        continue;
      }
      auto content = ReadFileToString(path);
      if (!content.ok()) return content.status();
      const size_t dot = e.name.find('.');
      const absl::string_view ext =
          dot == std::string::npos ? absl::string_view() : absl::string_view(e.name).substr(dot);
      if (ext.empty()) {
        // After a restart the shards may not know the list: the steps' tags
        // (set at close) stand in, as for an Example's numeric files.
        if (hint != Kind::kInt64 && hint != Kind::kFloat && list_type.kind == Kind::kNone) {
          const Kind tag = KindTagAt(path).kind;
          if (tag == Kind::kInt64 || tag == Kind::kFloat) {
            hint = tag;
            any_float |= tag == Kind::kFloat;
          }
        }
        auto parsed = naming::ParseNumeric(*content, hint);
        if (!parsed.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(erel, ": ", parsed.status().message()));
        }
        any_float |= parsed->kind == Kind::kFloat;
        step.second = std::move(*content);
        f.kind = Kind::kInt64;  // settled below
      } else if (ext == naming::kKindlessExtension) {
        if (!content->empty()) {
          return absl::InvalidArgumentError(
              absl::StrCat(erel, ": a kindless step is an empty file"));
        }
      } else if (ext == naming::kTextExtension) {
        f.kind = Kind::kBytes;
        f.bytes = naming::ParseText(Keep(std::move(*content)));
      } else {
        auto value = BytesValue(std::move(*content), ext, list_type, path, erel);
        if (!value.ok()) return value.status();
        f.kind = Kind::kBytes;
        f.bytes.push_back(Keep(std::move(*value)));
      }
    }
    bool numeric_steps = false;
    for (auto& [idx, step] : steps) {
      if (out[idx].kind != Kind::kInt64 || step.first->name.find('.') != std::string::npos)
        continue;
      numeric_steps = true;
      auto parsed = naming::ParseNumeric(step.second, any_float ? Kind::kFloat : Kind::kInt64);
      if (!parsed.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(rel, step.first->name, ": ", parsed.status().message()));
      }
      out[idx] = std::move(*parsed);
    }
    if (inferred_ != nullptr && numeric_steps && hint != Kind::kInt64 && hint != Kind::kFloat) {
      inferred_->push_back({rel, any_float ? Kind::kFloat : Kind::kInt64});
    }
    for (Feature& f : out) f.name.clear();
    list.steps = std::move(out);
    if (!IsValidUtf8(list.name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          rel, ": the list name '", absl::CHexEscape(list.name), "' is not valid UTF-8"));
    }
    const std::string name = list.name;
    if (!lists_.try_emplace(name, std::move(list)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(rel, ": a second folder for list '", name, "'"));
    }
    return absl::OkStatus();
  }

  naming::FeatureTypes& types_;
  std::vector<InferredKind>* const inferred_;  // may be null
  std::deque<std::string> storage_;
  std::map<std::string, example::FeatureList> lists_;
};

// A record folder with a top-level examples/ (naming.h): an
// ExampleListWithContext of context/ (when present) and the examples/<i>/
// folders in index order.
// `eie`: an Example-in-Example, serialized_context/ and serialized_examples/.
absl::StatusOr<std::string> ExampleListFromFolder(const std::string& path,
                                                  const std::vector<DirEntry>& top, bool eie,
                                                  naming::FeatureTypes& types,
                                                  std::vector<InferredKind>* inferred) {
  const std::string context_name(eie ? naming::kEieContextDir : naming::kContextDir);
  const std::string examples_name(eie ? naming::kEieExamplesDir : naming::kExamplesDir);
  example::ExampleListTable table;
  // One reader for every section: its storage keeps the bytes each table views.
  FolderReader reader(types, inferred);
  for (const DirEntry& e : top) {
    if (e.name == examples_name) continue;
    if (e.name != context_name || !S_ISDIR(e.st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat(e.name, ": a record folder with ", examples_name, "/ (",
                       eie ? "an Example-in-Example" : "an ExampleListWithContext", ") holds only ",
                       context_name, "/ and ", examples_name, "/"));
    }
    std::vector<std::string> dirs;
    if (auto s = reader.Walk(absl::StrCat(path, "/", e.name), context_name + "/", &dirs); !s.ok()) {
      return s;
    }
    table.has_context = true;
    table.context = reader.Table();
  }
  const std::string examples_dir = absl::StrCat(path, "/", examples_name);
  auto entries = List(examples_dir, examples_name + "/");
  if (!entries.ok()) return entries.status();
  // Folders named by their index; zero padding optional; gaps allowed (an
  // example folder removed with `rm -r` drops that example).
  std::map<uint64_t, std::string> folders;
  for (const DirEntry& e : *entries) {
    uint64_t index = 0;
    const bool digits =
        !e.name.empty() && e.name.size() <= 18 &&
        std::all_of(e.name.begin(), e.name.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!S_ISDIR(e.st.st_mode) || !digits || !absl::SimpleAtoi(e.name, &index)) {
      return absl::InvalidArgumentError(
          absl::StrCat(examples_name, "/", e.name, ": ", examples_name,
                       "/ holds one folder per example, named by its index (000, 001, ...)"));
    }
    if (auto [it, fresh] = folders.try_emplace(index, e.name); !fresh) {
      return absl::InvalidArgumentError(absl::StrCat(examples_name, "/", e.name, " and ",
                                                     examples_name, "/", it->second,
                                                     " are both example ", index));
    }
  }
  for (const auto& [index, name] : folders) {
    std::vector<std::string> dirs;
    if (auto s = reader.Walk(absl::StrCat(examples_dir, "/", name),
                             absl::StrCat(examples_name, "/", name, "/"), &dirs);
        !s.ok()) {
      return s;
    }
    table.examples.push_back(reader.Table());
  }
  return eie ? example::EncodeExampleInExample(table) : example::EncodeExampleList(table);
}

// Whether the top-level folder `name` of a record folder holds only folders
// (or nothing): how serialized_examples/ of an Example-in-Example differs
// from the folder of a bytes list of that name (files 0.bin, 1.bin, ...).
bool HoldsOnlyFolders(const std::string& path, const std::vector<DirEntry>& top,
                      absl::string_view name) {
  for (const DirEntry& e : top) {
    if (e.name != name || !S_ISDIR(e.st.st_mode)) continue;
    auto entries = List(absl::StrCat(path, "/", name), absl::StrCat(name, "/"));
    if (!entries.ok()) return false;
    return std::all_of(entries->begin(), entries->end(),
                       [](const DirEntry& s) { return S_ISDIR(s.st.st_mode); });
  }
  return false;
}

}  // namespace

absl::StatusOr<std::string> PayloadFromFolder(const std::string& path, naming::FeatureTypes& types,
                                              std::vector<InferredKind>* inferred) {
  auto top = List(path, "");
  if (!top.ok()) return top.status();
  if (top->size() == 1 && (*top)[0].name == naming::kRawRecordName &&
      S_ISREG((*top)[0].st.st_mode)) {
    return ReadFileToString(absl::StrCat(path, "/", naming::kRawRecordName));
  }
  const bool sequence = std::any_of(top->begin(), top->end(), [](const DirEntry& e) {
    return e.name == naming::kFeatureListsDir && S_ISDIR(e.st.st_mode);
  });
  if (sequence) {
    // A SequenceExample: context/ and feature_lists/ only.
    example::FeatureTable context;
    FolderReader reader(types, inferred);
    for (const DirEntry& e : *top) {
      if (e.name == naming::kFeatureListsDir) continue;
      if (e.name != naming::kContextDir || !S_ISDIR(e.st.st_mode)) {
        return absl::InvalidArgumentError(
            absl::StrCat(e.name,
                         ": a record folder with feature_lists/ (a SequenceExample) holds only "
                         "context/ and feature_lists/"));
      }
      std::vector<std::string> dirs;
      if (auto s = reader.Walk(absl::StrCat(path, "/", e.name), "context/", &dirs); !s.ok()) {
        return s;
      }
      context = reader.Table();
    }
    ListsReader lists(types, inferred);
    std::vector<std::string> dirs;
    if (auto s = lists.Walk(absl::StrCat(path, "/", naming::kFeatureListsDir), "feature_lists/",
                            &dirs, /*top=*/true);
        !s.ok()) {
      return s;
    }
    return example::EncodeSequenceExample(lists.Take(std::move(context)));
  }
  const bool example_list = std::any_of(top->begin(), top->end(), [](const DirEntry& e) {
    return e.name == naming::kExamplesDir && S_ISDIR(e.st.st_mode);
  });
  if (example_list) return ExampleListFromFolder(path, *top, /*eie=*/false, types, inferred);
  if (HoldsOnlyFolders(path, *top, naming::kEieExamplesDir)) {
    return ExampleListFromFolder(path, *top, /*eie=*/true, types, inferred);
  }
  FolderReader reader(types, inferred);
  std::vector<std::string> dirs;
  if (auto s = reader.Walk(path, "", &dirs); !s.ok()) return s;
  return reader.Encode();
}

}  // namespace tfrecordfs::staging
