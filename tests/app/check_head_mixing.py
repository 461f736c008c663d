"""Learned mixing matrices per head (docs/maths.md 1.6, docs/cli.md --mixing): a mixing dataset of shape
H x M x M gives query head h the matrix [h]. Checked against the NumPy reference (tests/reference/attnref.py)
for every head, non-causal (1-D blocks and a grid) and causal (chunks, a lower-triangular matrix), through
--mixing and through a `mixing` attribute on the queries' dataset (the default for that layer, reported as
taken from the file); a stack whose head count differs from the queries' is one error naming both.
usage: check_head_mixing.py ATTNSCOPE WORKDIR"""
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
rng = np.random.default_rng(11)
H, N, D, M = 3, 64, 8, 4
path = os.path.join(work, "heads.h5")
q = rng.standard_normal((H, N, D))
k = rng.standard_normal((H, N, D))
mix = rng.uniform(0.05, 1.0, (H, M, M))
causal_mix = np.tril(rng.uniform(0.05, 1.0, (H, M, M)))
grid_mix = rng.uniform(0.05, 1.0, (H, 4, 4))
with h5py.File(path, "w") as f:
    f["q"] = q
    f["k"] = k
    f["mix"] = mix
    f["causal_mix"] = causal_mix
    f["grid_mix"] = grid_mix
    f["mix_two_heads"] = mix[:2]
    f["mix_one"] = mix[1]
    lq = f.create_dataset("layers/0/q", data=q)
    f["layers/0/k"] = k
    f["layers/0/mixing"] = mix
    lq.attrs["mixing"] = "/layers/0/mixing"


def matrix(args, out):
    if run(["matrix"] + args + ["--out", out]) is None:
        return None
    return np.load(out)


cases = [
    ("1-D blocks", ["--blocks", str(M), "--mixing", path + ":/mix"], dict(blocks=M), mix),
    ("causal chunks", ["--causal", "--chunk", str(N // M), "--mixing", path + ":/causal_mix"],
     dict(causal=True, chunk=N // M), causal_mix),
    ("grid", ["--grid", "8,8", "--block-grid", "2,2", "--mixing", path + ":/grid_mix"],
     dict(grid=[8, 8], block_grid=[2, 2]), grid_mix),
]
for label, opts, ref_opts, stack in cases:
    for h in range(H):
        args = ["--q", path + ":/q", "--k", path + ":/k", "--head", str(h), "--mechanism", "mhla"] + opts
        A = matrix(args, os.path.join(work, f"m_{h}.npy"))
        if A is None:
            continue
        ref = attnref.attention_matrix("mhla", q[h], k[h], mixing_matrix=stack[h], **ref_opts)
        err = np.abs(A - ref).max()
        if not err <= 1e-12:
            problems.append(f"{label}, head {h}: max |A - reference| = {err:.3g}")
        out = run(["analyze"] + args + ["--json", "-"])
        if out is None:
            continue
        params = json.loads(out)["results"][0]["params"]
        if params.get("mixing_head") != h or params.get("mixing") != opts[-1]:
            problems.append(f"{label}, head {h}: params name mixing {params.get('mixing')} head {params.get('mixing_head')}")

# The layer's attribute: no --mixing, the file's stack, reported as from the file.
for h in range(H):
    out = run(["analyze", "--q", path + ":/layers/0/q", "--k", path + ":/layers/0/k", "--head", str(h),
               "--mechanism", "mhla", "--blocks", str(M), "--json", "-"])
    if out is None:
        continue
    doc = json.loads(out)
    params = doc["results"][0]["params"]
    if doc["input"].get("defaults_from_file", {}).get("mixing") != "/layers/0/mixing":
        problems.append(f"attribute, head {h}: defaults_from_file = {doc['input'].get('defaults_from_file')}")
    if params.get("mixing_head") != h or "/layers/0/mixing" not in params.get("mixing", ""):
        problems.append(f"attribute, head {h}: params {params}")
    ref = attnref.attention_matrix("mhla", q[h], k[h], blocks=M, mixing_matrix=mix[h])
    s = np.linalg.svd(ref, compute_uv=False)
    got = np.array(doc["results"][0]["singular_values"])
    if not np.abs(got - s).max() <= 1e-12 * s[0]:
        problems.append(f"attribute, head {h}: singular values differ from the reference by {np.abs(got - s).max():.3g}")

# Without a block option, the learned M x M matrix gives the block count: M 1-D blocks.
out = run(["analyze", "--q", path + ":/layers/0/q", "--k", path + ":/layers/0/k", "--head", "1", "--mechanism", "mhla",
           "--json", "-"])
if out is not None:
    doc = json.loads(out)
    if doc["input"]["defaults_from_file"].get("blocks") != M or doc["results"][0]["params"].get("blocks") != M:
        problems.append(f"learned Mc without a block option: {doc['input']['defaults_from_file']} {doc['results'][0]['params']}")

# A 2-D matrix is the same for every head (no mixing_head); a stack of the wrong head count is refused.
out = run(["analyze", "--q", path + ":/q", "--k", path + ":/k", "--head", "2", "--mechanism", "mhla", "--blocks",
           str(M), "--mixing", path + ":/mix_one", "--json", "-"])
if out is not None and "mixing_head" in json.loads(out)["results"][0]["params"]:
    problems.append("a 2-D mixing matrix reports a mixing_head")
p = subprocess.run([binary, "analyze", "--q", path + ":/q", "--k", path + ":/k", "--head", "0", "--blocks", str(M),
                    "--mixing", path + ":/mix_two_heads"], capture_output=True, text=True)
if p.returncode != 2 or not p.stderr.startswith("error: ") or p.stderr.count("\n") != 1 \
        or "2 heads" not in p.stderr or "3 heads" not in p.stderr:
    problems.append(f"head-count mismatch: exit {p.returncode}, stderr {p.stderr!r}")

cli_checks.report(problems)
