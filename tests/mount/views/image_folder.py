#!/usr/bin/python3
"""What image code sees in a tfrecordfs image view (tests/mount/views).

  image_folder.py verify DIR        PIL opens and verifies every file under
                                    DIR; prints "<n> images"
  image_folder.py imagefolder ROOT  torchvision's ImageFolder, emulated (it
                                    is not installed): classes are the
                                    sorted folder names of ROOT, samples the
                                    files with an image extension in each
                                    (walked recursively, sorted), each opened
                                    with PIL; prints {"class": count} as JSON

Exit status 1 with the failures on stderr when a file does not open.
"""
import json
import os
import sys

from PIL import Image

# torchvision.datasets.folder.IMG_EXTENSIONS
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def verify(path, failures):
    try:
        with Image.open(path) as im:
            im.verify()
    except Exception as e:  # noqa: BLE001 - any failure is the test's finding
        failures.append(f"{path}: {e}")


def main():
    mode, root = sys.argv[1], sys.argv[2]
    failures = []
    if mode == "verify":
        n = 0
        for dirpath, _, files in os.walk(root):
            for f in sorted(files):
                verify(os.path.join(dirpath, f), failures)
                n += 1
        print(f"{n} images")
    elif mode == "imagefolder":
        classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
        counts = {}
        for c in classes:
            counts[c] = 0
            for dirpath, _, files in sorted(os.walk(os.path.join(root, c), followlinks=True)):
                for f in sorted(files):
                    if f.lower().endswith(IMG_EXTENSIONS):
                        verify(os.path.join(dirpath, f), failures)
                        counts[c] += 1
        print(json.dumps(counts, sort_keys=True))
    else:
        sys.exit(f"unknown mode {mode}")
    if failures:
        print("\n".join(failures), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
