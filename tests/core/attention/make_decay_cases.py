"""Known answers for the decay and gated families (docs/maths.md 1.8): Q, K, the gates and the reference matrix
A of tests/reference/attnref.py, one case per combination worth checking.

    python3 make_decay_cases.py OUT_DIR

writes OUT_DIR/decay_cases.json (a list of {name, mechanism, options, q, k, a, allowed}) and the .npy files it
names. `options` holds make_cases.py's keys plus decay, head, gates (a .npy file name or null) and gates_log.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
import attnref  # noqa: E402

DEFAULTS = dict(scale=None, causal=False, feature_map="relu", favor_features=256, seed=0, blocks=None, chunk=None,
                grid=None, block_grid=None, token_order="raster", mixing=None, mixing_sigma=3.0,
                mixing_threshold=1.5, mixing_matrix=None, normalize="row", decay=None, head=0, gates=None,
                gates_log=False)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20261201)
    cases = []

    def add(name, mechanism, n, d, offset=0.0, spread=1.0, gates=None, **opts):
        options = dict(DEFAULTS)
        options.update(opts)
        Q = offset + spread * rng.standard_normal((n, d))
        K = offset + spread * rng.standard_normal((n, d))
        ref_opts = dict(options)
        if gates is not None:
            fname = name + "_gates.npy"
            np.save(os.path.join(out, fname), gates)
            options["gates"] = fname
            ref_opts["gates"] = gates
        A = attnref.attention_matrix(mechanism, Q, K, **ref_opts)
        allowed = attnref.allowed_keys(mechanism, n, **ref_opts)
        for tag, arr in (("q", Q), ("k", K), ("a", A)):
            np.save(os.path.join(out, name + "_" + tag + ".npy"), np.ascontiguousarray(arr))
        cases.append(dict(name=name, mechanism=mechanism, options=options, q=name + "_q.npy", k=name + "_k.npy",
                          a=name + "_a.npy", allowed=[int(x) for x in allowed]))

    # --- decay: causal, non-causal 1-D, grids (raster / blocked, 2-D / 3-D), causal with a grid
    add("decay_causal", "decay", 60, 8, causal=True, decay=0.9)
    add("decay_causal_none", "decay", 50, 6, causal=True, decay=0.8, normalize="none")
    add("decay_causal_default_head0", "decay", 70, 8, causal=True)
    add("decay_causal_default_head3", "decay", 70, 8, causal=True, head=3)
    add("decay_1d", "decay", 60, 8, decay=0.85)
    add("decay_1d_none", "decay", 45, 6, decay=0.7, normalize="none")
    add("decay_1d_default_head0", "decay", 64, 8)
    add("decay_1d_default_head3", "decay", 64, 8, head=3, normalize="none")
    add("decay_grid2d_raster", "decay", 96, 8, decay=0.8, grid=[8, 12])
    add("decay_grid2d_blocked", "decay", 96, 8, decay=0.8, grid=[8, 12], block_grid=[2, 3], token_order="blocked")
    add("decay_grid2d_blocked_none", "decay", 96, 6, decay=0.6, grid=[8, 12], block_grid=[4, 2],
        token_order="blocked", normalize="none")
    add("decay_grid3d_raster", "decay", 144, 6, decay=0.75, grid=[4, 6, 6])
    add("decay_grid3d_blocked", "decay", 144, 6, grid=[4, 6, 6], block_grid=[2, 3, 2], token_order="blocked", head=1)
    add("decay_causal_grid", "decay", 96, 8, causal=True, decay=0.8, grid=[8, 12], block_grid=[2, 3],
        token_order="blocked")
    add("decay_gamma1", "decay", 40, 6, decay=1.0)
    add("decay_gamma1_causal", "decay", 40, 6, decay=1.0, causal=True)
    add("decay_underflow", "decay", 150, 4, decay=1e-3)               # gamma^149 underflows to 0
    add("decay_underflow_causal", "decay", 150, 4, decay=1e-3, causal=True)
    add("decay_elu1", "decay", 60, 8, feature_map="elu1", decay=0.9)
    add("decay_elu1_causal", "decay", 60, 8, feature_map="elu1", decay=0.9, causal=True)
    add("decay_identity_none", "decay", 50, 6, feature_map="identity", decay=0.9, normalize="none")
    add("decay_identity_row", "decay", 50, 6, feature_map="identity", decay=0.9, offset=0.6, spread=0.5)
    add("decay_identity_causal_none", "decay", 50, 6, feature_map="identity", decay=0.95, causal=True,
        normalize="none")
    add("decay_identity_grid_none", "decay", 60, 6, feature_map="identity", decay=0.9, grid=[6, 10],
        normalize="none")
    add("decay_favor", "decay", 50, 6, feature_map="favor", favor_features=12, seed=3, decay=0.9)

    # --- gated (causal only): gates, log gates, underflowing products
    add("gated_gates", "gated", 60, 8, causal=True, gates=rng.uniform(0.5, 1.0, 60))
    add("gated_gates_none", "gated", 50, 6, causal=True, normalize="none", gates=rng.uniform(0.3, 1.0, 50))
    add("gated_log", "gated", 60, 8, causal=True, gates_log=True, gates=-rng.uniform(0.0, 0.6, 60))
    add("gated_log_none", "gated", 50, 6, causal=True, gates_log=True, normalize="none",
        gates=-rng.exponential(0.3, 50))
    tiny = rng.uniform(0.5, 1.0, 80)
    tiny[[10, 11, 40]] = 1e-200                                        # products underflow to 0
    add("gated_underflow", "gated", 80, 6, causal=True, gates=tiny)
    logs = -rng.uniform(0.0, 1.0, 80)
    logs[[20, 50]] = -800.0
    add("gated_log_underflow", "gated", 80, 6, causal=True, gates_log=True, gates=logs)
    add("gated_ones", "gated", 40, 6, causal=True, gates=np.ones(40))
    add("gated_elu1", "gated", 60, 8, causal=True, feature_map="elu1", gates=rng.uniform(0.6, 1.0, 60))
    add("gated_identity_none", "gated", 50, 6, causal=True, feature_map="identity", normalize="none",
        gates=rng.uniform(0.6, 1.0, 50))
    add("gated_identity_row", "gated", 50, 6, causal=True, feature_map="identity", offset=0.6, spread=0.5,
        gates_log=True, gates=-rng.uniform(0.0, 0.2, 50))

    with open(os.path.join(out, "decay_cases.json"), "w") as f:
        json.dump(cases, f)


if __name__ == "__main__":
    main()
