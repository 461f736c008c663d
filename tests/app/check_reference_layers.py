"""The reference layers (tools/python/attnscope_layers.py): for each, the matrix AttnScope computes from
the layer's recorded queries, keys and learned Mc (`attnscope matrix`) equals the layer's own attention
matrix to 1e-6 (float64: far closer in practice), causal and non-causal, 1-D blocks, chunks and grids (raster
and blocked), one Mc per head (H x M x M, named by the layer's `mixing` attribute: no option needed) and
one shared. The layers' linear-cost forward equals their dense matrix times v. The Mc parametrisations: clamp
keeps every entry in [1e-5, 1] under steps that push it down with weight decay, relu loses entries, free goes
negative and is written signed. Recorded through the bridge
(tools/python/attnscope_dump.py, record_reference_layer), which writes /layers/<i>/mixing.
usage: check_reference_layers.py ATTNSCOPE WORKDIR"""
import os
import sys

import h5py
import numpy as np

import cli_checks

torch = cli_checks.torch_or_skip()
from attnscope_dump import AttnScopeRecorder  # noqa: E402
from attnscope_layers import (MHLA, PARAMETRISATIONS, DecayAttention, GatedAttention, LinearAttention,  # noqa: E402
                              SoftmaxAttention, constrain_, record_reference_layer)

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
    ("mhla blocks relu", MHLA(C, H, N, blocks=4, parametrisation="relu"), ["--mechanism", "mhla", "--blocks", "4"]),
    ("mhla uneven blocks, shared Mc", MHLA(C, H, N, blocks=5, mixing="exp", per_head=False),
     ["--mechanism", "mhla", "--blocks", "5"]),
    ("mhla grid raster", MHLA(C, H, N, grid=(8, 8), block_grid=(2, 4)),
     ["--mechanism", "mhla", "--grid", "8,8", "--block-grid", "2,4"]),
    ("mhla grid blocked", MHLA(C, H, N, grid=(8, 8), block_grid=(2, 2), token_order="blocked"),
     ["--mechanism", "mhla", "--grid", "8,8", "--block-grid", "2,2", "--token-order", "blocked"]),
    ("mhla causal chunks relu", MHLA(C, H, N, chunk=16, causal=True, mixing="causal-local", parametrisation="relu"),
     ["--mechanism", "mhla", "--causal", "--chunk", "16"]),
    ("mhla causal uneven chunks elu1", MHLA(C, H, N, chunk=24, causal=True, mixing="causal", feature_map="elu1"),
     ["--mechanism", "mhla", "--causal", "--chunk", "24", "--feature-map", "elu1"]),
    # docs/maths.md 1.8: RetNet's default gamma per head (no option), causal and not; learned per-token gates
    # written by the bridge and named by the layer's `gates` attribute (no option either).
    # The authors' operators (issue 32 item 3): their vision code's denominator with a free Mc shared across heads,
    # their language-model code's unnormalised identity features, causal, on chunks.
    ("mhla official free shared", MHLA(C, H, N, blocks=4, mixing="cos", per_head=False, parametrisation="free",
                                       normalize="official"),
     ["--mechanism", "mhla", "--blocks", "4", "--normalize", "official"]),
    ("mhla causal none identity", MHLA(C, H, N, chunk=16, causal=True, mixing="causal-local", feature_map="identity",
                                       normalize="none"),
     ["--mechanism", "mhla", "--causal", "--chunk", "16", "--normalize", "none", "--feature-map", "identity"]),
    ("decay causal", DecayAttention(C, H, causal=True), ["--mechanism", "decay", "--causal"]),
    ("decay", DecayAttention(C, H, causal=False), ["--mechanism", "decay"]),
    ("gated", GatedAttention(C, H), ["--mechanism", "gated", "--causal"]),
]
x = torch.randn(1, N, C)
for label, layer, opts in cases:
    if isinstance(layer, MHLA):
        with torch.no_grad():   # a "learned" Mc: the preset's entries scaled at random, one pushed below 0
            layer.weight.mul_(torch.empty_like(layer.weight).uniform_(0.2, 1.8))
            layer.weight[..., -1, 0] = -0.1   # relu: a zero weight of the last query block on the first
            layer.weight[..., -1, -1] += 0.2  # the last row keeps a positive weight (causal: its own block)
            layer.constrain_()                # clamp: back into [1e-5, 1] as after an optimiser step
    path = os.path.join(work, label.replace(" ", "_").replace(",", "") + ".h5")
    with torch.no_grad():
        A = layer.attention(x)
        dense = layer._out(A @ layer.last_qkv[2])
        rec = AttnScopeRecorder(layer, mha=False).add(layer, record_reference_layer)
        with rec:   # through the bridge: q, k, v and the learned Mc
            y = layer(x)
    rec.save(path, dtype="float64", **({"gates": [layer.last_gates]} if isinstance(layer, GatedAttention) else {}))
    if not float((y - dense).abs().max()) <= 1e-10:
        problems.append(f"{label}: forward differs from the dense matrix times v by {float((y - dense).abs().max()):.3g}")
    if isinstance(layer, MHLA):   # the dense form (how the MQAR models train) is the same function
        layer.form = "dense"
        with torch.no_grad():
            yd = layer(x)
        layer.form = "blockwise"
        if not float((yd - y).abs().max()) <= 1e-10:
            problems.append(f"{label}: the dense form differs from the blockwise one by {float((yd - y).abs().max()):.3g}")
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


