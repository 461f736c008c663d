"""Writes the inputs of test_security_counts into the folder given: small good files (N = 48, and N = 64 for
grids), and a 2 KB file whose header claims two billion heads (chunked, never written: HDF5 stores only the
header)."""
import os
import sys

import h5py
import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(11)
with h5py.File(os.path.join(out, "good.h5"), "w") as f:
    f["q"] = rng.normal(size=(2, 48, 8))
    f["k"] = rng.normal(size=(2, 48, 8))
with h5py.File(os.path.join(out, "grid64.h5"), "w") as f:   # N = 64: what 17 x 4340410370284600384 wraps to
    f["q"] = rng.normal(size=(1, 64, 8))
    f["k"] = rng.normal(size=(1, 64, 8))
with h5py.File(os.path.join(out, "huge_heads.h5"), "w") as f:
    for name in ("q", "k"):
        f.create_dataset(name, shape=(2000000000, 8, 4), chunks=(1, 8, 4), dtype="f4")
