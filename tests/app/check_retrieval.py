"""Retrieval mass and rank (docs/maths.md 2.2, docs/formats.md "Retrieval targets") against NumPy: a file with
queries and keys [B, H, N, d] and `retrieval_targets` [B, P, 2] (t, j*); for batch elements 0 and 2, causal and
not, prefix tokens taken off (pairs in the prefix dropped), every mechanism: retrieval_mass = mean_t A[t, j*] and
retrieval_rank = mean of 1 + #{allowed j: A[t, j] > A[t, j*]}, to 1e-12. A file without targets has no
retrieval fields; a batch job records them per unit; bad targets (wrong shape, fractions, a causal row asked
for a future key, a batch element the file lacks) are one `error:` line, exit 2.
usage: check_retrieval.py ATTNSCOPE WORKDIR"""
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
rng = np.random.default_rng(11)
B, H, N, D, P = 3, 2, 48, 8, 10
q = rng.standard_normal((B, H, N, D))
k = rng.standard_normal((B, H, N, D))
targets = np.zeros((B, P, 2), dtype=np.int64)
for b in range(B):
    t = np.sort(rng.choice(np.arange(8, N), size=P, replace=False))
    targets[b, :, 0] = t
    targets[b, :, 1] = [rng.integers(0, tt + 1) for tt in t]   # causal: j* <= t
targets[0, 0] = (2, 1)   # inside 3 prefix tokens: dropped with --prefix-tokens 3
path = os.path.join(work, "recall.h5")
with h5py.File(path, "w") as f:
    f["q"], f["k"] = q, k
    f["retrieval_targets"] = targets


def reference(A, pairs, allowed):
    mass = [A[t, j] for t, j in pairs]
    rank = [1 + int(np.sum(A[t, :allowed[t]] > A[t, j])) for t, j in pairs]
    return float(np.mean(mass)), float(np.mean(rank))


MECHS = ["softmax", "linear", "mhla", "decay"]
compared = 0
for b in (0, 2):
    for causal in (False, True):
        for prefix in (0, 3):
            args = ["analyze", "--q", path + ":q", "--k", path + ":k", "--at", f"b={b}", "--head", "1",
                    "--mechanism", ",".join(MECHS), "--blocks", "4", "--prefix-tokens", str(prefix), "--json", "-"]
            out = run(args + (["--causal"] if causal else []))
            if out is None:
                continue
            doc = json.loads(out)
            n = N - prefix
            pairs = [(t - prefix, j - prefix) for t, j in targets[b] if t >= prefix and j >= prefix]
            Q, K = q[b, 1, prefix:], k[b, 1, prefix:]
            for r in doc["results"]:
                m = r["mechanism"]
                A = attnref.attention_matrix(m, Q, K, causal=causal, blocks=4, head=1)
                allowed = [t + 1 if causal else n for t in range(n)]
                mass, rank = reference(A, pairs, allowed)
                lab = f"b={b} causal={causal} prefix={prefix} {m}"
                for key, want in (("retrieval_mass", mass), ("retrieval_rank", rank)):
                    got = r.get(key)
                    compared += 1
                    if got is None or not math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-15):
                        problems.append(f"{lab}: {key} {got!r}, numpy {want!r}")

if compared != 2 * 2 * 2 * len(MECHS) * 2:
    problems.append(f"{compared} retrieval numbers compared, {2 * 2 * 2 * len(MECHS) * 2} expected")

# No targets in the file: no retrieval fields.
plain = os.path.join(work, "plain.h5")
with h5py.File(plain, "w") as f:
    f["q"], f["k"] = q, k
out = run(["analyze", "--q", plain + ":q", "--k", plain + ":k", "--mechanism", "linear", "--json", "-"])
if out is not None and "retrieval_mass" in json.loads(out)["results"][0]:
    problems.append("a file without retrieval_targets has retrieval fields")

