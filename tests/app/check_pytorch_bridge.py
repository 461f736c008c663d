"""The PyTorch bridge (tools/python/attnscope_dump.py) against PyTorch itself: the softmax matrix
`attnscope matrix` computes from the dumped q and k equals the weights nn.MultiheadAttention returns
(need_weights=True, average_attn_weights=False) to 1e-6, over layers, heads, batch elements,
batch_first True/False, causal masks (bool and float, --causal) and float64 models; the projections
for kdim/vdim, add_bias_kv, add_zero_attn, unbatched input and encoder-decoder attention; the fused
TransformerEncoderLayer fast path; a custom module through a user function; the file's attributes.
usage: check_pytorch_bridge.py ATTNSCOPE WORKDIR   (exit 77 when torch cannot be imported)"""
import json
import math
import os
import subprocess
import sys

import numpy as np

import cli_checks

torch = cli_checks.torch_or_skip()
import torch.nn as nn  # noqa: E402
from attnscope_dump import AttnScopeRecorder, mask_kind  # noqa: E402

binary, work = sys.argv[1], sys.argv[2]
torch.set_num_threads(1)
problems = []
checked = 0
run = cli_checks.runner(binary, problems, label="attnscope ")


def attnscope_matrix(path, layer, head, causal=False):
    out = os.path.join(work, "A.npy")
    if os.path.exists(out):
        os.unlink(out)
    # PyTorch's weights cover every token: keep the CLS token the file's prefix_tokens attribute would
    # drop by default, and say causal or not explicitly (the file's causal attribute is a default too).
    args = ["matrix", "--mechanism", "softmax", "--q", f"{path}:/layers/{layer}/q", "--k", f"{path}:/layers/{layer}/k",
            "--head", str(head), "--prefix-tokens", "0", "--out", out]
    args.append("--causal" if causal else "--no-causal")
    if run(args) is None:
        return None
    return np.load(out)


def compare(a, b, what, tol):
    global checked
    checked += 1
    if a is None:
        return
    if a.shape != b.shape:
        problems.append(f"{what}: shape {a.shape} vs PyTorch {b.shape}")
        return
    err = float(np.max(np.abs(a - b)))
    if not err <= tol:
        problems.append(f"{what}: max |attnscope - pytorch| = {err:.3g} > {tol:g}")


class Block(nn.Module):
    """Pre-norm transformer block that keeps the per-head weights of its attention."""

    def __init__(self, width, heads, batch_first):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=batch_first)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))
        with torch.no_grad():  # PyTorch initialises the in-projection bias to 0: make it count
            self.attn.in_proj_bias.normal_(0, 0.3)
        self.weights = None

    def forward(self, x, mask=None):
        y = self.norm(x)
        a, w = self.attn(y, y, y, attn_mask=mask, need_weights=True, average_attn_weights=False)
        self.weights = w.detach()
        x = x + a
        return x + self.mlp(x)


class Net(nn.Module):
    def __init__(self, width=48, heads=4, depth=3, batch_first=True):
        super().__init__()
        self.batch_first = batch_first
        self.blocks = nn.ModuleList(Block(width, heads, batch_first) for _ in range(depth))

    def forward(self, x, mask=None):
        for b in self.blocks:
            x = b(x, mask)
        return x


def causal_mask(n, kind):
    above = torch.ones(n, n, dtype=torch.bool).triu(1)
    if kind == "bool":
        return above
    return torch.zeros(n, n).masked_fill(above, float("-inf"))


def info_json(path):
    text = run(["info", path, "--json"])
    return None if text is None else json.loads(text)


# 1. attnscope matrix == PyTorch's weights, float32 models, to 1e-6
N, B = 37, 3
for batch_first in (True, False):
    for mask_type in (None, "bool", "float"):
        torch.manual_seed(100 + 2 * batch_first + (0 if mask_type is None else len(mask_type)))
        net = Net(batch_first=batch_first).eval()
        x = torch.randn(B, N, 48) * 2.0
        if not batch_first:
            x = x.transpose(0, 1).contiguous()
        mask = None if mask_type is None else causal_mask(N, mask_type)
        batch = 1
        with torch.no_grad(), AttnScopeRecorder(net, name="bridge-test") as rec:
            net(x, mask)
        path = os.path.join(work, f"acts_bf{int(batch_first)}_{mask_type}.h5")
        rec.save(path, batch=batch)  # causal taken from the masks
        tag = f"batch_first={batch_first} mask={mask_type}"
        if len(rec.layers) != 3:
            problems.append(f"{tag}: {len(rec.layers)} layers recorded, want 3")
            continue
        for layer in range(3):
            w = net.blocks[layer].weights[batch].double().numpy()  # [H, N, N]
            for head in range(4):
                if (layer + head) % 2 and mask_type == "float":
                    continue  # keep the run short: every head is covered by the other configurations
                a = attnscope_matrix(path, layer, head, causal=mask_type is not None)
                compare(a, w[head], f"{tag} layer {layer} head {head}", 1e-6)
        meta = info_json(path)
        if meta:
            at = meta["attributes"]
            want = {"model": "bridge-test", "causal": mask_type is not None, "prefix_tokens": 0, "n_layers": 3,
                    "n_heads": 4, "n_tokens": N, "batch_index": batch, "source": "attnscope_dump", "layout": "hnd"}
            for k, v in want.items():
                if at.get(k) != v:
                    problems.append(f"{tag}: root attribute {k} = {at.get(k)!r}, want {v!r}")
            if "grid" in at:
                problems.append(f"{tag}: grid attribute written for a 1-D model")
            shapes = {t["name"]: t["shape"] for t in meta["tensors"]}
            for layer in range(3):
                for r in "qkv":
                    if shapes.get(f"/layers/{layer}/{r}") != [4, N, 12]:
                        problems.append(f"{tag}: /layers/{layer}/{r} shape {shapes.get(f'/layers/{layer}/{r}')}")
            t0 = next(t for t in meta["tensors"] if t["name"] == "/layers/1/q")
            if t0["attributes"].get("mask") != ("none" if mask_type is None else "causal") \
                    or t0["attributes"].get("module") != "blocks.1.attn" or t0["dtype"] != "float32":
                problems.append(f"{tag}: /layers/1/q attributes {t0['attributes']} dtype {t0['dtype']}")

