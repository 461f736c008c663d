"""The linear-attention families of docs/maths.md 1.8 (decay, gated, cosformer) through the command line, against the
NumPy reference (tests/reference/attnref.py): `matrix` to 1e-12 (max abs) causal and not, 1-D and on a grid, rows
normalised and not, every feature map, the default gamma per head, gates as g and as ln g from --gates and from the
file's `gates` attribute (also at a GQA head); `analyze` spectra and entropy to 1e-10 relative; the identities (gated
with constant gates = causal decay; decay with gamma = 1 = linear attention, said in words; cosformer rank <= 2r);
and the errors (gamma outside (0, 1], gates outside (0, 1] or of the wrong length, gated without --causal, official
normalisation) as one `error:` line, exit 2, no output file.
usage: check_families.py ATTNSCOPE WORKDIR [FAMILY...]"""
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
families = sys.argv[3:] or ["decay", "gated", "cosformer"]
problems = []
run = cli_checks.runner(binary, problems)
rng = np.random.default_rng(5)
H, N, D = 4, 64, 6
path = os.path.join(work, "families.h5")
q = rng.standard_normal((H, N, D))
k = rng.standard_normal((H, N, D))
gates = rng.uniform(0.55, 1.0, (H, N))
with h5py.File(path, "w") as f:
    f["q"] = q
    f["k"] = k
    f["k2"] = k[:2]                       # two key heads: GQA, query heads 0,1 -> 0 and 2,3 -> 1
    f["gates"] = gates
    f["log_gates"] = np.log(gates)
    f["bad_gates"] = np.where(np.arange(N) == 7, 1.25, gates)
    f["short_gates"] = gates[:, : N - 1]
    lq = f.create_dataset("layer/q", data=q)
    f["layer/k"] = k
    f["layer/g"] = gates
    lq.attrs["gates"] = "/layer/g"
    lq.attrs["causal"] = True
    gq = f.create_dataset("grid/q", data=q)   # an 8 x 8 token grid
    f["grid/k"] = k
    gq.attrs["grid"] = [8, 8]


def matrix(args, name):
    out = os.path.join(work, name + ".npy")
    if run(["matrix"] + args + ["--out", out]) is None:
        return None
    return np.load(out)


def compare(label, A, R, tol=1e-12):
    if A is None:
        return
    if A.shape != R.shape:
        problems.append(f"{label}: shape {A.shape}, reference {R.shape}")
        return
    err = float(np.max(np.abs(A - R)))
    scale = max(1.0, float(np.max(np.abs(R))))   # identity features: signed rows with large entries
    if not err <= tol * scale:
        problems.append(f"{label}: max |A - reference| = {err:.3g} > {tol:g} x {scale:.3g}")


def cli_options(o):
    args = []
    if o.get("causal"):
        args.append("--causal")
    if o.get("feature_map"):
        args += ["--feature-map", o["feature_map"]]
    if o.get("normalize"):
        args += ["--normalize", o["normalize"]]
    if o.get("decay") is not None:
        args += ["--decay", repr(o["decay"])]
    return args


def ref_options(o):
    return {key: o[key] for key in ("causal", "feature_map", "normalize", "decay") if key in o}


# Matrices: every family x causal x feature map x normalisation, heads 0 and 3 (decay's default gamma is per head).
for fam in families:
    for causal in ([True] if fam == "gated" else [False, True]):
        for fm in ("relu", "elu1", "identity"):
            for norm in ("row", "none"):
                for h in (0, 3):
                    o = {"causal": causal, "feature_map": fm, "normalize": norm}
                    extra, ref_extra = [], {}
                    if fam == "gated":
                        extra = ["--gates", path + ":/gates"]
                        ref_extra = {"gates": gates[h]}
                    label = f"{fam} h={h} {o}"
                    A = matrix(["--q", path + ":/q", "--k", path + ":/k", "--head", str(h), "--mechanism", fam] +
                               cli_options(o) + extra, "m")
                    R = attnref.attention_matrix(fam, q[h], k[h], head=h, **ref_options(o), **ref_extra)
                    compare(label, A, R)

