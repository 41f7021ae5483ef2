// The layout: how a record's features become files, and back. This is the one
// place the mapping lives; the read path (vfs) uses the forward direction and
// the staging/pack path the reverse. Both directions are pure and thread-safe.
//
// Forward rules (also in README.md, "Layout"):
//   * int64 / float lists -> file `<name>` (no extension), one value per line,
//     each line ending in '\n'; an empty list is an empty file. Floats print
//     as the shortest decimal that parses back to the same float32; NaNs
//     other than the default quiet NaN print as `nan(0x<mantissa>)`.
//   * bytes lists whose values are all single-line UTF-8 text (no control
//     bytes but tab) -> `<name>.txt`, one value per line, each ending in '\n'.
//   * other bytes lists with one value -> `<name><ext>`, exact bytes, the
//     extension sniffed from the content (SniffExtension).
//   * other bytes lists -> directory `<name>/` of `0<ext>`, `1<ext>`, ...
//   * '/' in a feature name makes directories, unless the name has an empty
//     component (leading, trailing or doubled '/'), in which case the whole
//     name is one component with '/' escaped.
//   * Escapes: `%XX` (uppercase hex) encodes one byte. Always escaped: '%',
//     bytes < 0x20, 0x7f, bytes that are not part of valid UTF-8, a leading
//     '.' of any component (so ".", ".." and hidden names cannot appear), a
//     '~' ending a component (the reverse direction skips backups), every
//     '.' of a numeric feature's last component (a numeric file has no
//     extension), and the first digit of a file whose name up to its first
//     '.' is all digits (so that a directory of such files is never mistaken
//     for a bytes list).
//     `%-` decodes to nothing: it is the whole name of an empty component
//     (the feature named ""), and it prefixes a file that would take the
//     name of a directory beside it (numeric `image` next to `image/encoded`).
//     A component longer than 255 bytes (a leaf: 253 with its extension,
//     leaving room for `%-`) is cut into chunks of at most 200 bytes; every
//     chunk but the last ends in `%+` and is a directory holding the rest; a
//     chunk never starts with a bare '.'.
//   * A payload that is not an Example shows as one file `record.bin`.
//     Kindless features (Feature{} with no list) are not shown.
#ifndef TFRECORDFS_NAMING_NAMING_H_
#define TFRECORDFS_NAMING_NAMING_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/example/example.h"

namespace tfrecordfs::naming {

inline constexpr absl::string_view kRawRecordName = "record.bin";
inline constexpr absl::string_view kTextExtension = ".txt";
inline constexpr size_t kMaxNameBytes = 255;
inline constexpr size_t kChunkBytes = 200;

// ---- Content formatting (forward) and parsing (reverse) ----

std::string FormatInt64s(std::span<const int64_t> values);
std::string FormatFloats(std::span<const float> values);
// Each value followed by '\n'.
std::string FormatText(std::span<const absl::string_view> values);

// True when `v` is valid UTF-8 with no control bytes other than tab.
bool IsSingleLineText(absl::string_view v);

// ".jpg", ".png", ".gif", ".bmp", ".webp", ".tif", ".wav", ".flac", ".ogg",
// ".mp3", ".mp4", ".pdf", ".gz", ".zip", ".npy", ".json", else ".bin". Never
// ".txt" (that extension means a line-per-value text list).
absl::string_view SniffExtension(absl::string_view bytes);

// Parses a numeric file. `hint` is the kind the feature has in the mounted
// shards (kNone if unknown): kInt64 or kFloat forces that kind; with kNone
// the list is int64 when every line is an integer, else float. Lines may
// carry surrounding blanks; the last '\n' is optional. Errors name the line.
absl::StatusOr<example::Feature> ParseNumeric(absl::string_view content, example::Kind hint);

// Parses a `.txt` file into values (one per line, the final '\n' optional, a
// trailing '\r' of each line dropped). Views point into `content`.
std::vector<absl::string_view> ParseText(absl::string_view content);

// ---- Names ----

// Escapes one path component per the rules above. `numeric_leaf` escapes
// every '.'; `file_leaf` escapes the first digit of an all-digit stem.
std::string EscapeComponent(absl::string_view raw, bool numeric_leaf, bool file_leaf);

// Decodes `%XX` and `%-`; a '%' not starting an escape stays literal.
std::string Unescape(absl::string_view escaped);

// ---- Forward layout ----

// (Fields ordered for size: layouts of recently used records are cached,
// and a smaller entry lets the same memory hold more of them.)
struct Entry {
  std::string name;  // escaped file name within its parent
  uint32_t parent = 0;
  // Directories: children are entries [first_child, first_child + num_children),
  // sorted by name.
  uint32_t first_child = 0;
  uint32_t num_children = 0;
  bool is_dir = false;
  // Files: either inline text, or a byte range of the payload (so the read
  // path can serve it straight from the shard).
  bool is_inline = true;
  std::string content;
  uint64_t span_offset = 0;
  uint64_t span_length = 0;

  uint64_t size() const { return is_inline ? content.size() : span_length; }
};

// entries[0] is the record directory itself.
struct Layout {
  std::vector<Entry> entries;
};

// Lays out a decoded Example; `payload` is the buffer the table's views
// point into (used to compute span offsets).
Layout LayoutExample(const example::FeatureTable& table, absl::string_view payload);

// The layout of a payload that is not an Example: one `record.bin` span.
Layout LayoutRaw(uint64_t payload_size);

// Index of the child of directory `dir` named `name`, or nullopt.
std::optional<uint32_t> FindChild(const Layout& layout, uint32_t dir, absl::string_view name);

// ---- Reverse: files back to features ----

enum class FileRole { kNumeric, kText, kSingleBytes };

// A file name inside a record folder, decoded.
struct LeafName {
  std::string stem_escaped;  // the file name without its extension
  FileRole role;
};

// Names the reverse direction skips: hidden files (editor swap files start
// with '.') and backups ending in '~'.
bool IsIgnoredName(absl::string_view name);

LeafName ParseLeafName(absl::string_view file_name);

// True when `dir_name` is a chunk of a long component (ends in `%+`).
bool IsContinuation(absl::string_view dir_name);

// For a directory's entries (name, is_regular_file): true when they form a
// bytes list, i.e. all regular files named `<i><ext>` for i = 0..n-1 with no
// leading zeros, n >= 1.
bool IsListDirectory(std::span<const std::pair<std::string, bool>> entries);

// Position of a list item file (`12.jpg` -> 12), or nullopt.
std::optional<uint64_t> ListItemIndex(absl::string_view file_name);

// Joins the escaped directory components leading to a file and the file's
// decoded stem into a feature name: components are decoded and joined with
// '/', except that a `%+` chunk joins the next without one.
std::string FeatureNameFromPath(std::span<const std::string> escaped_dirs,
                                absl::string_view leaf_stem_escaped);

}  // namespace tfrecordfs::naming

#endif  // TFRECORDFS_NAMING_NAMING_H_
