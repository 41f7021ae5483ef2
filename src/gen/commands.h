// tfrecordfs-gen's subcommands, one function each (main.cc parses the flags;
// its header comment documents the command line). Each writes into `dir`,
// creating it (not its parents) when missing and replacing files of the same
// names, prints what went wrong as "tfrecordfs-gen: <message>" on stderr, and
// returns the process exit status (0 or 1). Every output is a function of
// the arguments alone: the same command writes the same bytes.
//
// Thread-safety: run one at a time (they print to std::cerr).
#ifndef TFRECORDFS_SRC_GEN_COMMANDS_H_
#define TFRECORDFS_SRC_GEN_COMMANDS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "write_shards.h"

namespace tfrecordfs::gen {

// Object-detection-like records with real JPEG images and a thumbnail
// tensor, in shards train-*, plus dataset_info.json (image_datasets.cc).
int Sample(const std::string& dir, uint64_t records, uint64_t shards, const Storage& storage);
// `records` records of image_raw (`bytes` random bytes behind a JPEG magic),
// label, height, width, in shards <prefix>-* (image_datasets.cc).
int Synthetic(const std::string& dir, uint64_t records, uint64_t shards, uint64_t bytes,
              const std::string& prefix, const Storage& storage);
// serialize_tensor values of every dtype and shape class, and MANIFEST.txt
// listing each array file (tensor_datasets.cc).
int Tensors(const std::string& dir, uint64_t records);
// tf.train.SequenceExamples (tensor_datasets.cc).
int Sequence(const std::string& dir, uint64_t records);
// TF-Ranking ExampleListWithContext records in elwc-*, Example-in-Example
// records in eie-* (tensor_datasets.cc).
int Ranking(const std::string& dir, uint64_t records);
// The hostile corpus (hostile_corpus.h), a shard of `tiny_records` tiny
// records (none for 0), and MANIFEST.txt saying what each record is
// (hostile.cc).
int Hostile(const std::string& dir, uint64_t tiny_records);
// Seed inputs for the fuzz targets: dir/<target>/<name> (fuzz_seeds.cc).
int FuzzSeeds(const std::string& dir);

// Prints "tfrecordfs-gen: <status message>" on stderr; returns 1.
int Fail(const absl::Status& status);

}  // namespace tfrecordfs::gen

#endif  // TFRECORDFS_SRC_GEN_COMMANDS_H_
