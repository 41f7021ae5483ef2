#include "hostile_corpus.h"

#include <limits>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "feature_builders.h"
#include "tfrecordfs/base/coding.h"
#include "tfrecordfs/base/crc32c.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/record/format.h"
#include "tfrecordfs/record/writer.h"
#include "tfrecordfs/reference/wire.h"

namespace tfrecordfs::gen {
namespace {

using example::FeatureTable;
using reference::wire::BytesFeature;
using reference::wire::BytesValues;
using reference::wire::ExampleOf;
using reference::wire::Fixed64;
using reference::wire::Float;
using reference::wire::FloatFeature;
using reference::wire::Int64Feature;
using reference::wire::Len;
using reference::wire::MapEntry;
using reference::wire::PackedFloats;
using reference::wire::PackedVarints;
using reference::wire::PutVarint;
using reference::wire::Tag;
using reference::wire::Varint;

// `levels` messages nested in field 1 around "x", built outside-in in
// linear time (wrapping one Len() around another would be quadratic).
std::string Nested(int levels) {
  std::vector<std::string> prefixes;
  uint64_t size = 1;
  for (int i = 0; i < levels; ++i) {
    std::string p = Tag(1, 2);
    PutVarint(&p, size);
    size += p.size();
    prefixes.push_back(std::move(p));
  }
  std::string out;
  out.reserve(size);
  for (auto it = prefixes.rbegin(); it != prefixes.rend(); ++it) out += *it;
  return out + "x";
}

std::string SmallExample(uint64_t i) {
  const std::string name = absl::StrCat("record-", i);
  FeatureTable t;
  t.features.push_back(Int64s("id", {static_cast<int64_t>(i)}));
  t.features.push_back(Bytes("name", {name}));
  return example::EncodeExample(t);
}

}  // namespace

size_t HostileShard::Add(std::string payload, bool example) {
  records.push_back({true, example, bytes.size(), payload});
  record::AppendFramed(&bytes, payload);
  return records.size() - 1;
}

void HostileShard::AddGood(size_t n) {
  for (size_t i = 0; i < n; ++i) Add(SmallExample(records.size()));
}

uint64_t HostileShard::HeaderOf(size_t i) const { return records[i].offset; }

uint64_t HostileShard::DataOf(size_t i) const { return records[i].offset + record::kHeaderSize; }

void HostileShard::Flip(uint64_t offset) {
  bytes[offset] = static_cast<char>(bytes[offset] ^ 0x01);
}

void HostileShard::SetLengthWithCrc(size_t i, uint64_t len) {
  char* h = &bytes[HeaderOf(i)];
  EncodeFixed64(h, len);
  EncodeFixed32(h + record::kLengthSize, crc32c::Mask(crc32c::Value(h, record::kLengthSize)));
  records[i].intact = false;
}

HostileCorpus BuildHostileCorpus() {
  HostileCorpus c;
  auto shard = [&](std::string name) -> HostileShard& {
    c.shards.emplace_back();
    c.shards.back().name = std::move(name);
    return c.shards.back();
  };

  // Truncated endings: the shard ends at the last good record.
  {
    HostileShard& s = shard("truncated_header.tfrecord");
    s.AddGood(3);
    std::string next;
    record::AppendFramed(&next, SmallExample(3));
    s.bytes += next.substr(0, 7);
  }
  {
    HostileShard& s = shard("truncated_payload.tfrecord");
    s.AddGood(3);
    std::string next;
    record::AppendFramed(&next, std::string(100, 'p'));
    s.bytes += next.substr(0, record::kHeaderSize + 40);
  }
  {
    HostileShard& s = shard("truncated_data_crc.tfrecord");
    s.AddGood(3);
    std::string next;
    record::AppendFramed(&next, SmallExample(3));
    s.bytes += next.substr(0, next.size() - 2);
  }
  for (int n = 1; n <= 11; ++n) {
    HostileShard& s = shard(absl::StrFormat("stray_bytes_%02d.tfrecord", n));
    s.AddGood(2);
    // Zeros look like the start of a header of a zero-length record.
    s.bytes += std::string(static_cast<size_t>(n), n % 2 ? '\0' : '\x5a');
  }
  // Damage in the middle costs only the damaged record.
  {
    HostileShard& s = shard("length_crc_mismatch.tfrecord");
    s.AddGood(5);
    s.Flip(s.HeaderOf(2) + record::kLengthSize + 1);
    s.records[2].intact = false;
  }
  {
    HostileShard& s = shard("data_crc_mismatch.tfrecord");
    s.AddGood(5);
    s.Flip(s.DataOf(2) + 3);
    s.records[2].intact = false;
  }
  {
    HostileShard& s = shard("huge_length.tfrecord");
    s.AddGood(5);
    s.SetLengthWithCrc(2, ~uint64_t{0} - 15);  // 2^64 - 16: would wrap any `offset + 16 + len`
  }
  {
    HostileShard& s = shard("huge_length_last.tfrecord");
    s.AddGood(2);
    std::string h(record::kHeaderSize, '\0');
    EncodeFixed64(&h[0], ~uint64_t{0});
    EncodeFixed32(&h[record::kLengthSize],
                  crc32c::Mask(crc32c::Value(h.data(), record::kLengthSize)));
    s.bytes += h + std::string(20, 'x');
  }
  shard("empty.tfrecord");
  {
    HostileShard& s = shard("zero_length.tfrecord");
    s.AddGood(1);
    s.Add("");  // an empty payload is an empty Example: no features
    s.AddGood(1);
  }

  // Files that are not TFRecord shards, two of them named like one.
  c.plain_files.emplace_back(
      "not_a_tfrecord.tfrecord",
      "This is a text file with a TFRecord-like name.\nIt has no records.\n");
  {
    std::mt19937 rng(1234);
    std::string junk(1000, '\0');
    for (char& ch : junk) ch = static_cast<char>(rng() & 0xff);
    c.plain_files.emplace_back("part-00000-of-00004", junk);
  }
  c.plain_files.emplace_back(
      "compressed.tfrecord.gz",
      std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10) + "not really deflate");

