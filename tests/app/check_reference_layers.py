"""The reference layers (tools/python/attnscope_layers.py): for each, the matrix AttnScope computes from
the layer's recorded queries, keys and learned Mc (`attnscope matrix`) equals the layer's own attention
matrix to 1e-6 (float64: far closer in practice), causal and non-causal, 1-D blocks, chunks and grids (raster
and blocked), one Mc per head (H x M x M, named by the layer's `mixing` attribute: no option needed) and
one shared. The layers' linear-cost forward equals their dense matrix times v. Recorded through the bridge
(tools/python/attnscope_dump.py, record_reference_layer), which writes /layers/<i>/mixing.
usage: check_reference_layers.py ATTNSCOPE WORKDIR"""
import os
import sys

import h5py
import numpy as np

import cli_checks

torch = cli_checks.torch_or_skip()
from attnscope_dump import AttnScopeRecorder  # noqa: E402
from attnscope_layers import MHLA, LinearAttention, SoftmaxAttention, record_reference_layer  # noqa: E402

binary, work = sys.argv[1], sys.argv[2]
problems = []
run = cli_checks.runner(binary, problems)
torch.manual_seed(3)
torch.set_default_dtype(torch.float64)
N, C, H = 64, 32, 4

cases = [
    ("softmax", SoftmaxAttention(C, H), ["--mechanism", "softmax"]),
    ("softmax causal", SoftmaxAttention(C, H, causal=True), ["--mechanism", "softmax", "--causal"]),
    ("linear", LinearAttention(C, H), ["--mechanism", "linear"]),
    ("linear causal elu1", LinearAttention(C, H, feature_map="elu1", causal=True),
     ["--mechanism", "linear", "--causal", "--feature-map", "elu1"]),
    ("mhla blocks", MHLA(C, H, N, blocks=4), ["--mechanism", "mhla", "--blocks", "4"]),
    ("mhla uneven blocks, shared Mc", MHLA(C, H, N, blocks=5, mixing="exp", per_head=False),
     ["--mechanism", "mhla", "--blocks", "5"]),
    ("mhla grid raster", MHLA(C, H, N, grid=(8, 8), block_grid=(2, 4)),
     ["--mechanism", "mhla", "--grid", "8,8", "--block-grid", "2,4"]),
    ("mhla grid blocked", MHLA(C, H, N, grid=(8, 8), block_grid=(2, 2), token_order="blocked"),
     ["--mechanism", "mhla", "--grid", "8,8", "--block-grid", "2,2", "--token-order", "blocked"]),
    ("mhla causal chunks", MHLA(C, H, N, chunk=16, causal=True, mixing="causal-local"),
     ["--mechanism", "mhla", "--causal", "--chunk", "16"]),
    ("mhla causal uneven chunks elu1", MHLA(C, H, N, chunk=24, causal=True, mixing="causal", feature_map="elu1"),
     ["--mechanism", "mhla", "--causal", "--chunk", "24", "--feature-map", "elu1"]),
]
x = torch.randn(1, N, C)
for label, layer, opts in cases:
    if isinstance(layer, MHLA):
        with torch.no_grad():   # a "learned" Mc: the preset's entries scaled at random, one pushed below 0
            layer.weight.mul_(torch.empty_like(layer.weight).uniform_(0.2, 1.8))
            layer.weight[..., -1, 0] = -0.1   # relu: a zero weight of the last query block on the first
            layer.weight[..., -1, -1] += 0.2  # the last row keeps a positive weight (causal: its own block)
    path = os.path.join(work, label.replace(" ", "_").replace(",", "") + ".h5")
    with torch.no_grad():
        A = layer.attention(x)
        dense = layer._out(A @ layer.last_qkv[2])
        rec = AttnScopeRecorder(layer, mha=False).add(layer, record_reference_layer)
        with rec:   # through the bridge: q, k, v and the learned Mc
            y = layer(x)
    rec.save(path, dtype="float64")
    if not float((y - dense).abs().max()) <= 1e-10:
        problems.append(f"{label}: forward differs from the dense matrix times v by {float((y - dense).abs().max()):.3g}")
    with h5py.File(path, "r") as f:   # what the bridge wrote for the learned Mc
        has = "layers/0/mixing" in f and f["layers/0/q"].attrs.get("mixing") == "/layers/0/mixing"
    if has != isinstance(layer, MHLA):
        problems.append(f"{label}: the file {'lacks' if isinstance(layer, MHLA) else 'has'} a named /layers/0/mixing")
    for h in range(H):
        out = os.path.join(work, "m.npy")
        if run(["matrix", "--q", path + ":/layers/0/q", "--k", path + ":/layers/0/k", "--head", str(h)] + opts +
               ["--out", out]) is None:
            break
        err = float(np.abs(np.load(out) - A[0, h].numpy()).max())
        if not err <= 1e-6:
            problems.append(f"{label}, head {h}: max |attnscope - layer| = {err:.3g}")
        elif err > 1e-12:
            problems.append(f"{label}, head {h}: {err:.3g} is more than float64 rounding")

cli_checks.report(problems)
