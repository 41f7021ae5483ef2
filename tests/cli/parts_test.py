#!/usr/bin/env python3
"""`--part K/N` and `--finalize` run as the real binary (suite 'cli', issue 37).

The parts of a command are run one after another (as a job runner would run
them, in any order) and their result is judged by tfrecord_check.py, a
TFRecord reader independent of tfrecordfs, and by byte comparison with what
one process writes. Environment: TFRECORDFS_BIN and TFRECORDFS_GEN (set by
meson).
"""
import filecmp
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfrecord_check as tc  # noqa: E402
from cli_common import BIN, GEN, CliTestBase, all_records, gen, shards_in  # noqa: E402
# The job runners' variables: a test decides which it sets.
RUNNER_VARS = ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN",
               "AWS_BATCH_JOB_ARRAY_INDEX", "AWS_BATCH_JOB_ARRAY_SIZE", "JOB_COMPLETION_INDEX")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in RUNNER_VARS}
    env.update(extra)
    return env


def run(*args, env=None):
    return subprocess.run([BIN, *args], capture_output=True, text=True,
                          env=env if env is not None else clean_env(), timeout=300)


def flip_payload_byte(path, record):
    """Flips the 9th payload byte of record `record` of the plain shard at
    `path` (its data CRC then fails), walking the framing's lengths."""
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        pos = 0
        for _ in range(record):
            pos += 16 + int.from_bytes(data[pos:pos + 8], "little")
        data[pos + 20] ^= 0xFF
        f.seek(0)
        f.write(data)


class Base(CliTestBase):
    TMP_PREFIX = "parts_test."

    def sample(self, name, records=1200, shards=6, compression="none"):
        return super().sample(name, records, shards, compression)

    def parts(self, n, *args, order=None, maps=None):
        """Runs parts 0..n-1 of `args` (in `order` when given); each must
        succeed. A shuffle runs in two passes: the map of the parts in `maps`
        (default: all), then the reduce of those in `order`."""
        everyone = list(range(n))
        passes = [(["--pass", "map"], maps if maps is not None else everyone),
                  (["--pass", "reduce"], order if order is not None else everyone)]
        if "--shuffle" not in args:
            passes = [([], order if order is not None else everyone)]
        for extra, which in passes:
            for k in which:
                r = run(*args, "--part", f"{k}/{n}", "-q", *extra)
                self.assertEqual(r.returncode, 0, f"part {k}/{n} {extra}: {r.stderr}")
                self.assertIn(f"part {k}/{n} (from --part {k}/{n})", r.stderr)

    def check_manifests(self, out, what):
        """Each output the parts' manifests under `out` list has the size and
        CRC32C (tfrecord_check.py's own) of its file; how many they list."""
        parts_dir = os.path.join(out, ".tfrecordfs-parts")
        seen = 0
        for folder in sorted(os.listdir(parts_dir)):
            with open(os.path.join(parts_dir, folder, "manifest.json")) as f:
                manifest = json.load(f)
            for o in manifest["outputs"]:
                with open(os.path.join(parts_dir, folder, o["path"]), "rb") as f:
                    data = f.read()
                self.assertEqual(o["file_bytes"], len(data), o["path"])
                self.assertEqual(o["crc32c"], tc.crc32c(data), (what, o["path"]))
                seen += 1
        return seen

    def assertSameTree(self, a, b):
        names_a = sorted(os.listdir(a))
        self.assertEqual(names_a, sorted(os.listdir(b)))
        for name in names_a:
            self.assertTrue(filecmp.cmp(os.path.join(a, name), os.path.join(b, name),
                                        shallow=False), name)


class PartFlags(Base):
    def test_bad_parts_are_usage_errors(self):
        src = self.sample("s", 40, 2)
        for bad in ("5/4", "4/4", "0/0", "a/b", "1/", "/2", "-1/4", "1/4/5", "", "0/100000"):
            for cmd in ("count", "verify", "index"):
                r = run(cmd, self.path("s"), f"--part={bad}")
                self.assertEqual(r.returncode, 2, f"{cmd} --part={bad}: {r.stderr}")
                self.assertIn("--part", r.stderr)
            r = run("reshard", self.path("s"), "-o", self.path("o"), "--part", bad)
            self.assertEqual(r.returncode, 2, r.stderr)
        # An index from a runner without its count, --parts without an index.
        r = run("count", self.path("s"), env=clean_env(JOB_COMPLETION_INDEX="1"))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("JOB_COMPLETION_INDEX=1 is set but not the number of parts", r.stderr)
        r = run("count", self.path("s"), "--parts", "3")
        self.assertEqual(r.returncode, 2, r.stderr)
        r = run("count", self.path("s"), env=clean_env(SLURM_ARRAY_TASK_ID="4",
                                                       SLURM_ARRAY_TASK_COUNT="4"))
        self.assertEqual(r.returncode, 2, r.stderr)
        # A shuffle in parts must be seeded alike.
        r = run("reshard", self.path("s"), "-o", self.path("o"), "--shuffle", "--part", "0/2")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--seed", r.stderr)
        self.assertFalse(os.path.exists(self.path("o")))
        self.assertEqual(len(src), 2)

    def test_runner_variables_name_the_part(self):
        self.sample("s", 400, 8)
        whole = json.loads(run("count", "--json", self.path("s")).stdout)
        cases = [
            ({"SLURM_ARRAY_TASK_ID": "{k}", "SLURM_ARRAY_TASK_COUNT": "4"}, []),
            ({"SLURM_ARRAY_TASK_ID": "{k1}", "SLURM_ARRAY_TASK_COUNT": "4",
              "SLURM_ARRAY_TASK_MIN": "1"}, []),
            ({"AWS_BATCH_JOB_ARRAY_INDEX": "{k}", "AWS_BATCH_JOB_ARRAY_SIZE": "4"}, []),
            ({"AWS_BATCH_JOB_ARRAY_INDEX": "{k}"}, ["--parts", "4"]),
            ({"JOB_COMPLETION_INDEX": "{k}"}, ["--parts", "4"]),
        ]
        for variables, flags in cases:
            seen = []
            for k in range(4):
                env = clean_env(**{v: t.format(k=k, k1=k + 1) for v, t in variables.items()})
                r = run("count", "--json", self.path("s"), *flags, env=env)
                self.assertEqual(r.returncode, 0, r.stderr)
                first = next(iter(variables))
                self.assertIn(f"part {k}/4 (from {first}=", r.stderr)
                seen.extend(s["path"] for s in json.loads(r.stdout)["shards"])
            # Every shard counted by exactly one part.
            self.assertEqual(sorted(seen), sorted(s["path"] for s in whole["shards"]), variables)


