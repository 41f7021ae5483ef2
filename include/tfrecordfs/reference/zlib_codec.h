// zlib's own view of compressed bytes, by calling zlib directly: deflate with
// chosen settings, and inflate until the end or the first error. For the
// tests and fuzz targets, which must not trust src/source to say what a GZIP
// or ZLIB file holds, and for tfrecordfs-gen's compressed fuzz seeds.
//
// Contract: Deflate's output depends only on its arguments and the zlib
// version (tfrecordfs-gen's fuzz seeds rely on that). Neither function
// fails: settings zlib refuses give "" (Deflate); damage ends Inflate's
// output and is reported through *clean.
//
// Thread-safety: pure functions.
#ifndef TFRECORDFS_REFERENCE_ZLIB_CODEC_H_
#define TFRECORDFS_REFERENCE_ZLIB_CODEC_H_

#include <zlib.h>

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace tfrecordfs::reference::zlib {

enum class Wrap { kGzip, kZlib, kRaw };

// deflate with the given level and strategy; `flush_every` > 0 ends a
// block with Z_FULL_FLUSH every that many input bytes. "" if zlib refuses
// the settings.
std::string Deflate(absl::string_view data, Wrap wrap, int level = 6,
                    int strategy = Z_DEFAULT_STRATEGY, size_t flush_every = 0);

// Every byte zlib decompresses from `file` before its end or first error.
// `window_bits` as for inflateInit2 (31 GZIP, 15 ZLIB, 47 either). With
// `gzip_members`, a stream end followed by 1f 8b starts the next GZIP member
// (as gzip -d and TensorFlow read); anything else after a stream end stops.
// *clean (when given) says whether the whole file decompressed.
std::string Inflate(absl::string_view file, int window_bits, bool gzip_members,
                    bool* clean = nullptr);

// A GZIP or ZLIB file that is exactly one whole stream (one GZIP member),
// decompressed; nullopt otherwise.
std::optional<std::string> InflateOneStream(absl::string_view file);

}  // namespace tfrecordfs::reference::zlib

#endif  // TFRECORDFS_REFERENCE_ZLIB_CODEC_H_
