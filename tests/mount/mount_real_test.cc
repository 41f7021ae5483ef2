// Real TFRecord files written by TensorFlow (/work/shared/data/real, see its
// SOURCES.md), mounted as one directory. Every uncompressed shard is read
// directly (record reader + Example decoder + naming) and compared with the
// mount byte for byte; compressed and other files must pass through
// unchanged; every JPEG and PNG must decode; the damaged shard must mount and
// fail only where it is damaged, saying where.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "expectations.h"
#include "gtest/gtest.h"
#include "image_decode.h"
#include "mount_harness.h"

namespace tfrecordfs::mount_test {
namespace {

struct RealShard {
  const char* path;
  uint64_t records;
  bool is_example;
  bool is_sequence = false;  // tf.train.SequenceExamples: context/ + feature_lists/
  bool is_list = false;      // TF-Ranking ExampleListWithContext: context/ + examples/
};

// Record counts from SOURCES.md.
const RealShard kShards[] = {
    {"od_raccoon_jpeg_bbox/test.record", 40, true},
    {"deeplab_voc_seg_jpeg_png/val-00000-of-00001.tfrecord", 3, true},
    {"attention_ocr_fsns_png/fsns-00000-of-00001", 5, true},
    {"lingvo_wmt_int64/translate_ende_wmt32k-train-00511-of-00512", 8941, true},
    {"lingvo_wmt_int64/wmt14_ende_wpm_32k_test.tfrecord", 100, true},
    {"tf_agents_antmaze_slash_keys/antmaze-medium-play-v0_0.tfrecord", 18, true},
    {"tfx_mnist_float784/mnist.tfrecord", 1000, true},
    {"non_example_ranking_elwc/eval_elwc.tfrecord", 10, false, false, true},
    {"non_example_raw_strings/tfrecord_iterator_test.tfrecord", 3, false},
    {"non_example_tensorboard_events/events.out.tfevents.1599310762", 1203, false},
    // Compressed shards (SOURCES.md: 424 or 425 records each, 5,091 in all).
    {"tfx_csv_example_gen_gzip_12shards/Split-eval/data_tfrecord-00000-of-00012.gz", 424, true},
    {"tfx_csv_example_gen_gzip_12shards/Split-eval/data_tfrecord-00001-of-00012.gz", 425, true},
    {"tfx_csv_example_gen_gzip_12shards/Split-eval/data_tfrecord-00002-of-00012.gz", 424, true},
    {"tfx_csv_example_gen_gzip_12shards/Split-eval/data_tfrecord-00003-of-00012.gz", 424, true},
    {"tfx_csv_example_gen_gzip_12shards/Split-eval/data_tfrecord-00004-of-00012.gz", 424, true},
    {"tfx_csv_example_gen_gzip_12shards/Split-eval/data_tfrecord-00005-of-00012.gz", 425, true},
    {"tfx_csv_example_gen_gzip_12shards/Split-eval/data_tfrecord-00006-of-00012.gz", 425, true},
    {"tfx_csv_example_gen_gzip_12shards/Split-eval/data_tfrecord-00007-of-00012.gz", 424, true},
    {"tfx_csv_example_gen_gzip_12shards/Split-eval/data_tfrecord-00008-of-00012.gz", 424, true},
    {"tfx_csv_example_gen_gzip_12shards/Split-eval/data_tfrecord-00009-of-00012.gz", 424, true},
    {"tfx_csv_example_gen_gzip_12shards/Split-eval/data_tfrecord-00010-of-00012.gz", 424, true},
    {"tfx_csv_example_gen_gzip_12shards/Split-eval/data_tfrecord-00011-of-00012.gz", 424, true},
    {"tfx_sequence_example_gzip/data_tfrecord_eval.gz", 4500, false, true},
    {"tft_sequence_example_gzip/data_tfrecord.gz", 3, false, true},
    {"basenji_zlib/test-3.tfr", 1, true},
    {"basenji_zlib/train-7.tfr", 0, true},  // an empty ZLIB stream: no records
};
constexpr char kDamaged[] = "corrupt_crlf_stripped/pets_examples.record";

class RealDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TFRFS_SKIP_WITHOUT_FUSE();
    data_ = RealDataDir();
    if (data_.empty()) GTEST_SKIP() << RealDataMissing();
    const absl::Status err = mount_.Start({data_});
    ASSERT_TRUE(err.ok()) << err;
  }

