"""Writes the input files of test_cli_errors (good and hostile) into the folder given."""
import os
import sys

import h5py
import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(7)
q = rng.normal(size=(2, 48, 8))
k = rng.normal(size=(2, 48, 8))
with h5py.File(os.path.join(out, "good.h5"), "w") as f:
    f["q"] = q
    f["k"] = k
with h5py.File(os.path.join(out, "k47.h5"), "w") as f:
    f["k"] = k[:, :47]
    f["k6"] = k[:, :, :6]
bad = q.copy()
bad[1, 3, 2] = np.nan
with h5py.File(os.path.join(out, "nan.h5"), "w") as f:
    f["q"] = bad
    inf = q.copy()
    inf[0, 5, 1] = -np.inf
    f["qinf"] = inf
    f["text"] = np.array([b"not", b"numbers"])
np.save(os.path.join(out, "q.npy"), q[0])
raw = open(os.path.join(out, "q.npy"), "rb").read()
open(os.path.join(out, "trunc.npy"), "wb").write(raw[: len(raw) - 100])
header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000, 1000000), }"
header = header + " " * (63 - (10 + len(header)) % 64) + "\n"
open(os.path.join(out, "huge.npy"), "wb").write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + b"\0" * 64)
np.savez_compressed(os.path.join(out, "good.npz"), q=q, k=k)
z = bytearray(open(os.path.join(out, "good.npz"), "rb").read())
for i in range(200, min(len(z) - 200, 1200)):
    z[i] ^= 0x5A
open(os.path.join(out, "corrupt.npz"), "wb").write(bytes(z))
open(os.path.join(out, "model.pt"), "wb").write(b"\x80\x02}q\x00.")
open(os.path.join(out, "empty.h5"), "wb").write(b"")
open(os.path.join(out, "garbage.h5"), "wb").write(os.urandom(4096))
np.save(os.path.join(out, "mix_3x4.npy"), np.ones((3, 4)))
np.save(os.path.join(out, "mix_zero_4.npy"), np.zeros((4, 4)))
m = np.ones((4, 4))
m[1, 2] = -0.5
np.save(os.path.join(out, "mix_neg.npy"), m)
np.save(os.path.join(out, "cplx.npy"), (q[0] + 1j * q[0]).astype(np.complex64))
