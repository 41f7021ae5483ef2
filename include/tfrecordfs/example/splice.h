// An edited record rebuilt so that what the edit did not change keeps its
// bytes.
//
// A record edited through the mount comes back as a payload encoded afresh
// from its folder (staging/record_folder.h): every feature re-serialized, in
// name order. Written as such, a record whose content did not change (a
// value written over with itself, a refused write then restored, an editor
// that gave up) would differ from the shard's bytes, and a changed record
// would have every other feature moved and re-encoded. SpliceEdit compares
// the two payloads feature by feature (DecodeRecord both) and gives:
//   * unchanged, when they say the same thing: same payload kind (Example,
//     SequenceExample, ExampleListWithContext, Example-in-Example, raw), same feature names
//     (kindless ones too), and for each the same kind and values (floats bit for bit; bytes equal,
//     or `same_bytes` says they are); for a SequenceExample the same
//     context and the same lists, step by step; raw payloads equal. The
//     caller keeps the original bytes as they are;
//   * else the original payload's map entries (the serialized `feature`
//     entries of Features, and `feature_list` entries of FeatureLists) in
//     their original order and bytes, as they are on the wire, except that
//     an entry whose value the edit changed is replaced by the entry encoded
//     from the edited value (at the place of the key's last entry, which is
//     the one a parser keeps; earlier entries of a changed key are
//     dropped), entries of removed keys are dropped, and keys the original
//     does not have are appended in name order. The result is one Example
//     `features` field (a SequenceExample: `context`, when the original had
//     one or a context feature is left, then `feature_lists`), and is
//     checked to decode to what `edited` decodes to; where it would not (or
//     the payload kinds differ, or the original does not parse as its kind
//     did), it is `edited` itself;
//   * for an ExampleListWithContext or an Example-in-Example (example_list.h)
//     the same, one level up: unchanged when the examples (in order) and the
//     context say the same; else every example and the context the edit
//     left the same keep their bytes (ELWC: the whole `examples` / `context`
//     field, in the original's wire order, context first or last as it was;
//     EIE: the serialized_examples / serialized_context values, and the
//     outer map entries that did not change), a changed one is spliced as
//     an Example (its untouched map entries kept), removed examples are
//     dropped (an edited example equal to a later original one keeps that
//     one's bytes, the ones between being removed), added ones appended
//     encoded afresh.
//
// Thread-safety: pure functions.
#ifndef TFRECORDFS_EXAMPLE_SPLICE_H_
#define TFRECORDFS_EXAMPLE_SPLICE_H_

#include <functional>
#include <string>

#include "absl/strings/string_view.h"

namespace tfrecordfs::example {

// Whether two bytes values that differ as bytes still hold the same value
// (the caller's notion: a tensor and its canonical re-encoding).
using SameBytesValue = std::function<bool(absl::string_view original, absl::string_view edited)>;

struct SplicedRecord {
  bool changed = false;  // false: keep the original payload byte for byte
  std::string payload;   // changed: the payload to write
};

// See the top. `original`: the record's payload in the shard; `edited`: the
// payload its edit folder makes. `same_bytes` may be empty (bytes compare).
SplicedRecord SpliceEdit(absl::string_view original, absl::string_view edited,
                         const SameBytesValue& same_bytes = {});

}  // namespace tfrecordfs::example

#endif  // TFRECORDFS_EXAMPLE_SPLICE_H_
