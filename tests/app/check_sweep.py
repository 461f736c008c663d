"""`attnscope sweep` against separate `attnscope analyze` runs on the same token subsets (built here
with NumPy), determinism of random subsets, and the JSON summary against the CSV.
usage: check_sweep.py ATTNSCOPE WORKDIR"""
import csv
import io
import json
import os
import sys

import h5py
import numpy as np

import cli_checks

binary, work = sys.argv[1], sys.argv[2]
problems = []
run = cli_checks.runner(binary, problems)
rng = np.random.default_rng(11)
q = rng.normal(size=(2, 64, 8))
k = rng.normal(size=(2, 64, 8))
acts = os.path.join(work, "acts.h5")
with h5py.File(acts, "w") as f:
    f["q"] = q
    f["k"] = k


def rows_of(text):
    return list(csv.DictReader(io.StringIO(text)))


def close(a, b, what, rel=1e-12):
    if abs(a - b) > rel * max(abs(b), 1e-300):
        problems.append(f"{what}: sweep {a!r} vs analyze {b!r}")


# 1. crop subsets over all heads, compared with analyze on the NumPy crop
out = run(["sweep", "--q", acts + ":/q", "--k", acts + ":/k", "--heads", "all", "--grid", "8,8", "--block-grid", "4,4",
           "--vary", "n=16,36,64", "--subsample", "crop", "--json", os.path.join(work, "crop.json"), "--csv", "-"])
if out is not None:
    rows = rows_of(out)
    if len(rows) != 2 * 3 * 3:
        problems.append(f"crop sweep: {len(rows)} records, want 18")
    for row in rows:
        h, n = int(row["head"]), int(row["n"])
        c = int(round(np.sqrt(n)))
        s = (8 - c) // 2
        idx = [(s + i) * 8 + (s + j) for i in range(c) for j in range(c)]
        qp, kp = os.path.join(work, "qs.npy"), os.path.join(work, "ks.npy")
        np.save(qp, q[h][idx])
        np.save(kp, k[h][idx])
        b = c // 2   # block size 2 kept: the block grid scales with the crop
        ref = run(["analyze", "--q", qp, "--k", kp, "--mechanism", row["mechanism"], "--grid", f"{c},{c}",
                   "--block-grid", f"{b},{b}", "--json", "-"])
        if ref is None:
            continue
        r = json.loads(ref)["results"][0]
        what = f"crop head {h} N={n} {row['mechanism']}"
        if int(row["rank"]) != r["rank"]:
            problems.append(f"{what}: rank {row['rank']} vs {r['rank']}")
        if int(row["m"]) != b * b:
            problems.append(f"{what}: m {row['m']} vs {b * b}")
        close(float(row["rank_tol"]), r["rank_tol"], what + " rank_tol")
        close(float(row["effective_rank"]), r["effective_rank"], what + " effective_rank")
        close(float(row["stable_rank"]), r["stable_rank"], what + " stable_rank")
        close(float(row["entropy_mean"]), r["entropy"]["mean"], what + " entropy_mean")
        close(float(row["entropy_normalized_mean"]), r["entropy"]["normalized_mean"], what + " entropy_normalized_mean")
    # the summary's means are the CSV's means
    summary = json.load(open(os.path.join(work, "crop.json")))
    for p in summary["points"]:
        sel = [r for r in rows if r["mechanism"] == p["mechanism"] and int(r["n"]) == p["n"]]
        if p["count"] != len(sel):
            problems.append(f"summary count {p['count']} vs {len(sel)}")
        mean = np.mean([float(r["effective_rank"]) for r in sel])
        std = np.std([float(r["effective_rank"]) for r in sel])
        close(p["effective_rank"]["mean"], mean, "summary mean", 1e-12)
        if abs(p["effective_rank"]["std"] - std) > 1e-9 * max(mean, 1):
            problems.append(f"summary std {p['effective_rank']['std']} vs {std}")

# 2. first-N subsets with 1-D blocks equal analyze on the first N tokens
out = run(["sweep", "--q", acts + ":/q", "--k", acts + ":/k", "--head", "1", "--blocks", "4", "--vary", "n=20,64", "--csv", "-"])
if out is not None:
    for row in rows_of(out):
        n = int(row["n"])
        qp, kp = os.path.join(work, "qf.npy"), os.path.join(work, "kf.npy")
        np.save(qp, q[1][:n])
        np.save(kp, k[1][:n])
        ref = run(["analyze", "--q", qp, "--k", kp, "--mechanism", row["mechanism"], "--blocks", "4", "--json", "-"])
        if ref:
            r = json.loads(ref)["results"][0]
            if int(row["rank"]) != r["rank"]:
                problems.append(f"first N={n} {row['mechanism']}: rank {row['rank']} vs {r['rank']}")
            close(float(row["effective_rank"]), r["effective_rank"], f"first N={n} {row['mechanism']}")

# 3. random subsets: deterministic for a seed, different for another
def random_sweep(seed):
    text = run(["sweep", "--q", acts + ":/q", "--k", acts + ":/k", "--vary", "n=30", "--subsample", "random", "--draws", "3",
                "--subsample-seed", str(seed), "--mechanism", "softmax", "--csv", "-"])
    return None if text is None else [{k: v for k, v in r.items() if k != "seconds"} for r in rows_of(text)]

a, b, c = random_sweep(5), random_sweep(5), random_sweep(6)
if a is not None:
    if a != b:
        problems.append("random subsets differ between two runs with the same seed")
    if a == c:
        problems.append("random subsets are the same for seeds 5 and 6")
    if len({r["effective_rank"] for r in a}) < 2:
        problems.append("the three random draws gave identical results")

# 4. synthetic sweep: linear rank pinned at d while softmax keeps rising (global context collapse)
out = run(["sweep", "--synth", "gaussian", "--d", "16", "--vary", "n=32,64,128", "--mechanism", "softmax,linear", "--csv", "-"])
if out is not None:
    rows = rows_of(out)
    lin = [int(r["rank"]) for r in rows if r["mechanism"] == "linear"]
    soft = [int(r["rank"]) for r in rows if r["mechanism"] == "softmax"]
    if lin != [16, 16, 16] or soft != [32, 64, 128]:
        problems.append(f"synthetic ranks: linear {lin}, softmax {soft}")

cli_checks.report(problems)