class PerFileCommands(Base):
    def test_count_verify_and_index_parts_cover_every_shard_once(self):
        self.sample("s", 900, 9)
        whole = json.loads(run("count", "--json", self.path("s")).stdout)
        for n in (1, 2, 3, 8, 12):
            counted, verified = [], 0
            for k in range(n):
                r = run("count", "--json", self.path("s"), "--part", f"{k}/{n}")
                self.assertEqual(r.returncode, 0, r.stderr)
                counted.extend(json.loads(r.stdout)["shards"])
                r = run("verify", "--json", self.path("s"), "--part", f"{k}/{n}")
                self.assertEqual(r.returncode, 0, r.stderr)
                verified += json.loads(r.stdout)["records"]
            self.assertEqual(sorted(counted, key=lambda s: s["path"]), whole["shards"], n)
            self.assertEqual(verified, whole["records"])
        # index --part writes the part's indexes where index writes them
        # (--beside: <shard>.tfri), the other parts' shards untouched.
        r = run("index", "--beside", self.path("s"), "--part", "0/3")
        self.assertEqual(r.returncode, 0, r.stderr)
        beside = sorted(f for f in os.listdir(self.path("s")) if f.endswith(".tfri"))
        self.assertTrue(0 < len(beside) < 9, beside)
        for k in (1, 2):
            self.assertEqual(run("index", "--beside", self.path("s"), "--part", f"{k}/3")
                             .returncode, 0)
        beside = sorted(f for f in os.listdir(self.path("s")) if f.endswith(".tfri"))
        self.assertEqual(len(beside), 9, beside)

    def test_a_large_shard_is_verified_by_several_parts(self):
        # One shard of 3000 records beside two small ones: verify's plan
        # cuts it at record boundaries, so every part reads some of it, and
        # the parts' records and damage add up to the whole's.
        src = self.sample("s", 3000, 1)
        gen("synthetic", self.path("s", "small"), "--records", "20", "--shards", "2",
            "--bytes", "300", "--prefix", "z")
        # A flipped payload byte in record 2000 of the large shard.
        flip_payload_byte(src[0], 2000)
        whole = json.loads(run("verify", "--json", self.path("s")).stdout)
        self.assertEqual(whole["records"], 3020)
        self.assertEqual(whole["damaged_records"], 1)
        for n in (2, 4, 7):
            records = damaged = 0
            for k in range(n):
                r = run("verify", "--json", self.path("s"), "--part", f"{k}/{n}")
                got = json.loads(r.stdout)
                self.assertGreater(got["records"], 0, f"part {k}/{n} verified nothing")
                self.assertEqual(r.returncode, 1 if got["damaged_records"] else 0, r.stderr)
                records += got["records"]
                damaged += got["damaged_records"]
            self.assertEqual((records, damaged), (3020, 1), n)

    def test_repair_in_parts_then_finalize_is_one_repair(self):
        src = self.sample("s", 600, 5, "gzip")
        self.assertEqual(run("repair", self.path("s"), "-o", self.path("one")).returncode, 0)
        self.parts(3, "repair", self.path("s"), "-o", self.path("multi"), order=[2, 0, 1])
        # Nothing under a final name before --finalize.
        self.assertEqual(os.listdir(self.path("multi")), [".tfrecordfs-parts"])
        r = run("repair", self.path("s"), "-o", self.path("multi"), "--finalize")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("600\ttotal: 5 file(s) from 3 part(s)", r.stdout)
        self.assertSameTree(self.path("one"), self.path("multi"))
        self.assertEqual(all_records(shards_in(self.path("multi"))), all_records(src))


    def test_repair_manifests_hold_each_copys_crc32c_as_tfrecord_check_computes_it(self):
        # repair's copies get their CRC32C from the records' bytes as they
        # are checked (plain shards: the runs copied file to file, split by
        # a damaged record; gzip: the writer's bytes), not by reading the
        # copy back: each manifest's CRC32C and size are the file's, as
        # tfrecord_check.py's own CRC32C computes it.
        for codec in ("none", "gzip"):
            shutil.rmtree(self.path("s"), ignore_errors=True)
            shutil.rmtree(self.path("o"), ignore_errors=True)
            src = self.sample("s", 900, 3, codec)
            if codec == "none":
                flip_payload_byte(src[1], 100)  # record 100's payload flipped
            for k in range(2):
                r = run("repair", self.path("s"), "-o", self.path("o"), "--part", f"{k}/2", "-q")
                self.assertIn(r.returncode, (0, 1), r.stderr)
            self.assertEqual(self.check_manifests(self.path("o"), codec), 3, codec)
            r = run("repair", self.path("s"), "-o", self.path("o"), "--finalize")
            self.assertEqual(r.returncode, 0, r.stderr)
            want = all_records(src) if codec == "gzip" else None
            if want is not None:
                self.assertEqual(all_records(shards_in(self.path("o"))), want)
            else:
                self.assertEqual(len(all_records(shards_in(self.path("o")))), 899)

