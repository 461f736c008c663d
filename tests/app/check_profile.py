"""The semiseparable profile of docs/maths.md 2.2 (`past_profile`, `semiseparable_rank`, `--past-splits`) where it
is computed from R factors carried along the token line (64 splits or more: every split of N = 160 in 1-D and on a
raster grid whose blocks are not contiguous in token order, causal and not, learned mixing with zeros, every
mechanism with factors), and at N = 4096 without forming anything N x N (the streaming path), against the NumPy
reference (tests/reference/attnref.py: the dense SVD of each block A[h:N, 0:h]); ranks and energy ranks exactly.
Also: the exponential presets keep MHLA's past block at r like linear attention's, a learned Mc lifts it; softmax
has no factors, so `all` leaves its profile null with a warning; a bad --past-splits is one `error:` line, exit 2.
usage: check_profile.py ATTNSCOPE WORKDIR"""
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
run = cli_checks.runner(binary, problems)
rng = np.random.default_rng(31)


def write(name, n, d):
    path = os.path.join(work, name)
    q = rng.standard_normal((n, d))
    k = rng.standard_normal((n, d))
    gates = rng.uniform(0.7, 1.0, n)
    with h5py.File(path, "w") as f:
        f["q"] = q
        f["k"] = k
        f["gates"] = gates
    return path, q, k, gates


learned = np.abs(rng.standard_normal((8, 8)))
learned[np.abs(np.subtract.outer(np.arange(8), np.arange(8))) == 3] = 0.0   # zeros inside the lower triangle
learned[5, 0] = 0.0
mc_path = os.path.join(work, "mc8.npy")
np.save(mc_path, learned)


def analyze(path, mechs, args):
    cmd = ["analyze", "--q", path + ":/q", "--k", path + ":/k", "--mechanism", ",".join(mechs), "--json", "-"] + args
    if "gated" in mechs:
        cmd += ["--gates", path + ":/gates"]
    out = run(cmd)
    return None if out is None else json.loads(out)["results"]


def reference_matrix(mech, q, k, gates, o):
    ro = dict(o)
    if mech == "gated":
        ro["gates"] = gates
    if mech != "mhla":
        for key in ("blocks", "chunk", "mixing", "mixing_matrix", "block_grid"):
            ro.pop(key, None)
        if mech != "decay":
            ro.pop("grid", None)
    if mech == "softmax":
        ro.pop("feature_map", None)
    return attnref.attention_matrix(mech, q, k, **ro)


def compare(label, ours, ref_profile, ref_rank=None):
    got = {p["h"]: p for p in ours["past_profile"] or []}
    for p in ref_profile:
        g = got.get(p["h"])
        if g is None:
            problems.append(f"{label}: no split h={p['h']}")
            continue
        for key in ("rows", "cols", "rank", "energy_rank_99"):
            if g[key] != p[key]:
                problems.append(f"{label} h={p['h']} {key}: {g[key]}, reference {p[key]}")
    if ref_rank is not None and ours.get("semiseparable_rank") != ref_rank:
        problems.append(f"{label}: semiseparable_rank {ours.get('semiseparable_rank')}, reference {ref_rank}")


# Every split of N = 160 (159 >= 64: the carried factors), against the dense SVD of each of the 159 blocks.
N, D = 160, 6
path, q, k, gates = write("profile160.h5", N, D)
CASES = [
    ("1-D causal", ["--causal", "--blocks", "8", "--mixing", mc_path], {"causal": True, "blocks": 8, "mixing_matrix": mc_path},
     ["linear", "mhla", "decay", "gated", "cosformer"]),
    ("1-D", ["--blocks", "8", "--mixing", mc_path], {"blocks": 8, "mixing_matrix": mc_path}, ["linear", "mhla", "cosformer"]),
    ("1-D exp", ["--blocks", "8", "--mixing", "exp", "--decay", "0.9"], {"blocks": 8, "mixing": "exp", "decay": 0.9},
     ["mhla", "decay"]),
    ("grid causal", ["--causal", "--grid", "10,16", "--block-grid", "2,4", "--mixing", "causal-local"],
     {"causal": True, "grid": (10, 16), "block_grid": (2, 4), "mixing": "causal-local"}, ["mhla", "decay"]),
    ("grid", ["--grid", "10,16", "--block-grid", "2,4", "--mixing", mc_path],
     {"grid": (10, 16), "block_grid": (2, 4), "mixing_matrix": mc_path}, ["mhla"]),
    ("elu1 official", ["--blocks", "8", "--mixing", "exp", "--feature-map", "elu1", "--normalize", "official"],
     {"blocks": 8, "mixing": "exp", "feature_map": "elu1", "normalize": "official"}, ["mhla"]),
]
for name, args, o, mechs in CASES:
    results = analyze(path, mechs, args + ["--past-splits", "all"])
    if results is None:
        continue
    for mech, r in zip(mechs, results):
        label = f"N={N} {name} {mech}"
        if r.get("method", {}).get("past_profile") != "factors":
            problems.append(f"{label}: method {r.get('method')}, factors expected")
        if len(r.get("past_profile") or []) != N - 1:
            problems.append(f"{label}: {len(r.get('past_profile') or [])} splits, {N - 1} expected")
        A = reference_matrix(mech, q, k, gates, o)
        prof, top = attnref.past_profile(A, attnref.default_past_splits(N, "all"))
        compare(label, r, prof, top)

