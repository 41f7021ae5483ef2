// Pieces of the Example decoder (decode.cc) shared with the SequenceExample
// decoder (sequence.cc); not a public API. The strictness rules are the ones
// example.h states.
#ifndef TFRECORDFS_SRC_EXAMPLE_DECODE_INTERNAL_H_
#define TFRECORDFS_SRC_EXAMPLE_DECODE_INTERNAL_H_

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "tfrecordfs/base/wire.h"
#include "tfrecordfs/example/example.h"

namespace tfrecordfs::example::internal {

using WireType = wire::WireType;

// The wire cursor (base/wire.h) naming a tf.train.Example in its errors
// unless told another message.
class Cursor : public wire::Cursor {
 public:
  Cursor(absl::string_view data, size_t base, const char* what = "tf.train.Example")
      : wire::Cursor(data, base, what) {}
};

inline absl::Status Unexpected(const Cursor& c, absl::string_view message, uint32_t field,
                               WireType type) {
  return c.Error(absl::StrCat("unexpected field ", field, " (wire type ", static_cast<int>(type),
                              ") in ", message));
}

// Decodes a Feature message body into `f` (merging, as protobuf does).
absl::Status DecodeFeature(absl::string_view data, size_t base, Feature* f);
// Decodes a Features map entry (key = name, value = Feature) into `f`.
absl::Status DecodeEntry(absl::string_view data, size_t base, Feature* f);

}  // namespace tfrecordfs::example::internal

#endif  // TFRECORDFS_SRC_EXAMPLE_DECODE_INTERNAL_H_
