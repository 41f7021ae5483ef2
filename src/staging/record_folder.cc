#include "tfrecordfs/staging/record_folder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tfrecordfs/base/file.h"
#include "tfrecordfs/base/fs_util.h"
#include "tfrecordfs/base/utf8.h"
#include "tfrecordfs/example/sequence.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/tensor/npy.h"
#include "tfrecordfs/tensor/png.h"

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

FeatureType XattrKind(const std::string& path) {
  char buf[4096];
  ssize_t n = ::lgetxattr(path.c_str(), kKindXattr, buf, sizeof buf);
  if (n <= 0) return {};
  return ParseKindTag(absl::string_view(buf, static_cast<size_t>(n)));
}

bool IsArrayExtension(absl::string_view ext) {
  return ext == naming::kPngExtension || ext == naming::kNpyExtension;
}

// The extension of a step or list item name: from its first '.' on.
absl::string_view ItemExtension(absl::string_view name) {
  const size_t dot = name.find('.');
  return dot == absl::string_view::npos ? absl::string_view() : name.substr(dot);
}

// The tensor types a `.png`/`.npy` file of a feature may take: the shards'
// type when they know the name, else the file's tag. Empty: not a tensor.
std::vector<tensor::TensorType> ArrayTypes(const FeatureType& type, const std::string& path) {
  if (type.kind != Kind::kNone) return type.tensors;
  return XattrKind(path).tensors;
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
  explicit FolderReader(naming::FeatureTypes& types) : types_(types) {}

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
          if (h != Kind::kInt64 && h != Kind::kFloat) h = XattrKind(path).kind;
          auto parsed = naming::ParseNumeric(*content, h);
          if (!parsed.ok()) {
            return absl::InvalidArgumentError(absl::StrCat(erel, ": ", parsed.status().message()));
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
    auto [it, inserted] = features_.try_emplace(f.name, std::move(f), rel);
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat(rel, " and ", it->second.second, " both map to feature '", it->first, "'"));
    }
    return absl::OkStatus();
  }

  naming::FeatureTypes& types_;
  std::deque<std::string> storage_;                                  // owns bytes the features view
  std::map<std::string, std::pair<Feature, std::string>> features_;  // name -> (feature, file)
};

// The name of a step entry: its index (leading zeros allowed: steps are
// zero-padded), or nullopt when `name` (up to its first '.') is not all digits.
std::optional<uint64_t> StepIndex(absl::string_view name) {
  absl::string_view digits = name.substr(0, name.find('.'));
  if (digits.empty() || digits.size() > 18) return std::nullopt;
  uint64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

// feature_lists/ of a staged SequenceExample folder (naming.h): folders that
// hold steps (or nothing) are lists, other folders are '/' in list names.
class ListsReader {
 public:
  explicit ListsReader(naming::FeatureTypes& types) : types_(types) {}

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
          const Kind tag = XattrKind(path).kind;
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
    for (auto& [idx, step] : steps) {
      if (out[idx].kind != Kind::kInt64 || step.first->name.find('.') != std::string::npos)
        continue;
      auto parsed = naming::ParseNumeric(step.second, any_float ? Kind::kFloat : Kind::kInt64);
      if (!parsed.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(rel, step.first->name, ": ", parsed.status().message()));
      }
      out[idx] = std::move(*parsed);
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
  std::deque<std::string> storage_;
  std::map<std::string, example::FeatureList> lists_;
};

}  // namespace

absl::StatusOr<std::string> PayloadFromFolder(const std::string& path,
                                              naming::FeatureTypes& types) {
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
    FolderReader reader(types);
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
    ListsReader lists(types);
    std::vector<std::string> dirs;
    if (auto s = lists.Walk(absl::StrCat(path, "/", naming::kFeatureListsDir), "feature_lists/",
                            &dirs, /*top=*/true);
        !s.ok()) {
      return s;
    }
    return example::EncodeSequenceExample(lists.Take(std::move(context)));
  }
  FolderReader reader(types);
  std::vector<std::string> dirs;
  if (auto s = reader.Walk(path, "", &dirs); !s.ok()) return s;
  return reader.Encode();
}

