#include "tfrecordfs/example/record.h"

#include "absl/strings/str_cat.h"

namespace tfrecordfs::example {

const char* PayloadKindName(PayloadKind kind) {
  switch (kind) {
    case PayloadKind::kExample:
      return "Example";
    case PayloadKind::kSequenceExample:
      return "SequenceExample";
    case PayloadKind::kExampleList:
      return "ExampleListWithContext";
    case PayloadKind::kExampleInExample:
      return "ExampleInExample";
    case PayloadKind::kRaw:
      return "raw";
  }
  return "raw";
}

DecodedRecord DecodeRecord(absl::string_view payload) {
  DecodedRecord out;
  auto example = DecodeExample(payload);
  if (example.ok()) {
    out.kind = PayloadKind::kExample;
    out.example = *std::move(example);
    if (auto eie = ExampleListFromEie(out.example); eie.ok()) {
      out.kind = PayloadKind::kExampleInExample;
      out.list = *std::move(eie);
    }
    return out;
  }
  auto sequence = DecodeSequenceExample(payload);
  if (sequence.ok()) {
    out.kind = PayloadKind::kSequenceExample;
    out.sequence = *std::move(sequence);
    return out;
  }
  auto list = DecodeExampleList(payload);
  if (list.ok()) {
    out.kind = PayloadKind::kExampleList;
    out.list = *std::move(list);
    return out;
  }
  out.raw_reason = absl::StrCat(example.status().message(), "; ", sequence.status().message(), "; ",
                                list.status().message());
  return out;
}

}  // namespace tfrecordfs::example
