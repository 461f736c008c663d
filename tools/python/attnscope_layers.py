#!/usr/bin/env python3
"""attnscope_layers: reference PyTorch layers for linear attention and MHLA exactly as AttnScope defines
them (docs/maths.md 1.2-1.6), for training models with each mechanism and recording them.

Both layers take ``x`` of shape ``[B, N, C]`` and return ``[B, N, C]`` (a qkv projection, the mechanism,
an output projection), at linear cost in N:

* ``SoftmaxAttention(dim, heads, causal=False)``: docs/maths.md 1.1, the same projections (a baseline).
* ``LinearAttention(dim, heads, feature_map="relu"|"elu1", causal=False)``: docs/maths.md 1.3.
* ``DecayAttention(dim, heads, causal=True, gammas=None)`` and ``GatedAttention(dim, heads)``: docs/maths.md 1.8's
  decay (RetNet's default gammas) and gated (learned per-token gates, ``last_gates`` for the recorder), by their
  definition (O(N^2): references for small models).
* ``MHLA(dim, heads, blocks=M | chunk=C | grid=(G1, G2[, G3]) + block_grid=..., token_order="raster",
  mixing="cos" (any preset of docs/maths.md 1.6, or an M x M / H x M x M array), per_head=True,
  causal=False, feature_map="relu", parametrisation="clamp", normalize="row")``: docs/maths.md 1.4, normalised as
  AttnScope's ``--normalize`` (``row``: the paper's operator; ``none``: raw scores, with ``feature_map="identity"``
  the authors' causal language-model operator; ``official``: the authors' non-causal vision denominator);
  Mc is learned, initialised from the preset and, causally, lower triangular. ``parametrisation`` says how
  (``PARAMETRISATIONS``):

  - ``"clamp"``: Mc = W, W clamped to [1e-5, 1] after every optimiser step (call ``constrain_(model)``
    after ``opt.step()``), as the authors' language-model code does: no entry can reach 0 and stop learning.
  - ``"free"``: Mc = W, unconstrained and signed, as in the authors' vision code (a 1x1 convolution over the
    block axis initialised from the preset, trainable, no sign constraint, one for all heads: pass
    ``per_head=False`` to match it; DAGroup-PKU/MHLA, mhla_image_classification/models/modules/attention/mhla.py).
    Row sums of the weights may then be 0 or negative: the layer normalises as the definition does.
  - ``"relu"``: Mc = relu(W), the earlier reference layer, kept for reproducibility. With weight decay,
    an entry pushed below 0 has no gradient and never returns (764 of 1024 entries in an earlier study).

  Causal MHLA needs blocks contiguous in token order (``blocks`` or ``chunk``).

``layer.attention(x)`` returns the dense attention matrix ``[B, H, N, N]`` (the definition, O(N^2), for
tests); ``layer.mixing_matrix()`` the learned Mc (``[H, M, M]``, or ``[M, M]`` when shared).
``layer.last_qkv`` holds the last forward's ``(q, k, v)``, ``[B, H, N, d]``, raw (before the feature
map: AttnScope applies it), so that ``AttnScopeRecorder.add(layer, record_reference_layer)`` records them
with the learned Mc::

    rec = AttnScopeRecorder(model, mha=False)
    for layer in model.attention_layers:
        rec.add(layer, record_reference_layer)
    with rec:
        model(x)
    rec.save("acts.h5", causal=True)      # /layers/<i>/mixing holds each MHLA layer's Mc

The matrix AttnScope computes from the recorded q, k and Mc (``attnscope matrix --mechanism mhla`` with
the layer's block options, ``--feature-map`` as the layer's) equals ``layer.attention(x)`` to float
precision (tests/app/check_reference_layers.py).
"""
import math
from typing import Optional, Sequence, Union

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

EPS = 1e-6   # docs/maths.md 1.2: relu features are max(x, 0) + 1e-6
PARAMETRISATIONS = ("clamp", "free", "relu")   # how MHLA keeps its learned Mc (the MHLA docstring above)
NORMALISATIONS = ("row", "none", "official")   # docs/maths.md 1.4: AttnScope's --normalize
CLAMP_RANGE = (1e-5, 1.0)


