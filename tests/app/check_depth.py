"""`attnscope depth` (docs/maths.md 2.2, cli.md "Added for round 5") against NumPy: the products
P_L = (alpha A_L + (1 - alpha) I) ... (alpha A_1 + (1 - alpha) I) of data/vit_digits.h5's three layers (head mean and
one head, alpha 0.5 and 1, softmax, linear and MHLA on the file's 8 x 8 grid), their rank (numpy.linalg.matrix_rank's
rule), effective and stable rank, row entropy and residual_to_uniform = ||P - 1 pi^T||_F / ||P||_F to 1e-10; the
causal trained LM with per-layer, per-head mixing matrices; a file with an `l` axis gives the numbers of the same
layers as per-layer datasets; a file without layers and a bad --alpha are one `error:` line, exit 2.
usage: check_depth.py ATTNSCOPE WORKDIR"""
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
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
problems = []
run = cli_checks.runner(binary, problems)


def close(a, b, label, rel=1e-10):
    if a is None or b is None or not math.isclose(a, b, rel_tol=rel, abs_tol=1e-12):
        problems.append(f"{label}: {a!r}, reference {b!r}")


def reference_products(layers_a, alpha):
    """[(P_L, measures)] for L = 1.. from the layers' matrices (each N x N)."""
    N = layers_a[0].shape[0]
    P = np.eye(N)
    out = []
    for A in layers_a:
        P = (alpha * A + (1 - alpha) * np.eye(N)) @ P
        s = np.linalg.svd(P, compute_uv=False)
        pi = P.mean(axis=0)
        m = {"rank": int(np.linalg.matrix_rank(P)),
             "effective_rank": attnref.spectrum(P)["effective_rank"],
             "stable_rank": float((s ** 2).sum() / s[0] ** 2),
             "residual_to_uniform": float(np.linalg.norm(P - np.ones((N, 1)) * pi[None, :]) / np.linalg.norm(P))}
        if np.all(P >= 0):
            m["entropy_mean"] = float(attnref.row_entropies(P).mean())
        out.append((P, m))
    return out


def compare(doc, refs, mech_index, label):
    steps = doc["depth"]
    if len(steps) != len(refs):
        problems.append(f"{label}: {len(steps)} depths, {len(refs)} expected")
        return
    for step, (_, m) in zip(steps, refs):
        r = step["results"][mech_index]
        lab = f"{label} depth {step['depth']}"
        if r["rank"] != m["rank"]:
            problems.append(f"{lab} rank: {r['rank']}, numpy {m['rank']}")
        for key in ("effective_rank", "stable_rank", "residual_to_uniform"):
            close(r.get(key), m[key], f"{lab} {key}")
        if "entropy_mean" in m:
            close((r.get("entropy") or {}).get("mean"), m["entropy_mean"], f"{lab} entropy.mean")


# ViT on 8x8 digits: 3 layers x 4 heads, 65 tokens with a CLS prefix (dropped: N = 64 on the file's 8 x 8 grid).
vit = os.path.join(root, "data", "vit_digits.h5")
with h5py.File(vit, "r") as f:
    Q = [f[f"layers/{l}/q"][()] for l in range(3)]
    K = [f[f"layers/{l}/k"][()] for l in range(3)]
MECHS = ["softmax", "linear", "mhla"]
for alpha in (0.5, 1.0):
    out = run(["depth", vit, "--mechanism", ",".join(MECHS), "--grid", "8,8", "--block-grid", "2,2",
               "--mixing", "exp",
               "--alpha", str(alpha), "--json", "-"])
    if out is None:
        continue
    doc = json.loads(out)
    if doc["input"]["layers"] != [0, 1, 2] or doc["input"]["n"] != 64:
        problems.append(f"vit alpha {alpha}: input {doc['input']}")
    for mi, mech in enumerate(MECHS):
        opts = {"scale": 0.25}
        if mech == "mhla":
            opts = {"grid": (8, 8), "block_grid": (2, 2), "mixing": "exp"}
        if mech == "softmax":
            opts = {"scale": 0.25}
        else:
            opts.pop("scale", None)
        layers_a = [np.mean([attnref.attention_matrix(mech, Q[l][h, 1:], K[l][h, 1:], **opts) for h in range(4)], axis=0)
                    for l in range(3)]
        compare(doc, reference_products(layers_a, alpha), mi, f"vit {mech} alpha {alpha} heads mean")