class Reshard(Base):
    def reshard(self, out, *args, n=None, order=None):
        base = ("reshard", self.path("s"), "-o", self.path(out), *args)
        if n is None:
            r = run(*base, "-q")
            self.assertEqual(r.returncode, 0, r.stderr)
            return
        self.parts(n, *base, order=order)
        r = run(*base, "--finalize")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"from {n} part(s)", r.stdout)
        self.assertEqual(sorted(os.listdir(self.path(out))),
                         sorted(os.path.basename(p) for p in shards_in(self.path(out))))

    def test_shuffled_parts_are_byte_identical_to_one_process(self):
        src = self.sample("s", 1500, 6)
        self.reshard("one", "--shuffle", "--seed", "1234", "--shards", "7")
        records = all_records(shards_in(self.path("one")))
        self.assertEqual(sorted(records), sorted(all_records(src)))
        self.assertNotEqual(records, all_records(src))  # shuffled
        for n in (2, 3, 8):
            out = f"n{n}"
            self.reshard(out, "--shuffle", "--seed", "1234", "--shards", "7", n=n,
                         order=list(reversed(range(n))))
            self.assertSameTree(self.path("one"), self.path(out))

    def test_manifests_hold_each_files_size_and_crc32c(self):
        # The runs' and the shuffled shards' CRC32C are computed as they are
        # written, the in-order shards' read back: each is the file's, as
        # tfrecord_check.py's own CRC32C computes it.
        self.sample("s", 1500, 6)
        for extra in (["--shuffle", "--seed", "5", "--memory", "1M"], []):
            out = self.path("o")
            shutil.rmtree(out, ignore_errors=True)
            self.parts(2, "reshard", self.path("s"), "-o", out, "--shards", "3", *extra)
            self.assertGreaterEqual(self.check_manifests(out, extra), 8 if extra else 3)

    def test_the_memory_budget_changes_runs_and_buckets_not_bytes(self):
        # 20000 records of about 330 framed bytes (6.6 MB) with --memory 1M:
        # runs of 512 KB (13 or so), a dozen buckets, each larger than half
        # the budget with its entries, so read in two slices of its keys; with
        # 64M: one run, one bucket. The same bytes either way, and as 3 parts.
        src = self.sample("s", 20000, 3, "gzip")
        self.reshard("big", "--shuffle", "--seed", "21", "--shards", "5", "--memory", "64M")
        self.reshard("small", "--shuffle", "--seed", "21", "--shards", "5", "--memory", "1M")
        self.assertSameTree(self.path("big"), self.path("small"))
        self.reshard("parts", "--shuffle", "--seed", "21", "--shards", "5", "--memory", "1M", n=3)
        self.assertSameTree(self.path("big"), self.path("parts"))
        got = all_records(shards_in(self.path("small")))
        self.assertEqual(sorted(got), sorted(all_records(src)))
        # The map pass said how it split the work.
        r = run("reshard", self.path("s"), "-o", self.path("x"), "--shuffle", "--seed", "21",
                "--shards", "5", "--memory", "1M", "--part", "0/1", "--pass", "map")
        self.assertEqual(r.returncode, 0, r.stderr)
        # (GZIP shards: the buckets are counted from the files' 6 or so MB,
        # 4 per MB of --memory: a bucket of a quarter of the budget.)
        self.assertRegex(r.stdout, r"^20000\tmapped: 3 shard\(s\) into 1[0-9] run\(s\) of 2[0-8] bucket")

    def test_a_large_shard_is_mapped_by_several_parts(self):
        # One large plain shard: each part's first pass takes the records
        # that begin in its piece of it; the output is one process's.
        self.sample("s", 2000, 1)
        self.reshard("one", "--shuffle", "--seed", "4", "--shards", "3")
        args = ("reshard", self.path("s"), "-o", self.path("n3"), "--shuffle", "--seed", "4",
                "--shards", "3", "-q")
        for k in range(3):
            r = run(*args, "--part", f"{k}/3", "--pass", "map")
            self.assertEqual(r.returncode, 0, r.stderr)
            mapped = int(r.stdout.split("\t")[0])
            self.assertTrue(500 < mapped < 800, f"part {k} mapped {mapped} of 2000")
        for k in range(3):
            self.assertEqual(run(*args, "--part", f"{k}/3", "--pass", "reduce").returncode, 0)
        self.assertEqual(run(*args, "--finalize").returncode, 0)
        self.assertSameTree(self.path("one"), self.path("n3"))

    def test_in_order_parts_with_a_shard_size_are_one_process(self):
        src = self.sample("s", 1000, 4, "zlib")
        self.reshard("one", "--shard-size", "40K")
        self.assertEqual(all_records(shards_in(self.path("one"))), all_records(src))
        for n in (2, 5):
            self.reshard(f"n{n}", "--shard-size", "40K", n=n)
            self.assertSameTree(self.path("one"), self.path(f"n{n}"))

    def test_a_rerun_part_replaces_only_its_own_outputs(self):
        self.sample("s", 800, 4)
        args = ("reshard", self.path("s"), "-o", self.path("o"), "--shuffle", "--seed", "9",
                "--shards", "4")
        self.parts(2, *args)
        root = self.path("o", ".tfrecordfs-parts")
        before = {d: sorted(os.listdir(os.path.join(root, d))) for d in os.listdir(root)}
        self.assertEqual(len(before), 4)  # two parts' map and reduce passes
        self.parts(2, *args, order=[1], maps=[1])  # a retried pod, both passes
        self.assertEqual({d: sorted(os.listdir(os.path.join(root, d)))
                          for d in os.listdir(root)}, before)
        self.assertEqual(run(*args, "--finalize").returncode, 0)
        self.reshard("one", "--shuffle", "--seed", "9", "--shards", "4")
        self.assertSameTree(self.path("one"), self.path("o"))


