#include "canon.h"

#include <functional>
#include <string_view>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace tfrecordfs::test {

std::ostream& operator<<(std::ostream& os, const Canon& c) {
  os << example::KindName(c.kind) << "[";
  for (const auto& b : c.bytes) os << "'" << absl::CHexEscape(b) << "' ";
  for (uint32_t f : c.float_bits) os << "0x" << std::hex << f << std::dec << " ";
  for (int64_t v : c.int64s) os << v << " ";
  return os << "]";
}

Canon ToCanon(const example::Feature& f) {
  Canon c;
  c.kind = f.kind;
  for (absl::string_view b : f.bytes) c.bytes.emplace_back(b);
  for (float v : f.floats) c.float_bits.push_back(Bits(v));
  c.int64s = f.int64s;
  return c;
}

CanonTable FromTable(const example::FeatureTable& t) {
  CanonTable out;
  for (const example::Feature& f : t.features) out[f.name] = ToCanon(f);
  return out;
}

CanonTable FromProto(const proto::Example& ex) {
  CanonTable out;
  for (const auto& [name, pf] : ex.features().feature()) {
    Canon& c = out[name];
    switch (pf.kind_case()) {
      case proto::Feature::kBytesList:
        c.kind = example::Kind::kBytes;
        for (const std::string& b : pf.bytes_list().value()) c.bytes.push_back(b);
        break;
      case proto::Feature::kFloatList:
        c.kind = example::Kind::kFloat;
        for (float v : pf.float_list().value()) c.float_bits.push_back(Bits(v));
        break;
      case proto::Feature::kInt64List:
        c.kind = example::Kind::kInt64;
        c.int64s.assign(pf.int64_list().value().begin(), pf.int64_list().value().end());
        break;
      case proto::Feature::KIND_NOT_SET:
        break;
    }
  }
  return out;
}

namespace {

std::string Short(absl::string_view s) {
  if (s.size() <= 80) return absl::CEscape(s);
  return absl::StrCat(absl::CEscape(s.substr(0, 80)), "...(", s.size(), " bytes, hash ",
                      std::hash<std::string_view>()(std::string_view(s.data(), s.size())), ")");
}

std::string FeatureText(const example::Feature& f) {
  std::string s = example::KindName(f.kind);
  for (absl::string_view b : f.bytes) absl::StrAppend(&s, " ", Short(b));
  for (float v : f.floats) absl::StrAppend(&s, " f", Bits(v));
  for (int64_t v : f.int64s) absl::StrAppend(&s, " ", v);
  return s;
}

}  // namespace

std::string SequenceText(const example::SequenceTable& t) {
  std::string out;
  for (const auto& f : t.context.features) {
    absl::StrAppend(&out, "context ", Short(f.name), ": ", FeatureText(f), "\n");
  }
  for (const auto& l : t.lists) {
    absl::StrAppend(&out, "list ", Short(l.name), " (", l.steps.size(), " steps)\n");
    for (size_t i = 0; i < l.steps.size(); ++i) {
      absl::StrAppend(&out, "  ", i, ": ", FeatureText(l.steps[i]), "\n");
    }
  }
  return out;
}

}  // namespace tfrecordfs::test
