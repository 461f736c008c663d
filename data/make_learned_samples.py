#!/usr/bin/python3
"""Trains two small models on data Debian ships and dumps their attention with the PyTorch bridge
(tools/python/attnscope_dump.py). CPU only, fixed seeds, a few minutes on two cores.

  char_lm_licenses.h5  a character-level causal transformer (3 layers, 4 heads, d_model 64,
                       context 512) trained on the license texts in /usr/share/common-licenses,
                       dumped on 512 characters of held-out text (causal=True).
  vit_digits.h5        a small vision transformer (3 layers, 4 heads, d_model 64) trained on
                       scikit-learn's 8x8 digits with one token per pixel (1x1 patches: an 8x8
                       grid + CLS), dumped on one test image (grid=[8,8], prefix_tokens=1).
  char_llama_gqa.h5    a character-level decoder in the LLaMA style (RMSNorm, rotary embeddings,
                       grouped-query attention with 4 query heads sharing 2 key/value heads, SwiGLU;
                       3 layers, d_model 64) calling F.scaled_dot_product_attention, trained on the
                       same license texts, dumped through the bridge's SDPA capture on 256 held-out
                       characters with their token strings (causal=True).

usage: data/make_learned_samples.py [lm|vit|llama ...] [--threads T (default 1)]   (Debian: python3-torch, python3-sklearn,
       python3-h5py). Prints the loss / accuracy reached (recorded in data/README.md). The files are
       reproducible with the same PyTorch build and thread count; other CPUs or BLAS builds may differ
       in the last bits.
"""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch: one thread each unless --threads says more
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import glob
import math
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools", "python"))
from attnscope_dump import AttnScopeRecorder, sdpa_reference  # noqa: E402


class Encoder(nn.Module):
    """Pre-norm transformer encoder from nn.TransformerEncoderLayer (its self_attn is an
    nn.MultiheadAttention the bridge records)."""

    def __init__(self, width, heads, depth):
        super().__init__()
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)

    def forward(self, x, mask=None):
        return self.norm(self.blocks(x, mask=mask))


# ---------------------------------------------------------------------------------------------
# (a) character-level causal language model on the license texts
class CharLM(nn.Module):
    def __init__(self, vocab, width=64, heads=4, depth=3, context=512):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(torch.randn(1, context, width) * 0.02)
        self.enc = Encoder(width, heads, depth)
        self.head = nn.Linear(width, vocab)
        n = context
        self.register_buffer("mask", torch.zeros(n, n).masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1),
                                                                  float("-inf")), persistent=False)

    def forward(self, idx, offset=0):
        n = idx.shape[1]
        x = self.tok(idx) + self.pos[:, offset:offset + n]
        return self.head(self.enc(x, self.mask[:n, :n]))


def license_text():
    files = sorted({os.path.realpath(p) for p in glob.glob("/usr/share/common-licenses/*") if os.path.isfile(p)})
    if not files:
        raise SystemExit("error: /usr/share/common-licenses is empty")
    text = "\n\n".join(open(p, encoding="utf-8", errors="replace").read() for p in files)
    return " ".join(text.split(" ")).replace("\t", " "), [os.path.basename(p) for p in files]


def license_corpus():
    """The license texts as character ids: (chars, stoi, train, val, file names); the last 5% held out."""
    text, names = license_text()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    split = int(0.95 * len(data))
    return chars, stoi, data[:split], data[split:], names


def train_windows(model, train, vocab, opt, sched, g, steps, batch, context, label, every):
    """``steps`` steps of next-character loss on ``batch`` random windows of ``context`` characters drawn
    with generator ``g`` (gradients clipped at 1); returns the loss's moving average (0.95)."""
    t0 = time.time()
    ema = None
    model.train()
    for step in range(steps):
        starts = torch.randint(0, len(train) - context - 1, (batch,), generator=g).tolist()
        x = torch.stack([train[s:s + context] for s in starts])
        y = torch.stack([train[s + 1:s + context + 1] for s in starts])
        loss = F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if step % every == 0 or step == steps - 1:
            print(f"  {label} step {step:4d}  loss {loss.item():.3f}  ({time.time() - t0:.0f} s)", flush=True)
    model.eval()
    return ema


