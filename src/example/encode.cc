// The encoders' shared pieces (encode_internal.h) and EncodeExample.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "encode_internal.h"
#include "example.pb.h"
#include "tfrecordfs/example/example.h"

namespace tfrecordfs::example {
namespace internal {

void ToProto(const Feature& f, proto::Feature* pf) {
  switch (f.kind) {
    case Kind::kBytes: {
      auto* list = pf->mutable_bytes_list();
      for (absl::string_view v : f.bytes) list->add_value(v.data(), v.size());
      break;
    }
    case Kind::kFloat:
      pf->mutable_float_list()->mutable_value()->Add(f.floats.begin(), f.floats.end());
      break;
    case Kind::kInt64:
      pf->mutable_int64_list()->mutable_value()->Add(f.int64s.begin(), f.int64s.end());
      break;
    case Kind::kNone:
      break;
  }
}

std::string SerializeDeterministically(const google::protobuf::MessageLite& message) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream sos(&out);
    google::protobuf::io::CodedOutputStream cos(&sos);
    cos.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&cos);
  }
  return out;
}

}  // namespace internal

std::string EncodeExample(const FeatureTable& table) {
  proto::Example ex;
  auto* map = ex.mutable_features()->mutable_feature();
  for (const Feature& f : table.features) internal::ToProto(f, &(*map)[f.name]);
  return internal::SerializeDeterministically(ex);
}

}  // namespace tfrecordfs::example