# The summary table says it in one line (numbers of the JSON), only for a file with targets.
text = run(["analyze", "--q", path + ":q", "--k", path + ":k", "--at", "b=2", "--head", "1", "--mechanism", "linear"])
if text is not None:
    line = [x for x in text.splitlines() if x.startswith("retrieval (")]
    doc = json.loads(run(["analyze", "--q", path + ":q", "--k", path + ":k", "--at", "b=2", "--head", "1",
                          "--mechanism", "linear", "--json", "-"]) or "{}")
    want = f"linear: mass {doc['results'][0]['retrieval_mass']:.4f} rank {doc['results'][0]['retrieval_rank']:.2f}"
    if len(line) != 1 or not line[0].endswith(want):
        problems.append(f"analyze's table: retrieval line {line!r}, expected one ending {want!r}")
plain_text = run(["analyze", "--q", plain + ":q", "--k", plain + ":k", "--mechanism", "linear"])
if plain_text is not None and "retrieval (" in plain_text:
    problems.append("analyze's table has a retrieval line for a file without targets")

# A batch job over every batch element records them per unit (summary.csv and results.jsonl).
job = os.path.join(work, "job.toml")
with open(job, "w") as f:
    f.write(f'inputs = ["{path}"]\nq = "q"\nk = "k"\nheads = [1]\nmechanisms = "softmax,linear"\nat = {{ b = "all" }}\n')
bdir = os.path.join(work, "batch")
p = subprocess.run([binary, "batch", job, "--out", bdir], capture_output=True, text=True)
if p.returncode != 0:
    problems.append(f"batch: exit {p.returncode}: {p.stderr[-300:]}")
else:
    with open(os.path.join(bdir, "results.jsonl")) as f:
        recs = [json.loads(line) for line in f if line.strip()]
    for rec in recs:
        res = rec["result"] if "result" in rec else rec
        b = rec.get("at", {}).get("b", rec.get("input", {}).get("at", {}).get("b"))
        m = res["mechanism"]
        A = attnref.attention_matrix(m, q[b, 1], k[b, 1], blocks=4)
        mass, _ = reference(A, [tuple(x) for x in targets[b]], [N] * N)
        if not math.isclose(res.get("retrieval_mass") or -1, mass, rel_tol=1e-12):
            problems.append(f"batch b={b} {m}: retrieval_mass {res.get('retrieval_mass')!r}, numpy {mass!r}")
    if len(recs) != 6:
        problems.append(f"batch: {len(recs)} records, 6 expected")

# Bad targets: one error line, exit 2.
bad_cases = {
    "shape": np.zeros((B, P, 3), dtype=np.int64),
    "fraction": targets.astype(np.float64) + 0.5,
    "future": np.array([[[5, 9]]] * B, dtype=np.int64),
}
for name, data in bad_cases.items():
    bad = os.path.join(work, f"bad_{name}.h5")
    with h5py.File(bad, "w") as f:
        f["q"], f["k"] = q, k
        f["retrieval_targets"] = data
    p = subprocess.run([binary, "analyze", "--q", bad + ":q", "--k", bad + ":k", "--causal", "--mechanism", "linear"],
                       capture_output=True, text=True)
    lines = p.stderr.strip().splitlines()
    if p.returncode != 2 or len(lines) != 1 or not lines[0].startswith("error:") or "retrieval_targets" not in lines[0]:
        problems.append(f"bad targets ({name}): exit {p.returncode}, stderr {p.stderr.strip()!r}")
short = os.path.join(work, "short.h5")
with h5py.File(short, "w") as f:
    f["q"], f["k"] = q, k
    f["retrieval_targets"] = targets[:2]
p = subprocess.run([binary, "analyze", "--q", short + ":q", "--k", short + ":k", "--at", "b=2", "--mechanism", "linear"],
                   capture_output=True, text=True)
if p.returncode != 2 or "batch elements" not in p.stderr:
    problems.append(f"targets for 2 elements, b=2: exit {p.returncode}, stderr {p.stderr.strip()!r}")

cli_checks.report(problems)
