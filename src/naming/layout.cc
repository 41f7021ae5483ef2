// Names (escaping) and the forward/reverse tree layout.
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tfrecordfs/base/utf8.h"
#include "tfrecordfs/naming/naming.h"

namespace tfrecordfs::naming {

using example::Feature;
using example::FeatureTable;
using example::Kind;

namespace {

constexpr char kHex[] = "0123456789ABCDEF";

void AppendEscaped(std::string* out, unsigned char c) {
  out->push_back('%');
  out->push_back(kHex[c >> 4]);
  out->push_back(kHex[c & 15]);
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool AllDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Cuts an escaped name into chunks of at most kChunkBytes without splitting
// an escape or a UTF-8 sequence.
std::vector<std::string> Chunk(absl::string_view s) {
  std::vector<std::string> chunks;
  while (s.size() > kChunkBytes) {
    size_t cut = kChunkBytes;
    // Do not split "%XX": back up if a '%' sits in the last two bytes.
    if (s[cut - 1] == '%') cut -= 1;
    else if (s[cut - 2] == '%') cut -= 2;
    // Do not split a UTF-8 sequence (continuation bytes are 10xxxxxx).
    while (cut > 1 && (static_cast<unsigned char>(s[cut]) & 0xc0) == 0x80) --cut;
    chunks.emplace_back(s.substr(0, cut));
    s.remove_prefix(cut);
  }
  chunks.emplace_back(s);
  // A chunk starting with '.' would be a hidden name.
  for (size_t k = 1; k < chunks.size(); ++k) {
    if (!chunks[k].empty() && chunks[k][0] == '.') chunks[k].replace(0, 1, "%2E");
  }
  return chunks;
}

// One feature's place in the tree before flattening.
struct Node {
  bool is_dir = false;
  std::map<std::string, Node> children;  // sorted by escaped name
  // Files:
  bool is_inline = true;
  std::string content;
  uint64_t span_offset = 0, span_length = 0;
};

Node* MakeDirs(Node* root, const std::vector<std::string>& dirs) {
  Node* cur = root;
  for (const std::string& d : dirs) {
    Node& child = cur->children[d];
    child.is_dir = true;
    cur = &child;
  }
  return cur;
}

struct Placement {
  std::vector<std::string> dirs;  // escaped directory components
  std::string leaf;               // escaped leaf name, extension included
};

// Splits a feature name into escaped directory components and a leaf.
Placement Place(absl::string_view name, bool numeric, bool is_file, absl::string_view ext) {
  std::vector<absl::string_view> raw = absl::StrSplit(name, '/');
  const bool has_empty =
      std::any_of(raw.begin(), raw.end(), [](absl::string_view c) { return c.empty(); });
  std::vector<std::string> escaped;
  if (has_empty) {
    // "/a", "a/", "a//b", "": keep as one component with '/' escaped.
    escaped.push_back(EscapeComponent(name, numeric, is_file));
  } else {
    for (size_t i = 0; i < raw.size(); ++i) {
      const bool leaf = i + 1 == raw.size();
      escaped.push_back(EscapeComponent(raw[i], leaf && numeric, leaf && is_file));
    }
  }
  Placement p;
  for (size_t i = 0; i < escaped.size(); ++i) {
    const bool leaf = i + 1 == escaped.size();
    // A leaf keeps room for the `%-` prefix a collision may add.
    const size_t limit = leaf ? kMaxNameBytes - 2 - ext.size() : kMaxNameBytes;
    std::vector<std::string> chunks =
        escaped[i].size() > limit ? Chunk(escaped[i]) : std::vector<std::string>{escaped[i]};
    for (size_t k = 0; k + 1 < chunks.size(); ++k) p.dirs.push_back(chunks[k] + "%+");
    if (leaf) {
      p.leaf = chunks.back() + std::string(ext);
    } else {
      p.dirs.push_back(chunks.back());
    }
  }
  return p;
}

void Flatten(const Node& node, uint32_t self, Layout* out) {
  Entry& e = out->entries[self];
  e.first_child = static_cast<uint32_t>(out->entries.size());
  e.num_children = static_cast<uint32_t>(node.children.size());
  for (const auto& [name, child] : node.children) {
    Entry c;
    c.name = name;
    c.parent = self;
    c.is_dir = child.is_dir;
    c.is_inline = child.is_inline;
    c.content = child.content;
    c.span_offset = child.span_offset;
    c.span_length = child.span_length;
    out->entries.push_back(std::move(c));
  }
  uint32_t i = out->entries[self].first_child;
  for (const auto& [name, child] : node.children) {
    if (child.is_dir) Flatten(child, i, out);
    ++i;
  }
}

}  // namespace

std::string EscapeComponent(absl::string_view raw, bool numeric_leaf, bool file_leaf) {
  // The feature named "" (or an empty component) decodes from `%-`.
  if (raw.empty()) return "%-";
  std::string out;
  out.reserve(raw.size());
  // A file named like a list item (`0`, `12.jpg`, `3.a.txt`) would make its
  // directory pass for a bytes list: look at the name up to its first '.'
  // (a numeric leaf has every '.' escaped, so all of it).
  const bool escape_first_digit =
      file_leaf && AllDigits(numeric_leaf ? raw : raw.substr(0, raw.find('.')));
  for (size_t i = 0; i < raw.size();) {
    const auto c = static_cast<unsigned char>(raw[i]);
    if (c >= 0x80) {
      const size_t len = Utf8SequenceLength(raw, i);
      if (len == 0) {
        AppendEscaped(&out, c);
        ++i;
      } else {
        out.append(raw.data() + i, len);
        i += len;
      }
      continue;
    }
    const bool special = c < 0x20 || c == 0x7f || c == '%' || c == '/' ||
                         (c == '.' && (i == 0 || numeric_leaf)) ||
                         (c == '~' && i + 1 == raw.size()) ||  // backups are skipped
                         (i == 0 && escape_first_digit);
    if (special) {
      AppendEscaped(&out, c);
    } else {
      out.push_back(static_cast<char>(c));
    }
    ++i;
  }
  return out;
}

std::string Unescape(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 1 < s.size() && s[i + 1] == '-') {
      ++i;
      continue;
    }
    if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 &&
        HexValue(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2])));
      i += 2;
      continue;
    }
    out.push_back(s[i]);
  }
  return out;
}

