#include "tfrecordfs/tensor/npy.h"

#include <cctype>
#include <limits>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tfrecordfs::tensor {
namespace {

constexpr absl::string_view kMagic("\x93NUMPY", 6);
constexpr size_t kAlign = 64;
constexpr size_t kGrowthAxisMaxDigits = 21;

absl::Status Bad(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("not a supported .npy file: ", why));
}

// A tiny reader of the Python literal numpy writes as the header.
class Literal {
 public:
  explicit Literal(absl::string_view s) : s_(s) {}

  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Eat(char c) {
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Peek(char c) {
    SkipSpace();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ == s_.size();
  }
  // A quoted string without escapes (numpy's descrs and keys have none).
  std::optional<std::string> String() {
    SkipSpace();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return std::nullopt;
    const char q = s_[pos_++];
    const size_t end = s_.find(q, pos_);
    if (end == absl::string_view::npos) return std::nullopt;
    std::string out(s_.substr(pos_, end - pos_));
    if (out.find('\\') != std::string::npos) return std::nullopt;
    pos_ = end + 1;
    return out;
  }
  std::optional<bool> Bool() {
    SkipSpace();
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    return std::nullopt;
  }
  // A non-negative decimal integer (Python 2 numpy wrote a trailing 'L').
  std::optional<int64_t> Int() {
    SkipSpace();
    const size_t start = pos_;
    int64_t v = 0;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      const int d = s_[pos_++] - '0';
      if (v > (std::numeric_limits<int64_t>::max() - d) / 10) return std::nullopt;
      v = v * 10 + d;
    }
    if (pos_ == start) return std::nullopt;
    if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;
    return v;
  }
  // A tuple of integers: "()", "(5,)", "(2, 3)", "(2, 3,)".
  std::optional<std::vector<int64_t>> Tuple() {
    if (!Eat('(')) return std::nullopt;
    std::vector<int64_t> out;
    if (Eat(')')) return out;
    while (true) {
      auto v = Int();
      if (!v) return std::nullopt;
      out.push_back(*v);
      if (out.size() > kMaxRank) return std::nullopt;
      const bool comma = Eat(',');
      if (Eat(')')) {
        if (out.size() == 1 && !comma) return std::nullopt;  // "(5)" is an int
        return out;
      }
      if (!comma) return std::nullopt;
    }
  }

 private:
  absl::string_view s_;
  size_t pos_ = 0;
};

absl::StatusOr<DataType> DtypeOfDescr(absl::string_view descr) {
  if (descr.size() < 2) return Bad(absl::StrCat("dtype '", descr, "'"));
  const char order = descr[0];
  const absl::string_view code = descr.substr(1);
  if (code == "O" || code.substr(0, 1) == "O") {
    return Bad("object arrays (pickled Python objects) are not supported");
  }
  for (int64_t n = 0; n < 32; ++n) {
    const DTypeInfo* d = FindDType(n);
    if (d == nullptr || code != absl::string_view(d->descr).substr(1)) continue;
    if (d->itemsize == 1) {
      if (order == '|' || order == '<' || order == '>' || order == '=') return d->dtype;
    } else if (order == '<') {
      return d->dtype;
    } else if (order == '>') {
      return Bad(absl::StrCat("big-endian dtype '", descr,
                              "'; re-save the array little-endian (arr.astype('<", code, "'))"));
    }
    break;
  }
  return Bad(absl::StrCat("dtype '", descr,
                          "' (supported: bool, int8/16/32/64, "
                          "uint8/16/32/64, float16/32/64, little-endian)"));
}

std::string ShapeRepr(absl::Span<const int64_t> shape) {
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

}  // namespace

std::string NpyHeader(DataType dtype, absl::Span<const int64_t> shape) {
  std::string text = absl::StrCat("{'descr': '", InfoOf(dtype).descr,
                                  "', 'fortran_order': False, 'shape': ", ShapeRepr(shape), ", }");
  if (!shape.empty()) {
    const size_t digits = absl::StrCat(shape[0]).size();
    if (digits < kGrowthAxisMaxDigits) text.append(kGrowthAxisMaxDigits - digits, ' ');
  }
  const size_t prefix = kMagic.size() + 2 + 2;
  const size_t pad = kAlign - ((prefix + text.size() + 1) % kAlign);
  text.append(pad, ' ');
  text.push_back('\n');
  std::string out(kMagic);
  out.push_back(1);
  out.push_back(0);
  out.push_back(static_cast<char>(text.size() & 0xff));
  out.push_back(static_cast<char>(text.size() >> 8));
  return out + text;
}

absl::Status NpyLoadable(DataType dtype, absl::Span<const int64_t> shape) {
  if (shape.size() > kMaxNpyRank) {
    return absl::InvalidArgumentError(
        absl::StrCat(shape.size(), " dims: numpy loads at most ", kMaxNpyRank));
  }
  uint64_t bytes = InfoOf(dtype).itemsize;
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError("negative dim size");
    if (d == 0) continue;  // numpy skips empty dims, then checks the others
    if (bytes >
        static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / static_cast<uint64_t>(d)) {
      return absl::InvalidArgumentError(
          "the nonzero dims multiply past what numpy can index (2^63 - 1 bytes)");
    }
    bytes *= static_cast<uint64_t>(d);
  }
  return absl::OkStatus();
}

