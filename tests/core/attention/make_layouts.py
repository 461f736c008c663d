"""Known answers for the building blocks: block layouts (numpy.array_split, unravel_index,
ravel_multi_index), mixing matrices of every preset, and the FAVOR+ projection W.

    python3 make_layouts.py OUT_DIR      -> OUT_DIR/layouts.json
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference"))
import attnref  # noqa: E402


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    layouts = []
    specs = [
        dict(n=196, blocks=16), dict(n=17, blocks=5), dict(n=10, blocks=10), dict(n=7, blocks=1),
        dict(n=40, blocks=None), dict(n=9, blocks=None), dict(n=23, chunk=5), dict(n=20, chunk=5),
        dict(n=3, chunk=8), dict(n=196, grid=[14, 14], block_grid=[2, 7]),
        dict(n=196, grid=[14, 14], block_grid=[2, 7], token_order="blocked"),
        dict(n=24, grid=[4, 6], block_grid=[4, 3]), dict(n=120, grid=[4, 5, 6], block_grid=[2, 5, 3]),
        dict(n=120, grid=[4, 5, 6], block_grid=[2, 5, 3], token_order="blocked"),
        dict(n=12, grid=[3, 4], block_grid=[1, 1]), dict(n=8, grid=[2, 2, 2], block_grid=[2, 2, 2]),
    ]
    for s in specs:
        n = s["n"]
        kw = {k: v for k, v in s.items() if k != "n"}
        blk, centres = attnref.block_layout(n, **kw)
        mixing = {}
        for preset in attnref.PRESETS:
            mixing[preset] = attnref.mixing_preset(preset, centres).tolist()
        mixing["exp_sigma_0.9"] = attnref.mixing_preset("exp", centres, sigma=0.9).tolist()
        mixing["local_thr_2.5"] = attnref.mixing_preset("local", centres, threshold=2.5).tolist()
        mixing["default_causal"] = attnref.mixing_preset(None, centres, causal=True).tolist()
        mixing["default"] = attnref.mixing_preset(None, centres, causal=False).tolist()
        layouts.append(dict(spec=s, block=[int(b) for b in blk], centres=centres.tolist(), mixing=mixing))
    favor = []
    for m, d, seed in ((3, 4, 0), (5, 2, 42), (2, 7, 2 ** 64 - 1), (16, 8, 123456789)):
        favor.append(dict(m=m, d=d, seed=str(seed), w=attnref.favor_projection(m, d, seed).tolist()))
    rng = np.random.default_rng(5)
    X = rng.standard_normal((6, 4)) * 1.5
    maps = {name: attnref.apply_feature_map(name, X, favor_features=7, seed=11).tolist()
            for name in ("relu", "elu1", "identity", "favor")}
    with open(os.path.join(out, "layouts.json"), "w") as f:
        json.dump(dict(layouts=layouts, favor=favor, feature_maps=dict(x=X.tolist(), phi=maps)), f)


if __name__ == "__main__":
    main()
