// The layout in both directions: content formatting/parsing, escaping, the
// forward layout of hand-picked records, and the key property that mapping
// every file of a layout back (as the staging path does) reproduces the
// original features exactly.
#include "tfrecordfs/naming/naming.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/canon.h"
#include "tfrecordfs/base/utf8.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/example/sequence.h"
#include "tfrecordfs/tensor/npy.h"
#include "tfrecordfs/tensor/png.h"
#include "tfrecordfs/tensor/tensor.h"

namespace tfrecordfs::naming {
namespace {

using example::Feature;
using example::FeatureTable;
using example::Kind;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using test::Bits;
using test::FromBits;
std::vector<std::string> Strings(const std::vector<absl::string_view>& vs) {
  std::vector<std::string> out;
  for (absl::string_view v : vs) out.emplace_back(v);
  return out;
}

// ---------------------------------------------------------------------------
// Content: numbers.

TEST(FormatTest, Int64s) {
  const std::vector<int64_t> v = {0, -1, 42, std::numeric_limits<int64_t>::min(),
                                  std::numeric_limits<int64_t>::max()};
  EXPECT_EQ("0\n-1\n42\n-9223372036854775808\n9223372036854775807\n", FormatInt64s(v));
  EXPECT_EQ("", FormatInt64s({}));
}

TEST(FormatTest, Floats) {
  const std::vector<float> v = {1.5f,
                                0.1f,
                                -0.0f,
                                0.0f,
                                std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity(),
                                3.0f,
                                1e-45f};
  // Whole numbers keep a decimal point ("3.0", not "3"): they read back as
  // floats where no kind is known (issue 34, item 3).
  EXPECT_EQ("1.5\n0.1\n-0.0\n0.0\ninf\n-inf\n3.0\n1e-45\n", FormatFloats(v));
  EXPECT_EQ("16777216.0\n1e+30\n-100.0\n",
            FormatFloats(std::vector<float>{16777216.0f, 1e30f, -100.0f}));
  EXPECT_EQ("nan\n", FormatFloats(std::vector<float>{FromBits(0x7fc00000)}));
  EXPECT_EQ("-nan\n", FormatFloats(std::vector<float>{FromBits(0xffc00000)}));
  EXPECT_EQ("nan(0x1)\n", FormatFloats(std::vector<float>{FromBits(0x7f800001)}));
  EXPECT_EQ("-nan(0x7fffff)\n", FormatFloats(std::vector<float>{FromBits(0xffffffff)}));
  EXPECT_EQ("", FormatFloats({}));
}

TEST(FormatTest, Text) {
  const std::vector<absl::string_view> v = {"a", "", "b c"};
  EXPECT_EQ("a\n\nb c\n", FormatText(v));
  EXPECT_EQ("", FormatText({}));
}

TEST(ParseNumericTest, FloatRoundTripIsBitExact) {
  std::mt19937 rng(1);
  std::vector<float> v;
  for (int i = 0; i < 100000; ++i) v.push_back(FromBits(static_cast<uint32_t>(rng())));
  for (uint32_t b : {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u,
                     0x7f800001u, 0xff800001u, 0x7fbfffffu, 0x7fffffffu, 0x00000001u, 0x807fffffu,
                     0x00800000u, 0x7f7fffffu, 0xff7fffffu, 0x3f800000u}) {
    v.push_back(FromBits(b));
  }
  const std::string text = FormatFloats(v);
  auto f = ParseNumeric(text, Kind::kFloat);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(Kind::kFloat, f->kind);
  ASSERT_EQ(v.size(), f->floats.size());
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(Bits(v[i]), Bits(f->floats[i])) << "value " << i << " printed as line " << i + 1;
  }
  // Each line is the shortest that round-trips: never longer than %.9g,
  // but for the ".0" of a whole number (which %.9g would print as digits
  // only, or with an exponent).
  size_t start = 0;
  for (size_t i = 0; i < v.size() && !std::isnan(v[i]); ++i) {
    const size_t nl = text.find('\n', start);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v[i]));
    EXPECT_LE(nl - start, std::strlen(buf) + 2) << text.substr(start, nl - start);
    start = nl + 1;
  }
  // Read with no kind known (a copy without its kind xattr), every line is
  // still a float: the list comes back as floats, bit for bit.
  auto unknown = ParseNumeric(text, Kind::kNone);
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  EXPECT_EQ(Kind::kFloat, unknown->kind);
  ASSERT_EQ(v.size(), unknown->floats.size());
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(Bits(v[i]), Bits(unknown->floats[i]));
  for (float w : {1.0f, -0.0f, 0.0f, 3.0f, 16777216.0f, -100.0f}) {
    auto one = ParseNumeric(FormatFloats({&w, 1}), Kind::kNone);
    ASSERT_TRUE(one.ok()) << one.status();
    EXPECT_EQ(Kind::kFloat, one->kind) << FormatFloats({&w, 1});
    ASSERT_EQ(1u, one->floats.size());
    EXPECT_EQ(Bits(w), Bits(one->floats[0]));
  }
}

TEST(ParseNumericTest, Int64RoundTrip) {
  std::mt19937_64 rng(2);
  std::vector<int64_t> v = {std::numeric_limits<int64_t>::min(),
                            std::numeric_limits<int64_t>::max(), 0, -1, 1};
  for (int i = 0; i < 10000; ++i) v.push_back(static_cast<int64_t>(rng()) >> (rng() % 64));
  for (Kind hint : {Kind::kInt64, Kind::kNone}) {
    auto f = ParseNumeric(FormatInt64s(v), hint);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(Kind::kInt64, f->kind);
    EXPECT_EQ(v, f->int64s);
    EXPECT_TRUE(f->floats.empty());
  }
}

// ParseNumeric(text, hint) gives a feature of `kind` holding `int64s` and
// `floats` (one of them empty).
void ExpectParsed(absl::string_view text, Kind hint, Kind kind, std::vector<int64_t> int64s,
                  std::vector<float> floats) {
  auto f = ParseNumeric(text, hint);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(kind, f->kind) << text;
  EXPECT_EQ(int64s, f->int64s) << text;
  EXPECT_EQ(floats, f->floats) << text;
}

TEST(ParseNumericTest, Hints) {
  ExpectParsed("1\n2\n", Kind::kFloat, Kind::kFloat, {}, {1.0f, 2.0f});

  auto f = ParseNumeric("1\n1.5\n", Kind::kInt64);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, f.status().code());
  EXPECT_THAT(f.status().message(), HasSubstr("line 2"));
  EXPECT_THAT(f.status().message(), HasSubstr("1.5"));

  ExpectParsed("1\n-7\n", Kind::kNone, Kind::kInt64, {1, -7}, {});
  ExpectParsed("1\n2.5\n", Kind::kNone, Kind::kFloat, {}, {1.0f, 2.5f});

  f = ParseNumeric("nan\n", Kind::kNone);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(Kind::kFloat, f->kind);

  for (Kind hint : {Kind::kNone, Kind::kInt64}) ExpectParsed("", hint, Kind::kInt64, {}, {});
  ExpectParsed("", Kind::kFloat, Kind::kFloat, {}, {});
}

TEST(ParseNumericTest, BlankLinesAreSkippedAndLinesNumberedAsWritten) {
  auto f = ParseNumeric("1\n\n 2 \n\n", Kind::kNone);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->kind, Kind::kInt64);
  EXPECT_EQ(f->int64s, (std::vector<int64_t>{1, 2}));
  f = ParseNumeric("\n", Kind::kInt64);  // echo "" > label
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(f->int64s.empty());
  f = ParseNumeric("1\n\nx\n", Kind::kNone);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(std::string(f.status().message()).find("line 3"), std::string::npos) << f.status();
}

TEST(ParseNumericTest, Errors) {
  for (Kind hint : {Kind::kNone, Kind::kInt64, Kind::kFloat}) {
    auto f = ParseNumeric("1\nabc\n", hint);
    ASSERT_FALSE(f.ok()) << KindName(hint);
    EXPECT_EQ(absl::StatusCode::kInvalidArgument, f.status().code());
    EXPECT_THAT(f.status().message(), HasSubstr("line 2"));
  }
  EXPECT_FALSE(ParseNumeric("abc", Kind::kNone).ok());
  EXPECT_FALSE(ParseNumeric("1 2\n", Kind::kNone).ok());
  EXPECT_FALSE(ParseNumeric("1e39\n", Kind::kFloat).ok());  // overflow is not inf
  EXPECT_FALSE(ParseNumeric("9223372036854775808\n", Kind::kInt64).ok());
  EXPECT_FALSE(ParseNumeric("nan(0x0)\n", Kind::kFloat).ok());
  EXPECT_FALSE(ParseNumeric("nan(0x800000)\n", Kind::kFloat).ok());
  EXPECT_FALSE(ParseNumeric("nan(12)\n", Kind::kFloat).ok());
  EXPECT_FALSE(ParseNumeric("1.5x\n", Kind::kFloat).ok());
}

TEST(ParseNumericTest, Leniency) {
  // Blanks around values, no final newline, CRLF, other spellings.
  auto f = ParseNumeric("  1 \n\t-2\r\n3", Kind::kNone);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_THAT(f->int64s, ElementsAre(1, -2, 3));
  f = ParseNumeric("+1.5\ninfinity\n-INF\n0x1p-3\n1e-45\nNaN\n", Kind::kFloat);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(6u, f->floats.size());
  EXPECT_EQ(1.5f, f->floats[0]);
  EXPECT_TRUE(std::isinf(f->floats[1]) && f->floats[1] > 0);
  EXPECT_TRUE(std::isinf(f->floats[2]) && f->floats[2] < 0);
  EXPECT_EQ(0.125f, f->floats[3]);
  EXPECT_EQ(0x00000001u, Bits(f->floats[4]));
  EXPECT_EQ(0x7fc00000u, Bits(f->floats[5]));
  // 9223372036854775808 does not fit int64, so with no hint the list is float.
  f = ParseNumeric("9223372036854775808\n", Kind::kNone);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(Kind::kFloat, f->kind);
}

// ---------------------------------------------------------------------------
// Content: text.

