"""The semiseparable profile (`--past-splits all`, docs/maths.md 2.2) against the NumPy way of getting it: the SVD
of every block A[h:N, 0:h] of the formed matrix (formed outside the clock), in one run, as a ratio; the ranks of
every split must agree. Then AttnScope alone at N = 16384 (where NumPy's way is out of reach: 16383 SVDs of blocks
up to 8192 x 8192).
usage: /usr/bin/python3 bench/profile_vs_numpy.py [--binary build/app/attnscope] [--n 1024] [--large 16384]"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "reference"))
import attnref  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--binary", default=os.path.join(here, "..", "build", "app", "attnscope"))
ap.add_argument("--n", type=int, default=1024)
ap.add_argument("--large", type=int, default=16384)
ap.add_argument("--d", default="16,64")
args = ap.parse_args()
work = tempfile.mkdtemp(prefix="attnscope_profile_")
rng = np.random.default_rng(5)


def attnscope_profile(path, mech, extra=()):
    cmd = [args.binary, "analyze", "--q", path + ":/q", "--k", path + ":/k", "--causal", "--mechanism", mech,
           "--blocks", "16", "--method", "streaming", "--top-k", "1", "--metrics", "spectrum", "--past-splits", "all",
           "--json", "-"] + list(extra)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return time.perf_counter() - t0, json.loads(out)["results"][0]


print("| N | d | mechanism | NumPy: SVD of every block | AttnScope `--past-splits all` (whole command) | ratio | ranks agree |")
print("|---|---|---|---|---|---|---|")
for d in [int(x) for x in args.d.split(",")]:
    path = os.path.join(work, f"n{args.n}_d{d}.h5")
    q, k = rng.standard_normal((args.n, d)), rng.standard_normal((args.n, d))
    with h5py.File(path, "w") as f:
        f["q"], f["k"] = q, k
    for mech in ("linear", "mhla"):
        opts = {"causal": True} if mech == "linear" else {"causal": True, "blocks": 16, "mixing": "causal-local"}
        A = attnref.attention_matrix(mech, q, k, **opts)   # outside the clock
        t0 = time.perf_counter()
        ref, _ = attnref.past_profile(A, range(1, args.n))
        t_np = time.perf_counter() - t0
        t_us, r = attnscope_profile(path, mech)
        agree = [p["rank"] for p in r["past_profile"]] == [p["rank"] for p in ref] and \
            [p["energy_rank_99"] for p in r["past_profile"]] == [p["energy_rank_99"] for p in ref]
        print(f"| {args.n} | {d} | {mech} | {t_np:.2f} s | {t_us:.2f} s | {t_us / t_np:.4f}x | {'yes' if agree else 'NO'} |")

print()
print("| N | d | mechanism | AttnScope `--past-splits all` (whole command) | semiseparable rank |")
print("|---|---|---|---|---|")
for d in [int(x) for x in args.d.split(",")]:
    path = os.path.join(work, f"n{args.large}_d{d}.h5")
    with h5py.File(path, "w") as f:
        f["q"], f["k"] = rng.standard_normal((args.large, d)), rng.standard_normal((args.large, d))
    for mech in ("linear", "mhla"):
        t, r = attnscope_profile(path, mech)
        print(f"| {args.large} | {d} | {mech} (16 blocks, causal-local) | {t:.2f} s | {r['semiseparable_rank']} |"
              if mech == "mhla" else f"| {args.large} | {d} | {mech} | {t:.2f} s | {r['semiseparable_rank']} |")
