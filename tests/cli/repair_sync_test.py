#!/usr/bin/env python3
"""`repair`'s outputs are written out to disk as they are written (suite 'cli').

Issue 37: a command run as N parts waits N times for its last output's
fsync, where one process waits once; for a 240 MB shard that wait was most
of what the parts cost beyond one process (docs/bench.md). repair now hands
each plain output's bytes to the kernel's writeback every 8 MiB as it writes
them (sync_file_range(2) SYNC_FILE_RANGE_WRITE, which does not wait), so the
final fsync finds at most the last few MiB still to write. The durability
contract is unchanged: every output is fsynced before it is renamed to its
final name, and its directory is fsynced before the command ends (a part:
before its manifest is published).

Watched with strace (-f: the copier and syncer threads; -y: each descriptor's
path), on one process and on a part, for outputs of 20 MiB and more. The
outputs are judged by tfrecord_check.py (an independent reader) and by bytes.

Environment: TFRECORDFS_BIN and TFRECORDFS_GEN (set by meson).
"""
import os
import random
import re
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfrecord_check as tc  # noqa: E402
from cli_common import BIN, CliTestBase, shards_in  # noqa: E402

# What may be left for the final fsync: the writeback step (8 MiB) and the
# run being written when the file ended (1 MiB).
LEFT = (8 + 1) << 20

CALL = re.compile(r"^(\d+) +(?:<\.\.\. (\w+) resumed>|(\w+)\()(.*)$")


def strace_calls(log):
    """[(line number, pid, call, args and result, 'start' | 'end' | 'whole')]."""
    out = []
    with open(log) as f:
        for n, line in enumerate(f):
            m = CALL.match(line.rstrip("\n"))
            if not m:
                continue
            pid, resumed, call, rest = m.group(1), m.group(2), m.group(3), m.group(4)
            if resumed:
                out.append((n, pid, resumed, rest, "end"))
            else:
                out.append((n, pid, call, rest, "start" if "<unfinished" in rest else "whole"))
    return out


def untraceable_leak_check_off():
    """The environment for a process run under strace: in an ASan build,
    LeakSanitizer cannot run under ptrace (it aborts with "LeakSanitizer has
    encountered a fatal error"), so leak checking is off there; the ASan
    stage's other runs of the binary keep it."""
    env = dict(os.environ)
    if "ASAN_OPTIONS" in env:
        env["ASAN_OPTIONS"] += ":detect_leaks=0"
    return env


