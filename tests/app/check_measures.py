"""The measures of docs/maths.md 2.2 (energy ranks, rank_at_rtol, support-normalised entropy, the content-free baseline
A0 with excess_effective_rank and entropy_below_baseline, the past block) through `analyze --json` and `batch`
(results.jsonl), against the NumPy reference (tests/reference/attnref.py, analyze_result / measures) to 1e-10 relative:
causal and not, 1-D and on a grid, preset and learned mixing matrices (with zeros), every mechanism, official and
unnormalised rows, --rank-rtol; the structured and dense spectrum paths agree with each other; --top-k leaves the
tolerance-free ranks null with a warning; a past split outside 1..N-1 is one `error:` line, exit 2.
usage: check_measures.py ATTNSCOPE WORKDIR"""
import json
import math
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
rng = np.random.default_rng(23)
H, N, D = 2, 48, 5
path = os.path.join(work, "measures.h5")
q = rng.standard_normal((H, N, D))
k = rng.standard_normal((H, N, D))
gates = rng.uniform(0.6, 1.0, (H, N))
values = rng.standard_normal((H, N, 3))
values[:, :, 2] = values[:, :, 0] - values[:, :, 1]   # rank 2: the output's rank is at most 2
with h5py.File(path, "w") as f:
    f["q"] = q
    f["k"] = k
    f["v"] = values
    f["gates"] = gates
# A learned 4 x 4 mixing matrix with zeros (non-negative), as a file.
learned = np.abs(rng.standard_normal((4, 4)))
learned[0, 2] = learned[2, 0] = learned[3, 1] = learned[1, 3] = 0.0
learned[3, 0] = 0.0
mc_path = os.path.join(work, "mc.npy")
np.save(mc_path, learned)

NEW_KEYS = ("energy_rank_90", "energy_rank_99", "rank_at_rtol", "baseline", "excess_effective_rank",
            "entropy_below_baseline", "past_block", "past_profile", "semiseparable_rank", "logit_norm", "mean_distance",
            "mass_within", "output")


def close(a, b, label):
    """a (ours) against b (the reference): same shape of nulls and objects, integers equal, reals to 1e-10 relative."""
    if isinstance(b, dict):
        if not isinstance(a, dict):
            problems.append(f"{label}: {a!r}, reference an object")
            return
        for key in b:
            if key not in a:
                problems.append(f"{label}.{key}: missing")
            else:
                close(a[key], b[key], f"{label}.{key}")
        return
    if isinstance(b, list):
        if not isinstance(a, list) or len(a) != len(b):
            problems.append(f"{label}: {a!r}, reference {b!r}")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            close(x, y, f"{label}[{i}]")
        return
    if b is None or a is None:
        if a is not b:
            problems.append(f"{label}: {a!r}, reference {b!r}")
        return
    if isinstance(b, bool) or isinstance(b, int):
        if a != b:
            problems.append(f"{label}: {a!r}, reference {b!r}")
        return
    if not math.isclose(a, b, rel_tol=1e-10, abs_tol=1e-12):
        problems.append(f"{label}: {a!r}, reference {b!r}")


def cli_args(o):
    """The command line of reference options o."""
    args = []
    for key, flag in (("blocks", "--blocks"), ("chunk", "--chunk"), ("mixing", "--mixing"), ("normalize", "--normalize"),
                      ("feature_map", "--feature-map"), ("decay", "--decay"), ("rank_rtol", "--rank-rtol"),
                      ("past_split", "--past-split"), ("past_splits", "--past-splits")):
        if o.get(key) is not None:
            args += [flag, str(o[key])]
    for key, flag in (("grid", "--grid"), ("block_grid", "--block-grid")):
        if o.get(key) is not None:
            args += [flag, ",".join(str(v) for v in o[key])]
    if o.get("mixing_matrix") is not None:
        args += ["--mixing", mc_path]
    if o.get("causal"):
        args.append("--causal")
    return args


