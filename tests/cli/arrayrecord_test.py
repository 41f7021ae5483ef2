#!/usr/bin/env python3
"""ArrayRecord files through the toolbox, as the real binary (suite 'cli').

`reshard --format arrayrecord` with every compression and group sizes 1, 7
and 65536 turns a TFRecord shard written here (tfrecord_check.frame: no
tfrecordfs code) into ArrayRecord files; `count`, `verify`, `schema`,
`show` and `index` read them; `reshard --format tfrecord` turns them back,
and tfrecord_check.py (its own CRC32C) reads the result, which must hold
the payloads written, in order. Grain's reference-writer files
(tests/unit/testdata/arrayrecord) convert to the records Grain documents.
Environment: TFRECORDFS_BIN, TFRECORDFS_SOURCE_ROOT (set by meson).
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfrecord_check as tc  # noqa: E402

BIN = os.environ.get("TFRECORDFS_BIN", "")
ROOT = os.environ.get("TFRECORDFS_SOURCE_ROOT", "")
# The riegeli/records signature (google/riegeli, riegeli_records_file_format.md).
SIGNATURE = bytes.fromhex(
    "83af70d10d884a3f00000000000000004000000000000000"
    "91bac23c9287e1a90000000000000000e19f13c0e9b1c372"
    "73000000000000000000000000000000")


def varint(n):
    out = b""
    while n >= 0x80:
        out += bytes([n & 0x7F | 0x80])
        n >>= 7
    return out + bytes([n])


def ln(field, b):
    return varint(field << 3 | 2) + varint(len(b)) + b


def example(label, text):
    feats = ln(1, ln(1, b"label") + ln(2, ln(3, ln(1, varint(label))))) + \
        ln(1, ln(1, b"text") + ln(2, ln(1, ln(1, text))))
    return ln(1, feats)


def payloads():
    out = []
    for i in range(40):
        if i % 4 == 3:
            out.append(b"\xff raw %d " % i + bytes((i * 7 + k) & 0xFF for k in range(i * 313)))
        else:
            out.append(example(i * 3, b"text %d" % i))
    return out


class ArrayRecordToolboxTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tfrfs-ar-")
        # The index cache in the test's own directory.
        self.env = dict(os.environ, XDG_CACHE_HOME=os.path.join(self.tmp, "cache"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_bin(self, *args, expect=0):
        r = subprocess.run([BIN, *args], capture_output=True, text=True, env=self.env,
                           timeout=240)
        self.assertEqual(r.returncode, expect, f"{args}: {r.stdout}\n{r.stderr}")
        return r

    def test_round_trip_every_compression_and_group_size(self):
        src = os.path.join(self.tmp, "src")
        os.makedirs(src)
        want = payloads()
        with open(os.path.join(src, "in.tfrecord"), "wb") as f:
            for p in want:
                f.write(tc.frame(p))
        for comp in ["none", "brotli", "brotli:9", "zstd", "zstd:1", "snappy"]:
            for group in [1, 7, 65536]:
                with self.subTest(compression=comp, group=group):
                    ar = os.path.join(self.tmp, f"ar-{comp}-{group}")
                    self.run_bin("reshard", src, "--output", ar, "--format", "arrayrecord",
                                 "--compression", comp, "--group-size", str(group),
                                 "--shards", "2", "-q")
                    files = sorted(glob.glob(os.path.join(ar, "*")))
                    self.assertEqual([os.path.basename(f) for f in files],
                                     ["data.array_record-00000-of-00002",
                                      "data.array_record-00001-of-00002"])
                    for f in files:
                        with open(f, "rb") as fh:
                            head = fh.read(64)
                        self.assertEqual(head, SIGNATURE, f)
                        self.assertEqual(os.path.getsize(f) % 65536, 0, f)
                    count = json.loads(self.run_bin("count", "--json", ar).stdout)
                    self.assertEqual(count["records"], len(want))
                    # The raw payloads among Examples are what verify
                    # flags (exit 1); no record is damaged otherwise.
                    verify = json.loads(self.run_bin("verify", "--json", ar, expect=1).stdout)
                    self.assertEqual(verify["damaged_records"], 10)
                    for d in verify["damaged"]:
                        self.assertIn("not an Example, SequenceExample or ExampleListWithContext", d["reason"])
                    self.assertEqual(verify["examples"], 30)
                    self.assertEqual(verify["other_payloads"], 10)
                    schema = json.loads(self.run_bin("schema", "--json", ar).stdout)
                    self.assertEqual(sorted(f["name"] for f in schema["features"]),
                                     ["label", "text"])
                    shown = json.loads(self.run_bin("show", "--json", files[1], "0").stdout)
                    self.assertEqual(shown["record"], 0)
                    self.run_bin("index", ar)
                    back = os.path.join(self.tmp, f"back-{comp}-{group}")
                    self.run_bin("reshard", ar, "--output", back, "--format", "tfrecord", "-q")
                    got = []
                    for f in sorted(glob.glob(os.path.join(back, "*"))):
                        self.assertTrue(f.endswith(".tfrecord"), f)
                        got += list(tc.read_records(f))
                    self.assertEqual(got, want)

    def test_grain_reference_files_convert_to_their_documented_records(self):
        src = os.path.join(self.tmp, "grain")
        os.makedirs(src)
        for n in range(2):
            shutil.copy(os.path.join(ROOT, "tests/unit/testdata/arrayrecord",
                                     f"digits.array_record-0000{n}-of-00002"), src)
        out = os.path.join(self.tmp, "out")
        self.run_bin("reshard", src, "--output", out, "--format", "tfrecord", "-q")
        got = []
        for f in sorted(glob.glob(os.path.join(out, "*"))):
            got += list(tc.read_records(f))
        self.assertEqual(got, [str(i).encode() for i in range(10)])
        # Without --format, ArrayRecord sources give ArrayRecord files.
        again = os.path.join(self.tmp, "again")
        self.run_bin("reshard", src, "--output", again, "-q")
        self.assertEqual(os.listdir(again), ["data.array_record-00000-of-00001"])

    def test_tfds_split_converts_with_its_dataset_info(self):
        # A TFDS split of 3 TFRecord shards (TFDS's names) with its
        # dataset_info.json; reshard --format arrayrecord with a TFDS
        # prefix writes the files Grain reads and the metadata beside them.
        src = os.path.join(self.tmp, "mnist")
        os.makedirs(src)
        want = payloads()
        for k in range(3):
            with open(os.path.join(src, "mnist-train.tfrecord-%05d-of-00003" % k), "wb") as f:
                for p in want[k::3]:
                    f.write(tc.frame(p))
        with open(os.path.join(src, "mnist-test.tfrecord-00000-of-00001"), "wb") as f:
            f.write(tc.frame(want[0]))
        info = {"name": "mnist", "version": "3.0.1", "fileFormat": "tfrecord",
                "splits": [{"name": "train", "numBytes": "1234", "shardLengths": ["14", "13", "13"],
                            "filepathTemplate": "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"},
                           {"name": "test", "numBytes": "9", "shardLengths": ["1"]}]}
        with open(os.path.join(src, "dataset_info.json"), "w") as f:
            json.dump(info, f)
        out = os.path.join(self.tmp, "grain")
        train = sorted(glob.glob(os.path.join(src, "mnist-train.*")))
        self.run_bin("reshard", *train, "--output", out, "--format", "arrayrecord",
                     "--prefix", "mnist-train", "--shards", "2", "-q")
        files = sorted(glob.glob(os.path.join(out, "mnist-train.array_record-*")))
        self.assertEqual([os.path.basename(f) for f in files],
                         ["mnist-train.array_record-00000-of-00002",
                          "mnist-train.array_record-00001-of-00002"])
        got, lengths = [], []
        for f in files:
            r = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests/cli/arrayrecord_check.py"),
                                "dump", f], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            recs = [bytes.fromhex(line.split(" ", 2)[2]) if line.count(" ") == 2 else b""
                    for line in r.stdout.splitlines() if line.startswith("record ")]
            lengths.append(str(len(recs)))
            got += recs
        self.assertEqual(got, want[0::3] + want[1::3] + want[2::3])
        with open(os.path.join(out, "dataset_info.json")) as f:
            written = json.load(f)
        self.assertEqual(written["fileFormat"], "array_record")
        self.assertEqual(written["name"], "mnist")
        self.assertEqual(written["version"], "3.0.1")
        self.assertEqual([s["name"] for s in written["splits"]], ["train"])
        self.assertEqual(written["splits"][0]["shardLengths"], lengths)
        # numBytes: the payloads written (the source's "1234" was wrong on
        # purpose: the count is the records', not copied).
        self.assertEqual(written["splits"][0]["numBytes"], str(sum(len(p) for p in got)))
        # TFDS's default template kept: the new names follow it.
        self.assertEqual(written["splits"][0]["filepathTemplate"],
                         "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}")
        # Some of the split's shards only: no metadata (its counts would
        # describe a split that is not all there).
        part = os.path.join(self.tmp, "part")
        self.run_bin("reshard", train[0], "--output", part, "--format", "arrayrecord",
                     "--prefix", "mnist-train", "-q")
        self.assertFalse(os.path.exists(os.path.join(part, "dataset_info.json")))

    def dump(self, path):
        """(options, records) of an ArrayRecord file by arrayrecord_check.py."""
        r = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests/cli/arrayrecord_check.py"),
                            "dump", path], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        lines = r.stdout.splitlines()
        options = [line[len("options "):] for line in lines if line.startswith("options ")][0]
        recs = [bytes.fromhex(line.split(" ", 2)[2]) for line in lines if line.startswith("record ")]
        return options, recs

    def test_pack_into_a_folder_of_arrayrecord_files_writes_one_with_their_options(self):
        src = os.path.join(self.tmp, "src")
        os.makedirs(src)
        with open(os.path.join(src, "in.tfrecord"), "wb") as f:
            for p in payloads()[:5]:
                f.write(tc.frame(p))
        out = os.path.join(self.tmp, "dataset")
        self.run_bin("reshard", src, "--output", out, "--format", "arrayrecord", "--prefix",
                     "ds-train", "--compression", "brotli:5", "--group-size", "2", "-q")
        existing = os.path.join(out, "ds-train.array_record-00000-of-00001")
        options, _ = self.dump(existing)
        self.assertIn("brotli:5", options)
        staged = os.path.join(self.tmp, "staged")
        want = [b"raw one \xff", b"raw two", b"raw three " * 50]
        for i, p in enumerate(want):
            os.makedirs(os.path.join(staged, "r%d" % i))
            with open(os.path.join(staged, "r%d" % i, "record.bin"), "wb") as f:
                f.write(p)
        self.run_bin("pack", staged, out, "--prefix", "new")
        got_options, got = self.dump(os.path.join(out, "new.array_record-00000-of-00001"))
        self.assertEqual(got_options, options)
        self.assertEqual(got, want)
        # --compression says otherwise: TFRecord as before.
        self.run_bin("pack", staged, out, "--prefix", "plain", "--compression", "none")
        self.assertEqual(list(tc.read_records(os.path.join(out, "plain-00000-of-00001.tfrecord"))),
                         want)

    def test_usage_errors(self):
        src = os.path.join(self.tmp, "src")
        os.makedirs(src)
        with open(os.path.join(src, "in.tfrecord"), "wb") as f:
            f.write(tc.frame(b"x"))
        out = os.path.join(self.tmp, "out")
        r = self.run_bin("reshard", src, "--output", out, "--group-size", "3", expect=2)
        self.assertIn("--group-size needs --format arrayrecord", r.stderr)
        r = self.run_bin("reshard", src, "--output", out, "--format", "arrayrecord",
                         "--compression", "gzip", expect=2)
        self.assertIn("not none, brotli, zstd or snappy", r.stderr)
        r = self.run_bin("reshard", src, "--output", out, "--format", "arrayrecord",
                         "--compression", "brotli:12", expect=2)
        self.assertIn("from 0 to 11", r.stderr)
        r = self.run_bin("reshard", src, "--output", out, "--format", "riegeli", expect=2)
        self.assertIn("tfrecord or arrayrecord", r.stderr)
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    if not BIN:
        print("TFRECORDFS_BIN is not set")
        sys.exit(77)
    unittest.main()
