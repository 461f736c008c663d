"""Known answers for tests/core/metrics: matrices and their docs/maths.md section 2 metrics by NumPy
(numpy.linalg.svd through tests/reference/attnref.py).

    python3 make_metric_cases.py OUT_DIR   -> OUT_DIR/metrics.json + one .npy per matrix
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
import attnref  # noqa: E402


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(8)
    cases = []

    def add(name, A, allowed=None, rank_rtol=None):
        A = np.ascontiguousarray(A, dtype=np.float64)
        np.save(os.path.join(out, name + ".npy"), A)
        rows, cols = A.shape
        c = dict(name=name, file=name + ".npy", rows=rows, cols=cols, rank_rtol=rank_rtol,
                 spectrum=attnref.spectrum(A, rank_rtol))
        if A.min() >= 0 and rows > 0:
            if allowed is None:
                allowed = np.full(rows, cols)
            stats, H = attnref.entropy_stats(A, allowed)
            c.update(allowed=[int(x) for x in allowed], entropy=stats, row_entropy=[float(h) for h in H])
        cases.append(c)

    def stochastic(n, m, sharp=1.0):
        E = np.exp(sharp * rng.standard_normal((n, m)))
        return E / E.sum(axis=1, keepdims=True)

    add("gauss_50", rng.standard_normal((50, 50)))
    add("gauss_30x50", rng.standard_normal((30, 50)))
    add("gauss_50x30", rng.standard_normal((50, 30)))
    add("gauss_rtol", rng.standard_normal((40, 40)), rank_rtol=0.1)
    add("gauss_rtol_zero", rng.standard_normal((10, 10)), rank_rtol=0.0)
    add("lowrank_5", rng.standard_normal((40, 5)) @ rng.standard_normal((5, 40)))
    add("lowrank_exact_zero_rows", np.vstack([rng.standard_normal((6, 20)), np.zeros((14, 20))]))
    add("zeros", np.zeros((12, 12)))
    add("one_by_one", np.array([[2.5]]))
    add("stochastic_64", stochastic(64, 64))
    add("stochastic_sharp", stochastic(64, 64, sharp=6.0))
    add("identity_16", np.eye(16))
    add("uniform_rows", np.full((20, 20), 1.0 / 20))
    causal = np.tril(stochastic(30, 30))
    causal /= causal.sum(axis=1, keepdims=True)
    add("causal_30", causal, allowed=np.arange(1, 31))
    A = stochastic(25, 25)
    A[A < 0.03] = 0.0                      # exact zeros: 0 ln 0 = 0
    add("sparse_rows", A, allowed=rng.integers(1, 26, size=25))
    add("graded", np.diag(10.0 ** -np.arange(12)))   # singular values across 11 decades

    with open(os.path.join(out, "metrics.json"), "w") as f:
        json.dump(cases, f)


if __name__ == "__main__":
    main()
