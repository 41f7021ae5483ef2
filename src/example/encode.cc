#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "example.pb.h"
#include "tfrecordfs/example/example.h"

namespace tfrecordfs::example {

std::string EncodeExample(const FeatureTable& table) {
  proto::Example ex;
  auto* map = ex.mutable_features()->mutable_feature();
  for (const Feature& f : table.features) {
    proto::Feature& pf = (*map)[f.name];
    switch (f.kind) {
      case Kind::kBytes: {
        auto* list = pf.mutable_bytes_list();
        for (absl::string_view v : f.bytes) list->add_value(v.data(), v.size());
        break;
      }
      case Kind::kFloat: {
        auto* list = pf.mutable_float_list();
        list->mutable_value()->Add(f.floats.begin(), f.floats.end());
        break;
      }
      case Kind::kInt64: {
        auto* list = pf.mutable_int64_list();
        list->mutable_value()->Add(f.int64s.begin(), f.int64s.end());
        break;
      }
      case Kind::kNone:
        break;
    }
  }
  std::string out;
  {
    google::protobuf::io::StringOutputStream sos(&out);
    google::protobuf::io::CodedOutputStream cos(&sos);
    cos.SetSerializationDeterministic(true);
    ex.SerializeToCodedStream(&cos);
  }
  return out;
}

}  // namespace tfrecordfs::example
