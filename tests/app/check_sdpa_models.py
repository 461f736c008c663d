"""The PyTorch bridge's capture of torch.nn.functional.scaled_dot_product_attention (docs/pytorch.md) on
small models written in the styles of the families it is for: LLaMA (rotary embeddings, grouped-query
attention through enable_gqa, and through a repeat of k/v with a Hugging Face style causal+padding mask
and a non-default scale), GPT-2 (fused qkv projection, is_causal), ViT (timm style: class token on a
patch grid, q/k norms) and BERT (padding mask). Every model computes its own attention probabilities
(softmax of the scaled scores plus its mask) next to its SDPA call; `attnscope matrix --mechanism softmax`
on the dumped file must equal them to 1e-6 for every layer and head, with causal taken from the file's
attributes and the scale from the layer's `scale` attribute. Also: padded tokens dropped (tokens too),
mask kinds and the warning for a mask AttnScope does not apply, tokens and image listed by `info`, the
recorder leaving nothing behind.
usage: check_sdpa_models.py ATTNSCOPE WORKDIR   (exit 77 when torch cannot be imported)"""
import json
import math
import os
import sys

import numpy as np

import cli_checks

torch = cli_checks.torch_or_skip()
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from attnscope_dump import AttnScopeRecorder, sdpa_mask_kind  # noqa: E402

binary, work = sys.argv[1], sys.argv[2]
torch.set_num_threads(1)
problems = []
checked = 0
run = cli_checks.runner(binary, problems, label="attnscope ")
HAD_SDPA = hasattr(F, "scaled_dot_product_attention")


def probabilities(q, k, scale, bias=None, causal=False):
    """The model's own attention probabilities [B, H, N, N]: softmax(q k^T * scale + bias), k already
    with one head per query head."""
    s = q @ k.transpose(-2, -1) * scale
    if causal:
        n_q, n_k = s.shape[-2:]
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(0), float("-inf"))
    if bias is not None:
        s = s + bias
    return s.softmax(-1)