# One head.
out = run(["depth", vit, "--mechanism", "linear", "--head", "2", "--json", "-"])
if out is not None:
    doc = json.loads(out)
    layers_a = [attnref.attention_matrix("linear", Q[l][2, 1:], K[l][2, 1:]) for l in range(3)]
    compare(doc, reference_products(layers_a, 0.5), 0, "vit linear head 2")
# The summary table prints every depth and mechanism.
out = run(["depth", vit, "--mechanism", "softmax,linear"])
if out is not None and (out.count("softmax") < 3 or "residual" not in out):
    problems.append(f"depth table:\n{out}")

# The same layers as one tensor with an 'l' axis: the same numbers.
lfile = os.path.join(work, "vit_l_axis.h5")
with h5py.File(vit, "r") as f, h5py.File(lfile, "w") as g:
    g["q"] = np.stack(Q)
    g["k"] = np.stack(K)
    for key in ("grid", "prefix_tokens"):
        g.attrs[key] = f.attrs[key]
    g["q"].attrs["layout"] = "lhnd"
    g["k"].attrs["layout"] = "lhnd"
a = run(["depth", vit, "--mechanism", "softmax,linear", "--json", "-"])
b = run(["depth", lfile, "--layout", "lhnd", "--mechanism", "softmax,linear", "--scale", "0.25", "--json", "-"])
if a is not None and b is not None:
    da, db = json.loads(a), json.loads(b)
    for sa, sb in zip(da["depth"], db["depth"]):
        for ra, rb in zip(sa["results"], sb["results"]):
            for key in ("rank", "effective_rank", "residual_to_uniform"):
                close(rb[key], ra[key], f"l axis depth {sa['depth']} {ra['mechanism']} {key}", rel=1e-12)

# The causal trained LM: per-layer, per-head learned mixing matrices (the file's attributes), N = 512, 2 layers.
lm = os.path.join(root, "data", "trained_lm_mhla.h5")
out = run(["depth", lm, "--mechanism", "mhla,softmax", "--json", "-"])
if out is not None:
    doc = json.loads(out)
    with h5py.File(lm, "r") as f:
        nl = len([k for k in f["layers"].keys()])
        causal = bool(f.attrs.get("causal", True))
        for mi, mech in enumerate(["mhla", "softmax"]):
            layers_a = []
            for l in range(nl):
                q, k = f[f"layers/{l}/q"][()], f[f"layers/{l}/k"][()]
                mats = []
                for h in range(q.shape[0]):
                    if mech == "mhla":
                        mc = f[f"layers/{l}/mixing"][h]
                        blocks = mc.shape[0]
                        mats.append(attnref.attention_matrix("mhla", q[h], k[h], causal=causal, blocks=blocks,
                                                             mixing_matrix=mc))
                    else:
                        mats.append(attnref.attention_matrix("softmax", q[h], k[h], causal=causal,
                                                             scale=float(f[f"layers/{l}/q"].attrs.get("scale", 0.25))))
                layers_a.append(np.mean(mats, axis=0))
            compare(doc, reference_products(layers_a, 0.5), mi, f"lm {mech}")
    if not all("past_block" in r for s in doc["depth"] for r in s["results"]):
        problems.append("lm: a causal product without its past block")

# Errors: a file without layers, a bad alpha: one error line, exit 2, nothing on stdout.
for args in (["depth", os.path.join(root, "data", "gaussian.h5")], ["depth", vit, "--alpha", "1.5"],
             ["depth", vit, "--heads", "max"]):
    p = subprocess.run([binary] + args, capture_output=True, text=True)
    lines = p.stderr.strip().splitlines()
    if p.returncode != 2 or len(lines) != 1 or not lines[0].startswith("error:") or p.stdout:
        problems.append(f"{' '.join(args[1:])}: exit {p.returncode}, stderr {p.stderr.strip()!r}")
    elif "gaussian" in args[1] and "depth needs the layers of one model" not in lines[0]:
        problems.append(f"a file without layers: {lines[0]!r} does not say that depth needs layers")

