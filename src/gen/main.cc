// tfrecordfs-gen: writes TFRecord datasets with the project's own writer, for
// the demo, the tests and the benchmarks.
//
//   tfrecordfs-gen sample OUTDIR [--records N] [--shards S]
//       object-detection-like records with real JPEG images (libjpeg):
//       image/encoded, image/height, image/width, image/object/bbox/*,
//       image/object/class/{label,text}, label, class_name, and
//       image/thumbnail (a tf.io.serialize_tensor uint8 [24,32,3] tensor).
//   tfrecordfs-gen synthetic OUTDIR --records N --shards S [--bytes B]
//       [--prefix NAME]: N records across S shards; each record holds
//       image_raw (B random bytes behind a JPEG magic), label, height, width.
//   tfrecordfs-gen hostile OUTDIR [--records N]
//       the damaged and strange inputs the mount must survive (truncations,
//       stray bytes, CRC mismatches, a length near 2^64, empty and non-TFRecord
//       files, non-Example payloads, malformed protobuf, wire-format variants,
//       awkward feature names, a record too wide to show, and a shard of N
//       tiny records, default 1000000, 0 for none), each case built with the
//       project's writer plus byte edits. OUTDIR/MANIFEST.txt states what each
//       record really is, for tests/mount/hostile.
//   tfrecordfs-gen tensors OUTDIR [--records N]
//       records whose bytes features are tf.io.serialize_tensor values of
//       every dtype and shape class (.png and .npy views), a list of two
//       tensors, a DT_STRING tensor; OUTDIR/MANIFEST.txt lists each array
//       file with its dtype, shape and bytes (default 12 records).
//   tfrecordfs-gen sequence OUTDIR [--records N]
//       tf.train.SequenceExamples (see SequencePayload; default 14 records).
//   tfrecordfs-gen ranking OUTDIR [--records N]
//       TF-Ranking ExampleListWithContext records (see RankingPayload;
//       default 8 records) in one shard elwc-*, and as many
//       Example-in-Example records (EiePayload) in one shard eie-*.
//   sample and synthetic also take [--compression none|gzip|zlib] (shards
//       named .tfrecord.gz / .tfrecord.zlib, written by ShardWriter as one
//       stream with a full flush every MiB) and, for gzip, [--members M]:
//       each shard is M GZIP members concatenated.
//   tfrecordfs-gen fuzz-seeds OUTDIR
//       small seed inputs for the fuzz targets: OUTDIR/<target>/<name>.
//
// The code: main.cc (flags), commands.h (one function per subcommand),
// image_datasets.cc, tensor_datasets.cc, hostile_corpus.{h,cc} + hostile.cc,
// fuzz_seeds.cc; write_shards.{h,cc} and feature_builders.h serve the datasets.
// Hand-built protobuf bytes and deflate streams come from src/reference.
#include <iostream>
#include <string>
#include <string_view>

#include "absl/strings/numbers.h"
#include "commands.h"
#include "tfrecordfs/source/shard_source.h"

namespace tfrecordfs::gen {

int Fail(const absl::Status& status) {
  std::cerr << "tfrecordfs-gen: " << status.message() << "\n";
  return 1;
}

namespace {

int Main(int argc, char** argv) {
  constexpr char kUsage[] =
      "Usage: tfrecordfs-gen sample OUTDIR [--records N] [--shards S]\n"
      "       tfrecordfs-gen synthetic OUTDIR --records N --shards S [--bytes B] [--prefix P]\n"
      "         (sample, synthetic: [--compression none|gzip|zlib] [--members M])\n"
      "       tfrecordfs-gen hostile OUTDIR [--records N]\n"
      "       tfrecordfs-gen tensors OUTDIR [--records N]\n"
      "       tfrecordfs-gen sequence OUTDIR [--records N]\n"
      "       tfrecordfs-gen ranking OUTDIR [--records N]\n"
      "       tfrecordfs-gen fuzz-seeds OUTDIR\n";
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
      std::cout << kUsage;
      return 0;
    }
  }
  if (argc < 3) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string mode = argv[1], dir = argv[2];
  // An OUTDIR that looks like a flag is a mistake (`sample --records 5`
  // would otherwise write a dataset into a folder named --records).
  if (dir.empty() || dir[0] == '-') {
    std::cerr << "tfrecordfs-gen: OUTDIR '" << dir << "' is empty or starts with '-'\n" << kUsage;
    return 2;
  }
  if ((argc - 3) % 2 != 0) {
    std::cerr << "tfrecordfs-gen: " << argv[argc - 1] << " needs a value\n" << kUsage;
    return 2;
  }
  uint64_t records = 0, shards = 0, bytes = 0;
  bool records_given = false;
  std::string prefix = "data";
  Storage storage;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    bool ok = true;
    // clang-format off
    if (flag == "--records") ok = records_given = absl::SimpleAtoi(value, &records);
    else if (flag == "--shards") ok = absl::SimpleAtoi(value, &shards);
    else if (flag == "--bytes") ok = absl::SimpleAtoi(value, &bytes);
    else if (flag == "--prefix") prefix = value;
    else if (flag == "--members") ok = absl::SimpleAtoi(value, &storage.members) && storage.members > 0;
    else if (flag == "--compression") {
      auto codec = source::ParseCodecName(value);
      ok = codec.has_value();
      if (ok) storage.codec = *codec;
    } else ok = false;
    // clang-format on
    if (!ok) {
      std::cerr << "tfrecordfs-gen: bad flag " << flag << "\n" << kUsage;
      return 2;
    }
  }
  if (storage.members > 1 && storage.codec != source::Codec::kGzip) {
    std::cerr << "tfrecordfs-gen: --members needs --compression gzip (ZLIB is one stream)\n";
    return 2;
  }
  if (mode == "hostile") return Hostile(dir, records_given ? records : 1000000);
  if (mode == "fuzz-seeds") return FuzzSeeds(dir);
  if (mode == "tensors") return Tensors(dir, records_given ? records : 12);
  if (mode == "sequence") return Sequence(dir, records_given ? records : 14);
  if (mode == "ranking") return Ranking(dir, records_given ? records : 8);
  if (mode == "sample") return Sample(dir, records ? records : 40, shards ? shards : 2, storage);
  if (mode == "synthetic" && records > 0 && shards > 0) {
    return Synthetic(dir, records, shards, bytes, prefix, storage);
  }
  std::cerr << kUsage;
  return 2;
}

}  // namespace
}  // namespace tfrecordfs::gen

int main(int argc, char** argv) { return tfrecordfs::gen::Main(argc, argv); }