class Probe(nn.Module):
    """Keeps the probabilities an attention module computed, and checks its SDPA output against them."""

    def keep(self, p, v, out):
        self.probs = p.detach()
        if v.shape[1] != p.shape[1]:
            v = v.repeat_interleave(p.shape[1] // v.shape[1], 1)
        err = float((p @ v - out).abs().max())
        if err > 1e-5:
            problems.append(f"{type(self).__name__}: SDPA output differs from probs @ v by {err:.3g}")


def info_json(path):
    text = run(["info", path, "--json"])
    return None if text is None else json.loads(text)


def check_file(path, model_layers, batch, tag, keep=None):
    """`attnscope matrix` for every layer and head of `path` against the modules' probs[batch, h] (rows and
    columns of the real tokens `keep` when padded tokens were dropped)."""
    global checked
    meta = info_json(path)
    if meta is None:
        return None
    tensors = {t["name"]: t for t in meta["tensors"]}
    for layer, mod in enumerate(model_layers):
        q = tensors.get(f"/layers/{layer}/q")
        if q is None:
            problems.append(f"{tag}: no /layers/{layer}/q")
            continue
        if q["attributes"].get("module") != mod.path:
            problems.append(f"{tag}: layer {layer} module {q['attributes'].get('module')!r}, want {mod.path!r}")
        # the scale comes from the layer's scale attribute (a non-default one is the default there, docs/cli.md)
        for head in range(q["shape"][0]):
            out = os.path.join(work, "A.npy")
            if os.path.exists(out):
                os.unlink(out)
            # causal comes from the file; CLS tokens stay (PyTorch's probabilities cover every token)
            if run(["matrix", "--mechanism", "softmax", "--q", f"{path}:/layers/{layer}/q", "--k",
                    f"{path}:/layers/{layer}/k", "--head", str(head), "--prefix-tokens", "0",
                    "--out", out]) is None:
                continue
            a = np.load(out)
            want = mod.probs[batch, head].double().numpy()
            if keep is not None:
                want = want[np.ix_(keep, keep)]
            checked += 1
            if a.shape != want.shape:
                problems.append(f"{tag} layer {layer} head {head}: shape {a.shape} vs the model's {want.shape}")
                continue
            err = float(np.max(np.abs(a - want)))
            if not err <= 1e-6:
                problems.append(f"{tag} layer {layer} head {head}: max |attnscope - model| = {err:.3g}")
    return meta


def expect(meta, tag, root=None, dataset=None, tensor="/layers/0/q"):
    if meta is None:
        return
    for key, want in (root or {}).items():
        if meta["attributes"].get(key) != want:
            problems.append(f"{tag}: root attribute {key} = {meta['attributes'].get(key)!r}, want {want!r}")
    attrs = next((t["attributes"] for t in meta["tensors"] if t["name"] == tensor), {})
    for key, want in (dataset or {}).items():
        if attrs.get(key) != want:
            problems.append(f"{tag}: {tensor} attribute {key} = {attrs.get(key)!r}, want {want!r}")


def named(model):
    for name, m in model.named_modules():
        m.path = name
    return model


# -- LLaMA style: RMSNorm, rotary embeddings, grouped-query attention --------------------------------
class RMSNorm(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(width))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rotary(n, d):
    inv = 1.0 / 10000.0 ** (torch.arange(0, d, 2, dtype=torch.float32) / d)
    f = torch.outer(torch.arange(n, dtype=torch.float32), inv)
    emb = torch.cat((f, f), -1)
    return emb.cos(), emb.sin()


class LlamaAttention(Probe):
    """`gqa="enable_gqa"`: k, v keep their 2 heads and SDPA shares them (is_causal); `gqa="repeat"`: k, v
    repeated to 4 heads first (Hugging Face's repeat_kv), a 4-D additive mask and an explicit scale."""

    def __init__(self, width=32, heads=4, kv_heads=2, gqa="enable_gqa", scale=None):
        super().__init__()
        self.heads, self.kv_heads, self.d, self.gqa = heads, kv_heads, width // heads, gqa
        self.scaling = scale
        self.q_proj = nn.Linear(width, width, bias=False)
        self.k_proj = nn.Linear(width, kv_heads * self.d, bias=False)
        self.v_proj = nn.Linear(width, kv_heads * self.d, bias=False)
        self.o_proj = nn.Linear(width, width, bias=False)

    def forward(self, x, cos, sin, mask=None):
        B, N, _ = x.shape
        q = self.q_proj(x).view(B, N, self.heads, self.d).transpose(1, 2)
        k = self.k_proj(x).view(B, N, self.kv_heads, self.d).transpose(1, 2)
        v = self.v_proj(x).view(B, N, self.kv_heads, self.d).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        n_rep = self.heads // self.kv_heads
        k_full = k.repeat_interleave(n_rep, 1)
        scale = self.scaling if self.scaling is not None else 1.0 / math.sqrt(self.d)
        if self.gqa == "enable_gqa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            self.keep(probabilities(q, k_full, scale, causal=True), v, y)
        else:
            k, v = k_full, v.repeat_interleave(n_rep, 1)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, scale=self.scaling)
            self.keep(probabilities(q, k, scale, bias=mask), v, y)
        return self.o_proj(y.transpose(1, 2).reshape(B, N, -1))


class LlamaLayer(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(32), RMSNorm(32)
        self.self_attn = LlamaAttention(**kw)
        self.gate_proj, self.up_proj, self.down_proj = nn.Linear(32, 64), nn.Linear(32, 64), nn.Linear(64, 32)

    def forward(self, x, cos, sin, mask=None):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self, depth=2, **kw):
        super().__init__()
        self.embed_tokens = nn.Embedding(50, 32)
        self.layers = nn.ModuleList(LlamaLayer(**kw) for _ in range(depth))

    def forward(self, ids, mask=None):
        cos, sin = rotary(ids.shape[1], 8)
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return x


def hf_causal_padding_mask(attention_mask, dtype=torch.float32):
    """A Hugging Face decoder's 4-D additive SDPA mask for a padded batch: causal and padding, finfo.min
    where masked, rows that mask everything (left-padded queries) un-masked."""
    B, N = attention_mask.shape
    allowed = torch.ones(N, N, dtype=torch.bool).tril(0)[None, None] & attention_mask.bool()[:, None, None, :]
    allowed = allowed | ~allowed.any(-1, keepdim=True)
    return torch.zeros(B, 1, N, N, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)


N = 21
torch.manual_seed(1)
ids = torch.randint(0, 50, (2, N))
llama = named(Llama(gqa="enable_gqa")).eval()
with torch.no_grad(), AttnScopeRecorder(llama, name="llama-gqa") as rec:
    llama(ids)
path = os.path.join(work, "llama_gqa.h5")
rec.save(path, batch=1, tokens=[f"t{i}" for i in ids[1].tolist()])
meta = check_file(path, [l.self_attn for l in llama.layers], 1, "LLaMA enable_gqa")
expect(meta, "LLaMA enable_gqa", root={"causal": True, "n_layers": 2, "n_heads": 4, "n_tokens": N},
       dataset={"mask": "causal", "enable_gqa": True, "is_causal": True, "function": "scaled_dot_product_attention",
                "module_type": "LlamaAttention", "scale": 1.0 / math.sqrt(8)})