if "decay" in families:
    for g in (0.5, 0.9, 1.0):
        A = matrix(["--q", path + ":/q", "--k", path + ":/k", "--mechanism", "decay", "--decay", repr(g)], "d")
        compare(f"decay gamma={g}", A, attnref.attention_matrix("decay", q[0], k[0], decay=g))
    # Grid: the Manhattan distance of the file's 8 x 8 grid (non-causal); causal keeps t - j.
    for causal in (False, True):
        args = ["--q", path + ":/grid/q", "--k", path + ":/grid/k", "--mechanism", "decay", "--decay", "0.8"]
        A = matrix(args + (["--causal"] if causal else []), "g")
        R = attnref.attention_matrix("decay", q[0], k[0], decay=0.8, grid=[8, 8], block_grid=[4, 4], causal=causal)
        compare(f"decay grid causal={causal}", A, R)
    # Identity: gamma = 1 is linear attention, and every report says so.
    lin = matrix(["--q", path + ":/q", "--k", path + ":/k", "--mechanism", "linear"], "l")
    one = matrix(["--q", path + ":/q", "--k", path + ":/k", "--mechanism", "decay", "--decay", "1"], "o")
    compare("decay gamma=1 vs linear", one, lin, 1e-14)
    out = run(["analyze", "--q", path + ":/q", "--k", path + ":/k", "--mechanism", "decay", "--decay", "1", "--json", "-"])
    if out is not None and not any("linear attention by construction" in w for w in json.loads(out)["results"][0]["warnings"]):
        problems.append("decay with gamma = 1 does not say that it is linear attention by construction")

if "gated" in families:
    base = ["--q", path + ":/q", "--k", path + ":/k", "--causal", "--mechanism", "gated"]
    for h in (1, 2):
        A = matrix(base + ["--head", str(h), "--gates", path + ":/log_gates", "--gates-log"], "lg")
        compare(f"gated log gates h={h}", A, attnref.attention_matrix("gated", q[h], k[h], causal=True,
                                                                       gates=np.log(gates[h]), gates_log=True))
    # The file's attribute names the gates (and causal); GQA: query head 3 pairs with key head 1, gates of head 3.
    A = matrix(["--q", path + ":/layer/q", "--k", path + ":/layer/k", "--head", "3", "--mechanism", "gated"], "fa")
    compare("gated gates from the file's attribute", A, attnref.attention_matrix("gated", q[3], k[3], causal=True,
                                                                                 gates=gates[3]))
    A = matrix(["--q", path + ":/q", "--k", path + ":/k2", "--head", "3", "--causal", "--mechanism", "gated",
                "--gates", path + ":/gates"], "gqa")
    compare("gated GQA head 3", A, attnref.attention_matrix("gated", q[3], k[1], causal=True, gates=gates[3]))
    # A batch records the gates file's content: after it changed, a rerun into the same folder is refused naming
    # the gates instead of keeping records of the old gates. A random-subsample sweep takes the gates of its tokens.
    bdir = os.path.join(work, "batch")
    os.makedirs(bdir, exist_ok=True)
    np.save(os.path.join(bdir, "g.npy"), gates)
    with open(os.path.join(bdir, "job.toml"), "w") as f:
        f.write('inputs = ["%s"]\nmechanisms = ["gated"]\n[attention]\ncausal = true\ngates = "g.npy"\n' % path)
    out_dir = os.path.join(bdir, "out")
    run(["batch", os.path.join(bdir, "job.toml"), "--out", out_dir])
    np.save(os.path.join(bdir, "g.npy"), np.full((H, N), 0.9))
    p = subprocess.run([binary, "batch", os.path.join(bdir, "job.toml"), "--out", out_dir], capture_output=True, text=True)
    if p.returncode != 2 or "gates" not in p.stderr:
        problems.append(f"batch rerun after the gates changed: exit {p.returncode}, {p.stderr.strip()!r}")
    out = run(["sweep", "--q", path + ":/q", "--k", path + ":/k", "--causal", "--mechanism", "gated", "--gates",
               path + ":/gates", "--vary", "n=16,32", "--subsample", "random", "--draws", "2", "--csv", "-"])
    if out is not None and len(out.strip().splitlines()) != 5:
        problems.append(f"a random-subsample gated sweep did not give 4 records: {out!r}")
    # Identity: constant gates g equal causal decay with gamma g.
    const = os.path.join(work, "const.npy")   # laid out like the queries (h, n, d) without d
    np.save(const, np.full((H, N), 0.8))
    A = matrix(["--q", path + ":/q", "--k", path + ":/k", "--causal", "--mechanism", "gated", "--gates", const], "cg")
    Bm = matrix(["--q", path + ":/q", "--k", path + ":/k", "--causal", "--mechanism", "decay", "--decay", "0.8"], "cd")
    compare("gated constant 0.8 vs causal decay 0.8", A, Bm, 1e-13)

