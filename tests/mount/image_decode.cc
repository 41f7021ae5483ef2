#include "image_decode.h"

#include <jpeglib.h>
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <vector>

namespace tfrecordfs::mount_test {

namespace {

struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  std::string message;
};

void JpegFail(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  char buf[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, buf);
  err->message = buf;
  std::longjmp(err->jump, 1);
}

// Warnings (level -1) mean corrupt data that libjpeg papers over.
void JpegMessage(j_common_ptr cinfo, int level) {
  if (level < 0) JpegFail(cinfo);
}

}  // namespace

DecodedImage DecodeJpeg(const std::string& bytes) {
  DecodedImage out;
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = JpegFail;
  err.mgr.emit_message = JpegMessage;
  std::vector<unsigned char> row;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    out.error = "libjpeg: " + err.message;
    return out;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()),
               static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  jpeg_start_decompress(&cinfo);
  row.resize(static_cast<size_t>(cinfo.output_width) * cinfo.output_components);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW rows[1] = {row.data()};
    jpeg_read_scanlines(&cinfo, rows, 1);
  }
  out.width = static_cast<int>(cinfo.output_width);
  out.height = static_cast<int>(cinfo.output_height);
  out.components = cinfo.output_components;
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return out;
}

DecodedImage DecodePng(const std::string& bytes) {
  DecodedImage out;
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, bytes.data(), bytes.size())) {
    out.error = std::string("libpng: ") + image.message;
    return out;
  }
  image.format = PNG_FORMAT_RGBA;
  std::vector<unsigned char> pixels(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, pixels.data(), 0, nullptr)) {
    out.error = std::string("libpng: ") + image.message;
    png_image_free(&image);
    return out;
  }
  if (image.warning_or_error != 0) {
    out.error = std::string("libpng warning: ") + image.message;
  }
  out.width = static_cast<int>(image.width);
  out.height = static_cast<int>(image.height);
  out.components = 4;
  png_image_free(&image);
  return out;
}

}  // namespace tfrecordfs::mount_test
