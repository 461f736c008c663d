"""The PyTorch bridge's gates (tools/python/attnscope_dump.py, save(gates=...)): a causal recording saved with the
scalar gates of a gated model (as ln g, Mamba-2's dt * A) is analysed as `gated` from the file alone: the layer's
`gates` attribute names /layers/i/gates, written as g, and `attnscope matrix --mechanism gated` equals the NumPy
reference on the saved q, k and the given gates for every head; gates of the wrong shape or outside (0, 1] are
refused by save().
usage: check_bridge_gates.py ATTNSCOPE WORKDIR   (exit 77 when torch cannot be imported)"""
import os
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import attnref  # noqa: E402
import cli_checks  # noqa: E402

torch = cli_checks.torch_or_skip()
import attnscope_dump  # noqa: E402

binary, work = sys.argv[1], sys.argv[2]
problems = []
torch.manual_seed(0)
H, N = 2, 24
mha = torch.nn.MultiheadAttention(16, H, batch_first=True).double()
x = torch.randn(1, N, 16, dtype=torch.float64)
mask = torch.triu(torch.ones(N, N, dtype=torch.bool), 1)
with attnscope_dump.AttnScopeRecorder(mha) as rec:
    mha(x, x, x, attn_mask=mask)
g = torch.rand(1, H, N, dtype=torch.float64) * 0.5 + 0.5
path = rec.save(os.path.join(work, "gated.h5"), gates=[torch.log(g)], gates_log=True, dtype="float64")
with h5py.File(path, "r") as f:
    q, k = f["layers/0/q"][()], f["layers/0/k"][()]
    if f["layers/0/q"].attrs.get("gates") != "/layers/0/gates":
        problems.append(f"the layer's gates attribute is {f['layers/0/q'].attrs.get('gates')!r}")
for h in range(H):
    out = os.path.join(work, f"g{h}.npy")
    p = subprocess.run([binary, "matrix", "--q", path + ":/layers/0/q", "--k", path + ":/layers/0/k", "--head", str(h),
                        "--mechanism", "gated", "--out", out], capture_output=True, text=True)
    if p.returncode != 0:
        problems.append(f"head {h}: exit {p.returncode}: {p.stderr.strip()}")
        continue
    R = attnref.attention_matrix("gated", q[h], k[h], causal=True, gates=g[0, h].numpy())
    err = float(np.max(np.abs(np.load(out) - R)))
    if not err <= 1e-12:
        problems.append(f"head {h}: max |A - reference| = {err:.3g}")
for bad, why in ((g[:, :, 1:], "wrong shape"), (g * 3, "outside (0, 1]")):
    try:
        rec.save(os.path.join(work, "bad.h5"), gates=[bad])
        problems.append(f"save() took gates of the {why}")
    except ValueError:
        pass
cli_checks.report(problems)
