// Names (escaping) and the forward/reverse tree layout.
#include <algorithm>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tfrecordfs/base/utf8.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/tensor/npy.h"
#include "tfrecordfs/tensor/png.h"
#include "tfrecordfs/tensor/tensor.h"

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
    if (s[cut - 1] == '%')
      cut -= 1;
    else if (s[cut - 2] == '%')
      cut -= 2;
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
  // Files (see Entry):
  ContentForm form = ContentForm::kInline;
  EntryRole role = EntryRole::kFolder;
  uint8_t dtype = 0;
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
// `steps_beside` (feature list names) escapes the first digit of every
// all-digit component, not only the leaf's: a list's folder holds its steps,
// whose names are all digits. `reserved_top` (an Example's features)
// escapes a first component `feature_lists`, which would make the record
// folder pack as a SequenceExample.
Placement Place(absl::string_view name, bool numeric, bool is_file, absl::string_view ext,
                bool steps_beside = false, bool reserved_top = false) {
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
      escaped.push_back(
          EscapeComponent(raw[i], leaf && numeric, (leaf && is_file) || steps_beside));
    }
  }
  if (reserved_top && escaped[0] == kFeatureListsDir) escaped[0].replace(0, 1, "%66");
  if (reserved_top && escaped[0] == kExamplesDir) escaped[0].replace(0, 1, "%65");
  if (reserved_top && escaped.size() > 1 &&
      (escaped[0] == kEieContextDir || escaped[0] == kEieExamplesDir)) {
    escaped[0].replace(0, 1, "%73");
  }
  Placement p;
  for (size_t i = 0; i < escaped.size(); ++i) {
    const bool leaf = i + 1 == escaped.size();
    // A leaf keeps room for the two `%-` prefixes clashes may add
    // (AddFeatures).
    const size_t limit = leaf ? kMaxNameBytes - 4 - ext.size() : kMaxNameBytes;
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
    c.form = child.form;
    c.role = child.role;
    c.dtype = child.dtype;
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
    if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2])));
      i += 2;
      continue;
    }
    out.push_back(s[i]);
  }
  return out;
}