def held_out_loss(model, val, vocab, context):
    """Mean next-character loss (nats) over the held-out text in consecutive windows of ``context``."""
    with torch.no_grad():
        vs = [val[s:s + context + 1] for s in range(0, len(val) - context - 1, context)]
        vx, vy = torch.stack([v[:-1] for v in vs]), torch.stack([v[1:] for v in vs])
        return F.cross_entropy(model(vx).reshape(-1, vocab), vy.reshape(-1)).item()


def train_lm(out, steps=1500, batch=8, context=512, short=128, short_steps=1200):
    """``short_steps`` steps on windows of ``short`` characters (4x the batch) placed at a random
    position offset, so every positional embedding up to ``context`` trains at a fraction of the cost of
    full windows; then full windows of ``context`` characters."""
    torch.manual_seed(1)
    chars, stoi, train, val, names = license_corpus()
    model = CharLM(len(chars), context=context)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps, pct_start=0.1)
    g = torch.Generator().manual_seed(2)
    t0 = time.time()
    model.train()
    ema = None
    for step in range(steps):
        n, b = (short, batch * context // short) if step < short_steps else (context, batch)
        offset = int(torch.randint(0, context - n + 1, (1,), generator=g)) if n < context else 0
        starts = torch.randint(0, len(train) - n - 1, (b,), generator=g)
        x = torch.stack([train[s:s + n] for s in starts.tolist()])
        y = torch.stack([train[s + 1:s + n + 1] for s in starts.tolist()])
        loss = F.cross_entropy(model(x, offset).reshape(-1, len(chars)), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if step % 100 == 0 or step == steps - 1:
            print(f"  lm step {step:4d}  window {n}  loss {loss.item():.3f}  ({time.time() - t0:.0f} s)", flush=True)
    model.eval()
    val_loss = held_out_loss(model, val, len(chars), context)
    with torch.no_grad():
        window = val[:context].unsqueeze(0)
        with AttnScopeRecorder(model, name="char-LM on Debian's license texts (3 layers, 4 heads, d_model 64)") as rec:
            model(window)
    sample = "".join(chars[i] for i in window[0].tolist())
    rec.save(out, attrs={
        "text": sample,
        "training": f"{steps} steps of AdamW ({short_steps} x {batch * context // short} windows of {short} chars at "
                    f"random position offsets, then {steps - short_steps} x {batch} windows of {context}) on {len(train)} characters of "
                    f"/usr/share/common-licenses ({', '.join(names)}); seed 1",
        "train_loss": round(ema, 4), "val_loss": round(val_loss, 4),
        "val_bits_per_char": round(val_loss / math.log(2), 4), "vocab_size": len(chars)})
    print(f"lm: train loss {ema:.3f} nats/char (EMA), held-out {val_loss:.3f} nats/char "
          f"= {val_loss / math.log(2):.3f} bits/char, {time.time() - t0:.0f} s -> {out}")
    return ema, val_loss


# ---------------------------------------------------------------------------------------------
# (b) vision transformer on the 8x8 digits, upsampled to 16x16, one token per pixel
class DigitsViT(nn.Module):
    def __init__(self, width=64, heads=4, depth=3, side=8):
        super().__init__()
        self.side = side
        self.embed = nn.Linear(1, width)
        self.cls = nn.Parameter(torch.randn(1, 1, width) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, side * side + 1, width) * 0.3)
        self.enc = Encoder(width, heads, depth)
        self.head = nn.Linear(width, 10)

    def forward(self, img):  # [B, 8, 8] in [0, 1]
        if img.shape[-1] != self.side:
            img = F.interpolate(img.unsqueeze(1), size=(self.side, self.side), mode="bilinear",
                                align_corners=False).squeeze(1)
        x = self.embed(img.flatten(1).unsqueeze(-1))  # raster order: pixel (r, c) is token 1 + r * side + c
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.enc(x)[:, 0])


