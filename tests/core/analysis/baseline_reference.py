"""Known answers for test_baseline_cache.cpp: the causal averaging baseline A0 (softmax's and linear attention's
on the causal mask, tests/reference/attnref.py baseline_matrix) by NumPy's dense SVD, with section 2's rank rule
(numpy.linalg.matrix_rank's tolerance s_1 * max(rows, cols) * eps) and the ranks at the fixed relative tolerances.
usage: baseline_reference.py OUT.json N [N ...]"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
import attnref  # noqa: E402

RTOLS = [1e-2, 1e-3, 1e-4, 1e-6, 1e-8, 1e-10, 1e-12]


def main():
    out, sizes = sys.argv[1], [int(a) for a in sys.argv[2:]]
    cases = []
    for n in sizes:
        A0 = attnref.baseline_matrix("softmax", n, causal=True)
        assert np.allclose(A0, attnref.baseline_matrix("linear", n, causal=True), rtol=0, atol=1e-15)
        s = np.linalg.svd(A0, compute_uv=False)
        sp = attnref.spectrum(A0)
        cases.append(dict(n=n, singular_values=[float(v) for v in s], rank=int(np.linalg.matrix_rank(A0)),
                          spectrum_rank=sp["rank"], effective_rank=sp["effective_rank"],
                          rank_at_rtol=[int(np.sum(s > r * s[0])) for r in RTOLS]))
    with open(out, "w") as f:
        json.dump(cases, f)


if __name__ == "__main__":
    main()