namespace {

// A bytes value that is not single-line text: a tensor's view (`.png`,
// `.npy`) or its exact bytes with a sniffed extension.
Node BytesValueNode(absl::string_view v, absl::string_view payload, std::string* ext) {
  Node n;
  n.role = EntryRole::kBytes;
  const uint64_t at = static_cast<uint64_t>(v.data() - payload.data());
  auto as_bytes = [&] {
    n = Node();
    n.role = EntryRole::kBytes;
    *ext = std::string(SniffExtension(v));
    n.form = ContentForm::kSpan;
    n.span_offset = at;
    n.span_length = v.size();
    return n;
  };
  // Lazily: a broadcast stays one element (ContentForm::kInlineFill).
  auto t = tensor::DecodeTensorLazily(v);
  if (!t.ok()) return as_bytes();
  n.role = EntryRole::kTensor;
  n.dtype = static_cast<uint8_t>(t->dtype);
  if (auto g = tensor::PngGeometryOf(t->dtype, t->shape); g.ok()) {
    *ext = std::string(kPngExtension);
    if (t->data_in_input) {
      n.form = ContentForm::kPng;
      n.content = PackPng(*g);
      n.span_offset = at + t->data_offset;
      n.span_length = t->data_size;
      return n;
    }
    if (t->broadcast) {
      n.form = ContentForm::kPngFill;
      n.content = PackPng(*g) + t->materialized;
      return n;
    }
    // *_val forms listing every value (not what serialize_tensor writes): the
    // pixels are not in the shard as such, so the PNG is made now, held
    // inline (at most 8 bytes of pixels per byte of record: a value takes a
    // byte of varint at least).
    auto png = tensor::EncodePng(*g, t->materialized);
    if (!png.ok()) return as_bytes();
    n.content = std::move(*png);
    return n;
  }
  // numpy could not load the .npy (too many dims, or dims beside a 0 that
  // multiply past 2^63): the value keeps its bytes.
  if (!tensor::NpyLoadable(t->dtype, t->shape).ok()) return as_bytes();
  *ext = std::string(kNpyExtension);
  n.content = tensor::NpyHeader(*t);
  if (t->data_in_input && t->data_size > 0) {
    n.form = ContentForm::kInlineSpan;
    n.span_offset = at + t->data_offset;
    n.span_length = t->data_size;
  } else if (t->broadcast) {
    n.form = ContentForm::kInlineFill;
    n.content += t->materialized;
    n.span_length = static_cast<uint64_t>(tensor::NumBytes(t->dtype, t->shape).value_or(0));
  } else {
    n.content.append(t->data(v).data(), t->data(v).size());
  }
  return n;
}

// A directory of `0<ext>`, `1<ext>`, ... for a bytes list of several values.
Node ListDirNode(const std::vector<absl::string_view>& values, absl::string_view payload) {
  Node n;
  n.is_dir = true;
  n.role = EntryRole::kBytesList;
  for (size_t i = 0; i < values.size(); ++i) {
    absl::string_view v = values[i];
    std::string ext;
    Node item = BytesValueNode(v, payload, &ext);
    if (ext == ".bin" && IsValidUtf8(v))
      ext = std::string(kTextExtension);  // exact bytes either way
    n.children.emplace(absl::StrCat(i, ext), std::move(item));
  }
  return n;
}

// Places an Example's (or a context's) features under `root`.
void AddFeatures(Node* root, const std::vector<Feature>& features, absl::string_view payload,
                 bool reserved_top) {
  struct Leaf {
    absl::string_view feature;
    Placement where;
    Node node;
  };
  std::vector<Leaf> leaves;
  for (const Feature& f : features) {
    Leaf leaf;
    leaf.feature = f.name;
    Node& n = leaf.node;
    if (f.kind == Kind::kNone) {
      // An empty file: a copy of the folder keeps the key (and its kind).
      n.role = EntryRole::kKindless;
      leaf.where = Place(f.name, false, true, kKindlessExtension, false, reserved_top);
    } else if (f.kind == Kind::kInt64 || f.kind == Kind::kFloat) {
      n.content = f.kind == Kind::kInt64 ? FormatInt64s(f.int64s) : FormatFloats(f.floats);
      n.role = f.kind == Kind::kInt64 ? EntryRole::kInt64 : EntryRole::kFloat;
      leaf.where = Place(f.name, /*numeric=*/true, /*is_file=*/true, "", false, reserved_top);
    } else if (std::all_of(f.bytes.begin(), f.bytes.end(), IsSingleLineText)) {
      n.content = FormatText(f.bytes);
      n.role = EntryRole::kText;
      leaf.where = Place(f.name, false, true, kTextExtension, false, reserved_top);
    } else if (f.bytes.size() == 1) {
      std::string ext;
      n = BytesValueNode(f.bytes[0], payload, &ext);
      leaf.where = Place(f.name, false, true, ext, false, reserved_top);
    } else {
      n = ListDirNode(f.bytes, payload);
      leaf.where = Place(f.name, false, false, "", false, reserved_top);
    }
    leaves.push_back(std::move(leaf));
  }
  // Plain directories first, so that a leaf meeting a directory of the same
  // name is the one that gets the `%-` prefix whatever the feature order;
  // then bytes-list folders before files, each in feature-name order, so that
  // which of two clashing leaves gets the second `%-` does not depend on the
  // order of the features in the record either.
  for (const Leaf& l : leaves) MakeDirs(root, l.where.dirs);
  std::stable_sort(leaves.begin(), leaves.end(), [](const Leaf& a, const Leaf& b) {
    if (a.node.is_dir != b.node.is_dir) return a.node.is_dir;
    return a.feature < b.feature;
  });
  for (Leaf& l : leaves) {
    Node* dir = MakeDirs(root, l.where.dirs);
    std::string name = l.where.leaf;
    // `%-` (decodes to nothing) keeps the file apart from a directory of the
    // same name, and keeps a root file from posing as a raw record. Only a
    // file can pose as one (a raw record is one regular file): a list folder
    // named record.bin keeps its name unless a folder already has it.
    const bool poses_as_raw =
        dir == root && reserved_top && !l.node.is_dir && name == kRawRecordName;
    if (poses_as_raw) name = "%-" + name;
    // Three leaves can want one name: a folder a longer name makes
    // (`record.bin/x`), a bytes list (`record.bin`) and a file whose stem
    // and extension spell it (`record` + `.bin`). Each clash adds one more
    // `%-`; Place keeps room for two, and no name can need a third (the
    // folder, the list and the file are the only three spellings).
    while (dir->children.count(name)) name = "%-" + name;
    dir->children.emplace(std::move(name), std::move(l.node));
  }
}

int Digits(size_t n) {
  int d = 1;
  for (; n >= 10; n /= 10) ++d;
  return d;
}

Layout FlattenRoot(const Node& root) {
  Layout layout;
  layout.entries.emplace_back();
  layout.entries[0].is_dir = true;
  Flatten(root, 0, &layout);
  return layout;
}

}  // namespace

