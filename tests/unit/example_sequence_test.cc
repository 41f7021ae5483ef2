// The SequenceExample decoder against protobuf's parser, the encoder round
// trip, and what is not a SequenceExample.
#include <random>
#include <string>

#include "example.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tfrecordfs/example/record.h"
#include "tfrecordfs/example/sequence.h"

namespace tfrecordfs::example {
namespace {

using ::testing::HasSubstr;

std::string Ser(const proto::SequenceExample& p) {
  std::string s;
  EXPECT_TRUE(p.SerializeToString(&s));
  return s;
}

// Canonical text of a feature, for comparing both sides.
std::string Canon(const Feature& f) {
  std::string s = KindName(f.kind);
  for (absl::string_view b : f.bytes) absl::StrAppend(&s, " '", b, "'");
  for (float v : f.floats) absl::StrAppend(&s, " ", v);
  for (int64_t v : f.int64s) absl::StrAppend(&s, " ", v);
  return s;
}
std::string Canon(const proto::Feature& pf) {
  Feature f;
  if (pf.has_bytes_list()) {
    f.kind = Kind::kBytes;
    for (const auto& b : pf.bytes_list().value()) f.bytes.push_back(b);
  } else if (pf.has_float_list()) {
    f.kind = Kind::kFloat;
    f.floats.assign(pf.float_list().value().begin(), pf.float_list().value().end());
  } else if (pf.has_int64_list()) {
    f.kind = Kind::kInt64;
    f.int64s.assign(pf.int64_list().value().begin(), pf.int64_list().value().end());
  }
  return Canon(f);
}
std::string Canon(const SequenceTable& t) {
  std::string s;
  for (const Feature& f : t.context.features)
    absl::StrAppend(&s, "ctx ", f.name, ": ", Canon(f), "\n");
  for (const FeatureList& l : t.lists) {
    absl::StrAppend(&s, "list ", l.name, "\n");
    for (const Feature& f : l.steps) absl::StrAppend(&s, "  ", Canon(f), "\n");
  }
  return s;
}
std::string Canon(const proto::SequenceExample& p) {
  std::map<std::string, std::string> ctx;
  for (const auto& [k, v] : p.context().feature()) ctx[k] = Canon(v);
  std::string s;
  for (const auto& [k, v] : ctx) absl::StrAppend(&s, "ctx ", k, ": ", v, "\n");
  std::map<std::string, const proto::FeatureList*> lists;
  for (const auto& [k, v] : p.feature_lists().feature_list()) lists[k] = &v;
  for (const auto& [k, v] : lists) {
    absl::StrAppend(&s, "list ", k, "\n");
    for (const auto& f : v->feature()) absl::StrAppend(&s, "  ", Canon(f), "\n");
  }
  return s;
}

proto::SequenceExample Sample() {
  proto::SequenceExample p;
  auto& ctx = *p.mutable_context()->mutable_feature();
  ctx["length"].mutable_int64_list()->add_value(3);
  ctx["id"].mutable_bytes_list()->add_value("clip-7");
  auto& lists = *p.mutable_feature_lists()->mutable_feature_list();
  auto& frames = lists["frames"];
  for (int i = 0; i < 3; ++i)
    frames.add_feature()->mutable_bytes_list()->add_value("jpeg" + std::to_string(i));
  auto& labels = lists["labels"];
  labels.add_feature()->mutable_float_list()->add_value(0.5f);
  labels.add_feature();  // a kindless step
  labels.add_feature()->mutable_int64_list()->add_value(-4);
  lists["empty"];
  return p;
}

TEST(DecodeSequenceExample, AgreesWithProtobuf) {
  const proto::SequenceExample p = Sample();
  const std::string b = Ser(p);
  auto t = DecodeSequenceExample(b);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(Canon(*t), Canon(p));
  ASSERT_EQ(t->lists.size(), 3u);
  EXPECT_EQ(t->lists[0].name, "empty");
  EXPECT_EQ(t->lists[1].name, "frames");
  EXPECT_EQ(t->lists[1].steps.size(), 3u);
  EXPECT_EQ(t->lists[2].steps[1].kind, Kind::kNone);
  // Bytes values are views into the payload.
  const absl::string_view v = t->lists[1].steps[2].bytes[0];
  EXPECT_GE(v.data(), b.data());
  EXPECT_LE(v.data() + v.size(), b.data() + b.size());
  EXPECT_EQ(v, "jpeg2");
  // Not an Example.
  EXPECT_FALSE(DecodeExample(b).ok());
}

TEST(EncodeSequenceExample, RoundTrips) {
  const std::string b = Ser(Sample());
  auto t = DecodeSequenceExample(b);
  ASSERT_TRUE(t.ok());
  const std::string again = EncodeSequenceExample(*t);
  proto::SequenceExample p;
  ASSERT_TRUE(p.ParseFromString(again));
  EXPECT_EQ(Canon(p), Canon(Sample()));
  auto t2 = DecodeSequenceExample(again);
  ASSERT_TRUE(t2.ok());
  EXPECT_EQ(Canon(*t2), Canon(*t));
  // Without lists it still writes feature_lists, so it stays a SequenceExample.
  SequenceTable only_context;
  only_context.context = t->context;
  EXPECT_TRUE(DecodeSequenceExample(EncodeSequenceExample(only_context)).ok());
  EXPECT_EQ(EncodeSequenceExample(SequenceTable{}), std::string("\x12\x00", 2));
}

TEST(DecodeSequenceExample, WithoutFeatureListsItIsAnExample) {
  proto::SequenceExample p = Sample();
  p.clear_feature_lists();
  const std::string b = Ser(p);
  EXPECT_THAT(DecodeSequenceExample(b).status().message(), HasSubstr("no feature_lists"));
  EXPECT_TRUE(DecodeExample(b).ok());
  EXPECT_TRUE(DecodeSequenceExample(std::string("\x12\x00", 2)).ok());
}

// DecodeRecord, the one decision every caller uses: Example first (a
// SequenceExample without lists is one), then SequenceExample, else raw with
// both decoders' reasons.
TEST(DecodeRecord, ExampleThenSequenceExampleElseRaw) {
  proto::SequenceExample p = Sample();
  const std::string with_lists = Ser(p);  // the decoded views point into it
  DecodedRecord seq = DecodeRecord(with_lists);
  ASSERT_EQ(seq.kind, PayloadKind::kSequenceExample);
  EXPECT_EQ(Canon(seq.sequence), Canon(Sample()));

  p.clear_feature_lists();
  const std::string no_lists = Ser(p);
  DecodedRecord ex = DecodeRecord(no_lists);
  ASSERT_EQ(ex.kind, PayloadKind::kExample);
  EXPECT_EQ(ex.example.features.size(), p.context().feature_size());
  EXPECT_TRUE(ex.raw_reason.empty());

  // Field 3 of wire type 0: neither message has it.
  DecodedRecord raw = DecodeRecord(std::string("\x18\x01", 2));
  EXPECT_EQ(raw.kind, PayloadKind::kRaw);
  EXPECT_THAT(raw.raw_reason, HasSubstr("not a tf.train.Example"));
  EXPECT_THAT(raw.raw_reason, HasSubstr("not a tf.train.SequenceExample"));
  EXPECT_STREQ(PayloadKindName(raw.kind), "raw");
}

TEST(DecodeSequenceExample, MergesAndLastKeyWinsLikeProtobuf) {
  proto::SequenceExample a, b2;
  (*a.mutable_feature_lists()->mutable_feature_list())["x"]
      .add_feature()
      ->mutable_int64_list()
      ->add_value(1);
  (*b2.mutable_feature_lists()->mutable_feature_list())["x"]
      .add_feature()
      ->mutable_int64_list()
      ->add_value(2);
  (*b2.mutable_context()->mutable_feature())["c"].mutable_float_list()->add_value(1);
  const std::string cat = Ser(a) + Ser(b2);  // concatenation = merge
  proto::SequenceExample p;
  ASSERT_TRUE(p.ParseFromString(cat));
  auto t = DecodeSequenceExample(cat);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(Canon(*t), Canon(p));
  ASSERT_EQ(t->lists.size(), 1u);
  EXPECT_EQ(t->lists[0].steps.size(), 1u);  // map key repeated: last entry wins
  EXPECT_EQ(t->lists[0].steps[0].int64s[0], 2);
}

TEST(DecodeSequenceExample, Rejects) {
  const std::string good = Ser(Sample());
  for (size_t n = 0; n < good.size(); ++n) {
    auto t = DecodeSequenceExample(good.substr(0, n));
    if (t.ok()) {
      proto::SequenceExample p;
      EXPECT_TRUE(p.ParseFromString(good.substr(0, n))) << n;
    }
  }
  auto msg = [](const std::string& b) {
    return std::string(DecodeSequenceExample(b).status().message());
  };
  EXPECT_THAT(msg(good + "\x18\x01"), HasSubstr("unexpected field 3"));
  EXPECT_THAT(msg(std::string("\x12\x05\x0a\x03\x0a\x01\xff", 7)), HasSubstr("UTF-8"));
  // A bad Feature inside a list says SequenceExample, not Example.
  EXPECT_THAT(msg(std::string("\x12\x08\x0a\x06\x12\x04\x0a\x02\x20\x01", 10)),
              HasSubstr("not a tf.train.SequenceExample: unexpected field 4"));
  EXPECT_FALSE(DecodeSequenceExample("").ok());
  EXPECT_FALSE(DecodeSequenceExample("plain text").ok());
}

TEST(DecodeSequenceExample, RandomMutationsAgreeWithProtobuf) {
  std::mt19937 rng(3);
  const std::string good = Ser(Sample());
  for (int i = 0; i < 20000; ++i) {
    std::string m = good;
    const size_t at = rng() % m.size();
    if (rng() % 2) {
      m[at] = static_cast<char>(rng());
    } else {
      m.erase(at, 1);
    }
    auto t = DecodeSequenceExample(m);
    if (!t.ok()) {
      ASSERT_TRUE(absl::IsInvalidArgument(t.status()));
      continue;
    }
    proto::SequenceExample p;
    ASSERT_TRUE(p.ParseFromString(m));
    ASSERT_EQ(Canon(*t), Canon(p));
  }
}

}  // namespace
}  // namespace tfrecordfs::example