TEST(ParseTextTest, Lines) {
  EXPECT_TRUE(ParseText("").empty());
  EXPECT_EQ(std::vector<std::string>{""}, Strings(ParseText("\n")));
  EXPECT_EQ((std::vector<std::string>{"", ""}), Strings(ParseText("\n\n")));
  EXPECT_EQ((std::vector<std::string>{"a", "b"}), Strings(ParseText("a\nb\n")));
  EXPECT_EQ((std::vector<std::string>{"a", "b"}), Strings(ParseText("a\nb")));
  EXPECT_EQ((std::vector<std::string>{"a", "b"}), Strings(ParseText("a\r\nb\r\n")));
  EXPECT_EQ((std::vector<std::string>{"a", "", "b"}), Strings(ParseText("a\r\n\r\nb")));
  EXPECT_EQ((std::vector<std::string>{"a\tb", " c "}), Strings(ParseText("a\tb\n c \n")));
  // Views point into the content.
  const std::string content = "xy\nz\n";
  auto v = ParseText(content);
  ASSERT_EQ(2u, v.size());
  EXPECT_EQ(content.data(), v[0].data());
  EXPECT_EQ(content.data() + 3, v[1].data());
}

TEST(ParseTextTest, FormatRoundTrip) {
  const std::vector<std::vector<absl::string_view>> cases = {
      {}, {""}, {"", ""}, {"a"}, {"a", ""}, {"", "a"}, {"日本", "é\t", "  "}};
  for (const auto& values : cases) {
    EXPECT_EQ(Strings(values), Strings(ParseText(FormatText(values))));
  }
}

TEST(IsSingleLineTextTest, Cases) {
  EXPECT_TRUE(IsSingleLineText(""));
  EXPECT_TRUE(IsSingleLineText("hello world"));
  EXPECT_TRUE(IsSingleLineText("tab\there"));
  EXPECT_TRUE(IsSingleLineText("日本語 é"));
  EXPECT_FALSE(IsSingleLineText("a\nb"));
  EXPECT_FALSE(IsSingleLineText("a\r"));
  EXPECT_FALSE(IsSingleLineText(absl::string_view("a\0b", 3)));
  EXPECT_FALSE(IsSingleLineText("\x7f"));
  EXPECT_FALSE(IsSingleLineText("\xff"));
  EXPECT_FALSE(IsSingleLineText("\xc3"));  // truncated sequence
}

// ---------------------------------------------------------------------------
// SniffExtension.

TEST(SniffExtensionTest, MagicNumbers) {
  auto pad = [](std::string s) { return s + std::string(64, 'x'); };
  using std::string;
  EXPECT_EQ(".jpg", SniffExtension(pad("\xff\xd8\xff\xe0")));
  EXPECT_EQ(".png", SniffExtension(pad("\x89PNG\r\n\x1a\n")));
  EXPECT_EQ(".gif", SniffExtension(pad("GIF87a")));
  EXPECT_EQ(".gif", SniffExtension(pad("GIF89a")));
  string bmp = "BM" + string(24, '\0');
  bmp[2] = static_cast<char>(bmp.size());
  EXPECT_EQ(".bmp", SniffExtension(bmp));
  bmp[2] = 99;  // declared size wrong: not a bmp
  EXPECT_EQ(".bin", SniffExtension(bmp));
  EXPECT_EQ(".webp", SniffExtension(pad(string("RIFF\x10\0\0\0WEBP", 12))));
  EXPECT_EQ(".wav", SniffExtension(pad(string("RIFF\x10\0\0\0WAVE", 12))));
  EXPECT_EQ(".tif", SniffExtension(pad(string("II*\0", 4))));
  EXPECT_EQ(".tif", SniffExtension(pad(string("MM\0*", 4))));
  EXPECT_EQ(".flac", SniffExtension(pad("fLaC")));
  EXPECT_EQ(".ogg", SniffExtension(pad("OggS")));
  EXPECT_EQ(".mp3", SniffExtension(pad("ID3")));
  EXPECT_EQ(".mp4", SniffExtension(pad(string("\0\0\0\x18"
                                              "ftypmp42",
                                              12))));
  EXPECT_EQ(".pdf", SniffExtension(pad("%PDF-1.7")));
  EXPECT_EQ(".gz", SniffExtension(pad("\x1f\x8b\x08")));
  EXPECT_EQ(".zip", SniffExtension(pad("PK\x03\x04")));
  EXPECT_EQ(".npy", SniffExtension(pad("\x93NUMPY\x01")));
  EXPECT_EQ(".json", SniffExtension("{\"a\": [1, 2]}"));
  EXPECT_EQ(".json", SniffExtension("  [1,\n2]\n"));
  EXPECT_EQ(".bin", SniffExtension("{ not closed"));
  EXPECT_EQ(".bin", SniffExtension(""));
  EXPECT_EQ(".bin", SniffExtension(string("\0\1\2", 3)));
  EXPECT_EQ(".bin", SniffExtension("\xff\xd8"));  // too short for the jpeg magic
  EXPECT_EQ(".bin", SniffExtension("RIFF"));
  // Never ".txt", even for plain text.
  EXPECT_NE(".txt", SniffExtension("plain text\nwith lines\n"));
}

// ---------------------------------------------------------------------------
// Escaping.

void CheckEscapedName(absl::string_view e, absl::string_view raw) {
  SCOPED_TRACE(
      absl::StrCat("raw '", absl::CHexEscape(raw), "' escaped '", absl::CHexEscape(e), "'"));
  ASSERT_FALSE(e.empty());
  EXPECT_NE(".", e);
  EXPECT_NE("..", e);
  EXPECT_NE('.', e[0]);
  for (char c : e) {
    const auto u = static_cast<unsigned char>(c);
    EXPECT_NE('/', c);
    EXPECT_FALSE(u < 0x20 || u == 0x7f) << "control byte " << int{u};
  }
  EXPECT_TRUE(IsValidUtf8(e));
  EXPECT_FALSE(IsIgnoredName(e));
}

TEST(EscapeTest, Examples) {
  EXPECT_EQ("plain", EscapeComponent("plain", false, false));
  EXPECT_EQ("%25", EscapeComponent("%", false, false));
  EXPECT_EQ("a%2Fb", EscapeComponent("a/b", false, false));
  EXPECT_EQ("%2E", EscapeComponent(".", false, false));
  EXPECT_EQ("%2E.", EscapeComponent("..", false, false));
  EXPECT_EQ("%2Ehidden", EscapeComponent(".hidden", false, true));
  EXPECT_EQ("a.b", EscapeComponent("a.b", false, true));
  EXPECT_EQ("a%2Eb", EscapeComponent("a.b", true, true));
  EXPECT_EQ("%00%01%1F%7F", EscapeComponent(absl::string_view("\0\1\x1f\x7f", 4), false, false));
  EXPECT_EQ("%FFa%C3", EscapeComponent("\xff"
                                       "a\xc3",
                                       false, false));
  EXPECT_EQ("日本é", EscapeComponent("日本é", false, false));
  EXPECT_EQ("%312", EscapeComponent("12", true, true));  // all-digit file stem
  EXPECT_EQ("12", EscapeComponent("12", false, false));  // directories keep digits
  EXPECT_EQ("12a", EscapeComponent("12a", true, true));
}

TEST(EscapeTest, Unescape) {
  EXPECT_EQ("A/", Unescape("%41%2F"));
  EXPECT_EQ("/", Unescape("%2f"));
  EXPECT_EQ("image", Unescape("%-image"));
  EXPECT_EQ("", Unescape("%-"));
  EXPECT_EQ("100%", Unescape("100%"));
  EXPECT_EQ("%4", Unescape("%4"));
  EXPECT_EQ("%zz", Unescape("%zz"));
  EXPECT_EQ("%+", Unescape("%+"));
  EXPECT_EQ(std::string("\0", 1), Unescape("%00"));
}