if "cosformer" in families:
    for causal in (False, True):
        out = run(["analyze", "--q", path + ":/q", "--k", path + ":/k", "--mechanism", "cosformer", "--json", "-"] +
                  (["--causal"] if causal else []))
        if out is None:
            continue
        r = json.loads(out)["results"][0]
        if causal:
            continue
        if not r["rank"] <= 2 * D:
            problems.append(f"cosformer rank {r['rank']} > 2r = {2 * D}")
        if r["method"]["spectrum"] != "structured":
            problems.append(f"non-causal cosformer spectrum by {r['method']['spectrum']}, not from its cos/sin factors")
        sr = np.array(attnref.metrics(attnref.attention_matrix("cosformer", q[0], k[0]))["singular_values"])
        s = np.array(r["singular_values"])
        top = s[: 2 * D]   # the structured spectrum's non-zero values against the dense SVD's
        if not np.allclose(top, sr[: 2 * D], rtol=1e-10, atol=1e-12 * sr[0]):
            problems.append(f"cosformer structured singular values differ from the reference by "
                            f"{np.max(np.abs(top - sr[: 2 * D])):.3g}")

# analyze: spectrum and entropy against the reference's metrics (1e-10 relative).
for fam in families:
    args = ["--q", path + ":/q", "--k", path + ":/k", "--head", "2", "--mechanism", fam, "--causal", "--json", "-"]
    ref_extra = {}
    if fam == "gated":
        args += ["--gates", path + ":/gates"]
        ref_extra = {"gates": gates[2]}
    out = run(["analyze"] + args)
    if out is None:
        continue
    r = json.loads(out)["results"][0]
    A = attnref.attention_matrix(fam, q[2], k[2], causal=True, head=2, **ref_extra)
    m = attnref.metrics(A, attnref.allowed_keys(fam, N, causal=True))
    s, sr = np.array(r["singular_values"]), np.array(m["singular_values"])
    if not np.allclose(s, sr, rtol=1e-10, atol=1e-12 * sr[0]):
        problems.append(f"analyze {fam}: singular values differ from the reference by {np.max(np.abs(s - sr)):.3g}")
    for key in ("rank", "effective_rank", "stable_rank"):
        if not np.isclose(r[key], m[key], rtol=1e-10):
            problems.append(f"analyze {fam}: {key} {r[key]} vs reference {m[key]}")
    for key in ("mean", "std", "min", "max", "normalized_mean"):
        if not np.isclose(r["entropy"][key], m["entropy"][key], rtol=1e-10):
            problems.append(f"analyze {fam}: entropy.{key} {r['entropy'][key]} vs reference {m['entropy'][key]}")


# Errors: one line, exit 2, no output.
def refused(label, args, words):
    out = os.path.join(work, "refused.npy")
    if os.path.exists(out):
        os.remove(out)
    p = subprocess.run([binary, "matrix"] + args + ["--out", out], capture_output=True, text=True)
    lines = p.stderr.strip().splitlines()
    if p.returncode != 2 or len(lines) != 1 or not lines[0].startswith("error: ") or words not in lines[0]:
        problems.append(f"{label}: exit {p.returncode}, stderr {p.stderr.strip()!r} (expected one error naming {words!r})")
    if os.path.exists(out):
        problems.append(f"{label}: left {out}")


qk = ["--q", path + ":/q", "--k", path + ":/k"]
if "decay" in families:
    for g in ("0", "1.5", "-0.2"):
        refused(f"decay {g}", qk + ["--mechanism", "decay", "--decay", g], "gamma")
    refused("decay official", qk + ["--mechanism", "decay", "--normalize", "official"], "official")
if "cosformer" in families:
    refused("cosformer official", qk + ["--mechanism", "cosformer", "--normalize", "official"], "official")
if "gated" in families:
    refused("gated not causal", qk + ["--mechanism", "gated", "--gates", path + ":/gates"], "causal")
    refused("gated no gates", qk + ["--causal", "--mechanism", "gated"], "gates")
    refused("gate 1.25", qk + ["--causal", "--mechanism", "gated", "--gates", path + ":/bad_gates"], "token 7")
    refused("gates short", qk + ["--causal", "--mechanism", "gated", "--gates", path + ":/short_gates"], "tokens")
    refused("log gate > 0", qk + ["--causal", "--mechanism", "gated", "--gates", path + ":/gates", "--gates-log"], "gate")

cli_checks.report(problems)
