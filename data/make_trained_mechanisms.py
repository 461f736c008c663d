#!/usr/bin/python3
"""Trains the same two small models three times each, with softmax, linear and MHLA attention (the
reference layers of tools/python/attnscope_layers.py; everything else identical: seed, data order,
budget), and dumps each through the PyTorch bridge with its learned mixing matrices (docs/trained-mechanisms.md).

  trained_vit_{softmax,linear,mhla}.h5  a vision transformer (2 layers, 2 heads, d_model 32) on
        scikit-learn's 8x8 digits upsampled to 16x16, one token per pixel (N = 256, no CLS token: the
        class is read from the mean token); MHLA on a 4x4 block grid (M = 16), Mc initialised from `cos`,
        one per head. Dumped on one held-out digit (attributes grid [16,16], block_grid [4,4], image_16x16).
  trained_lm_{softmax,linear,mhla}.h5   a causal character model (2 layers, 4 heads, d_model 64, context
        512) on the license texts in /usr/share/common-licenses; MHLA on chunks of 64 (M = 8), Mc
        lower triangular, initialised from `causal-local`, one per head. Dumped on 512 held-out
        characters (attributes causal, text; analyse MHLA with --chunk 64).

usage: data/make_trained_mechanisms.py [vit|lm ...] [--mechanisms softmax,linear,mhla] [--threads T]
       Prints loss / accuracy (recorded in data/README.md and each file's attributes). Fixed seeds; the
       files are reproducible with the same PyTorch build and thread count.
"""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import math
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools", "python"))
from attnscope_dump import AttnScopeRecorder  # noqa: E402
from attnscope_layers import MHLA, LinearAttention, SoftmaxAttention, record_reference_layer  # noqa: E402

sys.path.insert(0, HERE)
from make_learned_samples import held_out_loss, license_corpus, train_windows  # noqa: E402

MECHANISMS = ("softmax", "linear", "mhla")


