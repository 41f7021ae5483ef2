// Pieces the Example and SequenceExample encoders (encode.cc, sequence.cc)
// share; not a public API.
#ifndef TFRECORDFS_SRC_EXAMPLE_ENCODE_INTERNAL_H_
#define TFRECORDFS_SRC_EXAMPLE_ENCODE_INTERNAL_H_

#include <google/protobuf/message_lite.h>

#include <string>

#include "example.pb.h"
#include "tfrecordfs/example/example.h"

namespace tfrecordfs::example::internal {

// A feature as its protobuf message (kNone: left an empty Feature{}).
void ToProto(const Feature& f, proto::Feature* pf);

// `message` serialized with map keys sorted, so equal tables give equal bytes.
std::string SerializeDeterministically(const google::protobuf::MessageLite& message);

}  // namespace tfrecordfs::example::internal

#endif  // TFRECORDFS_SRC_EXAMPLE_ENCODE_INTERNAL_H_