  void TearDown() override {
    if (mount_.pid() <= 0) return;
    std::string err;
    EXPECT_EQ(mount_.Stop(&err), 0) << err << "\nstderr:\n" << mount_.Stderr();
  }

  std::string M(const std::string& rel) const { return mount_.path(rel); }

  std::string data_;
  Mount mount_;
};

int64_t ReadInt(const std::string& path) {
  const std::string s = ReadWholeFile(path);
  int64_t v = -1;
  EXPECT_TRUE(absl::SimpleAtoi(absl::StripSuffix(s, "\n"), &v)) << path << ": '" << s << "'";
  return v;
}

TEST_F(RealDataTest, EveryShardRecordAndFileMatchesADirectRead) {
  for (const RealShard& shard : kShards) {
    SCOPED_TRACE(shard.path);
    const DirectShard direct = ReadShardDirectly(data_ + "/" + shard.path);
    ASSERT_EQ(direct.error, "");
    ASSERT_EQ(direct.payloads.size(), shard.records);
    ExpectedTree expected;
    expected[shard.path] = ExpectedNode{true, ""};
    for (uint64_t r = 0; r < direct.payloads.size(); ++r) {
      ASSERT_TRUE(direct.payloads[r].has_value())
          << "record " << r << ": " << direct.record_errors[r];
      const std::string& payload = *direct.payloads[r];
      EXPECT_EQ(example::DecodeExample(absl::string_view(payload.data(), payload.size())).ok(),
                shard.is_example)
          << "record " << r;
      AddRecordLayout(std::string(shard.path) + "/" + RecordDirName(r, shard.records), payload,
                      &expected);
    }
    const auto walked = WalkTree(M(shard.path));
    EXPECT_EQ(CompareTrees(expected, walked, shard.path), 0u);
    // The shard directory lists exactly the record folders.
    size_t record_dirs = 0;
    for (const auto& [rel, node] : walked) record_dirs += rel.find('/') == std::string::npos;
    EXPECT_EQ(record_dirs, shard.records);

    if (shard.is_sequence) {
      for (uint64_t r = 0; r < shard.records; ++r) {
        const std::string dir = RecordDirName(r, shard.records);
        EXPECT_TRUE(walked.count(dir + "/feature_lists")) << dir;
        EXPECT_FALSE(walked.count(dir + "/record.bin")) << dir;
      }
    } else if (shard.is_list) {
      for (uint64_t r = 0; r < shard.records; ++r) {
        const std::string dir = RecordDirName(r, shard.records);
        EXPECT_TRUE(walked.count(dir + "/examples")) << dir;
        EXPECT_TRUE(walked.count(dir + "/context")) << dir;
        EXPECT_FALSE(walked.count(dir + "/record.bin")) << dir;
      }
    } else if (!shard.is_example) {
      // A payload that is not an Example: one record.bin holding it.
      for (uint64_t r = 0; r < shard.records; ++r) {
        const std::string dir = RecordDirName(r, shard.records);
        const auto files = Subtree(walked, dir);
        ASSERT_EQ(files.size(), 1u) << dir;
        ASSERT_TRUE(files.count("record.bin")) << dir;
        EXPECT_EQ(files.at("record.bin").content, *direct.payloads[r]);
      }
    }
  }
  // Spot checks against SOURCES.md, independent of naming.
  EXPECT_EQ(
      ReadWholeFile(M("non_example_raw_strings/tfrecord_iterator_test.tfrecord/0/record.bin")),
      "hello world");
  EXPECT_EQ(
      ReadWholeFile(M("non_example_raw_strings/tfrecord_iterator_test.tfrecord/1/record.bin")),
      "12345");
  EXPECT_EQ(
      ReadWholeFile(M("non_example_raw_strings/tfrecord_iterator_test.tfrecord/2/record.bin")),
      "success");
  EXPECT_EQ(ReadWholeFile(M("od_raccoon_jpeg_bbox/test.record/00/image/format.txt")), "jpg\n");
  EXPECT_EQ(ReadWholeFile(M("attention_ocr_fsns_png/fsns-00000-of-00001/0/image/text.txt")),
            "Rue Perreyon\n");
  struct stat st;
  ASSERT_EQ(::stat(M("od_raccoon_jpeg_bbox/test.record/00/image/encoded.jpg").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 53737);
  ASSERT_EQ(
      ::stat(M("deeplab_voc_seg_jpeg_png/val-00000-of-00001.tfrecord/0/image/encoded.jpg").c_str(),
             &st),
      0);
  EXPECT_EQ(st.st_size, 218323);
  ASSERT_EQ(::stat(M("deeplab_voc_seg_jpeg_png/val-00000-of-00001.tfrecord/0/image/segmentation/"
                     "class/encoded.png")
                       .c_str(),
                   &st),
            0);
  EXPECT_EQ(st.st_size, 183862);
  ASSERT_EQ(
      ::stat(M("attention_ocr_fsns_png/fsns-00000-of-00001/0/image/encoded.png").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 128843);
  // mnist: 784 float lines; image_class one int64 line.
  const std::string floats = ReadWholeFile(M("tfx_mnist_float784/mnist.tfrecord/000/image_floats"));
  EXPECT_EQ(std::count(floats.begin(), floats.end(), '\n'), 784);
  // The raw int32 step_type of tf_agents is a 4-byte binary file.
  ASSERT_EQ(::stat(M("tf_agents_antmaze_slash_keys/antmaze-medium-play-v0_0.tfrecord/00/"
                     "time_step/step_type.bin")
                       .c_str(),
                   &st),
            0);
  EXPECT_EQ(st.st_size, 4);
  // 8,941 records: four-digit names, the plain decimal spelling is an alias.
  const std::string lingvo = "lingvo_wmt_int64/translate_ende_wmt32k-train-00511-of-00512/";
  struct stat a, b;
  ASSERT_EQ(::stat(M(lingvo + "0042").c_str(), &a), 0);
  ASSERT_EQ(::stat(M(lingvo + "42").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_EQ(ReadWholeFile(M(lingvo + "42/inputs")), ReadWholeFile(M(lingvo + "0042/inputs")));
  EXPECT_EQ(::stat(M(lingvo + "042").c_str(), &a), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(::stat(M(lingvo + "8941").c_str(), &a), -1);
  EXPECT_EQ(errno, ENOENT);
  ASSERT_EQ(::stat(M(lingvo + "8940").c_str(), &a), 0);
  // Compressed shards: the ZLIB basenji record's raw 131,072-byte features,
  // an empty ZLIB stream as an empty shard, and a GZIP record by number.
  ASSERT_EQ(::stat(M("basenji_zlib/test-3.tfr/0/sequence.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 131072);
  ASSERT_EQ(::stat(M("basenji_zlib/test-3.tfr/0/target.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 131072);
  EXPECT_TRUE(std::filesystem::is_empty(M("basenji_zlib/train-7.tfr")));
  const std::string taxi = "tfx_csv_example_gen_gzip_12shards/Split-eval/";
  EXPECT_EQ(ReadWholeFile(M(taxi + "data_tfrecord-00001-of-00012.gz/42/trip_start_month")),
            ReadWholeFile(M(taxi + "data_tfrecord-00001-of-00012.gz/042/trip_start_month")));
  EXPECT_FALSE(
      ReadWholeFile(M(taxi + "data_tfrecord-00001-of-00012.gz/424/trip_start_month")).empty());
  // SequenceExamples (SOURCES.md section 3), read straight from the GZIP
  // shards: tf.Transform's first record, whose key int_feature is both a
  // context feature and a list, and whose second string step is an empty
  // BytesList (an empty .txt).
  const std::string tft = "tft_sequence_example_gzip/data_tfrecord.gz/0/";
  EXPECT_EQ(ReadWholeFile(M(tft + "context/float_feature")), "1.0\n2.0\n3.0\n4.0\n");
  EXPECT_EQ(ReadWholeFile(M(tft + "context/int_feature")), "0\n");
  EXPECT_EQ(ReadWholeFile(M(tft + "feature_lists/int_feature/0")), "1\n2\n");
  EXPECT_EQ(ReadWholeFile(M(tft + "feature_lists/int_feature/1")), "3\n4\n");
  EXPECT_EQ(ReadWholeFile(M(tft + "feature_lists/string_feature/0.txt")), "Hello\nWorld\n");
  EXPECT_EQ(ReadWholeFile(M(tft + "feature_lists/string_feature/1.txt")), "");
  // TFX's first record: a kindless context (an empty `.none` file per key,
  // SOURCES.md: f and i are empty), 2 steps.
  const std::string tfx = "tfx_sequence_example_gzip/data_tfrecord_eval.gz/0000/";
  EXPECT_EQ(RunCommand({"ls", M(tfx + "context")}).out, "f.none\ni.none\n");
  EXPECT_EQ(ReadWholeFile(M(tfx + "context/f.none")), "");
  EXPECT_EQ(ReadWholeFile(M(tfx + "feature_lists/s/0.txt")), "10500\n");
  EXPECT_EQ(ReadWholeFile(M(tfx + "feature_lists/s/1.txt")), "10501\n");
  // Compressed shards index without a warning.
  EXPECT_EQ(mount_.Stderr().find(".gz: "), std::string::npos) << mount_.Stderr();
  EXPECT_EQ(mount_.Stderr().find("train-7.tfr"), std::string::npos) << mount_.Stderr();
}

// Everything that is not a shard (SOURCES.md) is shown as a plain file with
// identical bytes; shards, plain or compressed, are directories.
TEST_F(RealDataTest, OtherFilesPassThroughUnchanged) {
  std::set<std::string> shards = {kDamaged};
  for (const RealShard& s : kShards) shards.insert(s.path);
  size_t plain = 0, dirs = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(data_)) {
    const std::string rel = std::filesystem::relative(e.path(), data_).string();
    struct stat st;
    ASSERT_EQ(::lstat(M(rel).c_str(), &st), 0) << rel << ": " << std::strerror(errno);
    if (e.is_directory()) {
      EXPECT_TRUE(S_ISDIR(st.st_mode)) << rel;
      ++dirs;
    } else if (shards.count(rel)) {
      EXPECT_TRUE(S_ISDIR(st.st_mode)) << rel << " should show as a shard directory";
    } else {
      ++plain;
      EXPECT_EQ(st.st_mode, S_IFREG | 0444u) << rel;
      const std::string want = ReadWholeFile(e.path().string());
      EXPECT_EQ(static_cast<uint64_t>(st.st_size), want.size()) << rel;
      EXPECT_TRUE(ReadWholeFile(M(rel)) == want) << rel << " differs from the source file";
    }
  }
  EXPECT_EQ(plain, 1u);  // SOURCES.md
  EXPECT_GE(dirs, 14u);
}

// du and file managers add up st_blocks: every file and folder holds
// ceil(size/512) blocks, so `du` exceeds the apparent size by less than one
// 512-byte block per file (the rounding of each file's last block) and
// nothing more.
TEST_F(RealDataTest, DiskUsageIsTheApparentSizeRoundedPerFile) {
  // Image, float and plain-file folders (the whole mount takes a minute).
  std::string roots;
  for (const char* rel : {"SOURCES.md", "tfx_mnist_float784", "od_raccoon_jpeg_bbox",
                          "deeplab_voc_seg_jpeg_png", "attention_ocr_fsns_png", "basenji_zlib"}) {
    absl::StrAppend(&roots, " ", ShellQuote(M(rel)));
  }
  CommandResult blocks = Shell("find" + roots + " -printf '%y %s %b\\n'");
  ASSERT_EQ(blocks.exit_code, 0) << blocks.err;
  uint64_t files = 0, apparent = 0, used = 0;
  std::istringstream in(blocks.out);
  std::string type;
  uint64_t size = 0, b = 0;
  while (in >> type >> size >> b) {
    ASSERT_EQ(b, (size + 511) / 512) << type << " of " << size << " bytes";
    files += type == "f";
    apparent += size;
    used += b * 512;
  }
  ASSERT_GT(files, 1000u);
  CommandResult du_used = Shell("du -s -c --block-size=1" + roots + " | tail -1");
  CommandResult du_apparent =
      Shell("du -s -c --block-size=1 --apparent-size" + roots + " | tail -1");
  ASSERT_EQ(du_used.exit_code, 0) << du_used.err;
  ASSERT_EQ(du_apparent.exit_code, 0) << du_apparent.err;
  const uint64_t du_u = std::stoull(du_used.out), du_a = std::stoull(du_apparent.out);
  EXPECT_EQ(du_a, apparent);
  EXPECT_EQ(du_u, used) << "du adds up st_blocks";
  EXPECT_GE(du_u, du_a);
  EXPECT_LT(du_u - du_a, files * 512) << "du " << du_u << " vs apparent " << du_a;
}

// Every JPEG and PNG in the image datasets decodes in full, at the size the
// record's image/width and image/height say.
TEST_F(RealDataTest, ImagesDecodeAtTheirRecordedSize) {
  struct ImageSet {
    std::string shard;
    uint64_t records;
    std::vector<std::string> images;  // files inside a record folder
  };
  const std::vector<ImageSet> sets = {
      {"od_raccoon_jpeg_bbox/test.record", 40, {"image/encoded.jpg"}},
      {"deeplab_voc_seg_jpeg_png/val-00000-of-00001.tfrecord",
       3,
       {"image/encoded.jpg", "image/segmentation/class/encoded.png"}},
      {"attention_ocr_fsns_png/fsns-00000-of-00001", 5, {"image/encoded.png"}},
  };
  size_t decoded = 0;
  for (const ImageSet& set : sets) {
    for (uint64_t r = 0; r < set.records; ++r) {
      const std::string rec = set.shard + "/" + RecordDirName(r, set.records) + "/";
      const int64_t width = ReadInt(M(rec + "image/width"));
      const int64_t height = ReadInt(M(rec + "image/height"));
      for (const std::string& image : set.images) {
        SCOPED_TRACE(rec + image);
        const std::string bytes = ReadWholeFile(M(rec + image));
        const bool jpeg = image.ends_with(".jpg");
        const DecodedImage d = jpeg ? DecodeJpeg(bytes) : DecodePng(bytes);
        EXPECT_EQ(d.error, "");
        EXPECT_EQ(d.width, width);
        EXPECT_EQ(d.height, height);
        ++decoded;
      }
    }
  }
  EXPECT_EQ(decoded, 40u + 6u + 5u);
}

// The CRLF-damaged pets file: the mount comes up, intact records read with
// the full object-detection schema, damaged ones fail with EIO, and the log
// names the shard, the record and the byte offset.
TEST_F(RealDataTest, DamagedShardServesItsIntactRecords) {
  const std::string shard_path = data_ + "/" + kDamaged;
  const DirectShard direct = ReadShardDirectly(shard_path);
  ASSERT_EQ(direct.error, "");
  std::set<uint64_t> intact, broken;
  for (uint64_t r = 0; r < direct.payloads.size(); ++r) {
    (direct.payloads[r] ? intact : broken).insert(r);
  }
  // What the framing code currently makes of the file (see SOURCES.md).
  EXPECT_EQ(direct.payloads.size(), 9u);
  EXPECT_EQ(intact, (std::set<uint64_t>{2, 3, 4, 7}));

  // The walk's problems are logged at startup with byte offsets.
  EXPECT_NE(mount_.Stderr().find(shard_path + ": byte offset "), std::string::npos)
      << mount_.Stderr();

  const uint64_t n = direct.payloads.size();
  size_t listed = 0;
  for (const auto& e : std::filesystem::directory_iterator(M(kDamaged))) {
    (void)e;
    ++listed;
  }
  EXPECT_EQ(listed, n);

  static const char* kSchema[] = {
      "image/encoded.jpg",
      "image/filename.txt",
      "image/format.txt",
      "image/height",
      "image/width",
      "image/key/sha256.txt",
      "image/source_id.txt",
      "image/object/bbox/xmin",
      "image/object/bbox/xmax",
      "image/object/bbox/ymin",
      "image/object/bbox/ymax",
      "image/object/class/label",
      "image/object/class/text.txt",
      "image/object/difficult",
      "image/object/truncated",
      "image/object/view.txt",
  };
  for (uint64_t r : intact) {
    const std::string rec = std::string(kDamaged) + "/" + RecordDirName(r, n);
    SCOPED_TRACE(rec);
    ExpectedTree expected;
    AddRecordLayout(rec, *direct.payloads[r], &expected);
    EXPECT_EQ(CompareTrees(expected, WalkTree(M(rec)), rec), 0u);
    for (const char* f : kSchema) {
      struct stat st;
      EXPECT_EQ(::stat(M(rec + "/" + f).c_str(), &st), 0) << f << ": " << std::strerror(errno);
    }
    const DecodedImage d = DecodeJpeg(ReadWholeFile(M(rec + "/image/encoded.jpg")));
    EXPECT_EQ(d.error, "");
    EXPECT_EQ(d.width, ReadInt(M(rec + "/image/width")));
    EXPECT_EQ(d.height, ReadInt(M(rec + "/image/height")));
  }
  for (uint64_t r : broken) {
    const std::string rec = M(std::string(kDamaged) + "/" + RecordDirName(r, n));
    SCOPED_TRACE(rec);
    // The folder exists (the index knows the record) but cannot be listed...
    struct stat st;
    ASSERT_EQ(::stat(rec.c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    for (int round = 0; round < 2; ++round) {
      DIR* d = ::opendir(rec.c_str());
      if (d != nullptr) {
        errno = 0;
        while (dirent* e = ::readdir(d)) {
          const std::string name = e->d_name;
          EXPECT_TRUE(name == "." || name == "..") << "listed " << name;
          errno = 0;
        }
        EXPECT_EQ(errno, EIO) << "readdir round " << round;
        ::closedir(d);
      } else {
        EXPECT_EQ(errno, EIO);
      }
      // ...nor can anything inside it be looked up or read.
      EXPECT_EQ(::stat((rec + "/image/encoded.jpg").c_str(), &st), -1);
      EXPECT_EQ(errno, EIO);
      EXPECT_EQ(::open((rec + "/image/encoded.jpg").c_str(), O_RDONLY), -1);
      EXPECT_EQ(errno, EIO);
    }
    CommandResult ls = RunCommand({"ls", rec});
    EXPECT_NE(ls.exit_code, 0);
    EXPECT_NE(ls.err.find("Input/output error"), std::string::npos) << ls.err;
  }
  // Each damaged record was reported with the shard path, its index and its
  // byte offset.
  const std::string log = mount_.Stderr();
  for (uint64_t r : broken) {
    const std::string want =
        absl::StrCat(shard_path, ": record ", r, " at byte offset ", direct.offsets[r]);
    EXPECT_NE(log.find(want), std::string::npos) << "no '" << want << "' in the log:\n" << log;
  }
  // Neighbouring healthy shards are unaffected.
  EXPECT_EQ(
      ReadWholeFile(M("non_example_raw_strings/tfrecord_iterator_test.tfrecord/0/record.bin")),
      "hello world");
}

}  // namespace
}  // namespace tfrecordfs::mount_test
