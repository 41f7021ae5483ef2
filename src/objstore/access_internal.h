// What the bucket kinds' access files (s3.cc, gcs.cc) share: the settings'
// spelling of "true" and endpoints as URLs. Private to src/objstore/.
#ifndef TFRECORDFS_SRC_OBJSTORE_ACCESS_INTERNAL_H_
#define TFRECORDFS_SRC_OBJSTORE_ACCESS_INTERNAL_H_

#include <string>

namespace tfrecordfs::objstore::internal {

// "1", "true" or "yes" in any case (AWS_NO_SIGN_REQUEST, NO_GCE_CHECK).
bool IsTrue(const std::string& v);

// `endpoint` ("host:port", "http://host/") as a URL without a trailing '/':
// http:// when it names no scheme.
std::string WithScheme(std::string endpoint);

}  // namespace tfrecordfs::objstore::internal

#endif  // TFRECORDFS_SRC_OBJSTORE_ACCESS_INTERNAL_H_