# The parametrisations (attnscope_layers.PARAMETRISATIONS) under steps that push Mc below 0 with weight decay:
# relu loses entries for good (zero, no gradient), clamp keeps every entry in [1e-5, 1], free goes negative and
# the bridge writes it signed.
def push_down(layer, steps=30):
    opt = torch.optim.AdamW(layer.parameters(), lr=0.05, weight_decay=0.5)
    for _ in range(steps):
        loss = layer(x).sum() + layer.mixing_matrix().sum()   # pulls Mc down
        opt.zero_grad()
        loss.backward()
        opt.step()
        constrain_(layer)
    return layer.mixing_matrix().detach()


for kind in PARAMETRISATIONS:
    torch.manual_seed(5)
    layer = MHLA(C, H, N, blocks=4, parametrisation=kind, per_head=kind != "free")
    mc = push_down(layer)
    if kind == "clamp" and not (float(mc.min()) >= np.float32(1e-5) and float(mc.max()) <= 1.0):
        problems.append(f"clamp: Mc left [1e-5, 1]: min {float(mc.min()):.3g}, max {float(mc.max()):.3g}")
    if kind == "relu" and not bool((mc == 0).any()):
        problems.append("relu: no Mc entry died (the test no longer shows what clamp prevents)")
    if kind == "free":
        if not float(mc.min()) < 0:
            problems.append(f"free: Mc stayed non-negative (min {float(mc.min()):.3g})")
        rec = AttnScopeRecorder(layer, mha=False).add(layer, record_reference_layer)
        with torch.no_grad(), rec:
            layer(x)
        path = rec.save(os.path.join(work, "free.h5"), dtype="float64")
        with h5py.File(path, "r") as f:
            written = f["layers/0/mixing"][()]
        if written.shape != (4, 4) or not np.allclose(written, mc.numpy(), rtol=0, atol=1e-12):
            problems.append(f"free: the file's Mc {written.shape} is not the layer's signed [4, 4] Mc")
try:
    MHLA(C, H, N, blocks=4, mixing=-np.eye(4), parametrisation="clamp")
    problems.append("clamp took a negative initial Mc")
except ValueError:
    pass
MHLA(C, H, N, blocks=4, mixing=-np.eye(4) + 0.5, parametrisation="free")   # signed initial Mc: accepted

cli_checks.report(problems)
