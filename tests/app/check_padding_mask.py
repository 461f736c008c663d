"""The PyTorch bridge (tools/python/attnscope_dump.py) with nn.MultiheadAttention's key_padding_mask: the
padded keys (and, in self-attention, the padded queries) are dropped from the file and counted in
padded_tokens, and `attnscope matrix` on the file equals PyTorch's attention weights restricted to the real
tokens (a real query gives the padded keys weight 0, so its row over the real keys sums to 1) to 1e-6, for bool
and float (-inf) masks, padding at the end and at the start; `analyze` accepts the file; cross-attention keeps
every query and drops only the padded keys.
usage: check_padding_mask.py ATTNSCOPE WORKDIR   (exit 77 when torch cannot be imported)"""
import os
import sys

import h5py
import numpy as np

import cli_checks

torch = cli_checks.torch_or_skip()
import torch.nn as nn  # noqa: E402
from attnscope_dump import AttnScopeRecorder  # noqa: E402

binary, work = sys.argv[1], sys.argv[2]
torch.set_num_threads(1)
torch.manual_seed(21)
problems = []
run = cli_checks.runner(binary, problems, label="attnscope ")

E, H, B, N = 8, 2, 2, 6
mha = nn.MultiheadAttention(E, H, batch_first=True).double().eval()
x = torch.randn(B, N, E, dtype=torch.float64)
pad = torch.zeros(B, N, dtype=torch.bool)
pad[0, 4:] = True    # batch 0: two padded tokens at the end
pad[1, :1] = True    # batch 1: one at the start

for label, kpm in (("bool", pad), ("float", torch.zeros(B, N, dtype=torch.float64).masked_fill(pad, float("-inf")))):
    with torch.no_grad():
        _, weights = mha(x, x, x, key_padding_mask=kpm, need_weights=True, average_attn_weights=False)
    with AttnScopeRecorder(mha, name="mha") as rec:
        with torch.no_grad():
            mha(x, x, x, key_padding_mask=kpm)
    for b in range(B):
        path = os.path.join(work, f"pad_{label}_{b}.h5")
        rec.save(path, batch=b, dtype="float64")
        real = (~pad[b]).numpy()
        n_real = int(real.sum())
        with h5py.File(path) as f:
            q = f["layers/0/q"]
            if q.shape != (H, n_real, E // H) or f["layers/0/k"].shape != (H, n_real, E // H):
                problems.append(f"{label} batch {b}: q {q.shape}, k {f['layers/0/k'].shape}, expected {n_real} tokens")
                continue
            if not bool(q.attrs["key_padding_mask"]) or int(q.attrs["padded_tokens"]) != N - n_real:
                problems.append(f"{label} batch {b}: attributes {dict(q.attrs)}")
        for h in range(H):
            out = os.path.join(work, "A.npy")
            if run(["matrix", "--mechanism", "softmax", "--q", f"{path}:/layers/0/q", "--k", f"{path}:/layers/0/k",
                    "--head", str(h), "--no-causal", "--out", out]) is None:
                continue
            got = np.load(out)
            want = weights[b, h].numpy()[np.ix_(real, real)]
            err = np.abs(got - want).max()
            if not err < 1e-6:
                problems.append(f"{label} batch {b} head {h}: max |attnscope - torch| = {err:.3g}")
        run(["analyze", "--q", f"{path}:/layers/0/q", "--k", f"{path}:/layers/0/k", "--json", "-"])

# Cross-attention: 3 queries, 6 keys of which 2 padded: every query stays, the padded keys go.
cross = nn.MultiheadAttention(E, H, batch_first=True).double().eval()
xq = torch.randn(1, 3, E, dtype=torch.float64)
with AttnScopeRecorder(cross, name="cross") as rec:
    with torch.no_grad():
        cross(xq, x[:1], x[:1], key_padding_mask=pad[:1])
path = os.path.join(work, "pad_cross.h5")
rec.save(path)
with h5py.File(path) as f:
    if f["layers/0/q"].shape[1] != 3 or f["layers/0/k"].shape[1] != 4 or int(f["layers/0/q"].attrs["padded_tokens"]) != 2:
        problems.append(f"cross-attention: q {f['layers/0/q'].shape}, k {f['layers/0/k'].shape}")

cli_checks.report(problems)
