"""What the docs' Python blocks take as the reader's own (`<!-- docs-test: given NAME -->`, tools/docs_test.py).

Each function returns the names a block uses (a model, its inputs, files in the working folder), made small
and in the style of the models the docs name: a ViT built on nn.MultiheadAttention, a timm-style ViT with a
fused `qkv` projection and `blocks`, a LLaMA-style decoder that calls scaled_dot_product_attention, a causal
encoder taking a mask keyword, and tensors saved with torch.save. Nothing here is downloaded; the blocks
themselves run exactly as the docs print them.
"""

import math
import os
import subprocess

import numpy as np


def _torch():
    import torch
    torch.manual_seed(0)
    return torch


def _vit_mha(grid, prefix, width=32, heads=2, depth=2, patch=4):
    """A ViT whose attention is nn.MultiheadAttention (the encoder layers of nn.TransformerEncoder)."""
    torch = _torch()
    nn = torch.nn

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch = nn.Conv2d(3, width, patch, stride=patch)
            self.cls = nn.Parameter(torch.zeros(1, prefix, width))
            self.pos = nn.Parameter(0.02 * torch.randn(1, prefix + grid[0] * grid[1], width))
            layer = nn.TransformerEncoderLayer(width, heads, 2 * width, batch_first=True, dropout=0.0)
            self.encoder = nn.TransformerEncoder(layer, depth)
            self.head = nn.Linear(width, 10)

        def forward(self, images):
            x = self.patch(images).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
            return self.head(self.encoder(x)[:, 0])

    return ViT(), torch.randn(2, 3, grid[0] * patch, grid[1] * patch)


def vit():
    """pytorch.md section 2: `model` (nn.MultiheadAttention layers, a 14 x 14 grid and a CLS token), `images`."""
    model, images = _vit_mha((14, 14), 1)
    return {"model": model, "images": images}


def vit_test_set():
    """pytorch.md section 2, batch="all": a ViT on a 16 x 16 grid without prefix, a held-out set and its labels."""
    model, _ = _vit_mha((16, 16), 0)
    torch = _torch()
    return {"model": model, "test_images": torch.randn(5, 3, 64, 64), "test_labels": torch.arange(5) % 10}


def vit_timm():
    """pytorch.md section 2, other attention modules: timm's layout (`model.blocks[i].attn` with a fused `qkv`
    Linear and `num_heads`, attention computed in the module's own code)."""
    torch = _torch()
    nn = torch.nn

    class Attention(nn.Module):
        def __init__(self, dim, num_heads):
            super().__init__()
            self.num_heads = num_heads
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            B, N, C = x.shape
            qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            a = (q @ k.transpose(-2, -1) / math.sqrt(C // self.num_heads)).softmax(-1)
            return self.proj((a @ v).transpose(1, 2).reshape(B, N, C))

    class Block(nn.Module):
        def __init__(self, dim, num_heads):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            self.attn = Attention(dim, num_heads)
            self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class VisionTransformer(nn.Module):
        def __init__(self, dim=32, heads=2, depth=2, patch=4, grid=14):
            super().__init__()
            self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
            self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos_embed = nn.Parameter(0.02 * torch.randn(1, 1 + grid * grid, dim))
            self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(depth))

        def forward(self, images):
            x = self.patch_embed(images).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
            for b in self.blocks:
                x = b(x)
            return x[:, 0]

    return {"model": VisionTransformer(), "images": torch.randn(2, 3, 56, 56)}


def llama():
    """pytorch.md section 3: a LLaMA-style decoder calling F.scaled_dot_product_attention(is_causal=True)
    (looked up at call time, as Hugging Face models do), `input_ids` and their `token_strings`."""
    torch = _torch()
    nn = torch.nn
    F = torch.nn.functional

    class SelfAttention(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.heads = heads
            self.q_proj, self.k_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
            self.v_proj, self.o_proj = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)

        def forward(self, x):
            B, N, C = x.shape
            split = lambda t: t.view(B, N, self.heads, C // self.heads).transpose(1, 2)
            out = F.scaled_dot_product_attention(split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x)),
                                                 is_causal=True)
            return self.o_proj(out.transpose(1, 2).reshape(B, N, C))

    class Layer(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.self_attn = SelfAttention(dim, heads)
            self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.SiLU(), nn.Linear(2 * dim, dim))

        def forward(self, x):
            x = x + self.self_attn(x)
            return x + self.mlp(x)

    class Llama(nn.Module):
        def __init__(self, vocab=64, dim=32, heads=4, depth=2):
            super().__init__()
            self.embed_tokens = nn.Embedding(vocab, dim)
            self.layers = nn.ModuleList(Layer(dim, heads) for _ in range(depth))

        def forward(self, input_ids):
            x = self.embed_tokens(input_ids)
            for layer in self.layers:
                x = layer(x)
            return x

    text = "attention as a summary of the past"
    input_ids = torch.tensor([[min(ord(c) - 32, 63) for c in text]])
    return {"model": Llama(), "input_ids": input_ids, "token_strings": list(text)}


def encoder():
    """python.md, from the PyTorch bridge: a causal encoder (4 layers of 6 heads, nn.MultiheadAttention) that
    takes `mask` as a keyword, its input `x` and that `mask`."""
    torch = _torch()
    nn = torch.nn

    class Encoder(nn.Module):
        def __init__(self, width=48, heads=6, depth=4):
            super().__init__()
            layer = nn.TransformerEncoderLayer(width, heads, 2 * width, batch_first=True, dropout=0.0)
            self.encoder = nn.TransformerEncoder(layer, depth)

        def forward(self, x, mask=None):
            return self.encoder(x, mask=mask)

    n = 64
    mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
    return {"model": Encoder().eval(), "x": torch.randn(1, n, 48), "mask": mask}


def torch_saved():
    """formats.md and pytorch.md section 10: `acts.pt`, a dict of tensors saved with torch.save."""
    torch = _torch()
    torch.save({"q": torch.randn(4, 64, 16), "k": torch.randn(4, 64, 16)}, "acts.pt")
    return {}


def python_functions():
    """python.md, the functions: `q`, `k` (N = 256, d = 16), `options` (none), and in the working folder the
    files the calls name: model.h5 and acts.h5 (a copy of the bundled ViT on the digits), job.toml (a small
    job on model.h5) and study_out (that job's results, so aggregate() has something to read)."""
    import shutil
    rng = np.random.default_rng(0)
    root = os.environ.get("DOCS_TEST_REPO", os.getcwd())
    for name in ("model.h5", "acts.h5"):
        shutil.copyfile(os.path.join(root, "data", "vit_digits.h5"), name)
    with open("job.toml", "w") as f:
        f.write('inputs = ["model.h5"]\nq = "/layers/0/q"\nk = "/layers/0/k"\nheads = "all"\n')
    subprocess.run(["attnscope", "batch", "job.toml", "--out", "study_out"], check=True, capture_output=True)
    return {"q": rng.standard_normal((256, 16)), "k": rng.standard_normal((256, 16)), "options": {}}
