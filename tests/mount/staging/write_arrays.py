"""Writes records of arrays into MNT/staging/ with numpy and PIL, as a user would.

usage: write_arrays.py STAGING_DIR MANIFEST

Each record folder gets `.png` files written by PIL (zlib-compressed, PIL's own
filter choice; a palette image too) and `.npy` files written by np.save, named
after features of `tfrecordfs-gen tensors`. MANIFEST gets one line per array:
    <record> <feature> <item|-> <numpy descr> <shape|scalar> <hex bytes|->
the array the pack must store (for a palette PNG: the RGB pixels).
"""
import os
import sys

import numpy as np
from PIL import Image

staging, manifest_path = sys.argv[1], sys.argv[2]
lines = []
rng = np.random.default_rng(7)


def shape_text(a):
    return ",".join(str(d) for d in a.shape) or "scalar"


def note(record, feature, item, array):
    data = np.ascontiguousarray(array).tobytes()
    lines.append(" ".join([record, feature, item, array.dtype.str, shape_text(array),
                           data.hex() or "-"]))


def png(record, feature, array, mode=None, expect=None, item=None):
    rel = feature + (f"/{item}.png" if item is not None else ".png")
    path = os.path.join(staging, record, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    img = Image.fromarray(array if array.ndim == 2 or array.shape[2] != 1 else array[:, :, 0],
                          mode)
    img.save(path)
    note(record, feature, "-" if item is None else str(item), array if expect is None else expect)


def npy(record, feature, array, item=None):
    rel = feature + (f"/{item}.npy" if item is not None else ".npy")
    path = os.path.join(staging, record, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, array)
    note(record, feature, "-" if item is None else str(item), array)


def u8(*shape):
    return rng.integers(0, 256, size=shape, dtype=np.uint8)


# Record "np": every class of feature the generator has.
r = "np"
png(r, "image/rgb", u8(5, 7, 3))
png(r, "image/rgba", u8(3, 4, 4))
png(r, "image/gray", u8(4, 6))                        # [H,W] stays rank 2
png(r, "image/gray1", u8(4, 6, 1))                    # [H,W,1] stays rank 3
png(r, "image/gray_alpha", u8(2, 3, 2), mode="LA")
png(r, "image/depth16", rng.integers(0, 65536, size=(3, 5), dtype=np.uint16))
npy(r, "image/rgb16", rng.integers(0, 65536, size=(2, 3, 3), dtype=np.uint16))
npy(r, "arr/f32", rng.standard_normal((3, 4)).astype(np.float32))
npy(r, "arr/f64", rng.standard_normal(4))
npy(r, "arr/f16", rng.standard_normal(5).astype(np.float16))
npy(r, "arr/i8", rng.integers(-128, 128, size=(2, 2), dtype=np.int8))
npy(r, "arr/i16", rng.integers(-9, 9, size=3, dtype=np.int16))
npy(r, "arr/i32", rng.integers(-9, 9, size=(1, 1, 2), dtype=np.int32))
npy(r, "arr/i64", np.array([-1, 2**40], dtype=np.int64))
npy(r, "arr/u32", np.array([2**32 - 1], dtype=np.uint32))
npy(r, "arr/u64", np.array([2**64 - 1, 0], dtype=np.uint64))
npy(r, "arr/bool", np.array([True, False, True]))
npy(r, "arr/scalar", np.float32(2.5) * np.ones((), np.float32))
npy(r, "arr/zero_size", np.zeros((0, 3), np.int32))
npy(r, "arr/u8_rank1", u8(9))
npy(r, "arr/u8_5ch", u8(1, 2, 5))
npy(r, "arr/u16_zero_w", np.zeros((3, 0), np.uint16))
png(r, "frames", u8(4, 5, 3), item=0)
npy(r, "frames", np.arange(3, dtype=np.float32), item=1)
with open(os.path.join(staging, r, "label"), "w") as f:
    f.write("7\n")

# Record "pal": a palette PNG (expanded to RGB) and a Fortran-ordered 1-d array.
r = "pal"
rgb = np.zeros((4, 4, 3), np.uint8)
rgb[:2] = (255, 0, 0)
rgb[2:] = (0, 0, 255)
path = os.path.join(staging, r, "image", "rgb.png")
os.makedirs(os.path.dirname(path))
Image.fromarray(rgb).convert("P", palette=Image.ADAPTIVE, colors=4).save(path)
note(r, "image/rgb", "-", np.array(Image.open(path).convert("RGB")))
npy(r, "arr/f64", np.asfortranarray(np.arange(3, dtype=np.float64)))

with open(manifest_path, "w") as f:
    f.write("\n".join(lines) + "\n")
print("wrote", len(lines), "arrays")