if meta:
    shapes = {t["name"]: t["shape"] for t in meta["tensors"]}
    if shapes.get("/layers/1/k") != [2, N, 8] or shapes.get("/layers/1/q") != [4, N, 8]:
        problems.append(f"LLaMA enable_gqa: k and q shapes {shapes}: k must keep its 2 heads as passed")
    if meta.get("tokens", {}) is None or meta["tokens"]["count"] != N or meta["tokens"]["first"][0] != f"t{int(ids[1, 0])}":
        problems.append(f"LLaMA enable_gqa: info tokens {meta.get('tokens')}")

# the same family through repeat_kv, a Hugging Face causal+padding mask (batch element 1 left-padded by 5)
# and a scale that is not 1/sqrt(d) (as Gemma's query_pre_attn_scalar gives)
attention_mask = torch.ones(2, N, dtype=torch.long)
attention_mask[1, :5] = 0
mask = hf_causal_padding_mask(attention_mask)
torch.manual_seed(2)
llama_r = named(Llama(gqa="repeat", scale=1.0 / math.sqrt(12.0))).eval()
with torch.no_grad(), AttnScopeRecorder(llama_r, name="llama-repeat") as rec:
    llama_r(ids, mask)
tokens = ["<pad>"] * 5 + [f"t{i}" for i in ids[1, 5:].tolist()]
for b, keep in ((0, None), (1, np.arange(5, N))):
    path = os.path.join(work, f"llama_repeat_b{b}.h5")
    rec.save(path, batch=b, tokens=tokens if b == 1 else None)
    meta = check_file(path, [l.self_attn for l in llama_r.layers], b, f"LLaMA repeat_kv batch {b}", keep)
    expect(meta, f"LLaMA repeat_kv batch {b}", root={"causal": True, "n_tokens": N if b == 0 else N - 5},
           dataset={"mask": "causal" if b == 0 else "causal+padding", "padded_tokens": 0 if b == 0 else 5,
                    "enable_gqa": False, "scale": 1.0 / math.sqrt(12.0)})
    if b == 1 and meta and (meta["tokens"] is None or meta["tokens"]["count"] != N - 5
                            or meta["attributes"].get("tokens") != tokens[5:]):
        problems.append(f"LLaMA repeat_kv: padded tokens not dropped from the tokens: {meta['attributes'].get('tokens')}")