def attention_layer(mechanism, width, heads, n, causal, mhla_blocks):
    if mechanism == "softmax":
        return SoftmaxAttention(width, heads, causal=causal)
    if mechanism == "linear":
        return LinearAttention(width, heads, causal=causal)
    # per head, relu(W): as these samples were made; tools/study/train.py passes its own in mhla_blocks
    return MHLA(width, heads, n, causal=causal, **{"per_head": True, "parametrisation": "relu", **mhla_blocks})


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(LN x), then x + MLP(LN x)."""

    def __init__(self, attn, width):
        super().__init__()
        self.n1, self.attn, self.n2 = nn.LayerNorm(width), attn, nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.mlp(self.n2(x))


class Model(nn.Module):
    def __init__(self, mechanism, width, heads, depth, n, causal, mhla_blocks, vocab=None, classes=None):
        super().__init__()
        self.embed = nn.Embedding(vocab, width) if vocab else nn.Linear(1, width)
        self.pos = nn.Parameter(torch.randn(1, n, width) * 0.1)
        self.blocks = nn.ModuleList(Block(attention_layer(mechanism, width, heads, n, causal, mhla_blocks), width)
                                    for _ in range(depth))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab or classes)
        self.pooled = classes is not None

    @property
    def attention_layers(self):
        return [b.attn for b in self.blocks]

    def forward(self, x):
        h = self.embed(x) + self.pos
        for b in self.blocks:
            h = b(h)
        h = self.norm(h)
        return self.head(h.mean(dim=1) if self.pooled else h)


def record(model, x, out, mechanism, **save):
    rec = AttnScopeRecorder(model, name=f"{mechanism}-trained", mha=False)
    for layer in model.attention_layers:
        rec.add(layer, record_reference_layer)
    with torch.no_grad(), rec:
        logits = model(x)
    rec.save(out, **save)
    return logits


# ---------------------------------------------------------------------------------------------
def digits16():
    from sklearn.datasets import load_digits

    d = load_digits()
    img = torch.tensor(d.images / 16.0, dtype=torch.float32).unsqueeze(1)
    img = F.interpolate(img, size=(16, 16), mode="bilinear", align_corners=False).squeeze(1)
    return img, torch.tensor(d.target, dtype=torch.long)


def train_vit(mechanism, out, epochs=20, batch=64):
    X, y = digits16()
    perm = torch.randperm(len(X), generator=torch.Generator().manual_seed(4))
    test_idx, train_idx = perm[:297], perm[297:]
    torch.manual_seed(3)
    model = Model(mechanism, 32, 2, 2, 256, False, dict(grid=(16, 16), block_grid=(4, 4), mixing="cos"), classes=10)
    steps = epochs * math.ceil(len(train_idx) / batch)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps, pct_start=0.1)
    g = torch.Generator().manual_seed(5)
    t0 = time.time()
    tokens = lambda imgs: imgs.flatten(1).unsqueeze(-1)  # noqa: E731  pixel (r, c) is token r * 16 + c
    for epoch in range(epochs):
        model.train()
        order = train_idx[torch.randperm(len(train_idx), generator=g)]
        total, n = 0.0, 0
        for i in range(0, len(order), batch):
            b = order[i:i + batch]
            loss = F.cross_entropy(model(tokens(X[b])), y[b])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total, n = total + loss.item() * len(b), n + len(b)
        print(f"  vit/{mechanism} epoch {epoch:3d}  train loss {total / n:.3f}  ({time.time() - t0:.0f} s)", flush=True)
    model.eval()
    with torch.no_grad():
        acc_test = (model(tokens(X[test_idx])).argmax(1) == y[test_idx]).float().mean().item()
        acc_train = (model(tokens(X[train_idx])).argmax(1) == y[train_idx]).float().mean().item()
    i = int(test_idx[0])
    with torch.no_grad():
        predicted = int(model(tokens(X[i:i + 1])).argmax(1))
    record(model, tokens(X[i:i + 1]), out, mechanism, grid=(16, 16), causal=False, attrs={
        "mechanism": mechanism, "block_grid": [4, 4], "label": int(y[i]), "digits_index": i,
        "image_16x16": np.round(X[i].numpy() * 16.0, 3),
        "training": f"{epochs} epochs of AdamW (batch {batch}, lr 3e-3 one-cycle) on {len(train_idx)} of sklearn's "
                    f"1797 8x8 digits upsampled to 16x16 (one token per pixel, mean-token readout); seed 3",
        "train_loss": round(total / n, 4), "train_accuracy": round(acc_train, 4), "test_accuracy": round(acc_test, 4),
        "predicted": predicted})
    print(f"vit/{mechanism}: train loss {total / n:.3f}, train accuracy {acc_train:.4f}, test accuracy {acc_test:.4f}"
          f" ({len(test_idx)} held out), {time.time() - t0:.0f} s -> {out}", flush=True)
    return acc_test


def train_lm(mechanism, out, steps=600, batch=8, context=512):
    chars, _, train, val, names = license_corpus()
    torch.manual_seed(1)
    model = Model(mechanism, 64, 4, 2, context, True, dict(chunk=64, mixing="causal-local"), vocab=len(chars))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps, pct_start=0.1)
    g = torch.Generator().manual_seed(2)
    t0 = time.time()
    ema = train_windows(model, train, len(chars), opt, sched, g, steps, batch, context, f"lm/{mechanism}", 50)
    val_loss = held_out_loss(model, val, len(chars), context)
    window = val[:context].unsqueeze(0)
    record(model, window, out, mechanism, causal=True, attrs={
        "mechanism": mechanism, "text": "".join(chars[i] for i in window[0].tolist()),
        "mhla_chunk": 64,
        "training": f"{steps} steps of AdamW (batch {batch} windows of {context} characters, lr 3e-3 one-cycle) on "
                    f"{len(train)} characters of /usr/share/common-licenses ({len(names)} files); seed 1",
        "train_loss": round(ema, 4), "val_loss": round(val_loss, 4),
        "val_bits_per_char": round(val_loss / math.log(2), 4), "vocab_size": len(chars)})
    print(f"lm/{mechanism}: train loss {ema:.3f} nats/char (EMA), held-out {val_loss:.3f} nats/char "
          f"= {val_loss / math.log(2):.3f} bits/char, {time.time() - t0:.0f} s -> {out}", flush=True)
    return val_loss


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("which", nargs="*", choices=["vit", "lm", []], default=[])
    p.add_argument("--mechanisms", default=",".join(MECHANISMS))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=None, help="LM steps / ViT epochs (default 600 / 20), for trials")
    p.add_argument("--out", default=HERE)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True)
    for task in a.which or ["vit", "lm"]:
        for m in a.mechanisms.split(","):
            out = os.path.join(a.out, f"trained_{task}_{m}.h5")
            if task == "vit":
                train_vit(m, out, **({"epochs": a.steps} if a.steps else {}))
            else:
                train_lm(m, out, **({"steps": a.steps} if a.steps else {}))


if __name__ == "__main__":
    main()