namespace {
constexpr absl::string_view kTensorTagPrefix = "tensor:";

std::string ShapeText(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

std::string TypeText(const tensor::TensorType& t) {
  return absl::StrCat(tensor::InfoOf(t.dtype).name, " ", ShapeText(t.shape));
}
}  // namespace

std::string TensorTag(const tensor::TensorType& type) {
  return absl::StrCat(kTensorTagPrefix, tensor::InfoOf(type.dtype).name, ":",
                      absl::StrJoin(type.shape, ","));
}

FeatureType ParseKindTag(absl::string_view tag) {
  if (tag == "int64") return {Kind::kInt64, {}};
  if (tag == "float") return {Kind::kFloat, {}};
  if (!absl::ConsumePrefix(&tag, kTensorTagPrefix)) return {};
  const size_t colon = tag.find(':');
  if (colon == absl::string_view::npos) return {};
  const absl::string_view name = tag.substr(0, colon), dims = tag.substr(colon + 1);
  tensor::TensorType type;
  bool found = false;
  for (int64_t n = 0; n < 32 && !found; ++n) {
    const tensor::DTypeInfo* info = tensor::FindDType(n);
    if (info != nullptr && name == info->name) {
      type.dtype = info->dtype;
      found = true;
    }
  }
  if (!found) return {};
  if (!dims.empty()) {
    for (absl::string_view d : absl::StrSplit(dims, ',')) {
      int64_t v;
      if (!absl::SimpleAtoi(d, &v) || v < 0 || type.shape.size() >= tensor::kMaxRank) return {};
      type.shape.push_back(v);
    }
  }
  return {Kind::kBytes, {std::move(type)}};
}

namespace {

std::string FeatureText(absl::Span<const tensor::TensorType> feature_types) {
  std::string feature = "the feature holds ";
  for (size_t i = 0; i < feature_types.size(); ++i) {
    absl::StrAppend(&feature, i ? " or " : "", TypeText(feature_types[i]));
  }
  absl::StrAppend(&feature, " tensors");
  return feature;
}

absl::Status CheckPngPrefix(absl::string_view prefix,
                            absl::Span<const tensor::TensorType> feature_types) {
  auto header = tensor::ParsePngHeader(prefix);
  if (!header.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("not a PNG that can be read (",
                                                   header.status().message(), "); ",
                                                   FeatureText(feature_types)));
  }
  if (!header->has_value()) return absl::OkStatus();  // IHDR not all there yet
  const tensor::PngHeader& h = **header;
  for (const tensor::TensorType& want : feature_types) {
    if (tensor::PngHeaderMayFit(h, want)) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "a ", tensor::InfoOf(h.dtype()).name, " PNG of colour type ", h.color_type, " (",
      h.channels(), " channels) that fits none of the types: ", FeatureText(feature_types)));
}

}  // namespace

absl::Status CheckTensorFilePrefix(absl::string_view extension, absl::string_view prefix,
                                   absl::Span<const tensor::TensorType> feature_types,
                                   uint64_t* header_end) {
  *header_end = 0;
  if (feature_types.empty()) return absl::OkStatus();
  if (extension == naming::kPngExtension) {
    *header_end = tensor::kPngHeaderBytes;
    return CheckPngPrefix(prefix, feature_types);
  }
  if (extension != naming::kNpyExtension) return absl::OkStatus();
  auto header = tensor::ParseNpyHeader(prefix);
  if (!header.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("not a .npy file that can be read (",
                                                   header.status().message(), "); ",
                                                   FeatureText(feature_types)));
  }
  if (!header->has_value()) return absl::OkStatus();
  const tensor::NpyHeaderInfo& info = **header;
  *header_end = info.data_offset;
  bool dtype_known = false;
  for (const auto& w : feature_types) {
    if (w.dtype == info.dtype && w.shape.size() == info.shape.size()) return absl::OkStatus();
    dtype_known |= w.dtype == info.dtype;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "the array is ", TypeText({info.dtype, info.shape}), ", ", FeatureText(feature_types),
      dtype_known ? std::string(" (a different rank)")
                  : absl::StrCat(" (save it with .astype('",
                                 tensor::InfoOf(feature_types.front().dtype).descr, "'))")));
}

