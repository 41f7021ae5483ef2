// The layout: how a record's features become files, and back. This is the one
// place the mapping lives; the read path (vfs) uses the forward direction and
// the staging/pack path the reverse. Both directions are pure and thread-safe.
//
// Forward rules (also in README.md, "Layout"):
//   * int64 / float lists -> file `<name>` (no extension), one value per line,
//     each line ending in '\n'; an empty list is an empty file. Floats print
//     as the shortest decimal that parses back to the same float32 and
//     still reads as a float: a whole number gets ".0" (`1.0`, `-0.0`), so a
//     copy without the kind xattr (`cp -r`) packs floats as floats; NaNs
//     other than the default quiet NaN print as `nan(0x<mantissa>)`.
//   * bytes lists whose values are all single-line UTF-8 text (no control
//     bytes but tab) -> `<name>.txt`, one value per line, each ending in '\n'.
//   * other bytes lists with one value -> `<name><ext>`, exact bytes, the
//     extension sniffed from the content (SniffExtension).
//   * other bytes lists -> directory `<name>/` of `0<ext>`, `1<ext>`, ...
//   * kindless features (an empty Feature{}, as TFX writes a missing value,
//     or a map entry without a value) -> an empty file `<name>.none`
//     (kKindlessExtension; its kind xattr says "none"), so that a copy of
//     the record folder keeps the key. No other file takes that extension:
//     SniffExtension never gives it, and a numeric leaf has its '.' escaped.
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
//     Where three entries want one name, the folder a longer name makes
//     keeps it, then a bytes list's folder, then a file, each clash adding
//     one more `%-` (`record.bin/x`, list `record.bin`, file `record` ->
//     `record.bin/`, `%-record.bin/`, `%-%-record.bin`); no name needs a
//     third. A component longer than 255 bytes (a leaf: 251 with its
//     extension, leaving room for two `%-`) is cut into chunks of at most 200 bytes; every
//     chunk but the last ends in `%+` and is a directory holding the rest; a
//     chunk never starts with a bare '.'.
//   * A bytes value that tensor::DecodeTensor accepts (a serialized
//     TensorProto of a numeric dtype, as tf.io.serialize_tensor writes) shows
//     as an array instead of its bytes, wherever a bytes value would show as
//     `<stem><sniffed ext>` (one value, a list item, a sequence step):
//       - `.png` for uint8/uint16 of shape [H,W], [H,W,1..4] (H, W >= 1; see
//         tensor/png.h): a PNG made on demand from the pixels in the shard;
//         its size comes from the geometry alone (tensor::PngSize);
//       - `.npy` for the other numeric tensors: np.save's header (inline)
//         then the tensor_content bytes (spliced from the shard); *_val
//         forms listing every value are materialised inline (at most 8
//         bytes per byte of record); one *_val value broadcast over the
//         shape is kept as that one element and repeated on demand
//         (ContentForm::kInlineFill / kPngFill), so a few bytes of record
//         never cost the expanded array;
//       - tensors numpy cannot load (tensor::NpyLoadable: more than 32 dims,
//         nonzero dims beside a 0 multiplying past 2^63 bytes), DT_STRING
//         and other dtypes DecodeTensor refuses keep their bytes.
//     In the reverse direction `.png`/`.npy` are exact bytes unless the
//     feature's kind in the mounted shards is a tensor (staging/staged_file.h).
//   * An Example feature whose first name component is `feature_lists` has
//     its 'f' escaped (`%66eature_lists/...`): a top-level `feature_lists/`
//     folder means a SequenceExample (below), in both directions.
//   * A payload that decodes as a SequenceExample (example/sequence.h: it has
//     a feature_lists field) shows as
//         context/            its context features, laid out as an Example's
//                             (absent when the context has no feature)
//         feature_lists/      always present (it is what marks the record)
//           <list name>/      '/' in the name makes folders; every all-digit
//                             component has its first digit escaped, so no
//                             folder of a list name looks like a step
//             <step>          one entry per step, named by the step index
//                             zero-padded to the width of the largest index
//                             (StepName): numeric -> `07`, single-line text
//                             -> `07.txt`, one other bytes value -> `07<ext>`
//                             (sniffed; tensors as above), several -> folder
//                             `07/` of `0<ext>`, ..., a kindless step
//                             (Feature{}) -> empty file `07.none`
//     An empty list is an empty folder. A folder under feature_lists/ is a
//     list when it holds steps or is empty; when an empty list's folder would
//     be the same folder another list's path makes (lists `a` empty and
//     `a/b`), the empty one is spelt `a%-` (`%-` decodes to nothing).
//   * An Example feature whose first name component is `examples` has its
//     'e' escaped (`%65xamples/...`): a top-level `examples/` folder means an
//     ExampleListWithContext (below), in both directions.
//   * A payload that decodes as a TF-Ranking ExampleListWithContext
//     (example/example_list.h; how it is told from an Example or a
//     SequenceExample: example/record.h) shows as
//         context/            the context's features, laid out as an
//                             Example's (present when the payload has a
//                             context field, even an empty one)
//         examples/           always present (it is what marks the record)
//           000/              one folder per example, in wire order, named
//                             by ExampleFolderName, holding its features
//                             laid out as an Example's (empty: no feature)
//   * An Example that is a TF-Ranking Example-in-Example (example_list.h:
//     features serialized_context, one serialized Example, and
//     serialized_examples, serialized Examples) shows the same way under
//     its features' names: `serialized_context/` (when it has one) and
//     `serialized_examples/000/`, ... An Example feature whose name starts
//     `serialized_context/` or `serialized_examples/` (a folder, not a
//     file or a bytes list's folder) has its 's' escaped (`%73erialized_...`):
//     those top-level folders of folders mean an Example-in-Example.
//   * A payload that is none of these shows as one file `record.bin`.
//   * The vfs caps a record at kMaxEntriesPerRecord (65,536) entries (the
//     node id's 16 entry bits, vfs/node_id.h); a record with more files is
//     shown raw as `record.bin` with a warning. A YouTube-8M frame-level
//     record (300 steps x 2 lists + context) needs ~610.
#ifndef TFRECORDFS_NAMING_NAMING_H_
#define TFRECORDFS_NAMING_NAMING_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/example_list.h"
#include "tfrecordfs/example/sequence.h"
#include "tfrecordfs/tensor/png.h"
#include "tfrecordfs/tensor/tensor.h"

