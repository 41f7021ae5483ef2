#!/usr/bin/python3
"""scripts/bench --bucket-edit-only: a one-label fix in one large object of an
s3:// bucket (issue 39), three ways, against tests/objstore/object_server.py
on 127.0.0.1 (its --stats counts the bytes of each request kind):

  edit      a read-write mount of the bucket, `echo N > REC/label`, then
            `tfrecordfs unmount` (the commit rewrites the object in place:
            unchanged ranges UploadPartCopy, the edited range uploaded,
            conditional complete); timed from the unmount to its answer;
  copy      a server-side copy of the whole object (a multipart upload of
            UploadPartCopy parts of 64 MiB, what `aws s3 cp s3://.. s3://..`
            sends for a large object): the floor for any rewrite in place;
  baseline  what users do without tfrecordfs: download the object (GET),
            change the record with a script (the records re-framed by
            Python), upload it again (multipart, 8 MiB parts).

Prints a markdown table: seconds (median of --runs) and bytes that crossed
the network (request and response bodies; server-side copies apart).
Usage: bench_bucket_edit.py TFRECORDFS_BIN GEN WORKDIR [--mb N] [--runs N]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "cli"))
import tfrecord_check as tc  # noqa: E402

PART = 8 << 20


class Server:
    def __init__(self, root, stats):
        self.stats = stats
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", os.path.join(HERE, "..", "tests", "objstore", "object_server.py"),
             "--root", root, "--stats", stats, "--max-put", str(1 << 30)],
            stdout=subprocess.PIPE, text=True)
        self.url = "http://127.0.0.1:%s" % self.proc.stdout.readline().strip()

    def totals(self):
        if not os.path.exists(self.stats):
            return 0, 0, 0
        with open(self.stats) as f:
            c = json.load(f)
        net = sum(v["bytes_in"] + v["bytes_out"] for v in c.values())
        copied = sum(v["bytes_copied"] for v in c.values())
        requests = sum(v["requests"] for v in c.values())
        return net, copied, requests

    def reset(self):
        # The server's counters only grow: what follows is counted from here.
        self.base = self.totals()

    def counted(self):
        return tuple(x - y for x, y in zip(self.totals(), self.base))

    def request(self, method, path, body=None, headers=None):
        req = urllib.request.Request(self.url + path, data=body, method=method,
                                     headers=headers or {})
        with urllib.request.urlopen(req) as r:
            return r.read(), dict(r.headers)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def record_at(path, index):
    """The payload of record `index` of a plain shard (framing followed,
    CRCs not checked: the pure-Python CRC would take minutes here)."""
    with open(path, "rb") as f:
        pos = 0
        for _ in range(index):
            f.seek(pos)
            pos += 16 + int.from_bytes(f.read(8), "little")
        f.seek(pos)
        n = int.from_bytes(f.read(8), "little")
        f.seek(pos + 12)
        return f.read(n)


def multipart(server, key, parts):
    """A multipart upload of `parts` (bytes, or (source key, first, last) to
    copy server-side)."""
    body, _ = server.request("POST", "/b/%s?uploads" % key)
    upload = body.decode().split("<UploadId>")[1].split("</UploadId>")[0]
    etags = []
    for n, p in enumerate(parts, 1):
        path = "/b/%s?partNumber=%d&uploadId=%s" % (key, n, upload)
        if isinstance(p, tuple):
            body, _ = server.request("PUT", path, b"", {
                "x-amz-copy-source": "b/" + p[0],
                "x-amz-copy-source-range": "bytes=%d-%d" % (p[1], p[2])})
            etags.append(body.decode().split("<ETag>")[1].split("</ETag>")[0]
                         .replace("&quot;", '"'))
        else:
            _, h = server.request("PUT", path, p)
            etags.append(h["ETag"])
    xml = "<CompleteMultipartUpload>%s</CompleteMultipartUpload>" % "".join(
        "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>" % (n, e.replace('"', "&quot;"))
        for n, e in enumerate(etags, 1))
    server.request("POST", "/b/%s?uploadId=%s" % (key, upload), xml.encode())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("bin")
    p.add_argument("gen")
    p.add_argument("work")
    p.add_argument("--mb", type=int, default=256)
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()
    work = os.path.join(a.work, "bucket-edit")
    shutil.rmtree(work, ignore_errors=True)
    data = os.path.join(work, "served", "b", "data")
    os.makedirs(data)
    records = max(a.mb * 10, 100)  # about 100 kB each
    subprocess.run([a.gen, "synthetic", data, "--records", str(records), "--shards", "1",
                    "--bytes", "100000", "--prefix", "big"], check=True, capture_output=True)
    name = os.listdir(data)[0]
    obj = os.path.join(data, name)
    pristine = os.path.join(work, "pristine")
    shutil.copy(obj, pristine)
    size = os.path.getsize(obj)
    server = Server(os.path.join(work, "served"), os.path.join(work, "stats.json"))
    env = dict(os.environ, AWS_ENDPOINT_URL=server.url, AWS_NO_SIGN_REQUEST="1",
               XDG_CACHE_HOME=os.path.join(work, "cache"), HOME=os.path.join(work, "home"))
    os.makedirs(env["HOME"])
    mnt = os.path.join(work, "mnt")
    os.makedirs(mnt)
    target = records // 2  # the record whose label is fixed
    rows = {"edit": [], "copy": [], "baseline": []}
    counts = {}
    try:
        for _ in range(a.runs):
            shutil.copy(pristine, obj)
            r = subprocess.run([a.bin, "s3://b/data/", mnt], env=env, capture_output=True,
                               text=True)
            assert r.returncode == 0, r.stderr
            width = len(str(records - 1))
            with open(os.path.join(mnt, name, str(target).zfill(width), "label"), "w") as f:
                f.write("7\n")
            server.reset()
            t = time.monotonic()
            r = subprocess.run([a.bin, "unmount", mnt], env=env, capture_output=True, text=True)
            rows["edit"].append(time.monotonic() - t)
            assert r.returncode == 0, r.stdout + r.stderr
            counts["edit"] = server.counted()
            edited = record_at(obj, target)

            shutil.copy(pristine, obj)
            server.reset()
            t = time.monotonic()
            step = 64 << 20
            multipart(server, "data/copy-of-" + name,
                      [("data/" + name, at, min(at + step, size) - 1)
                       for at in range(0, size, step)])
            rows["copy"].append(time.monotonic() - t)
            counts["copy"] = server.counted()
            os.unlink(os.path.join(data, "copy-of-" + name))

            server.reset()
            t = time.monotonic()
            raw, _ = server.request("GET", "/b/data/" + name)
            out = bytearray()
            pos = 0
            i = 0
            while pos < len(raw):  # the script: re-frame, one record replaced
                n = int.from_bytes(raw[pos:pos + 8], "little")
                out += tc.frame(edited) if i == target else raw[pos:pos + 16 + n]
                pos += 16 + n
                i += 1
            multipart(server, "data/" + name,
                      [bytes(out[at:at + PART]) for at in range(0, len(out), PART)])
            rows["baseline"].append(time.monotonic() - t)
            counts["baseline"] = server.counted()
    finally:
        subprocess.run([a.bin, "unmount", mnt], env=env, capture_output=True)
        server.stop()
    med = {k: statistics.median(v) for k, v in rows.items()}
    print("| one label fixed in a %d MB object (%d records) | seconds | vs server-side copy "
          "| bytes over the network | copied server-side | requests |" % (size // 1000000,
                                                                          records))
    print("|---|---|---|---|---|---|")
    for k, what in (("edit", "tfrecordfs (mount, echo, unmount: in-place rewrite)"),
                    ("copy", "server-side copy of the object (UploadPartCopy, 64 MiB parts)"),
                    ("baseline", "download + edit script + upload (8 MiB parts)")):
        net, copied, requests = counts[k]
        print("| %s | %.2f | %.2fx | %d | %d | %d |" % (what, med[k], med[k] / med["copy"], net,
                                                       copied, requests))
    print("\nbaseline / tfrecordfs: %.1fx the time, %.0fx the bytes over the network"
          % (med["baseline"] / med["edit"], counts["baseline"][0] / max(counts["edit"][0], 1)))


if __name__ == "__main__":
    main()
