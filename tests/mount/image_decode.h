// Full JPEG / PNG decoding for the mount tests (libjpeg, libpng).
#ifndef TFRECORDFS_TESTS_MOUNT_IMAGE_DECODE_H_
#define TFRECORDFS_TESTS_MOUNT_IMAGE_DECODE_H_

#include <string>

namespace tfrecordfs::mount_test {

struct DecodedImage {
  std::string error;  // empty on success
  int width = 0;
  int height = 0;
  int components = 0;
};

// Decodes every scanline; any libjpeg error or warning (a corrupt entropy
// stream, premature end of data) is an error.
DecodedImage DecodeJpeg(const std::string& bytes);
// Decodes every row with CRC checks on.
DecodedImage DecodePng(const std::string& bytes);

}  // namespace tfrecordfs::mount_test

#endif  // TFRECORDFS_TESTS_MOUNT_IMAGE_DECODE_H_