# The same from a batch job's [depth]: depth/<name>.json equals `attnscope depth --json` on the file (the batch's
# fingerprint aside), depth/<name>.csv holds its numbers, a rerun keeps them, a changed alpha redoes them, shards
# split the files and `merge` carries their depth folders; a bad [depth] is one error line before anything is made.
def strip(doc):
    doc = dict(doc)
    doc.pop("batch", None)
    doc.pop("kernels", None)   # the batch records its GEMM choices too
    doc["input"] = {k: v for k, v in doc["input"].items() if k != "file"}
    return doc


lm_file = os.path.join(root, "data", "trained_lm_mhla.h5")
job = os.path.join(work, "depth_job.toml")


def write_job(alpha, extra=""):
    with open(job, "w") as f:
        f.write(f'inputs = ["{vit}", "{lm_file}"]\nq = "/layers/0/q"\nk = "/layers/0/k"\nheads = "all"\nlayers = "all"\n'
                f'mechanisms = "softmax,linear"\n[depth]\nalpha = {alpha}\n{extra}')


write_job(0.5)
out_dir = os.path.join(work, "depth_batch")
p = subprocess.run([binary, "batch", job, "--out", out_dir], capture_output=True, text=True)
if p.returncode != 0 or "2 depth documents" not in p.stderr:
    problems.append(f"batch [depth]: exit {p.returncode}: {p.stderr[-400:]}")
else:
    for name, path in (("vit_digits", vit), ("trained_lm_mhla", lm_file)):
        with open(os.path.join(out_dir, "depth", name + ".json")) as f:
            got = json.load(f)
        want = run(["depth", path, "--mechanism", "softmax,linear", "--json", "-"])
        if want is not None and strip(got) != strip(json.loads(want)):
            problems.append(f"batch depth/{name}.json differs from `attnscope depth --json`")
        with open(os.path.join(out_dir, "depth", name + ".csv")) as f:
            rows = f.read().strip().splitlines()
        steps = [(s["depth"], r) for s in got["depth"] for r in s["results"]]
        if len(rows) != 1 + len(steps):
            problems.append(f"depth/{name}.csv: {len(rows) - 1} rows, {len(steps)} results")
        else:
            for line, (_, r) in zip(rows[1:], steps):
                cells = line.split(",")
                close(float(cells[-1]), r["residual_to_uniform"], f"depth/{name}.csv residual", rel=1e-15)
    again = subprocess.run([binary, "batch", job, "--out", out_dir], capture_output=True, text=True)
    if again.returncode != 0 or "0 depth documents" not in again.stderr:
        problems.append(f"batch [depth] rerun: {again.stderr[-300:]}")
    write_job(1.0)
    changed = subprocess.run([binary, "batch", job, "--out", out_dir], capture_output=True, text=True)
    if changed.returncode != 0 or "2 depth documents" not in changed.stderr or "depth of" not in changed.stderr:
        problems.append(f"batch [depth] alpha changed: {changed.stderr[-300:]}")
    shards = []
    for i in range(2):
        d = os.path.join(work, f"depth_shard{i}")
        shards.append(d)
        sp = subprocess.run([binary, "batch", job, "--out", d, "--shard", f"{i}/2"], capture_output=True, text=True)
        if sp.returncode != 0:
            problems.append(f"batch [depth] shard {i}: {sp.stderr[-300:]}")
    merged = os.path.join(work, "depth_merged")
    mp = subprocess.run([binary, "merge"] + shards + ["--out", merged], capture_output=True, text=True)
    if mp.returncode != 0 or sorted(os.listdir(os.path.join(merged, "depth"))) != [
            "trained_lm_mhla.csv", "trained_lm_mhla.json", "vit_digits.csv", "vit_digits.json"]:
        problems.append(f"merge of [depth] shards: exit {mp.returncode} {mp.stderr[-300:]}")
for bad in ("alpha = 2.0\n", "alpha = 0.5\nlayer = 1\n", 'alpha = "half"\n'):
    with open(job, "w") as f:
        f.write(f'inputs = ["{vit}"]\nq = "/layers/0/q"\nk = "/layers/0/k"\n[depth]\n{bad}')
    d = os.path.join(work, "depth_bad")
    p = subprocess.run([binary, "batch", job, "--out", d], capture_output=True, text=True)
    lines = p.stderr.strip().splitlines()
    if p.returncode != 2 or len(lines) != 1 or not lines[0].startswith("error:") or os.path.exists(d):
        problems.append(f"[depth] {bad.strip()!r}: exit {p.returncode}, stderr {p.stderr.strip()!r}")

cli_checks.report(problems)
