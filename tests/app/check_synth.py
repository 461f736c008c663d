"""Checks `attnscope synth` output with h5py and NumPy: layout, attributes, determinism, and that
each kind has the structure it promises (local1d / local2d softmax attention is local).
usage: check_synth.py ATTNSCOPE WORKDIR"""
import os
import subprocess
import sys

import h5py
import numpy as np

import cli_checks

binary, work = sys.argv[1], sys.argv[2]
problems = []


def synth(name, *args):
    path = os.path.join(work, name)
    p = subprocess.run([binary, "synth", *args, "--out", path], capture_output=True, text=True)
    if p.returncode != 0:
        problems.append(f"synth {' '.join(args)} exited {p.returncode}: {p.stderr}")
        return None
    return path


def softmax(Q, K):
    S = Q @ K.T / np.sqrt(Q.shape[1])
    S -= S.max(axis=1, keepdims=True)
    E = np.exp(S)
    return E / E.sum(axis=1, keepdims=True)


def mean_distance(A, coords):
    """Attention-weighted mean distance between query and key positions."""
    D = np.sqrt(((coords[:, None, :] - coords[None, :, :]) ** 2).sum(-1))
    return float((A * D).sum(axis=1).mean()), float(D.mean())


for kind in ("gaussian", "lowrank", "local1d", "local2d"):
    extra = ["--grid", "16,16"] if kind == "local2d" else []
    path = synth(f"{kind}.h5", "--n", "256", "--d", "32", "--heads", "3", "--kind", kind, "--seed", "5", *extra)
    if path is None:
        continue
    with h5py.File(path, "r") as f:
        for name in ("q", "k", "v"):
            ds = f[name]
            if ds.shape != (3, 256, 32) or ds.dtype != np.float32:
                problems.append(f"{kind}: /{name} is {ds.dtype} {ds.shape}, want float32 (3, 256, 32)")
        attrs = dict(f.attrs)
        if attrs.get("kind") != kind and attrs.get("kind") != kind.encode():
            problems.append(f"{kind}: attribute kind = {attrs.get('kind')!r}")
        if int(attrs.get("seed", -1)) != 5:
            problems.append(f"{kind}: attribute seed = {attrs.get('seed')!r}")
        if kind == "local2d" and list(attrs.get("grid", [])) != [16, 16]:
            problems.append(f"{kind}: attribute grid = {attrs.get('grid')!r}")
        q = f["q"][...].astype(np.float64)
        k = f["k"][...].astype(np.float64)
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(k))):
        problems.append(f"{kind}: non-finite values")
    # different heads differ
    if np.allclose(q[0], q[1]):
        problems.append(f"{kind}: heads 0 and 1 are identical")
    # structure
    if kind in ("local1d", "local2d", "gaussian"):
        coords = (np.arange(256)[:, None].astype(float) if kind != "local2d"
                  else np.stack(np.unravel_index(np.arange(256), (16, 16)), 1).astype(float))
        for h in range(3):
            A = softmax(q[h], k[h])
            dist, uniform = mean_distance(A, coords)
            if kind == "gaussian":
                if dist < 0.7 * uniform:
                    problems.append(f"gaussian head {h}: attention unexpectedly local ({dist:.2f} vs {uniform:.2f})")
            elif dist > 0.25 * uniform:
                problems.append(f"{kind} head {h}: attention not local: mean distance {dist:.2f} vs {uniform:.2f} uniform")
            else:
                print(f"{kind} head {h}: mean attention distance {dist:.2f} (uniform {uniform:.2f})")
    if kind == "lowrank":
        s = np.linalg.svd(q[0], compute_uv=False)
        if s[4] > 0.2 * s[0]:
            problems.append(f"lowrank: q spectrum not low-rank: {s[:6]}")

# determinism: same seed, same data; another seed, other data
a = synth("det_a.h5", "--n", "64", "--d", "8", "--kind", "local1d", "--seed", "9")
b = synth("det_b.h5", "--n", "64", "--d", "8", "--kind", "local1d", "--seed", "9")
c = synth("det_c.h5", "--n", "64", "--d", "8", "--kind", "local1d", "--seed", "10")
if a and b and c:
    with h5py.File(a) as fa, h5py.File(b) as fb, h5py.File(c) as fc:
        if not np.array_equal(fa["q"][...], fb["q"][...]):
            problems.append("same seed gave different data")
        if np.array_equal(fa["q"][...], fc["q"][...]):
            problems.append("different seeds gave the same data")
        if fa["q"].shape != (1, 64, 8):
            problems.append(f"default heads: shape {fa['q'].shape}")

cli_checks.report(problems)
