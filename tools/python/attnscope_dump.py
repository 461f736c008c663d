#!/usr/bin/env python3
"""attnscope_dump: record the queries, keys and values of a PyTorch model's attention layers and
write them as one HDF5 file that AttnScope reads.

Needs Python 3, PyTorch, NumPy and h5py (Debian 12: ``apt-get install python3-torch python3-h5py``).
AttnScope itself never runs Python and never unpickles anything; this module runs in *your*
environment, next to your model.

Quick start::

    import torch
    from attnscope_dump import AttnScopeRecorder

    model.eval()
    with AttnScopeRecorder(model, name="my-vit") as rec:      # hooks every nn.MultiheadAttention
        model(images)                                          # one ordinary forward pass
    rec.save("acts.h5", grid=(14, 14), prefix_tokens=1)        # causal=None: taken from the masks

    # then:  attnscope analyze --q acts.h5:/layers/3/q --k acts.h5:/layers/3/k --head 2 \\
    #            --prefix-tokens 1 --grid 14,14 --block-grid 7,7

What is captured
----------------
* ``torch.nn.MultiheadAttention``: PyTorch computes q, k, v inside ``F.multi_head_attention_forward``
  where no hook reaches them, so the recorder wraps the module's ``forward``, takes its inputs
  (query, key, value, attn_mask, key_padding_mask; positional or keyword, ``batch_first`` or not) and
  re-projects them exactly as PyTorch does: ``in_proj_weight`` / ``in_proj_bias`` packed (the same
  ``linear(...).chunk(3)`` for self-attention, the same split for encoder-decoder attention), or
  ``q_proj_weight`` / ``k_proj_weight`` / ``v_proj_weight`` when ``kdim`` / ``vdim`` differ;
  ``bias_k`` / ``bias_v`` (``add_bias_kv``) and ``add_zero_attn`` append their extra key/value token
  as PyTorch does; heads are split as ``view(N, B * H, head_dim)``, i.e. head h of batch element b is
  features ``h * head_dim : (h + 1) * head_dim``. The dumped q is *not* pre-scaled: AttnScope's default
  softmax scale ``1/sqrt(head_dim)`` is PyTorch's, so ``softmax(q k^T / sqrt(d))`` from the file
  equals the weights PyTorch returns with ``need_weights=True, average_attn_weights=False``
  (``tests/app/check_pytorch_bridge.py`` checks this to 1e-6 through ``attnscope matrix``).
  PyTorch's fused fast paths (``nn.TransformerEncoderLayer`` in eval mode) bypass the attention
  module; the recorder switches them off while it is active.
* ``torch.nn.functional.scaled_dot_product_attention`` (``sdpa=True``, the default): while the recorder
  is active every call is recorded, in call order, as its own layer, with q, k, v exactly as passed
  (after rotary embeddings and q/k norms; k and v with their own head count under ``enable_gqa``), its
  ``scale`` (default ``1/sqrt(d)``), ``is_causal``, ``enable_gqa``, ``dropout_p``, the kind of its
  ``attn_mask`` (``sdpa_mask_kind``: none, causal, padding, causal+padding, other; padded tokens of the
  dumped batch element are dropped) and the qualified name of the module whose forward made the call.
  Calls made inside a hooked ``nn.MultiheadAttention`` or ``add``-ed module are not recorded twice. On
  PyTorch < 2.0, which has no such function, the recorder provides ``sdpa_reference`` under that name
  while it is active (PyTorch 2.x's signature and semantics). Hugging Face models (``attn_implementation
  ="sdpa"``) and timm models (``fused_attn``) call it.
* Any other module: ``rec.add(module, fn)`` with ``fn(module, args, kwargs, output)`` returning
  ``(q, k)`` or ``(q, k, v)`` as tensors of shape ``[B, H, N, d]`` (or ``[H, N, d]``), or a dict
  ``{"q", "k", "v", "mixing"}`` whose ``mixing`` (a learned MHLA Mc, ``[M, M]`` or ``[H, M, M]``) is
  written as ``/layers/<i>/mixing`` and named by the layer's ``mixing`` attribute, so that AttnScope uses
  it for that layer without an option (the reference layers of ``attnscope_layers.py`` do this), e.g. for a
  timm / HF style block whose forward computes ``qkv = self.qkv(x)``::

      def vit_qkv(mod, args, kwargs, out):
          x = args[0]; B, N, C = x.shape
          qkv = mod.qkv(x).reshape(B, N, 3, mod.num_heads, C // mod.num_heads).permute(2, 0, 3, 1, 4)
          return qkv[0], qkv[1], qkv[2]

  A module called several times in one recording keeps its last call. Layers are numbered in the
  order the hooked modules first ran.

The file (``save``)
-------------------
``/layers/<i>/q``, ``/layers/<i>/k``, ``/layers/<i>/v``: float32 (or ``dtype="float64"``),
``[heads, N, head_dim]``, gzip + shuffle, for one batch element (``batch=0``); with ``batch="all"``
``[batch, heads, N, head_dim]`` (one chunk per element), every input of the forward in one file: AttnScope's
default layout for rank 4 is ``bhnd``, so ``--at b=I`` selects input I (``b=all``: each input a unit). Root attributes:

=================  ==========================================================================
``model``          model name (``name=``, default the model's class name)
``source``         ``"attnscope_dump"``;  ``source_version``: this module's version
``torch_version``  ``torch.__version__`` of the run
``layout``         ``"hnd"`` (the datasets' axis order; AttnScope's default for rank 3), ``"bhnd"`` with
                   ``batch="all"`` (the default for rank 4)
``n_layers``       number of ``/layers/<i>`` groups
``n_heads``        heads per layer (when all layers agree; else -1 and see the datasets)
``n_tokens``       tokens N of the queries (when all layers agree; else -1)
``batch_index``    which batch element was written, or ``"all"`` (then ``n_batch``: how many)
``causal``         bool: analyse with ``--causal``. ``save(causal=None)`` sets it when every
                   layer's attn_mask was a causal mask (see ``mask`` below)
``prefix_tokens``  int: leading non-grid tokens (CLS, registers) -> ``--prefix-tokens``
``grid``           int array, e.g. ``[8, 8]``: the grid of the N - prefix_tokens tokens,
                   row-major (raster) -> ``--grid 8,8``; absent for 1-D sequences
``tokens``         strings: ``save(tokens=...)``, one per query token (display)
``image``          ``save(image=...)``: the input image (or the dataset ``/image`` when large)
=================  ==========================================================================

Attributes of each ``q``/``k``/``v`` dataset: ``module`` (qualified module name), ``module_type``
(class name), ``scale`` (the softmax scale the module uses, 1/sqrt(head_dim) for MultiheadAttention), ``mask``
(``"none"``, ``"causal"``, ``"other"``: the attn_mask the module was given), ``key_padding_mask``
(bool: one was given; its padded keys, and for self-attention the padded queries, are dropped from the
file and counted in ``padded_tokens``; AttnScope refuses a file with ``key_padding_mask`` true and no
``padded_tokens``, written by older versions with the padded tokens in), ``extra_keys`` (keys appended by
``add_bias_kv`` / ``add_zero_attn``; k and v then have N + extra_keys tokens). SDPA layers have
``function``, ``is_causal``, ``enable_gqa``, ``dropout_p``, ``padded_tokens`` and ``mask`` also
``"padding"`` / ``"causal+padding"`` instead of ``key_padding_mask`` / ``extra_keys``.

Command line::

    python3 attnscope_dump.py --demo out.h5    # a small random encoder (2 layers, 4 heads, 8x8 grid + CLS)
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import os
import shutil
import sys
import tempfile
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["AttnScopeRecorder", "project_mha", "mask_kind", "sdpa_reference", "sdpa_mask_kind", "write_h5",
           "__version__"]
__version__ = "0.1.0"

QKVFn = Callable[[nn.Module, tuple, dict, object], Sequence[Optional[torch.Tensor]]]

_MHA_ARGS = ("query", "key", "value", "key_padding_mask", "need_weights", "attn_mask",
             "average_attn_weights", "is_causal")


def _bind_mha_args(args: tuple, kwargs: dict) -> dict:
    """MultiheadAttention.forward's arguments by name (positional or keyword)."""
    bound = dict(zip(_MHA_ARGS, args))
    bound.update(kwargs)
    return bound


