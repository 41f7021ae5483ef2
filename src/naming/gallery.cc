#include "tfrecordfs/naming/gallery.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <span>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "tfrecordfs/base/hash.h"

namespace tfrecordfs::naming {

namespace {

constexpr absl::string_view kImageExtensions[] = {".jpg", ".png", ".gif", ".bmp", ".webp"};

absl::string_view ExtensionOf(absl::string_view name) {
  const size_t dot = name.rfind('.');
  return dot == absl::string_view::npos ? absl::string_view() : name.substr(dot);
}

// `index` zero-padded to the width of the largest index of `count` items.
std::string Padded(uint64_t index, uint64_t count) {
  std::string digits = absl::StrCat(index);
  const size_t width = absl::StrCat(count == 0 ? 0 : count - 1).size();
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

// `escaped` cut so that it fits in `max_bytes` with `%~` and 8 hex digits
// of a hash of `whole` after it; never inside a `%XX` escape.
std::string CutWithHash(absl::string_view escaped, absl::string_view whole, size_t max_bytes) {
  const std::string tail =
      absl::StrFormat("%%~%08x", static_cast<uint32_t>(Fnv1a64(whole) & 0xffffffffu));
  size_t keep = max_bytes > tail.size() ? max_bytes - tail.size() : 0;
  keep = std::min(keep, escaped.size());
  // Back off from the middle of an escape or of a UTF-8 sequence.
  for (size_t i = keep >= 2 ? keep - 2 : 0; i < keep; ++i) {
    if (escaped[i] == '%') keep = i;
  }
  while (keep > 0 && (static_cast<unsigned char>(escaped[keep]) & 0xc0) == 0x80) --keep;
  return absl::StrCat(escaped.substr(0, keep), tail);
}

}  // namespace

bool IsImageEntry(const Entry& e) {
  if (e.is_dir) return false;
  const absl::string_view ext = ExtensionOf(e.name);
  if (e.role == EntryRole::kTensor) return ext == kPngExtension;
  if (e.role != EntryRole::kBytes) return false;
  return std::find(std::begin(kImageExtensions), std::end(kImageExtensions), ext) !=
         std::end(kImageExtensions);
}

std::string EscapeNamePart(absl::string_view raw, size_t max_bytes) {
  std::string escaped = EscapeComponent(raw, /*numeric_leaf=*/false, /*file_leaf=*/false);
  if (escaped.size() <= max_bytes) return escaped;
  return CutWithHash(escaped, raw, max_bytes);
}

std::vector<GalleryImage> GalleryImages(const Layout& layout, absl::string_view stem) {
  std::vector<uint32_t> images;
  for (uint32_t i = 0; i < layout.entries.size(); ++i) {
    if (IsImageEntry(layout.entries[i])) images.push_back(i);
  }
  std::vector<GalleryImage> out;
  if (images.size() == 1) {
    out.push_back({images[0], absl::StrCat(stem, ExtensionOf(layout.entries[images[0]].name))});
    return out;
  }
  absl::flat_hash_set<std::string> taken;
  for (uint32_t i : images) {
    const Entry& e = layout.entries[i];
    const absl::string_view ext = ExtensionOf(e.name);
    std::optional<FeatureInfo> info = FeatureOf(layout, i);
    if (!info) continue;  // every image entry belongs to a feature; defensive
    std::string suffix;
    uint32_t list_folder = e.parent;
    if (info->value) {
      absl::StrAppend(&suffix, "-", Padded(*info->value, layout.entries[e.parent].num_children));
      list_folder = layout.entries[e.parent].parent;
    }
    if (info->step) {
      suffix.insert(
          0, absl::StrCat("-", Padded(*info->step, layout.entries[list_folder].num_children)));
    }
    const size_t fixed = stem.size() + 1 + suffix.size() + ext.size();
    const size_t room = kMaxNameBytes > fixed ? kMaxNameBytes - fixed : 0;
    std::string name = absl::StrCat(stem, "-", EscapeNamePart(info->name, room), suffix, ext);
    if (!taken.insert(name).second) continue;
    out.push_back({i, std::move(name)});
  }
  std::sort(out.begin(), out.end(),
            [](const GalleryImage& a, const GalleryImage& b) { return a.name < b.name; });
  return out;
}

RecordClass ClassOf(const example::DecodedRecord& record, absl::string_view feature) {
  RecordClass out;
  out.folder = std::string(kNoValueFolder);
  const example::FeatureTable* table = nullptr;
  if (record.kind == example::PayloadKind::kExample) table = &record.example;
  if (record.kind == example::PayloadKind::kSequenceExample) table = &record.sequence.context;
  if (record.kind == example::PayloadKind::kExampleList ||
      record.kind == example::PayloadKind::kExampleInExample) {
    table = &record.list.context;
  }
  if (table == nullptr) return out;
  const example::Feature* f = nullptr;
  for (const example::Feature& candidate : table->features) {
    if (candidate.name == feature) f = &candidate;  // the last of repeated keys, as TF's map
  }
  if (f == nullptr || f->size() == 0) return out;
  if (f->size() > 1) {
    out.folder = std::string(kSeveralValuesFolder);
    return out;
  }
  switch (f->kind) {
    case example::Kind::kInt64:
      out.value = absl::StrCat(f->int64s[0]);
      out.folder = out.value;
      break;
    case example::Kind::kFloat:
      out.value = std::string(absl::StripSuffix(FormatFloats(f->floats), "\n"));
      out.folder = EscapeNamePart(out.value);
      break;
    case example::Kind::kBytes: {
      out.value = std::string(f->bytes[0]);
      out.folder = EscapeNamePart(out.value);
      // Text that spells a non-finite float is not that float: its first
      // byte escaped keeps the two apart (a letter, a '+' or a '-': never
      // escaped otherwise, so the name still unescapes to the value).
      auto as_float = ParseNumeric(out.value, example::Kind::kFloat);
      if (as_float.ok() && as_float->kind == example::Kind::kFloat &&
          as_float->floats.size() == 1 && !std::isfinite(as_float->floats[0]) &&
          !out.folder.empty() && out.folder[0] != '%') {
        out.folder = absl::StrFormat("%%%02X%s", static_cast<unsigned char>(out.folder[0]),
                                     out.folder.substr(1));
      }
      break;
    }
    case example::Kind::kNone:
      return out;
  }
  out.has_value = true;
  return out;
}

std::string ClassFolder(const example::DecodedRecord& record, absl::string_view feature) {
  return ClassOf(record, feature).folder;
}

}  // namespace tfrecordfs::naming
