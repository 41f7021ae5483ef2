#!/usr/bin/env python3
"""`tfrecordfs repair` and `reshard` run as the real binary (suite 'cli').

Datasets come from tfrecordfs-gen (the hostile corpus with its manifest of
what each shard really holds, and generated Example shards); every output
is read back by tfrecord_check.py, a reader independent of tfrecordfs
(its own CRC32C, Python's zlib). Environment: TFRECORDFS_BIN and
TFRECORDFS_GEN (set by meson).
"""
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfrecord_check as tc  # noqa: E402
from cli_common import BIN, GEN, CliTestBase, all_records, gen  # noqa: E402
M64 = (1 << 64) - 1


def run(*args, env=None):
    # XDG_CACHE_HOME in the test's own directory: no index cache is shared.
    return subprocess.run([BIN, *args], capture_output=True, text=True, env=env, timeout=240)


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def tree_digest(root):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, root)] = digest(p)
    return out


def fnv1a64(data):
    h = 14695981039346656037
    for c in data:
        h = ((h ^ c) * 1099511628211) & M64
    return h


def shuffle_key(seed, file, record):
    """reshape::ShuffleKey, written from its description in shuffle.h."""
    def mix(z):
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)
    golden = 0x9E3779B97F4A7C15
    return mix((mix(seed ^ mix((file + golden) & M64)) + (record + 1) * golden) & M64)


def shuffled(shards, seed):
    """The payloads of `shards` ([(mount path, payloads)]) in the order a
    shuffled reshard writes them (shuffle.h): sorted by (key, file, record)."""
    items = []
    for mount_path, payloads in shards:
        f = fnv1a64(mount_path.encode())
        for r, p in enumerate(payloads):
            items.append((shuffle_key(seed, f, r), f, r, p))
    return [p for *_, p in sorted(items)]


def manifest(path):
    """{shard name: [(index, ok, crc32c hex)]} from the hostile corpus manifest."""
    shards = {}
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if parts[0] == "shard":
                shards[parts[1]] = []
            elif parts[0] == "record":
                shards[parts[1]].append((int(parts[2]), parts[3] == "ok", parts[7]))
    return shards


class Base(CliTestBase):
    TMP_PREFIX = "reshape_test."

    def hostile(self):
        gen("hostile", self.path("h"), "--records", "500")
        return self.path("h")


class UsageTest(Base):
    def test_help_and_usage_errors(self):
        src = self.sample("s", 10, 1)
        for cmd in ("repair", "reshard"):
            r = run(cmd, "--help")
            self.assertEqual(r.returncode, 0)
            self.assertIn(f"Usage: tfrecordfs {cmd}", r.stdout)
            self.assertEqual(run(cmd).returncode, 2)
            self.assertEqual(run(cmd, src[0]).returncode, 2, "no --output")
            self.assertEqual(run(cmd, "--bogus", src[0], "-o", self.path("o")).returncode, 2)
            # The output must not be, contain or lie inside a SOURCE.
            for out in (self.path("s"), self.path("s", "sub"), self.tmp):
                r = run(cmd, self.path("s"), "--output", out)
                self.assertEqual(r.returncode, 2, (cmd, out, r.stderr))
            self.assertFalse(os.path.exists(self.path("s", "sub")))
        self.assertEqual(run("reshard", src[0], "-o", self.path("o"), "--seed", "1").returncode, 2)
        self.assertEqual(run("reshard", src[0], "-o", self.path("o"), "--shards", "2",
                             "--shard-size", "1M").returncode, 2)
        self.assertEqual(run("reshard", src[0], "-o", self.path("o"), "--shards", "0").returncode,
                         2)
        self.assertEqual(run("reshard", src[0], "-o", self.path("o"),
                             "--compression", "lz4").returncode, 2)
        self.assertFalse(os.path.exists(self.path("o")), "a usage error writes nothing")


