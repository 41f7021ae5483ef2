#!/usr/bin/env python3
"""`repair` reads each input byte once, as one process and as parts (suite 'cli').

Issue 37: a command split into parts reads no more than 1.02x the input's
bytes. The bytes a process read through system calls are /proc/PID/io's
rchar (read once it has exited, before it is reaped: every thread counted),
as scripts/bench's parts rows measure them. A plain shard's checked records
used to be copied with copy_file_range(2), which rchar counts as a second
read of the input (2.00x); they are now written from the bytes read and
checked. The outputs are judged by tfrecord_check.py (an independent
reader) and by bytes: the input's intact records' framing, in order, and the
same bytes whether one process or three parts wrote them.

Environment: TFRECORDFS_BIN and TFRECORDFS_GEN (set by meson).
"""
import filecmp
import os
import random
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfrecord_check as tc  # noqa: E402
from cli_common import BIN, CliTestBase, shards_in  # noqa: E402

# What a run reads besides the records and its start-up (below): the index
# cache, /proc and /sys files; far below 2 % of the input here.
SLACK = 256 << 10


def measured(*args):
    """Runs BIN with `args`: (exit code, bytes read, bytes written, stderr)."""
    p = subprocess.Popen([BIN, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
    with open(f"/proc/{p.pid}/io") as f:
        io = dict(line.split(": ") for line in f.read().splitlines() if line)
    err = p.stderr.read().decode()
    p.wait()
    return p.returncode, int(io["rchar"]), int(io["wchar"]), err


class RepairReadsOnce(CliTestBase):
    TMP_PREFIX = "read_once_test."

    def setUp(self):
        super().setUp()
        # Three plain shards: small records (many to a write), records
        # around and above 1 MiB (one run each), and a damaged record in
        # the middle of each shard (its bytes read, never written).
        rng = random.Random(37)
        os.makedirs(self.path("in"))
        self.want = {}  # shard name -> the intact records' framing, in order
        for s, sizes in enumerate(([300] * 2000, [900_000, 1_100_000, 1_600_000, 50] * 3,
                                   [rng.randrange(1, 200_000) for _ in range(60)])):
            name = f"in-{s:05d}-of-00003.tfrecord"
            frames = [tc.frame(rng.randbytes(n)) for n in sizes]
            bad = len(frames) // 2
            data = bytearray(b"".join(frames))
            data[sum(len(f) for f in frames[:bad]) + 12] ^= 0x01  # its payload's first byte
            with open(self.path("in", name), "wb") as f:
                f.write(data)
            self.want[name] = b"".join(f for i, f in enumerate(frames) if i != bad)
        self.input_bytes = sum(os.path.getsize(p) for p in shards_in(self.path("in")))
        # The index is built first: the runs measured read the records only.
        r = subprocess.run([BIN, "index", self.path("in"), "-q"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def assertRepaired(self, out):
        names = [os.path.basename(p) for p in shards_in(out)]
        self.assertEqual(names, sorted(self.want))
        for name in names:
            with open(os.path.join(out, name), "rb") as f:
                got = f.read()
            # Every record whole with both CRCs right (raises otherwise)...
            self.assertTrue(tc.read_records(os.path.join(out, name)), name)
            # ...and the bytes those of the input's intact records, in order.
            self.assertTrue(got == self.want[name], f"{name}: not the intact records' bytes")

    def assertReadOnce(self, read, what, processes=1):
        # Each process's start-up reads are not the input's: the loader's ELF
        # headers, and under a sanitizer its runtime's /proc/self/maps
        # (about 270 KB a process with ASan, 37 KB without), measured as
        # what `--version` reads.
        startup = measured("--version")[1]
        input_read = read - processes * startup
        self.assertLessEqual(input_read, 1.02 * self.input_bytes + SLACK,
                             f"{what} read {read} bytes ({input_read} beyond {processes} "
                             f"start-up(s) of {startup}) for {self.input_bytes} bytes of input "
                             f"({input_read / self.input_bytes:.2f}x)")

    def test_one_process(self):
        rc, read, written, err = measured("repair", self.path("in"), "-o", self.path("one"), "-q")
        self.assertEqual(rc, 1, err)  # records were dropped
        self.assertReadOnce(read, "repair")
        self.assertGreaterEqual(written, sum(len(w) for w in self.want.values()))
        self.assertRepaired(self.path("one"))

    def test_three_parts_then_finalize(self):
        total = 0
        for k in range(3):
            rc, read, _, err = measured("repair", self.path("in"), "-o", self.path("multi"),
                                        "--part", f"{k}/3", "-q")
            self.assertIn(rc, (0, 1), err)
            total += read
        rc, read, _, err = measured("repair", self.path("in"), "-o", self.path("multi"),
                                    "--finalize", "-q")
        self.assertEqual(rc, 0, err)
        total += read
        self.assertReadOnce(total, "repair as 3 parts + --finalize", processes=4)
        self.assertRepaired(self.path("multi"))
        rc, _, _, err = measured("repair", self.path("in"), "-o", self.path("one"), "-q")
        self.assertEqual(rc, 1, err)
        for name in self.want:
            self.assertTrue(filecmp.cmp(self.path("one", name), self.path("multi", name),
                                        shallow=False), name)


if __name__ == "__main__":
    unittest.main(verbosity=2)
