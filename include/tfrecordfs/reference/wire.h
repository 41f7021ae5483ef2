// Protobuf wire-format bytes written by hand, for inputs no generated encoder
// would write: the variants protobuf parsers accept (unpacked lists, split
// packed runs, repeated map entries, messages given twice) and the bytes they
// refuse (field number 0, group wire types, lengths past the end).
// tfrecordfs-gen's hostile corpus and the tests' hand-built payloads use it;
// the product does not (it decodes in src/example and src/tensor and encodes
// through protobuf's generated classes), so it can check the product from
// outside.
//
// Contract: every function returns (or appends) exactly the bytes it names,
// nothing more, and validates nothing: field 0, wire types 3, 4, 6 and 7, and
// lengths that disagree with what follows are all writable on purpose. A key
// is the varint of (field << 3 | wire_type); fixed-width values are
// little-endian; negative int64s are 10-byte varints, as protobuf writes them.
//
// Thread-safety: pure functions.
#ifndef TFRECORDFS_REFERENCE_WIRE_H_
#define TFRECORDFS_REFERENCE_WIRE_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/strings/string_view.h"

namespace tfrecordfs::reference::wire {

// ---- Fields of any message ---------------------------------------------------

// Base-128 varint bytes of `v` (no key), appended / returned.
void PutVarint(std::string* out, uint64_t v);
std::string VarintBytes(uint64_t v);

// The key of `field` with wire type `wire_type` (0 varint, 1 fixed64,
// 2 length-delimited, 5 fixed32; 3, 4, 6, 7 are written as given).
std::string Tag(uint32_t field, int wire_type);
// Length-delimited field: key, varint length of `body`, body.
std::string Len(uint32_t field, absl::string_view body);
// Varint field: key, then `v` as a varint.
std::string Varint(uint32_t field, uint64_t v);
// Fixed32 / fixed64 field: key, then `bits` little-endian.
std::string Fixed32(uint32_t field, uint32_t bits);
std::string Fixed64(uint32_t field, uint64_t bits);
// Fixed32 field holding the bits of `v` (a float or a FloatList value).
std::string Float(uint32_t field, float v);

// ---- Repeated fields of tf.train lists (field 1 of Int64List, FloatList) -----

// Field 1 holding `vs` as one packed varint run (an Int64List body).
std::string PackedVarints(std::initializer_list<int64_t> vs);
// Field 1 holding `vs` as one packed fixed32 run (a FloatList body), given as
// floats or as raw bit patterns (NaN payloads, denormals).
std::string PackedFloats(std::initializer_list<float> vs);
std::string PackedFixed32s(std::initializer_list<uint32_t> bits);
// BytesList body: each value as its own field 1.
std::string BytesValues(std::initializer_list<absl::string_view> vs);

// ---- tf.train.Feature, Features and Example (proto/example.proto) ------------

// Feature{bytes_list = 1 | float_list = 2 | int64_list = 3 {list}}, from the
// list's body (e.g. PackedVarints(), or "" for an empty list).
std::string BytesFeature(absl::string_view list);
std::string FloatFeature(absl::string_view list);
std::string Int64Feature(absl::string_view list);
// One Features.feature map entry (field 1): key (field 1), Feature body
// (field 2).
std::string MapEntry(absl::string_view key, absl::string_view feature);
// Example{features = 1 {entries}}: `entries` are MapEntry()s (or any bytes),
// already concatenated or given as a list to concatenate.
std::string ExampleOf(absl::string_view entries);
std::string ExampleOf(std::initializer_list<absl::string_view> entries);

}  // namespace tfrecordfs::reference::wire

#endif  // TFRECORDFS_REFERENCE_WIRE_H_