absl::Status CheckNumericPrefix(absl::string_view tail, example::Kind hint) {
  const absl::string_view v = absl::StripLeadingAsciiWhitespace(tail);
  if (v.empty()) return absl::OkStatus();
  auto parses = [&](absl::string_view line) {
    return ValidateNumeric(absl::StrCat(line, "\n"), hint).ok();
  };
  const absl::string_view stripped = absl::StripTrailingAsciiWhitespace(v);
  // Past trailing whitespace only more whitespace may follow on the line.
  if (stripped.size() != v.size() && parses(stripped)) return absl::OkStatus();
  if (stripped.size() == v.size()) {
    // Some endings that complete each unfinished form a number can take:
    // "-" "1." "1e" "1e-" "0x" "nan(0x".
    for (absl::string_view end :
         {"", "0", "1", "0e0", "e0", "p0", "0p0", "1)", "x1)", "0x1)", "(0x1)"}) {
      if (parses(absl::StrCat(v, end))) return absl::OkStatus();
    }
    if (hint != example::Kind::kInt64) {
      absl::string_view body = v;
      if (body[0] == '-' || body[0] == '+') body.remove_prefix(1);
      const std::string lower = absl::AsciiStrToLower(body);
      for (absl::string_view word : {"infinity", "nan"}) {
        if (absl::StartsWith(word, lower)) return absl::OkStatus();
      }
    }
  }
  auto full = ValidateNumeric(absl::StrCat(v, "\n"), hint);
  std::string why = full.ok() ? "trailing characters" : std::string(full.status().message());
  // The full check counts lines from this text: say it is the last one.
  if (absl::StartsWith(why, "line 1: ")) why = why.substr(8);
  return absl::InvalidArgumentError(
      absl::StrCat("the last line: ", why, " (and no more characters can make it a number)"));
}

namespace {

absl::StatusOr<TensorFile> ConvertTensorFile(absl::string_view extension, absl::string_view content,
                                             absl::Span<const tensor::TensorType> feature_types,
                                             bool check_only) {
  TensorFile out;
  const std::string feature = FeatureText(feature_types);
  absl::StatusOr<tensor::Tensor> t = absl::InvalidArgumentError("no array");
  size_t matched = 0;
  if (extension == naming::kPngExtension) {
    // The PNG's pixels go straight into the TensorProto (or, to check only,
    // through one row at a time): never decoded, fitted and encoded in turn.
    auto png = tensor::PngTypeOf(content);
    if (!png.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("not a PNG that can be read (", png.status().message(), "); ", feature));
    }
    // Types with the PNG's own channel count first: an RGBA image whose
    // alpha is opaque is an RGBA tensor when the feature has those, not an
    // RGB one with the alpha dropped.
    const int64_t channels = png->shape[2];
    auto exact = [&](const tensor::TensorType& w) {
      return w.shape.size() == 3 ? w.shape[2] == channels : channels == 1;
    };
    absl::Status why = absl::InvalidArgumentError("no type");
    bool fitted = false;
    for (int pass = 0; pass < 2 && !fitted; ++pass) {
      for (matched = 0; matched < feature_types.size(); ++matched) {
        const tensor::TensorType& want = feature_types[matched];
        if (exact(want) != (pass == 0)) continue;
        why = tensor::PngTypeFits(*png, want.dtype, want.shape);
        if (!why.ok()) continue;
        if (check_only) {
          why = tensor::CheckPngFitsFeature(content, want.dtype, want.shape);
        } else if (auto proto = tensor::PngToTensorProto(content, want.dtype, want.shape);
                   proto.ok()) {
          out.proto = std::move(*proto);
        } else {
          why = proto.status();
        }
        if (why.ok()) {
          fitted = true;
          break;
        }
        if (!absl::IsFailedPrecondition(why)) {  // libpng refuses the pixels
          return absl::InvalidArgumentError(
              absl::StrCat("not a PNG that can be read (", why.message(), "); ", feature));
        }
      }
    }
    if (!fitted) {
      if (feature_types.size() == 1) return absl::InvalidArgumentError(why.message());
      return absl::InvalidArgumentError(
          absl::StrCat("a ", tensor::InfoOf(png->dtype).name, " ", ShapeText(png->shape),
                       " PNG that fits none of the types: ", feature));
    }
    out.matched = feature_types[matched];
    return out;
  } else if (extension == naming::kNpyExtension) {
    t = tensor::ParseNpy(content);
    if (!t.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("not a .npy file that can be read (", t.status().message(), "); ", feature));
    }
    while (matched < feature_types.size() &&
           (t->dtype != feature_types[matched].dtype ||
            t->shape.size() != feature_types[matched].shape.size())) {
      ++matched;
    }
    if (matched == feature_types.size()) {
      bool dtype_known = false;
      for (const auto& w : feature_types) dtype_known |= w.dtype == t->dtype;
      return absl::InvalidArgumentError(absl::StrCat(
          "the array is ", TypeText({t->dtype, t->shape}), ", ", feature,
          dtype_known ? std::string(" (a different rank)")
                      : absl::StrCat(" (save it with .astype('",
                                     tensor::InfoOf(feature_types.front().dtype).descr, "'))")));
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat("'", extension, "' is not .png or .npy"));
  }
  // bool elements other than 0/1 pass as they are: shards hold them (the
  // read path shows them), and a copy must give back the same bytes.
  out.matched = feature_types[matched];
  if (check_only) return out;
  const absl::string_view data = t->data(content);
  auto proto = tensor::EncodeTensor(t->dtype, t->shape, data);
  if (!proto.ok()) return proto.status();
  out.proto = std::move(*proto);
  return out;
}

}  // namespace