std::string StepName(size_t index, size_t num_steps) {
  std::string digits = absl::StrCat(index);
  const size_t width = static_cast<size_t>(Digits(num_steps == 0 ? 0 : num_steps - 1));
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

Layout LayoutExample(const FeatureTable& table, absl::string_view payload) {
  Node root;
  root.is_dir = true;
  AddFeatures(&root, table.features, payload, /*reserved_top=*/true);
  return FlattenRoot(root);
}

Layout LayoutSequence(const example::SequenceTable& table, absl::string_view payload) {
  Node root;
  root.is_dir = true;
  if (!table.context.features.empty()) {
    Node& context = root.children[std::string(kContextDir)];
    context.is_dir = true;
    AddFeatures(&context, table.context.features, payload, /*reserved_top=*/false);
  }
  Node& lists = root.children[std::string(kFeatureListsDir)];
  lists.is_dir = true;
  // Non-empty lists first: an empty list's folder that another list's path
  // already made is spelt `<name>%-` (see naming.h).
  std::vector<const example::FeatureList*> empty;
  for (const example::FeatureList& list : table.lists) {
    if (list.steps.empty()) {
      empty.push_back(&list);
      continue;
    }
    Placement where = Place(list.name, false, true, "", /*steps_beside=*/true);
    where.dirs.push_back(std::move(where.leaf));
    Node* dir = MakeDirs(&lists, where.dirs);
    dir->role = EntryRole::kFeatureList;
    const size_t n = list.steps.size();
    for (size_t i = 0; i < n; ++i) {
      const Feature& step = list.steps[i];
      const std::string stem = StepName(i, n);
      Node node;
      std::string name;
      if (step.kind == Kind::kNone) {
        node.role = EntryRole::kKindless;
        name = absl::StrCat(stem, kKindlessExtension);
      } else if (step.kind == Kind::kInt64 || step.kind == Kind::kFloat) {
        node.content =
            step.kind == Kind::kInt64 ? FormatInt64s(step.int64s) : FormatFloats(step.floats);
        node.role = step.kind == Kind::kInt64 ? EntryRole::kInt64 : EntryRole::kFloat;
        name = stem;
      } else if (std::all_of(step.bytes.begin(), step.bytes.end(), IsSingleLineText)) {
        node.content = FormatText(step.bytes);
        node.role = EntryRole::kText;
        name = absl::StrCat(stem, kTextExtension);
      } else if (step.bytes.size() == 1) {
        std::string ext;
        node = BytesValueNode(step.bytes[0], payload, &ext);
        name = absl::StrCat(stem, ext);
      } else {
        node = ListDirNode(step.bytes, payload);
        name = stem;
      }
      dir->children.emplace(std::move(name), std::move(node));
    }
  }
  // Every folder the empty lists' paths make, before any empty list takes
  // its own: of empty lists `a` and `a/b`, `a` must see the folder `a/b`
  // makes whatever their order.
  std::vector<Placement> empty_at;
  for (const example::FeatureList* list : empty) {
    empty_at.push_back(Place(list->name, false, true, "", /*steps_beside=*/true));
    MakeDirs(&lists, empty_at.back().dirs);
  }
  for (Placement& where : empty_at) {
    Node* parent = MakeDirs(&lists, where.dirs);
    std::string name = std::move(where.leaf);
    // (One `%-` always suffices: no other folder's name ends in `%-`.)
    while (parent->children.count(name)) name += "%-";
    Node& folder = parent->children[name];
    folder.is_dir = true;
    folder.role = EntryRole::kFeatureList;
  }
  return FlattenRoot(root);
}

std::string ExampleFolderName(size_t index, size_t num_examples) {
  std::string digits = absl::StrCat(index);
  const size_t width =
      std::max<size_t>(3, static_cast<size_t>(Digits(num_examples == 0 ? 0 : num_examples - 1)));
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

Layout LayoutExampleList(const example::ExampleListTable& table, absl::string_view payload,
                         bool example_in_example) {
  Node root;
  root.is_dir = true;
  if (table.has_context) {
    Node& context = root.children[std::string(example_in_example ? kEieContextDir : kContextDir)];
    context.is_dir = true;
    AddFeatures(&context, table.context.features, payload, /*reserved_top=*/false);
  }
  Node& examples = root.children[std::string(example_in_example ? kEieExamplesDir : kExamplesDir)];
  examples.is_dir = true;
  const size_t n = table.examples.size();
  for (size_t i = 0; i < n; ++i) {
    Node& folder = examples.children[ExampleFolderName(i, n)];
    folder.is_dir = true;
    AddFeatures(&folder, table.examples[i].features, payload, /*reserved_top=*/false);
  }
  return FlattenRoot(root);
}

Layout LayoutRaw(uint64_t payload_size) {
  Layout layout;
  layout.entries.resize(2);
  layout.entries[0].is_dir = true;
  layout.entries[0].first_child = 1;
  layout.entries[0].num_children = 1;
  Entry& e = layout.entries[1];
  e.name = std::string(kRawRecordName);
  e.form = ContentForm::kSpan;
  e.role = EntryRole::kRaw;
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

// ---- Which feature an entry shows ----

namespace {

bool StartsWithDigit(absl::string_view s) { return !s.empty() && s[0] >= '0' && s[0] <= '9'; }

// The leading digits of a step or list value name ("07.jpg" -> 7).
std::optional<uint64_t> LeadingNumber(absl::string_view name) {
  uint64_t v = 0;
  size_t i = 0;
  for (; i < name.size() && i < 19 && StartsWithDigit(name.substr(i)); ++i) {
    v = v * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  if (i == 0) return std::nullopt;
  return v;
}

// The file name without the extension the layout added: numeric files and
// folders have none (every '.' of a numeric leaf is escaped), the others
// exactly one ('.' inside a stem stays, so the last one is the extension's).
absl::string_view Stem(const Entry& e) {
  if (e.is_dir || e.role == EntryRole::kInt64 || e.role == EntryRole::kFloat) return e.name;
  const size_t dot = e.name.rfind('.');
  return dot == std::string::npos || dot == 0 ? absl::string_view(e.name)
                                              : absl::string_view(e.name).substr(0, dot);
}

}  // namespace

std::optional<FeatureInfo> FeatureOf(const Layout& layout, uint32_t entry) {
  if (entry == 0 || entry >= layout.entries.size()) return std::nullopt;
  // The path from the record folder down to `entry`.
  std::vector<uint32_t> chain;
  for (uint32_t i = entry; i != 0; i = layout.entries[i].parent) {
    if (chain.size() > layout.entries.size()) return std::nullopt;  // not a tree
    chain.push_back(i);
  }
  std::reverse(chain.begin(), chain.end());
  auto name_of = [&](size_t k) -> const Entry& { return layout.entries[chain[k]]; };
  // An Example spells a feature `feature_lists` as `%66eature_lists`: a top
  // folder of that exact name means a SequenceExample.
  const bool sequence = FindChild(layout, 0, kFeatureListsDir).has_value();
  // Likewise `examples` (`%65xamples` in an Example): an ELWC; and a
  // `serialized_examples` folder of folders: an Example-in-Example.
  const bool elwc = !sequence && FindChild(layout, 0, kExamplesDir).has_value();
  const std::optional<uint32_t> eie_examples = FindChild(layout, 0, kEieExamplesDir);
  const bool eie = !sequence && !elwc && eie_examples && layout.entries[*eie_examples].is_dir &&
                   layout.entries[*eie_examples].role == EntryRole::kFolder;
  const bool example_list = elwc || eie;
  const absl::string_view context_dir = eie ? kEieContextDir : kContextDir;
  const absl::string_view examples_dir = eie ? kEieExamplesDir : kExamplesDir;
  FeatureInfo info;
  info.role = layout.entries[entry].role;
  info.dtype = layout.entries[entry].dtype;
  size_t first = 0;  // the first component of the feature's path
  if (example_list) {
    if (name_of(0).name == context_dir) {
      info.context = true;
      first = 1;
    } else if (name_of(0).name == examples_dir && chain.size() > 2) {
      info.example = LeadingNumber(name_of(1).name);
      first = 2;
    } else {
      return std::nullopt;  // examples/, examples/<i>/ themselves
    }
  } else if (sequence) {
    if (name_of(0).name == kContextDir) {
      info.context = true;
    } else if (name_of(0).name == kFeatureListsDir) {
      info.feature_list = true;
    } else {
      return std::nullopt;
    }
    first = 1;
  }
  // The feature's own entry: its file or bytes-list folder (the first entry
  // that is not a plain folder), or a list's folder (the deepest one: list
  // `a` may hold list `a/b` beside its steps).
  size_t k = chain.size();
  if (info.feature_list) {
    for (size_t i = first; i < chain.size(); ++i) {
      if (name_of(i).role == EntryRole::kFeatureList) k = i;
    }
  } else {
    k = first;
    while (k < chain.size() && name_of(k).role == EntryRole::kFolder) ++k;
  }
  if (k >= chain.size() || name_of(k).role == EntryRole::kRaw) return std::nullopt;
  std::vector<std::string> dirs;
  for (size_t d = first; d < k; ++d) dirs.push_back(name_of(d).name);
  info.name = FeatureNameFromPath(dirs, Stem(name_of(k)));
  // Below it: a step (feature lists), then a value (a step of several bytes).
  size_t below = k + 1;
  if (info.feature_list && below < chain.size()) {
    info.step = LeadingNumber(name_of(below).name);
    ++below;
  }
  if (below < chain.size()) info.value = LeadingNumber(name_of(below).name);
  return info;
}

std::string RoleName(EntryRole role, uint8_t dtype) {
  switch (role) {
    case EntryRole::kFolder:
      return "";
    case EntryRole::kInt64:
      return "int64";
    case EntryRole::kFloat:
      return "float";
    case EntryRole::kText:
      return "text";
    case EntryRole::kBytes:
      return "bytes";
    case EntryRole::kTensor: {
      const tensor::DTypeInfo* d = tensor::FindDType(dtype);
      return absl::StrCat("tensor ", d ? d->name : "?");
    }
    case EntryRole::kBytesList:
      return "bytes list";
    case EntryRole::kFeatureList:
      return "feature list";
    case EntryRole::kKindless:
      return "none";
    case EntryRole::kRaw:
      return "raw";
  }
  return "";
}

// ---- Content ----

std::string PackPng(const tensor::PngGeometry& g) {
  std::string out(11, '\0');
  for (int i = 0; i < 4; ++i) {
    out[i] = static_cast<char>(g.height >> (8 * i));
    out[4 + i] = static_cast<char>(g.width >> (8 * i));
  }
  out[8] = static_cast<char>(g.channels);
  out[9] = static_cast<char>(g.depth);
  out[10] = g.rank2 ? 1 : 0;
  return out;
}

tensor::PngGeometry UnpackPng(absl::string_view p) {
  tensor::PngGeometry g;
  if (p.size() != 11) return g;
  auto u = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(p[i])); };
  for (int i = 0; i < 4; ++i) {
    g.height |= u(i) << (8 * i);
    g.width |= u(4 + i) << (8 * i);
  }
  g.channels = u(8);
  g.depth = u(9);
  g.rank2 = p[10] != 0;
  return g;
}

namespace {

// The one element a kInlineFill / kPngFill entry repeats (see ContentForm).
size_t FillElementSize(const Entry& e) {
  const tensor::DTypeInfo* d = tensor::FindDType(e.dtype);
  const size_t k = d != nullptr ? d->itemsize : 1;
  return std::min(k, e.content.size());
}

constexpr size_t kPackedPngBytes = 11;

}  // namespace

void FillRange(absl::string_view pattern, uint64_t offset, char* out, size_t n) {
  const size_t k = pattern.size();
  if (k == 1) {
    std::memset(out, pattern[0], n);
    return;
  }
  size_t at = static_cast<size_t>(offset % k);
  for (size_t i = 0; i < n; ++i) {
    out[i] = pattern[at];
    if (++at == k) at = 0;
  }
}

uint64_t Entry::size() const {
  switch (form) {
    case ContentForm::kInline:
      return content.size();
    case ContentForm::kSpan:
      return span_length;
    case ContentForm::kInlineSpan:
      return content.size() + span_length;
    case ContentForm::kPng:
      return tensor::PngSize(UnpackPng(content));
    case ContentForm::kInlineFill:
      return content.size() - FillElementSize(*this) + span_length;
    case ContentForm::kPngFill:
      return tensor::PngSize(UnpackPng(absl::string_view(content).substr(0, kPackedPngBytes)));
  }
  return 0;
}

std::vector<Piece> Entry::Pieces() const {
  std::vector<Piece> out;
  if (is_dir) return out;
  auto add_inline = [&](absl::string_view bytes) {
    if (bytes.empty()) return;
    Piece p;
    p.size = bytes.size();
    p.bytes = bytes;
    out.push_back(p);
  };
  auto add_span = [&] {
    if (span_length == 0) return;
    Piece p;
    p.type = Piece::Type::kSpan;
    p.size = span_length;
    p.offset = span_offset;
    out.push_back(p);
  };
  switch (form) {
    case ContentForm::kInline:
      add_inline(content);
      break;
    case ContentForm::kSpan:
      add_span();
      break;
    case ContentForm::kInlineSpan:
      add_inline(content);
      add_span();
      break;
    case ContentForm::kPng:
    case ContentForm::kPngFill: {
      Piece p;
      p.type = Piece::Type::kPng;
      const absl::string_view packed = absl::string_view(content).substr(0, kPackedPngBytes);
      p.png = UnpackPng(packed);
      p.size = tensor::PngSize(p.png);
      p.offset = span_offset;
      if (form == ContentForm::kPngFill) p.fill = absl::string_view(content).substr(packed.size());
      out.push_back(p);
      break;
    }
    case ContentForm::kInlineFill: {
      const size_t k = FillElementSize(*this);
      add_inline(absl::string_view(content).substr(0, content.size() - k));
      if (span_length == 0 || k == 0) break;
      Piece p;
      p.type = Piece::Type::kFill;
      p.size = span_length;
      p.fill = absl::string_view(content).substr(content.size() - k);
      out.push_back(p);
      break;
    }
  }
  return out;
}

absl::StatusOr<std::string> FileContent(const Entry& e, absl::string_view payload) {
  std::string out;
  for (const Piece& p : e.Pieces()) {
    if (p.type == Piece::Type::kInline) {
      out.append(p.bytes.data(), p.bytes.size());
      continue;
    }
    if (p.type == Piece::Type::kSpan) {
      if (p.offset > payload.size() || p.size > payload.size() - p.offset) {
        return absl::OutOfRangeError("span past the payload");
      }
      out.append(payload.data() + p.offset, p.size);
      continue;
    }
    const size_t at = out.size();
    out.resize(at + p.size);
    if (p.type == Piece::Type::kFill) {
      FillRange(p.fill, 0, out.data() + at, p.size);
      continue;
    }
    const absl::string_view pixels = payload.substr(std::min<uint64_t>(p.offset, payload.size()));
    const tensor::PixelSource source = [&](uint64_t from, char* buf, size_t k) {
      if (!p.fill.empty()) {
        FillRange(p.fill, from, buf, k);
        return absl::OkStatus();
      }
      if (from > pixels.size() || k > pixels.size() - from) {
        return absl::OutOfRangeError("pixels past the payload");
      }
      std::memcpy(buf, pixels.data() + from, k);
      return absl::OkStatus();
    };
    if (auto s = tensor::ReadPngRange(p.png, source, 0, out.data() + at, p.size); !s.ok()) return s;
  }
  return out;
}

absl::Status CheckLayout(const Layout& layout) {
  const auto& entries = layout.entries;
  auto bad = [](size_t i, absl::string_view why) {
    return absl::InternalError(absl::StrCat("layout entry ", i, ": ", why));
  };
  if (entries.empty() || !entries[0].is_dir) return bad(0, "the record is not a folder");
  std::vector<uint8_t> seen(entries.size(), 0);
  seen[0] = 1;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& d = entries[i];
    if (!d.is_dir) {
      if (d.num_children != 0) return bad(i, "a file with children");
      if ((d.form == ContentForm::kPng || d.form == ContentForm::kPngFill) &&
          d.content.size() < kPackedPngBytes) {
        return bad(i, "a PNG without its geometry");
      }
      if ((d.form == ContentForm::kInlineFill || d.form == ContentForm::kPngFill) &&
          tensor::FindDType(d.dtype) == nullptr) {
        return bad(i, "a broadcast of no dtype");
      }
      continue;
    }
    if (d.first_child > entries.size() || d.num_children > entries.size() - d.first_child) {
      return bad(i, "children out of range");
    }
    for (uint32_t c = d.first_child; c < d.first_child + d.num_children; ++c) {
      const Entry& e = entries[c];
      if (c == 0 || seen[c]++) return bad(c, "listed in two folders");
      if (e.parent != i) return bad(c, "its parent does not list it");
      const absl::string_view n = e.name;
      if (n.empty() || n.size() > kMaxNameBytes || n == "." || n == ".." ||
          n.find('/') != absl::string_view::npos || n.find('\0') != absl::string_view::npos) {
        return bad(c, "not a usable file name");
      }
      if (c > d.first_child && !(entries[c - 1].name < e.name)) {
        return bad(c, absl::StrCat("'", n, "' out of order or twice in its folder"));
      }
    }
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!seen[i]) return bad(i, "in no folder");
  }
  return absl::OkStatus();
}

// ---- Reverse ----

bool IsIgnoredName(absl::string_view name) {
  return name.empty() || name[0] == '.' || name.back() == '~';
}

LeafName ParseLeafName(absl::string_view file_name) {
  const size_t dot = file_name.rfind('.');
  if (dot == absl::string_view::npos || dot == 0)
    return {std::string(file_name), FileRole::kNumeric};
  absl::string_view ext = file_name.substr(dot);
  return {std::string(file_name.substr(0, dot)), ext == kTextExtension ? FileRole::kText
                                                 : ext == kKindlessExtension
                                                     ? FileRole::kKindless
                                                     : FileRole::kSingleBytes};
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