def train_vit(out, epochs=25, batch=64):
    from sklearn.datasets import load_digits

    torch.manual_seed(3)
    d = load_digits()
    X = torch.tensor(d.images / 16.0, dtype=torch.float32)
    y = torch.tensor(d.target, dtype=torch.long)
    perm = torch.randperm(len(X), generator=torch.Generator().manual_seed(4))
    test_idx, train_idx = perm[:297], perm[297:]
    model = DigitsViT()
    steps = epochs * math.ceil(len(train_idx) / batch)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps, pct_start=0.1)
    g = torch.Generator().manual_seed(5)
    t0 = time.time()
    for epoch in range(epochs):
        model.train()
        order = train_idx[torch.randperm(len(train_idx), generator=g)]
        total, n = 0.0, 0
        for i in range(0, len(order), batch):
            b = order[i:i + batch]
            loss = F.cross_entropy(model(X[b]), y[b])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total, n = total + loss.item() * len(b), n + len(b)
        if epoch % 5 == 0 or epoch == epochs - 1:
            print(f"  vit epoch {epoch:3d}  train loss {total / n:.3f}  ({time.time() - t0:.0f} s)", flush=True)
    train_loss = total / n
    model.eval()
    with torch.no_grad():
        acc_test = (model(X[test_idx]).argmax(1) == y[test_idx]).float().mean().item()
        acc_train = (model(X[train_idx]).argmax(1) == y[train_idx]).float().mean().item()
        i = int(test_idx[0])
        with AttnScopeRecorder(model, name="ViT on sklearn 8x8 digits (8x8 pixel tokens + CLS, 3 layers, 4 heads, d_model 64)") as rec:
            logits = model(X[i:i + 1])
    rec.save(out, grid=(8, 8), prefix_tokens=1, causal=False, attrs={
        "label": int(y[i]), "predicted": int(logits.argmax(1)), "digits_index": i,
        "image_8x8": d.images[i].astype(np.int64),
        "training": f"{epochs} epochs of AdamW (batch {batch}) on {len(train_idx)} of sklearn's 1797 8x8 digits "
                    f"(one token per pixel); seed 3",
        "train_loss": round(train_loss, 4), "train_accuracy": round(acc_train, 4), "test_accuracy": round(acc_test, 4)})
    print(f"vit: train loss {train_loss:.3f}, train accuracy {acc_train:.4f}, test accuracy {acc_test:.4f} "
          f"({len(test_idx)} held-out digits), dumped digit #{i} (label {int(y[i])}, predicted {int(logits.argmax(1))}), "
          f"{time.time() - t0:.0f} s -> {out}")
    return train_loss, acc_test


