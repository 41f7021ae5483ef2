// example::SpliceEdit (example/splice.h): an edited record rebuilt from the
// record's own bytes. Originals are written by hand (reference/wire.h), in
// orders and forms no encoder of ours writes (keys out of name order,
// unpacked lists, kindless entries, repeated keys), and the expected results
// are spelt out as bytes: an untouched entry is the original's bytes, a
// changed one the bytes protobuf writes for it.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "gtest/gtest.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/sequence.h"
#include "tfrecordfs/example/splice.h"
#include "tfrecordfs/reference/wire.h"

namespace tfrecordfs::example {
namespace {

namespace w = reference::wire;

Feature Int64s(std::string name, std::vector<int64_t> v) {
  Feature f;
  f.name = std::move(name);
  f.kind = Kind::kInt64;
  f.int64s = std::move(v);
  return f;
}

Feature Floats(std::string name, std::vector<float> v) {
  Feature f;
  f.name = std::move(name);
  f.kind = Kind::kFloat;
  f.floats = std::move(v);
  return f;
}

// `values` must outlive the feature (views).
Feature Bytes(std::string name, const std::vector<std::string>& values) {
  Feature f;
  f.name = std::move(name);
  f.kind = Kind::kBytes;
  for (const std::string& v : values) f.bytes.push_back(v);
  return f;
}

Feature Kindless(std::string name) {
  Feature f;
  f.name = std::move(name);
  return f;
}

// What a folder gives back: the table encoded afresh (name order).
std::string Encoded(std::vector<Feature> features) {
  FeatureTable t;
  t.features = std::move(features);
  std::sort(t.features.begin(), t.features.end(),
            [](const Feature& a, const Feature& b) { return a.name < b.name; });
  return EncodeExample(t);
}

// A TFX-like record: keys out of name order, a float given unpacked, two
// kindless entries (an empty Feature{} and an entry with no value at all).
const std::vector<std::string> kCompany = {"Taxi Affiliation Services"};
const std::vector<std::string> kPayment = {"Credit Card"};
const std::string kFare = w::MapEntry("fare", w::FloatFeature(w::Float(1, 12.5f)));
const std::string kCompanyEntry =
    w::MapEntry("company", w::BytesFeature(w::BytesValues({kCompany[0]})));
const std::string kTract = w::MapEntry("pickup_census_tract", "");
const std::string kNoValue = w::Len(1, w::Len(1, "dropoff"));  // key only, no value field
const std::string kPaymentEntry =
    w::MapEntry("payment_type", w::BytesFeature(w::BytesValues({kPayment[0]})));
const std::string kSeconds = w::MapEntry("trip_seconds", w::Int64Feature(w::PackedVarints({60})));

std::string Original() {
  return w::ExampleOf({kSeconds, kFare, kCompanyEntry, kTract, kNoValue, kPaymentEntry});
}

std::vector<Feature> OriginalFeatures() {
  return {Int64s("trip_seconds", {60}), Floats("fare", {12.5f}),
          Bytes("company", kCompany),   Kindless("pickup_census_tract"),
          Kindless("dropoff"),          Bytes("payment_type", kPayment)};
}

TEST(SpliceEditTest, AnEditThatChangesNothingKeepsTheRecord) {
  const SplicedRecord r = SpliceEdit(Original(), Encoded(OriginalFeatures()));
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(r.payload, "");
}

TEST(SpliceEditTest, AChangedFeatureIsReencodedInPlaceAndTheOthersKeepTheirBytes) {
  std::vector<Feature> edited = OriginalFeatures();
  edited[1] = Floats("fare", {13.5f});
  const SplicedRecord r = SpliceEdit(Original(), Encoded(edited));
  ASSERT_TRUE(r.changed);
  // protobuf writes a FloatList packed: `0a 04 <bits>`.
  const std::string fare = w::MapEntry("fare", w::FloatFeature(w::PackedFloats({13.5f})));
  EXPECT_EQ(r.payload,
            w::ExampleOf({kSeconds, fare, kCompanyEntry, kTract, kNoValue, kPaymentEntry}));
}

TEST(SpliceEditTest, ARemovedFeatureIsDroppedAndANewOneAppended) {
  std::vector<Feature> edited = OriginalFeatures();
  edited.erase(edited.begin() + 2);  // company
  edited.push_back(Int64s("a_new", {7}));
  const SplicedRecord r = SpliceEdit(Original(), Encoded(edited));
  ASSERT_TRUE(r.changed);
  const std::string added = w::MapEntry("a_new", w::Int64Feature(w::PackedVarints({7})));
  EXPECT_EQ(r.payload, w::ExampleOf({kSeconds, kFare, kTract, kNoValue, kPaymentEntry, added}));
}

TEST(SpliceEditTest, KindsMatter) {
  // A kindless feature given a kind, and an empty list that is not kindless.
  std::vector<Feature> edited = OriginalFeatures();
  edited[3] = Int64s("pickup_census_tract", {});
  const SplicedRecord r = SpliceEdit(Original(), Encoded(edited));
  ASSERT_TRUE(r.changed);
  const std::string tract = w::MapEntry("pickup_census_tract", w::Int64Feature(""));
  EXPECT_EQ(r.payload,
            w::ExampleOf({kSeconds, kFare, kCompanyEntry, tract, kNoValue, kPaymentEntry}));
  // -0 is not 0.
  const std::string zero =
      w::ExampleOf({w::MapEntry("x", w::FloatFeature(w::PackedFloats({0.0f})))});
  EXPECT_TRUE(SpliceEdit(zero, Encoded({Floats("x", {-0.0f})})).changed);
  EXPECT_FALSE(SpliceEdit(zero, Encoded({Floats("x", {0.0f})})).changed);
}

TEST(SpliceEditTest, ARepeatedKeyKeepsItsEntriesUnlessChanged) {
  // Protobuf keeps a repeated key's last entry.
  const std::string first = w::MapEntry("k", w::Int64Feature(w::PackedVarints({1})));
  const std::string last = w::MapEntry("k", w::Int64Feature(w::PackedVarints({2})));
  const std::string other = w::MapEntry("o", w::Int64Feature(w::PackedVarints({3})));
  const std::string original = w::ExampleOf({first, other, last});
  EXPECT_FALSE(SpliceEdit(original, Encoded({Int64s("k", {2}), Int64s("o", {3})})).changed);
  const SplicedRecord r = SpliceEdit(original, Encoded({Int64s("k", {2}), Int64s("o", {4})}));
  ASSERT_TRUE(r.changed);
  EXPECT_EQ(r.payload,
            w::ExampleOf({first, w::MapEntry("o", w::Int64Feature(w::PackedVarints({4}))), last}));
  const SplicedRecord k = SpliceEdit(original, Encoded({Int64s("k", {5}), Int64s("o", {3})}));
  ASSERT_TRUE(k.changed);
  EXPECT_EQ(k.payload,
            w::ExampleOf({other, w::MapEntry("k", w::Int64Feature(w::PackedVarints({5})))}));
}

TEST(SpliceEditTest, FeaturesGivenInSeveralFeaturesFieldsEndInOne) {
  const std::string a = w::MapEntry("a", w::Int64Feature(w::PackedVarints({1})));
  const std::string b = w::MapEntry("b", w::Int64Feature(w::PackedVarints({2})));
  const std::string original = w::ExampleOf({b}) + w::ExampleOf({a});
  EXPECT_FALSE(SpliceEdit(original, Encoded({Int64s("a", {1}), Int64s("b", {2})})).changed);
  const SplicedRecord r = SpliceEdit(original, Encoded({Int64s("a", {1}), Int64s("b", {3})}));
  ASSERT_TRUE(r.changed);
  EXPECT_EQ(r.payload, w::ExampleOf({w::MapEntry("b", w::Int64Feature(w::PackedVarints({3}))), a}));
}

TEST(SpliceEditTest, SameBytesDecidesForValuesThatDifferAsBytes) {
  const std::vector<std::string> spelt = {"v1"}, other = {"V1"};
  const std::string original =
      w::ExampleOf({w::MapEntry("t", w::BytesFeature(w::BytesValues({"v1"})))});
  const std::string edited = Encoded({Bytes("t", other)});
  EXPECT_TRUE(SpliceEdit(original, edited).changed);
  const auto caseless = [](absl::string_view a, absl::string_view b) {
    return absl::AsciiStrToLower(a) == absl::AsciiStrToLower(b);
  };
  EXPECT_FALSE(SpliceEdit(original, edited, caseless).changed);
  EXPECT_FALSE(SpliceEdit(original, Encoded({Bytes("t", spelt)})).changed);
}

TEST(SpliceEditTest, RawPayloadsAndKindChanges) {
  EXPECT_FALSE(SpliceEdit("hello world", "hello world").changed);
  SplicedRecord r = SpliceEdit("hello world", "hello there");
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.payload, "hello there");
  // An Example whose folder became a SequenceExample: the edited payload.
  SequenceTable seq;
  seq.lists.push_back({"l", {Int64s("", {1})}});
  const std::string edited = EncodeSequenceExample(seq);
  r = SpliceEdit(Original(), edited);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.payload, edited);
}