class RepairWritesBack(CliTestBase):
    TMP_PREFIX = "repair_sync_test."

    def setUp(self):
        super().setUp()
        if not shutil.which("strace"):
            self.skipTest("strace is not installed")
        probe = subprocess.run(["strace", "-qq", "-e", "trace=none", "true"],
                               capture_output=True)
        if probe.returncode != 0:
            self.skipTest("strace cannot trace here: " + probe.stderr.decode()[-200:])
        rng = random.Random(9)
        os.makedirs(self.path("in"))
        self.want = {}
        # Two plain shards of 100 KB records: 21 MiB and 30 MiB.
        for s, count in enumerate((220, 315)):
            name = f"in-{s:05d}-of-00002.tfrecord"
            data = b"".join(tc.frame(rng.randbytes(100_000)) for _ in range(count))
            with open(self.path("in", name), "wb") as f:
                f.write(data)
            self.want[name] = data
        r = subprocess.run([BIN, "index", self.path("in"), "-q"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def traced(self, *args):
        log = self.path(f"strace-{len(os.listdir(self.tmp))}.log")
        r = subprocess.run(["strace", "-f", "-qq", "-y", "-o", log, "-e",
                            "trace=sync_file_range,fsync,fdatasync,rename,renameat,renameat2",
                            BIN, *args], capture_output=True, text=True, timeout=300,
                           env=untraceable_leak_check_off())
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        return strace_calls(log)

    def assertWrittenBack(self, calls, names, final_dir):
        """Each of `names` (its temporary file .NAME.tmp): sync_file_range
        calls covering [0, size - LEFT) or more before its fsync; the fsync
        ended before the rename to NAME began."""
        for name in names:
            size = len(self.want[name])
            tmp = f"/.{name}.tmp>"
            covered, fsync_end, rename_start, starts = 0, None, None, {}
            for n, pid, call, rest, kind in calls:
                if call == "sync_file_range" and tmp in rest and kind != "end":
                    # sync_file_range(FD</path>, OFFSET, NBYTES, FLAGS)
                    m = re.search(r">, (\d+), (\d+), (\w+)", rest)
                    self.assertIsNotNone(m, rest)
                    offset, nbytes, flags = int(m.group(1)), int(m.group(2)), m.group(3)
                    self.assertEqual(flags, "SYNC_FILE_RANGE_WRITE", rest)
                    self.assertIsNone(fsync_end, f"{name}: written back after its fsync")
                    self.assertEqual(offset, covered, f"{name}: a gap before {rest}")
                    covered = offset + nbytes
                elif call in ("fsync", "fdatasync") and tmp in rest and kind == "start":
                    starts[pid] = n
                elif call in ("fsync", "fdatasync") and (
                        (kind == "whole" and tmp in rest) or (kind == "end" and pid in starts)):
                    fsync_end = n
                    starts.pop(pid, None)
                elif call.startswith("rename") and kind != "end" and f"/.{name}.tmp\"" in rest:
                    rename_start = n
            self.assertGreaterEqual(covered, size - LEFT,
                                    f"{name}: {covered} of {size} bytes handed to writeback "
                                    f"before the fsync ({size - covered} left for it)")
            self.assertIsNotNone(fsync_end, f"{name}: never fsynced")
            self.assertIsNotNone(rename_start, f"{name}: never renamed")
            self.assertLess(fsync_end, rename_start, f"{name}: renamed before its fsync ended")
            with open(os.path.join(final_dir, name), "rb") as f:
                got = f.read()
            self.assertTrue(tc.read_records(os.path.join(final_dir, name)), name)
            self.assertTrue(got == self.want[name], f"{name}: not the input's bytes")

    def test_one_process(self):
        calls = self.traced("repair", self.path("in"), "-o", self.path("one"), "-q")
        self.assertWrittenBack(calls, sorted(self.want), self.path("one"))

    def test_parts(self):
        # Two parts, one shard each; the manifest is published after the
        # output's fsync and the work folder's.
        for k in range(2):
            calls = self.traced("repair", self.path("in"), "-o", self.path("multi"), "--part",
                                f"{k}/2", "-q")
            parts = self.path("multi", ".tfrecordfs-parts")
            published = [d for d in os.listdir(parts) if d.endswith(f"-part-{k}")]
            self.assertEqual(len(published), 1, os.listdir(parts))
            names = [os.path.basename(p) for p in shards_in(os.path.join(parts, published[0]))
                     if not p.endswith("manifest.json")]
            self.assertEqual(len(names), 1, names)
            self.assertWrittenBack(calls, names, os.path.join(parts, published[0]))
            last_sync = max(n for n, _, call, rest, _ in calls if call in ("fsync", "fdatasync"))
            publish = [n for n, _, call, rest, kind in calls
                       if call.startswith("rename") and kind != "end" and
                       re.search(r'\.work-[^"/]*", [^"]*"[^"]*-part-\d+"', rest)]
            self.assertEqual(len(publish), 1, publish)
            self.assertGreater(publish[0], max(n for n, _, call, rest, _ in calls
                                               if call in ("fsync", "fdatasync")
                                               and f".{names[0]}.tmp" in rest))
            self.assertGreater(last_sync, publish[0])  # the parts folder's, after the rename
        r = subprocess.run([BIN, "repair", self.path("in"), "-o", self.path("multi"), "-q",
                            "--finalize"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([os.path.basename(p) for p in shards_in(self.path("multi"))],
                         sorted(self.want))
        for name, data in self.want.items():
            with open(self.path("multi", name), "rb") as f:
                self.assertTrue(f.read() == data, name)


if __name__ == "__main__":
    unittest.main(verbosity=2)