namespace tfrecordfs::naming {

inline constexpr absl::string_view kRawRecordName = "record.bin";
inline constexpr absl::string_view kTextExtension = ".txt";
inline constexpr absl::string_view kPngExtension = ".png";
inline constexpr absl::string_view kNpyExtension = ".npy";
// A kindless feature or sequence step (an empty Feature{}): an empty file
// `<name>.none` / `<step>.none`.
inline constexpr absl::string_view kKindlessExtension = ".none";
inline constexpr absl::string_view kContextDir = "context";
inline constexpr absl::string_view kFeatureListsDir = "feature_lists";
inline constexpr absl::string_view kExamplesDir = "examples";
// An Example-in-Example's folders (its two features' names).
inline constexpr absl::string_view kEieContextDir = "serialized_context";
inline constexpr absl::string_view kEieExamplesDir = "serialized_examples";
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
// ".txt" (that extension means a line-per-value text list) nor ".none" (a
// kindless feature).
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

// One contiguous part of a file's content, in file order (Entry::Pieces).
struct Piece {
  enum class Type : uint8_t {
    kInline,  // `bytes`, held by the layout
    kSpan,    // the payload's bytes [offset, offset + size)
    kPng,     // a PNG made on demand (tensor::ReadPngRange) of geometry `png`
              // from the pixels at payload [offset, offset + png.PixelBytes()),
              // or, when `fill` is set, from pixels that repeat `fill`
    kFill,    // `fill` repeated (`size` is a multiple of fill.size())
  };
  Type type = Type::kInline;
  uint64_t size = 0;        // bytes of the file this piece covers
  absl::string_view bytes;  // kInline: views the Entry
  uint64_t offset = 0;      // kSpan, kPng: payload offset
  tensor::PngGeometry png;  // kPng
  absl::string_view fill;   // kFill, kPng of a broadcast: one element; views the Entry
};

// Bytes [offset, offset + n) of an endless repetition of `pattern` (not
// empty): a kFill piece, the pixels of a broadcast PNG.
void FillRange(absl::string_view pattern, uint64_t offset, char* out, size_t n);

// How an Entry's pieces are stored. The forms cover every file the layout
// makes with at most two pieces, so an Entry needs no piece vector (and no
// heap block) of its own: layouts are cached per record (vfs RecordCache,
// charged by ParsedRecord::MemoryBytes), and a small Entry lets the same
// memory hold more records.
enum class ContentForm : uint8_t {
  kInline,      // [inline `content`]: numbers, text, a materialised tensor
  kSpan,        // [payload span]: one bytes value, a raw record
  kInlineSpan,  // [inline `content`][payload span]: an .npy (header, then
                // the tensor_content bytes spliced from the shard)
  kPng,         // [generated PNG]: `content` holds the packed geometry
                // (PackPng), the span the pixels (tensor_content)
  // A tensor given as one *_val value broadcast over its shape: the layout
  // holds that element (the last itemsize bytes of `content`, itemsize of
  // `dtype`), never the expanded array, which can be 8 KiB x 8 KiB from a
  // few bytes of record.
  kInlineFill,  // [inline `content` but the element][the element repeated to
                // span_length bytes]: an .npy
  kPngFill,     // [generated PNG]: `content` holds PackPng's geometry, then
                // the element every pixel sample repeats
};

// What an entry shows, set by the forward layout so that a file's feature
// and kind can be named (extended attributes, FeatureOf) from the cached
// layout alone, without the decoded table or the payload.
enum class EntryRole : uint8_t {
  kFolder,  // the record folder, a folder a '/' in a name makes,
            // context/, feature_lists/, examples/ and its examples' folders,
            // a `%+` chunk
  kInt64,   // a numeric file, a numeric step
  kFloat,
  kText,         // a `.txt` of single-line text values
  kBytes,        // exact bytes (a value, a list item, a step)
  kTensor,       // a serialized tensor shown as `.png`/`.npy` (Entry::dtype)
  kBytesList,    // the folder of a bytes list's values (`0<ext>`, ...)
  kFeatureList,  // a SequenceExample's list folder (it holds the steps)
  kKindless,     // a kindless feature or step (`<name>.none`, `<step>.none`)
  kRaw,          // `record.bin` of a payload that is neither
};

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
  ContentForm form = ContentForm::kInline;
  EntryRole role = EntryRole::kFolder;  // (in padding: sizeof stays 96)
  uint8_t dtype = 0;                    // kTensor: the tensor::DataType number
  std::string content;                  // inline bytes (see ContentForm)
  uint64_t span_offset = 0;
  uint64_t span_length = 0;

