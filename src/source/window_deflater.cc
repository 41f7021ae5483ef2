#include "tfrecordfs/source/window_deflater.h"

#include <isa-l/igzip_lib.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tfrecordfs/source/checkpoints.h"

namespace tfrecordfs::source {

WindowDeflater::WindowDeflater()
    : z_(std::make_unique<isal_zstream>()),
      level_buf_(ISAL_DEF_LVL1_DEFAULT, '\0'),
      // Room for a whole window that does not compress, in stored blocks.
      out_(2 * kWindowSize + 1024, '\0') {}

WindowDeflater::~WindowDeflater() = default;

absl::StatusOr<absl::string_view> WindowDeflater::Deflate(absl::string_view window) {
  if (window.size() > kWindowSize) {
    return absl::InternalError(absl::StrCat("a checkpoint window of ", window.size(),
                                            " bytes (at most ", kWindowSize, ")"));
  }
  isal_zstream& z = *z_;
  isal_deflate_stateless_init(&z);
  z.level = 1;
  z.level_buf = reinterpret_cast<uint8_t*>(level_buf_.data());
  z.level_buf_size = static_cast<uint32_t>(level_buf_.size());
  z.end_of_stream = 1;
  z.flush = NO_FLUSH;
  z.next_in = reinterpret_cast<uint8_t*>(const_cast<char*>(window.data()));
  z.avail_in = static_cast<uint32_t>(window.size());
  z.next_out = reinterpret_cast<uint8_t*>(out_.data());
  z.avail_out = static_cast<uint32_t>(out_.size());
  if (const int ret = isal_deflate_stateless(&z); ret != COMP_OK || z.avail_in != 0) {
    return absl::InternalError(
        absl::StrCat("ISA-L's deflate of a checkpoint window failed (", ret, ")"));
  }
  return absl::string_view(out_.data(), out_.size() - z.avail_out);
}

}  // namespace tfrecordfs::source
