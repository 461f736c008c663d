"""AttnScope against the NumPy way of doing the same work, in one run.

For each N: random Q, K (N x d, d = 64) -> softmax, linear (relu) and MHLA (M = 16 contiguous blocks,
cos mixing) attention matrices, all singular values, numerical rank, effective and stable rank, and row
entropy. The NumPy pipeline is what a notebook would do (dense matrices, np.linalg.svd(compute_uv=False));
`attnscope analyze` runs on the same inputs (an HDF5 file). Prints both wall times, the ratio, and
whether every number agrees (ranks exactly; singular values to 1e-10 * s_1; the rest to 1e-10 relative).

Top-k (--topk-sizes, --topk K): softmax's K largest singular values without forming N x N, on
`attnscope synth --kind local1d` activations: `attnscope analyze --method streaming --top-k K` (block Lanczos)
against scipy.sparse.linalg.svds (ARPACK) on a LinearOperator whose products run over row tiles of the
scores, exp(scale q k^T - lse) times the block, in NumPy: the same matrix-free work. Where N x N fits
(--topk-dense-max), both are checked against NumPy's dense SVD (relative error of each value).

Causal (--causal-sizes, --repeat R): `attnscope analyze --causal` with every default measure (the three default
mechanisms, their content-free baselines and past blocks) against the time NumPy takes for the three dense
singular-value-only SVDs of N x N matrices (np.linalg.svd(A, compute_uv=False) of the three causal attention
matrices, formed outside the clock), alternating the two R times in one run; prints each pair's ratio
attnscope / NumPy, the median, and the load average around each timing (the machine may be shared).

For timing the two sides as whole processes (e.g. with /usr/bin/time, or alternated by a benchmark runner):
`--write-causal N DIR` writes DIR/qk.h5 (the same random Q, K as --causal-sizes N) and the three causal matrices
as DIR/{softmax,linear,mhla}.npy; `--svd3 DIR` then only loads those and runs the three SVDs, and
`attnscope analyze --q DIR/qk.h5:/q --k DIR/qk.h5:/k --causal --blocks 16` is the other side.

usage: python3 bench/compare_numpy.py [--attnscope build/app/attnscope] [--sizes 1024,2048,4096] [--d 64] [--markdown]
                                      [--topk-sizes 4096,16384] [--topk 64] [--causal-sizes 4096] [--repeat 3]
Run with Debian's python3 (numpy and scipy on OpenBLAS). Threads: both use the machine's cores (OpenBLAS).

OpenBLAS kernels (--numpy-coretype): the NumPy / SciPy side runs in a child process of its own. Where this
machine's OpenBLAS does not pick the CPU's best kernels by itself (0.3.21 runs its AVX2 "Haswell" kernels on
AVX-512 AMD EPYC CPUs and its SSE3 "Prescott" ones on some Xeons), `auto` times a matrix product under each
candidate OPENBLAS_CORETYPE the CPU supports and gives NumPy's command the fastest, so AttnScope is compared
with NumPy at its best. The variable is set for that child only, never for AttnScope, the tests or CI. Both
sides' kernels are printed: NumPy's OpenBLAS core, AttnScope's instruction set, OpenBLAS core and which
library ran each class of product (its JSON "kernels").
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
import attnref  # noqa: E402  (the independent reference: block layout and mixing presets)


def numpy_pipeline(Q, K, M):
    """Dense matrices + full spectra + entropy, the way a NumPy notebook would do it."""
    N, d = Q.shape
    out = {}
    # softmax
    S = Q @ K.T / np.sqrt(d)
    S -= S.max(axis=1, keepdims=True)
    A = np.exp(S)
    A /= A.sum(axis=1, keepdims=True)
    mats = {"softmax": A}
    # linear (relu + 1e-6)
    pq, pk = np.maximum(Q, 0) + 1e-6, np.maximum(K, 0) + 1e-6
    P = pq @ pk.T
    mats["linear"] = P / P.sum(axis=1, keepdims=True)
    # MHLA: M contiguous blocks, cos mixing
    blk, centres = attnref.block_layout(N, blocks=M)
    Mc = attnref.mixing_preset("cos", centres)
    P = Mc[np.ix_(blk, blk)] * (pq @ pk.T)
    mats["mhla"] = P / P.sum(axis=1, keepdims=True)
    for name, A in mats.items():
        s = np.linalg.svd(A, compute_uv=False)
        tol = s[0] * max(A.shape) * np.finfo(float).eps
        p = s / s.sum()
        p = p[p > 0]
        H = -np.sum(np.where(A > 0, A * np.log(np.where(A > 0, A, 1)), 0), axis=1)
        out[name] = {"rank": int((s > tol).sum()), "singular_values": s, "effective_rank": float(np.exp(-(p * np.log(p)).sum())),
                     "stable_rank": float((s ** 2).sum() / s[0] ** 2), "entropy_mean": float(H.mean()),
                     "entropy_normalized_mean": float((H / np.log(N)).mean())}
    return out


def causal_matrices(Q, K, M):
    """The three default causal attention matrices (softmax, linear with relu, MHLA on M blocks with the causal
    default mixing), by the NumPy reference."""
    return [attnref.attention_matrix(m, Q, K, causal=True, **({"blocks": M} if m == "mhla" else {}))
            for m in ("softmax", "linear", "mhla")]


def agree(ours, ref):
    problems = []
    for mech, r in ref.items():
        o = ours[mech]
        if o["rank"] != r["rank"]:
            problems.append(f"{mech} rank {o['rank']} vs {r['rank']}")
        s1 = r["singular_values"][0]
        sv = np.asarray(o["singular_values"])
        if sv.shape != r["singular_values"].shape or np.max(np.abs(sv - r["singular_values"])) > 1e-10 * s1:
            problems.append(f"{mech} singular values differ")
        for key, got in (("effective_rank", o["effective_rank"]), ("stable_rank", o["stable_rank"]),
                         ("entropy_mean", o["entropy"]["mean"]), ("entropy_normalized_mean", o["entropy"]["normalized_mean"])):
            if abs(got - r[key]) > 1e-10 * abs(r[key]):
                problems.append(f"{mech} {key} {got} vs {r[key]}")
    return problems


def softmax_operator(Q, K, tile=1024):
    """scipy LinearOperator for A = rowsoftmax(Q K^T / sqrt(d)), applied over row tiles of the scores."""
    from scipy.sparse.linalg import LinearOperator
    N, d = Q.shape
    scale = 1.0 / np.sqrt(d)
    lse = np.empty(N)
    for t in range(0, N, tile):
        S = (Q[t:t + tile] @ K.T) * scale
        m = S.max(axis=1)
        lse[t:t + tile] = m + np.log(np.exp(S - m[:, None]).sum(axis=1))

    def tiles():
        for t in range(0, N, tile):
            yield t, np.exp((Q[t:t + tile] @ K.T) * scale - lse[t:t + tile, None])

    def matmat(X):
        X = np.asarray(X).reshape(N, -1)
        Y = np.empty((N, X.shape[1]))
        for t, A in tiles():
            Y[t:t + A.shape[0]] = A @ X
        return Y

    def rmatmat(X):
        X = np.asarray(X).reshape(N, -1)
        Y = np.zeros((N, X.shape[1]))
        for t, A in tiles():
            Y += A.T @ X[t:t + A.shape[0]]
        return Y

    return LinearOperator((N, N), matvec=lambda x: matmat(x).ravel(), rmatvec=lambda x: rmatmat(x).ravel(),
                          matmat=matmat, rmatmat=rmatmat, dtype=np.float64)


def topk_compare(attnscope, N, d, k, dense_max, tmp, coretype):
    """One top-k comparison: (N, t_scipy, t_ours, ratio, max relative difference, vs-dense errors, passes)."""
    path = os.path.join(tmp, f"local{N}.h5")
    subprocess.run([attnscope, "synth", "--kind", "local1d", "--n", str(N), "--d", str(d), "--out", path], check=True,
                   capture_output=True)
    t_scipy, ref = run_numpy_child(coretype, "topk", **{"in": path, "k": k, "dense": int(N <= dense_max)})
    s_scipy = ref["values"]
    t0 = time.perf_counter()
    p = subprocess.run([attnscope, "analyze", "--q", path + ":/q", "--k", path + ":/k", "--mechanism", "softmax",
                        "--method", "streaming", "--top-k", str(k), "--metrics", "spectrum", "--json", "-"],
                       capture_output=True, text=True)
    t_ours = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    r = json.loads(p.stdout)["results"][0]
    s_ours = np.asarray(r["singular_values"])
    diff = float(np.max(np.abs(s_ours - s_scipy) / s_scipy))
    vs_dense = "-"
    if "dense" in ref:
        s_dense = ref["dense"]
        vs_dense = (f"ours {np.max(np.abs(s_ours - s_dense) / s_dense):.1e}, "
                    f"svds {np.max(np.abs(s_scipy - s_dense) / s_dense):.1e}")
    passes = r["method"].get("top_k", {}).get("passes", "-")
    return N, t_scipy, t_ours, t_scipy / t_ours, diff, vs_dense, passes


def causal_inputs(N, d, path):
    """Random Q, K (N x d) of the causal comparison, written to `path` (HDF5 /q, /k)."""
    rng = np.random.default_rng(N + 1)
    Q, K = rng.normal(size=(N, d)), rng.normal(size=(N, d))
    with h5py.File(path, "w") as f:
        f["q"] = Q
        f["k"] = K
    return Q, K


def causal_compare(args, N, tmp, coretype):
    """`attnscope analyze --causal` (every default measure) against NumPy's three dense SVDs, alternated
    args.repeat times in one run: (N, median NumPy s, median AttnScope s, ratios ours / NumPy, load averages)."""
    path = os.path.join(tmp, f"causal{N}.h5")
    causal_inputs(N, args.d, path)
    cmd = [args.attnscope, "analyze", "--q", path + ":/q", "--k", path + ":/k", "--causal", "--blocks",
           str(args.blocks), "--json", "-"]
    print("AttnScope: " + " ".join(cmd), flush=True)
    t_numpy, t_ours, ratios, loads = [], [], [], []
    for i in range(args.repeat):
        load = os.getloadavg()[0]
        tn, ref = run_numpy_child(coretype, "svd3", **{"in": path, "blocks": args.blocks})
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True)
        to = time.perf_counter() - t0
        if p.returncode != 0:
            raise SystemExit(p.stderr)
        doc = json.loads(p.stdout)
        ranks = [r["rank"] for r in doc["results"]]
        loads.append(f"{load:.1f}-{os.getloadavg()[0]:.1f}")
        t_numpy.append(tn)
        t_ours.append(to)
        ratios.append(to / tn)
        print(f"causal N={N} run {i + 1}: numpy 3 SVDs {tn:.2f} s, attnscope {to:.2f} s, ratio {to / tn:.2f}x "
              f"(ranks numpy {ref['ranks']}, attnscope {ranks}; load {loads[-1]})", flush=True)
    return N, float(np.median(t_numpy)), float(np.median(t_ours)), ratios, "; ".join(loads)


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


PROBE = """
import time, numpy as np
a = np.random.default_rng(0).random((1536, 1536)); a @ a
best = 1e9
for _ in range(3):
    t = time.perf_counter(); a @ a; best = min(best, time.perf_counter() - t)