  // The file's size: the sum of its pieces' sizes (a PNG's from its geometry
  // alone, tensor::PngSize: no image is encoded to list a folder).
  uint64_t size() const;
  // The pieces in file order (empty pieces omitted).
  std::vector<Piece> Pieces() const;
  bool is_inline() const { return form == ContentForm::kInline; }
};

// Calls `fn(piece, from, len)` for each piece of `e` that bytes
// [offset, offset + n) of the file overlap, in file order: the range covers
// bytes [from, from + len) of that piece. `fn` returns absl::Status; the
// first error stops the walk and is returned. (A template: the read path
// calls it per read, with no allocation beyond Pieces().)
template <typename Fn>
absl::Status ForEachPieceIn(const Entry& e, uint64_t offset, size_t n, Fn&& fn) {
  uint64_t begin = 0;  // file offset of the current piece
  for (const Piece& p : e.Pieces()) {
    const uint64_t end = begin + p.size;
    const uint64_t piece_begin = begin;
    begin = end;
    if (end <= offset || piece_begin >= offset + n) continue;
    const uint64_t from = std::max(offset, piece_begin) - piece_begin;
    const size_t len =
        static_cast<size_t>(std::min<uint64_t>(end, offset + n) - piece_begin - from);
    if (absl::Status s = fn(p, from, len); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// The whole content of file `e` of a layout made from `payload` (tests,
// tools: a PNG is produced whole).
absl::StatusOr<std::string> FileContent(const Entry& e, absl::string_view payload);

// The geometry of a kPng entry, packed into its (small-string) content.
std::string PackPng(const tensor::PngGeometry& g);
tensor::PngGeometry UnpackPng(absl::string_view packed);

// entries[0] is the record directory itself.
struct Layout {
  std::vector<Entry> entries;
};

// OK when `layout` is a tree a mount can serve: entries[0] a folder; every
// folder's children in range, pointing back at it, named (not empty, at
// most kMaxNameBytes, no '/' or NUL, not "." or "..") in strictly
// increasing order; every other entry the child of exactly one folder; file
// forms consistent with their content. Else Internal naming the entry: the
// layout functions below never make such a layout, and a mount that meets
// one shows the record as an I/O error (and logs it) instead of serving it.
absl::Status CheckLayout(const Layout& layout);

// Lays out a decoded Example; `payload` is the buffer the table's views
// point into (used to compute span offsets).
Layout LayoutExample(const example::FeatureTable& table, absl::string_view payload);

// Lays out a decoded SequenceExample (rules above).
Layout LayoutSequence(const example::SequenceTable& table, absl::string_view payload);

// The name of step `index` of a list of `num_steps` steps ("07" of 12).
std::string StepName(size_t index, size_t num_steps);

// Lays out a decoded ExampleListWithContext, or with `example_in_example`
// an Example-in-Example (rules above).
Layout LayoutExampleList(const example::ExampleListTable& table, absl::string_view payload,
                         bool example_in_example = false);

// The folder of example `index` of an ELWC of `num_examples`: the index
// zero-padded to at least three digits ("003"), wider when the largest
// index needs it ("0042" of 1,500).
std::string ExampleFolderName(size_t index, size_t num_examples);

// The layout of a payload that is not an Example: one `record.bin` span.
Layout LayoutRaw(uint64_t payload_size);

// Index of the child of directory `dir` named `name`, or nullopt.
std::optional<uint32_t> FindChild(const Layout& layout, uint32_t dir, absl::string_view name);

// The feature an entry of `layout` belongs to, read back from its escaped
// path and its role (the inverse of the forward rules above):
//   * a feature's file or bytes-list folder, or a value inside that folder:
//     the feature (of the context, for a SequenceExample's context/);
//   * a feature list's folder, a step in it, or a value inside a step: the
//     list (`feature_list` set; `index` = the step, for a step and below);
//   * a list value file (`3.jpg`): `index` = its position in the list.
// nullopt for entries that belong to no feature: the record folder, plain
// folders, context/, feature_lists/, record.bin. Pure and cheap: no payload.
struct FeatureInfo {
  std::string name;                 // the real (unescaped) feature or list name
  EntryRole role;                   // of the entry asked about
  uint8_t dtype = 0;                // kTensor
  bool feature_list = false;        // a SequenceExample's feature list
  bool context = false;             // a SequenceExample's or an ELWC's context feature
  std::optional<uint64_t> example;  // an ELWC's example feature: the example's index
  std::optional<uint64_t> step;     // feature lists: the step
  std::optional<uint64_t> value;    // bytes lists: the value's position
};
std::optional<FeatureInfo> FeatureOf(const Layout& layout, uint32_t entry);

// "int64", "float", "text", "bytes", "tensor <dtype>" ("tensor uint8"),
// "bytes list", "feature list", "none" (a kindless feature or step), "raw" (record.bin),
// "" for a folder.
std::string RoleName(EntryRole role, uint8_t dtype);

// ---- Reverse: files back to features ----

// kKindless: `<name>.none`, a kindless feature (the file must be empty).
enum class FileRole { kNumeric, kText, kSingleBytes, kKindless };

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