TEST(EscapeTest, RandomRoundTrip) {
  std::mt19937 rng(3);
  const std::string alphabet = std::string("ab.%/-+~0123456789 \t\x01\x7f", 22) +
                               std::string("\0", 1) + "\xc3\xa9\xe6\x97\xa5\xff\x80";
  for (int iter = 0; iter < 20000; ++iter) {
    std::string raw(rng() % 24, '\0');
    for (char& c : raw) {
      c = rng() % 4 == 0 ? static_cast<char>(rng()) : alphabet[rng() % alphabet.size()];
    }
    for (int mode = 0; mode < 4; ++mode) {
      const bool numeric = mode & 1, file = mode & 2;
      const std::string e = EscapeComponent(raw, numeric, file);
      ASSERT_EQ(raw, Unescape(e)) << "mode " << mode;
      CheckEscapedName(e, raw);
      if (numeric) {
        EXPECT_EQ(std::string::npos, e.find('.')) << e;
      }
      if (file) {
        // A file's name never looks like a list item on its own.
        EXPECT_FALSE(ListItemIndex(e).has_value()) << e;
        EXPECT_FALSE(ListItemIndex(e + ".txt").has_value()) << e;
        EXPECT_FALSE(ListItemIndex(e + ".jpg").has_value()) << e;
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Reverse helpers.

TEST(ReverseTest, ParseLeafName) {
  LeafName l = ParseLeafName("label");
  EXPECT_EQ("label", l.stem_escaped);
  EXPECT_EQ(FileRole::kNumeric, l.role);
  l = ParseLeafName("caption.txt");
  EXPECT_EQ("caption", l.stem_escaped);
  EXPECT_EQ(FileRole::kText, l.role);
  l = ParseLeafName("image.v2.jpg");
  EXPECT_EQ("image.v2", l.stem_escaped);
  EXPECT_EQ(FileRole::kSingleBytes, l.role);
  l = ParseLeafName("a%2Eb");
  EXPECT_EQ(FileRole::kNumeric, l.role);
}

TEST(ReverseTest, ListItems) {
  EXPECT_EQ(0u, ListItemIndex("0.jpg"));
  EXPECT_EQ(12u, ListItemIndex("12.bin"));
  EXPECT_EQ(3u, ListItemIndex("3"));
  EXPECT_FALSE(ListItemIndex("01.jpg"));
  EXPECT_FALSE(ListItemIndex("a.jpg"));
  EXPECT_FALSE(ListItemIndex("%30.jpg"));
  EXPECT_FALSE(ListItemIndex(".jpg"));
  EXPECT_FALSE(ListItemIndex("1234567890123456789.bin"));

  using Entries = std::vector<std::pair<std::string, bool>>;
  EXPECT_TRUE(IsListDirectory(Entries{{"0.jpg", true}}));
  EXPECT_TRUE(IsListDirectory(Entries{{"1.png", true}, {"0.jpg", true}, {"2.txt", true}}));
  EXPECT_FALSE(IsListDirectory(Entries{}));
  EXPECT_FALSE(IsListDirectory(Entries{{"1.jpg", true}}));                   // gap
  EXPECT_FALSE(IsListDirectory(Entries{{"0.jpg", true}, {"0.png", true}}));  // duplicate
  EXPECT_FALSE(IsListDirectory(Entries{{"0.jpg", true}, {"1", false}}));     // a directory
  EXPECT_FALSE(IsListDirectory(Entries{{"0.jpg", true}, {"label", true}}));  // a feature
}

TEST(ReverseTest, FeatureNameFromPath) {
  const std::vector<std::string> none;
  EXPECT_EQ("label", FeatureNameFromPath(none, "label"));
  const std::vector<std::string> dirs = {"image", "a%2Fb"};
  EXPECT_EQ("image/a/b/%-x", FeatureNameFromPath(dirs, "%25-x"));
  const std::vector<std::string> chunks = {"abc%+", "def%+", "x"};
  EXPECT_EQ("abcdefx/leaf", FeatureNameFromPath(chunks, "leaf"));
  EXPECT_TRUE(IsContinuation("abc%+"));
  EXPECT_FALSE(IsContinuation("abc"));
  EXPECT_FALSE(IsContinuation("+"));
  EXPECT_TRUE(IsIgnoredName(".swp"));
  EXPECT_TRUE(IsIgnoredName("file~"));
  EXPECT_FALSE(IsIgnoredName("file"));
}

// ---------------------------------------------------------------------------
// Building tables whose byte values live in one payload buffer.

struct Spec {
  std::string name;
  Kind kind;
  std::vector<std::string> bytes;
  std::vector<float> floats;
  std::vector<int64_t> int64s;
};

// Owns a payload and a table whose views point into it.
struct Record {
  std::string payload;
  FeatureTable table;
};

Record Build(std::vector<Spec> specs) {
  std::sort(specs.begin(), specs.end(),
            [](const Spec& a, const Spec& b) { return a.name < b.name; });
  Record r;
  r.payload = "header bytes before the values|";
  std::vector<std::vector<std::pair<size_t, size_t>>> spans;
  for (const Spec& s : specs) {
    spans.emplace_back();
    for (const std::string& b : s.bytes) {
      spans.back().emplace_back(r.payload.size(), b.size());
      r.payload += b;
      r.payload += "|";
    }
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    Feature f;
    f.name = specs[i].name;
    f.kind = specs[i].kind;
    for (auto [off, len] : spans[i])
      f.bytes.push_back(absl::string_view(r.payload).substr(off, len));
    f.floats = specs[i].floats;
    f.int64s = specs[i].int64s;
    r.table.features.push_back(std::move(f));
  }
  return r;
}

Spec Int64s(std::string name, std::vector<int64_t> v) {
  return {std::move(name), Kind::kInt64, {}, {}, std::move(v)};
}
Spec Floats(std::string name, std::vector<float> v) {
  return {std::move(name), Kind::kFloat, {}, std::move(v), {}};
}
Spec Bytes(std::string name, std::vector<std::string> v) {
  return {std::move(name), Kind::kBytes, std::move(v), {}, {}};
}

const std::string kJpeg =
    std::string("\xff\xd8\xff\xe0\x00\x10JFIF\x00", 11) + std::string(50, '\x42');
const std::string kPng = std::string("\x89PNG\r\n\x1a\n", 8) + std::string(30, '\0');
const std::string kBinary = std::string("\x00\x01\x02\xfe", 4);

// ---------------------------------------------------------------------------
// Layout structure.

std::string PathOf(const Layout& l, uint32_t i) {
  std::string p;
  while (i != 0) {
    p = "/" + l.entries[i].name + p;
    i = l.entries[i].parent;
  }
  return p.empty() ? "/" : p;
}

// Every structural promise of a Layout.
void CheckLayout(const Layout& l, absl::string_view payload, bool example) {
  EXPECT_TRUE(naming::CheckLayout(l).ok()) << naming::CheckLayout(l);
  ASSERT_FALSE(l.entries.empty());
  ASSERT_TRUE(l.entries[0].is_dir);
  std::vector<int> seen(l.entries.size(), 0);
  seen[0] = 1;
  for (uint32_t d = 0; d < l.entries.size(); ++d) {
    const Entry& e = l.entries[d];
    if (!e.is_dir) {
      EXPECT_EQ(0u, e.num_children);
      if (e.form != ContentForm::kInline && e.form != ContentForm::kInlineFill &&
          e.form != ContentForm::kPngFill) {
        EXPECT_LE(e.span_offset + e.span_length, payload.size()) << PathOf(l, d);
      }
      continue;
    }
    ASSERT_LE(uint64_t{e.first_child} + e.num_children, l.entries.size());
    for (uint32_t k = 0; k < e.num_children; ++k) {
      const uint32_t c = e.first_child + k;
      const Entry& ch = l.entries[c];
      ++seen[c];
      EXPECT_EQ(d, ch.parent) << PathOf(l, c);
      if (k > 0) {
        EXPECT_LT(l.entries[c - 1].name, ch.name) << "unsorted in " << PathOf(l, d);
      }
      SCOPED_TRACE(absl::CHexEscape(PathOf(l, c)));
      EXPECT_EQ(c, FindChild(l, d, ch.name));
      if (ch.name.empty()) {
        ADD_FAILURE() << "empty name";
        continue;
      }
      EXPECT_LE(ch.name.size(), kMaxNameBytes);
      EXPECT_NE(".", ch.name);
      EXPECT_NE("..", ch.name);
      EXPECT_NE('.', ch.name[0]);
      EXPECT_EQ(std::string::npos, ch.name.find('/'));
      for (char b : ch.name) {
        const auto u = static_cast<unsigned char>(b);
        EXPECT_FALSE(u < 0x20 || u == 0x7f) << "control byte " << int{u};
      }
      EXPECT_TRUE(IsValidUtf8(ch.name));
      EXPECT_FALSE(IsIgnoredName(ch.name));
      // Only a raw record has a root file `record.bin` (a directory of that
      // name cannot be mistaken for one).
      if (example && d == 0 && !ch.is_dir) {
        EXPECT_NE(kRawRecordName, ch.name);
      }
    }
  }
  for (uint32_t i = 0; i < l.entries.size(); ++i) {
    EXPECT_EQ(1, seen[i]) << "entry " << i << " " << PathOf(l, i) << " listed " << seen[i]
                          << " times";
  }
}

std::string FileBytes(const Entry& e, absl::string_view payload) {
  auto content = FileContent(e, payload);
  EXPECT_TRUE(content.ok()) << content.status();
  return content.ok() ? *content : std::string();
}

const Entry* Find(const Layout& l, absl::string_view path) {
  uint32_t cur = 0;
  size_t start = 0;
  while (start < path.size()) {
    size_t slash = path.find('/', start);
    if (slash == absl::string_view::npos) slash = path.size();
    auto c = FindChild(l, cur, path.substr(start, slash - start));
    if (!c) return nullptr;
    cur = *c;
    start = slash + 1;
  }
  return &l.entries[cur];
}

std::vector<std::string> Children(const Layout& l, absl::string_view path) {
  const Entry* d = Find(l, path);
  std::vector<std::string> out;
  if (!d || !d->is_dir) return out;
  for (uint32_t k = 0; k < d->num_children; ++k) out.push_back(l.entries[d->first_child + k].name);
  return out;
}

// ---------------------------------------------------------------------------
// Reverse: the layout back to features, as the staging path reads a folder.

// Features that own their values (tests/testing/canon.h); a layout must
// give back every feature, kindless ones too (test::FromTable).
using test::Canon;
using test::CanonTable;

class Reverser {
 public:
  Reverser(const Layout& l, absl::string_view payload, const FeatureTable& original)
      : l_(l), payload_(payload) {
    for (const Feature& f : original.features) hints_[f.name] = f.kind;
  }

  CanonTable Run() {
    std::vector<std::string> dirs;
    Walk(0, &dirs);
    return out_;
  }

 private:
  void Add(const std::string& name, Canon c, const std::string& path) {
    auto [it, inserted] = out_.emplace(name, std::move(c));
    EXPECT_TRUE(inserted) << path << " maps to feature '" << absl::CHexEscape(name)
                          << "' a second time";
  }

  void Walk(uint32_t dir, std::vector<std::string>* dirs) {
    const Entry& d = l_.entries[dir];
    for (uint32_t k = 0; k < d.num_children; ++k) {
      const uint32_t c = d.first_child + k;
      const Entry& e = l_.entries[c];
      const std::string path = PathOf(l_, c);
      if (IsIgnoredName(e.name)) continue;  // the staging path skips these
      if (e.is_dir) {
        std::vector<std::pair<std::string, bool>> items;
        for (uint32_t j = 0; j < e.num_children; ++j) {
          const Entry& it = l_.entries[e.first_child + j];
          items.emplace_back(it.name, !it.is_dir);
        }
        if (!IsContinuation(e.name) && IsListDirectory(items)) {
          Canon canon;
          canon.kind = Kind::kBytes;
          std::vector<std::pair<uint64_t, std::string>> values;
          for (uint32_t j = 0; j < e.num_children; ++j) {
            const Entry& it = l_.entries[e.first_child + j];
            values.emplace_back(*ListItemIndex(it.name), std::string(FileBytes(it, payload_)));
          }
          std::sort(values.begin(), values.end());
          for (auto& [i, v] : values) canon.bytes.push_back(std::move(v));
          Add(FeatureNameFromPath(*dirs, e.name), std::move(canon), path);
          continue;
        }
        dirs->push_back(e.name);
        Walk(c, dirs);
        dirs->pop_back();
        continue;
      }
      const LeafName leaf = ParseLeafName(e.name);
      const std::string name = FeatureNameFromPath(*dirs, leaf.stem_escaped);
      const std::string content = FileBytes(e, payload_);
      Canon canon;
      switch (leaf.role) {
        case FileRole::kNumeric: {
          auto hint = hints_.find(name);
          auto f = ParseNumeric(content, hint == hints_.end() ? Kind::kNone : hint->second);
          EXPECT_TRUE(f.ok()) << path << ": " << f.status();
          if (!f.ok()) continue;
          canon.kind = f->kind;
          for (float v : f->floats) canon.float_bits.push_back(Bits(v));
          canon.int64s = f->int64s;
          break;
        }
        case FileRole::kText:
          canon.kind = Kind::kBytes;
          for (absl::string_view v : ParseText(content)) canon.bytes.emplace_back(v);
          break;
        case FileRole::kSingleBytes:
          canon.kind = Kind::kBytes;
          canon.bytes.emplace_back(content);
          break;
        case FileRole::kKindless:
          EXPECT_EQ(content, "") << path;
          break;
      }
      Add(name, std::move(canon), path);
    }
  }

  const Layout& l_;
  absl::string_view payload_;
  std::map<std::string, Kind> hints_;
  CanonTable out_;
};

std::string Describe(const FeatureTable& t) {
  std::string s;
  for (const Feature& f : t.features) {
    absl::StrAppend(&s, "  '", absl::CHexEscape(f.name), "' ", KindName(f.kind), " x", f.size(),
                    "\n");
  }
  return s;
}

std::string Listing(const Layout& l) {
  std::string s;
  for (uint32_t i = 1; i < l.entries.size(); ++i) {
    absl::StrAppend(&s, "  ", absl::CHexEscape(PathOf(l, i)), l.entries[i].is_dir ? "/" : "", "\n");
  }
  return s;
}

// FeatureOf reads every entry's feature back from the layout alone: each
// file or list folder names a feature of the table, of its kind, and every
// feature with a kind is named by some entry.
void CheckFeatureOf(const Layout& l, const FeatureTable& t) {
  std::map<std::string, Kind> kinds;
  for (const Feature& f : t.features) kinds[f.name] = f.kind;
  std::set<std::string> named;
  for (uint32_t i = 1; i < l.entries.size(); ++i) {
    const Entry& e = l.entries[i];
    SCOPED_TRACE(absl::CHexEscape(PathOf(l, i)));
    auto info = FeatureOf(l, i);
    if (e.role == EntryRole::kFolder || e.role == EntryRole::kRaw) {
      EXPECT_FALSE(info.has_value()) << absl::CHexEscape(info->name);
      continue;
    }
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(e.role, info->role);
    auto it = kinds.find(info->name);
    ASSERT_NE(kinds.end(), it) << "no feature '" << absl::CHexEscape(info->name) << "'";
    named.insert(info->name);
    const Kind want = e.role == EntryRole::kInt64      ? Kind::kInt64
                      : e.role == EntryRole::kFloat    ? Kind::kFloat
                      : e.role == EntryRole::kKindless ? Kind::kNone
                                                       : Kind::kBytes;
    EXPECT_EQ(want, it->second);
    const bool in_list = l.entries[e.parent].role == EntryRole::kBytesList;
    EXPECT_EQ(in_list, info->value.has_value());
    if (in_list) {
      EXPECT_EQ(ListItemIndex(e.name), info->value);  // (children sort by name)
    }
    EXPECT_FALSE(RoleName(e.role, e.dtype).empty());
  }
  for (const auto& [name, kind] : kinds) {
    EXPECT_TRUE(named.count(name)) << "'" << absl::CHexEscape(name) << "' named by no entry";
  }
}

// Forward, structure, reverse.
void CheckRoundTrip(const Record& r) {
  const Layout l = LayoutExample(r.table, r.payload);
  SCOPED_TRACE("table:\n" + Describe(r.table) + "layout:\n" + Listing(l));
  CheckLayout(l, r.payload, /*example=*/true);
  EXPECT_EQ(test::FromTable(r.table), Reverser(l, r.payload, r.table).Run());
  CheckFeatureOf(l, r.table);
}

// ---------------------------------------------------------------------------
// Forward layout, case by case.

TEST(LayoutTest, Numeric) {
  const Record r = Build({Int64s("label", {3, -1}), Floats("score", {0.5f}), Int64s("none", {})});
  const Layout l = LayoutExample(r.table, r.payload);
  EXPECT_THAT(Children(l, ""), ElementsAre("label", "none", "score"));
  const Entry* e = Find(l, "label");
  ASSERT_NE(nullptr, e);
  EXPECT_FALSE(e->is_dir);
  EXPECT_TRUE(e->is_inline());
  EXPECT_EQ("3\n-1\n", e->content);
  EXPECT_EQ(5u, e->size());
  EXPECT_EQ("0.5\n", Find(l, "score")->content);
  EXPECT_EQ("", Find(l, "none")->content);
  EXPECT_EQ(0u, Find(l, "none")->size());
  CheckRoundTrip(r);
}

TEST(LayoutTest, Text) {
  const Record r = Build({Bytes("caption", {"a cat", "", "日本"}), Bytes("empty", {})});
  const Layout l = LayoutExample(r.table, r.payload);
  EXPECT_THAT(Children(l, ""), ElementsAre("caption.txt", "empty.txt"));
  EXPECT_EQ("a cat\n\n日本\n", Find(l, "caption.txt")->content);
  EXPECT_EQ("", Find(l, "empty.txt")->content);
  CheckRoundTrip(r);
}

TEST(LayoutTest, SingleBinaryValueIsASpanOfThePayload) {
  const Record r = Build({Bytes("image/encoded", {kJpeg}), Bytes("blob", {kBinary}),
                          Bytes("multiline", {"line1\nline2"})});
  const Layout l = LayoutExample(r.table, r.payload);
  EXPECT_THAT(Children(l, ""), ElementsAre("blob.bin", "image", "multiline.bin"));
  const Entry* e = Find(l, "image/encoded.jpg");
  ASSERT_NE(nullptr, e);
  EXPECT_FALSE(e->is_inline());
  EXPECT_EQ(kJpeg.size(), e->size());
  EXPECT_EQ(kJpeg, r.payload.substr(e->span_offset, e->span_length));
  EXPECT_EQ(static_cast<uint64_t>(r.table.features[1].bytes[0].data() - r.payload.data()),
            e->span_offset);
  EXPECT_EQ(kBinary, FileBytes(*Find(l, "blob.bin"), r.payload));
  EXPECT_EQ("line1\nline2", FileBytes(*Find(l, "multiline.bin"), r.payload));
  CheckRoundTrip(r);
}

TEST(LayoutTest, MultiValuedBinaryIsADirectory) {
  const Record r = Build({Bytes("frames", {kJpeg, kBinary, kPng, "multi\nline", "{\"k\": 1}"})});
  const Layout l = LayoutExample(r.table, r.payload);
  EXPECT_THAT(Children(l, ""), ElementsAre("frames"));
  EXPECT_TRUE(Find(l, "frames")->is_dir);
  EXPECT_THAT(Children(l, "frames"), ElementsAre("0.jpg", "1.bin", "2.png", "3.txt", "4.json"));
  EXPECT_EQ(kPng, FileBytes(*Find(l, "frames/2.png"), r.payload));
  EXPECT_FALSE(Find(l, "frames/2.png")->is_inline());
  EXPECT_EQ("multi\nline", FileBytes(*Find(l, "frames/3.txt"), r.payload));
  CheckRoundTrip(r);
}

TEST(LayoutTest, ManyItemsSortByName) {
  std::vector<std::string> items(12, kBinary);
  const Record r = Build({Bytes("x", items)});
  const Layout l = LayoutExample(r.table, r.payload);
  EXPECT_EQ(12u, Children(l, "x").size());
  ASSERT_NE(nullptr, Find(l, "x/11.bin"));
  CheckRoundTrip(r);
}

TEST(LayoutTest, NestedNames) {
  const Record r =
      Build({Int64s("a/b/c", {1}), Bytes("a/b/d", {"t"}), Floats("a/e", {2}), Int64s("z", {0})});
  const Layout l = LayoutExample(r.table, r.payload);
  EXPECT_THAT(Children(l, ""), ElementsAre("a", "z"));
  EXPECT_THAT(Children(l, "a"), ElementsAre("b", "e"));
  EXPECT_THAT(Children(l, "a/b"), ElementsAre("c", "d.txt"));
  CheckRoundTrip(r);
}

TEST(LayoutTest, FileBesideDirectoryOfTheSameName) {
  const Record r = Build(
      {Int64s("image", {7}), Bytes("image/encoded", {kJpeg}), Bytes("image/format", {"jpeg"})});
  const Layout l = LayoutExample(r.table, r.payload);
  EXPECT_THAT(Children(l, ""), ElementsAre("%-image", "image"));
  EXPECT_EQ("7\n", Find(l, "%-image")->content);
  EXPECT_THAT(Children(l, "image"), ElementsAre("encoded.jpg", "format.txt"));
  CheckRoundTrip(r);
  // A bytes list directory beside a feature directory of the same name.
  CheckRoundTrip(Build({Bytes("v", {kJpeg, kPng}), Int64s("v/w", {1})}));
}

TEST(LayoutTest, RootFeatureNamedLikeARawRecord) {
  const Record r = Build({Bytes("record", {kBinary}), Int64s("x", {1})});
  const Layout l = LayoutExample(r.table, r.payload);
  EXPECT_THAT(Children(l, ""), ElementsAre("%-record.bin", "x"));
  CheckRoundTrip(r);
  // Beside a list folder named record.bin (found by the staging fuzzer: both
  // took the name %-record.bin and the list vanished from the record), in
  // either feature order.
  for (const bool list_first : {false, true}) {
    SCOPED_TRACE(list_first ? "list first" : "file first");
    const Spec file = Bytes("record", {kBinary});
    const Spec list = Bytes("record.bin", {kBinary, kJpeg, kPng});
    const Record both = list_first ? Build({list, file}) : Build({file, list});
    const Layout bl = LayoutExample(both.table, both.payload);
    EXPECT_THAT(Children(bl, ""), ElementsAre("%-record.bin", "record.bin"));
    EXPECT_THAT(Children(bl, "record.bin"), ElementsAre("0.bin", "1.jpg", "2.png"));
    CheckRoundTrip(both);
  }
  // Not at the root it keeps its name.
  const Record n = Build({Bytes("d/record", {kBinary})});
  EXPECT_THAT(Children(LayoutExample(n.table, n.payload), "d"), ElementsAre("record.bin"));
  CheckRoundTrip(n);
}

TEST(LayoutTest, ThreeLeavesWantingOneNameAllGetOne) {
  // Issue 21 item 14: `record` (one bytes value: record.bin), `record.bin`
  // (a list folder) and `record.bin/x` (a folder of that name) hit
  // assert(placed) and took the mount down. Each clash adds one `%-`, the
  // list folder before the file, in any feature order.
  const Spec file = Bytes("record", {kBinary});
  const Spec list = Bytes("record.bin", {kBinary, kJpeg});
  const Spec nested = Int64s("record.bin/x", {1});
  for (const auto& order :
       {std::vector<Spec>{file, list, nested}, std::vector<Spec>{nested, list, file},
        std::vector<Spec>{list, nested, file}}) {
    Record r = Build(order);
    // Build sorts by name: restore the order asked for.
    std::vector<Feature> features = r.table.features;
    std::vector<Feature> ordered;
    for (const Spec& sp : order) {
      for (const Feature& f : features) {
        if (f.name == sp.name) ordered.push_back(f);
      }
    }
    r.table.features = ordered;
    const Layout l = LayoutExample(r.table, r.payload);
    SCOPED_TRACE(Listing(l));
    EXPECT_TRUE(naming::CheckLayout(l).ok()) << naming::CheckLayout(l);
    EXPECT_THAT(Children(l, ""), ElementsAre("%-%-record.bin", "%-record.bin", "record.bin"));
    EXPECT_THAT(Children(l, "%-record.bin"), ElementsAre("0.bin", "1.jpg"));
    EXPECT_THAT(Children(l, "record.bin"), ElementsAre("x"));
    EXPECT_EQ(kBinary, FileBytes(*Find(l, "%-%-record.bin"), r.payload));
    CheckRoundTrip(r);
  }
  // The same three anywhere, and with text (`a` + `.txt`) and long names:
  // the two prefixes fit in the name limit.
  CheckRoundTrip(
      Build({Bytes("d/a", {"t"}), Bytes("d/a.txt", {kJpeg, kPng}), Int64s("d/a.txt/y", {2})}));
  const std::string longest(kMaxNameBytes - 4 - 4, 'n');
  CheckRoundTrip(Build({Bytes(longest, {kBinary}), Bytes(longest + ".bin", {kBinary, kJpeg}),
                        Int64s(longest + ".bin/x", {3})}));
}

TEST(LayoutTest, CheckLayoutRefusesWhatAMountCannotServe) {
  const Record r = Build({Int64s("a", {1}), Bytes("b", {kJpeg, kPng})});
  const Layout good = LayoutExample(r.table, r.payload);
  EXPECT_TRUE(naming::CheckLayout(good).ok());
  EXPECT_TRUE(naming::CheckLayout(LayoutRaw(3)).ok());
  Layout twice = good;
  twice.entries[2].name = twice.entries[1].name;
  EXPECT_TRUE(absl::IsInternal(naming::CheckLayout(twice)));
  Layout empty_name = good;
  empty_name.entries[1].name.clear();
  EXPECT_FALSE(naming::CheckLayout(empty_name).ok());
  Layout out_of_range = good;
  out_of_range.entries[0].num_children = 100;
  EXPECT_FALSE(naming::CheckLayout(out_of_range).ok());
  EXPECT_FALSE(naming::CheckLayout(Layout()).ok());
}

TEST(LayoutTest, AwkwardNames) {
  const Record r = Build({Int64s(".", {1}), Int64s("..", {2}), Int64s("/a", {3}), Int64s("a/", {4}),
                          Int64s("a//b", {5}), Int64s(".hidden", {6}), Bytes("%", {"p"})});
  const Layout l = LayoutExample(r.table, r.payload);
  EXPECT_THAT(Children(l, ""),
              ElementsAre("%25.txt", "%2E", "%2E%2E", "%2Ehidden", "%2Fa", "a%2F", "a%2F%2Fb"));
  CheckRoundTrip(r);
}

TEST(LayoutTest, EmptyName) {
  for (Spec s : {Int64s("", {1}), Floats("", {}), Bytes("", {"text"}), Bytes("", {kJpeg}),
                 Bytes("", {kJpeg, kPng}), Bytes("", {})}) {
    SCOPED_TRACE(KindName(s.kind));
    CheckRoundTrip(Build({s, Int64s("other", {1})}));
  }
  CheckRoundTrip(Build({Int64s("", {1}), Bytes("/", {"x"}), Int64s("//", {2})}));
}

TEST(LayoutTest, ControlBytesAndInvalidUtf8) {
  const Record r =
      Build({Int64s(std::string("nul\0here", 8), {1}), Int64s("tab\tnl\n", {2}),
             Int64s("del\x7f", {3}), Int64s("bad\xff\xfe", {4}), Int64s("cut\xe6\x97", {5}),
             Bytes("\xc3\xa9t\xc3\xa9", {"ok"}), Int64s("sur\xed\xa0\x80", {6})});
  const Layout l = LayoutExample(r.table, r.payload);
  ASSERT_NE(nullptr, Find(l, "nul%00here"));
  ASSERT_NE(nullptr, Find(l, "tab%09nl%0A"));
  ASSERT_NE(nullptr, Find(l, "bad%FF%FE"));
  ASSERT_NE(nullptr, Find(l, "été.txt"));
  CheckRoundTrip(r);
}

TEST(LayoutTest, AllDigitLeafNames) {
  const Record r = Build({Int64s("0", {1}), Floats("12", {2}), Bytes("3", {"t"}),
                          Bytes("4", {kJpeg}), Int64s("d/0", {1}), Int64s("d/1", {2}),
                          Bytes("e/0", {kJpeg}), Bytes("f/0", {kJpeg, kPng})});
  const Layout l = LayoutExample(r.table, r.payload);
  EXPECT_THAT(Children(l, ""), ElementsAre("%30", "%312", "%33.txt", "%34.jpg", "d", "e", "f"));
  EXPECT_THAT(Children(l, "d"), ElementsAre("%30", "%31"));
  EXPECT_THAT(Children(l, "e"), ElementsAre("%30.jpg"));
  EXPECT_THAT(Children(l, "f"), ElementsAre("0"));
  CheckRoundTrip(r);
}

// A directory of features whose names start with digits and a dot must not
// pass for a bytes list either.
TEST(LayoutTest, DigitDotLeafNames) {
  CheckRoundTrip(Build({Bytes("x/0.a", {"text"})}));
  CheckRoundTrip(Build({Bytes("x/0.5", {kJpeg})}));
  CheckRoundTrip(Build({Bytes("x/0.a", {"t"}), Bytes("x/1.b", {kPng})}));
  CheckRoundTrip(Build({Floats("x/0.5", {1})}));
}

TEST(LayoutTest, TrailingTilde) {
  CheckRoundTrip(
      Build({Int64s("backup~", {1}), Bytes("d~/x~", {kJpeg, kPng}), Bytes("t~", {"a"})}));
}

TEST(LayoutTest, LongNamesAreChunked) {
  const std::string n300(300, 'n');
  const Record r = Build({Int64s(n300, {1}), Bytes("d/" + n300, {"t"}), Bytes(n300 + "/x", {kJpeg}),
                          Bytes(std::string(600, 'm'), {kJpeg, kPng})});
  const Layout l = LayoutExample(r.table, r.payload);
  CheckLayout(l, r.payload, true);
  // The 300-byte numeric name: a 200-byte chunk directory holding the rest
  // (prefixed, as a directory of the same name is beside it).
  const std::string first = std::string(200, 'n') + "%+";
  EXPECT_THAT(Children(l, first), ElementsAre("%-" + std::string(100, 'n'), std::string(100, 'n')));
  const Entry* e = Find(l, first + "/%-" + std::string(100, 'n'));
  ASSERT_NE(nullptr, e);
  EXPECT_EQ("1\n", e->content);
  CheckRoundTrip(r);
}

TEST(LayoutTest, LongNamesWithEscapesUtf8AndDots) {
  std::vector<Spec> specs;
  for (size_t at = 190; at <= 210; ++at) {
    // A '.', an escape, and a multi-byte character around every cut point.
    std::string dot = std::string(at, 'a') + ".b" + std::string(100, 'c');
    std::string esc = std::string(at, 'e') + "%/" + std::string(100, 'f');
    std::string utf = std::string(at, 'u') + "日本語" + std::string(100, 'v');
    std::string dots = std::string(at, 'o') + std::string(100, '.');
    specs.push_back(Bytes(dot, {"t"}));
    specs.push_back(Int64s(dot + "n", {1}));
    specs.push_back(Bytes(esc, {kJpeg}));
    specs.push_back(Int64s(utf, {2}));
    specs.push_back(Bytes(dots, {"x"}));
  }
  specs.push_back(Int64s(std::string(400, 'a') + "0", {1}));
  specs.push_back(Bytes(std::string(300, '.'), {"d"}));
  specs.push_back(Bytes(std::string(100, '\xff') + std::string(200, '%'), {kPng}));
  CheckRoundTrip(Build(specs));
}

TEST(LayoutTest, NamesAtTheLengthLimit) {
  // Leaves of 250..256 bytes, with and without an extension, beside a
  // directory of the same name (the file gets a `%-` prefix).
  std::vector<Spec> specs;
  for (size_t n = 250; n <= 256; ++n) {
    const std::string name(n, static_cast<char>('a' + (n - 250)));
    specs.push_back(Int64s(name, {1}));
    specs.push_back(Int64s(name + "/x", {2}));
    specs.push_back(Bytes(name + "B", {"t"}));
    specs.push_back(Bytes(name + "C", {kJpeg}));
  }
  CheckRoundTrip(Build(specs));
}

// TFX writes a missing value as an empty Feature{}: an empty `.none` file
// keeps the key in a copy of the folder (issue 34). Its name is escaped as
// any file's; one that a folder or a list wants too takes the `%-`.
TEST(LayoutTest, KindlessFeaturesAreEmptyNoneFiles) {
  std::vector<Spec> specs = {Int64s("x", {1}), Int64s("b/c", {2}), Bytes("a.none", {"t"}),
                             Bytes("list.none", {"\x01", "\x02"})};
  for (const char* name : {"kindless", "b", "07", "a", "list", "feature_lists/k"}) {
    specs.push_back({name, Kind::kNone, {}, {}, {}});
  }
  const Record r = Build(specs);
  const Layout l = LayoutExample(r.table, r.payload);
  EXPECT_THAT(Children(l, ""),
              ElementsAre("%-list.none", "%307.none", "%66eature_lists", "a.none", "a.none.txt",
                          "b", "b.none", "kindless.none", "list.none", "x"));
  const Entry* kindless = Find(l, "kindless.none");
  ASSERT_NE(kindless, nullptr);
  EXPECT_EQ(kindless->size(), 0u);
  EXPECT_EQ(kindless->role, EntryRole::kKindless);
  const auto info = FeatureOf(l, static_cast<uint32_t>(kindless - l.entries.data()));
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->name, "kindless");
  EXPECT_EQ(RoleName(info->role, 0), "none");
  EXPECT_EQ(ParseLeafName("kindless.none").role, FileRole::kKindless);
  CheckRoundTrip(r);
}

TEST(LayoutTest, EmptyTable) {
  const Layout l = LayoutExample(FeatureTable{}, "");
  ASSERT_EQ(1u, l.entries.size());
  EXPECT_TRUE(l.entries[0].is_dir);
  EXPECT_EQ(0u, l.entries[0].num_children);
}

TEST(LayoutTest, Raw) {
  const Layout l = LayoutRaw(1234);
  CheckLayout(l, std::string(1234, 'x'), /*example=*/false);
  ASSERT_EQ(2u, l.entries.size());
  EXPECT_THAT(Children(l, ""), ElementsAre("record.bin"));
  const Entry* e = Find(l, "record.bin");
  EXPECT_FALSE(e->is_inline());
  EXPECT_EQ(0u, e->span_offset);
  EXPECT_EQ(1234u, e->span_length);
  EXPECT_EQ(1234u, e->size());
  EXPECT_EQ(0u, LayoutRaw(0).entries[1].size());
}

TEST(LayoutTest, FindChild) {
  const Record r = Build({Int64s("a/b", {1}), Int64s("c", {2}), Bytes("d", {kJpeg, kPng})});
  const Layout l = LayoutExample(r.table, r.payload);
  auto a = FindChild(l, 0, "a");
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(l.entries[*a].is_dir);
  auto b = FindChild(l, *a, "b");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ("b", l.entries[*b].name);
  EXPECT_FALSE(FindChild(l, 0, "b").has_value());
  EXPECT_FALSE(FindChild(l, 0, "").has_value());
  EXPECT_FALSE(FindChild(l, 0, "A").has_value());
  EXPECT_FALSE(FindChild(l, 0, "c\n").has_value());
  auto c = FindChild(l, 0, "c");
  ASSERT_TRUE(c.has_value());
  EXPECT_FALSE(FindChild(l, *c, "anything").has_value());  // a file has no children
  EXPECT_TRUE(FindChild(l, *FindChild(l, 0, "d"), "1.png").has_value());
  EXPECT_FALSE(FindChild(l, *FindChild(l, 0, "d"), "2.png").has_value());
}

// ---------------------------------------------------------------------------
// The key property on random tables.

class TableGenerator {
 public:
  explicit TableGenerator(uint32_t seed) : rng_(seed) {}

  uint32_t U(uint32_t n) { return static_cast<uint32_t>(rng_() % n); }

  std::string Piece() {
    static const char* const kPieces[] = {
        "a",      "b",          "image", "encoded", "label", "0",     "1",    "12", "007",
        ".",      "..",         "x.y",   "0.5",     "%",     "%2F",   "%-",   "%+", "~",
        "record", "record.bin", ".bin",  ".txt",    "a.txt", "a.jpg", "日本", "é",  " ",
        "\t",     "\x01",       "\x7f",  "\xff",    "\xc3",  "-",     "+"};
    const uint32_t r = U(20);
    if (r == 0) return std::string(1 + U(300), "an.é%"[U(5)] == 'a' ? 'a' : '.');
    if (r == 1) return std::string(U(2), '\0');
    if (r == 2) {
      std::string s(190 + U(80), 'q');
      s[U(static_cast<uint32_t>(s.size()))] = '.';
      return s;
    }
    return kPieces[U(std::size(kPieces))];
  }

  std::string Name() {
    std::string name;
    const int parts = 1 + static_cast<int>(U(4));
    for (int i = 0; i < parts; ++i) {
      if (i > 0) name += U(10) == 0 ? "//" : "/";
      const int sub = 1 + static_cast<int>(U(2));
      for (int k = 0; k < sub; ++k) name += Piece();
    }
    if (U(15) == 0) name = "/" + name;
    if (U(15) == 0) name += "/";
    if (U(40) == 0) name.clear();
    return name;
  }

  std::string Value() {
    switch (U(8)) {
      case 0:
        return kJpeg;
      case 1:
        return kPng;
      case 2:
        return kBinary;
      case 3:
        return "line one\nline two";
      case 4:
        return "";
      case 5:
        return "{\"json\": true}";
      default: {
        std::string s = "text " + std::to_string(U(1000));
        if (U(4) == 0) s += "\tmore é";
        return s;
      }
    }
  }

  float Float() {
    if (U(3) == 0) {
      static const uint32_t kSpecial[] = {0x80000000, 0x7f800000, 0xff800000, 0x7fc00000,
                                          0xffc00000, 0x7f800001, 0xffbfffff, 0x00000001};
      return FromBits(kSpecial[U(std::size(kSpecial))]);
    }
    return FromBits(static_cast<uint32_t>(rng_()));
  }

  std::vector<Spec> Table() {
    std::map<std::string, Spec> by_name;
    const int n = static_cast<int>(U(10));
    for (int i = 0; i < n; ++i) {
      Spec s;
      s.name = Name();
      // Names that share prefixes with earlier ones make collisions likely.
      if (!by_name.empty() && U(3) == 0) {
        auto it = by_name.begin();
        std::advance(it, U(static_cast<uint32_t>(by_name.size())));
        s.name = U(2) ? it->first + "/" + Piece() : it->first.substr(0, it->first.rfind('/'));
      }
      const int count = static_cast<int>(U(4));
      switch (U(4)) {
        case 0:
          s.kind = Kind::kInt64;
          for (int k = 0; k < count; ++k) {
            s.int64s.push_back(static_cast<int64_t>((uint64_t{rng_()} << 32) | rng_()));
          }
          break;
        case 1:
          s.kind = Kind::kFloat;
          for (int k = 0; k < count; ++k) s.floats.push_back(Float());
          break;
        case 2:
          s.kind = Kind::kBytes;
          for (int k = 0; k < count; ++k) s.bytes.push_back(Value());
          break;
        default:
          s.kind = U(5) == 0 ? Kind::kNone : Kind::kBytes;
          if (s.kind == Kind::kBytes) s.bytes.push_back(Value());
          break;
      }
      by_name[s.name] = s;
    }
    std::vector<Spec> out;
    for (auto& [name, s] : by_name) out.push_back(std::move(s));
    return out;
  }

 private:
  std::mt19937 rng_;
};

TEST(LayoutPropertyTest, RandomTablesRoundTrip) {
  TableGenerator gen(424242);
  for (int iter = 0; iter < 1000; ++iter) {
    SCOPED_TRACE(absl::StrCat("iteration ", iter));
    CheckRoundTrip(Build(gen.Table()));
    if (HasFailure()) break;  // one readable failure is enough
  }
}

// ---------------------------------------------------------------------------
// Tensors and SequenceExamples (issue 10), through the real decoders.

std::string Tensor(tensor::DataType dtype, std::vector<int64_t> shape, std::string data) {
  auto t = tensor::EncodeTensor(dtype, shape, data);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : std::string();
}

std::string Ramp(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 7 + 1);
  return s;
}

// An Example's payload and its decoded table (views into the payload).
struct Decoded {
  std::string payload;
  FeatureTable table;
};

Decoded EncodeAndDecode(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& bytes) {
  FeatureTable t;
  for (const auto& [name, values] : bytes) {
    Feature f;
    f.name = name;
    f.kind = Kind::kBytes;
    for (const std::string& v : values) f.bytes.emplace_back(v);
    t.features.push_back(std::move(f));
  }
  Decoded d;
  d.payload = example::EncodeExample(t);
  auto table = example::DecodeExample(d.payload);
  EXPECT_TRUE(table.ok()) << table.status();
  if (table.ok()) d.table = std::move(*table);
  return d;
}

TEST(TensorLayoutTest, ImageTensorIsAPngMadeFromTheShardBytes) {
  const std::string pixels = Ramp(5 * 4 * 3);
  const std::string gray16 = Ramp(3 * 2 * 2);
  const Decoded d =
      EncodeAndDecode({{"image", {Tensor(tensor::DataType::kUint8, {5, 4, 3}, pixels)}},
                       {"depth", {Tensor(tensor::DataType::kUint16, {3, 2}, gray16)}}});
  const Layout l = LayoutExample(d.table, d.payload);
  EXPECT_THAT(Children(l, ""), ElementsAre("depth.png", "image.png"));
  const Entry* e = Find(l, "image.png");
  ASSERT_NE(nullptr, e);
  EXPECT_EQ(ContentForm::kPng, e->form);
  auto g = tensor::PngGeometryOf(tensor::DataType::kUint8, {5, 4, 3});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(tensor::PngSize(*g), e->size());
  // The pixels are a span of the payload: nothing is encoded to list.
  EXPECT_EQ(pixels, d.payload.substr(e->span_offset, e->span_length));
  const std::string png = FileBytes(*e, d.payload);
  EXPECT_EQ(e->size(), png.size());
  auto back = tensor::DecodePng(png);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(pixels, back->materialized);
  EXPECT_THAT(back->shape, ElementsAre(5, 4, 3));
  auto back16 = tensor::DecodePng(FileBytes(*Find(l, "depth.png"), d.payload));
  ASSERT_TRUE(back16.ok()) << back16.status();
  EXPECT_EQ(tensor::DataType::kUint16, back16->dtype);
  EXPECT_EQ(gray16, back16->materialized);
}

TEST(TensorLayoutTest, OtherNumericTensorsAreNpyHeaderPlusSpan) {
  const std::string floats = Ramp(2 * 3 * 4);
  const Decoded d =
      EncodeAndDecode({{"emb", {Tensor(tensor::DataType::kFloat, {2, 3}, floats)}},
                       {"empty", {Tensor(tensor::DataType::kInt64, {0, 4}, "")}},
                       {"wide", {Tensor(tensor::DataType::kUint8, {2, 2, 5}, Ramp(20))}}});
  const Layout l = LayoutExample(d.table, d.payload);
  EXPECT_THAT(Children(l, ""), ElementsAre("emb.npy", "empty.npy", "wide.npy"));
  const Entry* e = Find(l, "emb.npy");
  ASSERT_NE(nullptr, e);
  EXPECT_EQ(ContentForm::kInlineSpan, e->form);
  const std::string header = tensor::NpyHeader(tensor::DataType::kFloat, {2, 3});
  EXPECT_EQ(header, e->content);
  EXPECT_EQ(header.size() + floats.size(), e->size());
  ASSERT_EQ(2u, e->Pieces().size());
  const std::string npy = FileBytes(*e, d.payload);
  EXPECT_EQ(header + floats, npy);
  auto parsed = tensor::ParseNpy(npy);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(parsed->shape, ElementsAre(2, 3));
  // No elements: the header alone.
  EXPECT_EQ(tensor::NpyHeader(tensor::DataType::kInt64, {0, 4}),
            FileBytes(*Find(l, "empty.npy"), d.payload));
}

TEST(TensorLayoutTest, SeveralTensorsMakeAFolderAndNonTensorsKeepTheirBytes) {
  const Decoded d =
      EncodeAndDecode({{"frames",
                        {Tensor(tensor::DataType::kUint8, {2, 2}, Ramp(4)),
                         Tensor(tensor::DataType::kDouble, {3}, Ramp(24)), std::string(kJpeg)}},
                       // Looks like a TensorProto at first, but is not one (a string dtype).
                       {"strings", {std::string("\x08\x07\x12\x00", 4)}}});
  const Layout l = LayoutExample(d.table, d.payload);
  EXPECT_THAT(Children(l, "frames"), ElementsAre("0.png", "1.npy", "2.jpg"));
  EXPECT_THAT(Children(l, ""), ElementsAre("frames", "strings.bin"));
}

// A TensorProto of `dtype` and `shape` whose *_val field (number `field`,
// varint) holds the one value `v`, broadcast over the shape.
std::string BroadcastTensor(tensor::DataType dtype, const std::vector<int64_t>& shape, int field,
                            uint64_t v) {
  std::string shape_msg;
  for (int64_t d : shape) {
    std::string dim = "\x08";
    for (uint64_t x = static_cast<uint64_t>(d);; x >>= 7) {
      dim.push_back(static_cast<char>((x & 0x7f) | (x >= 0x80 ? 0x80 : 0)));
      if (x < 0x80) break;
    }
    shape_msg += "\x12";
    shape_msg.push_back(static_cast<char>(dim.size()));
    shape_msg += dim;
  }
  std::string out = "\x08";
  out.push_back(static_cast<char>(dtype));
  out += "\x12";
  out.push_back(static_cast<char>(shape_msg.size()));
  out += shape_msg;
  out.push_back(static_cast<char>(field << 3));
  for (;; v >>= 7) {
    out.push_back(static_cast<char>((v & 0x7f) | (v >= 0x80 ? 0x80 : 0)));
    if (v < 0x80) break;
  }
  return out;
}

TEST(TensorLayoutTest, BroadcastTensorsAreMadeOnDemandNotHeld) {
  // Issue 21 item 17: one int_val broadcast over uint8 [8192, 8192] (64 MiB)
  // was expanded and a PNG of it kept inline in the cached layout.
  const std::string image = BroadcastTensor(tensor::DataType::kUint8, {8192, 8192}, 7, 200);
  const std::string ints = BroadcastTensor(tensor::DataType::kInt32, {1024, 1024}, 7, 5);
  ASSERT_TRUE(tensor::IsTensor(image));
  ASSERT_TRUE(tensor::IsTensor(ints));
  const Decoded d = EncodeAndDecode({{"image", {image}}, {"ints", {ints}}});
  const Layout l = LayoutExample(d.table, d.payload);
  EXPECT_TRUE(naming::CheckLayout(l).ok());
  EXPECT_THAT(Children(l, ""), ElementsAre("image.png", "ints.npy"));
  size_t held = 0;
  for (const Entry& e : l.entries) held += e.name.capacity() + e.content.capacity();
  EXPECT_LT(held, 1024u) << "the layout holds the expanded tensors";
  const Entry* png = Find(l, "image.png");
  ASSERT_NE(nullptr, png);
  EXPECT_EQ(EntryRole::kTensor, png->role);
  auto g = tensor::PngGeometryOf(tensor::DataType::kUint8, {8192, 8192});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(tensor::PngSize(*g), png->size());
  const Entry* npy = Find(l, "ints.npy");
  ASSERT_NE(nullptr, npy);
  const std::string header = tensor::NpyHeader(tensor::DataType::kInt32, {1024, 1024});
  EXPECT_EQ(header.size() + 4u * 1024 * 1024, npy->size());
  // The bytes are right: the .npy whole, the PNG decoded.
  const std::string npy_bytes = FileBytes(*npy, d.payload);
  ASSERT_EQ(npy->size(), npy_bytes.size());
  EXPECT_EQ(header, npy_bytes.substr(0, header.size()));
  std::string five(4, '\0');
  five[0] = 5;
  for (size_t at = header.size(); at < npy_bytes.size(); at += 4 * 4099) {
    ASSERT_EQ(five, npy_bytes.substr(at, 4)) << at;
  }
  const Decoded ds =
      EncodeAndDecode({{"px", {BroadcastTensor(tensor::DataType::kUint8, {3, 5, 2}, 7, 9)}}});
  const Layout ls = LayoutExample(ds.table, ds.payload);
  auto decoded = tensor::DecodePng(FileBytes(*Find(ls, "px.png"), ds.payload));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(std::string(30, '\x09'), decoded->materialized);
  EXPECT_THAT(decoded->shape, ElementsAre(3, 5, 2));
}

TEST(TensorLayoutTest, TensorsNumpyCannotLoadKeepTheirBytes) {
  // Issue 21 item 22: rank 40, or nonzero dims beside a 0 that multiply past
  // 2^63, made .npy files numpy refuses; they show as the value's bytes.
  const std::vector<int64_t> rank40(40, 1);
  const std::vector<int64_t> huge = {0, int64_t{1} << 62, int64_t{1} << 62};
  const std::vector<int64_t> rank32(32, 1);
  const Decoded d = EncodeAndDecode({{"deep", {Tensor(tensor::DataType::kUint8, rank40, "\x07")}},
                                     {"huge", {Tensor(tensor::DataType::kFloat, huge, "")}},
                                     {"ok", {Tensor(tensor::DataType::kUint8, rank32, "\x07")}}});
  const Layout l = LayoutExample(d.table, d.payload);
  EXPECT_THAT(Children(l, ""), ElementsAre("deep.bin", "huge.bin", "ok.npy"));
  EXPECT_EQ(EntryRole::kBytes, Find(l, "deep.bin")->role);
  EXPECT_EQ(d.table.features[0].bytes[0], FileBytes(*Find(l, "deep.bin"), d.payload));
  EXPECT_FALSE(tensor::NpyLoadable(tensor::DataType::kUint8, rank40).ok());
  EXPECT_FALSE(tensor::NpyLoadable(tensor::DataType::kFloat, huge).ok());
  EXPECT_TRUE(tensor::NpyLoadable(tensor::DataType::kUint8, rank32).ok());
  EXPECT_TRUE(tensor::NpyLoadable(tensor::DataType::kFloat, {0, int64_t{1} << 40, 1 << 20}).ok());
}

TEST(TensorLayoutTest, EntryStaysCompact) {
  // One pointer-free form field replaced the old flag: the cache's memory
  // per file does not grow with the new content forms.
  EXPECT_LE(sizeof(Entry), 96u);
}

TEST(LayoutTest, ExampleFeatureNamedLikeASequenceFolderIsEscaped) {
  const Decoded d = EncodeAndDecode({{"feature_lists/x", {"t"}}, {"context/y", {"u"}}});
  const Layout l = LayoutExample(d.table, d.payload);
  EXPECT_THAT(Children(l, ""), ElementsAre("%66eature_lists", "context"));
  EXPECT_EQ("feature_lists/x",
            FeatureNameFromPath(std::vector<std::string>{"%66eature_lists"}, "x"));
}

example::Feature Step(Kind kind) {
  Feature f;
  f.kind = kind;
  return f;
}

TEST(SequenceLayoutTest, ContextAndPaddedSteps) {
  example::SequenceTable t;
  Feature label;
  label.name = "label";
  label.kind = Kind::kInt64;
  label.int64s = {4};
  t.context.features.push_back(label);
  example::FeatureList frames;  // 12 steps: widths of 2
  frames.name = "frame/encoded";
  for (int i = 0; i < 12; ++i) {
    Feature s = Step(Kind::kBytes);
    s.bytes.push_back(kJpeg);
    if (i == 3) s.bytes.push_back(kJpeg);  // several values: a folder
    frames.steps.push_back(s);
  }
  example::FeatureList rgb;
  rgb.name = "rgb";
  Feature f0 = Step(Kind::kFloat);
  f0.floats = {0.5f, 1.0f};
  rgb.steps.push_back(f0);
  rgb.steps.push_back(Step(Kind::kNone));
  Feature text = Step(Kind::kBytes);
  text.bytes.push_back("hello");
  example::FeatureList words;
  words.name = "words";
  words.steps.push_back(text);
  const std::string image = Tensor(tensor::DataType::kUint8, {2, 3, 1}, Ramp(6));
  Feature img = Step(Kind::kBytes);
  img.bytes.push_back(image);
  example::FeatureList tensors;
  tensors.name = "2d";  // all digits after the first: a name, not a step
  tensors.steps.push_back(img);
  example::FeatureList empty;
  empty.name = "frame";  // empty, and also a path of frame/encoded
  example::FeatureList none;
  none.name = "nothing";
  t.lists = {tensors, empty, frames, none, rgb, words};
  const std::string payload = example::EncodeSequenceExample(t);
  auto seq = example::DecodeSequenceExample(payload);
  ASSERT_TRUE(seq.ok()) << seq.status();
  const Layout l = LayoutSequence(*seq, payload);
  SCOPED_TRACE(Listing(l));
  EXPECT_THAT(Children(l, ""), ElementsAre("context", "feature_lists"));
  EXPECT_THAT(Children(l, "context"), ElementsAre("label"));
  EXPECT_EQ("4\n", Find(l, "context/label")->content);
  EXPECT_THAT(Children(l, "feature_lists"),
              ElementsAre("2d", "frame", "frame%-", "nothing", "rgb", "words"));
  EXPECT_THAT(Children(l, "feature_lists/frame/encoded"),
              ElementsAre("00.jpg", "01.jpg", "02.jpg", "03", "04.jpg", "05.jpg", "06.jpg",
                          "07.jpg", "08.jpg", "09.jpg", "10.jpg", "11.jpg"));
  EXPECT_THAT(Children(l, "feature_lists/frame/encoded/03"), ElementsAre("0.jpg", "1.jpg"));
  EXPECT_EQ(kJpeg, FileBytes(*Find(l, "feature_lists/frame/encoded/07.jpg"), payload));
  EXPECT_THAT(Children(l, "feature_lists/frame%-"), ElementsAre());
  EXPECT_THAT(Children(l, "feature_lists/nothing"), ElementsAre());
  EXPECT_THAT(Children(l, "feature_lists/rgb"), ElementsAre("0", "1.none"));
  EXPECT_EQ("0.5\n1.0\n", Find(l, "feature_lists/rgb/0")->content);
  EXPECT_EQ(0u, Find(l, "feature_lists/rgb/1.none")->size());
  EXPECT_THAT(Children(l, "feature_lists/words"), ElementsAre("0.txt"));
  EXPECT_EQ("hello\n", Find(l, "feature_lists/words/0.txt")->content);
  const Entry* png = Find(l, "feature_lists/2d/0.png");
  ASSERT_NE(nullptr, png);
  auto back = tensor::DecodePng(FileBytes(*png, payload));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(Ramp(6), back->materialized);

  // Each entry's feature, read back from the layout alone.
  auto feature_of = [&](absl::string_view path) {
    const Entry* e = Find(l, path);
    EXPECT_NE(nullptr, e) << path;
    const uint32_t i = e ? static_cast<uint32_t>(e - l.entries.data()) : 0;
    return FeatureOf(l, i);
  };
  EXPECT_FALSE(feature_of("context").has_value());
  EXPECT_FALSE(feature_of("feature_lists").has_value());
  EXPECT_FALSE(feature_of("feature_lists/frame").has_value()) << "a folder of list frame/encoded";
  auto label_info = feature_of("context/label");
  ASSERT_TRUE(label_info.has_value());
  EXPECT_EQ("label", label_info->name);
  EXPECT_TRUE(label_info->context);
  EXPECT_EQ("int64", RoleName(label_info->role, label_info->dtype));
  auto step = feature_of("feature_lists/frame/encoded/07.jpg");
  ASSERT_TRUE(step.has_value());
  EXPECT_EQ("frame/encoded", step->name);
  EXPECT_TRUE(step->feature_list);
  EXPECT_EQ(7u, step->step);
  EXPECT_FALSE(step->value.has_value());
  EXPECT_EQ("bytes", RoleName(step->role, step->dtype));
  auto value = feature_of("feature_lists/frame/encoded/03/1.jpg");
  ASSERT_TRUE(value.has_value());
  EXPECT_EQ("frame/encoded", value->name);
  EXPECT_EQ(3u, value->step);
  EXPECT_EQ(1u, value->value);
  auto list = feature_of("feature_lists/frame/encoded");
  ASSERT_TRUE(list.has_value());
  EXPECT_EQ("frame/encoded", list->name);
  EXPECT_EQ("feature list", RoleName(list->role, list->dtype));
  EXPECT_FALSE(list->step.has_value());
  auto empty_list = feature_of("feature_lists/frame%-");
  ASSERT_TRUE(empty_list.has_value());
  EXPECT_EQ("frame", empty_list->name);
  auto tensor = feature_of("feature_lists/2d/0.png");
  ASSERT_TRUE(tensor.has_value());
  EXPECT_EQ("2d", tensor->name);
  EXPECT_EQ("tensor uint8", RoleName(tensor->role, tensor->dtype));
  EXPECT_EQ("none", RoleName(feature_of("feature_lists/rgb/1.none")->role, 0));
  EXPECT_EQ("float", RoleName(feature_of("feature_lists/rgb/0")->role, 0));
  EXPECT_EQ("text", RoleName(feature_of("feature_lists/words/0.txt")->role, 0));
}

TEST(FeatureOfTest, RawRecordAndNestedLists) {
  const Layout raw = LayoutRaw(10);
  EXPECT_FALSE(FeatureOf(raw, 0).has_value());
  EXPECT_FALSE(FeatureOf(raw, 1).has_value());
  EXPECT_EQ("raw", RoleName(raw.entries[1].role, 0));
  // List `a` beside list `a/b`: a step of a/b belongs to a/b, not to a.
  example::SequenceTable t;
  example::FeatureList a, ab;
  a.name = "a";
  a.steps.push_back(Step(Kind::kInt64));
  ab.name = "a/b";
  ab.steps.push_back(Step(Kind::kInt64));
  ab.steps.push_back(Step(Kind::kInt64));
  t.lists = {a, ab};
  const std::string payload = example::EncodeSequenceExample(t);
  auto seq = example::DecodeSequenceExample(payload);
  ASSERT_TRUE(seq.ok()) << seq.status();
  const Layout l = LayoutSequence(*seq, payload);
  SCOPED_TRACE(Listing(l));
  const Entry* e = Find(l, "feature_lists/a/b/1");
  ASSERT_NE(nullptr, e);
  auto info = FeatureOf(l, static_cast<uint32_t>(e - l.entries.data()));
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ("a/b", info->name);
  EXPECT_EQ(1u, info->step);
  e = Find(l, "feature_lists/a/0");
  ASSERT_NE(nullptr, e);
  info = FeatureOf(l, static_cast<uint32_t>(e - l.entries.data()));
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ("a", info->name);
  EXPECT_EQ(0u, info->step);
}

TEST(SequenceLayoutTest, EmptyListsInsideEachOthersPathsAllShow) {
  // Issue 21 item 21: empty lists `a` and `a/b` showed only
  // feature_lists/a/b (and `cp -r` then lost `a`), whatever their order.
  for (const std::vector<std::string>& names :
       {std::vector<std::string>{"a", "a/b"}, std::vector<std::string>{"a/b", "a"},
        std::vector<std::string>{"x", "x/y/z"}, std::vector<std::string>{"x/y/z", "x"}}) {
    SCOPED_TRACE(names[0] + " " + names[1]);
    example::SequenceTable t;
    for (const std::string& n : names) {
      example::FeatureList list;
      list.name = n;
      t.lists.push_back(list);
    }
    const std::string payload = example::EncodeSequenceExample(t);
    auto seq = example::DecodeSequenceExample(payload);
    ASSERT_TRUE(seq.ok()) << seq.status();
    const Layout l = LayoutSequence(*seq, payload);
    SCOPED_TRACE(Listing(l));
    EXPECT_TRUE(naming::CheckLayout(l).ok());
    const std::string top = names[0].substr(0, 1);
    EXPECT_THAT(Children(l, "feature_lists"), ElementsAre(top, top + "%-"));
    const Entry* own = Find(l, "feature_lists/" + top + "%-");
    ASSERT_NE(nullptr, own);
    EXPECT_TRUE(own->is_dir);
    EXPECT_EQ(0u, own->num_children);
    EXPECT_EQ(EntryRole::kFeatureList, own->role);
    auto info = FeatureOf(l, static_cast<uint32_t>(own - l.entries.data()));
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(top, info->name);
    const std::string deep = top == "a" ? "feature_lists/a/b" : "feature_lists/x/y/z";
    const Entry* nested = Find(l, deep);
    ASSERT_NE(nullptr, nested);
    EXPECT_EQ(EntryRole::kFeatureList, nested->role);
    EXPECT_EQ(0u, nested->num_children);
    // The list's own folder `a` is a plain folder: it holds a folder only.
    EXPECT_EQ(EntryRole::kFolder, Find(l, "feature_lists/" + top)->role);
  }
}

TEST(SequenceLayoutTest, AllDigitListNamesAndNoContext) {
  example::SequenceTable t;
  example::FeatureList l7;
  l7.name = "7/12";
  l7.steps.push_back(Step(Kind::kInt64));
  t.lists = {l7};
  const std::string payload = example::EncodeSequenceExample(t);
  auto seq = example::DecodeSequenceExample(payload);
  ASSERT_TRUE(seq.ok());
  const Layout l = LayoutSequence(*seq, payload);
  EXPECT_THAT(Children(l, ""), ElementsAre("feature_lists"));
  EXPECT_THAT(Children(l, "feature_lists"), ElementsAre("%37"));
  EXPECT_THAT(Children(l, "feature_lists/%37"), ElementsAre("%312"));
  EXPECT_THAT(Children(l, "feature_lists/%37/%312"), ElementsAre("0"));
  EXPECT_EQ("", Find(l, "feature_lists/%37/%312/0")->content);
}

TEST(SequenceLayoutTest, StepNames) {
  EXPECT_EQ("0", StepName(0, 1));
  EXPECT_EQ("0", StepName(0, 10));
  EXPECT_EQ("09", StepName(9, 11));
  EXPECT_EQ("007", StepName(7, 300));
  EXPECT_EQ("299", StepName(299, 300));
}

}  // namespace
}  // namespace tfrecordfs::naming
