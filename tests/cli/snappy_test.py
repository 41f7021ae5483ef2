#!/usr/bin/python3
"""SNAPPY shards written by an independent writer (python3-snappy plus
TensorFlow's framing: each block a 4-byte BIG-endian compressed length, then
a raw Snappy block, as tsl/lib/io/snappy/snappy_outputbuffer.cc writes it),
next to the same shards plain: count, verify, a real mount (compared file by
file), reshard and repair. Skips (77) without python3-snappy or /dev/fuse for
the mount part. Environment: TFRECORDFS_BIN, TFRECORDFS_GEN (meson).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfrecord_check as tc  # noqa: E402

try:
    import snappy  # Debian's python3-snappy
except ImportError:
    print("python3-snappy is not installed (scripts/setup installs it): skipped")
    sys.exit(77)

BIN = os.environ.get("TFRECORDFS_BIN", "")
GEN = os.environ.get("TFRECORDFS_GEN", "")


def write_snappy(plain: bytes, path: str, block: int):
    with open(path, "wb") as f:
        for at in range(0, len(plain), block):
            c = snappy.compress(plain[at:at + block])
            f.write(len(c).to_bytes(4, "big") + c)


def read_snappy(path: str) -> bytes:
    with open(path, "rb") as f:
        raw = f.read()
    out, at = bytearray(), 0
    while at < len(raw):
        n = int.from_bytes(raw[at:at + 4], "big")
        out += snappy.decompress(raw[at + 4:at + 4 + n])
        at += 4 + n
    return bytes(out)


def records_of_stream(data: bytes, path: str):
    tmp = path + ".plain"
    with open(tmp, "wb") as f:
        f.write(data)
    try:
        return tc.read_records(tmp, "none")
    finally:
        os.unlink(tmp)


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=240)


class SnappyTest(unittest.TestCase):
    def setUp(self):
        self.assertTrue(BIN and GEN)
        self.tmp = tempfile.mkdtemp(prefix="snappy_test.")
        os.environ["XDG_CACHE_HOME"] = os.path.join(self.tmp, "cache")
        self.plain = os.path.join(self.tmp, "plain")
        self.snap = os.path.join(self.tmp, "snappy")
        subprocess.run([GEN, "synthetic", self.plain, "--records", "90", "--shards", "3",
                        "--bytes", "2500", "--prefix", "train"], check=True,
                       capture_output=True)
        os.mkdir(self.snap)
        self.names = sorted(f for f in os.listdir(self.plain) if f.startswith("train"))
        for i, name in enumerate(self.names):
            with open(os.path.join(self.plain, name), "rb") as f:
                data = f.read()
            # Blocks smaller than a record: records span blocks. One shard
            # with TensorFlow's 256 KiB blocks.
            write_snappy(data, os.path.join(self.snap, name), 262144 if i == 0 else 1000)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_count_verify_and_the_index_cache(self):
        for attempt in ("walked", "from the cache"):
            with self.subTest(attempt=attempt):
                a = json.loads(run("count", "--json", self.plain).stdout)
                r = run("count", "--json", self.snap)
                self.assertEqual(r.returncode, 0, r.stderr)
                b = json.loads(r.stdout)
                self.assertEqual(b["records"], 90)
                self.assertEqual([(os.path.basename(s["path"]), s["records"]) for s in a["shards"]],
                                 [(os.path.basename(s["path"]), s["records"]) for s in b["shards"]])
                r = run("verify", self.snap)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn("90 record(s): all intact", r.stdout)

    def test_mount_shows_the_same_files_as_plain(self):
        if not os.access("/dev/fuse", os.R_OK | os.W_OK):
            self.skipTest("no /dev/fuse")
        mounts = []
        try:
            for src in (self.plain, self.snap):
                mnt = src + ".mnt"
                os.mkdir(mnt)
                r = run("-o", "ro", src, mnt)  # returns once the mount serves
                self.assertEqual(r.returncode, 0, r.stderr)
                mounts.append(mnt)
            a, b = tc.read_tree(mounts[0]), tc.read_tree(mounts[1])
            self.assertGreater(len(a), 90)
            self.assertEqual(sorted(a), sorted(b))
            for k in a:
                self.assertEqual(a[k], b[k], k)
            shard = os.path.join(mounts[1], self.names[0])
            codec = [x for x in os.listxattr(shard) if x.endswith("codec")]
            self.assertEqual(os.getxattr(shard, codec[0]), b"snappy")
        finally:
            for mnt in mounts:
                run("unmount", mnt)

    def test_an_edit_commits_in_snappy(self):
        # `echo 2 > MNT/SHARD/03/label; tfrecordfs commit MNT` on SNAPPY
        # shards of TensorFlow's 256 KiB blocks and of small blocks (records
        # span them): each rewritten shard is SNAPPY again, read by
        # python3-snappy, and differs from the original only in that label.
        if not os.access("/dev/fuse", os.R_OK | os.W_OK):
            self.skipTest("no /dev/fuse")
        mnt = os.path.join(self.tmp, "rw.mnt")
        os.mkdir(mnt)
        r = run("-o", "staging_dir=" + os.path.join(self.tmp, "store"), self.snap, mnt)
        self.assertEqual(r.returncode, 0, r.stderr)
        try:
            for name in self.names[:2]:
                subprocess.run(["bash", "-c", 'echo 2 > "$1"', "-",
                                os.path.join(mnt, name, "03", "label")], check=True)
            r = run("commit", mnt)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("changed 1", r.stdout + r.stderr)
            self.assertNotIn("free space", r.stdout + r.stderr)
        finally:
            run("unmount", mnt)
        for name in self.names[:2]:
            path = os.path.join(self.snap, name)
            got = records_of_stream(read_snappy(path), path)
            want = tc.read_records(os.path.join(self.plain, name))
            self.assertEqual(len(got), len(want))
            for i, (g, w) in enumerate(zip(got, want)):
                if i != 3:
                    self.assertEqual(g, w, "%s record %d" % (name, i))
                    continue
                a, b = tc.decode_example(g), tc.decode_example(w)
                self.assertEqual(a.pop("label"), ("int64", [2]))
                b.pop("label")
                self.assertEqual(a, b)

    def test_empty_blocks_cost_what_their_records_do(self):
        # Issue 34 item 14: TensorFlow reads a SNAPPY file of a million empty
        # blocks (5 bytes each) around its records; one checkpoint per block
        # made its index ~40 bytes a block (40 MB here). Now the index
        # follows the records and the file's size, and every record reads
        # back through count, verify and a mount.
        payloads = tc.read_records(os.path.join(self.plain, self.names[0]))
        plain = b"".join(tc.frame(p) for p in payloads)
        empty = (1).to_bytes(4, "big") + snappy.compress(b"")
        hostile = os.path.join(self.tmp, "hostile")
        os.mkdir(hostile)
        shard = os.path.join(hostile, "empty-blocks.tfrecord")
        chunks = range(0, len(plain), 1000)
        per_gap = 1000000 // len(chunks) + 1
        with open(shard, "wb") as f:
            for at in chunks:  # the first block holds bytes: the probe looks there
                c = snappy.compress(plain[at:at + 1000])
                f.write(len(c).to_bytes(4, "big") + c)
                f.write(empty * per_gap)
        self.assertGreater(per_gap * len(chunks), 1000000)
        self.assertEqual(records_of_stream(read_snappy(shard), shard), payloads)
        r = run("index", "--beside", hostile)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        index_size = os.path.getsize(shard + ".tfri")
        # 8 bytes a record plus a checkpoint per 256 KiB of file.
        self.assertLess(index_size, 16 * 1024, index_size)
        r = run("verify", hostile)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("%d record(s): all intact" % len(payloads), r.stdout)
        if not os.access("/dev/fuse", os.R_OK | os.W_OK):
            return
        mnt = os.path.join(self.tmp, "hostile.mnt")
        os.mkdir(mnt)
        r = run("-o", "ro", hostile, mnt)
        self.assertEqual(r.returncode, 0, r.stderr)
        try:
            got = tc.read_tree(os.path.join(mnt, "empty-blocks.tfrecord"))
        finally:
            run("unmount", mnt)
        mnt_plain = os.path.join(self.tmp, "plain.mnt")
        os.mkdir(mnt_plain)
        r = run("-o", "ro", os.path.join(self.plain, self.names[0]), mnt_plain)
        self.assertEqual(r.returncode, 0, r.stderr)
        try:
            want = tc.read_tree(os.path.join(mnt_plain, self.names[0]))
        finally:
            run("unmount", mnt_plain)
        self.assertGreater(len(want), len(payloads))
        self.assertEqual(got, want)

    def test_reshard_and_repair(self):
        payloads = tc.read_records(os.path.join(self.plain, self.names[0]))
        for n in self.names[1:]:
            payloads += tc.read_records(os.path.join(self.plain, n))
        out = os.path.join(self.tmp, "re")
        r = run("reshard", self.snap, "-o", out, "--shards", "2", "--json",
                "--compression", "none", "--shuffle", "--seed", "3")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = []
        for s in json.loads(r.stdout)["shards"]:
            got += tc.read_records(s["path"])
        self.assertEqual(sorted(got), sorted(payloads))
        # repair keeps the codec: SNAPPY out, read by the independent parser.
        rep = os.path.join(self.tmp, "rep")
        r = run("repair", self.snap, "-o", rep)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        got = []
        for n in self.names:
            got += records_of_stream(read_snappy(os.path.join(rep, n)), os.path.join(rep, n))
        self.assertEqual(got, payloads)
        # A truncated SNAPPY shard: the records of its whole blocks are kept.
        cut = os.path.join(self.tmp, "cut")
        os.mkdir(cut)
        with open(os.path.join(self.snap, self.names[1]), "rb") as f:
            raw = f.read()
        with open(os.path.join(cut, self.names[1]), "wb") as f:
            f.write(raw[: len(raw) * 2 // 3])
        r = run("repair", cut, "-o", os.path.join(self.tmp, "cutrep"), "--json")
        self.assertEqual(r.returncode, 1, r.stderr)
        kept = records_of_stream(read_snappy(os.path.join(self.tmp, "cutrep", self.names[1])),
                                 os.path.join(self.tmp, "x"))
        full = tc.read_records(os.path.join(self.plain, self.names[1]))
        self.assertGreater(len(kept), 0)
        self.assertLess(len(kept), len(full))
        self.assertEqual(kept, full[: len(kept)])


if __name__ == "__main__":
    unittest.main(verbosity=2)