class Finalize(Base):
    ARGS = ("--shuffle", "--seed", "5", "--shards", "3")

    def args(self, out="o"):
        return ("reshard", self.path("s"), "-o", self.path(out), *self.ARGS)

    def test_a_missing_part_is_named_and_nothing_moves(self):
        self.sample("s", 600, 6)
        # A reduce pass before every map pass ran refuses, naming it.
        self.parts(4, *self.args(), order=[], maps=[0, 2, 3])
        r = run(*self.args(), "--part", "0/4", "--pass", "reduce")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("the first pass (--pass map) of part(s) 1 of 4", r.stderr)
        self.parts(4, *self.args(), order=[0, 1, 3], maps=[1])
        r = run(*self.args(), "--finalize")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("missing: part(s) 2 of 4", r.stderr)
        self.assertEqual(os.listdir(self.path("o")), [".tfrecordfs-parts"])
        # Once it ran, finalize succeeds.
        self.parts(4, *self.args(), order=[2], maps=[])
        self.assertEqual(run(*self.args(), "--finalize").returncode, 0)

    def test_a_changed_input_is_named(self):
        src = self.sample("s", 600, 6)
        self.parts(3, *self.args())
        # Same size, a new mtime (as a rewrite in place leaves it).
        os.utime(src[1], ns=(os.stat(src[1]).st_atime_ns, os.stat(src[1]).st_mtime_ns + 10**9))
        r = run(*self.args(), "--finalize")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("stale:", r.stderr)
        self.assertIn(f"{src[1]} was modified since the part read it", r.stderr)
        # A grown input: the plan of the current inputs is another; the parts
        # there are foreign, and the change is named.
        with open(src[2], "ab") as f:
            f.write(tc.frame(b"one more"))
        r = run(*self.args(), "--finalize")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("missing:", r.stderr)
        self.assertIn("foreign:", r.stderr)
        self.assertIn(f"{src[2]} changed size", r.stderr)
        self.assertEqual(os.listdir(self.path("o")), [".tfrecordfs-parts"])

    def test_another_plans_parts_are_foreign(self):
        self.sample("s", 600, 6)
        self.parts(2, *self.args())
        # A part of a reshard with another seed in the same folder.
        r = run("reshard", self.path("s"), "-o", self.path("o"), "--shuffle", "--seed", "6",
                "--shards", "3", "--part", "1/2", "--pass", "map")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run(*self.args(), "--finalize")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("foreign:", r.stderr)
        self.assertIn("-map-1: a shuffle's first pass of another plan", r.stderr)

    def test_no_part_at_all(self):
        self.sample("s", 60, 2)
        r = run(*self.args(), "--finalize")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("no part has run", r.stderr)