def feature_map(x: torch.Tensor, name: str) -> torch.Tensor:
    if name == "relu":
        return F.relu(x) + EPS
    if name == "elu1":
        return F.elu(x) + 1.0
    if name == "identity":   # the authors' language-model code: no feature map (scores may be negative)
        return x
    raise ValueError(f"feature map {name!r}: relu, elu1 or identity")


def block_layout(n: int, blocks: Optional[int] = None, chunk: Optional[int] = None,
                 grid: Optional[Sequence[int]] = None, block_grid: Optional[Sequence[int]] = None,
                 token_order: str = "raster"):
    """(blk [N] int64, centres [M, ndim]): docs/maths.md 1.5."""
    if grid is not None:
        grid, block_grid = tuple(int(g) for g in grid), tuple(int(b) for b in block_grid)
        if int(np.prod(grid)) != n or any(g % b for g, b in zip(grid, block_grid)):
            raise ValueError(f"grid {grid} with block grid {block_grid} does not fit N = {n}")
        m = int(np.prod(block_grid))
        if token_order == "raster":
            coords = np.stack(np.unravel_index(np.arange(n), grid), axis=1) // (np.array(grid) // np.array(block_grid))
            blk = np.ravel_multi_index(tuple(coords.T), block_grid)
        elif token_order == "blocked":
            blk = np.arange(n) // (n // m)
        else:
            raise ValueError("token_order: raster or blocked")
        centres = np.stack(np.unravel_index(np.arange(m), block_grid), axis=1).astype(np.float64) + 0.5
        return np.asarray(blk, dtype=np.int64), centres
    if chunk is not None:
        m = -(-n // chunk)
        parts = [np.arange(n)[i * chunk:(i + 1) * chunk] for i in range(m)]
    else:
        m = int(blocks)
        if not 1 <= m <= n:
            raise ValueError(f"blocks M = {m} for N = {n}")
        parts = np.array_split(np.arange(n), m)
    blk = np.empty(n, dtype=np.int64)
    for b, part in enumerate(parts):
        blk[part] = b
    return blk, (np.arange(m, dtype=np.float64) + 0.5)[:, None]


def mixing_preset(name: str, centres: np.ndarray, sigma: float = 3.0, threshold: float = 1.5) -> np.ndarray:
    """Mc of docs/maths.md 1.6 for the block centres."""
    m = centres.shape[0]
    if m == 1:
        return np.ones((1, 1))
    d = np.sqrt(((centres[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2))
    dmax = d.max()
    colnorm = lambda w: w / w.sum(axis=0, keepdims=True)  # noqa: E731
    i, j = np.meshgrid(np.arange(m), np.arange(m), indexing="ij")
    if name == "cos":
        return colnorm(np.cos(d / dmax * math.pi / 4))
    if name == "linear":
        return colnorm(1 - d / dmax)
    if name == "exp":
        return colnorm(np.exp(-d / sigma))
    if name == "gaussian":
        return np.exp(-d ** 2 / (2 * (dmax / 3) ** 2))
    if name == "local":
        return colnorm((d <= threshold).astype(np.float64))
    if name == "uniform":
        return np.ones((m, m))
    if name == "identity":
        return np.eye(m)
    if name == "causal-local":
        w = np.where(j <= i, np.exp(-(i - j) / sigma), 0.0)
        return w / w.sum(axis=1, keepdims=True)
    if name == "causal":
        return np.where(j <= i, 1.0 / (i + 1), 0.0)
    raise ValueError(f"mixing preset {name!r}")


class _Attention(nn.Module):
    """qkv and output projections shared by both layers; heads split as [B, H, N, d]."""

    def __init__(self, dim: int, heads: int, feature_map: str, causal: bool):
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} is not a multiple of heads {heads}")
        self.heads, self.head_dim, self.feature_map, self.causal = heads, dim // heads, feature_map, causal
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.last_qkv = None

    def _qkv(self, x: torch.Tensor):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        self.last_qkv = (q.detach(), k.detach(), v.detach())
        return q, k, v

    def _out(self, y: torch.Tensor) -> torch.Tensor:   # [B, H, N, d] -> [B, N, C]
        b, h, n, d = y.shape
        return self.proj(y.transpose(1, 2).reshape(b, n, h * d))

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        """The dense attention matrix [B, H, N, N] by the definition (docs/maths.md 1.3-1.4)."""
        q, k, _ = self._qkv(x)
        fq, fk = feature_map(q, self.feature_map), feature_map(k, self.feature_map)
        p = (fq @ fk.transpose(-1, -2)) * self._weights(x.shape[1], x.dtype)
        return p / p.sum(dim=-1, keepdim=True)


class SoftmaxAttention(_Attention):
    """Softmax attention with the same projections (docs/maths.md 1.1, scale 1/sqrt(d)), so that models
    differing only in their mechanism can be compared."""

    def __init__(self, dim: int, heads: int, causal: bool = False):
        super().__init__(dim, heads, "relu", causal)

    def _softmax(self, q, k):
        s = (q @ k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        if self.causal:
            n = q.shape[2]
            s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
        return torch.softmax(s, dim=-1)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        q, k, _ = self._qkv(x)
        return self._softmax(q, k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._qkv(x)
        return self._out(self._softmax(q, k) @ v)


class LinearAttention(_Attention):
    """Linear attention, docs/maths.md 1.3 (row-normalised kernel attention)."""

    def __init__(self, dim: int, heads: int, feature_map: str = "relu", causal: bool = False):
        super().__init__(dim, heads, feature_map, causal)

    def _weights(self, n: int, dtype) -> torch.Tensor:
        return torch.tril(torch.ones(n, n, dtype=dtype)) if self.causal else torch.ones(n, n, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._qkv(x)
        fq, fk = feature_map(q, self.feature_map), feature_map(k, self.feature_map)
        if self.causal:
            # Prefix sums of k v^T would take N d^2 memory; chunks of 64 keep it linear and exact.
            return self._out(_causal_chunked(fq, fk, v, 64))
        kv = fk.transpose(-1, -2) @ v                                   # [B, H, d, dv]
        num = fq @ kv
        den = fq @ fk.sum(dim=2).unsqueeze(-1)                          # [B, H, N, 1]
        return self._out(num / den)


def _causal_chunked(fq, fk, v, chunk):
    """sum_{j <= t} (fq_t . fk_j) v_j / sum_{j <= t} fq_t . fk_j, chunk by chunk."""
    b, h, n, d = fq.shape
    state = fq.new_zeros(b, h, d, v.shape[-1])
    zsum = fq.new_zeros(b, h, d)
    out = []
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        qc, kc, vc = fq[:, :, s:e], fk[:, :, s:e], v[:, :, s:e]
        p = torch.tril(qc @ kc.transpose(-1, -2))
        num = p @ vc + qc @ state
        den = p.sum(-1, keepdim=True) + (qc * zsum.unsqueeze(2)).sum(-1, keepdim=True)
        out.append(num / den)
        state = state + kc.transpose(-1, -2) @ vc
        zsum = zsum + kc.sum(2)
    return torch.cat(out, dim=2)


class MHLA(_Attention):
    """Token-level multi-head linear attention, docs/maths.md 1.4-1.6, with a learned mixing matrix."""

    def __init__(self, dim: int, heads: int, n: int, blocks: Optional[int] = None, chunk: Optional[int] = None,
                 grid: Optional[Sequence[int]] = None, block_grid: Optional[Sequence[int]] = None,
                 token_order: str = "raster", mixing: Union[str, np.ndarray] = "cos", per_head: bool = True,
                 causal: bool = False, feature_map: str = "relu", parametrisation: str = "clamp",
                 normalize: str = "row", form: str = "blockwise"):
        super().__init__(dim, heads, feature_map, causal)
        # ``form``: how forward computes the same function. ``blockwise`` (the linear-cost form: local summaries
        # mixed per query block) or ``dense`` (the N x N matrix times v: faster for small N on a CPU, used to
        # train the MQAR models; tests/app/check_reference_layers.py checks both against the definition).
        if form not in ("blockwise", "dense"):
            raise ValueError(f"form {form!r}: blockwise or dense")
        self.form = form
        if normalize not in NORMALISATIONS:
            raise ValueError(f"normalize {normalize!r}: one of {', '.join(NORMALISATIONS)}")
        self.normalize = normalize
        if parametrisation not in PARAMETRISATIONS:
            raise ValueError(f"parametrisation {parametrisation!r}: one of {', '.join(PARAMETRISATIONS)}")
        self.parametrisation = parametrisation
        blk, centres = block_layout(n, blocks, chunk, grid, block_grid, token_order)
        if causal and np.any(np.diff(blk) < 0):
            raise ValueError("causal MHLA needs blocks contiguous in token order (blocks or chunk)")
        self.n, self.m = n, centres.shape[0]
        self.block_options = dict(blocks=blocks, chunk=chunk, grid=grid, block_grid=block_grid, token_order=token_order)
        self.register_buffer("blk", torch.as_tensor(blk))
        sizes = np.bincount(blk, minlength=self.m)
        if normalize == "official" and (causal or np.any(sizes != sizes[0])):
            raise ValueError("normalize='official' is the authors' non-causal vision operator: blocks of one size, not causal")
        init = mixing_preset(mixing, centres) if isinstance(mixing, str) else np.asarray(mixing, dtype=np.float64)
        signed_ok = parametrisation == "free"
        if init.shape[-2:] != (self.m, self.m) or (not signed_ok and np.any(init < 0)):
            kind = "" if signed_ok else "non-negative "
            raise ValueError(f"mixing matrix of shape {init.shape}: expected {kind}{self.m} x {self.m}")
        if per_head and init.ndim == 2:
            init = np.broadcast_to(init, (heads, self.m, self.m)).copy()
        self.weight = nn.Parameter(torch.as_tensor(init, dtype=torch.float32))
        self.constrain_()

    @torch.no_grad()
    def constrain_(self) -> None:
        """``clamp``: W back into [1e-5, 1] (after each optimiser step); the other parametrisations: nothing."""
        if self.parametrisation == "clamp":
            self.weight.clamp_(*CLAMP_RANGE)

    def mixing_matrix(self) -> torch.Tensor:
        """Mc: [H, M, M] (per head) or [M, M]; lower triangular when causal; signed only with ``free``."""
        mc = F.relu(self.weight) if self.parametrisation == "relu" else self.weight
        return torch.tril(mc) if self.causal else mc

    def _mixing_heads(self, dtype) -> torch.Tensor:   # [H, M, M]
        mc = self.mixing_matrix().to(dtype)
        return mc if mc.dim() == 3 else mc.unsqueeze(0).expand(self.heads, -1, -1)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        """The dense matrix [B, H, N, N] by the definition, normalised as ``normalize`` says (docs/maths.md 1.4)."""
        q, k, _ = self._qkv(x)
        fq, fk = feature_map(q, self.feature_map), feature_map(k, self.feature_map)
        p = (fq @ fk.transpose(-1, -2)) * self._weights(x.shape[1], x.dtype)
        if self.normalize == "none":
            return p
        if self.normalize == "official":
            return p / self._official_den(fq, fk)
        return p / p.sum(dim=-1, keepdim=True)

    def _official_den(self, fq: torch.Tensor, fk: torch.Tensor) -> torch.Tensor:
        """[B, H, N, 1]: den(t) = 1e-6 + sum_b Mc[i, b] phi(q_{b,p}) . z_b for t at position p of block i."""
        order = torch.as_tensor(np.argsort(self.blk.numpy(), kind="stable"))
        b_, h_, n, d = fq.shape
        size = n // self.m
        qb = fq[:, :, order].reshape(b_, h_, self.m, size, d)              # [B, H, M, L, d]
        z = fk[:, :, order].reshape(b_, h_, self.m, size, d).sum(dim=3)    # [B, H, M, d]
        dots = torch.einsum("bhmld,bhmd->bhml", qb, z)                     # phi(q_{m,p}) . z_m
        den = 1e-6 + torch.einsum("hic,bhcl->bhil", self._mixing_heads(fq.dtype), dots)   # [B, H, M, L]
        out = torch.empty(b_, h_, n, dtype=fq.dtype)
        out[:, :, order] = den.reshape(b_, h_, n)
        return out.unsqueeze(-1)

    def _weights(self, n: int, dtype) -> torch.Tensor:   # [H, N, N]: Mc[blk(t), blk(j)], 0 where not allowed
        w = self._mixing_heads(dtype)[:, self.blk][:, :, self.blk]
        if self.causal:
            t = torch.arange(n)
            bt, bj = self.blk[:, None], self.blk[None, :]
            w = w * ((bj < bt) | ((bj == bt) & (t[None, :] <= t[:, None]))).to(dtype)
        return w

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] != self.n:
            raise ValueError(f"MHLA was built for N = {self.n} tokens, got {x.shape[1]}")
        q, k, v = self._qkv(x)
        fq, fk = feature_map(q, self.feature_map), feature_map(k, self.feature_map)
        if self.form == "dense":
            p = (fq @ fk.transpose(-1, -2)) * self._weights(x.shape[1], fq.dtype)
            if self.normalize == "row":
                p = p / p.sum(dim=-1, keepdim=True)
            elif self.normalize == "official":
                p = p / self._official_den(fq, fk)
            return self._out(p @ v)
        mc = self._mixing_heads(fq.dtype)                                           # [H, M, M]
        # Tokens grouped block by block (a stable sort: causal blocks are contiguous already).
        order = torch.as_tensor(np.argsort(self.blk.numpy(), kind="stable"))
        sizes = torch.bincount(self.blk, minlength=self.m).tolist()
        fq_b = torch.split(fq[:, :, order], sizes, dim=2)
        fk_b = torch.split(fk[:, :, order], sizes, dim=2)
        v_b = torch.split(v[:, :, order], sizes, dim=2)
        s = torch.stack([kb.transpose(-1, -2) @ vb for kb, vb in zip(fk_b, v_b)], dim=2)   # [B, H, M, d, dv]
        z = torch.stack([kb.sum(dim=2) for kb in fk_b], dim=2)                              # [B, H, M, d]
        # Query block i sees sum_c Mc[i, c] (S_c, z_c); causally only c < i, plus its own block up to t.
        w = torch.tril(mc, diagonal=-1) if self.causal else mc
        ms = torch.einsum("hic,bhcde->bhide", w, s)
        mz = torch.einsum("hic,bhcd->bhid", w, z)
        outs = []
        for i, (qb, kb, vb) in enumerate(zip(fq_b, fk_b, v_b)):
            num = qb @ ms[:, :, i]
            den = qb @ mz[:, :, i].unsqueeze(-1)
            if self.causal:
                p = torch.tril(qb @ kb.transpose(-1, -2)) * mc[:, i, i].view(1, -1, 1, 1)
                num = num + p @ vb
                den = den + p.sum(-1, keepdim=True)
            outs.append(num if self.normalize != "row" else num / den)
        y = torch.empty_like(v)
        y[:, :, order] = torch.cat(outs, dim=2)
        if self.normalize == "official":
            y = y / self._official_den(fq, fk)
        return self._out(y)


class DecayAttention(_Attention):
    """Retention-style decayed linear attention, docs/maths.md 1.8 (``decay``): P[t,j] = gamma_h^(t-j) phi(q_t).phi(k_j)
    on j <= t (causal; non-causal: gamma^|t-j|), row-normalised. gamma_h defaults to RetNet's 1 - 2^(-5-h),
    AttnScope's default, so ``attnscope analyze --mechanism decay`` on the recorded q, k needs no option.
    The forward is the definition (O(N^2) per head): a reference for the small study models, not a fast kernel."""

    def __init__(self, dim: int, heads: int, causal: bool = True, feature_map: str = "relu",
                 gammas: Optional[Sequence[float]] = None):
        super().__init__(dim, heads, feature_map, causal)
        g = [1.0 - 2.0 ** (-5 - h) for h in range(heads)] if gammas is None else list(gammas)
        if len(g) != heads or not all(0.0 < x <= 1.0 for x in g):
            raise ValueError(f"gammas: {heads} values in (0, 1]")
        self.register_buffer("gammas", torch.tensor(g, dtype=torch.float64))

    def _weights(self, n: int, dtype) -> torch.Tensor:   # [H, N, N]
        t = torch.arange(n, dtype=torch.float64)
        dist = t[:, None] - t[None, :]
        w = self.gammas.view(-1, 1, 1) ** dist.abs().unsqueeze(0)
        if self.causal:
            w = w * (dist >= 0).to(w.dtype)
        return w.to(dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._qkv(x)
        fq, fk = feature_map(q, self.feature_map), feature_map(k, self.feature_map)
        p = (fq @ fk.transpose(-1, -2)) * self._weights(x.shape[1], fq.dtype)
        return self._out((p / p.sum(dim=-1, keepdim=True)) @ v)


class GatedAttention(_Attention):
    """Scalar-gated causal linear attention (Mamba-2 / SSD), docs/maths.md 1.8 (``gated``): one gate g_t in (0, 1] per
    token and head, ln g_t = -softplus(w_h . x_t + b_h) (data-dependent, as Mamba-2's dt * A), and
    P[t,j] = prod_{i=j+1..t} g_i phi(q_t).phi(k_j) on j <= t, row-normalised. ``last_gates`` holds the last
    forward's g, [B, H, N], for ``AttnScopeRecorder.save(gates=...)``. The forward is the definition (O(N^2))."""

    def __init__(self, dim: int, heads: int, feature_map: str = "relu", init_gate: float = 0.95):
        super().__init__(dim, heads, feature_map, True)
        self.gate = nn.Linear(dim, heads)
        with torch.no_grad():
            self.gate.weight.mul_(0.1)
            # softplus(b) = -ln(init_gate): the gates start near init_gate
            self.gate.bias.fill_(math.log(math.expm1(-math.log(init_gate))))
        self.last_gates = None

    def _log_gates(self, x: torch.Tensor) -> torch.Tensor:   # [B, H, N]
        return -F.softplus(self.gate(x)).transpose(1, 2)

    def _gated_weights(self, log_g: torch.Tensor) -> torch.Tensor:   # [B, H, N, N]
        c = torch.cumsum(log_g, dim=-1)
        n = log_g.shape[-1]
        diff = c.unsqueeze(-1) - c.unsqueeze(-2)          # sum_{i=j+1..t} ln g_i for j <= t
        mask = torch.ones(n, n, dtype=torch.bool, device=log_g.device).tril()
        return torch.exp(diff.masked_fill(~mask, float("-inf")))

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        q, k, _ = self._qkv(x)
        fq, fk = feature_map(q, self.feature_map), feature_map(k, self.feature_map)
        p = (fq @ fk.transpose(-1, -2)) * self._gated_weights(self._log_gates(x))
        return p / p.sum(dim=-1, keepdim=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._qkv(x)
        log_g = self._log_gates(x)
        self.last_gates = torch.exp(log_g).detach()
        fq, fk = feature_map(q, self.feature_map), feature_map(k, self.feature_map)
        p = (fq @ fk.transpose(-1, -2)) * self._gated_weights(log_g)
        return self._out((p / p.sum(dim=-1, keepdim=True)) @ v)


def constrain_(model: nn.Module) -> None:
    """Applies every MHLA layer's parametrisation constraint in ``model``: call it after each ``opt.step()``."""
    for m in model.modules():
        if isinstance(m, MHLA):
            m.constrain_()


def record_reference_layer(module, args, kwargs, output):
    """For ``AttnScopeRecorder.add``: the layer's raw (q, k, v) of its last forward, and its Mc."""
    q, k, v = module.last_qkv
    if isinstance(module, MHLA):
        return {"q": q, "k": k, "v": v, "mixing": module.mixing_matrix().detach()}
    return q, k, v