def mask_kind(attn_mask: Optional[torch.Tensor], n_q: int, n_k: int) -> str:
    """``"none"``, ``"causal"`` (exactly key j > query i masked: bool True or float -inf above the
    diagonal, nothing else) or ``"other"``."""
    if attn_mask is None:
        return "none"
    m = attn_mask.detach()
    if m.dim() == 2:
        m = m.unsqueeze(0)
    if m.dim() != 3 or m.shape[-2:] != (n_q, n_k) or n_q != n_k:
        return "other"
    above = torch.ones(n_q, n_k, dtype=torch.bool, device=m.device).triu(1)
    if m.dtype == torch.uint8:
        m = m.to(torch.bool)
    if m.dtype == torch.bool:
        ok = bool((m == above).all())
    else:
        ok = bool(torch.isneginf(m[:, above]).all()) and bool((m[:, ~above] == 0).all())
    return "causal" if ok else "other"


def project_mha(mha: nn.MultiheadAttention, query: torch.Tensor, key: torch.Tensor,
                value: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v of ``mha`` for these inputs as ``[B, H, N, head_dim]`` (``[1, H, N, d]`` for
    unbatched inputs), computed as ``F.multi_head_attention_forward`` computes them."""
    batched = query.dim() == 3
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
    elif mha.batch_first:
        # keep the identities (query is key is value) PyTorch's packed projection relies on
        if key is value:
            if query is key:
                query = key = value = query.transpose(1, 0)
            else:
                query, key = [x.transpose(1, 0) for x in (query, key)]
                value = key
        else:
            query, key, value = [x.transpose(1, 0) for x in (query, key, value)]
    # now [N, B, E]
    E = query.shape[-1]
    H = mha.num_heads
    hd = mha.head_dim
    if mha._qkv_same_embed_dim:
        w, b = mha.in_proj_weight, mha.in_proj_bias
        if key is value:
            if query is key:
                q, k, v = F.linear(query, w, b).chunk(3, dim=-1)
            else:
                w_q, w_kv = w.split([E, E * 2])
                b_q, b_kv = (None, None) if b is None else b.split([E, E * 2])
                q = F.linear(query, w_q, b_q)
                k, v = F.linear(key, w_kv, b_kv).chunk(2, dim=-1)
        else:
            w_q, w_k, w_v = w.chunk(3)
            b_q, b_k, b_v = (None, None, None) if b is None else b.chunk(3)
            q, k, v = F.linear(query, w_q, b_q), F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)
    else:
        b = mha.in_proj_bias
        b_q, b_k, b_v = (None, None, None) if b is None else b.chunk(3)
        q = F.linear(query, mha.q_proj_weight, b_q)
        k = F.linear(key, mha.k_proj_weight, b_k)
        v = F.linear(value, mha.v_proj_weight, b_v)
    bsz = q.shape[1]
    if mha.bias_k is not None and mha.bias_v is not None:
        k = torch.cat([k, mha.bias_k.repeat(1, bsz, 1)])
        v = torch.cat([v, mha.bias_v.repeat(1, bsz, 1)])

    def heads(t: torch.Tensor) -> torch.Tensor:  # [N, B, H*hd] -> [B, H, N, hd], PyTorch's split
        n = t.shape[0]
        return t.contiguous().view(n, bsz * H, hd).transpose(0, 1).reshape(bsz, H, n, hd)

    q, k, v = heads(q), heads(k), heads(v)
    if mha.add_zero_attn:
        z = torch.zeros(bsz, H, 1, hd, dtype=k.dtype, device=k.device)
        k, v = torch.cat([k, z], dim=2), torch.cat([v, z], dim=2)
    return q, k, v


# -- scaled_dot_product_attention ------------------------------------------------------------
_SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
# An additive mask entry at or below this counts as "masked": -inf, torch.finfo(dtype).min (Hugging Face)
# and -10000 (older BERT code) all give the key a softmax weight that is exactly 0 in float32.
_MASKED_BIAS = -1.0e4


def sdpa_reference(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                   attn_mask: Optional[torch.Tensor] = None, dropout_p: float = 0.0, is_causal: bool = False,
                   scale: Optional[float] = None, enable_gqa: bool = False) -> torch.Tensor:
    """``torch.nn.functional.scaled_dot_product_attention`` with PyTorch 2.x's signature and semantics, in
    plain tensor operations: ``softmax(q k^T * scale + bias) v`` with ``scale`` defaulting to
    ``1/sqrt(q.size(-1))``; a bool ``attn_mask`` marks the keys that take part (True), a float one is added
    to the scores; ``is_causal`` masks key j > query i (top-left aligned) and excludes ``attn_mask``;
    ``enable_gqa`` lets k and v have fewer heads than q, each shared by ``Hq / Hk`` consecutive query heads;
    ``dropout_p`` drops attention weights (always, as PyTorch's function does: callers pass 0 in eval).
    The recorder installs it as ``F.scaled_dot_product_attention`` on PyTorch versions without one."""
    L, S = query.size(-2), key.size(-2)
    scale_factor = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError("scaled_dot_product_attention: explicit attn_mask should not be set when is_causal=True")
        bias.masked_fill_(~torch.ones(L, S, dtype=torch.bool, device=query.device).tril(0), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            bias = bias.masked_fill(~attn_mask, float("-inf"))
        else:
            bias = attn_mask + bias
    if enable_gqa:
        hq, hk = query.size(-3), key.size(-3)
        if hk == 0 or hq % hk or hq % value.size(-3):
            raise RuntimeError(f"scaled_dot_product_attention: {hq} query heads are not a multiple of {hk} key heads")
        key = key.repeat_interleave(hq // hk, -3)
        value = value.repeat_interleave(hq // value.size(-3), -3)
    weight = torch.softmax(query @ key.transpose(-2, -1) * scale_factor + bias, dim=-1)
    if dropout_p > 0.0:
        weight = torch.dropout(weight, dropout_p, train=True)
    return weight @ value


def _allowed(attn_mask: torch.Tensor) -> Optional[torch.Tensor]:
    """The keys an SDPA ``attn_mask`` lets take part (bool, same shape), or None when an additive mask holds
    values other than 0 and "masked" (a bias such as ALiBi: not a mask AttnScope can reproduce)."""
    m = attn_mask.detach()
    if m.dtype == torch.bool:
        return m
    if not m.is_floating_point():
        return None
    masked = m <= _MASKED_BIAS
    if not bool(((m == 0) | masked).all()):
        return None
    return ~masked


def _padded_rows_ok(rows: torch.Tensor, as_real: torch.Tensor) -> bool:
    """Rows of padded queries: each lets in nothing, every key, or what ``as_real`` (the row a real query
    at that position would have) lets in."""
    return bool((~rows.any(1) | rows.all(1) | (rows == as_real).all(1)).all())


def sdpa_mask_kind(attn_mask: Optional[torch.Tensor], is_causal: bool, batch: int, n_q: int, n_k: int
                   ) -> List[Tuple[str, Optional[torch.Tensor], Optional[torch.Tensor]]]:
    """Per batch element, ``(kind, keep_q, keep_k)`` of what an SDPA call masked. ``kind``: ``"none"``,
    ``"causal"`` (``is_causal``, or a mask that is exactly key j <= query i), ``"padding"`` (every real query
    sees exactly the real keys), ``"causal+padding"`` (a causal mask restricted to the real tokens, as
    Hugging Face decoders build it for padded batches) or ``"other"``. The row of a padded query may let
    in nothing, every key, or what a real query's row would. ``keep_q`` / ``keep_k``: bool ``[N]`` of the real tokens for the padding kinds, else None.
    A mask that differs between heads is ``"other"``."""
    if is_causal:
        return [("causal" if n_q == n_k else "other", None, None)] * batch
    if attn_mask is None:
        return [("none", None, None)] * batch
    allowed = _allowed(attn_mask)
    if allowed is None or allowed.dim() > 4 or tuple(allowed.shape[-2:]) not in ((n_q, n_k), (1, n_k)):
        return [("other", None, None)] * batch
    while allowed.dim() < 4:
        allowed = allowed.unsqueeze(0)
    allowed = allowed.expand(allowed.shape[0], allowed.shape[1], n_q, n_k)
    if allowed.shape[0] not in (1, batch):
        return [("other", None, None)] * batch
    tril = torch.ones(n_q, n_k, dtype=torch.bool, device=allowed.device).tril(0)
    out = []
    for b in range(batch):
        heads = allowed[b if allowed.shape[0] > 1 else 0]
        if not bool((heads == heads[0]).all()):
            out.append(("other", None, None))
            continue
        m = heads[0]
        if bool(m.all()):
            out.append(("none", None, None))
            continue
        if n_q == n_k and bool((m == tril).all()):
            out.append(("causal", None, None))
            continue
        if n_q == n_k:
            # Real keys: those some informative row lets in (a row that lets every key in is a padded query
            # row Hugging Face un-masked; the last row always counts: for a plain causal mask it is all True).
            informative = ~m.all(1)
            informative[-1] = True
            real = m[informative].any(0)
            if bool(real.any()) and bool((m[real] == (tril & real)[real]).all()) and \
                    _padded_rows_ok(m[~real], (tril & real)[~real]):
                out.append(("causal+padding", real.clone(), real.clone()))
                continue
        # Padding: every real query row equals the key-padding vector (rows that let nothing in are
        # padded queries; rows of padded queries may also let the real keys in).
        rows = m.any(1)
        if not bool(rows.any()):
            out.append(("other", None, None))
            continue
        real_k = m[rows].all(0)
        if n_q == n_k:
            real_q = real_k
            ok = bool(real_k.any()) and bool((m[real_q] == real_k).all()) and \
                _padded_rows_ok(m[~real_q], real_k.expand(int((~real_q).sum()), n_k))
        else:
            real_q = torch.ones(n_q, dtype=torch.bool, device=m.device)
            ok = bool(real_k.any()) and bool((m == real_k).all())
        out.append(("padding", real_q.clone(), real_k.clone()) if ok else ("other", None, None))
    return out


class _Record:
    """One recorded layer. ``masks``: for an SDPA call, per batch element ``(kind, keep_q, keep_k)`` (see
    ``sdpa_mask_kind``); ``meta``: further dataset attributes."""
    __slots__ = ("name", "module", "module_type", "q", "k", "v", "mixing", "mask", "key_padding_mask", "extra_keys",
                 "scale", "masks", "meta")

    def __init__(self, name, module):
        self.name, self.module = name, module
        self.module_type = type(module).__name__
        self.q = self.k = self.v = self.mixing = None
        self.mask, self.key_padding_mask, self.extra_keys, self.scale = "none", False, 0, None
        self.masks: Optional[list] = None
        self.meta: dict = {}

    def mask_of(self, batch: int) -> Tuple[str, Optional[torch.Tensor], Optional[torch.Tensor]]:
        """(kind, keep_q, keep_k) of one batch element."""
        if self.masks is None:
            return self.mask, None, None
        return self.masks[batch]


class AttnScopeRecorder(contextlib.AbstractContextManager):
    """Records q, k, v of attention modules during forward passes inside a ``with`` block.

    ``model``: the model; every ``nn.MultiheadAttention`` in it is hooked unless
    ``mha=False``. ``name``: the model name written to the file (default: the class name).
    ``modules``: optional ``{qualified_name_or_module: fn}`` of extra modules with a function
    returning (q, k[, v]) (see ``add``). ``sdpa``: record every call of
    ``F.scaled_dot_product_attention`` (installed with PyTorch 2.x semantics on older PyTorch), except
    calls made inside a module hooked above. Tensors are kept detached on the CPU.
    """

    def __init__(self, model: nn.Module, name: Optional[str] = None, mha: bool = True,
                 modules: Optional[Dict[object, QKVFn]] = None, sdpa: bool = True):
        self.model = model
        self.active = False
        self.sdpa = sdpa
        self.name = name or type(model).__name__
        self._stack: List[nn.Module] = []
        self._sdpa_calls = 0
        self._names = {m: n for n, m in model.named_modules()}
        self._targets: List[Tuple[nn.Module, Optional[QKVFn]]] = []
        if mha:
            for m in model.modules():
                if isinstance(m, nn.MultiheadAttention):
                    self._targets.append((m, None))
        for key, fn in (modules or {}).items():
            self.add(model.get_submodule(key) if isinstance(key, str) else key, fn)
        self._records: Dict[object, _Record] = {}
        self._order: List[object] = []
        self._undo: List[Callable[[], None]] = []

    # -- set-up ------------------------------------------------------------------------------
    def add(self, module: nn.Module, fn: QKVFn) -> "AttnScopeRecorder":
        """Hook ``module`` with ``fn(module, args, kwargs, output) -> (q, k[, v])``; q, k, v shaped
        ``[B, H, N, d]`` or ``[H, N, d]``. Call before entering the ``with`` block."""
        if self.active:
            raise RuntimeError("add() modules before entering the recorder")
        self._targets = [(m, f) for m, f in self._targets if m is not module]
        self._targets.append((module, fn))
        return self

    def __enter__(self) -> "AttnScopeRecorder":
        if self.active:
            raise RuntimeError("the recorder is already active")
        if not self._targets and not self.sdpa:
            raise ValueError("no attention module to record: the model has no nn.MultiheadAttention; "
                             "use add(module, fn) for other attention modules, or sdpa=True")
        self.clear()
        try:
            for module, fn in self._targets:
                self._wrap(module, fn)
            self._disable_fast_paths()
            self._track_modules()
            if self.sdpa:
                self._install_sdpa()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        self.active = True
        return self

    def __exit__(self, *exc) -> None:
        while self._undo:
            self._undo.pop()()
        self.active = False

    def clear(self) -> None:
        """Forget everything recorded so far."""
        self._records.clear()
        self._order.clear()
        self._stack.clear()
        self._sdpa_calls = 0

    def _track_modules(self) -> None:
        # A stack of the modules running now: its top is the module that calls
        # scaled_dot_product_attention, and a hooked module on it means that module's own capture applies.
        def push(mod, inputs):
            self._stack.append(mod)

        def pop(mod, inputs, output):
            while self._stack:
                if self._stack.pop() is mod:
                    break
        handles = []
        for m in self.model.modules():
            handles.append(m.register_forward_pre_hook(push))
            handles.append(m.register_forward_hook(pop))

        def undo():
            for h in handles:
                h.remove()
            self._stack.clear()
        self._undo.append(undo)

    def _install_sdpa(self) -> None:
        original = getattr(F, "scaled_dot_product_attention", None)
        impl = original if original is not None else sdpa_reference
        hooked = {id(m) for m, _ in self._targets}
        recorder = self

        @functools.wraps(impl)
        def scaled_dot_product_attention(*args, **kwargs):
            out = impl(*args, **kwargs)   # the call exactly as made: PyTorch raises for bad arguments
            if recorder.active and not any(id(m) in hooked for m in recorder._stack):
                with torch.no_grad():
                    recorder._capture_sdpa(args, kwargs)
            return out

        F.scaled_dot_product_attention = scaled_dot_product_attention

        def undo():
            if original is None:
                del F.scaled_dot_product_attention
            else:
                F.scaled_dot_product_attention = original
        self._undo.append(undo)

    def _wrap(self, module: nn.Module, fn: Optional[QKVFn]) -> None:
        original = module.forward  # bound method (or an earlier instance attribute)
        had_instance_attr = "forward" in module.__dict__
        recorder = self

        @functools.wraps(original)
        def forward(*args, **kwargs):
            out = original(*args, **kwargs)
            with torch.no_grad():
                recorder._capture(module, fn, args, kwargs, out)
            return out

        module.forward = forward

        def undo():
            if had_instance_attr:
                module.forward = original
            else:
                del module.forward
        self._undo.append(undo)

    def _disable_fast_paths(self) -> None:
        # PyTorch >= 2.1 has a switch; older versions (Debian 12: 1.13) take the fused path of
        # TransformerEncoderLayer only without grad, so its forward runs with grad enabled here.
        backend = getattr(torch.backends, "mha", None)
        if backend is not None and hasattr(backend, "set_fastpath_enabled"):
            was = backend.get_fastpath_enabled()
            backend.set_fastpath_enabled(False)
            self._undo.append(lambda: backend.set_fastpath_enabled(was))
            return
        hooked = {id(m) for m, _ in self._targets}
        for layer in self.model.modules():
            if isinstance(layer, nn.TransformerEncoderLayer) and id(layer.self_attn) in hooked:
                self._wrap_grad(layer)
            if isinstance(layer, nn.TransformerEncoder):
                self._wrap_grad(layer)  # its nested-tensor fast path also bypasses the layers

    def _wrap_grad(self, module: nn.Module) -> None:
        original = module.forward
        had_instance_attr = "forward" in module.__dict__

        @functools.wraps(original)
        def forward(*args, **kwargs):
            src = args[0] if args else kwargs.get("src")
            if not isinstance(src, torch.Tensor) or not src.is_floating_point() or (
                    torch.is_grad_enabled() and (src.requires_grad or any(p.requires_grad for p in module.parameters()))):
                return original(*args, **kwargs)  # the fused path is not taken anyway
            # Nothing requires grad: make the input require it, so the fused path is not taken; the
            # result is detached again, so nothing outside sees a graph.
            src = src.detach().requires_grad_(True)
            if args:
                args = (src,) + tuple(args[1:])
            else:
                kwargs = dict(kwargs, src=src)
            with torch.enable_grad():
                out = original(*args, **kwargs)
            return out.detach() if isinstance(out, torch.Tensor) else out

        module.forward = forward

        def undo():
            if had_instance_attr:
                module.forward = original
            else:
                del module.forward
        self._undo.append(undo)

    # -- capture -----------------------------------------------------------------------------
    def _capture(self, module, fn, args, kwargs, out) -> None:
        rec = _Record(self._names.get(module, type(module).__name__), module)
        if fn is None:
            a = _bind_mha_args(args, kwargs)
            q, k, v = project_mha(module, a["query"], a["key"], a["value"])
            extra = int(module.bias_k is not None) + int(bool(module.add_zero_attn))
            n_q, n_k = q.shape[2], k.shape[2] - extra
            rec.mask = "causal" if a.get("is_causal") else mask_kind(a.get("attn_mask"), n_q, n_k)
            kpm = a.get("key_padding_mask")
            rec.key_padding_mask = kpm is not None
            rec.extra_keys = extra
            if kpm is not None:   # padded tokens are dropped when saved, as for SDPA's padding masks
                rec.masks = _key_padding_masks(kpm, rec.mask, q.shape[0], n_q, n_k, extra,
                                               self_attention=a["query"] is a["key"])
            rec.scale = 1.0 / math.sqrt(module.head_dim)
        else:
            got = fn(module, args, kwargs, out)
            if isinstance(got, dict):   # {"q", "k"[, "v"][, "mixing"]}: a learned Mc, M x M or H x M x M
                rec.mixing = None if got.get("mixing") is None else torch.as_tensor(got["mixing"]).detach().cpu()
                got = (got["q"], got["k"]) + ((got["v"],) if got.get("v") is not None else ())
            if len(got) not in (2, 3):
                raise ValueError(f"{rec.name}: the q/k/v function must return (q, k) or (q, k, v)")
            q, k = got[0], got[1]
            v = got[2] if len(got) == 3 else None
            q, k = _as4(q, rec.name, "q"), _as4(k, rec.name, "k")
            v = None if v is None else _as4(v, rec.name, "v")
            rec.scale = 1.0 / math.sqrt(q.shape[-1])
        rec.q = q.detach().cpu()
        rec.k = k.detach().cpu()
        rec.v = None if v is None else v.detach().cpu()
        key = id(module)
        if key not in self._records:
            self._order.append(key)
        self._records[key] = rec

    def _capture_sdpa(self, args, kwargs) -> None:
        a = dict(zip(_SDPA_ARGS, args))
        a.update(kwargs)
        caller = self._stack[-1] if self._stack else None
        rec = _Record(self._names.get(caller, "(outside the model)"), caller)
        rec.module_type = type(caller).__name__ if caller is not None else ""
        q, k, v = (_sdpa4(a[r]) for r in ("query", "key", "value"))
        scale = a.get("scale")
        rec.scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
        is_causal = bool(a.get("is_causal", False))
        rec.masks = sdpa_mask_kind(a.get("attn_mask"), is_causal, q.shape[0], q.shape[2], k.shape[2])
        rec.meta = {"function": "scaled_dot_product_attention", "is_causal": is_causal,
                    "enable_gqa": bool(a.get("enable_gqa", False)), "dropout_p": float(a.get("dropout_p", 0.0) or 0.0)}
        rec.q, rec.k, rec.v = q.detach().cpu(), k.detach().cpu(), v.detach().cpu()
        key = ("sdpa", self._sdpa_calls)
        self._sdpa_calls += 1
        self._order.append(key)
        self._records[key] = rec

    # -- results -----------------------------------------------------------------------------
    @property
    def layers(self) -> List[_Record]:
        """Recorded layers in the order their modules first ran."""
        return [self._records[i] for i in self._order]

    def tensors(self, layer: int, batch: int = 0) -> Tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
        """(q, k, v) of one layer and batch element as float64 NumPy arrays ``[H, N, d]``, padded tokens
        dropped as ``save`` drops them."""
        q, k, v = _select(self.layers[layer], batch)
        pick = (lambda t: None if t is None else t.double().numpy())
        return pick(q), pick(k), pick(v)

    def analyze(self, layer: int, head: int = 0, batch: int = 0, **options) -> dict:
        """``attnscope.analyze`` (docs/python.md) on one recorded layer and batch element, without a file: the
        document of ``attnscope analyze --json`` for query head ``head``. What ``save`` would write as the
        layer's defaults is passed as options unless given: ``causal`` (from the layer's mask), ``scale`` (the
        module's softmax scale) and ``mixing`` (a learned Mc). ``options``: the command line's, ``_`` for ``-``."""
        import attnscope   # the module built with AttnScope (PYTHONPATH=build/python, or the Debian package)
        r = self.layers[layer]
        q, k, v = self.tensors(layer, batch)
        kind = r.mask_of(batch)[0]
        options.setdefault("causal", kind in ("causal", "causal+padding"))
        if r.scale is not None:
            options.setdefault("scale", float(r.scale))
        if r.mixing is not None:
            options.setdefault("mixing", np.asarray(r.mixing.detach().double().cpu().numpy()
                                                    if isinstance(r.mixing, torch.Tensor) else r.mixing, dtype=np.float64))
        return attnscope.analyze(q, k, v, head=head, **options)

    def save(self, path: str, grid: Optional[Sequence[int]] = None, prefix_tokens: int = 0,
             causal: Optional[bool] = None, batch=0, dtype: str = "float32",
             name: Optional[str] = None, attrs: Optional[dict] = None,
             tokens: Optional[Sequence[str]] = None, image=None, gates=None, gates_log: bool = False,
             values: bool = True) -> str:
        """Write ``path`` (HDF5, atomically). ``grid``: token grid of the N - prefix_tokens tokens
        (e.g. ``(14, 14)``); ``causal``: None takes it from the masks (every layer causal).
        ``batch``: the batch element written (``[H, N, d]`` datasets), or ``"all"``: every element, as
        ``[B, H, N, d]`` datasets (layout ``bhnd``: ``attnscope ... --at b=I`` selects input I, ``--head h`` the
        head), so that a whole test set is one file; every element must then have the same tokens (no padding)
        and the same mask, and ``tokens``, ``image`` and ``gates`` (one element's) are refused.
        ``values=False`` leaves v out (AttnScope's measures need q and k only).
        ``attrs``: extra root attributes (numbers, strings, bools, lists). ``tokens``: the token strings
        of the dumped batch element (one per query token; padded tokens, if given, are dropped with the
        padding), written as the root attribute ``tokens``. ``image``: the input image (a 2-D or 3-D array),
        written as the root attribute ``image``, or as the dataset ``/image`` when too large for an attribute.
        ``gates``: the scalar gates of a gated model (Mamba-2 / SSD, docs/maths.md 1.8), one entry per recorded layer
        (None to skip a layer), each [B, H, N] or [H, N] (g in (0, 1], or ln g with ``gates_log``, as Mamba-2's
        ``dt * A``): written as ``/layers/i/gates`` (as g) and named by the layer's ``gates`` attribute, so that
        ``attnscope analyze --mechanism gated --causal`` reads them."""
        layers = self.layers
        if not layers:
            raise RuntimeError("nothing recorded: run the model inside the `with` block first")
        if batch == "all":
            return self._save_all(path, grid, prefix_tokens, causal, dtype, name, attrs, tokens, image, gates, values)
        for r in layers:
            if not 0 <= batch < r.q.shape[0]:
                raise IndexError(f"batch {batch} out of range: {r.name} saw {r.q.shape[0]} batch elements")
        kinds = [r.mask_of(batch)[0] for r in layers]
        if causal is None:
            causal = all(k in ("causal", "causal+padding") for k in kinds)
        root = {"model": name or self.name, "causal": bool(causal), "prefix_tokens": int(prefix_tokens),
                "batch_index": int(batch)}
        if grid is not None:
            root["grid"] = [int(g) for g in grid]
        if gates is not None and len(gates) != len(layers):
            raise ValueError(f"gates: {len(gates)} entries for {len(layers)} recorded layers (None skips a layer)")
        out_layers = []
        for r in layers:
            q, k, v = _select(r, batch)
            n_tok = q.shape[1]
            if grid is not None and int(np.prod(root["grid"])) + prefix_tokens != n_tok:
                raise ValueError(f"grid {root['grid']} + {prefix_tokens} prefix tokens != N = {n_tok} ({r.name})")
            kind, keep_q, keep_k = r.mask_of(batch)
            meta = {"module": r.name, "module_type": r.module_type, "scale": float(r.scale), "mask": kind}
            if r.masks is None or not r.meta:   # nn.MultiheadAttention or a user function
                meta.update({"key_padding_mask": bool(r.key_padding_mask), "extra_keys": int(r.extra_keys)})
                if r.key_padding_mask:   # dropped from the file; AttnScope refuses key_padding_mask without it
                    meta["padded_tokens"] = 0 if keep_k is None else int((~keep_k).sum())
            else:
                meta.update(r.meta)
                meta["padded_tokens"] = 0 if keep_k is None else int((~keep_k).sum())
            ts = {"q": q, "k": k}
            if v is not None and values:
                ts["v"] = v
            if r.mixing is not None:   # the layer's learned Mc, its default mixing (docs/cli.md, file attributes)
                ts["mixing"] = r.mixing
                meta["mixing"] = f"/layers/{len(out_layers)}/mixing"
            g = None if gates is None else gates[len(out_layers)]
            if g is not None:
                ts["gates"] = _layer_gates(g, batch, q.shape, r.mask_of(batch)[1], gates_log, r.name)
                meta["gates"] = f"/layers/{len(out_layers)}/gates"
            out_layers.append((ts, meta))
        if tokens is not None:
            root["tokens"] = self._tokens_for(list(tokens), batch)
        extra_datasets = {}
        if image is not None:
            img = np.asarray(image.detach().cpu().numpy() if isinstance(image, torch.Tensor) else image)
            if img.ndim not in (2, 3) or img.dtype.kind not in "biuf":
                raise ValueError(f"image must be a 2-D or 3-D array of numbers, got shape {img.shape} ({img.dtype})")
            if img.dtype.kind == "f":
                img = img.astype(np.float32 if dtype == "float32" else np.float64)
            if img.nbytes <= _MAX_ATTRIBUTE_BYTES:
                root["image"] = _AsIs(img)   # in its own type: uint8 pixels stay one byte each
            else:
                extra_datasets["image"] = img
        root.update(attrs or {})
        return write_h5(path, out_layers, root, dtype=dtype, datasets=extra_datasets)

    def _save_all(self, path, grid, prefix_tokens, causal, dtype, name, attrs, tokens, image, gates, values) -> str:
        """``save(batch="all")``: every batch element, datasets ``[B, H, N, d]``, root ``layout`` ``bhnd``."""
        for arg, what in ((tokens, "tokens"), (image, "image"), (gates, "gates")):
            if arg is not None:
                raise ValueError(f"save(batch='all'): {what} belong to one batch element; pass them in attrs or "
                                 f"save one element")
        out_layers, kinds = [], []
        for r in self.layers:
            nb = r.q.shape[0]
            per = [r.mask_of(b) for b in range(nb)]
            if any(kq is not None and not bool(kq.all()) or kk is not None and not bool(kk.all()) for _, kq, kk in per):
                raise ValueError(f"save(batch='all'): {r.name} has padded tokens; the elements differ in length")
            if len({kind for kind, _, _ in per}) != 1:
                raise ValueError(f"save(batch='all'): the batch elements of {r.name} have different masks")
            kinds.append(per[0][0])
            if grid is not None and int(np.prod(grid)) + prefix_tokens != r.q.shape[2]:
                raise ValueError(f"grid {list(grid)} + {prefix_tokens} prefix tokens != N = {r.q.shape[2]} ({r.name})")
            meta = {"module": r.name, "module_type": r.module_type, "scale": float(r.scale), "mask": per[0][0]}
            if r.masks is None or not r.meta:
                meta.update({"key_padding_mask": bool(r.key_padding_mask), "extra_keys": int(r.extra_keys)})
                if r.key_padding_mask:
                    meta["padded_tokens"] = 0
            else:
                meta.update(r.meta)
                meta["padded_tokens"] = 0
            ts = {"q": r.q, "k": r.k}
            if r.v is not None and values:
                ts["v"] = r.v
            if r.mixing is not None:
                ts["mixing"] = r.mixing
                meta["mixing"] = f"/layers/{len(out_layers)}/mixing"
            out_layers.append((ts, meta))
        if len({int(ts["q"].shape[0]) for ts, _ in out_layers}) != 1:
            raise ValueError("save(batch='all'): the layers saw different batch sizes")
        if causal is None:
            causal = all(k in ("causal", "causal+padding") for k in kinds)
        root = {"model": name or self.name, "causal": bool(causal), "prefix_tokens": int(prefix_tokens),
                "layout": "bhnd", "batch_index": "all", "n_batch": int(out_layers[0][0]["q"].shape[0])}
        if grid is not None:
            root["grid"] = [int(g) for g in grid]
        root.update(attrs or {})
        return write_h5(path, out_layers, root, dtype=dtype)

    def _tokens_for(self, tokens: List[str], batch: int) -> List[str]:
        """The token strings of the written queries: as given, or with the padded tokens dropped."""
        if not all(isinstance(t, str) for t in tokens):
            raise TypeError("tokens must be strings")
        written = {int(_select(r, batch)[0].shape[1]) for r in self.layers}
        if written == {len(tokens)}:
            return tokens
        for r in self.layers:
            keep_q = r.mask_of(batch)[1]
            if keep_q is not None and len(keep_q) == len(tokens):
                kept = [t for t, keep in zip(tokens, keep_q.tolist()) if keep]
                if written == {len(kept)}:
                    return kept
        raise ValueError(f"{len(tokens)} tokens given, the written layers have "
                         f"{', '.join(str(n) for n in sorted(written))} query tokens")


def _layer_gates(g, batch: int, q_shape, keep_q, gates_log: bool, name: str) -> torch.Tensor:
    """One layer's gates [H, N] as g for the written queries (q_shape [H, N, d]): the batch element taken from
    [B, H, N], padded query tokens dropped like the queries, ln g exponentiated."""
    a = np.asarray(g.detach().cpu().numpy() if isinstance(g, torch.Tensor) else g, dtype=np.float64)
    if a.ndim == 3:
        a = a[batch]
    if keep_q is not None and a.ndim == 2 and a.shape[1] == len(keep_q):
        a = a[:, np.asarray(keep_q, dtype=bool)]
    if a.shape != tuple(q_shape[:2]):
        raise ValueError(f"gates of {name}: shape {a.shape}, the queries are [H, N] = {tuple(q_shape[:2])}")
    if gates_log:
        a = np.exp(a)
    if not (np.all(np.isfinite(a)) and np.all(a > 0) and np.all(a <= 1)):
        raise ValueError(f"gates of {name} must lie in (0, 1] (as ln g: finite and <= 0)")
    return torch.from_numpy(a)


_MAX_ATTRIBUTE_BYTES = 48 * 1024   # HDF5 keeps an attribute in the object header: at most 64 KiB


class _AsIs:
    """An attribute value written with its own NumPy type."""
    __slots__ = ("array",)

    def __init__(self, array: np.ndarray):
        self.array = array


def _key_padding_masks(kpm: torch.Tensor, kind: str, batch: int, n_q: int, n_k: int, extra: int,
                       self_attention: bool) -> list:
    """Per batch element ``(kind, keep_q, keep_k)`` for an nn.MultiheadAttention ``key_padding_mask`` ([B, S]
    or [S]; bool True or float -inf / finfo.min: padded). The padded keys are dropped (the ``extra`` keys of
    ``add_bias_kv`` / ``add_zero_attn`` always stay) and, for self-attention, the padded queries with them, so
    the file holds the real tokens only. A float mask with other values (a bias) cannot be dropped: ``"other"``."""
    m = kpm.detach()
    if m.dim() == 1:
        m = m.unsqueeze(0)
    if m.dtype == torch.uint8:
        m = m.to(torch.bool)
    if m.dim() != 2 or m.shape[0] != batch or m.shape[1] != n_k:
        return [("other", None, None)] * batch
    if m.dtype == torch.bool:
        pad = m
    else:
        pad = m <= _MASKED_BIAS
        if not bool(((m == 0) | pad).all()):
            return [("other", None, None)] * batch
    out = []
    for b in range(batch):
        real = ~pad[b].cpu()
        keep_k = torch.cat([real, torch.ones(extra, dtype=torch.bool)])
        keep_q = real.clone() if self_attention and n_q == n_k else None
        out.append((kind, keep_q, keep_k))
    return out


def _sdpa4(t: torch.Tensor) -> torch.Tensor:
    """An SDPA argument ``[..., H, N, d]`` as ``[B, H, N, d]`` (``[H, N, d]``: one batch element)."""
    if t.dim() == 4:
        return t
    if t.dim() == 3:
        return t.unsqueeze(0)
    if t.dim() == 2:
        return t.unsqueeze(0).unsqueeze(0)
    return t.reshape(-1, *t.shape[-3:])


def _select(r: _Record, batch: int):
    """q, k, v ``[H, N, d]`` of one batch element, padded tokens dropped."""
    _, keep_q, keep_k = r.mask_of(batch)
    q, k, v = r.q[batch], r.k[batch], None if r.v is None else r.v[batch]
    if keep_q is not None:
        q = q[:, keep_q]
    if keep_k is not None:
        k = k[:, keep_k]
        v = None if v is None else v[:, keep_k]
    return q, k, v


def _as4(t: torch.Tensor, name: str, role: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        t = torch.as_tensor(t)
    if t.dim() == 3:
        t = t.unsqueeze(0)
    if t.dim() != 4:
        raise ValueError(f"{name}: {role} must be [B, H, N, d] or [H, N, d], got {tuple(t.shape)}")
    return t


def write_h5(path: str, layers: List[Tuple[Dict[str, torch.Tensor], dict]], root_attrs: dict,
             dtype: str = "float32", datasets: Optional[Dict[str, np.ndarray]] = None) -> str:
    """Low-level writer: ``layers`` is a list of ``({"q": [H,N,d], "k": ..., "v": ...}, attrs)``;
    ``datasets``: further root datasets (name -> array, written as they are).
    Written to a temporary file beside ``path`` and renamed, so a failure leaves nothing behind."""
    import h5py  # imported here so that the recorder works without h5py until save()

    if dtype not in ("float32", "float64"):
        raise ValueError("dtype must be float32 or float64")
    heads = {int(ts["q"].shape[-3]) for ts, _ in layers}   # [H, N, d] or, save(batch="all"), [B, H, N, d]
    ntok = {int(ts["q"].shape[-2]) for ts, _ in layers}
    attrs = {"source": "attnscope_dump", "source_version": __version__, "torch_version": str(torch.__version__),
             "layout": "hnd", "n_layers": len(layers), "n_heads": heads.pop() if len(heads) == 1 else -1,
             "n_tokens": ntok.pop() if len(ntok) == 1 else -1}
    attrs.update(root_attrs)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".attnscope_dump.", suffix=".h5", dir=folder)
    os.close(fd)
    try:
        with h5py.File(tmp, "w") as f:
            for key, value in attrs.items():
                f.attrs[key] = _attr(value)
            for i, (ts, meta) in enumerate(layers):
                g = f.create_group(f"layers/{i}")
                for role, t in ts.items():
                    a = t.detach().cpu().to(torch.float64).numpy().astype(dtype)
                    chunks = (1,) + a.shape[1:] if a.size > 0 and a.ndim > 2 else None
                    d = g.create_dataset(role, data=a, compression="gzip", compression_opts=6,
                                         shuffle=True, chunks=chunks)
                    for key, value in meta.items():
                        d.attrs[key] = _attr(value)
            for key, arr in (datasets or {}).items():
                f.create_dataset(key, data=arr, compression="gzip", compression_opts=6, shuffle=True)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # mkstemp made it private; give it the usual permissions
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def _attr(value):
    if isinstance(value, (bool, np.bool_)):
        return np.bool_(value)
    if isinstance(value, (int, np.integer)):
        return np.int64(value)
    if isinstance(value, (float, np.floating)):
        return np.float64(value)
    if isinstance(value, str):
        return value
    if isinstance(value, _AsIs):
        return value.array
    if isinstance(value, (list, tuple)) and value and all(isinstance(x, str) for x in value):
        import h5py
        return np.array(value, dtype=h5py.string_dtype("utf-8"))   # variable-length UTF-8 strings (tokens)
    if isinstance(value, (list, tuple, np.ndarray)):
        arr = np.asarray(value)
        if arr.dtype.kind in "iu":
            return arr.astype(np.int64)
        if arr.dtype.kind == "f":
            return arr.astype(np.float64)
        return arr
    raise TypeError(f"unsupported attribute value {value!r}")


# -- one call ----------------------------------------------------------------------------------
class CapturedLayer:
    """One attention layer of a captured forward pass: ``q``, ``k``, ``v`` as float64 arrays ``[H, N, d]`` (one
    batch element, padded tokens dropped), and what ``save`` would record as the layer's defaults: ``causal``,
    ``scale`` (the module's softmax scale, or None) and ``mixing`` (a learned Mc, or None)."""
    __slots__ = ("index", "name", "module_type", "q", "k", "v", "causal", "scale", "mixing")

    def options(self) -> dict:
        """The layer's defaults as ``attnscope.analyze`` keywords (given options win over them)."""
        out = {"causal": self.causal}
        if self.scale is not None:
            out["scale"] = float(self.scale)
        if self.mixing is not None:
            out["mixing"] = self.mixing
        return out

    def __repr__(self):
        return f"<layer {self.index} {self.name} ({self.module_type}): q {list(self.q.shape)}, causal={self.causal}>"


class Capture(list):
    """Every attention layer of one forward pass, in the order the modules ran (a list of
    :class:`CapturedLayer`), as ``capture`` returns it; ``recorder`` is the recorder (``recorder.save(path)``
    writes them to a file for the command line and the desktop app)."""

    def __init__(self, layers, recorder):
        super().__init__(layers)
        self.recorder = recorder

    def analyze(self, heads="all", **options) -> list:
        """``attnscope.analyze`` of every layer and head: a list of Documents, one per layer (each with a unit per
        head when ``heads="all"``, the default; an int: that head). Options as attnscope.analyze takes them."""
        import attnscope   # the module built with AttnScope (PYTHONPATH=build/python, or the Debian package)
        docs = []
        for layer in self:
            kw = dict(layer.options(), **options)
            if heads == "all":
                kw.setdefault("at", {"h": "all"})
            else:
                kw.setdefault("head", int(heads))
            docs.append(attnscope.analyze(layer.q, layer.k, layer.v, **kw))
        return docs

    def to_pandas(self, heads="all", **options):
        """:meth:`analyze` as one pandas DataFrame: a row per layer, head and mechanism, with ``layer`` and
        ``layer_name`` columns before the analysis's own."""
        import pandas as pd
        frames = []
        for layer, doc in zip(self, self.analyze(heads=heads, **options)):
            df = doc.to_pandas()
            df.insert(0, "layer_name", layer.name)
            df.insert(0, "layer", layer.index)
            frames.append(df)
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def capture(model: nn.Module, *inputs, batch: int = 0, grad: bool = False, **recorder_options) -> Capture:
    """Runs ``model(*inputs)`` once under an :class:`AttnScopeRecorder` and returns every attention layer it
    recorded (every ``nn.MultiheadAttention`` and ``scaled_dot_product_attention`` call, and the modules of
    ``modules=``) as a :class:`Capture`, ready for ``attnscope.analyze`` (``capture(...).analyze()`` does every
    layer and head; ``.to_pandas()`` the table), like TransformerLens's ``run_with_cache``. ``inputs``: the
    model's positional arguments (a dict as the last one is passed as keyword arguments). ``batch``: which batch
    element. ``grad``: run with gradients (default: under ``torch.no_grad()``). ``recorder_options``: those of
    AttnScopeRecorder (``name``, ``mha``, ``modules``, ``sdpa``). Raises ValueError when no attention ran."""
    kwargs = {}
    if inputs and isinstance(inputs[-1], dict):
        inputs, kwargs = inputs[:-1], inputs[-1]
    rec = AttnScopeRecorder(model, **recorder_options)
    with rec, (contextlib.nullcontext() if grad else torch.no_grad()):
        model(*inputs, **kwargs)
    if not rec.layers:
        raise ValueError(f"no attention layer ran in {type(model).__name__}: nothing to capture (hook other modules "
                         "with modules={name: fn})")
    layers = []
    for i, r in enumerate(rec.layers):
        elements = r.q.shape[0] if r.q.dim() == 4 else 1
        if not 0 <= batch < elements:
            raise ValueError(f"batch {batch}: layer {i} ({r.name}) ran on {elements} batch element(s)")
        c = CapturedLayer()
        c.index, c.name, c.module_type = i, r.name, r.module_type
        c.q, c.k, c.v = rec.tensors(i, batch)
        c.causal = r.mask_of(batch)[0] in ("causal", "causal+padding")
        c.scale = None if r.scale is None else float(r.scale)
        c.mixing = None if r.mixing is None else np.asarray(
            r.mixing.detach().double().cpu().numpy() if isinstance(r.mixing, torch.Tensor) else r.mixing,
            dtype=np.float64)
        layers.append(c)
    return Capture(layers, rec)


# -- command line ----------------------------------------------------------------------------
class _DemoEncoder(nn.Module):
    """A small random ViT-like encoder: 8x8 patch tokens + CLS, 2 layers, 4 heads, width 64."""

    def __init__(self, width=64, heads=4, depth=2, grid=8):
        super().__init__()
        self.cls = nn.Parameter(torch.randn(1, 1, width) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, grid * grid + 1, width) * 0.5)
        self.embed = nn.Linear(1, width)
        layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)

    def forward(self, pixels):  # [B, 64]
        x = self.embed(pixels.unsqueeze(-1))
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.encoder(x)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="As a library: see the module docstring (python3 -m pydoc attnscope_dump).")
    p.add_argument("--demo", metavar="OUT.h5", required=True,
                   help="dump a small random ViT-like encoder (2 layers, 4 heads, 8x8 grid + CLS) to OUT.h5")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    torch.manual_seed(a.seed)
    model = _DemoEncoder().eval()
    with torch.no_grad(), AttnScopeRecorder(model, name="attnscope_dump demo encoder") as rec:
        model(torch.rand(1, 64))
    rec.save(a.demo, grid=(8, 8), prefix_tokens=1)
    # The command as the reader can run it: `attnscope` when installed (the package), else this checkout's build.
    tool = "attnscope" if shutil.which("attnscope") else os.path.relpath(
        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "app", "attnscope"))
    print(f"wrote {a.demo}: {len(rec.layers)} layers, q/k/v [4, 65, 16]; try\n"
          f"  {tool} info {a.demo}\n"
          f"  {tool} analyze --q {a.demo}:/layers/0/q --k {a.demo}:/layers/0/k --head 0 "
          f"--prefix-tokens 1 --grid 8,8 --block-grid 4,4")
    return 0


if __name__ == "__main__":
    sys.exit(main())
