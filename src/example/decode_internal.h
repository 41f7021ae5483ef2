// Pieces of the Example decoder (decode.cc) shared with the SequenceExample
// decoder (sequence.cc); not a public API. The strictness rules are the ones
// example.h states.
#ifndef TFRECORDFS_SRC_EXAMPLE_DECODE_INTERNAL_H_
#define TFRECORDFS_SRC_EXAMPLE_DECODE_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
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

// Reads the fields of the message in `c` to its end, every one of which
// must be a LEN field numbered `first` to `last` (Unexpected, naming
// `message`, for any other), and calls fn(field, value, value_base) for
// each: value_base is where `value` starts in the payload, for errors.
// Stops at the first error, fn's included.
template <typename Fn>
absl::Status ForEachLenField(Cursor& c, absl::string_view message, uint32_t first, uint32_t last,
                             Fn&& fn) {
  while (!c.done()) {
    uint32_t field = 0;
    WireType type = wire::kVarint;
    if (auto s = c.Tag(&field, &type); !s.ok()) return s;
    if (field < first || field > last || type != wire::kLen) {
      return Unexpected(c, message, field, type);
    }
    absl::string_view value;
    size_t value_base = 0;
    if (auto s = c.Bytes(&value, &value_base); !s.ok()) return s;
    if (absl::Status s = fn(field, value, value_base); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// True when a table decoded as an Example (or a SequenceExample's context)
// is really another message that happens to parse: another message whose
// field 1 holds Examples (an ExampleListWithContext without its context)
// parses as an Example whose "entries" are really Features messages, so
// every key is a serialized map entry (it starts with the control byte
// 0x0a) and no value is ever given. No Example writer produces features
// that are all kindless under names with control bytes, so such a payload
// is shown raw rather than as an empty record.
bool LooksLikeAnotherMessage(const std::map<std::string, Feature, std::less<>>& by_name);

// DecodeExample of an Example found at `base` of a larger payload (errors
// count offsets from the payload's start and name `what`, the outer message).
absl::StatusOr<FeatureTable> DecodeExampleAt(absl::string_view data, size_t base, const char* what);

// Decodes a Feature message body into `f` (merging, as protobuf does).
// The shared Feature decoders name Example in their errors: `s` said of
// message `what` instead (the offset already counts from the payload).
inline absl::Status RenamedFor(absl::string_view what, absl::Status s) {
  constexpr absl::string_view kPrefix = "not a tf.train.Example: ";
  if (!absl::StartsWith(s.message(), kPrefix)) return s;
  return absl::InvalidArgumentError(
      absl::StrCat("not a ", what, ": ", s.message().substr(kPrefix.size())));
}

absl::Status DecodeFeature(absl::string_view data, size_t base, Feature* f);
// Decodes a Features map entry (key = name, value = Feature) into `f`.
absl::Status DecodeEntry(absl::string_view data, size_t base, Feature* f);

}  // namespace tfrecordfs::example::internal

#endif  // TFRECORDFS_SRC_EXAMPLE_DECODE_INTERNAL_H_