class Faults(Base):
    def test_a_part_killed_midway_and_rerun_gives_the_same_bytes(self):
        self.sample("s", 900, 6)
        args = ("reshard", self.path("s"), "-o", self.path("o"), "--shuffle", "--seed", "77",
                "--shards", "6")
        self.parts(3, *args, order=[0, 2])
        env = clean_env(TFRECORDFS_FAULT="pause_mid_output")
        p = subprocess.Popen([BIN, *args, "--part", "1/3", "-q", "--pass", "reduce"],
                             stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env, text=True)
        while True:
            line = p.stderr.readline()
            self.assertTrue(line, "the part ended before pausing")
            if "paused" in line:
                break
        p.kill()  # SIGKILL: nothing cleans up
        p.communicate(timeout=120)
        root = self.path("o", ".tfrecordfs-parts")
        work = [d for d in os.listdir(root) if ".work-" in d]
        self.assertEqual(len(work), 1, os.listdir(root))
        # Finalize now: part 1 is missing (its work folder is no part).
        r = run(*args, "--finalize")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("missing: part(s) 1 of 3", r.stderr)
        # The rerun removes the killed run's folder and publishes the part.
        self.parts(3, *args, order=[1], maps=[])
        self.assertEqual(len([d for d in os.listdir(root) if ".work-" in d]), 0)
        r = run(*args, "--finalize")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.reshard_one(args)
        self.assertSameTree(self.path("one"), self.path("o"))

    def test_a_map_pass_killed_midway_and_rerun_gives_the_same_bytes(self):
        self.sample("s", 6000, 4)
        args = ("reshard", self.path("s"), "-o", self.path("o"), "--shuffle", "--seed", "78",
                "--shards", "4", "--memory", "1M")
        env = clean_env(TFRECORDFS_FAULT="pause_mid_output")
        # Part 0's first pass, killed once its first run is on disk.
        p = subprocess.Popen([BIN, *args, "--part", "0/2", "-q", "--pass", "map"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        while "paused" not in (line := p.stderr.readline()):
            self.assertTrue(line, "the map pass ended before pausing")
        root = self.path("o", ".tfrecordfs-parts")
        work = [d for d in os.listdir(root) if ".work-" in d]
        self.assertEqual(len(work), 1, os.listdir(root))
        self.assertIn("run-00000", os.listdir(os.path.join(root, work[0])))
        p.kill()
        p.communicate(timeout=120)
        # A reduce now refuses: part 0's first pass is not there.
        self.parts(2, *args, order=[], maps=[1])
        r = run(*args, "--part", "1/2", "--pass", "reduce")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("(--pass map) of part(s) 0 of 2", r.stderr)
        # The rerun replaces the killed run's folder; then all goes through.
        self.parts(2, *args, maps=[0])
        self.assertEqual(run(*args, "--finalize").returncode, 0)
        self.reshard_one(args)
        self.assertSameTree(self.path("one"), self.path("o"))

    def test_finalize_refuses_while_a_part_runs(self):
        self.sample("s", 600, 4)
        args = ("reshard", self.path("s"), "-o", self.path("o"), "--shards", "4")
        self.parts(2, *args, order=[0, 1])
        # Part 1 again (a retried pod), paused while it writes: its work
        # folder is locked.
        env = clean_env(TFRECORDFS_FAULT="pause_mid_output")
        p = subprocess.Popen([BIN, *args, "--part", "1/2", "-q"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env, text=True)
        while "paused" not in (line := p.stderr.readline()):
            self.assertTrue(line, "the part ended before pausing")
        r = run(*args, "--finalize")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("running:", r.stderr)
        self.assertIn("-part-1.work-", r.stderr)
        # Ctrl-C: the run removes its work folder, the published part stays.
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 130, err)
        root = self.path("o", ".tfrecordfs-parts")
        self.assertEqual(len(os.listdir(root)), 2, os.listdir(root))
        self.assertEqual(run(*args, "--finalize").returncode, 0)

    def reshard_one(self, args):
        one = list(args)
        one[one.index(self.path("o"))] = self.path("one")
        r = run(*one)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_the_same_part_twice_at_once(self):
        self.sample("s", 900, 6)
        args = ("reshard", self.path("s"), "-o", self.path("o"), "--shuffle", "--seed", "3",
                "--shards", "4")
        self.parts(2, *args, order=[0])
        procs = [subprocess.Popen([BIN, *args, "--part", "1/2", "-q", "--pass", "reduce"],
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=clean_env(), text=True)
                 for _ in range(2)]
        for p in procs:
            _, err = p.communicate(timeout=300)
            # Both publish the same bytes (the last rename wins), or one
            # refuses clearly.
            self.assertIn(p.returncode, (0, 1), err)
        self.assertTrue(any(p.returncode == 0 for p in procs))
        r = run(*args, "--finalize")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.reshard_one(args)
        self.assertSameTree(self.path("one"), self.path("o"))


def tfds_dataset(test, folder):
    """A TFDS-like dataset in `folder`: mnist-train.tfrecord-0000K-of-00003
    (600 records) and mnist-test.tfrecord-00000-of-00001 (100), with the
    dataset_info.json TFDS 4.x writes for them (numbers as proto3 JSON
    strings, the keys in its order). Returns the info as a dict."""
    gen("synthetic", folder, "--records", "600", "--shards", "3", "--bytes", "200",
        "--prefix", "mnist-train.tfrecord")
    gen("synthetic", folder, "--records", "100", "--shards", "1", "--bytes", "200",
        "--prefix", "mnist-test.tfrecord")

    def split(name):
        files = sorted(f for f in os.listdir(folder) if f.startswith(f"mnist-{name}."))
        lengths = [len(tc.read_records(os.path.join(folder, f))) for f in files]
        size = sum(len(r) for f in files for r in tc.read_records(os.path.join(folder, f)))
        return {"filepathTemplate": "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}",
                "name": name, "numBytes": str(size), "shardLengths": [str(n) for n in lengths]}
    info = {"citation": "@article{lecun2010mnist, title={MNIST handwritten digit database}}",
            "description": "The MNIST database of handwritten digits.",
            "downloadSize": "11594722", "fileFormat": "tfrecord",
            "location": {"urls": ["http://yann.lecun.com/exdb/mnist/"]},
            "moduleName": "tensorflow_datasets.image_classification.mnist", "name": "mnist",
            "releaseNotes": {"3.0.1": "New split API (https://tensorflow.org/datasets/splits)"},
            "splits": [split("test"), split("train")],
            "supervisedKeys": {"tuple": {"items": [{"featureKey": "image"},
                                                   {"featureKey": "label"}]}},
            "version": "3.0.1"}
    with open(os.path.join(folder, "dataset_info.json"), "w") as f:
        json.dump(info, f, indent=2)
    return info


class TfdsInfo(Base):
    def check_split(self, out, info, name, count):
        """OUT/dataset_info.json's split `name` says what the shards
        OUT/mnist-NAME.tfrecord-*-of-COUNT hold (read by tfrecord_check);
        every other key is the source's."""
        with open(os.path.join(out, "dataset_info.json")) as f:
            got = json.load(f)
        files = [os.path.join(out, f"mnist-{name}.tfrecord-{i:05d}-of-{count:05d}")
                 for i in range(count)]
        records = [tc.read_records(p) for p in files]
        want = [s for s in info["splits"] if s["name"] == name][0]
        split = [s for s in got["splits"] if s["name"] == name][0]
        self.assertEqual(split["shardLengths"], [str(len(r)) for r in records])
        self.assertEqual(split["numBytes"], str(sum(len(x) for r in records for x in r)))
        self.assertEqual(split["numBytes"], want["numBytes"])  # the same records
        self.assertEqual(split["filepathTemplate"], want["filepathTemplate"])
        self.assertEqual({k: v for k, v in got.items() if k != "splits"},
                         {k: v for k, v in info.items() if k != "splits"})
        return got

    def test_finalize_writes_the_splits_shard_lengths(self):
        info = tfds_dataset(self, self.path("mnist"))
        train = sorted(self.path("mnist", f) for f in os.listdir(self.path("mnist"))
                       if f.startswith("mnist-train."))
        args = ("reshard", *train, "-o", self.path("o"), "--prefix", "mnist-train.tfrecord",
                "--shards", "4", "-q")
        self.parts(2, *args)
        r = run(*args, "--finalize")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("dataset_info.json", r.stderr)
        got = self.check_split(self.path("o"), info, "train", 4)
        # Only the split the output holds.
        self.assertEqual([s["name"] for s in got["splits"]], ["train"])
        self.assertEqual(all_records([f for f in shards_in(self.path("o"))
                                      if not f.endswith(".json")]), all_records(train))
        # The test split resharded into the same output: added beside train.
        test = [self.path("mnist", "mnist-test.tfrecord-00000-of-00001")]
        args = ("reshard", *test, "-o", self.path("o"), "--prefix", "mnist-test.tfrecord",
                "--shards", "2", "-q")
        self.parts(2, *args)
        self.assertEqual(run(*args, "--finalize").returncode, 0)
        got = self.check_split(self.path("o"), info, "test", 2)
        self.assertEqual(sorted(s["name"] for s in got["splits"]), ["test", "train"])
        self.check_split(self.path("o"), info, "train", 4)

    def test_one_process_writes_what_finalize_writes(self):
        """Single-process `reshard --prefix mnist-train.tfrecord` (TFDS names
        since repack::ShardName gives them) writes the same dataset_info.json,
        byte for byte, as --finalize after parts: one builder
        (repack::ReshardedTfdsInfoJson). A second split resharded into the
        same output is merged beside the first (before, one process left an
        existing dataset_info.json as it was)."""
        info = tfds_dataset(self, self.path("mnist"))
        train = sorted(self.path("mnist", f) for f in os.listdir(self.path("mnist"))
                       if f.startswith("mnist-train."))
        args = ("reshard", *train, "--prefix", "mnist-train.tfrecord", "--shards", "4", "-q")
        self.parts(2, *args, "-o", self.path("o"))
        self.assertEqual(run(*args, "-o", self.path("o"), "--finalize").returncode, 0)
        r = run(*args, "-o", self.path("one"))
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.path("o", "dataset_info.json"), "rb") as f:
            parted = f.read()
        with open(self.path("one", "dataset_info.json"), "rb") as f:
            self.assertEqual(f.read(), parted)
        self.check_split(self.path("one"), info, "train", 4)
        test = [self.path("mnist", "mnist-test.tfrecord-00000-of-00001")]
        r = run("reshard", *test, "-o", self.path("one"), "--prefix", "mnist-test.tfrecord",
                "--shards", "2", "-q")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = self.check_split(self.path("one"), info, "test", 2)
        self.assertEqual(sorted(s["name"] for s in got["splits"]), ["test", "train"])
        self.check_split(self.path("one"), info, "train", 4)

    def test_no_tfds_names_no_info(self):
        tfds_dataset(self, self.path("mnist"))
        args = ("reshard", self.path("mnist"), "-o", self.path("o"), "--shards", "2", "-q")
        self.parts(2, *args)
        self.assertEqual(run(*args, "--finalize").returncode, 0)
        self.assertFalse(os.path.exists(self.path("o", "dataset_info.json")))


SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "objstore",
                      "object_server.py")


