"""CLI conformance: `attnscope analyze` and `attnscope matrix` against the independent NumPy
reference (tests/reference/attnref.py) on every mechanism option of docs/cli.md.

usage: cli_conformance.py ATTNSCOPE WORKDIR GROUP      (GROUP: see GROUPS below, or "all")

Inputs are written here with h5py / NumPy; the binary reads them through its own readers. Every
number of the JSON (ranks, tolerances, all singular values, effective / stable rank, entropy
statistics, row entropies) and every entry of the written matrix must agree to 1e-10 relative.
Exits non-zero, listing every disagreement, if anything differs.
"""
import json
import os
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import attnref  # noqa: E402

TOL = 1e-10
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def close(a, b, scale, what):
    if a is None or b is None:
        if a is not b:
            fail(f"{what}: {a!r} vs reference {b!r}")
        return
    if abs(a - b) > TOL * max(abs(scale), 1e-300):
        fail(f"{what}: {a!r} vs reference {b!r} (rel diff {abs(a - b) / max(abs(scale), 1e-300):.3g})")


def cli_flags(opts):
    args = []
    for key, value in opts.items():
        if key in ("mixing_matrix",):
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, (list, tuple)):
            args += [flag, ",".join(str(v) for v in value)]
        else:
            args += [flag, str(value)]
    return args