def reference(mech, h, o):
    ro = {key: v for key, v in o.items() if v is not None and key not in ("rank_rtol", "past_split", "past_splits")}
    if mech == "gated":
        ro["gates"] = gates[h]
    if mech not in ("mhla",):
        for key in ("blocks", "chunk", "mixing", "mixing_matrix", "block_grid"):
            ro.pop(key, None)
        if mech != "decay":
            ro.pop("grid", None)
    if mech == "softmax":
        ro.pop("normalize", None)
        ro.pop("feature_map", None)
    if mech == "linear":
        ro.pop("normalize", None)   # linear attention is always row-normalised (docs/maths.md 1.3)
    if mech == "mhla" and ro.get("mixing_matrix") is not None:
        ro.pop("mixing", None)
    return attnref.analyze_result(mech, q[h], k[h], rank_rtol=o.get("rank_rtol"), past_split=o.get("past_split"),
                                  past_splits=o.get("past_splits"), head=h,
                                  distance_grid=(o.get("grid"), o.get("block_grid"), o.get("token_order", "raster")),
                                  **ro)


def check_result(r, ref, label):
    for key in NEW_KEYS:
        if key in ref:
            if key not in r:
                problems.append(f"{label}: no {key}")
            else:
                close(r[key], ref[key], f"{label} {key}")
        elif key in r:
            problems.append(f"{label}: {key} present, the reference has none")
    if ref.get("entropy") is not None:
        close((r.get("entropy") or {}).get("support_normalized_mean"), ref["entropy"]["support_normalized_mean"],
              f"{label} entropy.support_normalized_mean")


def analyze(mechs, h, o, extra=()):
    args = ["analyze", "--q", path + ":/q", "--k", path + ":/k", "--head", str(h), "--mechanism", ",".join(mechs),
            "--json", "-"] + cli_args(o) + list(extra)
    if "gated" in mechs:
        args += ["--gates", path + ":/gates"]
    out = run(args)
    return None if out is None else json.loads(out)["results"]


def analyze_doc(mechs, h, o, extra=()):
    args = ["analyze", "--q", path + ":/q", "--k", path + ":/k", "--head", str(h), "--mechanism", ",".join(mechs),
            "--json", "-"] + cli_args(o) + list(extra)
    if "gated" in mechs:
        args += ["--gates", path + ":/gates"]
    out = run(args)
    return None if out is None else json.loads(out)


def reference_matrix(mech, h, o):
    ro = {key: v for key, v in o.items() if v is not None and key not in ("rank_rtol", "past_split", "past_splits")}
    if mech == "gated":
        ro["gates"] = gates[h]
    if mech != "mhla":
        for key in ("blocks", "chunk", "mixing", "mixing_matrix", "block_grid"):
            ro.pop(key, None)
        if mech != "decay":
            ro.pop("grid", None)
    if mech == "softmax":
        ro.pop("normalize", None)
        ro.pop("feature_map", None)
    if mech == "linear":
        ro.pop("normalize", None)
    if mech == "mhla" and ro.get("mixing_matrix") is not None:
        ro.pop("mixing", None)
    return attnref.attention_matrix(mech, q[h], k[h], head=h, **ro)


def check_distance(doc, mechs, h, o, label):
    """The document's distance[a][b] for every ordered pair against attnref.mechanism_distance."""
    dist = doc.get("distance")
    if not isinstance(dist, dict):
        problems.append(f"{label}: distance {dist!r}")
        return
    mats = {m: reference_matrix(m, h, o) for m in mechs}
    for a in mechs:
        for b in mechs:
            if a == b:
                continue
            got = (dist.get(a) or {}).get(b)
            if got is None:
                problems.append(f"{label}: no distance[{a}][{b}]")
                continue
            close({k2: got.get(k2) for k2 in ("tv", "js", "rel_frobenius")}, attnref.mechanism_distance(mats[a], mats[b]),
                  f"{label} distance[{a}][{b}]")


