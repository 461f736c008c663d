"""Spectra that never fail on finite matrices (issue 30): queries scaled up to 1e6 (logits up to ~1e12, as attention
sinks give) make softmax rows one-hot with entries down to the subnormal range, and every mechanism's spectrum must
still come back, equal to NumPy's SVD of the reference matrix (tests/reference/attnref.py) to 1e-10 of s_1, with the
rank NumPy's matrix_rank gives, and LAPACK's own messages never on the terminal. Both dense paths: dgesdd (N = 64) and
the two-stage reduction (N = 600 >= 512); causal and not; --method dense for the kernel mechanisms too.
usage: check_large_logits.py ATTNSCOPE WORKDIR"""
import json
import os
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import attnref  # noqa: E402
import cli_checks  # noqa: E402

binary, work = sys.argv[1], sys.argv[2]
problems = []
rng = np.random.default_rng(30)
checked = 0
for n, d in ((64, 8), (600, 8)):
    for scale in (3e4, 1e5, 1e6):
        if n == 600 and scale == 1e5:
            continue   # the two-stage path: two scales are enough (each run is a few seconds)
        q = rng.standard_normal((n, d)) * scale
        k = rng.standard_normal((n, d))
        path = os.path.join(work, f"logits_{n}_{scale:g}.h5")
        with h5py.File(path, "w") as f:
            f["q"] = q
            f["k"] = k
        for causal in (False, True):
            args = ["analyze", "--q", path + ":/q", "--k", path + ":/k", "--mechanism", "softmax,linear,mhla",
                    "--method", "dense", "--json", "-"]
            if causal:
                args += ["--causal"]
            p = subprocess.run([binary] + args, capture_output=True, text=True)
            label = f"N={n} scale={scale:g} causal={causal}"
            if p.returncode != 0:
                problems.append(f"{label}: exit {p.returncode}: {p.stderr.strip()}")
                continue
            if "DLASCL" in p.stderr or "** On entry" in p.stderr or "illegal" in p.stderr:
                problems.append(f"{label}: LAPACK's message reached the terminal: {p.stderr.strip()}")
            doc = json.loads(p.stdout)
            for r in doc["results"]:
                mech = r["mechanism"]
                sv = r.get("singular_values")
                if sv is None:
                    problems.append(f"{label} {mech}: no spectrum ({r.get('warnings')})")
                    continue
                A = attnref.attention_matrix(mech, q, k, causal=causal)
                ref = np.linalg.svd(A, compute_uv=False)
                got = np.asarray(sv, dtype=np.float64)
                if got.shape != ref.shape:
                    problems.append(f"{label} {mech}: {got.size} singular values, NumPy {ref.size}")
                    continue
                err = np.max(np.abs(got - ref)) / ref[0]
                if not err <= 1e-10:
                    problems.append(f"{label} {mech}: singular values differ from NumPy's by {err:.3g} of s_1")
                rank = int(np.linalg.matrix_rank(A))
                if r["rank"] != rank:
                    problems.append(f"{label} {mech}: rank {r['rank']}, NumPy's matrix_rank {rank}")
                checked += 1
print(f"{checked} spectra checked against NumPy")
if checked < 30:
    problems.append(f"only {checked} spectra were compared (expected 30)")
cli_checks.report(problems)