# 2. float64 model and float64 dump: agreement to 1e-12 (the re-projection is exact, not approximate)
torch.manual_seed(7)
net = Net(width=32, heads=2, depth=2, batch_first=True).double().eval()
x = torch.randn(2, 50, 32, dtype=torch.float64)
with torch.no_grad(), AttnScopeRecorder(net) as rec:
    net(x, causal_mask(50, "bool"))
path = os.path.join(work, "acts_f64.h5")
rec.save(path, batch=0, dtype="float64")
for layer in range(2):
    for head in range(2):
        a = attnscope_matrix(path, layer, head, causal=True)
        compare(a, net.blocks[layer].weights[0, head].numpy(), f"float64 layer {layer} head {head}", 1e-12)


# 3. projection variants, checked in NumPy (float64) against PyTorch's weights
def softmax_np(q, k, extra_mask=None):
    s = q @ k.T / math.sqrt(q.shape[-1])
    if extra_mask is not None:
        s = np.where(extra_mask, -np.inf, s)
    s = s - s.max(axis=1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=1, keepdims=True)


variants = [
    ("kdim/vdim", dict(kdim=20, vdim=12), "cross-sep"),
    ("add_bias_kv", dict(add_bias_kv=True), "self"),
    ("add_zero_attn", dict(add_zero_attn=True), "self"),
    ("bias_kv+zero_attn", dict(add_bias_kv=True, add_zero_attn=True), "self"),
    ("encoder-decoder (key is value)", dict(), "cross"),
    ("q, k, v all different", dict(), "qkv"),
    ("no bias", dict(bias=False), "self"),
    ("unbatched", dict(), "unbatched"),
]
for what, kw, mode in variants:
    for batch_first in (False, True):
        torch.manual_seed(11)
        mha = nn.MultiheadAttention(24, 3, batch_first=batch_first, **kw).double().eval()
        if mha.in_proj_bias is not None:
            with torch.no_grad():
                mha.in_proj_bias.normal_(0, 0.5)
        nq, nk = 9, 9 if mode in ("self", "unbatched") else 13

        def seq(n, e):
            t = torch.randn(2, n, e, dtype=torch.float64)
            return t if batch_first else t.transpose(0, 1)
        if mode == "self":
            xq = seq(nq, 24)
            args = (xq, xq, xq)
        elif mode == "unbatched":
            xq = torch.randn(nq, 24, dtype=torch.float64)
            args = (xq, xq, xq)
        elif mode == "cross":
            xq, xk = seq(nq, 24), seq(nk, 24)
            args = (xq, xk, xk)
        elif mode == "qkv":
            args = (seq(nq, 24), seq(nk, 24), seq(nk, 24))
        else:
            args = (seq(nq, 24), seq(nk, 20), seq(nk, 12))
        with torch.no_grad(), AttnScopeRecorder(mha) as rec:
            _, w = mha(*args, need_weights=True, average_attn_weights=False)
        if w.dim() == 3:
            w = w.unsqueeze(0)
        nb = 1 if mode == "unbatched" else 2
        for b in range(nb):
            q, k, v = rec.tensors(0, batch=b)
            for h in range(3):
                global_what = f"{what} batch_first={batch_first} b={b} h={h}"
                compare(softmax_np(q[h], k[h]), w[b, h].numpy(), global_what, 1e-12)
        extra = rec.layers[0].extra_keys
        want_extra = int(kw.get("add_bias_kv", False)) + int(kw.get("add_zero_attn", False))
        if extra != want_extra or k.shape[1] != nk + want_extra:
            problems.append(f"{what}: extra_keys {extra}, k tokens {k.shape[1]}")