namespace {

// Where the header dict starts and how long it is, from the magic, the
// version and the length field: nullopt while those are not all there (the
// bytes so far are a possible start), else InvalidArgument.
struct Preamble {
  size_t start = 0;         // of the dict text
  uint64_t header_len = 0;  // of the dict text
};
absl::StatusOr<std::optional<Preamble>> ParsePreamble(absl::string_view prefix) {
  const absl::string_view magic = kMagic;
  if (prefix.substr(0, std::min(prefix.size(), magic.size())) !=
      magic.substr(0, std::min(prefix.size(), magic.size()))) {
    return Bad("no \\x93NUMPY magic");
  }
  if (prefix.size() < 8) return std::optional<Preamble>();
  const uint8_t major = static_cast<uint8_t>(prefix[6]);
  const uint8_t minor = static_cast<uint8_t>(prefix[7]);
  if (minor != 0 || major < 1 || major > 3) {
    return Bad(absl::StrCat("format version ", major, ".", minor, " (known: 1.0, 2.0, 3.0)"));
  }
  Preamble p;
  p.start = major == 1 ? 10 : 12;
  if (prefix.size() < p.start) return std::optional<Preamble>();  // length not all there
  auto byte = [&](size_t i) { return static_cast<uint64_t>(static_cast<uint8_t>(prefix[i])); };
  p.header_len = major == 1 ? (byte(8) | byte(9) << 8)
                            : (byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24);
  return std::optional<Preamble>(p);
}

}  // namespace

uint64_t NpyDataOffset(absl::string_view prefix) {
  auto p = ParsePreamble(prefix);
  if (!p.ok() || !p->has_value()) return 0;
  return (*p)->start + (*p)->header_len;
}

absl::StatusOr<std::optional<NpyHeaderInfo>> ParseNpyHeader(absl::string_view prefix) {
  auto preamble = ParsePreamble(prefix);
  if (!preamble.ok()) return preamble.status();
  if (!preamble->has_value()) return std::optional<NpyHeaderInfo>();
  const size_t start = (*preamble)->start;
  const uint64_t header_len = (*preamble)->header_len;
  NpyHeaderInfo info;
  info.data_offset = start + header_len;
  if (header_len > prefix.size() - start) return std::optional<NpyHeaderInfo>();  // not yet
  const absl::string_view header = prefix.substr(start, header_len);
  // Versions 1.0 and 2.0 are latin-1, 3.0 UTF-8; the keys and values we
  // accept are ASCII either way.
  Literal lit(header);
  std::optional<std::string> descr;
  std::optional<bool> fortran;
  std::optional<std::vector<int64_t>> shape;
  if (!lit.Eat('{')) return Bad("header is not a dict");
  while (!lit.Eat('}')) {
    auto key = lit.String();
    if (!key || !lit.Eat(':')) return Bad("malformed header dict");
    if (*key == "descr") {
      if (descr) return Bad("descr given twice");
      if (lit.Peek('[')) return Bad("structured dtypes are not supported");
      descr = lit.String();
      if (!descr) return Bad("descr is not a string");
    } else if (*key == "fortran_order") {
      if (fortran) return Bad("fortran_order given twice");
      fortran = lit.Bool();
      if (!fortran) return Bad("fortran_order is not True or False");
    } else if (*key == "shape") {
      if (shape) return Bad("shape given twice");
      shape = lit.Tuple();
      if (!shape) return Bad("shape is not a tuple of non-negative integers");
    } else {
      return Bad(absl::StrCat("unknown header key '", *key, "'"));
    }
    if (!lit.Eat(',')) {
      if (!lit.Eat('}')) return Bad("malformed header dict");
      break;
    }
  }
  if (!lit.AtEnd()) return Bad("trailing characters after the header dict");
  if (!descr || !fortran || !shape) return Bad("header lacks descr, fortran_order or shape");
  auto dtype = DtypeOfDescr(*descr);
  if (!dtype.ok()) return dtype.status();
  if (*fortran && shape->size() > 1) {
    return Bad(
        "fortran_order True (column-major); save a C-ordered array "
        "(np.ascontiguousarray)");
  }
  auto bytes = NumBytes(*dtype, *shape);
  if (!bytes.ok()) return Bad(bytes.status().message());
  info.dtype = *dtype;
  info.shape = std::move(*shape);
  info.data_bytes = static_cast<uint64_t>(*bytes);
  return std::optional<NpyHeaderInfo>(std::move(info));
}

absl::StatusOr<Tensor> ParseNpy(absl::string_view file) {
  if (file.size() < 10 || file.substr(0, 6) != kMagic) return Bad("no \\x93NUMPY magic");
  auto header = ParseNpyHeader(file);
  if (!header.ok()) return header.status();
  if (!header->has_value()) return Bad("header runs past the end of the file");
  NpyHeaderInfo& info = **header;
  const uint64_t data_start = info.data_offset;
  const uint64_t have = file.size() - data_start;
  if (have != info.data_bytes) {
    return Bad(
        absl::StrCat("the shape needs ", info.data_bytes, " data bytes, the file has ", have));
  }
  Tensor t;
  t.dtype = info.dtype;
  t.shape = std::move(info.shape);
  t.data_in_input = true;
  t.data_offset = data_start;
  t.data_size = have;
  return t;
}

}  // namespace tfrecordfs::tensor