# -- GPT-2 style: fused qkv projection (Conv1D-like), causal through is_causal ---------------------------
class GPT2Attention(Probe):
    def __init__(self, width=48, heads=4):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, N, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        self.keep(probabilities(q, k, 1.0 / math.sqrt(C // self.heads), causal=True), v, y)
        return self.c_proj(y.transpose(1, 2).reshape(B, N, C))


class GPT2Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(48), nn.LayerNorm(48)
        self.attn = GPT2Attention()
        self.mlp = nn.Sequential(nn.Linear(48, 96), nn.GELU(), nn.Linear(96, 48))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, depth=2):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(50, 48), nn.Embedding(64, 48)
        self.h = nn.ModuleList(GPT2Block() for _ in range(depth))

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for block in self.h:
            x = block(x)
        return x


torch.manual_seed(3)
gpt2 = named(GPT2()).eval()
with torch.no_grad(), AttnScopeRecorder(gpt2, name="gpt2-style") as rec:
    gpt2(torch.randint(0, 50, (3, 30)))
path = os.path.join(work, "gpt2.h5")
rec.save(path, batch=2)
meta = check_file(path, [b.attn for b in gpt2.h], 2, "GPT-2")
expect(meta, "GPT-2", root={"causal": True, "n_layers": 2, "n_tokens": 30, "batch_index": 2},
       dataset={"mask": "causal", "module": "h.0.attn", "is_causal": True})


# -- ViT, timm style: patch embedding, class token, fused qkv, q/k norms ---------------------------------
class TimmAttention(Probe):
    def __init__(self, dim=36, num_heads=3):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.q_norm, self.k_norm = nn.LayerNorm(self.head_dim), nn.LayerNorm(self.head_dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q, k = self.q_norm(q), self.k_norm(k)
        x = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0)
        self.keep(probabilities(q, k, self.head_dim ** -0.5), v, x)
        return self.proj(x.transpose(1, 2).reshape(B, N, C))


class TimmBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(36), nn.LayerNorm(36)
        self.attn = TimmAttention()
        self.mlp = nn.Sequential(nn.Linear(36, 72), nn.GELU(), nn.Linear(72, 36))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    def __init__(self, depth=2, img=20, patch=4):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, 36, patch, patch)
        self.cls_token = nn.Parameter(torch.randn(1, 1, 36))
        self.pos_embed = nn.Parameter(torch.randn(1, 1 + (img // patch) ** 2, 36))
        self.blocks = nn.Sequential(*[TimmBlock() for _ in range(depth)])

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)   # raster order over the 5x5 patch grid
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1) + self.pos_embed
        return self.blocks(x)


torch.manual_seed(4)
vit = named(ViT()).eval()
images = torch.rand(2, 3, 20, 20)
with torch.no_grad(), AttnScopeRecorder(vit, name="vit-style") as rec:
    vit(images)
path = os.path.join(work, "vit.h5")
rec.save(path, batch=0, grid=(5, 5), prefix_tokens=1, image=images[0].permute(1, 2, 0))
meta = check_file(path, [b.attn for b in vit.blocks], 0, "ViT")
expect(meta, "ViT", root={"causal": False, "grid": [5, 5], "prefix_tokens": 1, "n_tokens": 26},
       dataset={"mask": "none", "module": "blocks.1.attn", "module_type": "TimmAttention"}, tensor="/layers/1/q")
if meta and (meta.get("image") or {}).get("shape") != [20, 20, 3]:
    problems.append(f"ViT: info image {meta.get('image')}, want shape [20, 20, 3]")
if meta and not np.allclose(np.array(meta["attributes"].get("image")), images[0].permute(1, 2, 0).numpy(), atol=1e-7):
    problems.append("ViT: the image attribute is not the input image")
table = run(["info", path])
if table is not None and "image: 20 x 20 x 3 (@image)" not in table:
    problems.append(f"ViT: info does not list the image:\n{table}")
# an image too large for an attribute becomes the dataset /image
rec.save(os.path.join(work, "vit_big_image.h5"), grid=(5, 5), prefix_tokens=1, image=np.zeros((3, 128, 128)))
big = info_json(os.path.join(work, "vit_big_image.h5"))
if big and (big.get("image") or {}).get("shape") != [3, 128, 128]:
    problems.append(f"ViT: large image listed as {big.get('image')}")


# -- BERT style: bidirectional, padding mask -----------------------------------------------------------
class BertSelfAttention(Probe):
    def __init__(self, hidden=32, heads=4):
        super().__init__()
        self.heads, self.d = heads, hidden // heads
        self.query, self.key, self.value = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)

    def forward(self, x, mask):
        B, N, C = x.shape
        q, k, v = (lin(x).view(B, N, self.heads, self.d).transpose(1, 2) for lin in (self.query, self.key, self.value))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, is_causal=False)
        bias = mask if mask.dtype != torch.bool else torch.zeros(mask.shape).masked_fill(~mask, float("-inf"))
        self.keep(probabilities(q, k, 1.0 / math.sqrt(self.d), bias=bias), v, y)
        return y.transpose(1, 2).reshape(B, N, C)


class BertLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = BertSelfAttention()
        self.dense = nn.Linear(32, 32)
        self.norm = nn.LayerNorm(32)

    def forward(self, x, mask):
        return self.norm(x + self.dense(self.attention(x, mask)))


class Bert(nn.Module):
    def __init__(self, depth=2):
        super().__init__()
        self.embeddings = nn.Embedding(60, 32)
        self.layer = nn.ModuleList(BertLayer() for _ in range(depth))

    def forward(self, ids, attention_mask, bool_mask=False):
        if bool_mask:
            mask = attention_mask.bool()[:, None, None, :].expand(-1, 1, ids.shape[1], -1)
        else:   # Hugging Face's expanded additive mask
            mask = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        x = self.embeddings(ids)
        for layer in self.layer:
            x = layer(x, mask)
        return x


torch.manual_seed(5)
bert = named(Bert()).eval()
words = [["[CLS]", "the", "cat", "sat", "[SEP]", "[PAD]", "[PAD]", "[PAD]"],
         ["[CLS]", "a", "dog", "ran", "far", "away", "fast", "[SEP]"]]
