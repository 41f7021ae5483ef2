"""Tries to write a mounted record's files the ways Python programs do.

Usage: write_records.py NPY TEXT

NPY is a record's .npy view of a tensor feature, TEXT any other feature
file of a record. Each attempt must be refused with an OSError; one that
is not goes on to change the file as a careless program would (through a
shared writable mapping, which only reaches the page cache). Prints one
line per attempt ("refused: ERRNO" or "ALLOWED") and exits with the number
of attempts that were not refused. Run by record_writes_test.cc with the
/usr/bin/python3 that has numpy.
"""

import errno
import mmap
import os
import sys

import numpy as np


def main():
    npy, text = sys.argv[1], sys.argv[2]
    allowed = 0

    def attempt(what, get, change):
        """get() must be refused with an OSError; what it gives is changed."""
        nonlocal allowed
        try:
            got = get()
        except OSError as e:
            print(f"{what}: refused: {errno.errorcode.get(e.errno, e.errno)}")
            return
        except Exception as e:  # e.g. numpy on a file an earlier attempt changed
            print(f"{what}: failed otherwise: {e!r}")
            allowed += 1
            return
        allowed += 1
        try:
            change(got)
            print(f"{what}: ALLOWED")
        except OSError as e:  # msync's EROFS comes after the page cache changed
            print(f"{what}: ALLOWED, then {errno.errorcode.get(e.errno, e.errno)}")

    def shared_writable_map(fd):
        try:
            return mmap.mmap(fd, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)

    def scribble(m, at, byte):
        at %= len(m)
        m[at:at + 1] = byte
        m.flush()

    # np.load(mmap_mode="r+") opens the file O_RDWR and maps it shared.
    def write_42(a):
        a[...] = 42
        a.flush()

    attempt("np.load mmap_mode=r+", lambda: np.load(npy, mmap_mode="r+"), write_42)
    attempt("open O_RDWR text", lambda: shared_writable_map(os.open(text, os.O_RDWR)),
            lambda m: scribble(m, 0, b"X"))
    attempt("open O_RDWR npy", lambda: shared_writable_map(os.open(npy, os.O_RDWR)),
            lambda m: scribble(m, 0, b"X"))
    attempt("mmap MAP_SHARED PROT_WRITE of an O_RDONLY descriptor",
            lambda: shared_writable_map(os.open(npy, os.O_RDONLY)),
            lambda m: scribble(m, -1, b"\x7f"))
    return allowed


if __name__ == "__main__":
    sys.exit(main())
