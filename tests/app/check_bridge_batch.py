"""The PyTorch bridge's batch dump (tools/python/attnscope_dump.py, save(batch="all")): a recording of B = 3 inputs
written in one file holds [B, H, N, d] datasets (root layout bhnd, batch_index "all", n_batch 3), and
`attnscope matrix --at b=I,h=h` on it equals PyTorch's own attention weights of input I, head h (softmax through
nn.MultiheadAttention, causal), and the reference MHLA layer's matrix with its learned Mc (tools/python/
attnscope_layers.py, the Mc written once for all inputs). Inputs of different lengths (padding) are refused.
usage: check_bridge_batch.py ATTNSCOPE WORKDIR   (exit 77 when torch cannot be imported)"""
import os
import sys

import h5py
import numpy as np

import cli_checks

torch = cli_checks.torch_or_skip()
from attnscope_dump import AttnScopeRecorder  # noqa: E402
from attnscope_layers import MHLA, record_reference_layer  # noqa: E402

binary, work = sys.argv[1], sys.argv[2]
problems = []
run = cli_checks.runner(binary, problems)
torch.manual_seed(11)
torch.set_default_dtype(torch.float64)
B, N, C, H = 3, 20, 16, 2


def compare(path, label, expected, opts):
    """attnscope matrix for every input and head of `path` against expected[b, h] (N x N)."""
    with h5py.File(path, "r") as f:
        shape, attrs = f["layers/0/q"].shape, dict(f.attrs)
    if shape != (B, H, N, C // H):
        problems.append(f"{label}: /layers/0/q has shape {shape}, expected {(B, H, N, C // H)}")
    for key, want in (("layout", "bhnd"), ("batch_index", "all"), ("n_batch", B), ("n_heads", H), ("n_tokens", N)):
        if attrs.get(key) != want:
            problems.append(f"{label}: root attribute {key} = {attrs.get(key)!r}, expected {want!r}")
    out = os.path.join(work, "m.npy")
    for b in range(B):
        for h in range(H):
            if run(["matrix", "--q", path + ":/layers/0/q", "--k", path + ":/layers/0/k", "--at", f"b={b},h={h}"]
                   + opts + ["--out", out]) is None:
                return
            err = float(np.abs(np.load(out) - expected[b, h]).max())
            if not err <= 1e-12:
                problems.append(f"{label}, input {b}, head {h}: max |attnscope - PyTorch| = {err:.3g}")


# softmax, causal, through nn.MultiheadAttention: PyTorch's per-head weights are the expectation
mha = torch.nn.MultiheadAttention(C, H, batch_first=True)
x = torch.randn(B, N, C)
mask = torch.triu(torch.ones(N, N, dtype=torch.bool), 1)
with torch.no_grad(), AttnScopeRecorder(mha) as rec:
    _, w = mha(x, x, x, attn_mask=mask, need_weights=True, average_attn_weights=False)
path = rec.save(os.path.join(work, "mha_batch.h5"), batch="all", dtype="float64")
with h5py.File(path, "r") as f:
    if "layers/0/v" not in f or f.attrs.get("causal") is not np.True_:
        problems.append("mha: the file lacks v or causal = true")
compare(path, "mha", w.numpy(), ["--mechanism", "softmax", "--causal"])
rec.save(os.path.join(work, "mha_nov.h5"), batch="all", values=False)
with h5py.File(os.path.join(work, "mha_nov.h5"), "r") as f:
    if "layers/0/v" in f:
        problems.append("values=False wrote v")

# the reference MHLA layer with a learned (here: scaled) Mc per head
layer = MHLA(C, H, N, blocks=4)
with torch.no_grad():
    layer.weight.mul_(torch.empty_like(layer.weight).uniform_(0.2, 1.8))
    layer.constrain_()
    A = layer.attention(x)
rec = AttnScopeRecorder(layer, mha=False).add(layer, record_reference_layer)
with torch.no_grad(), rec:
    layer(x)
path = rec.save(os.path.join(work, "mhla_batch.h5"), batch="all", dtype="float64")
with h5py.File(path, "r") as f:
    if f["layers/0/mixing"].shape != (H, 4, 4):
        problems.append(f"mhla: /layers/0/mixing has shape {f['layers/0/mixing'].shape}, expected {(H, 4, 4)}")
compare(path, "mhla", A.numpy(), ["--mechanism", "mhla", "--blocks", "4"])

# padded inputs differ in length: refused, and so are one element's tokens
kpm = torch.zeros(B, N, dtype=torch.bool)
kpm[1, -3:] = True
with torch.no_grad(), AttnScopeRecorder(mha) as rec:
    mha(x, x, x, key_padding_mask=kpm)
for kwargs, why in (({}, "padded inputs"), ({"tokens": ["t"] * N}, "tokens")):
    try:
        rec.save(os.path.join(work, "bad.h5"), batch="all", **kwargs)
        problems.append(f"save(batch='all') took {why}")
    except ValueError:
        pass
if os.path.exists(os.path.join(work, "bad.h5")):
    problems.append("a refused save left a file behind")
cli_checks.report(problems)