Layout LayoutExample(const FeatureTable& table, absl::string_view payload) {
  struct Leaf {
    Placement where;
    Node node;
  };
  std::vector<Leaf> leaves;
  for (const Feature& f : table.features) {
    if (f.kind == Kind::kNone) continue;
    Leaf leaf;
    Node& n = leaf.node;
    if (f.kind == Kind::kInt64 || f.kind == Kind::kFloat) {
      n.content = f.kind == Kind::kInt64 ? FormatInt64s(f.int64s) : FormatFloats(f.floats);
      leaf.where = Place(f.name, /*numeric=*/true, /*is_file=*/true, "");
    } else if (std::all_of(f.bytes.begin(), f.bytes.end(), IsSingleLineText)) {
      n.content = FormatText(f.bytes);
      leaf.where = Place(f.name, false, true, kTextExtension);
    } else if (f.bytes.size() == 1) {
      n.is_inline = false;
      n.span_offset = static_cast<uint64_t>(f.bytes[0].data() - payload.data());
      n.span_length = f.bytes[0].size();
      leaf.where = Place(f.name, false, true, SniffExtension(f.bytes[0]));
    } else {
      n.is_dir = true;
      for (size_t i = 0; i < f.bytes.size(); ++i) {
        absl::string_view v = f.bytes[i];
        Node item;
        item.is_inline = false;
        item.span_offset = static_cast<uint64_t>(v.data() - payload.data());
        item.span_length = v.size();
        absl::string_view ext = SniffExtension(v);
        if (ext == ".bin" && IsValidUtf8(v)) ext = kTextExtension;  // exact bytes either way
        n.children.emplace(absl::StrCat(i, ext), std::move(item));
      }
      leaf.where = Place(f.name, false, false, "");
    }
    leaves.push_back(std::move(leaf));
  }
  // Directories first, so that a leaf meeting a directory of the same name is
  // the one that gets the `%-` prefix whatever the feature order.
  Node root;
  root.is_dir = true;
  for (const Leaf& l : leaves) MakeDirs(&root, l.where.dirs);
  for (Leaf& l : leaves) {
    Node* dir = MakeDirs(&root, l.where.dirs);
    std::string name = l.where.leaf;
    // `%-` (decodes to nothing) keeps the file apart from a directory of the
    // same name, and keeps a root feature from posing as a raw record.
    if (dir->children.count(name) || (dir == &root && name == kRawRecordName)) {
      name = "%-" + name;
    }
    dir->children.emplace(std::move(name), std::move(l.node));
  }
  Layout layout;
  layout.entries.emplace_back();
  layout.entries[0].is_dir = true;
  Flatten(root, 0, &layout);
  return layout;
}

