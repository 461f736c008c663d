"""Known answers for test_randomized.cpp: matrices and numpy.linalg.matrix_rank at a given tolerance.

    python3 make_randomized_cases.py make OUT_DIR        -> OUT_DIR/{q,k,softmax,lowrank}.npy
    python3 make_randomized_cases.py rank FILE.npy TOL OUT.json   -> {"rank": matrix_rank(A, TOL), "s": [...]}

softmax.npy is attnref's softmax attention of q.npy, k.npy (the C++ test builds its operator from q, k);
lowrank.npy is U diag(s) V^T of rank 15 plus Gaussian noise of spectral norm about 1e-9.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
import attnref  # noqa: E402


def make(out):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20110517)
    n, d = 320, 6
    Q = rng.standard_normal((n, d))
    K = rng.standard_normal((n, d))
    np.save(os.path.join(out, "q.npy"), Q)
    np.save(os.path.join(out, "k.npy"), K)
    np.save(os.path.join(out, "softmax.npy"), attnref.softmax_attention(Q, K))
    n, r = 250, 15
    U, _ = np.linalg.qr(rng.standard_normal((n, r)))
    V, _ = np.linalg.qr(rng.standard_normal((n, r)))
    s = np.logspace(0, -3, r)
    A = (U * s) @ V.T + 1e-9 / (2 * np.sqrt(n)) * rng.standard_normal((n, n))
    np.save(os.path.join(out, "lowrank.npy"), A)


def rank(path, tol, out):
    A = np.load(path)
    with open(out, "w") as f:
        json.dump({"rank": int(np.linalg.matrix_rank(A, tol=tol)),
                   "s": np.linalg.svd(A, compute_uv=False).tolist()}, f)


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        rank(sys.argv[2], float(sys.argv[3]), sys.argv[4])