class Buckets(Base):
    """Parts over an s3:// prefix of the project's S3 test server
    (tests/objstore/object_server.py on 127.0.0.1, anonymous)."""

    def setUp(self):
        super().setUp()
        if not os.path.exists("/usr/bin/python3"):
            self.skipTest("/usr/bin/python3 runs the object server")
        self.served = self.path("served")
        os.makedirs(os.path.join(self.served, "b"))
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", SERVER, "--root", self.served, "--log", self.path("server.log"),
             "--max-requests", "100000"], stdout=subprocess.PIPE, text=True)
        self.addCleanup(self.stop_server)
        port = int(self.proc.stdout.readline())  # printed once it listens
        self.env = clean_env(AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}", AWS_NO_SIGN_REQUEST="true",
                             HOME=self.path("home"), NO_GCE_CHECK="true")
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
            self.env.pop(k, None)

    def stop_server(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()

    def on_bucket(self, *args):
        return run(*args, env=self.env)

    def test_parts_over_a_bucket_prefix(self):
        src = self.sample("s", 900, 6)
        shutil.copytree(self.path("s"), os.path.join(self.served, "b", "data"))
        url = "s3://b/data"
        whole = json.loads(self.on_bucket("count", "--json", url).stdout)
        self.assertEqual(whole["records"], 900)
        counted = 0
        for k in range(4):
            r = self.on_bucket("count", "--json", url, "--part", f"{k}/4")
            self.assertEqual(r.returncode, 0, r.stderr)
            counted += json.loads(r.stdout)["records"]
        self.assertEqual(counted, 900)
        # The same bucket as gs:// (Cloud Storage's XML API, anonymous):
        # verify parts add up too.
        gs_env = dict(self.env, STORAGE_EMULATOR_HOST=self.env["AWS_ENDPOINT_URL"][len("http://"):])
        verified = 0
        for k in range(3):
            r = run("verify", "--json", "gs://b/data", "--part", f"{k}/3", env=gs_env)
            self.assertEqual(r.returncode, 0, r.stderr)
            verified += json.loads(r.stdout)["records"]
        self.assertEqual(verified, 900)
        # index --beside --part: each part PUTs its shards' <key>.tfri into
        # the bucket; together every shard's, once.
        data = os.path.join(self.served, "b", "data")
        for k in range(3):
            r = self.on_bucket("index", "--beside", url, "--part", f"{k}/3", "-q")
            self.assertEqual(r.returncode, 0, r.stderr)
            indexed = sorted(f for f in os.listdir(data) if f.endswith(".tfri"))
            self.assertTrue(len(indexed) <= 6, indexed)
        self.assertEqual(sorted(f for f in os.listdir(data) if f.endswith(".tfri")),
                         sorted(os.path.basename(p) + ".tfri" for p in src))
        with open(self.path("server.log")) as f:
            puts = [line for line in f if line.startswith("PUT ") and ".tfri" in line]
        self.assertEqual(len(puts), 6, puts)
        # A shuffle of the bucket's shards in 3 parts: the bytes one process
        # writes from a local copy of the same shards (the order depends on
        # the shards' paths below the SOURCE, not on where they are).
        args = ("reshard", url, "-o", self.path("o"), "--shuffle", "--seed", "8", "--shards", "4",
                "-q")
        for p in ("map", "reduce"):
            for k in range(3):
                r = self.on_bucket(*args, "--part", f"{k}/3", "--pass", p)
                self.assertEqual(r.returncode, 0, r.stderr)
        # An object replaced (same size, other bytes: a new ETag) between
        # the parts and --finalize: named.
        victim = os.path.join(self.served, "b", "data", os.path.basename(src[2]))
        with open(victim, "r+b") as f:
            data = f.read()
            f.seek(0)
            f.write(data[::-1])
        os.utime(victim, ns=(1, 10**18))
        r = self.on_bucket(*args, "--finalize")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("has another ETag", r.stderr)
        self.assertIn(os.path.basename(src[2]), r.stderr)
        shutil.copy(src[2], victim)  # back, with yet another ETag: still stale
        r = self.on_bucket(*args, "--finalize")
        self.assertEqual(r.returncode, 1, r.stderr)
        # Run again over the restored bucket: finalized, one process's bytes.
        shutil.rmtree(self.path("o"))
        for p in ("map", "reduce"):
            for k in range(3):
                self.assertEqual(self.on_bucket(*args, "--part", f"{k}/3", "--pass", p).returncode, 0)
        r = self.on_bucket(*args, "--finalize")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run("reshard", self.path("s"), "-o", self.path("one"), "--shuffle", "--seed", "8",
                "--shards", "4", "-q")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertSameTree(self.path("one"), self.path("o"))
        self.assertEqual(sorted(all_records(shards_in(self.path("o")))), sorted(all_records(src)))

    def bucket_files(self, prefix):
        """The objects under s3://b/PREFIX (the server keeps them as files),
        relative to it, sorted."""
        top = os.path.join(self.served, "b", prefix)
        return sorted(os.path.relpath(os.path.join(d, f), top)
                      for d, _, fs in os.walk(top) for f in fs)

    def assertSameObjects(self, local, prefix):
        """The objects under s3://b/PREFIX are the files of `local`, byte
        for byte (the server's empty folders aside)."""
        self.assertEqual(self.bucket_files(prefix), sorted(os.listdir(local)))
        for name in os.listdir(local):
            self.assertTrue(filecmp.cmp(os.path.join(local, name),
                                        os.path.join(self.served, "b", prefix, name),
                                        shallow=False), name)

    def get_bytes(self):
        """GetObject bytes the server has answered so far (--stats)."""
        with open(self.path("stats.json")) as f:
            return json.load(f).get("GetObject", {}).get("bytes_out", 0)

    def test_reshard_parts_write_into_a_bucket_prefix(self):
        # Restarted with --stats: what crossed the network.
        self.stop_server()
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", SERVER, "--root", self.served, "--log", self.path("server.log"),
             "--max-requests", "100000", "--stats", self.path("stats.json")],
            stdout=subprocess.PIPE, text=True)
        port = int(self.proc.stdout.readline())
        self.env["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{port}"
        src = self.sample("s", 6000, 6)
        shutil.copytree(self.path("s"), os.path.join(self.served, "b", "data"))
        url = "s3://b/data"
        final = [f"data-{i:05d}-of-00004.tfrecord" for i in range(4)]
        # One process into the bucket: each shard one object under its name;
        # run again, refused (never replaced).
        args = ("reshard", url, "-o", "s3://b/single/", "--shards", "4", "-q")
        r = self.on_bucket(*args)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.bucket_files("single"), final)
        r = self.on_bucket(*args)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("already exists", r.stderr)
        self.assertTrue(run("reshard", self.path("s"), "-o", self.path("one"), "--shards", "4",
                            "-q").returncode == 0)
        self.assertSameObjects(self.path("one"), "single")

        # In source order as 3 parts: parts 0 and 1, then --finalize refuses
        # naming part 2 and puts nothing under a final name.
        args = ("reshard", url, "-o", "s3://b/out/", "--shards", "4", "-q")
        for k in (0, 1):
            r = self.on_bucket(*args, "--part", f"{k}/3")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("s3://b/out/.tfrecordfs-parts/", r.stdout)
        r = self.on_bucket(*args, "--finalize")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("missing: part(s) 2 of 3", r.stderr)
        self.assertFalse([f for f in self.bucket_files("out") if not f.startswith(".")])
        # Part 2, and part 1 again (a retried pod): its objects put again,
        # the same bytes; then --finalize copies them to their final names
        # and removes every intermediate object.
        for k in (2, 1):
            r = self.on_bucket(*args, "--part", f"{k}/3")
            self.assertEqual(r.returncode, 0, r.stderr)
        r = self.on_bucket(*args, "--finalize")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("6000\ttotal: 4 file(s) from 3 part(s)", r.stdout)
        self.assertEqual(self.bucket_files("out"), final)
        self.assertSameObjects(self.path("one"), "out")
        out = [os.path.join(self.served, "b", "out", f) for f in final]
        self.assertEqual(all_records(out), all_records(src))
        # Finalized already: nothing left to finalize.
        self.assertEqual(self.on_bucket(*args, "--finalize").returncode, 1)
        # repair writes folders only: a bucket --output is a usage error.
        r = self.on_bucket("repair", url, "-o", "s3://b/rep/", "--part", "0/2")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("not a bucket", r.stderr)

        # A shuffle as 3 parts into the bucket, the map's runs in 4 buckets
        # (--memory 1M): one process's bytes. Each reduce part fetches only
        # its buckets' bytes of the runs: the reduce pass reads about the
        # runs' size once, not once per part.
        args = ("reshard", url, "-o", "s3://b/sh", "--shuffle", "--seed", "8", "--shards", "4",
                "--memory", "1M", "-q")
        for k in range(3):
            r = self.on_bucket(*args, "--part", f"{k}/3", "--pass", "map")
            self.assertEqual(r.returncode, 0, r.stderr)
        runs = sum(os.path.getsize(os.path.join(self.served, "b", "sh", f))
                   for f in self.bucket_files("sh")
                   if os.path.basename(f).startswith("run-") and not f.endswith(".idx"))
        before = self.get_bytes()
        for k in range(3):
            r = self.on_bucket(*args, "--part", f"{k}/3", "--pass", "reduce")
            self.assertEqual(r.returncode, 0, r.stderr)
        fetched = self.get_bytes() - before
        print(f"reduce fetched {fetched} bytes of runs of {runs}", file=sys.stderr)
        self.assertGreater(fetched, runs * 0.9)
        self.assertLess(fetched, runs * 1.6, (fetched, runs))
        r = self.on_bucket(*args, "--finalize")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.bucket_files("sh"), final)
        r = run("reshard", self.path("s"), "-o", self.path("one-shuffled"), "--shuffle", "--seed",
                "8", "--shards", "4", "-q")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertSameObjects(self.path("one-shuffled"), "sh")
        shuffled = [os.path.join(self.served, "b", "sh", f) for f in final]
        self.assertEqual(sorted(all_records(shuffled)), sorted(all_records(src)))
        self.assertNotEqual(all_records(shuffled), all_records(src))

    def test_finalize_in_a_bucket_writes_the_splits_shard_lengths(self):
        info = tfds_dataset(self, os.path.join(self.served, "b", "mnist"))
        url = "s3://b/mnist/"
        train = [url + f for f in sorted(os.listdir(os.path.join(self.served, "b", "mnist")))
                 if f.startswith("mnist-train.")]
        args = ("reshard", *train, "-o", "s3://b/o/", "--prefix", "mnist-train.tfrecord",
                "--shards", "4", "-q")
        for k in range(2):
            r = self.on_bucket(*args, "--part", f"{k}/2")
            self.assertEqual(r.returncode, 0, r.stderr)
        r = self.on_bucket(*args, "--finalize")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.bucket_files("o"), ["dataset_info.json"] + [
            f"mnist-train.tfrecord-{i:05d}-of-00004" for i in range(4)])
        got = TfdsInfo.check_split(self, os.path.join(self.served, "b", "o"), info, "train", 4)
        self.assertEqual([s["name"] for s in got["splits"]], ["train"])

    def test_a_finalize_cut_after_its_journal_is_finished_when_run_again(self):
        src = self.sample("s", 800, 4)
        shutil.copytree(self.path("s"), os.path.join(self.served, "b", "data"))
        args = ("reshard", "s3://b/data", "-o", "s3://b/out/", "--shards", "4", "-q")
        for k in range(2):
            r = self.on_bucket(*args, "--part", f"{k}/2")
            self.assertEqual(r.returncode, 0, r.stderr)
        final = [f"data-{i:05d}-of-00004.tfrecord" for i in range(4)]
        out = os.path.join(self.served, "b", "out")
        # A server that stops after K requests, K growing until the
        # finalize is cut after its journal was put and some output was
        # copied (before that, a cut finalize has changed nothing).
        cut = False
        for k in range(5, 80):
            self.stop_server()
            self.proc = subprocess.Popen(
                ["/usr/bin/python3", SERVER, "--root", self.served, "--max-requests", str(k)],
                stdout=subprocess.PIPE, text=True)
            self.env["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{int(self.proc.stdout.readline())}"
            r = self.on_bucket(*args, "--finalize")
            self.assertNotEqual(r.returncode, 0, f"K={k}: finalized before being cut")
            copied = [f for f in final if os.path.exists(os.path.join(out, f))]
            if copied:
                self.assertLess(len(copied), 4, f"K={k}: {r.stderr}")
                cut = True
                break
            # Cut before its journal: nothing under a final name.
            self.assertFalse(copied)
        self.assertTrue(cut)
        self.assertTrue(any(f.endswith(".finalizing") for f in os.listdir(
            os.path.join(out, ".tfrecordfs-parts"))))
        self.stop_server()
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", SERVER, "--root", self.served], stdout=subprocess.PIPE, text=True)
        self.env["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{int(self.proc.stdout.readline())}"
        r = self.on_bucket(*args, "--finalize")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.bucket_files("out"), final)
        self.assertEqual(all_records([os.path.join(out, f) for f in final]), all_records(src))

    def test_parts_write_into_a_gs_prefix(self):
        src = self.sample("s", 500, 4)
        shutil.copytree(self.path("s"), os.path.join(self.served, "b", "data"))
        gs_env = dict(self.env, STORAGE_EMULATOR_HOST=self.env["AWS_ENDPOINT_URL"][len("http://"):])
        args = ("reshard", "gs://b/data", "-o", "gs://b/g/", "--shards", "3", "-q")
        for k in range(2):
            r = run(*args, "--part", f"{k}/2", env=gs_env)
            self.assertEqual(r.returncode, 0, r.stderr)
        r = run(*args, "--finalize", env=gs_env)
        self.assertEqual(r.returncode, 0, r.stderr)
        final = [f"data-{i:05d}-of-00003.tfrecord" for i in range(3)]
        self.assertEqual(self.bucket_files("g"), final)
        self.assertEqual(all_records([os.path.join(self.served, "b", "g", f) for f in final]),
                         all_records(src))


if __name__ == "__main__":
    unittest.main(verbosity=2)