class RepairTest(Base):
    def test_hostile_corpus_against_manifest(self):
        h = self.hostile()
        before = tree_digest(h)
        out = self.path("out")
        r = run("repair", h, "--output", out, "--json")
        self.assertEqual(r.returncode, 1, r.stderr)  # something was dropped
        self.assertEqual(tree_digest(h), before, "the input is never modified")
        report = json.loads(r.stdout)
        truth = manifest(os.path.join(h, "MANIFEST.txt"))
        dropped = {(os.path.basename(d["path"]), d["record"]) for d in report["dropped"]}
        for name, records in truth.items():
            with self.subTest(shard=name):
                got = tc.read_records(os.path.join(out, name))  # raises on any damage
                want = [crc for _, ok, crc in records if ok]
                self.assertEqual([format(tc.crc32c(p), "08x") for p in got], want)
                for i, ok, _ in records:
                    self.assertEqual((name, i) in dropped, not ok)
        # Damage between records (stray bytes, a truncated tail) is listed too,
        # with no record index; each dropped entry names offset and reason.
        self.assertIn(("stray_bytes_03.tfrecord", None), dropped)
        for d in report["dropped"]:
            self.assertTrue(d["reason"])
            self.assertIsInstance(d["offset"], int)
        self.assertEqual(report["written"],
                         sum(1 for rs in truth.values() for _, ok, _ in rs if ok) +
                         500)  # the tiny-records shard, intact
        self.assertFalse([f for f in os.listdir(out) if f.startswith(".")], "no temp file left")
        # Files that are not shards are not copied.
        self.assertFalse(os.path.exists(os.path.join(out, "not_a_tfrecord.tfrecord")))

        # Text output: one line per drop naming shard, record and offset.
        r = run("repair", os.path.join(h, "data_crc_mismatch.tfrecord"), "-o", self.path("o2"))
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stdout, r"data_crc_mismatch\.tfrecord: record 2 at byte offset 106: "
                                   r"data CRC mismatch.*: dropped\n")
        self.assertIn("4 of 5 record(s) written, 1 dropped", r.stdout)
        # Never replaces: a second run into the same directory writes nothing.
        before_out = tree_digest(self.path("o2"))
        r = run("repair", os.path.join(h, "data_crc_mismatch.tfrecord"), "-o", self.path("o2"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("already exists", r.stderr)
        self.assertEqual(tree_digest(self.path("o2")), before_out)

    def test_intact_compressed_shards_keep_name_codec_and_payloads(self):
        for codec in ("gzip", "zlib", "none"):
            with self.subTest(codec=codec):
                src = self.sample("s-" + codec, 60, 2, codec)
                out = self.path("out-" + codec)
                r = run("repair", self.path("s-" + codec), "-o", out)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("60 of 60 record(s) written, 0 dropped", r.stdout)
                for p in src:
                    copy = os.path.join(out, os.path.basename(p))
                    with open(copy, "rb") as f:
                        self.assertEqual(tc.codec_of(f.read()), codec)
                    self.assertEqual(tc.read_records(copy), tc.read_records(p))

    def test_truncated_gzip_keeps_the_records_before_the_cut(self):
        src = self.sample("s", 400, 1, "gzip")[0]
        full = tc.read_records(src)
        with open(src, "rb") as f:
            raw = f.read()
        cut = self.path("cut")
        os.mkdir(cut)
        with open(os.path.join(cut, "cut.tfrecord.gz"), "wb") as f:
            f.write(raw[: len(raw) // 2])
        r = run("repair", cut, "-o", self.path("out"), "--json")
        self.assertEqual(r.returncode, 1, r.stderr)
        got = tc.read_records(self.path("out", "cut.tfrecord.gz"), "gzip")
        self.assertGreater(len(got), 0)
        self.assertLess(len(got), len(full))
        self.assertEqual(got, full[: len(got)])
        # The cut record, and the stream's end (with zlib's reason).
        reasons = [d["reason"] for d in json.loads(r.stdout)["dropped"]]
        self.assertTrue(any("truncated compressed stream" in x for x in reasons), reasons)

    def test_sigint_leaves_no_partial_file_under_a_final_name(self):
        for cmd in ("repair", "reshard"):
            with self.subTest(cmd=cmd):
                src = self.sample("s-" + cmd, 400, 3)
                out = self.path("out-" + cmd)
                env = dict(os.environ, TFRECORDFS_FAULT="pause_mid_output")
                p = subprocess.Popen([BIN, cmd, "-q", self.path("s-" + cmd), "-o", out],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                     text=True)
                # The hook says "paused" once half of the first output is
                # written under its temporary name; then Ctrl-C.
                line = p.stderr.readline()
                self.assertIn("paused", line)
                temps = [f for f in os.listdir(out) if f.endswith(".tmp")]
                self.assertEqual(len(temps), 1, os.listdir(out))
                p.send_signal(signal.SIGINT)
                _, err = p.communicate(timeout=120)
                self.assertEqual(p.returncode, 130, err)
                self.assertIn("interrupted", err)
                # No temporary file left, nothing under a final name.
                self.assertEqual(os.listdir(out), [])


    def test_a_killed_reshards_temporary_files_go_at_the_next_run(self):
        # Issue 34 item 15: SIGKILL midway (nothing can clean up then) left
        # .NAME.tmp in the output folder for good. The next reshard with the
        # prefix removes what no running process writes (and says so), also
        # when it writes another number of shards; other files stay.
        self.sample("s", 400, 3)
        out = self.path("out")
        env = dict(os.environ, TFRECORDFS_FAULT="pause_mid_output")
        p = subprocess.Popen([BIN, "reshard", "-q", self.path("s"), "-o", out, "--shards", "3"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        self.assertIn("paused", p.stderr.readline())
        p.kill()
        p.communicate(timeout=120)
        left = sorted(f for f in os.listdir(out) if f.endswith(".tmp"))
        self.assertEqual(left, [".data-00000-of-00003.tfrecord.tmp"], os.listdir(out))
        with open(os.path.join(out, ".other-00000-of-00001.tfrecord.tmp"), "w") as f:
            f.write("another prefix's")
        r = run("reshard", self.path("s"), "-o", out, "--shards", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("removed " + os.path.join(out, ".data-00000-of-00003.tfrecord.tmp"),
                      r.stderr)
        self.assertEqual(sorted(os.listdir(out)),
                         [".other-00000-of-00001.tfrecord.tmp", "data-00000-of-00002.tfrecord",
                          "data-00001-of-00002.tfrecord"])
        self.assertEqual(all_records([os.path.join(out, f"data-0000{i}-of-00002.tfrecord")
                                      for i in range(2)]),
                         all_records(sorted(os.path.join(self.path("s"), f)
                                            for f in os.listdir(self.path("s")))))


    def test_the_progress_bar_counts_the_shards_written(self):
        # Issue 34: reshard's bar said "0 shards" throughout. On a terminal
        # (script(1) gives it one) its last frame counts the shards written.
        if not shutil.which("script"):
            self.skipTest("script(1) is missing")
        self.sample("s", 200, 2)
        cmd = " ".join([BIN, "reshard", self.path("s"), "-o", self.path("o"), "--shards", "3"])
        r = subprocess.run(["script", "-qec", cmd, "/dev/null"], capture_output=True, text=True,
                           timeout=240, env=dict(os.environ, TERM="dumb"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        frames = re.findall(r"\[[#.]{20}\] (\d+) shards", r.stdout)
        self.assertTrue(frames, r.stdout)
        self.assertEqual(frames[-1], "3", r.stdout)


class SameDamageTest(Base):
    """Issue 34 (rough edge): repair listed the point where the walk
    resynchronised after a short record as damage of its own ("dropped",
    though nothing was lost there), left out the truncated tail verify
    reports, and its counts did not add up ("4 of 9 written, 7 dropped").
    Now both name the same damage in the same words with the same counts."""

    def test_verify_and_repair_agree_on_a_short_record_and_a_truncated_tail(self):
        def field(number, body):  # a length-delimited protobuf field
            n, size = b"", len(body)
            while True:
                n += bytes([(size & 0x7F) | (0x80 if size > 0x7F else 0)])
                size >>= 7
                if not size:
                    break
            return bytes([number << 3 | 2]) + n + body

        def example(value):  # {"v": bytes_list [value]}
            entry = field(1, b"v") + field(2, field(1, field(1, value)))
            return field(1, field(1, entry))

        payloads = [example(bytes([65 + i]) * (200 + 10 * i)) for i in range(6)]
        frames = [tc.frame(p) for p in payloads]
        # Record 1 loses one data byte (a CRLF->LF conversion's damage): its
        # data CRC fails and the next header starts a byte early. Record 5 is
        # cut: its header says more bytes than the file has.
        frames[1] = frames[1][:100] + frames[1][101:]
        frames[5] = frames[5][:60]
        src = self.path("src")
        os.mkdir(src)
        shard = os.path.join(src, "damaged.tfrecord")
        with open(shard, "wb") as f:
            f.write(b"".join(frames))

        v = run("verify", "--json", shard)
        self.assertEqual(v.returncode, 1, v.stderr)
        verified = json.loads(v.stdout)
        r = run("repair", "--json", shard, "-o", self.path("out"))
        self.assertEqual(r.returncode, 1, r.stderr)
        repaired = json.loads(r.stdout)
        place = lambda d: (d["record"], d["offset"], d["reason"])  # noqa: E731
        self.assertEqual([place(d) for d in repaired["dropped"]],
                         [place(d) for d in verified["damaged"]])
        self.assertEqual(verified["damaged_records"], 1, v.stdout)
        self.assertEqual(verified["damaged_spans"], 1, v.stdout)  # the tail
        self.assertEqual(repaired["written"] + verified["damaged_records"], repaired["records"])
        # The copy, by the independent reader: the intact records, in order.
        self.assertEqual(tc.read_records(self.path("out", "damaged.tfrecord")),
                         [payloads[0], payloads[2], payloads[3], payloads[4]])

        # Text: verify's lines, each with what repair did, and verify's counts.
        vt = run("verify", shard).stdout.splitlines()
        rt = run("repair", shard, "-o", self.path("out2")).stdout.splitlines()
        self.assertEqual(len(vt), 3, vt)
        self.assertEqual(rt[:2], [vt[0] + ": dropped", vt[1] + ": not copied"])
        self.assertIn(": record 1 at byte offset ", vt[0])
        self.assertIn(": outside any record at byte offset ", vt[1])
        self.assertIn("truncated last record", vt[1])
        self.assertIn("5 record(s): 1 damaged, 1 damaged span(s) between or after records", vt[2])
        self.assertIn("4 of 5 record(s) written, 1 dropped, "
                      "1 damaged span(s) between or after records", rt[2])


class ReshardTest(Base):
    def reshard(self, src, out, *args, expect=0):
        r = run("reshard", *src, "-o", out, "--json", *args)
        self.assertEqual(r.returncode, expect, r.stderr)
        return json.loads(r.stdout) if expect == 0 else r

    def outputs(self, report):
        return [s["path"] for s in report["shards"]]

    def test_round_trips_in_order(self):
        src = self.sample("s", 203, 3)
        payloads = all_records(src)
        self.assertEqual(len(payloads), 203)
        # N -> 1
        one = self.reshard([self.path("s")], self.path("one"), "--shards", "1")
        self.assertEqual(self.outputs(one), [self.path("one", "data-00000-of-00001.tfrecord")])
        self.assertEqual(all_records(self.outputs(one)), payloads)
        # 1 -> N (7), GZIP, records split evenly with earlier shards taking the rest
        seven = self.reshard([self.path("one")], self.path("seven"), "--shards", "7",
                             "--compression", "gzip", "--prefix", "train")
        names = [os.path.basename(p) for p in self.outputs(seven)]
        self.assertEqual(names, [f"train-{i:05d}-of-00007.tfrecord.gz" for i in range(7)])
        self.assertEqual([s["records"] for s in seven["shards"]], [29] * 7)
        self.assertEqual(sorted(os.listdir(self.path("seven"))), names)
        for p in self.outputs(seven):
            with open(p, "rb") as f:
                self.assertEqual(tc.codec_of(f.read()), "gzip")
        self.assertEqual(all_records(self.outputs(seven)), payloads)
        # N -> M (7 -> 4), the sources' codec kept by default
        four = self.reshard([self.path("seven")], self.path("four"), "--shards", "4")
        self.assertEqual([s["records"] for s in four["shards"]], [51, 51, 51, 50])
        self.assertTrue(all(p.endswith(".tfrecord.gz") for p in self.outputs(four)))
        self.assertEqual(all_records(self.outputs(four)), payloads)
        # By size, to ZLIB: every shard within the size (or a single record).
        sized = self.reshard([self.path("four")], self.path("sized"), "--shard-size", "8K",
                             "--compression", "zlib")
        self.assertGreater(len(sized["shards"]), 3)
        for s in sized["shards"]:
            self.assertTrue(s["bytes"] <= 8192 or s["records"] == 1)
            self.assertTrue(s["path"].endswith(".tfrecord.zlib"))
        self.assertEqual(all_records(self.outputs(sized)), payloads)
        self.assertEqual(sized["records"], 203)
        # Text output: records<TAB>path per shard and a total.
        r = run("reshard", *src, "-o", self.path("text"), "--shards", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^102\t.*data-00000-of-00002\.tfrecord\n101\t.*\n203\ttotal")

    def test_shuffle_is_a_seeded_permutation(self):
        src = self.sample("s", 150, 3)
        payloads = all_records(src)
        a = self.reshard([self.path("s")], self.path("a"), "--shards", "3", "--shuffle",
                         "--seed", "12345")
        got = all_records(self.outputs(a))
        self.assertEqual(sorted(got), sorted(payloads), "every payload exactly once")
        self.assertNotEqual(got, payloads)
        # Exactly the documented order (shuffle.h: a sort by seeded keys of
        # the shards' mount paths and record numbers).
        by_shard = [(os.path.basename(p), tc.read_records(p)) for p in src]
        self.assertEqual(got, shuffled(by_shard, 12345))
        self.assertEqual(a["seed"], 12345)
        # The same seed: the same bytes; whatever the memory budget (runs,
        # buckets, slices of buckets).
        b = self.reshard([self.path("s")], self.path("b"), "--shards", "3", "--shuffle",
                         "--seed", "12345", "--memory", "1M")
        self.assertEqual([digest(p) for p in self.outputs(b)],
                         [digest(p) for p in self.outputs(a)])
        # Another seed: another order.
        c = self.reshard([self.path("s")], self.path("c"), "--shards", "3", "--shuffle",
                         "--seed", "12346")
        other = all_records(self.outputs(c))
        self.assertEqual(sorted(other), sorted(payloads))
        self.assertNotEqual(other, got)
        # No seed: a random one, reported, which reproduces the order.
        d = self.reshard([self.path("s")], self.path("d"), "--shards", "1", "--shuffle")
        e = self.reshard([self.path("s")], self.path("e"), "--shards", "1", "--shuffle",
                         "--seed", str(d["seed"]))
        self.assertEqual(digest(self.outputs(d)[0]), digest(self.outputs(e)[0]))
        # Shuffling GZIP sources (random access through checkpoints).
        gz = self.sample("gz", 150, 2, "gzip")
        f = self.reshard([self.path("gz")], self.path("f"), "--shards", "2", "--shuffle",
                         "--seed", "9", "--compression", "none")
        self.assertEqual(all_records(self.outputs(f)),
                         shuffled([(os.path.basename(p), tc.read_records(p)) for p in gz], 9))

    def test_damaged_records_stop_unless_skipped(self):
        h = self.hostile()
        srcs = [os.path.join(h, n) for n in ("data_crc_mismatch.tfrecord",
                                             "length_crc_mismatch.tfrecord",
                                             "stray_bytes_02.tfrecord", "names.tfrecord")]
        truth = manifest(os.path.join(h, "MANIFEST.txt"))
        r = self.reshard(srcs, self.path("strict"), "--shards", "2", expect=1)
        self.assertIn("--skip-damaged", r.stderr)
        self.assertRegex(r.stderr, r"byte offset \d+")
        self.assertEqual(os.listdir(self.path("strict")), [], "nothing written")
        r = run("reshard", *srcs, "-o", self.path("skip"), "--shards", "2", "--skip-damaged",
                "--json")
        self.assertEqual(r.returncode, 1, r.stderr)
        report = json.loads(r.stdout)
        got = all_records(self.outputs(report))
        want = [crc for s in srcs for _, ok, crc in truth[os.path.basename(s)] if ok]
        self.assertEqual([format(tc.crc32c(p), "08x") for p in got], want)
        skipped = {(os.path.basename(d["path"]), d["record"]) for d in report["skipped"]}
        self.assertEqual(skipped, {("data_crc_mismatch.tfrecord", 2),
                                   ("length_crc_mismatch.tfrecord", 2),
                                   ("stray_bytes_02.tfrecord", None)})


def frames_of(path):
    """The framed records of a plain shard, cut by their length fields alone
    (no CRC computed: fast on tens of MB)."""
    with open(path, "rb") as f:
        raw = f.read()
    out, pos = [], 0
    while pos < len(raw):
        n = int.from_bytes(raw[pos:pos + 8], "little")
        out.append(raw[pos:pos + 16 + n])
        pos += 16 + n
    return out


class SplicedReshardTest(Base):
    """Plain shards resharded in source order into plain output are copied
    file to file in runs of checked records (copy_file_range), not appended
    one by one: the output must still be the inputs' framed records, every
    one once and in order, cut at the planned boundaries, and a damaged
    record must never be copied."""

    def setUp(self):
        super().setUp()
        # 3 small shards, then one of 18 MB (more than one 16 MiB run).
        gen("synthetic", self.path("s"), "--records", "300", "--shards", "3", "--bytes", "300",
            "--prefix", "in")
        gen("synthetic", self.path("big"), "--records", "180", "--shards", "1", "--bytes",
            "100000", "--prefix", "big")
        self.inputs = [os.path.join(self.path("s"), f) for f in sorted(os.listdir(self.path("s")))
                       if not f.startswith(".")]
        self.inputs += [os.path.join(self.path("big"), f)
                        for f in sorted(os.listdir(self.path("big"))) if not f.startswith(".")]
        self.frames = [fr for p in self.inputs for fr in frames_of(p)]
        self.assertEqual(len(self.frames), 480)

    def reshard(self, out, *args, sources=None, expect=0):
        r = run("reshard", *(sources or [self.path("s"), self.path("big")]), "-o", self.path(out),
                "--json", *args)
        self.assertEqual(r.returncode, expect, r.stderr)
        return json.loads(r.stdout) if r.stdout else r

    def assert_holds(self, report, want):
        """Each output file is exactly its share of `want` (framed records)."""
        at = 0
        for shard in report["shards"]:
            n = shard["records"]
            with open(shard["path"], "rb") as f:
                got = f.read()
            self.assertEqual(got, b"".join(want[at:at + n]),
                             f"{shard['path']}: not records {at}..{at + n - 1}")
            at += n
        self.assertEqual(at, len(want))
        self.assertFalse([f for f in os.listdir(os.path.dirname(report["shards"][0]["path"]))
                          if f.startswith(".")], "no temporary file left")

    def test_every_record_once_in_order_at_the_boundaries(self):
        for args in (["--shards", "4"], ["--shards", "7"], ["--shards", "1"],
                     ["--shard-size", "3M"]):
            with self.subTest(args=args):
                out = "o" + "".join(args)
                report = self.reshard(out, *args)
                self.assertEqual(report["records"], 480)
                if args[0] == "--shards":
                    self.assertEqual(len(report["shards"]), int(args[1]))
                self.assert_holds(report, self.frames)

    def test_damaged_record_is_never_copied(self):
        # One flipped payload byte in: the first record, a record mid-shard,
        # the last record of a shard, and a record past the first 16 MiB run.
        d = self.path("d")
        shutil.copytree(self.path("s"), os.path.join(d, "s"))
        shutil.copytree(self.path("big"), os.path.join(d, "big"))
        damaged = []  # global record numbers
        starts = [0]
        for p in self.inputs:
            starts.append(starts[-1] + len(frames_of(p)))
        for shard, record in ((0, 0), (1, 50), (2, 99), (3, 170)):
            p = self.inputs[shard]
            p = os.path.join(d, os.path.basename(os.path.dirname(p)), os.path.basename(p))
            offset = sum(len(f) for f in frames_of(p)[:record]) + 12 + 5
            with open(p, "r+b") as f:
                f.seek(offset)
                b = f.read(1)
                f.seek(offset)
                f.write(bytes([b[0] ^ 0x40]))
            damaged.append(starts[shard] + record)
        sources = [os.path.join(d, "s"), os.path.join(d, "big")]
        r = self.reshard("strict", "--shards", "3", sources=sources, expect=1)
        self.assertRegex(r.stderr, r"in-00000-of-00003\.tfrecord: record 0 at byte offset 0: "
                                   r"data CRC mismatch")
        self.assertEqual(os.listdir(self.path("strict")), [], "nothing written")
        report = self.reshard("skip", "--shards", "3", "--skip-damaged", sources=sources,
                              expect=1)
        want = [f for g, f in enumerate(self.frames) if g not in damaged]
        self.assertEqual(report["records"], 476)
        self.assert_holds(report, want)
        skipped = sorted((os.path.basename(x["path"]), x["record"]) for x in report["skipped"])
        self.assertEqual(skipped, sorted([(os.path.basename(self.inputs[s]), rec)
                                          for s, rec in ((0, 0), (1, 50), (2, 99), (3, 170))]))


def rusage(*args):
    """Runs the binary; returns (exit code, its own rusage): peak RSS in KiB
    and minor page faults, which no other process adds to."""
    p = subprocess.Popen([BIN, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, usage


class MemoryTest(Base):
    """What a reshard costs in memory next to a repair of the same shards,
    which holds one record at a time: counted (peak RSS, page faults), not
    timed. 40 MB of 100 KB records in 2 shards."""

    def setUp(self):
        super().setUp()
        gen("synthetic", self.path("s"), "--records", "400", "--shards", "2", "--bytes",
            "100000", "--prefix", "in")
        self.data = sum(os.path.getsize(os.path.join(self.path("s"), f))
                        for f in os.listdir(self.path("s")))
        code, self.repair = rusage("repair", "-q", self.path("s"), "-o", self.path("r"))
        self.assertEqual(code, 0)

    def test_in_order_reshard_holds_one_record_not_a_batch(self):
        # In source order each batch's file order is its output order: batching
        # gains nothing, and a 64M batch held up to 20 MB here (one output
        # shard's records) before it was written.
        code, ru = rusage("reshard", "-q", self.path("s"), "-o", self.path("o"), "--shards", "2")
        self.assertEqual(code, 0)
        self.assertLess((ru.ru_maxrss - self.repair.ru_maxrss) * 1024, self.data // 8,
                        f"peak RSS {ru.ru_maxrss} KiB, repair's {self.repair.ru_maxrss} KiB")

    @unittest.skipIf("ASAN_OPTIONS" in os.environ or "TSAN_OPTIONS" in os.environ,
                     "page faults measure glibc's allocator, which a sanitizer replaces (ASan "
                     "quarantines what is freed instead of reusing it)")
    def test_shuffled_batches_reuse_their_memory(self):
        # Each batch's records used to be allocated and freed together: glibc
        # gave the heap back to the kernel after every batch and faulted it in
        # again for the next (the whole dataset's worth of page faults; on this
        # project's benchmark machine 5x the time of repair). One buffer kept
        # from batch to batch faults in once. Since issue 37 the shuffle's
        # batches are its runs and bucket slices (shuffle.h), within --memory:
        # 2M here, 512 pages.
        code, ru = rusage("reshard", "-q", self.path("s"), "-o", self.path("o"), "--shards", "2",
                          "--shuffle", "--seed", "1", "--memory", "2M")
        self.assertEqual(code, 0)
        pages = self.data // 4096
        self.assertLess(ru.ru_minflt - self.repair.ru_minflt, pages // 4,
                        f"{ru.ru_minflt} page faults, repair's {self.repair.ru_minflt}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