ids = torch.randint(0, 60, (2, 8))
attention_mask = torch.tensor([[1, 1, 1, 1, 1, 0, 0, 0], [1] * 8])
for bool_mask in (False, True):
    with torch.no_grad(), AttnScopeRecorder(bert, name="bert-style") as rec:
        bert(ids, attention_mask, bool_mask)
    for b, keep in ((0, np.arange(5)), (1, None)):
        path = os.path.join(work, f"bert_{int(bool_mask)}_b{b}.h5")
        rec.save(path, batch=b, tokens=words[b])
        tag = f"BERT {'bool' if bool_mask else 'additive'} mask batch {b}"
        meta = check_file(path, [l.attention for l in bert.layer], b, tag, keep)
        expect(meta, tag, root={"causal": False, "n_tokens": 5 if b == 0 else 8, "tokens": words[b][:5 if b == 0 else 8]},
               dataset={"mask": "padding" if b == 0 else "none", "padded_tokens": 3 if b == 0 else 0})


# -- mask kinds; a mask AttnScope does not apply is said ------------------------------------------------
tril = torch.ones(6, 6, dtype=torch.bool).tril(0)
pad = torch.tensor([1, 1, 1, 1, 0, 0], dtype=torch.bool)
cases = [
    ("none", None, False), ("causal", None, True), ("causal", tril, False),
    ("causal", torch.zeros(6, 6).masked_fill(~tril, float("-inf")), False),
    ("padding", pad[None, None, None, :].expand(1, 1, 6, 6), False),
    ("causal+padding", (tril & pad)[None, None], False),
    ("other", torch.randn(6, 6), False),                      # a bias (ALiBi-like), not a mask
    ("other", tril.T.contiguous(), False),                    # anti-causal
    ("other", torch.stack([tril, tril.T])[None], False),      # differs between heads
    ("none", torch.zeros(6, 6), False),
]
for want, m, is_causal in cases:
    got = sdpa_mask_kind(m, is_causal, 1, 6, 6)[0][0]
    if got != want:
        problems.append(f"sdpa_mask_kind: {want} mask classified as {got}")


class Alibi(nn.Module):
    def forward(self, q, k, v, bias):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)


alibi = Alibi()
q = torch.randn(1, 2, 10, 4)
dist = torch.arange(10)[None, :] - torch.arange(10)[:, None]
with torch.no_grad(), AttnScopeRecorder(alibi) as rec:
    alibi(q, q + 0.1, q, -0.5 * dist.abs().float())
path = os.path.join(work, "alibi.h5")
rec.save(path)
out = run(["analyze", "--q", path + ":/layers/0/q", "--k", path + ":/layers/0/k", "--head", "1"])
if out is not None and "warning (file attribute mask)" not in out:
    problems.append(f"a mask = other file analysed without a warning:\n{out}")
out = run(["analyze", "--q", path + ":/layers/0/q", "--k", path + ":/layers/0/k", "--json", "-"])
if out is not None and "mask" not in json.loads(out)["input"].get("defaults_from_file", {}).get("not_applied", {}):
    problems.append("analyze --json: no input.defaults_from_file.not_applied.mask for mask = other")

# -- nothing stays behind; the hooked nn.MultiheadAttention keeps its own capture ------------------------
if hasattr(F, "scaled_dot_product_attention") != HAD_SDPA:
    problems.append("the recorder left F.scaled_dot_product_attention changed")
if any(m._forward_hooks or m._forward_pre_hooks for m in list(llama.modules()) + list(bert.modules())):
    problems.append("the recorder left module hooks behind")


class Mixed(nn.Module):
    """An nn.MultiheadAttention (recorded by re-projection; on PyTorch 2.x it calls SDPA inside, which must
    not make a second layer) followed by an SDPA call."""

    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 2, batch_first=True)
        self.qk = nn.Linear(16, 32)

    def forward(self, x):
        x = x + self.mha(x, x, x, need_weights=False)[0]
        q, k = self.qk(x).view(x.shape[0], x.shape[1], 2, 16).transpose(1, 2).chunk(2, dim=-1)
        return F.scaled_dot_product_attention(q, k, k)


mixed = Mixed().eval()
with torch.no_grad(), AttnScopeRecorder(mixed) as rec:
    mixed(torch.randn(1, 7, 16))
if [(r.name, r.module_type) for r in rec.layers] != [("mha", "MultiheadAttention"), ("", "Mixed")]:
    problems.append(f"MultiheadAttention + SDPA recorded as {[(r.name, r.module_type) for r in rec.layers]}")

print(f"{checked} attention matrices compared with the models' own (torch {torch.__version__}, "
      f"{'native' if HAD_SDPA else 'the bridge’s reference'} scaled_dot_product_attention)")
cli_checks.report(problems)
