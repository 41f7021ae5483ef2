// Fuzz target: the views of tensors (naming's `.png`/`.npy` files). The
// input is one bytes value, laid out as an Example feature alone and as the
// first of a list of two. Invariants, for every file of the layout:
//   * naming::CheckLayout passes;
//   * any byte range read piece by piece, as the mount reads it (a PNG made
//     by ReadPngRange, a broadcast filled on demand), equals the same slice
//     of the whole file (FileContent);
//   * a `.png` decodes (libpng) to the tensor's elements, a `.npy` parses to
//     its dtype, shape and elements, where DecodeTensor accepts the value;
//     other files hold the value's exact bytes;
//   * numpy could load every `.npy` (tensor::NpyLoadable);
//   * the layout holds O(value) bytes, whatever the shape: a broadcast is
//     never expanded into it.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fuzz_check.h"
#include "tfrecordfs/example/example.h"
#include "tfrecordfs/naming/naming.h"
#include "tfrecordfs/tensor/npy.h"
#include "tfrecordfs/tensor/png.h"
#include "tfrecordfs/tensor/tensor.h"

namespace tfrecordfs::fuzz {
namespace {

// Bytes [offset, offset + n) of `e` read piece by piece, as the vfs does.
std::string ReadRange(const naming::Entry& e, absl::string_view payload, uint64_t offset,
                      size_t n) {
  std::string out;
  auto each = [&](const naming::Piece& p, uint64_t from, size_t len) {
    const size_t at = out.size();
    out.resize(at + len);
    switch (p.type) {
      case naming::Piece::Type::kInline:
        std::memcpy(out.data() + at, p.bytes.data() + from, len);
        break;
      case naming::Piece::Type::kSpan:
        FUZZ_CHECK(p.offset + from + len <= payload.size(), "span past the payload");
        std::memcpy(out.data() + at, payload.data() + p.offset + from, len);
        break;
      case naming::Piece::Type::kFill:
        naming::FillRange(p.fill, from, out.data() + at, len);
        break;
      case naming::Piece::Type::kPng: {
        const tensor::PixelSource source = [&](uint64_t x, char* buf, size_t k) {
          if (!p.fill.empty()) {
            naming::FillRange(p.fill, x, buf, k);
            return absl::OkStatus();
          }
          FUZZ_CHECK(p.offset + x + k <= payload.size(), "pixels past the payload");
          std::memcpy(buf, payload.data() + p.offset + x, k);
          return absl::OkStatus();
        };
        const absl::Status s = tensor::ReadPngRange(p.png, source, from, out.data() + at, len);
        FUZZ_CHECK(s.ok(), s.ToString());
        break;
      }
    }
    return absl::OkStatus();
  };
  (void)naming::ForEachPieceIn(e, offset, n, each);
  return out;
}

void CheckFile(const naming::Entry& e, absl::string_view payload, absl::string_view value,
               uint64_t pick) {
  // Files of a broadcast can be 64 MiB: read those by ranges only.
  const uint64_t size = e.size();
  for (int k = 0; k < 3; ++k) {
    const uint64_t offset = size == 0 ? 0 : (pick * (k + 7) * 2654435761u) % size;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(size - offset, 1 + pick % 70000));
    const std::string piecewise = ReadRange(e, payload, offset, n);
    FUZZ_CHECK(piecewise.size() == n);
    if (size <= (1u << 22)) {
      const std::string whole = naming::FileContent(e, payload).value();
      FUZZ_CHECK(whole.size() == size, "FileContent is ", whole.size(), " bytes, size() ", size);
      FUZZ_CHECK(whole.substr(offset, n) == piecewise, "range [", offset, ", +", n,
                 ") differs from the whole file's");
    }
  }
  if (size > (1u << 22)) return;
  const std::string file = naming::FileContent(e, payload).value();
  if (e.role != naming::EntryRole::kTensor) {
    FUZZ_CHECK(file == value, "a non-tensor file does not hold the value's bytes");
    return;
  }
  auto t = tensor::DecodeTensor(value);
  FUZZ_CHECK(t.ok(), "shown as a tensor, but DecodeTensor refuses: ", t.status().ToString());
  const absl::string_view elements = t->data(value);
  if (absl::EndsWith(e.name, ".png")) {
    auto png = tensor::DecodePng(file);
    FUZZ_CHECK(png.ok(), png.status().ToString());
    FUZZ_CHECK(png->dtype == t->dtype && png->materialized == elements, "the PNG's pixels differ");
  } else {
    FUZZ_CHECK(absl::EndsWith(e.name, ".npy"), e.name);
    FUZZ_CHECK(tensor::NpyLoadable(t->dtype, t->shape).ok(), "an .npy numpy cannot load");
    auto npy = tensor::ParseNpy(file);
    FUZZ_CHECK(npy.ok(), npy.status().ToString());
    FUZZ_CHECK(npy->dtype == t->dtype && npy->shape == t->shape && npy->data(file) == elements,
               "the .npy differs from the tensor");
  }
}

void Check(absl::string_view value, uint64_t pick) {
  for (int form = 0; form < 2; ++form) {
    example::FeatureTable table;
    example::Feature f;
    f.name = "v";
    f.kind = example::Kind::kBytes;
    f.bytes.push_back(value);
    if (form == 1) f.bytes.push_back(value);
    table.features.push_back(f);
    const std::string payload = example::EncodeExample(table);
    auto decoded = example::DecodeExample(payload);
    FUZZ_CHECK(decoded.ok(), decoded.status().ToString());
    const naming::Layout l = naming::LayoutExample(*decoded, payload);
    const absl::Status servable = naming::CheckLayout(l);
    FUZZ_CHECK(servable.ok(), servable.ToString());
    size_t held = 0;
    for (const naming::Entry& e : l.entries) held += e.name.size() + e.content.size();
    // *_val values are at most 8 bytes per byte of value; a PNG of them adds
    // its framing (a few bytes per row, rows <= elements).
    FUZZ_CHECK(held <= 64 * payload.size() + 4096, "the layout holds ", held, " bytes for a ",
               payload.size(), "-byte record");
    const absl::string_view first = decoded->features[0].bytes[0];
    for (const naming::Entry& e : l.entries) {
      if (e.is_dir) continue;
      if (naming::IsSingleLineText(value)) continue;  // a .txt of lines
      CheckFile(e, payload, first, pick);
    }
  }
}

}  // namespace
}  // namespace tfrecordfs::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2 || size > (1u << 16)) return 0;
  const uint64_t pick = data[0] | uint64_t{data[1]} << 8;
  tfrecordfs::fuzz::Check(absl::string_view(reinterpret_cast<const char*>(data) + 2, size - 2),
                          pick);
  return 0;
}
