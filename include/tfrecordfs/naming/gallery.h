// Names for the image views (-o view=gallery, -o view=classes): which files
// of a record's layout are images, what they are called there, and the
// folder a record's class value makes. Forward only: these views are
// read-only (the relabel-by-mv direction builds on the edit issue).
//
// Images: the files the records view shows as an image, i.e. a bytes value
// (one value, a list item, a sequence step) whose sniffed extension is
// .jpg, .png, .gif, .bmp or .webp, and a serialized uint8/uint16 tensor
// shown as a generated .png (layout.h's rules). Nothing else of a record
// appears in these views.
//
// Image names (`stem` is the record's zero-padded index in the gallery,
// `<shard>-<record>` in the class view):
//   * a record with one image:            <stem><ext>            0042.jpg
//   * several, each as                    <stem>-<feature><ext>  0042-image%2Fencoded.jpg
//     a bytes list's value i:             <stem>-<feature>-<i><ext>
//     a SequenceExample list's step s:    <stem>-<list>-<s><ext>
//     (a step with several values:        <stem>-<list>-<s>-<i><ext>)
//   <feature> is the feature's name escaped as one component of the records
//   view (EscapeComponent: `/` is `%2F`, `%` is `%25`, control bytes and
//   invalid UTF-8 are `%XX`, a leading '.' is `%2E`; naming::Unescape gives
//   the name back). <i> and <s> are zero-padded to the width of the list's
//   largest index, so `ls`, `feh --sort name` and file managers agree on the
//   order. A name longer than 255 bytes has its <feature> cut and followed
//   by `%~` and 8 hex digits of a hash of the whole name. Two images of one
//   record that would share a name (a SequenceExample whose context feature
//   and feature list have one name) keep the first in layout order only.
//
// Class folders (ClassFolder): a record's one value of the class feature,
//   int64 as a decimal number, float as the shortest decimal that reads
//   back (FormatFloats), text and other bytes escaped like a feature name
//   above (the empty value is `%-`); reversible with naming::Unescape for
//   names up to 255 bytes (a longer value is cut like an image name, `%~`
//   and a hash, and is not: ClassOf gives the whole value beside the name).
//   A text value that a float file would read as NaN or an infinity
//   ("nan", "-inf", "Infinity"...) has its first byte escaped (`%6Ean`),
//   so that it never shares a folder with a float NaN or infinity, which
//   is a different value. A '%' is always escaped, so the two folders of
//   records that have no single value cannot clash with a value:
//     kNoValueFolder      "%none"      the feature absent, kindless, an
//                                      empty list, or a payload that is not
//                                      an Example / SequenceExample (whose
//                                      context is looked in)
//     kSeveralValuesFolder "%several"  a list of two or more values
//
// Pure and thread-safe.
#ifndef TFRECORDFS_NAMING_GALLERY_H_
#define TFRECORDFS_NAMING_GALLERY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tfrecordfs/example/record.h"
#include "tfrecordfs/naming/naming.h"

namespace tfrecordfs::naming {

inline constexpr absl::string_view kNoValueFolder = "%none";
inline constexpr absl::string_view kSeveralValuesFolder = "%several";

// True for an entry the image views show (see the top).
bool IsImageEntry(const Entry& e);

// One image of a record: the entry of its layout and its name.
struct GalleryImage {
  uint32_t entry = 0;
  std::string name;
};

// The images of `layout` named after `stem` (see the top), sorted by name.
std::vector<GalleryImage> GalleryImages(const Layout& layout, absl::string_view stem);

// `raw` as one name component (a feature name, a shard's mount path, a class
// value): EscapeComponent(raw), and cut as described at the top when longer
// than `max_bytes`.
std::string EscapeNamePart(absl::string_view raw, size_t max_bytes = kMaxNameBytes);

// A record's class for one feature: the folder it shows in (see the top)
// and the value that folder stands for, whole (never cut), as the
// feature's file in the record spells it without its '\n': int64 in
// decimal, float as FormatFloats writes it, bytes as they are. `value` is
// empty for kNoValueFolder and kSeveralValuesFolder (`has_value` false).
struct RecordClass {
  std::string folder;
  std::string value;
  bool has_value = false;
};
RecordClass ClassOf(const example::DecodedRecord& record, absl::string_view feature);

// The class folder of a decoded record for feature `feature`:
// ClassOf(record, feature).folder.
std::string ClassFolder(const example::DecodedRecord& record, absl::string_view feature);

}  // namespace tfrecordfs::naming

#endif  // TFRECORDFS_NAMING_GALLERY_H_
