"""Fixtures for the main-window tests: written with NumPy / h5py, independent of AttnScope's writers.

usage: make_window_fixtures.py OUT_DIR
  nested.h5   /layers/{0,1}/{q,k,v} float32 [2, 17, 8] (N = 17 = 4*4 + 1: one prefix token), a string
              dataset /meta/names (skipped), dataset and root attributes
  mismatch.h5 /q [2, 16, 8] and /k [2, 16, 6] (d differs: the core must refuse)
  named.npz   members query_states, key_states, other
  q.npy, k.npy float64 [16, 8]
  bad.h5      not an HDF5 file
  bad_attrs.h5 /q, /k float64 [16, 8] with prefix_tokens = -3 and causal = 1 on the root (the first cannot be
              used: the window must say so, not ignore it)
"""
import sys, os
import numpy as np
import h5py

out = sys.argv[1]
rng = np.random.default_rng(7)
with h5py.File(os.path.join(out, "nested.h5"), "w") as f:
    f.attrs["kind"] = "test"
    for layer in range(2):
        for name in "qkv":
            d = f.create_dataset(f"/layers/{layer}/{name}", data=rng.standard_normal((2, 17, 8)).astype(np.float32))
            d.attrs["layer"] = layer
    f.create_dataset("/meta/names", data=np.array([b"a", b"b"], dtype=h5py.string_dtype()))
with h5py.File(os.path.join(out, "mismatch.h5"), "w") as f:
    f["q"] = rng.standard_normal((2, 16, 8))
    f["k"] = rng.standard_normal((2, 16, 6))
np.savez(os.path.join(out, "named.npz"), query_states=rng.standard_normal((16, 8)),
         key_states=rng.standard_normal((16, 8)), other=rng.standard_normal((3, 3)))
np.save(os.path.join(out, "q.npy"), rng.standard_normal((16, 8)))
np.save(os.path.join(out, "k.npy"), rng.standard_normal((16, 8)))
with open(os.path.join(out, "bad.h5"), "wb") as f:
    f.write(b"this is not an HDF5 file" * 10)
with h5py.File(os.path.join(out, "bad_attrs.h5"), "w") as f:
    f["q"] = rng.standard_normal((16, 8))
    f["k"] = rng.standard_normal((16, 8))
    f.attrs["prefix_tokens"] = -3
    f.attrs["causal"] = 1