# The finding of issue 31: with the exponential presets MHLA's past block stays at r = d at every split, as linear
# attention's; the learned Mc lifts it.
res = analyze(path, ["linear", "mhla"], ["--causal", "--blocks", "8", "--mixing", "causal-local", "--past-splits", "all"])
if res:
    for r in res:
        if r["semiseparable_rank"] != D:
            problems.append(f"causal-local {r['mechanism']}: semiseparable rank {r['semiseparable_rank']}, {D} expected")
res = analyze(path, ["mhla"], ["--causal", "--blocks", "8", "--mixing", mc_path, "--past-splits", "all"])
if res and not res[0]["semiseparable_rank"] > D:
    problems.append(f"learned Mc: semiseparable rank {res[0]['semiseparable_rank']}, above {D} expected")

# Softmax has no factors: every split is refused with a warning, K splits come from the matrix.
res = analyze(path, ["softmax"], ["--causal", "--past-splits", "all"])
if res:
    r = res[0]
    if r.get("past_profile") is not None or r.get("semiseparable_rank") is not None or \
            not any("past profile" in w for w in r["warnings"]):
        problems.append(f"softmax all: {r.get('past_profile')!r:.60}, warnings {r['warnings']}")
res = analyze(path, ["softmax"], ["--causal", "--past-splits", "4"])
if res:
    A = reference_matrix("softmax", q, k, gates, {"causal": True})
    prof, top = attnref.past_profile(A, sorted(set(attnref.default_past_splits(N, 4)) | {N // 2}))
    if res[0].get("method", {}).get("past_profile") != "matrix":
        problems.append(f"softmax K: method {res[0].get('method')}")
    compare("softmax K=4", res[0], prof, top)

# N = 4096, d = 8, every split, nothing N x N formed (--method streaming): the splits checked against NumPy.
N, D = 4096, 8
path, q, k, gates = write("profile4096.h5", N, D)
CHECK = [1, 700, 2048, 3900, 4095]
for mech, args, o in (("mhla", ["--blocks", "16", "--mixing", mc_path.replace("mc8", "mc16")], None),
                      ("linear", [], {}), ("gated", [], {})):
    if mech == "mhla":
        mc16 = np.abs(rng.standard_normal((16, 16)))
        mc16[np.abs(np.subtract.outer(np.arange(16), np.arange(16))) == 2] = 0.0
        np.save(mc_path.replace("mc8", "mc16"), mc16)
        o = {"blocks": 16, "mixing_matrix": mc_path.replace("mc8", "mc16")}
    o["causal"] = True
    res = analyze(path, [mech], ["--causal", "--method", "streaming", "--top-k", "1", "--metrics", "spectrum",
                                 "--past-splits", "all"] + args)
    if not res:
        continue
    r = res[0]
    if r.get("method", {}).get("past_profile") != "factors" or len(r.get("past_profile") or []) != N - 1:
        problems.append(f"N={N} {mech}: method {r.get('method')}, {len(r.get('past_profile') or [])} splits")
        continue
    A = reference_matrix(mech, q, k, gates, o)
    prof, _ = attnref.past_profile(A, CHECK)
    compare(f"N={N} {mech}", r, prof)
    del A

# A bad --past-splits: one error line, exit 2, nothing on stdout.
for bad in ("0", "-3", "some", "1e3", "2000000"):
    p = subprocess.run([binary, "analyze", "--q", path + ":/q", "--k", path + ":/k", "--causal", "--past-splits", bad,
                        "--json", "-"], capture_output=True, text=True)
    lines = p.stderr.strip().splitlines()
    if p.returncode != 2 or len(lines) != 1 or not lines[0].startswith("error:") or p.stdout:
        problems.append(f"--past-splits {bad}: exit {p.returncode}, stderr {p.stderr.strip()!r}")

cli_checks.report(problems)