Layout LayoutRaw(uint64_t payload_size) {
  Layout layout;
  layout.entries.resize(2);
  layout.entries[0].is_dir = true;
  layout.entries[0].first_child = 1;
  layout.entries[0].num_children = 1;
  Entry& e = layout.entries[1];
  e.name = std::string(kRawRecordName);
  e.is_inline = false;
  e.span_length = payload_size;
  return layout;
}

std::optional<uint32_t> FindChild(const Layout& layout, uint32_t dir, absl::string_view name) {
  const Entry& d = layout.entries[dir];
  if (!d.is_dir) return std::nullopt;
  auto begin = layout.entries.begin() + d.first_child;
  auto end = begin + d.num_children;
  auto it = std::lower_bound(begin, end, name,
                             [](const Entry& e, absl::string_view n) { return e.name < n; });
  if (it == end || it->name != name) return std::nullopt;
  return static_cast<uint32_t>(it - layout.entries.begin());
}

// ---- Reverse ----

bool IsIgnoredName(absl::string_view name) {
  return name.empty() || name[0] == '.' || name.back() == '~';
}

LeafName ParseLeafName(absl::string_view file_name) {
  const size_t dot = file_name.rfind('.');
  if (dot == absl::string_view::npos || dot == 0) return {std::string(file_name), FileRole::kNumeric};
  absl::string_view ext = file_name.substr(dot);
  return {std::string(file_name.substr(0, dot)),
          ext == kTextExtension ? FileRole::kText : FileRole::kSingleBytes};
}

bool IsContinuation(absl::string_view dir_name) {
  return dir_name.size() >= 2 && dir_name.substr(dir_name.size() - 2) == "%+";
}

std::optional<uint64_t> ListItemIndex(absl::string_view file_name) {
  const size_t dot = file_name.find('.');
  absl::string_view digits = file_name.substr(0, dot);
  if (!AllDigits(digits) || (digits.size() > 1 && digits[0] == '0') || digits.size() > 18) {
    return std::nullopt;
  }
  uint64_t v = 0;
  for (char c : digits) v = v * 10 + static_cast<uint64_t>(c - '0');
  return v;
}

bool IsListDirectory(std::span<const std::pair<std::string, bool>> entries) {
  if (entries.empty()) return false;
  std::vector<bool> seen(entries.size(), false);
  for (const auto& [name, is_file] : entries) {
    if (!is_file) return false;
    auto idx = ListItemIndex(name);
    if (!idx || *idx >= entries.size() || seen[*idx]) return false;
    seen[*idx] = true;
  }
  return true;
}

std::string FeatureNameFromPath(std::span<const std::string> escaped_dirs,
                                absl::string_view leaf_stem_escaped) {
  std::string name;
  for (const std::string& d : escaped_dirs) {
    if (IsContinuation(d)) {
      name += Unescape(absl::string_view(d).substr(0, d.size() - 2));
    } else {
      name += Unescape(d);
      name += '/';
    }
  }
  name += Unescape(leaf_stem_escaped);
  return name;
}

}  // namespace tfrecordfs::naming
