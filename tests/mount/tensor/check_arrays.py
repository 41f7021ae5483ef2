# Checks every array file a `tfrecordfs-gen tensors` mount shows against the
# generator's MANIFEST.txt with numpy and PIL, independently of tfrecordfs:
#   check_arrays.py MOUNT MANIFEST SHARD_DIR_NAME
# Exit 0 when all match; prints each mismatch.
import sys, os, numpy as np
from PIL import Image
mnt, manifest, shard = sys.argv[1:4]
lines = open(manifest).read().split('\n')
recs = sorted({int(l.split()[0]) for l in lines if l})
width = len(str(max(recs)))
bad = 0; n = 0
for l in lines:
    if not l: continue
    r, rel, descr, shape, hx = l.split()
    path = os.path.join(mnt, shard, str(r).zfill(width), rel)
    want = bytes.fromhex(hx) if hx != '-' else b''
    dims = () if shape == 'scalar' else tuple(int(x) for x in shape.split(','))
    n += 1
    if rel.endswith('.npy'):
        a = np.load(path, allow_pickle=False)
        ok = a.dtype.str == descr and a.shape == dims and a.tobytes() == want
    else:
        im = Image.open(path); im.load()
        a = np.asarray(im)
        if descr == '<u2':
            # PIL reads 16-bit gray as I;16 (uint16) and 16-bit RGB as 8-bit: check what it can
            if a.dtype == np.uint16 or a.dtype == np.int32:
                a = a.astype('<u2')
                ok = a.reshape(-1).tobytes() == want and a.shape[:2] == dims[:2]
            else:
                ok = a.shape[:2] == dims[:2]
        else:
            ok = a.dtype == np.uint8 and a.reshape(-1).tobytes() == want and a.shape[:2] == dims[:2] and a.size == len(want)
    if not ok:
        bad += 1
        print('MISMATCH', path, getattr(a, 'dtype', None), getattr(a, 'shape', None))
print('checked', n, 'bad', bad)
sys.exit(1 if bad else 0)