CASES = [
    ("1-D", {"blocks": 4, "mixing": "exp"}, ["softmax", "linear", "mhla", "decay", "cosformer"]),
    ("1-D causal", {"causal": True, "chunk": 12, "mixing": "causal-local"},
     ["softmax", "linear", "mhla", "decay", "gated", "cosformer"]),
    ("1-D split", {"blocks": 6, "mixing": "local", "past_split": 20}, ["softmax", "linear", "mhla"]),
    ("1-D identity mixing causal", {"causal": True, "blocks": 4, "mixing": "identity"}, ["mhla"]),
    ("grid", {"grid": [6, 8], "block_grid": [2, 2], "mixing": "cos"}, ["softmax", "mhla", "decay"]),
    ("grid causal", {"causal": True, "grid": [6, 8], "block_grid": [3, 2], "mixing": "causal-local"}, ["mhla", "decay"]),
    ("learned", {"blocks": 4, "mixing_matrix": learned}, ["mhla"]),
    ("learned causal", {"causal": True, "blocks": 4, "mixing_matrix": learned}, ["mhla"]),
    ("official", {"blocks": 4, "mixing": "exp", "normalize": "official"}, ["mhla"]),
    ("none", {"blocks": 4, "mixing": "linear", "normalize": "none", "past_split": 7}, ["mhla", "decay"]),
    ("rtol", {"causal": True, "blocks": 4, "mixing": "causal-local", "rank_rtol": 1e-3}, ["softmax", "linear", "mhla"]),
    ("elu1 causal", {"causal": True, "blocks": 3, "mixing": "causal", "feature_map": "elu1"}, ["linear", "mhla"]),
    # The semiseparable profile (docs/maths.md 2.2): every split (47 of them, one QR per split) and K splits.
    ("profile all causal", {"causal": True, "chunk": 12, "mixing": "causal-local", "past_splits": "all"},
     ["linear", "mhla", "decay", "gated", "cosformer"]),
    ("profile all learned", {"blocks": 4, "mixing_matrix": learned, "past_splits": "all"}, ["mhla", "linear"]),
    ("profile K", {"blocks": 6, "mixing": "exp", "past_splits": 5}, ["softmax", "linear", "mhla", "decay"]),
    ("profile grid causal", {"causal": True, "grid": [6, 8], "block_grid": [3, 2], "mixing": "causal-local",
                             "past_splits": "all"}, ["mhla", "decay"]),
    ("profile grid", {"grid": [6, 8], "block_grid": [2, 2], "mixing": "cos", "past_splits": 7}, ["softmax", "mhla"]),
]
for name, o, mechs in CASES:
    for h in (0, 1):
        doc = analyze_doc(mechs, h, o)
        if doc is None:
            continue
        for mech, r in zip(mechs, doc["results"]):
            check_result(r, reference(mech, h, o), f"analyze {name} h={h} {mech}")
        if h == 0:
            check_distance(doc, mechs, h, o, f"analyze {name}")

# --v: the output A V's rank, effective rank and energy rank 99% (docs/maths.md 2.2), against NumPy.
for name, o, mechs in CASES[:3]:
    doc = analyze_doc(mechs, 1, o, ["--v", path + ":/v"])
    if doc is None:
        continue
    for mech, r in zip(mechs, doc["results"]):
        Y = reference_matrix(mech, 1, o) @ values[1]
        sp = attnref.spectrum(Y)
        ref = {"rank": sp["rank"], "effective_rank": sp["effective_rank"],
               "energy_rank_99": attnref.energy_rank(sp["singular_values"], 0.99)}
        close(r.get("output"), ref, f"output {name} {mech}")
        if r.get("output", {}).get("rank", 3) > 2:
            problems.append(f"output {name} {mech}: rank {r['output']['rank']} above rank(V) = 2")

# The structured path and the dense one give the same measures (non-causal linear and MHLA, and their baselines).
for o in ({"blocks": 4, "mixing": "exp"}, {"blocks": 4, "mixing_matrix": learned, "past_split": 24}):
    s = analyze(["linear", "mhla"], 0, o, ["--method", "structured"])
    d = analyze(["linear", "mhla"], 0, o, ["--method", "dense"])
    if s is None or d is None:
        continue
    for rs, rd in zip(s, d):
        if rs["method"]["spectrum"] != "structured" or rd["method"]["spectrum"] != "dense":
            problems.append(f"structured vs dense: methods {rs['method']} / {rd['method']}")
        for key in NEW_KEYS:
            if key in rd:
                close(rs.get(key), rd[key], f"structured vs dense {rs['mechanism']} {key}")

