"""The rank-cap sentence (docs/maths.md 1.6): whenever rank(Mc) * r < min(N, M * r), analyze (its table and its
JSON) and the sweep summary say in words that the mixing matrix, not the data, caps MHLA's rank. rank(Mc) is
numpy.linalg.matrix_rank of the reference's Mc (tests/reference/attnref.py). Random 1-D data, N = 256, d = 16,
16 blocks: `--mixing cos` (rank 2) prints "the mixing matrix has rank 2: MHLA rank <= 32 whatever the data";
the default (`exp`, full rank) prints nothing of the kind and MHLA's rank is above 2d. Also a 2-D block grid
with `cos`, a learned Mc of rank 3 (M = 4: MHLA rank <= 48) and causal MHLA (no cap: the mask breaks the
factorisation).
usage: check_rank_cap.py ATTNSCOPE WORKDIR"""
import json
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import attnref  # noqa: E402
import cli_checks  # noqa: E402

binary, work = sys.argv[1], sys.argv[2]
problems = []
run = cli_checks.runner(binary, problems)
rng = np.random.default_rng(23)
N, D = 256, 16
path = os.path.join(work, "random.h5")
q, k = rng.standard_normal((N, D)), rng.standard_normal((N, D))
learned = np.array([[1, 0, 1, 2], [0, 1, 1, 0], [1, 1, 0, 0], [2, 1, 1, 2]], dtype=np.float64)   # rank 3
with h5py.File(path, "w") as f:
    f["q"] = q
    f["k"] = k
    f["mc"] = learned
qk = ["--q", path + ":/q", "--k", path + ":/k"]


def sentence(rank_mc, bound):
    return f"the mixing matrix has rank {rank_mc}: MHLA rank <= {bound} whatever the data"


def mhla_of(doc):
    return [r for r in doc["results"] if r["mechanism"] == "mhla"][0]


def check(label, opts, ref_opts, Mc):
    """analyze with `opts`: the sentence in the table and in MHLA's JSON warnings exactly when the NumPy rank of
    Mc says the cap binds; MHLA's rank within the cap and equal to the reference's."""
    M = Mc.shape[0]
    rank_mc = int(np.linalg.matrix_rank(Mc))
    causal = ref_opts.get("causal", False)
    capped = not causal and rank_mc * D < min(N, M * D)
    words = sentence(rank_mc, rank_mc * D)
    table = run(["analyze"] + qk + opts)
    doc = run(["analyze"] + qk + opts + ["--json", "-"])
    if table is None or doc is None:
        return None
    said = [w for w in mhla_of(json.loads(doc))["warnings"] if w.startswith("the mixing matrix has rank")]
    if capped and (words not in table or len(said) != 1 or not said[0].startswith(words)):
        problems.append(f"{label}: expected {words!r} in the table and the JSON; JSON says {said}, table:\n{table}")
    if not capped and (said or "the mixing matrix has rank" in table):
        problems.append(f"{label}: no cap expected (rank(Mc) = {rank_mc}, M = {M}), but: {said}")
    A = attnref.attention_matrix("mhla", q, k, **ref_opts)
    want = int(np.linalg.matrix_rank(A))
    got = mhla_of(json.loads(doc))["rank"]
    if got != want or (capped and got > rank_mc * D):
        problems.append(f"{label}: MHLA rank {got}, reference {want}, cap {rank_mc * D if capped else None}")
    return got


def centres(M):
    return (np.arange(M, dtype=np.float64) + 0.5)[:, None]


check("1-D cos", ["--blocks", "16", "--mixing", "cos"], dict(blocks=16, mixing="cos"),
      attnref.mixing_preset("cos", centres(16)))
if int(np.linalg.matrix_rank(attnref.mixing_preset("cos", centres(16)))) != 2:
    problems.append("the reference's 1-D cos mixing matrix does not have rank 2")
got = check("1-D default", ["--blocks", "16"], dict(blocks=16), attnref.mixing_preset(None, centres(16)))
if got is not None and not got > 2 * D:
    problems.append(f"default MHLA rank {got} on random 1-D data is not above 2d = {2 * D}")
grid_centres = np.stack(np.unravel_index(np.arange(16), (4, 4)), axis=1).astype(np.float64) + 0.5
check("grid cos", ["--grid", "16,16", "--block-grid", "4,4", "--mixing", "cos"],
      dict(grid=(16, 16), block_grid=(4, 4), mixing="cos"), attnref.mixing_preset("cos", grid_centres))
check("learned rank 3", ["--blocks", "4", "--mixing", path + ":/mc"], dict(blocks=4, mixing_matrix=learned), learned)
check("causal cos", ["--causal", "--blocks", "16", "--mixing", "cos"], dict(blocks=16, mixing="cos", causal=True),
      attnref.mixing_preset("cos", centres(16)))

# The sweep summary carries the sentence on MHLA's points that have it (M = 16 with cos), not on others.
summary = os.path.join(work, "sweep.json")
if run(["sweep"] + qk + ["--vary", "m=1,16", "--mixing", "cos", "--mechanism", "linear,mhla", "--json", summary,
                         "--csv", os.path.join(work, "sweep.csv")]) is not None:
    for p in json.load(open(summary))["points"]:
        want = sentence(2, 32) if (p["mechanism"], p["m"]) == ("mhla", 16) else None
        got = p.get("rank_cap")
        if (want is None) != (got is None) or (want is not None and not got.startswith(want)):
            problems.append(f"sweep point {p['mechanism']} m={p['m']}: rank_cap {got!r}, expected {want!r}")

cli_checks.report(problems)