// SequenceExample{context = 1, feature_lists = 2}; FeatureLists entries are
// field 1 {key = 1, FeatureList = 2 {feature = 1 (repeated)}}.
std::string ListEntry(absl::string_view key, std::initializer_list<absl::string_view> steps) {
  std::string body;
  for (absl::string_view s : steps) body += w::Len(1, s);
  return w::Len(1, w::Len(1, key) + w::Len(2, body));
}

TEST(SpliceEditTest, SequenceExamplesKeepKindlessContextStepsAndEmptyLists) {
  // TFX's first record: context {i: empty, f: empty}, list s of two steps;
  // plus a list with a kindless middle step and an empty BytesList step.
  const std::string ctx_i = w::MapEntry("i", ""), ctx_f = w::MapEntry("f", "");
  const std::string s = ListEntry("s", {w::BytesFeature(w::BytesValues({"10500"})),
                                        w::BytesFeature(w::BytesValues({"10501"}))});
  const std::string sparse =
      ListEntry("sparse", {w::Int64Feature(w::PackedVarints({1})), "", w::BytesFeature("")});
  const std::string original = w::Len(1, ctx_i + ctx_f) + w::Len(2, sparse + s);
  const std::vector<std::string> v0 = {"10500"}, v1 = {"10501"}, changed = {"99"};
  auto table = [&](const std::vector<std::string>& step1) {
    SequenceTable t;
    t.context.features = {Kindless("f"), Kindless("i")};
    Feature empty_bytes;
    empty_bytes.kind = Kind::kBytes;
    t.lists.push_back({"s", {Bytes("", v0), Bytes("", step1)}});
    t.lists.push_back({"sparse", {Int64s("", {1}), Feature{}, empty_bytes}});
    return t;
  };
  EXPECT_FALSE(SpliceEdit(original, EncodeSequenceExample(table(v1))).changed);
  const SplicedRecord r = SpliceEdit(original, EncodeSequenceExample(table(changed)));
  ASSERT_TRUE(r.changed);
  const std::string s2 = ListEntry(
      "s", {w::BytesFeature(w::BytesValues({"10500"})), w::BytesFeature(w::BytesValues({"99"}))});
  EXPECT_EQ(r.payload, w::Len(1, ctx_i + ctx_f) + w::Len(2, sparse + s2));
  // The empty BytesList step is not kindless: turning it kindless is a change.
  SequenceTable t = table(v1);
  t.lists[1].steps[2] = Feature{};
  EXPECT_TRUE(SpliceEdit(original, EncodeSequenceExample(t)).changed);
  // Without its context features: the context field stays, empty.
  t = table(v1);
  t.context.features.clear();
  const SplicedRecord no_ctx = SpliceEdit(original, EncodeSequenceExample(t));
  ASSERT_TRUE(no_ctx.changed);
  EXPECT_EQ(no_ctx.payload, w::Len(1, "") + w::Len(2, sparse + s));
}

}  // namespace
}  // namespace tfrecordfs::example
