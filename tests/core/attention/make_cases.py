"""Known answers for tests/core/attention: Q, K, the reference matrix A and its metrics, one case per
combination of options worth checking (every option of docs/cli.md's "Mechanism options" appears).

    python3 make_cases.py OUT_DIR

writes OUT_DIR/cases.json (a list of {name, mechanism, options, rank_rtol, q, k, a, allowed, metrics})
and the .npy files it names. All answers come from tests/reference/attnref.py.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
import attnref  # noqa: E402

DEFAULTS = dict(scale=None, causal=False, feature_map="relu", favor_features=256, seed=0, blocks=None, chunk=None,
                grid=None, block_grid=None, token_order="raster", mixing=None, mixing_sigma=3.0,
                mixing_threshold=1.5, mixing_matrix=None, normalize="row")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20260107)
    cases = []

    def data(n, d, offset=0.0, spread=1.0):
        Q = offset + spread * rng.standard_normal((n, d))
        K = offset + spread * rng.standard_normal((n, d))
        return Q, K

    def add(name, mechanism, n, d, rank_rtol=None, offset=0.0, spread=1.0, mixing_matrix_array=None, **opts):
        options = dict(DEFAULTS)
        options.update(opts)
        Q, K = data(n, d, offset, spread)
        if mixing_matrix_array is not None:
            fname = name + "_mix.npy"
            np.save(os.path.join(out, fname), mixing_matrix_array)
            options["mixing_matrix"] = fname
            options["mixing"] = fname        # the preset names the source, as on the command line
            ref_opts = dict(options, mixing_matrix=mixing_matrix_array)
        else:
            ref_opts = options
        A = attnref.attention_matrix(mechanism, Q, K, **ref_opts)
        allowed = attnref.allowed_keys(mechanism, n, **ref_opts)
        m = attnref.metrics(A, allowed, rank_rtol=rank_rtol, row_entropy=True)
        for tag, arr in (("q", Q), ("k", K), ("a", A)):
            np.save(os.path.join(out, name + "_" + tag + ".npy"), np.ascontiguousarray(arr))
        cases.append(dict(name=name, mechanism=mechanism, options=options, rank_rtol=rank_rtol,
                          q=name + "_q.npy", k=name + "_k.npy", a=name + "_a.npy",
                          allowed=[int(x) for x in allowed], metrics=m))

    # --- softmax (1.1)
    add("softmax_default", "softmax", 50, 8)
    add("softmax_scale", "softmax", 50, 8, scale=0.37)
    add("softmax_causal", "softmax", 47, 6, causal=True)
    add("softmax_causal_scale", "softmax", 40, 5, causal=True, scale=1.9, spread=2.0)
    add("softmax_ignores_kernel_options", "softmax", 30, 4, feature_map="favor", blocks=3, mixing="exp",
        normalize="none")

    # --- linear (1.2, 1.3): every feature map, causal
    add("linear_relu", "linear", 60, 8)
    add("linear_elu1", "linear", 60, 8)
    add("linear_identity", "linear", 60, 8, offset=0.6, spread=0.5)
    add("linear_identity_none", "linear", 40, 6, normalize="none")
    add("linear_favor", "linear", 50, 8, feature_map="favor", favor_features=24, seed=7)
    add("linear_favor_default_m", "linear", 40, 4, feature_map="favor", spread=0.7)
    add("linear_favor_causal", "linear", 45, 6, feature_map="favor", favor_features=9, seed=12345678901234, causal=True)
    add("linear_relu_causal", "linear", 55, 8, causal=True)
    add("linear_elu1_causal", "linear", 55, 8, feature_map="elu1", causal=True)
    add("linear_none", "linear", 40, 6, normalize="none")
    add("linear_official", "linear", 40, 6, normalize="official")
    add("linear_rank_rtol", "linear", 60, 8, rank_rtol=1e-3)
    add("linear_elu1_causal_identity_none", "linear", 35, 4, feature_map="identity", causal=True, normalize="none")

    # --- MHLA blocks (1.5)
    add("mhla_blocks4", "mhla", 64, 8, blocks=4)
    add("mhla_blocks5_uneven", "mhla", 67, 8, blocks=5)
    add("mhla_blocks_default", "mhla", 70, 6)                     # M = min(16, N)
    add("mhla_blocks_default_small", "mhla", 11, 4)               # M = N
    add("mhla_blocks_one", "mhla", 30, 4, blocks=1)
    add("mhla_blocks_n", "mhla", 20, 4, blocks=20)
    add("mhla_chunk10", "mhla", 67, 8, chunk=10)                  # last block 7 tokens
    add("mhla_chunk_big", "mhla", 30, 4, chunk=64)                # one block
    add("mhla_grid2d_raster", "mhla", 96, 8, grid=[8, 12], block_grid=[2, 3])
    add("mhla_grid2d_blocked", "mhla", 96, 8, grid=[8, 12], block_grid=[2, 3], token_order="blocked")
    add("mhla_grid3d_raster", "mhla", 144, 6, grid=[4, 6, 6], block_grid=[2, 3, 2])
    add("mhla_grid3d_blocked", "mhla", 144, 6, grid=[4, 6, 6], block_grid=[2, 3, 2], token_order="blocked")
    add("mhla_grid2d_one_axis", "mhla", 60, 5, grid=[6, 10], block_grid=[1, 5])

    # --- mixing presets (1.6), on 1-D blocks and 2-D / 3-D grids
    for preset in attnref.PRESETS:
        add("mhla_mix_%s_1d" % preset, "mhla", 63, 6, blocks=7, mixing=preset)
        add("mhla_mix_%s_2d" % preset, "mhla", 100, 6, grid=[10, 10], block_grid=[5, 5], mixing=preset)
    add("mhla_mix_exp_sigma", "mhla", 63, 6, blocks=9, mixing="exp", mixing_sigma=1.7)
    add("mhla_mix_exp_sigma_3d", "mhla", 144, 6, grid=[4, 6, 6], block_grid=[2, 3, 2], mixing="exp", mixing_sigma=0.8)
    add("mhla_mix_local_thr1", "mhla", 100, 6, grid=[10, 10], block_grid=[5, 5], mixing="local", mixing_threshold=1.0)
    add("mhla_mix_local_thr2", "mhla", 100, 6, grid=[10, 10], block_grid=[5, 5], mixing="local",
        mixing_threshold=2.3, token_order="blocked")
    add("mhla_mix_local_thr_small", "mhla", 63, 6, blocks=7, mixing="local", mixing_threshold=0.2)
    add("mhla_mix_local_3d", "mhla", 144, 6, grid=[4, 6, 6], block_grid=[2, 3, 2], mixing="local",
        mixing_threshold=1.2)
    add("mhla_mix_gaussian_3d", "mhla", 144, 6, grid=[4, 6, 6], block_grid=[2, 3, 2], mixing="gaussian")
    learned = np.abs(rng.standard_normal((6, 6)))
    learned[1, 4] = 0.0
    add("mhla_mix_matrix", "mhla", 60, 6, blocks=6, mixing_matrix_array=learned)
    add("mhla_mix_matrix_grid", "mhla", 96, 8, grid=[8, 12], block_grid=[2, 3], mixing_matrix_array=np.abs(
        rng.standard_normal((6, 6))), normalize="none")

    # --- feature maps inside MHLA
    add("mhla_elu1", "mhla", 64, 8, blocks=4, feature_map="elu1", mixing="linear")
    add("mhla_favor", "mhla", 64, 8, blocks=4, feature_map="favor", favor_features=20, seed=99)
    add("mhla_identity_none", "mhla", 64, 8, blocks=4, feature_map="identity", normalize="none")
    add("mhla_identity_row", "mhla", 64, 8, blocks=4, feature_map="identity", offset=0.6, spread=0.5,
        mixing="gaussian")

    # --- normalisation (1.4)
    add("mhla_none", "mhla", 64, 8, blocks=4, normalize="none")
    add("mhla_official", "mhla", 64, 8, blocks=4, normalize="official")
    add("mhla_official_exp", "mhla", 64, 8, blocks=8, normalize="official", mixing="exp", mixing_sigma=2.5)
    add("mhla_official_grid_raster", "mhla", 96, 8, grid=[8, 12], block_grid=[2, 3], normalize="official")
    add("mhla_official_grid_blocked", "mhla", 96, 8, grid=[8, 12], block_grid=[2, 3], normalize="official",
        token_order="blocked", mixing="local")
    add("mhla_official_favor", "mhla", 48, 4, blocks=3, normalize="official", feature_map="favor",
        favor_features=16, seed=3)

    # --- causal MHLA
    add("mhla_causal_default", "mhla", 64, 8, blocks=4, causal=True)          # causal preset
    add("mhla_causal_uneven", "mhla", 67, 8, blocks=5, causal=True)
    add("mhla_causal_cos", "mhla", 64, 8, blocks=4, causal=True, mixing="cos")
    add("mhla_causal_exp", "mhla", 63, 6, blocks=7, causal=True, mixing="exp", mixing_sigma=1.3)
    add("mhla_causal_chunk", "mhla", 67, 8, chunk=10, causal=True)
    add("mhla_causal_grid_raster", "mhla", 96, 8, grid=[8, 12], block_grid=[2, 3], causal=True)
    add("mhla_causal_grid_blocked", "mhla", 96, 8, grid=[8, 12], block_grid=[2, 3], causal=True,
        token_order="blocked", mixing="gaussian")
    add("mhla_causal_grid3d_raster", "mhla", 144, 6, grid=[4, 6, 6], block_grid=[2, 3, 2], causal=True,
        mixing="local")
    add("mhla_causal_none_identity", "mhla", 64, 8, blocks=4, causal=True, normalize="none", feature_map="identity")
    add("mhla_causal_favor", "mhla", 50, 6, blocks=5, causal=True, feature_map="favor", favor_features=12, seed=5)
    add("mhla_causal_matrix", "mhla", 60, 6, blocks=6, causal=True, mixing_matrix_array=np.tril(
        np.abs(rng.standard_normal((6, 6)))) + 0.1 * np.eye(6))
    add("mhla_causal_rtol", "mhla", 64, 8, blocks=4, causal=True, rank_rtol=1e-8)

    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f)


if __name__ == "__main__":
    main()
