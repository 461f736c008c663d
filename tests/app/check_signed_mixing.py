"""A learned Mc may be signed (docs/maths.md 1.4): it is accepted; a row whose normaliser is <= 0 follows the
degenerate-normaliser rule (MHLA null with a warning); entropy is null with a warning when an entry of A is
negative. Checked against the NumPy reference (tests/reference/attnref.py, mixing_matrix=) through
`matrix --out` and `analyze --json` (dense, structured and streamed paths), 1e-10 relative, with a file holding
one signed Mc per head (H x M x M), non-causal (row and official normalisation) and causal.
usage: check_signed_mixing.py ATTNSCOPE WORKDIR"""
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
rng = np.random.default_rng(14)
H, N, D, M = 2, 64, 8, 4
q = rng.standard_normal((H, N, D))
k = rng.standard_normal((H, N, D))
# One signed Mc per head, every row normaliser positive (checked below): small negative entries in a positive
# matrix; the causal one lower triangular with a negative entry below the diagonal.
signed = rng.uniform(0.3, 1.0, (H, M, M))
signed[0, 1, 2] = -0.15
signed[1, 3, 0] = -0.2
signed[1, 0, 1] = -0.05
causal_signed = np.tril(rng.uniform(0.3, 1.0, (H, M, M)))
causal_signed[:, 2, 0] = -0.1
# Head 0 fine, head 1 with a row of block 2 whose weights are mostly negative: normalisers <= 0 there.
degenerate = signed.copy()
degenerate[1, 2, :] = [-1.0, -1.0, 0.1, -1.0]
path = os.path.join(work, "signed.h5")
with h5py.File(path, "w") as f:
    f["q"] = q
    f["k"] = k
    f["mix"] = signed
    f["causal_mix"] = causal_signed
    f["degenerate"] = degenerate


def normalisers(h, Mc, **opts):
    """The row sums of the raw scores P of head h (the reference's definition, before normalisation)."""
    P = attnref.attention_matrix("mhla", q[h], k[h], mixing_matrix=Mc, normalize="none", **opts)
    return P.sum(axis=1)


def mhla_of(doc):
    return [r for r in doc["results"] if r["mechanism"] == "mhla"][0]


def rel(a, b):
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)


def check_head(label, h, opts, ref_opts, Mc):
    args = ["--q", path + ":/q", "--k", path + ":/k", "--head", str(h), "--mechanism", "mhla"] + opts
    ref = attnref.attention_matrix("mhla", q[h], k[h], mixing_matrix=Mc, **ref_opts)
    out = os.path.join(work, f"A_{label.replace(' ', '_')}_{h}.npy")
    if run(["matrix"] + args + ["--out", out]) is not None:
        err = rel(np.load(out), ref)
        if not err <= 1e-10:
            problems.append(f"{label}, head {h}: matrix differs from the reference by {err:.3g} (relative)")
    s = np.linalg.svd(ref, compute_uv=False)
    for method in ("dense", "auto", "streaming"):
        if method == "streaming" and ref_opts.get("causal"):
            continue   # no factors: a causal spectrum needs the dense matrix
        text = run(["analyze"] + args + ["--method", method, "--json", "-"])
        if text is None:
            continue
        r = mhla_of(json.loads(text))
        got = np.array(r["singular_values"] or [np.nan])
        if got.shape != s.shape or not np.abs(got - s).max() <= 1e-10 * s[0]:
            problems.append(f"{label}, head {h}, --method {method}: singular values differ from the reference")
        if r["rank"] != int(np.linalg.matrix_rank(ref)):
            problems.append(f"{label}, head {h}, --method {method}: rank {r['rank']}, reference "
                            f"{int(np.linalg.matrix_rank(ref))}")
        negative = bool(np.any(ref < 0))
        said = [w for w in r["warnings"] if "negative entries" in w]
        if negative and (r["entropy"] is not None or not said or "mixing" not in said[0]):
            problems.append(f"{label}, head {h}, --method {method}: A has negative entries, entropy {r['entropy']}, "
                            f"warnings {r['warnings']}")
        if not negative:
            want = attnref.metrics(ref, attnref.allowed_keys("mhla", N, **ref_opts))["entropy"]["mean"]
            if r["entropy"] is None or not abs(r["entropy"]["mean"] - want) <= 1e-10 * abs(want):
                problems.append(f"{label}, head {h}, --method {method}: entropy {r['entropy']}, reference {want}")


for h in range(H):
    if not np.all(normalisers(h, signed[h], blocks=M) > 0):
        problems.append(f"fixture: head {h}'s signed Mc has a row normaliser <= 0")
    check_head("1-D blocks", h, ["--blocks", str(M), "--mixing", path + ":/mix"], dict(blocks=M), signed[h])
    check_head("official", h, ["--blocks", str(M), "--normalize", "official", "--mixing", path + ":/mix"],
               dict(blocks=M, normalize="official"), signed[h])
    check_head("causal chunks", h, ["--causal", "--chunk", str(N // M), "--mixing", path + ":/causal_mix"],
               dict(causal=True, chunk=N // M), causal_signed[h])
if not np.any(attnref.attention_matrix("mhla", q[0], k[0], mixing_matrix=signed[0], blocks=M) < 0):
    problems.append("fixture: head 0's signed Mc gives no negative entry of A (the entropy check would be idle)")

# A row normaliser <= 0 (head 1 of `degenerate`): MHLA null with a warning naming the row; head 0 of the same
# file is measured as usual; matrix --out refuses with one error line.
z = normalisers(1, degenerate[1], blocks=M)
if not np.any(z <= 0):
    problems.append("fixture: the degenerate Mc leaves every normaliser positive")
else:
    first = int(np.flatnonzero(z <= 0)[0])
    for method in ("dense", "auto"):
        text = run(["analyze", "--q", path + ":/q", "--k", path + ":/k", "--head", "1", "--blocks", str(M),
                    "--mixing", path + ":/degenerate", "--method", method, "--json", "-"])
        if text is None:
            continue
        doc = json.loads(text)
        r = mhla_of(doc)
        if r["rank"] is not None or r["entropy"] is not None or not any(f"t={first} " in w for w in r["warnings"]):
            problems.append(f"degenerate normaliser, --method {method}: rank {r['rank']}, entropy {r['entropy']}, "
                            f"warnings {r['warnings']} (first row <= 0: {first})")
        others = [x for x in doc["results"] if x["mechanism"] != "mhla"]
        if any(x["rank"] is None for x in others):
            problems.append(f"degenerate normaliser, --method {method}: softmax / linear lost their numbers")
    p = subprocess.run([binary, "matrix", "--q", path + ":/q", "--k", path + ":/k", "--head", "1", "--mechanism", "mhla",
                        "--blocks", str(M), "--mixing", path + ":/degenerate", "--out", os.path.join(work, "deg.npy")],
                       capture_output=True, text=True)
    if p.returncode != 2 or not p.stderr.startswith("error: ") or p.stderr.count("\n") != 1:
        problems.append(f"matrix with a normaliser <= 0: exit {p.returncode}, stderr {p.stderr!r}")
    check_head("degenerate file, head 0", 0, ["--blocks", str(M), "--mixing", path + ":/degenerate"], dict(blocks=M),
               degenerate[0])

cli_checks.report(problems)