  // Payloads that are not Examples: one record.bin each.
  {
    HostileShard& s = shard("non_examples.tfrecord");
    s.Add("hello world", false);
    s.Add("12345", false);
    s.Add("success", false);
    // TensorBoard Event{wall_time = 1 (double), step = 2, file_version = 3}.
    const std::string event =
        Fixed64(1, 0x41d7d3f6c0000000ull) + Varint(2, 0) + Len(3, "brain.Event:2");
    s.Add(event, false);
    // Event{wall_time, step, summary = 5 {value = 1 {tag = 1, tensor = 8}}}.
    const std::string summary =
        Fixed64(1, 0x41d7d3f6c1000000ull) + Varint(2, 7) +
        Len(5, Len(1, Len(1, "AverageReturn") + Len(8, Varint(1, 1) + Float(5, 2.5f))));
    s.Add(summary, false);
    // ExampleListWithContext{examples = 1 [...], context = 2}: the real shape.
    const std::string ex1 =
        ExampleOf({MapEntry("relevance", Int64Feature(PackedVarints({1}))),
                   MapEntry("document_tokens", BytesFeature(BytesValues({"a", "cat"})))});
    const std::string ex2 = ExampleOf({MapEntry("relevance", Int64Feature(PackedVarints({0})))});
    const std::string ctx =
        ExampleOf({MapEntry("query_tokens", BytesFeature(BytesValues({"cats"})))});
    s.Add(Len(1, ex1) + Len(1, ex2) + Len(2, ctx), false);
    // ExampleListWithContext without a context: protobuf-wise this is an
    // Example whose "feature names" are serialized map entries (control
    // bytes) holding no kind of value.
    s.Add(Len(1, ex1) + Len(1, ex2), false);
    // SequenceExample{context = 1, feature_lists = 2}.
    const std::string lists =
        Len(1, Len(1, "frames") + Len(2, Len(1, Int64Feature(PackedVarints({1, 2})))));
    s.Add(
        Len(1, Len(1, Len(1, "length") + Len(2, Int64Feature(PackedVarints({2}))))) + Len(2, lists),
        false);
  }
  // Malformed protobuf: the decoder refuses it; the payload is shown raw.
  {
    HostileShard& s = shard("malformed_protobuf.tfrecord");
    s.Add(std::string(11, '\xff') + '\x01', false);   // varint longer than 10 bytes
    s.Add(std::string("\x0a\xff\xff", 3), false);     // truncated length varint
    s.Add(std::string("\x0a\x7f") + "short", false);  // length past the end
    s.Add(Nested(100000), false);                     // 100000 levels of field 1
    s.Add(Varint(1, 5), false);                       // Example.features as a varint
    s.Add(ExampleOf({MapEntry("a", Len(3, Float(1, 1.0f)))}), false);          // int64 as fixed32
    s.Add(std::string("\x00\x01", 2), false);                                  // field number 0
    s.Add(std::string("\x0b\x0c", 2), false);                                  // group start / end
    s.Add(ExampleOf({MapEntry("f", FloatFeature(Len(1, "abc")))}), false);     // packed floats % 4
    s.Add(ExampleOf({MapEntry("f", FloatFeature(Tag(1, 5) + "ab"))}), false);  // cut fixed32
    s.Add(ExampleOf({MapEntry("bad\xff\xfe", Int64Feature(PackedVarints({1})))}),
          false);                                    // key not UTF-8
    s.Add(ExampleOf({Len(1, Len(3, "k"))}), false);  // unknown field in a map entry
    s.Add(ExampleOf({MapEntry("k", Int64Feature(PackedVarints({1})))}) + Varint(9, 1),
          false);  // unknown field after features
  }
  // Wire-format variants TensorFlow's parser decodes: shown as files.
  {
    HostileShard& s = shard("wire_variants.tfrecord");
    // 0: unpacked int64 values.
    s.Add(ExampleOf({MapEntry("ids", Int64Feature(Varint(1, 1) + Varint(1, 2) + Varint(1, 3)))}));
    // 1: unpacked floats.
    s.Add(ExampleOf({MapEntry("xs", FloatFeature(Float(1, 1.5f) + Float(1, -2.0f)))}));
    // 2: two packed int64 runs.
    s.Add(ExampleOf({MapEntry("ids", Int64Feature(PackedVarints({1, 2}) + PackedVarints({3})))}));
    // 3: packed, unpacked, packed floats.
    s.Add(ExampleOf({MapEntry("xs", FloatFeature(PackedFloats({0.5f}) + Float(1, 0.25f) +
                                                 PackedFloats({8.0f, 16.0f})))}));
    // 4: duplicate keys, last wins (an int64 `k` replaced by a bytes `k`).
    s.Add(ExampleOf({MapEntry("k", Int64Feature(PackedVarints({1}))),
                     MapEntry("k", BytesFeature(BytesValues({"last"})))}));
    // 5: empty lists of each kind.
    s.Add(ExampleOf({MapEntry("b", BytesFeature("")), MapEntry("f", FloatFeature("")),
                     MapEntry("i", Int64Feature(""))}));
    // 6: kindless features: Feature{} and an entry with no value at all.
    s.Add(ExampleOf({MapEntry("present", Int64Feature(PackedVarints({7}))), MapEntry("missing", ""),
                     Len(1, Len(1, "novalue"))}));
    // 7: Example.features twice: the maps merge.
    s.Add(ExampleOf({MapEntry("a", Int64Feature(PackedVarints({1})))}) +
          ExampleOf({MapEntry("b", Int64Feature(PackedVarints({2})))}));
    // 8: a value given twice in one entry merges; a later kind replaces.
    s.Add(ExampleOf({Len(1, Len(1, "m") + Len(2, Int64Feature(PackedVarints({1}))) +
                                Len(2, Int64Feature(PackedVarints({2})))),
                     Len(1, Len(1, "v") + Len(2, Int64Feature(PackedVarints({5})) +
                                                     BytesFeature(BytesValues({"x"}))))}));
    // 9: extreme int64s (10-byte varints).
    s.Add(ExampleOf(
        {MapEntry("n", Int64Feature(PackedVarints({-1, std::numeric_limits<int64_t>::min(),
                                                   std::numeric_limits<int64_t>::max()})))}));
    // 10: an empty Example (no features field at all) and 11: features {}.
    s.Add("");
    s.Add(Len(1, ""));
  }
  // Awkward feature names, one record each (see tests/mount/hostile for the
  // file names naming.h gives them).
  {
    HostileShard& s = shard("names.tfrecord");
    const std::string names[] = {
        std::string(""),
        std::string("."),
        std::string(".."),
        std::string(300, 'x'),
        std::string("/lead"),
        std::string("trail/"),
        std::string("a//b"),
        std::string("nul\0byte", 8),
        std::string("ctl\x01\x7f"),
        std::string("100%"),
        std::string("a/b/c"),
        std::string("trailing~"),
        std::string(".hidden/.x"),
        std::string("0"),
        std::string("\xc3\xa9t\xc3\xa9/\xe6\x97\xa5"),
    };
    for (const std::string& n : names) {
      s.Add(ExampleOf({MapEntry(n, Int64Feature(PackedVarints({1})))}));
    }
    // Invalid UTF-8 in a name: not an Example by proto3's rules.
    s.Add(ExampleOf({MapEntry("bad\xc3(", Int64Feature(PackedVarints({1})))}), false);
    // A numeric `image` beside `image/encoded`; a root feature that would be
    // record.bin; a long multi-byte name.
    s.Add(ExampleOf(
        {MapEntry("image", Int64Feature(PackedVarints({3}))),
         MapEntry("image/encoded", BytesFeature(BytesValues({"\xff\xd8\xff\xe0jpeg"})))}));
    s.Add(ExampleOf({MapEntry("record", BytesFeature(BytesValues({std::string("\x00\x01", 2)})))}));
    std::string long_utf8;
    for (int i = 0; i < 150; ++i) long_utf8 += "\xc3\xa9";  // 300 bytes of 'é'
    s.Add(ExampleOf({MapEntry(long_utf8, BytesFeature(BytesValues({"v"})))}));
  }
  // More files than one record can show: record.bin, with a warning.
  {
    HostileShard& s = shard("wide.tfrecord");
    FeatureTable t;
    std::vector<std::string> names;
    for (int i = 0; i < 70000; ++i) names.push_back(absl::StrFormat("f%05d", i));
    for (const auto& n : names) t.features.push_back(Int64s(n, {1}));
    s.Add(example::EncodeExample(t), false);
    s.AddGood(1);
  }
  return c;
}

std::string TinyPayload(uint64_t k) {
  return ExampleOf({MapEntry("i", Int64Feature(PackedVarints({static_cast<int64_t>(k)})))});
}

}  // namespace tfrecordfs::gen