def run(binary, args):
    p = subprocess.run([binary] + args, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


class Inputs:
    """Q/K in several files; `select(...)` gives the NumPy slice the CLI should read."""

    def __init__(self, work):
        rng = np.random.default_rng(20261129)
        self.work = work
        # [heads=3, N=48, d=8] float64 in HDF5, nested group
        self.qk48 = rng.normal(size=(2, 3, 48, 8)) * 0.7
        self.h5 = os.path.join(work, "acts48.h5")
        with h5py.File(self.h5, "w") as f:
            f.create_dataset("layer0/attn/q", data=self.qk48[0])
            f.create_dataset("layer0/attn/k", data=self.qk48[1])
            f.create_dataset("layer0/attn/k_shared", data=self.qk48[1][0])     # multi-query: one key head
        # N = 50 (one CLS + 7x7), [b=2, h=2, n=50, d=6] in .npz (bhnd)
        self.qk50 = rng.normal(size=(2, 2, 2, 50, 6)) * 0.8
        self.npz = os.path.join(work, "acts50.npz")
        np.savez_compressed(self.npz, q=self.qk50[0], k=self.qk50[1])
        # a .npy pair in 'nd' layout, N = 36 (6x6 grid, 3-D grid 1x6x6 / 4x3x3)
        self.q36 = rng.normal(size=(36, 5))
        self.k36 = rng.normal(size=(36, 5))
        self.q36_path = os.path.join(work, "q36.npy")
        self.k36_path = os.path.join(work, "k36.npy")
        np.save(self.q36_path, self.q36)
        np.save(self.k36_path, self.k36)


def compare_result(res, ref, what):
    if "rank" in ref:
        s1 = ref["singular_values"][0] if ref["singular_values"] else 1.0
        if res.get("rank") != ref["rank"]:
            fail(f"{what}: rank {res.get('rank')} vs reference {ref['rank']}")
        close(res.get("rank_tol"), ref["rank_tol"], ref["rank_tol"], what + " rank_tol")
        close(res.get("relative_rank"), ref["relative_rank"], 1.0, what + " relative_rank")
        close(res.get("effective_rank"), ref["effective_rank"], ref["effective_rank"], what + " effective_rank")
        close(res.get("stable_rank"), ref["stable_rank"], ref["stable_rank"], what + " stable_rank")
        sv = res.get("singular_values") or []
        if len(sv) != len(ref["singular_values"]):
            fail(f"{what}: {len(sv)} singular values vs reference {len(ref['singular_values'])}")
        else:
            for i, (a, b) in enumerate(zip(sv, ref["singular_values"])):
                close(a, b, s1, f"{what} singular value {i}")
    if "entropy" in ref:
        e, re_ = res.get("entropy"), ref["entropy"]
        if (e is None) != (re_ is None):
            fail(f"{what}: entropy {e!r} vs reference {re_!r}")
        elif e is not None:
            for key in ("mean", "std", "min", "max", "normalized_mean"):
                close(e.get(key), re_[key], max(abs(re_["max"]), 1.0), f"{what} entropy.{key}")
    if "row_entropy" in ref:
        got = res.get("row_entropy")
        if (got is None) != (ref["row_entropy"] is None):
            fail(f"{what}: row_entropy {got!r:.40} vs reference {ref['row_entropy']!r:.40}")
        elif got is not None:
            if len(got) != len(ref["row_entropy"]):
                fail(f"{what}: {len(got)} row entropies vs {len(ref['row_entropy'])}")
            else:
                scale = max(max(abs(x) for x in ref["row_entropy"]), 1.0)
                for i, (a, b) in enumerate(zip(got, ref["row_entropy"])):
                    close(a, b, scale, f"{what} row_entropy[{i}]")
    if ref.get("entropy", 0) is None and not res.get("warnings"):
        fail(f"{what}: entropy is null but no warning says why")


def check_case(binary, work, name, Q, K, refs, sel_args, mechanisms, opts, metric_opts=None, check_matrix=True):
    """Runs analyze (JSON) and matrix for `mechanisms` with `opts`, compares with attnref."""
    metric_opts = metric_opts or {}
    mixing_matrix = opts.get("mixing_matrix")
    flags = cli_flags(opts)
    if mixing_matrix is not None:
        flags += ["--mixing", mixing_matrix[0]]
    args = ["analyze", "--q", refs[0], "--k", refs[1]] + sel_args + ["--mechanism", ",".join(mechanisms)] + flags
    args += cli_flags(metric_opts) + ["--json", "-"]
    rc, out, err = run(binary, args)
    if rc != 0:
        fail(f"{name}: analyze exited {rc}: {err.strip()}  (args: {' '.join(args)})")
        return
    doc = json.loads(out)
    if doc["input"]["n"] != Q.shape[0] or doc["input"]["d"] != Q.shape[1]:
        fail(f"{name}: input n,d {doc['input']['n']},{doc['input']['d']} vs {Q.shape}")
    ref_opts = {k: v for k, v in opts.items() if k != "mixing_matrix"}
    if mixing_matrix is not None:
        ref_opts["mixing_matrix"] = mixing_matrix[1]
    for mech, res in zip(mechanisms, doc["results"]):
        if res["mechanism"] != mech:
            fail(f"{name}: result order {res['mechanism']} vs {mech}")
            continue
        mopts = dict(ref_opts)
        if mech == "linear":
            mopts["normalize"] = "row"      # docs/maths.md 1.3: linear attention is row-normalised
        A = attnref.attention_matrix(mech, Q, K, **mopts)
        allowed = attnref.allowed_keys(mech, Q.shape[0], **{k: v for k, v in mopts.items()
                                                            if k in ("causal", "blocks", "chunk", "grid", "block_grid", "token_order")})
        ref = attnref.metrics(A, allowed=allowed, rank_rtol=metric_opts.get("rank_rtol"), top_k=metric_opts.get("top_k"),
                              row_entropy=bool(metric_opts.get("row_entropy")))
        wanted = metric_opts.get("metrics", "spectrum,entropy").split(",")
        if "spectrum" not in wanted:
            for key in ("rank", "rank_tol", "relative_rank", "effective_rank", "stable_rank", "singular_values"):
                ref.pop(key, None)
                if key in res:
                    fail(f"{name}/{mech}: {key} reported although --metrics {metric_opts['metrics']}")
        if "entropy" not in wanted:
            ref.pop("entropy", None)
            ref.pop("row_entropy", None)
            if "entropy" in res:
                fail(f"{name}/{mech}: entropy reported although --metrics {metric_opts['metrics']}")
        compare_result(res, ref, f"{name}/{mech}")
        if check_matrix:
            for ext in (".npy", ".h5"):
                out_path = os.path.join(work, f"{name}_{mech}{ext}".replace("/", "_"))
                margs = ["matrix", "--q", refs[0], "--k", refs[1]] + sel_args + ["--mechanism", mech] + flags + ["--out", out_path]
                rc, _, err = run(binary, margs)
                if rc != 0:
                    fail(f"{name}/{mech}: matrix exited {rc}: {err.strip()}")
                    continue
                if ext == ".npy":
                    got = np.load(out_path)
                else:
                    with h5py.File(out_path, "r") as f:
                        got = f["/attention"][...]
                if got.dtype != np.float64 or got.shape != A.shape:
                    fail(f"{name}/{mech}: matrix {ext} is {got.dtype} {got.shape}, want float64 {A.shape}")
                    continue
                diff = np.max(np.abs(got - A)) / max(np.max(np.abs(A)), 1e-300)
                if not diff <= TOL:
                    fail(f"{name}/{mech}: matrix{ext} differs from reference by {diff:.3g} relative")
                os.remove(out_path)
    print(f"ok   {name}: {','.join(mechanisms)} {' '.join(flags)} {' '.join(cli_flags(metric_opts))}")


def group_cases(inp, work):
    h5q = inp.h5 + ":/layer0/attn/q"
    h5k = inp.h5 + ":layer0/attn/k"
    Q48 = lambda h: inp.qk48[0][h]
    K48 = lambda h: inp.qk48[1][h]
    mc4 = np.abs(np.random.default_rng(5).normal(size=(4, 4))) + 0.05
    mc4_path = os.path.join(work, "mc4.npy")
    np.save(mc4_path, mc4)
    mc6 = np.abs(np.random.default_rng(6).normal(size=(6, 6)))
    mc6_h5 = os.path.join(work, "mix.h5")
    with h5py.File(mc6_h5, "w") as f:
        f.create_dataset("learned/mc", data=mc6)
    all3 = ["softmax", "linear", "mhla"]
    G = {}
    G["softmax"] = [
        ("softmax_default", Q48(0), K48(0), ["--head", "0"], ["softmax"], {}),
        ("softmax_scale", Q48(1), K48(1), ["--head", "1"], ["softmax"], {"scale": 0.9}),
        ("softmax_causal", Q48(2), K48(2), ["--at", "h=2"], ["softmax"], {"causal": True}),
        ("softmax_causal_scale", Q48(2), K48(2), ["--head", "2"], ["softmax"], {"causal": True, "scale": 2.5}),
    ]
    G["linear"] = [
        ("linear_relu", Q48(0), K48(0), [], ["linear"], {"feature_map": "relu"}),
        ("linear_elu1", Q48(1), K48(1), ["--head", "1"], ["linear"], {"feature_map": "elu1"}),
        ("linear_identity", Q48(0), K48(0), [], ["linear"], {"feature_map": "identity"}),
        ("linear_favor", Q48(0), K48(0), [], ["linear"], {"feature_map": "favor", "favor_features": 16, "seed": 3}),
        ("linear_favor_default", Q48(1), K48(1), ["--head", "1"], ["linear"], {"feature_map": "favor"}),
        ("linear_relu_causal", Q48(2), K48(2), ["--head", "2"], ["linear"], {"causal": True}),
        ("linear_elu1_causal", Q48(2), K48(2), ["--head", "2"], ["linear"], {"causal": True, "feature_map": "elu1"}),
        ("linear_favor_causal", Q48(1), K48(1), ["--head", "1"], ["linear"],
         {"causal": True, "feature_map": "favor", "favor_features": 24, "seed": 11}),
    ]
    G["mhla_blocks"] = [
        ("mhla_default", Q48(0), K48(0), [], all3, {}),
        ("mhla_blocks4", Q48(0), K48(0), [], ["mhla"], {"blocks": 4}),
        ("mhla_blocks7_uneven", Q48(1), K48(1), ["--head", "1"], ["mhla"], {"blocks": 7}),
        ("mhla_blocks1", Q48(1), K48(1), ["--head", "1"], ["mhla"], {"blocks": 1}),
        ("mhla_blocksN", Q48(1), K48(1), ["--head", "1"], ["mhla"], {"blocks": 48}),
        ("mhla_chunk10", Q48(2), K48(2), ["--head", "2"], ["mhla"], {"chunk": 10}),
        ("mhla_chunk16", Q48(2), K48(2), ["--head", "2"], ["mhla"], {"chunk": 16, "feature_map": "elu1"}),
        ("mhla_favor", Q48(0), K48(0), [], ["mhla"], {"blocks": 6, "feature_map": "favor", "favor_features": 12, "seed": 5}),
        ("mhla_identity_fm", Q48(0), K48(0), [], ["linear", "mhla"], {"blocks": 3, "feature_map": "identity"}),
    ]
    G["mhla_grid"] = [
        ("grid2d_raster", Q48(0), K48(0), [], ["mhla"], {"grid": (6, 8), "block_grid": (2, 4)}),
        ("grid2d_blocked", Q48(0), K48(0), [], ["mhla"], {"grid": (6, 8), "block_grid": (3, 2), "token_order": "blocked"}),
        ("grid3d_raster", Q48(1), K48(1), ["--head", "1"], ["mhla"], {"grid": (3, 4, 4), "block_grid": (3, 2, 2)}),
        ("grid3d_blocked", Q48(1), K48(1), ["--head", "1"], ["mhla"],
         {"grid": (3, 4, 4), "block_grid": (1, 2, 4), "token_order": "blocked"}),
        ("grid2d_cls_prefix", inp.qk50[0][1][1][1:], inp.qk50[1][1][1][1:],
         ["--at", "b=1,h=1", "--prefix-tokens", "1"], all3, {"grid": (7, 7), "block_grid": (7, 7)}),
        ("grid2d_npy", inp.q36, inp.k36, [], ["mhla"], {"grid": (6, 6), "block_grid": (3, 3), "mixing": "linear"}),
    ]
    G["mhla_mixing"] = [
        ("mix_cos", Q48(0), K48(0), [], ["mhla"], {"blocks": 8, "mixing": "cos"}),
        ("mix_linear", Q48(0), K48(0), [], ["mhla"], {"blocks": 8, "mixing": "linear"}),
        ("mix_exp", Q48(0), K48(0), [], ["mhla"], {"blocks": 8, "mixing": "exp"}),
        ("mix_exp_sigma", Q48(0), K48(0), [], ["mhla"], {"blocks": 8, "mixing": "exp", "mixing_sigma": 0.7}),
        ("mix_gaussian", Q48(0), K48(0), [], ["mhla"], {"blocks": 8, "mixing": "gaussian"}),
        ("mix_local", Q48(0), K48(0), [], ["mhla"], {"blocks": 8, "mixing": "local"}),
        ("mix_local_tau", Q48(0), K48(0), [], ["mhla"], {"grid": (6, 8), "block_grid": (3, 4), "mixing": "local", "mixing_threshold": 1.0}),
        ("mix_uniform", Q48(0), K48(0), [], ["mhla"], {"blocks": 8, "mixing": "uniform"}),
        ("mix_identity", Q48(0), K48(0), [], ["mhla"], {"blocks": 8, "mixing": "identity"}),
        ("mix_causal_noncausal", Q48(0), K48(0), [], ["mhla"], {"blocks": 8, "mixing": "causal"}),
        ("mix_grid_gaussian", Q48(2), K48(2), ["--head", "2"], ["mhla"], {"grid": (6, 8), "block_grid": (2, 2), "mixing": "gaussian"}),
        ("mix_file_npy", Q48(1), K48(1), ["--head", "1"], ["mhla"], {"blocks": 4, "mixing_matrix": (mc4_path, mc4)}),
        ("mix_file_h5", Q48(1), K48(1), ["--head", "1"], ["mhla"], {"chunk": 8, "mixing_matrix": (mc6_h5 + ":/learned/mc", mc6)}),
    ]
    G["mhla_causal"] = [
        ("causal_all3", Q48(0), K48(0), [], all3, {"causal": True, "blocks": 6}),
        ("causal_chunk", Q48(1), K48(1), ["--head", "1"], ["mhla"], {"causal": True, "chunk": 10}),
        ("causal_cos", Q48(1), K48(1), ["--head", "1"], ["mhla"], {"causal": True, "blocks": 5, "mixing": "cos"}),
        ("causal_identity_mix", Q48(2), K48(2), ["--head", "2"], ["mhla"], {"causal": True, "blocks": 4, "mixing": "identity"}),
        ("causal_grid_raster", Q48(2), K48(2), ["--head", "2"], ["mhla"], {"causal": True, "grid": (6, 8), "block_grid": (2, 4)}),
        ("causal_grid_blocked", Q48(2), K48(2), ["--head", "2"], ["mhla"],
         {"causal": True, "grid": (6, 8), "block_grid": (2, 4), "token_order": "blocked"}),
        ("causal_favor", Q48(0), K48(0), [], ["mhla"], {"causal": True, "blocks": 4, "feature_map": "favor", "favor_features": 8}),
        ("causal_none", Q48(0), K48(0), [], ["mhla"], {"causal": True, "chunk": 12, "normalize": "none", "feature_map": "identity"}),
        ("causal_local_sigma", Q48(1), K48(1), ["--head", "1"], ["mhla"],
         {"causal": True, "blocks": 6, "mixing": "causal-local", "mixing_sigma": 1.5}),
        ("causal_preset", Q48(0), K48(0), [], ["linear", "mhla"], {"causal": True, "chunk": 8, "mixing": "causal"}),
    ]
    G["mhla_normalize"] = [
        ("norm_none", Q48(0), K48(0), [], ["mhla"], {"blocks": 4, "normalize": "none"}),
        ("norm_official", Q48(0), K48(0), [], ["mhla"], {"blocks": 4, "normalize": "official"}),
        ("norm_official_grid", Q48(1), K48(1), ["--head", "1"], ["mhla"],
         {"grid": (6, 8), "block_grid": (2, 2), "normalize": "official", "mixing": "exp"}),
        ("norm_official_blocked", Q48(1), K48(1), ["--head", "1"], ["mhla"],
         {"grid": (6, 8), "block_grid": (3, 2), "token_order": "blocked", "normalize": "official", "feature_map": "elu1"}),
        ("norm_none_all3", Q48(2), K48(2), ["--head", "2"], all3, {"blocks": 3, "normalize": "none"}),
    ]
    G["selection"] = [
        ("sel_npz_bhnd", inp.qk50[0][1][0], inp.qk50[1][1][0], ["--at", "b=1"], all3, {"blocks": 5}),
        ("sel_npz_layout", inp.qk50[0][0][1][3:], inp.qk50[1][0][1][3:],
         ["--layout", "bhnd", "--at", "h=1", "--prefix-tokens", "3"], ["softmax", "mhla"], {"blocks": 47}),
        ("sel_npy_nd", inp.q36, inp.k36, [], all3, {"chunk": 6}),
        ("sel_mqa_shared_keys", Q48(2), K48(0), ["--head", "2"], all3, {"blocks": 4}),
    ]
    G["metrics"] = [
        ("met_rtol", Q48(0), K48(0), [], all3, {"blocks": 4}, {"rank_rtol": 1e-3}),
        ("met_topk", Q48(0), K48(0), [], all3, {"blocks": 4}, {"top_k": 5}),
        ("met_rows", Q48(1), K48(1), ["--head", "1"], all3, {"blocks": 4, "causal": True}, {"row_entropy": True}),
        ("met_spectrum_only", Q48(1), K48(1), ["--head", "1"], all3, {}, {"metrics": "spectrum"}),
        ("met_entropy_only", Q48(1), K48(1), ["--head", "1"], all3, {}, {"metrics": "entropy", "row_entropy": True}),
        ("met_method_dense", Q48(2), K48(2), ["--head", "2"], all3, {"blocks": 6}, {"method": "dense"}),
        ("met_method_structured", Q48(2), K48(2), ["--head", "2"], ["linear", "mhla"], {"chunk": 5, "feature_map": "elu1"},
         {"method": "structured"}),
        ("met_method_structured_favor", Q48(0), K48(0), [], ["linear", "mhla"],
         {"blocks": 3, "feature_map": "favor", "favor_features": 20}, {"method": "structured"}),
    ]
    refs = {}
    for g, cases in G.items():
        for case in cases:
            name = case[0]
            if name.startswith("grid2d_cls") or name.startswith("sel_npz"):
                refs[name] = (inp.npz + ":q", inp.npz + ":k")
            elif name == "sel_mqa_shared_keys":
                refs[name] = (h5q, inp.h5 + ":/layer0/attn/k_shared")
            elif name in ("grid2d_npy", "sel_npy_nd"):
                refs[name] = (inp.q36_path, inp.k36_path)
            else:
                refs[name] = (h5q, h5k)
    return G, refs


def main():
    binary, work, group = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(work, exist_ok=True)
    inp = Inputs(work)
    G, refs = group_cases(inp, work)
    groups = list(G) if group == "all" else [group]
    for g in groups:
        if g not in G:
            print("unknown group", g, "; groups:", ", ".join(G))
            return 2
        for case in G[g]:
            name, Q, K, sel, mechs, opts = case[:6]
            metric_opts = case[6] if len(case) > 6 else None
            check_case(binary, work, name, Q, K, refs[name], sel, mechs, opts, metric_opts)
    if failures:
        print(f"{len(failures)} disagreement(s)")
        return 1
    print("all agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