# ---------------------------------------------------------------------------------------------
# (c) character-level decoder in the LLaMA style, attention through F.scaled_dot_product_attention
class RMSNorm(nn.Module):
    def __init__(self, width, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope(n, head_dim, theta=10000.0):
    """cos, sin ``[n, head_dim]`` of the rotary embedding in the half-split convention (LLaMA's)."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    f = torch.outer(torch.arange(n, dtype=torch.float32), inv)
    emb = torch.cat((f, f), dim=-1)
    return emb.cos(), emb.sin()


class GQAttention(nn.Module):
    def __init__(self, width, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, width // heads
        self.q_proj = nn.Linear(width, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(width, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(width, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, width, bias=False)

    def forward(self, x, cos, sin):
        B, N, _ = x.shape
        q = self.q_proj(x).view(B, N, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, N, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, N, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        # looked up at call time: PyTorch >= 2.5 has it; on older PyTorch the bridge's reference
        # implementation, which the recorder installs under this name while it records
        sdpa = getattr(F, "scaled_dot_product_attention", sdpa_reference)
        y = sdpa(q, k, v, is_causal=True, enable_gqa=True)
        return self.o_proj(y.transpose(1, 2).reshape(B, N, -1))


class LlamaBlock(nn.Module):
    def __init__(self, width, heads, kv_heads, hidden):
        super().__init__()
        self.input_layernorm = RMSNorm(width)
        self.self_attn = GQAttention(width, heads, kv_heads)
        self.post_attention_layernorm = RMSNorm(width)
        self.gate_proj = nn.Linear(width, hidden, bias=False)
        self.up_proj = nn.Linear(width, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, width, bias=False)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class CharLlama(nn.Module):
    def __init__(self, vocab, width=64, heads=4, kv_heads=2, depth=3, hidden=176, context=256):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList(LlamaBlock(width, heads, kv_heads, hidden) for _ in range(depth))
        self.norm = RMSNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)
        cos, sin = rope(context, width // heads)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, idx):
        n = idx.shape[1]
        x = self.embed_tokens(idx)
        for layer in self.layers:
            x = layer(x, self.cos[:n], self.sin[:n])
        return self.lm_head(self.norm(x))


def generate(model, prompt, stoi, chars, n, context, seed, temperature=0.8):
    g = torch.Generator().manual_seed(seed)
    idx = torch.tensor([[stoi[c] for c in prompt]], dtype=torch.long)
    with torch.no_grad():
        for _ in range(n):
            logits = model(idx[:, -context:])[0, -1] / temperature
            nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=g)
            idx = torch.cat([idx, nxt.view(1, 1)], dim=1)
    return "".join(chars[i] for i in idx[0].tolist())


def train_llama(out, steps=800, batch=16, context=256):
    torch.manual_seed(6)
    chars, stoi, train, val, names = license_corpus()
    model = CharLlama(len(chars), context=context)
    opt = torch.optim.AdamW(model.parameters(), lr=4e-3, weight_decay=0.01, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=4e-3, total_steps=steps, pct_start=0.1)
    g = torch.Generator().manual_seed(7)
    t0 = time.time()
    ema = train_windows(model, train, len(chars), opt, sched, g, steps, batch, context, "llama", 100)
    val_loss = held_out_loss(model, val, len(chars), context)
    with torch.no_grad():
        window = val[:context].unsqueeze(0)
        with AttnScopeRecorder(model, name="char-LLaMA on Debian's license texts (3 layers, 4 query heads "
                                           "sharing 2 key/value heads, d_model 64)") as rec:
            model(window)
    sample = "".join(chars[i] for i in window[0].tolist())
    generated = generate(model, "This License", stoi, chars, 200, context, seed=8)
    rec.save(out, tokens=list(sample), attrs={
        "training": f"{steps} steps of AdamW (one-cycle, peak lr 4e-3) on {batch} windows of {context} chars "
                    f"from {len(train)} characters of /usr/share/common-licenses ({', '.join(names)}); seed 6",
        "train_loss": round(ema, 4), "val_loss": round(val_loss, 4),
        "val_bits_per_char": round(val_loss / math.log(2), 4), "vocab_size": len(chars),
        "generated": generated})
    print(f"llama: train loss {ema:.3f} nats/char (EMA), held-out {val_loss:.3f} nats/char "
          f"= {val_loss / math.log(2):.3f} bits/char, {time.time() - t0:.0f} s -> {out}")
    print(f"llama: generated (temperature 0.8, seed 8): {generated!r}")
    return ema, val_loss


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("which", nargs="*", choices=["lm", "vit", "llama", []], default=[])
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    which = a.which or ["lm", "vit", "llama"]
    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True)
    if "vit" in which:
        train_vit(os.path.join(HERE, "vit_digits.h5"))
    if "lm" in which:
        train_lm(os.path.join(HERE, "char_lm_licenses.h5"))
    if "llama" in which:
        train_llama(os.path.join(HERE, "char_llama_gqa.h5"))


if __name__ == "__main__":
    main()
