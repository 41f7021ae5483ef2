// ExampleListWithContext payloads (example/example_list.h): how DecodeRecord
// tells them from Examples and SequenceExamples (example/record.h), and how
// SpliceEdit keeps the bytes of what an edit left alone (example/splice.h).
// Payloads are written by hand (reference/wire.h), in the order TF-Ranking's
// writers use (examples, then the context) and in others.
#include "tfrecordfs/example/example_list.h"

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/record.h"
#include "tfrecordfs/example/splice.h"
#include "tfrecordfs/reference/wire.h"

namespace tfrecordfs::example {
namespace {

namespace w = reference::wire;

const std::string kRel1 = w::MapEntry("relevance", w::Int64Feature(w::PackedVarints({1})));
const std::string kRel0 = w::MapEntry("relevance", w::Int64Feature(w::PackedVarints({0})));
const std::string kDoc1 = w::MapEntry("doc", w::BytesFeature(w::BytesValues({"this", "is"})));
const std::string kDoc0 = w::MapEntry("doc", w::BytesFeature(w::BytesValues({"other"})));
const std::string kQuery = w::MapEntry("query", w::BytesFeature(w::BytesValues({"q"})));
// Entries out of name order, as the real eval_elwc.tfrecord has them.
const std::string kEx0 = w::ExampleOf({kRel1, kDoc1});
const std::string kEx1 = w::ExampleOf({kRel0, kDoc0});
const std::string kContext = w::ExampleOf({kQuery});

std::string Elwc(const std::vector<std::string>& examples, const std::string* context,
                 bool context_first = false) {
  std::string out;
  if (context != nullptr && context_first) out += w::Len(2, *context);
  for (const std::string& e : examples) out += w::Len(1, e);
  if (context != nullptr && !context_first) out += w::Len(2, *context);
  return out;
}

std::string Names(const FeatureTable& t) {
  std::string out;
  for (const Feature& f : t.features) out += f.name + ";";
  return out;
}

TEST(ExampleListTest, DecodesExamplesAndContext) {
  const std::string p = Elwc({kEx0, kEx1}, &kContext);
  const DecodedRecord r = DecodeRecord(p);
  ASSERT_EQ(r.kind, PayloadKind::kExampleList) << r.raw_reason;
  ASSERT_EQ(r.list.examples.size(), 2u);
  EXPECT_EQ(Names(r.list.examples[0]), "doc;relevance;");
  EXPECT_EQ(r.list.examples[1].features[1].int64s, std::vector<int64_t>{0});
  EXPECT_TRUE(r.list.has_context);
  EXPECT_EQ(Names(r.list.context), "query;");
  EXPECT_STREQ(PayloadKindName(r.kind), "ExampleListWithContext");
}

// Without a context an ELWC parses as an Example whose "names" are
// serialized map entries; without examples its context parses as
// FeatureLists named the same way. Both were raw or garbage before.
TEST(ExampleListTest, WithoutContextOrWithoutExamplesIsStillAnExampleList) {
  // (Each decoded table's bytes are views into its payload, kept alive here.)
  const std::string no_context_payload = Elwc({kEx0, kEx1}, nullptr);
  const DecodedRecord no_context = DecodeRecord(no_context_payload);
  ASSERT_EQ(no_context.kind, PayloadKind::kExampleList) << no_context.raw_reason;
  EXPECT_FALSE(no_context.list.has_context);
  EXPECT_EQ(no_context.list.examples.size(), 2u);
  const std::string no_examples_payload = Elwc({}, &kContext);
  const DecodedRecord no_examples = DecodeRecord(no_examples_payload);
  ASSERT_EQ(no_examples.kind, PayloadKind::kExampleList) << no_examples.raw_reason;
  EXPECT_TRUE(no_examples.list.examples.empty());
  EXPECT_EQ(Names(no_examples.list.context), "query;");
  const std::string empty_context;
  const std::string with_empty_payload = Elwc({kEx0}, &empty_context);
  const DecodedRecord with_empty = DecodeRecord(with_empty_payload);
  ASSERT_EQ(with_empty.kind, PayloadKind::kExampleList) << with_empty.raw_reason;
  EXPECT_TRUE(with_empty.list.has_context);
  EXPECT_TRUE(with_empty.list.context.features.empty());
}

TEST(ExampleListTest, ExamplesAndSequenceExamplesStayWhatTheyAre) {
  EXPECT_EQ(DecodeRecord(kEx0).kind, PayloadKind::kExample);
  EXPECT_EQ(DecodeRecord("").kind, PayloadKind::kExample);
  // A SequenceExample: context Features, then FeatureLists.
  const std::string lists =
      w::Len(1, w::Len(1, "steps") + w::Len(2, w::Len(1, w::Int64Feature(w::PackedVarints({3})))));
  const std::string seq = w::Len(1, w::Len(1, w::Len(1, "k"))) + w::Len(2, lists);
  EXPECT_EQ(DecodeRecord(seq).kind, PayloadKind::kSequenceExample);
  // The documented ambiguities, decided for the earlier kind.
  EXPECT_EQ(DecodeRecord(std::string("\x12\x00", 2)).kind, PayloadKind::kSequenceExample);
  EXPECT_EQ(DecodeRecord(Elwc({w::ExampleOf("")}, nullptr)).kind, PayloadKind::kExample);
}

TEST(ExampleListTest, StrictLikeTheExampleDecoder) {
  // A second context field, an unknown field, a bad Example inside.
  std::string two = Elwc({kEx0}, &kContext) + w::Len(2, kContext);
  EXPECT_EQ(DecodeRecord(two).kind, PayloadKind::kRaw);
  auto bad = DecodeExampleList(two);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("a second context field"), std::string::npos);
  EXPECT_EQ(DecodeRecord(Elwc({kEx0}, &kContext) + w::Varint(3, 1)).kind, PayloadKind::kRaw);
  const std::string broken = w::Len(1, w::Varint(7, 1));
  const std::string p = Elwc({kEx0, broken}, &kContext);
  const DecodedRecord r = DecodeRecord(p);
  EXPECT_EQ(r.kind, PayloadKind::kRaw);
  // The ELWC decoder's reason says where, counted from the payload's start.
  auto why = DecodeExampleList(p);
  ASSERT_FALSE(why.ok());
  EXPECT_NE(why.status().message().find("not a tensorflow.serving.ExampleListWithContext"),
            std::string::npos)
      << why.status().message();
}

TEST(ExampleListTest, EncodeRoundTrips) {
  const std::string p = Elwc({kEx0, kEx1}, &kContext);
  const DecodedRecord r = DecodeRecord(p);
  ASSERT_EQ(r.kind, PayloadKind::kExampleList);
  const std::string again = EncodeExampleList(r.list);
  const DecodedRecord r2 = DecodeRecord(again);
  ASSERT_EQ(r2.kind, PayloadKind::kExampleList);
  EXPECT_EQ(EncodeExampleList(r2.list), again);
}

// ---- SpliceEdit ----

// The edited folder's payload: every Example encoded afresh.
std::string Edited(const std::string& original, void (*change)(ExampleListTable*)) {
  DecodedRecord r = DecodeRecord(original);
  EXPECT_EQ(r.kind, PayloadKind::kExampleList);
  change(&r.list);
  return EncodeExampleList(r.list);
}

TEST(ExampleListSpliceTest, UnchangedKeepsTheOriginal) {
  const std::string p = Elwc({kEx0, kEx1}, &kContext, /*context_first=*/true);
  const SplicedRecord s = SpliceEdit(p, Edited(p, [](ExampleListTable*) {}));
  EXPECT_FALSE(s.changed);
}

TEST(ExampleListSpliceTest, OneFeatureOfOneExampleChangesOnlyItsEntry) {
  const std::string p = Elwc({kEx0, kEx1}, &kContext);
  const SplicedRecord s = SpliceEdit(p, Edited(p, [](ExampleListTable* t) {
                                       t->examples[1].features[1].int64s = {7};  // relevance
                                     }));
  ASSERT_TRUE(s.changed);
  const std::string rel7 = w::MapEntry("relevance", w::Int64Feature(w::PackedVarints({7})));
  EXPECT_EQ(absl::BytesToHexString(s.payload),
            absl::BytesToHexString(Elwc({kEx0, w::ExampleOf({rel7, kDoc0})}, &kContext)));
}

TEST(ExampleListSpliceTest, ContextEditKeepsItsPlaceAndTheExamples) {
  const std::string p = Elwc({kEx0, kEx1}, &kContext, /*context_first=*/true);
  const SplicedRecord s = SpliceEdit(p, Edited(p, [](ExampleListTable* t) {
                                       t->context.features[0].kind = Kind::kNone;
                                       t->context.features[0].bytes.clear();
                                     }));
  ASSERT_TRUE(s.changed);
  const std::string none = w::ExampleOf({w::MapEntry("query", "")});
  EXPECT_EQ(absl::BytesToHexString(s.payload),
            absl::BytesToHexString(Elwc({kEx0, kEx1}, &none, /*context_first=*/true)));
}

TEST(ExampleListSpliceTest, RemovedExampleDropsOnlyIt) {
  const std::string ex2 = w::ExampleOf({kRel0});
  const std::string p = Elwc({kEx0, kEx1, ex2}, &kContext);
  const SplicedRecord s = SpliceEdit(
      p, Edited(p, [](ExampleListTable* t) { t->examples.erase(t->examples.begin() + 1); }));
  ASSERT_TRUE(s.changed);
  EXPECT_EQ(absl::BytesToHexString(s.payload),
            absl::BytesToHexString(Elwc({kEx0, ex2}, &kContext)));
}

TEST(ExampleListSpliceTest, AddedExampleAndContextAreEncodedAfresh) {
  const std::string p = Elwc({kEx0}, nullptr);
  const SplicedRecord s = SpliceEdit(p, Edited(p, [](ExampleListTable* t) {
                                       t->examples.push_back(FeatureTable{});
                                       t->has_context = true;
                                     }));
  ASSERT_TRUE(s.changed);
  const std::string empty_example = EncodeExample(FeatureTable{});
  const std::string empty_context = EncodeExample(FeatureTable{});
  EXPECT_EQ(absl::BytesToHexString(s.payload),
            absl::BytesToHexString(Elwc({kEx0, empty_example}, &empty_context)));
}

// ---- Example-in-Example ----

std::string Eie(const std::vector<std::string>& examples, const std::string* context) {
  std::string entries;
  if (context != nullptr) {
    entries += w::MapEntry("serialized_context", w::BytesFeature(w::Len(1, *context)));
  }
  std::string values;
  for (const std::string& e : examples) values += w::Len(1, e);
  entries += w::MapEntry("serialized_examples", w::BytesFeature(values));
  return w::ExampleOf(entries);
}

TEST(ExampleInExampleTest, RecognisedOnlyWithItsTwoFeaturesOfExamples) {
  // The decoded table's bytes are views into the payload: it must outlive them.
  const std::string payload = Eie({kEx0, "", kEx1}, &kContext);
  const DecodedRecord r = DecodeRecord(payload);
  ASSERT_EQ(r.kind, PayloadKind::kExampleInExample);
  ASSERT_EQ(r.list.examples.size(), 3u);
  EXPECT_TRUE(r.list.examples[1].features.empty());
  EXPECT_EQ(Names(r.list.context), "query;");
  EXPECT_EQ(Names(r.example), "serialized_context;serialized_examples;");
  EXPECT_EQ(DecodeRecord(Eie({kEx0}, nullptr)).kind, PayloadKind::kExampleInExample);
  // A value that is not an Example, another feature, a context of two
  // values: a plain Example.
  EXPECT_EQ(DecodeRecord(Eie({kEx0, "not an example"}, nullptr)).kind, PayloadKind::kExample);
  EXPECT_EQ(DecodeRecord(w::ExampleOf({kRel1, w::MapEntry("serialized_examples",
                                                          w::BytesFeature(w::Len(1, kEx0)))}))
                .kind,
            PayloadKind::kExample);
  const std::string two = w::ExampleOf({w::MapEntry(
      "serialized_context", w::BytesFeature(w::Len(1, kContext) + w::Len(1, kContext)))});
  EXPECT_EQ(DecodeRecord(two).kind, PayloadKind::kExample);
  const std::string encoded = EncodeExampleInExample(r.list);
  const DecodedRecord again = DecodeRecord(encoded);
  ASSERT_EQ(again.kind, PayloadKind::kExampleInExample);
  EXPECT_EQ(EncodeExampleInExample(again.list), encoded);
}

TEST(ExampleInExampleTest, SpliceKeepsUntouchedValuesAndTheContextEntry) {
  const std::string p = Eie({kEx0, kEx1}, &kContext);
  DecodedRecord r = DecodeRecord(p);
  ASSERT_EQ(r.kind, PayloadKind::kExampleInExample);
  r.list.examples[1].features[1].int64s = {7};
  const SplicedRecord s = SpliceEdit(p, EncodeExampleInExample(r.list));
  ASSERT_TRUE(s.changed);
  const std::string rel7 = w::MapEntry("relevance", w::Int64Feature(w::PackedVarints({7})));
  EXPECT_EQ(absl::BytesToHexString(s.payload),
            absl::BytesToHexString(Eie({kEx0, w::ExampleOf({rel7, kDoc0})}, &kContext)));
  EXPECT_FALSE(SpliceEdit(p, EncodeExampleInExample(DecodeRecord(p).list)).changed);
}

}  // namespace
}  // namespace tfrecordfs::example