# --top-k: the tolerance-free ranks are undetermined (null) and a warning says why.
res = analyze(["softmax"], 0, {"blocks": 4}, ["--top-k", "4", "--method", "streaming"])
if res is not None:
    r = res[0]
    if r.get("energy_rank_90") is not None or r.get("rank_at_rtol") is not None:
        problems.append(f"top-k: energy_rank_90 {r.get('energy_rank_90')}, rank_at_rtol {r.get('rank_at_rtol')}; null expected")
    if not any("every singular value" in w for w in r["warnings"]):
        problems.append(f"top-k: no warning about the tolerance-free ranks: {r['warnings']}")

# A past split outside 1..N-1: one error line, exit 2.
for h in ("0", str(N), "-1"):
    p = subprocess.run([binary, "analyze", "--q", path + ":/q", "--k", path + ":/k", "--causal", "--past-split", h,
                        "--json", "-"], capture_output=True, text=True)
    lines = p.stderr.strip().splitlines()
    if p.returncode != 2 or len(lines) != 1 or not lines[0].startswith("error:") or p.stdout:
        problems.append(f"--past-split {h}: exit {p.returncode}, stderr {p.stderr.strip()!r}, stdout {p.stdout[:80]!r}")

# batch: the records of results.jsonl carry the same measures.
bdir = os.path.join(work, "batch")
os.makedirs(bdir, exist_ok=True)
with open(os.path.join(bdir, "job.toml"), "w") as f:
    f.write('inputs = ["%s"]\nmechanisms = ["softmax", "linear", "mhla"]\nheads = [0, 1]\n'
            '[attention]\ncausal = true\nblocks = 4\nmixing = "%s"\n[metrics]\npast_split = 30\n' % (path, mc_path))
out_dir = os.path.join(bdir, "out")
if run(["batch", os.path.join(bdir, "job.toml"), "--out", out_dir]) is not None:
    seen = 0
    o = {"causal": True, "blocks": 4, "mixing_matrix": learned, "past_split": 30}
    with open(os.path.join(out_dir, "results.jsonl")) as f:
        for line in f:
            r = json.loads(line)   # one mechanism's analyze result, with its unit's layer and head
            check_result(r, reference(r["mechanism"], r["head"], o), f"batch head {r['head']} {r['mechanism']}")
            seen += 1
    if seen != 6:
        problems.append(f"batch: {seen} results checked, 6 expected")
    with open(os.path.join(out_dir, "summary.csv")) as f:
        header = f.readline().strip().split(",")
    for col in ("excess_effective_rank", "past_block_rank", "energy_rank_90", "entropy_support_normalized_mean"):
        if col not in header:
            problems.append(f"batch summary.csv has no column {col}")

# From N = 1024 on (docs/maths.md 2.2) the causal softmax / linear baseline comes from its bidiagonal inverse and the
# past block of every mechanism with factors from the factors: the measures of the reference's dense SVDs all the same.
N_LONG = 1100
q = rng.standard_normal((1, N_LONG, D))
k = rng.standard_normal((1, N_LONG, D))
gates = rng.uniform(0.6, 1.0, (1, N_LONG))
path = os.path.join(work, "measures_long.h5")
with h5py.File(path, "w") as f:
    f["q"] = q
    f["k"] = k
    f["gates"] = gates
LONG_CASES = [
    ("long causal", {"causal": True, "chunk": 100, "mixing": "causal-local"},
     ["softmax", "linear", "mhla", "decay", "gated", "cosformer"]),
    ("long learned causal", {"causal": True, "blocks": 4, "mixing_matrix": learned}, ["mhla"]),
    ("long split", {"blocks": 4, "mixing": "exp", "past_split": 300}, ["linear", "mhla", "decay", "cosformer"]),
]
for name, o, mechs in LONG_CASES:
    results = analyze(mechs, 0, o)
    if results is None:
        continue
    for mech, r in zip(mechs, results):
        check_result(r, reference(mech, 0, o), f"analyze {name} N={N_LONG} {mech}")

cli_checks.report(problems)