absl::StatusOr<TensorFile> TensorFromFile(absl::string_view extension, absl::string_view content,
                                          absl::Span<const tensor::TensorType> feature_types) {
  return ConvertTensorFile(extension, content, feature_types, /*check_only=*/false);
}

absl::StatusOr<tensor::TensorType> CheckTensorFile(
    absl::string_view extension, absl::string_view content,
    absl::Span<const tensor::TensorType> feature_types) {
  auto file = ConvertTensorFile(extension, content, feature_types, /*check_only=*/true);
  if (!file.ok()) return file.status();
  return file->matched;
}

StagedFile ClassifyStagedFile(absl::string_view rel, bool sequence) {
  std::vector<std::string> parts = absl::StrSplit(rel, '/');
  if (parts.size() < 2 || naming::IsIgnoredName(parts.back())) return {};
  // The path inside the record folder.
  std::vector<std::string> comps(parts.begin() + 1, parts.end());
  StagedFile out;
  if (comps.size() >= 2 && comps[0] == naming::kFeatureListsDir) {
    // feature_lists/<list path>/<step>[/<item>]: list folders never look
    // like steps (their all-digit components are escaped), so the first
    // step-like component is the step.
    size_t j = 1;
    while (j < comps.size() && !StepIndex(comps[j])) ++j;
    if (j == 1 || j >= comps.size() || j + 2 < comps.size()) return {};
    std::vector<std::string> dirs(comps.begin() + 1, comps.begin() + static_cast<ptrdiff_t>(j) - 1);
    out.feature = absl::StrCat(naming::kFeatureListsDir, "/",
                               naming::FeatureNameFromPath(dirs, comps[j - 1]));
    const std::string& file = comps.back();
    const absl::string_view ext = ItemExtension(file);
    if (j + 1 == comps.size() && ext.empty()) {
      out.role = StagedFile::Role::kNumeric;
    } else if (IsArrayExtension(ext) && (j + 1 == comps.size() || naming::ListItemIndex(file))) {
      out.role = StagedFile::Role::kArray;
      out.extension = std::string(ext);
    } else {
      return {};
    }
    return out;
  }
  if (sequence && comps[0] == naming::kContextDir) comps.erase(comps.begin());
  if (comps.empty()) return {};
  const std::string file = comps.back();
  comps.pop_back();  // the folders leading to the file
  if (!comps.empty() && !naming::IsContinuation(comps.back()) && naming::ListItemIndex(file)) {
    // An item of a bytes list: the folder is the feature.
    const absl::string_view ext = ItemExtension(file);
    if (!IsArrayExtension(ext)) return {};
    const std::string list = comps.back();
    comps.pop_back();
    out.role = StagedFile::Role::kArray;
    out.feature = naming::FeatureNameFromPath(comps, list);
    out.extension = std::string(ext);
    return out;
  }
  const naming::LeafName leaf = naming::ParseLeafName(file);
  const absl::string_view ext = absl::string_view(file).substr(leaf.stem_escaped.size());
  if (leaf.role == naming::FileRole::kNumeric) {
    out.role = StagedFile::Role::kNumeric;
  } else if (leaf.role == naming::FileRole::kSingleBytes && IsArrayExtension(ext)) {
    out.role = StagedFile::Role::kArray;
    out.extension = std::string(ext);
  } else {
    return {};
  }
  out.feature = naming::FeatureNameFromPath(comps, leaf.stem_escaped);
  return out;
}

absl::StatusOr<Kind> ValidateNumeric(absl::string_view content, Kind hint) {
  auto f = naming::ParseNumeric(content, hint);
  if (!f.ok()) return f.status();
  return f->kind;
}

}  // namespace tfrecordfs::staging
