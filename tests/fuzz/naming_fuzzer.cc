// Fuzz target: the naming layer in both directions.
//
// The input is a feature table (table_gen.h: a decodable Example, or a
// program of awkward names and values). Invariants:
//   * EscapeComponent / Unescape are inverse for any bytes and any flags,
//     and an escaped component is valid UTF-8 with no '/' or NUL;
//   * every name LayoutExample produces is a usable file name: not empty,
//     not "." or "..", no '/' or NUL, at most 255 bytes, not hidden, valid
//     UTF-8, and unique and sorted within its directory (FindChild finds it);
//   * file spans lie inside the payload; directories hold no content;
//     naming::CheckLayout (the mount's last check before serving) passes;
//   * reading the layout back with the reverse functions (reverse.h, the
//     staging parser's steps) gives the table's shown features exactly, with
//     the table's kinds and tensor types as feature types (as the mount
//     gives them).
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "fuzz_check.h"
#include "reverse.h"
#include "table_gen.h"
#include "tfrecordfs/base/utf8.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/naming/naming.h"

namespace tfrecordfs::fuzz {
namespace {

void CheckEscape(absl::string_view raw) {
  for (int flags = 0; flags < 4; ++flags) {
    const std::string e = naming::EscapeComponent(raw, flags & 1, flags & 2);
    FUZZ_CHECK(naming::Unescape(e) == raw, "'", absl::CEscape(raw), "' -> '", absl::CEscape(e),
               "' flags ", flags);
    FUZZ_CHECK(IsValidUtf8(e), absl::CEscape(e));
    FUZZ_CHECK(e.find('/') == std::string::npos && e.find('\0') == std::string::npos,
               absl::CEscape(e));
    if (!raw.empty()) FUZZ_CHECK(e[0] != '.', absl::CEscape(e));
  }
}

void CheckLayout(const naming::Layout& l, absl::string_view payload) {
  FUZZ_CHECK(!l.entries.empty() && l.entries[0].is_dir);
  // What the mount checks before serving a record (an EIO if it failed).
  const absl::Status servable = naming::CheckLayout(l);
  FUZZ_CHECK(servable.ok(), servable.message());
  for (uint32_t i = 0; i < l.entries.size(); ++i) {
    const naming::Entry& e = l.entries[i];
    if (e.is_dir) {
      FUZZ_CHECK(e.content.empty());
      FUZZ_CHECK(e.first_child + uint64_t{e.num_children} <= l.entries.size());
      for (uint32_t c = e.first_child; c < e.first_child + e.num_children; ++c) {
        const naming::Entry& child = l.entries[c];
        FUZZ_CHECK(child.parent == i);
        if (c > e.first_child) {
          FUZZ_CHECK(l.entries[c - 1].name < child.name, "children not sorted/unique: '",
                     absl::CEscape(l.entries[c - 1].name), "' '", absl::CEscape(child.name), "'");
        }
        auto found = naming::FindChild(l, i, child.name);
        FUZZ_CHECK(found && *found == c);
      }
    } else {
      // (A broadcast's span_length is the elements' size: nothing of the
      // payload.)
      if (e.form != naming::ContentForm::kInline && e.form != naming::ContentForm::kInlineFill &&
          e.form != naming::ContentForm::kPngFill) {
        FUZZ_CHECK(e.span_offset <= payload.size() &&
                   e.span_length <= payload.size() - e.span_offset);
      }
    }
    if (i == 0) continue;
    const std::string& n = e.name;
    const std::string shown = absl::CEscape(n);
    FUZZ_CHECK(!n.empty(), "empty file name");
    FUZZ_CHECK(n != "." && n != "..", shown);
    FUZZ_CHECK(n[0] != '.', "hidden name ", shown);
    FUZZ_CHECK(n.find('/') == std::string::npos && n.find('\0') == std::string::npos, shown);
    FUZZ_CHECK(n.size() <= naming::kMaxNameBytes, n.size(), " bytes: ", shown);
    FUZZ_CHECK(IsValidUtf8(n), shown);
  }
}

void Check(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  const uint8_t mode = in.U8();
  // Any bytes at all through the escapes.
  CheckEscape(in.Str(255));

  GenTable gen;
  absl::string_view payload;
  example::FeatureTable decoded;
  const example::FeatureTable* table = nullptr;
  std::string rest;
  if (mode & 1) {
    rest = std::string(in.Rest());
    auto t = example::DecodeExample(rest);
    if (!t.ok()) return;
    decoded = *std::move(t);
    table = &decoded;
    payload = rest;
  } else {
    gen = GenFeatures(in);
    table = &gen.table;
    payload = gen.payload;
  }
  for (const auto& f : table->features) CheckEscape(f.name);

  const naming::Layout l = naming::LayoutExample(*table, payload);
  CheckLayout(l, payload);
  naming::FeatureTypeMap types = TypesOf(*table);
  if (!ArraysRoundTrip(*table)) return;  // documented as lossy
  auto back = LayoutReverser(l, payload, types).Run();
  FUZZ_CHECK(back.ok(), back.status().message());
  const CanonTable want = CanonicalValues(FromTable(*table));
  FUZZ_CHECK(CanonicalValues(*back) == want, "reverse gives ", Describe(*back), " want ",
             Describe(want));
}

}  // namespace
}  // namespace tfrecordfs::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 16)) return 0;
  tfrecordfs::fuzz::Check(data, size);
  return 0;
}