# 4. nn.TransformerEncoderLayer in eval mode under no_grad (PyTorch's fused fast path skips the module)
torch.manual_seed(3)
layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
x = torch.randn(2, 17, 32)
with torch.no_grad():
    plain = enc(x)
    with AttnScopeRecorder(enc) as rec:
        recorded = enc(x)
    again = enc(x)
if len(rec.layers) != 2:
    problems.append(f"TransformerEncoder fast path: {len(rec.layers)} layers recorded, want 2")
if not torch.allclose(plain, recorded, atol=1e-5) or not torch.equal(plain, again):
    problems.append("TransformerEncoder: recording changed the output, or the recorder was not removed")
if "forward" in enc.layers[0].__dict__ or "forward" in enc.layers[0].self_attn.__dict__:
    problems.append("the recorder left a wrapped forward behind")
if len(rec.layers) == 2:
    # layer 0's attention input is norm-free (post-norm layer): self_attn(x, x, x)
    with torch.no_grad():
        _, w = enc.layers[0].self_attn(x, x, x, need_weights=True, average_attn_weights=False)
    path = os.path.join(work, "acts_encoder.h5")
    rec.save(path, batch=1)
    for h in (0, 3):
        compare(attnscope_matrix(path, 0, h), w[1, h].double().numpy(), f"TransformerEncoder layer 0 head {h}", 1e-6)


# 5. any module through a user function (ViT-style fused qkv projection), grid + prefix attributes
class FusedAttention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.probs = None

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        p = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1)
        self.probs = p.detach()
        return self.proj((p @ v).transpose(1, 2).reshape(B, N, C))


def fused_qkv(mod, args, kwargs, out):
    x = args[0]
    B, N, C = x.shape
    qkv = mod.qkv(x).reshape(B, N, 3, mod.heads, C // mod.heads).permute(2, 0, 3, 1, 4)
    return qkv[0], qkv[1], qkv[2]


torch.manual_seed(5)
model = nn.Sequential(FusedAttention(32, 4), FusedAttention(32, 4)).eval()
x = torch.randn(1, 1 + 6 * 6, 32)
with torch.no_grad(), AttnScopeRecorder(model, name="fused", modules={"1": fused_qkv}).add(model[0], fused_qkv) as rec:
    model(x)
path = os.path.join(work, "acts_custom.h5")
rec.save(path, grid=(6, 6), prefix_tokens=1)
if [r.name for r in rec.layers] != ["0", "1"]:
    problems.append(f"custom modules recorded as {[r.name for r in rec.layers]}")
for layer in range(2):
    compare(attnscope_matrix(path, layer, 2), model[layer].probs[0, 2].double().numpy(), f"custom layer {layer}", 1e-6)
meta = info_json(path)
if meta:
    at = meta["attributes"]
    if at.get("grid") != [6, 6] or at.get("prefix_tokens") != 1 or at.get("causal") is not False:
        problems.append(f"custom: attributes {at}")
# the grid attribute drives an analysis with the same numbers as explicit options
out = run(["analyze", "--q", path + ":/layers/0/q", "--k", path + ":/layers/0/k", "--head", "1", "--prefix-tokens", "1",
           "--grid", "6,6", "--block-grid", "3,3", "--json", "-"])
if out is not None and json.loads(out)["input"]["n"] != 36:
    problems.append("custom: analyze with --prefix-tokens 1 does not see 36 tokens")

# 6. mask classification and refusing a wrong grid
for m, n, want in [(None, 4, "none"), (causal_mask(4, "bool"), 4, "causal"), (causal_mask(4, "float"), 4, "causal"),
                   (causal_mask(4, "bool").T, 4, "other"), (torch.zeros(4, 4), 4, "other"),
                   (causal_mask(4, "float").unsqueeze(0).repeat(6, 1, 1), 4, "causal")]:
    if mask_kind(m, n, n) != want:
        problems.append(f"mask_kind: {want} mask classified as {mask_kind(m, n, n)}")
try:
    rec.save(os.path.join(work, "bad.h5"), grid=(5, 5), prefix_tokens=1)
    problems.append("save accepted a 5x5 grid for 37 tokens")
except ValueError:
    pass
if any(f.startswith(".attnscope_dump.") or f == "bad.h5" for f in os.listdir(work)):
    problems.append("a failed save left a file behind")

# 7. the command line demo
demo = os.path.join(work, "demo.h5")
p = subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "python",
                                                   "attnscope_dump.py"), "--demo", demo], capture_output=True, text=True)
if p.returncode != 0:
    problems.append(f"attnscope_dump.py --demo exited {p.returncode}: {p.stderr}")
else:
    meta = info_json(demo)
    if meta and (meta["attributes"].get("grid") != [8, 8] or len(meta["tensors"]) != 6):
        problems.append(f"demo file: {meta['attributes']}, {len(meta['tensors'])} tensors")
    run(["analyze", "--q", demo + ":/layers/1/q", "--k", demo + ":/layers/1/k", "--head", "3", "--prefix-tokens", "1",
         "--grid", "8,8", "--block-grid", "4,4"])

print(f"{checked} attention matrices compared with PyTorch's (torch {torch.__version__})")
cli_checks.report(problems)