print(2 * 1536 ** 3 / best / 1e9)
"""


def openblas_probe(coretype):
    """(OpenBLAS core NumPy runs, its dgemm GFLOP/s) with OPENBLAS_CORETYPE=coretype (None: unset)."""
    env = dict(os.environ, OPENBLAS_VERBOSE="2")
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    p = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True)
    core = "?"
    for line in (p.stdout + p.stderr).splitlines():
        if line.startswith("Core:"):
            core = line.split(":", 1)[1].strip()
    try:
        gflops = float(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        gflops = 0.0
    return core, gflops


def choose_numpy_coretype(wanted):
    """The OPENBLAS_CORETYPE for NumPy's child (None: OpenBLAS's own choice) and a line saying why."""
    default_core, default_rate = openblas_probe(None)
    if wanted == "default":
        return None, f"NumPy: OpenBLAS core {default_core} (its own choice, {default_rate:.0f} GFLOP/s dgemm)"
    if wanted != "auto":
        core, rate = openblas_probe(wanted)
        return wanted, f"NumPy: OPENBLAS_CORETYPE={wanted} -> core {core} ({rate:.0f} GFLOP/s dgemm; default {default_core} {default_rate:.0f})"
    flags = cpu_flags()
    candidates = []
    if "avx512f" in flags:
        candidates += ["SkylakeX", "Cooperlake"]
    if "avx2" in flags:
        candidates += ["Haswell", "Zen"]
    best, best_core, best_rate = None, default_core, default_rate
    tried = [f"default {default_core} {default_rate:.0f}"]
    for c in candidates:
        core, rate = openblas_probe(c)
        tried.append(f"{c} {core} {rate:.0f}")
        if core.lower() == c.lower() and rate > 1.05 * best_rate:
            best, best_core, best_rate = c, core, rate
    how = (f"OPENBLAS_CORETYPE={best} set for NumPy's command only" if best else "OpenBLAS's own choice")
    return best, (f"NumPy: OpenBLAS core {best_core} ({best_rate:.0f} GFLOP/s dgemm; {how}; "
                  f"probed GFLOP/s: {', '.join(tried)})")


def run_numpy_child(coretype, task, **kw):
    """Runs `task` in a child Python with OPENBLAS_CORETYPE=coretype; returns (seconds, result dict)."""
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)   # set with the core type on some machines: unset together
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.npz")
        args = [sys.executable, os.path.abspath(__file__), "--numpy-worker", task, "--worker-out", out]
        for k, v in kw.items():
            args += ["--worker-" + k.replace("_", "-"), str(v)]
        subprocess.run(args, env=env, check=True)
        with np.load(out, allow_pickle=True) as z:
            return float(z["seconds"]), z["result"].item()


def numpy_worker(args):
    """The child's side of run_numpy_child: the timed NumPy / SciPy work alone (imports and file reading are
    outside the clock)."""
    with h5py.File(args.worker_in, "r") as f:
        Q = np.array(f["q"], dtype=np.float64)
        K = np.array(f["k"], dtype=np.float64)
    if Q.ndim == 3:
        Q, K = Q[0], K[0]
    if args.numpy_worker == "pipeline":
        t0 = time.perf_counter()
        result = numpy_pipeline(Q, K, args.worker_blocks)
        seconds = time.perf_counter() - t0
    elif args.numpy_worker == "svd3":   # three dense singular-value-only SVDs; the matrices outside the clock
        mats = causal_matrices(Q, K, args.worker_blocks)
        t0 = time.perf_counter()
        values = [np.linalg.svd(A, compute_uv=False) for A in mats]
        seconds = time.perf_counter() - t0
        result = {"ranks": [int(np.linalg.matrix_rank(A)) for A in mats], "s1": [float(v[0]) for v in values]}
    else:   # top-k by svds on the matrix-free operator
        from scipy.sparse.linalg import svds
        t0 = time.perf_counter()
        op = softmax_operator(Q, K)
        s = np.sort(svds(op, k=args.worker_k, return_singular_vectors=False, random_state=0))[::-1]
        seconds = time.perf_counter() - t0
        result = {"values": s}
        if args.worker_dense:
            result["dense"] = np.linalg.svd(op.matmat(np.eye(Q.shape[0])), compute_uv=False)[:args.worker_k]
    np.savez(args.worker_out, seconds=seconds, result=np.array(result, dtype=object))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attnscope", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "app", "attnscope"))
    ap.add_argument("--sizes", default="1024,2048,4096")
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--blocks", type=int, default=16)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--topk-sizes", default="", help="N values for the top-k comparison (empty: none)")
    ap.add_argument("--topk", type=int, default=64)
    ap.add_argument("--topk-dense-max", type=int, default=4096, help="largest N checked against the dense SVD")
    ap.add_argument("--numpy-coretype", default="auto",
                    help="OPENBLAS_CORETYPE for NumPy's command: auto (fastest the CPU supports), default, or a name")
    # The child process's side (run_numpy_child).
    ap.add_argument("--causal-sizes", default="", help="N values for the causal analyze against three NumPy SVDs")
    ap.add_argument("--repeat", type=int, default=3, help="alternating runs of each side (--causal-sizes)")
    ap.add_argument("--numpy-worker", choices=["pipeline", "topk", "svd3"], help=argparse.SUPPRESS)
    ap.add_argument("--worker-in", help=argparse.SUPPRESS)
    ap.add_argument("--worker-out", help=argparse.SUPPRESS)
    ap.add_argument("--worker-blocks", type=int, default=16, help=argparse.SUPPRESS)
    ap.add_argument("--worker-k", type=int, default=64, help=argparse.SUPPRESS)
    ap.add_argument("--worker-dense", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--write-causal", nargs=2, metavar=("N", "DIR"), help="write qk.h5 and the three causal matrices")
    ap.add_argument("--svd3", metavar="DIR", help="the three dense SVDs of DIR/*.npy (written by --write-causal)")
    args = ap.parse_args()
    if args.numpy_worker:
        return numpy_worker(args)
    if args.write_causal:
        N, out = int(args.write_causal[0]), args.write_causal[1]
        os.makedirs(out, exist_ok=True)
        Q, K = causal_inputs(N, args.d, os.path.join(out, "qk.h5"))
        for name, A in zip(("softmax", "linear", "mhla"), causal_matrices(Q, K, args.blocks)):
            np.save(os.path.join(out, name + ".npy"), A)
        return 0
    if args.svd3:
        for name in ("softmax", "linear", "mhla"):
            np.linalg.svd(np.load(os.path.join(args.svd3, name + ".npy")), compute_uv=False)
        return 0
    coretype, numpy_kernels = choose_numpy_coretype(args.numpy_coretype)
    print(numpy_kernels, flush=True)
    ours_kernels_printed = False
    rows = []
    topk_rows = []
    causal_rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for N in [int(x) for x in args.sizes.split(",") if x]:
            rng = np.random.default_rng(N)
            Q = rng.normal(size=(N, args.d))
            K = rng.normal(size=(N, args.d))
            path = os.path.join(tmp, f"qk{N}.h5")
            with h5py.File(path, "w") as f:
                f["q"] = Q
                f["k"] = K
            t_numpy, ref = run_numpy_child(coretype, "pipeline", **{"in": path, "blocks": args.blocks})
            t0 = time.perf_counter()
            p = subprocess.run([args.attnscope, "analyze", "--q", path + ":/q", "--k", path + ":/k", "--blocks",
                                str(args.blocks), "--mixing", "cos", "--json", "-"], capture_output=True, text=True)
            t_ours = time.perf_counter() - t0
            if p.returncode != 0:
                print(p.stderr)
                return 1
            doc = json.loads(p.stdout)
            ours = {r["mechanism"]: r for r in doc["results"]}
            if not ours_kernels_printed:
                print(f"AttnScope: {json.dumps(doc.get('kernels', {}))}", flush=True)
                ours_kernels_printed = True
            problems = agree(ours, ref)
            methods = ", ".join(f"{m}: {ours[m]['method']['spectrum']}" for m in ("softmax", "linear", "mhla"))
            rows.append((N, t_numpy, t_ours, t_numpy / t_ours, "yes" if not problems else "NO: " + "; ".join(problems), methods))
            print(f"N={N}: numpy {t_numpy:.2f} s, attnscope {t_ours:.2f} s, ratio {t_numpy / t_ours:.1f}x, "
                  f"agree: {rows[-1][4]} ({methods})", flush=True)
        for N in [int(x) for x in args.topk_sizes.split(",") if x]:
            row = topk_compare(args.attnscope, N, args.d, args.topk, args.topk_dense_max, tmp, coretype)
            topk_rows.append(row)
            print(f"top-{args.topk} N={N}: scipy svds {row[1]:.2f} s, attnscope {row[2]:.2f} s, ratio {row[3]:.1f}x, "
                  f"max relative difference {row[4]:.1e}, against dense: {row[5]}, passes {row[6]}", flush=True)
        for N in [int(x) for x in args.causal_sizes.split(",") if x]:
            causal_rows.append(causal_compare(args, N, tmp, coretype))
    if args.markdown and causal_rows:
        print("\n| N | NumPy 3 SVDs (s, median) | AttnScope analyze --causal (s, median) | ratio (median of pairs) | "
              "pairs | load average |")
        print("|---|---|---|---|---|---|")
        for N, tn, to, ratios, loads in causal_rows:
            print(f"| {N} | {tn:.2f} | {to:.2f} | {np.median(ratios):.2f}x | "
                  f"{', '.join(f'{r:.2f}' for r in ratios)} | {loads} |")
    if args.markdown and topk_rows:
        print(f"\n| N | scipy svds (s) | AttnScope top-{args.topk} (s) | speed-up | max rel. difference | against dense SVD | passes |")
        print("|---|---|---|---|---|---|---|")
        for N, a, b, r, diff, dense, passes in topk_rows:
            print(f"| {N} | {a:.2f} | {b:.2f} | {r:.1f}x | {diff:.1e} | {dense} | {passes} |")
    if args.markdown and rows:
        print("\n| N | NumPy (s) | AttnScope (s) | speed-up | every number agrees | spectrum method |")
        print("|---|---|---|---|---|---|")
        for N, a, b, r, ok, m in rows:
            print(f"| {N} | {a:.2f} | {b:.2f} | {r:.1f}x | {ok} | {m} |")
    return 0 if all(r[4] == "yes" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
