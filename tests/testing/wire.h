// A minimal protobuf wire-format encoder for hand-built test payloads: the
// corner cases protobuf allows (unpacked lists, split packed runs, repeated
// map entries) and the bytes it refuses, which no generated encoder writes.
//
// Contract: every function returns the exact bytes named, nothing more; no
// validation (field 0, wire types 3/4/6/7 and oversized lengths are allowed
// on purpose).
//
// Thread-safety: pure functions.
#ifndef TFRECORDFS_TESTS_TESTING_WIRE_H_
#define TFRECORDFS_TESTS_TESTING_WIRE_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/strings/string_view.h"

namespace tfrecordfs::test::wire {

// Base-128 varint bytes of `v` (no tag), appended / returned.
void PutVarint(std::string* s, uint64_t v);
std::string VarintBytes(uint64_t v);

// The key of `field` with wire type `wire` (0 varint, 1 fixed64, 2 length
// delimited, 5 fixed32).
std::string Tag(uint32_t field, int wire);
// Length-delimited field: tag, varint length, body.
std::string Len(uint32_t field, absl::string_view body);
// Varint field: tag, then `v` as a varint (negative int64s as 10 bytes).
std::string Varint(uint32_t field, uint64_t v);
// Fixed32 field: tag, then `v` little-endian.
std::string Fixed32(uint32_t field, uint32_t v);

// Field 1 holding `vs` as one packed varint run (an Int64List body).
std::string PackedVarints(std::initializer_list<int64_t> vs);
// Field 1 holding the float bit patterns as one packed fixed32 run (a
// FloatList body).
std::string PackedFloats(std::initializer_list<uint32_t> bits);

// One Features.feature map entry: key (field 1) and Feature body (field 2).
std::string Entry(absl::string_view key, absl::string_view feature_body);
// Example{features{entries}}: `entries` is a concatenation of Entry()s.
std::string ExampleOf(absl::string_view entries);

}  // namespace tfrecordfs::test::wire

#endif  // TFRECORDFS_TESTS_TESTING_WIRE_H_
