"""attnref: an independent NumPy reference for docs/maths.md sections 1 (mechanisms) and 2 (metrics).

Written from the spec (docs/maths.md), not from the C++ sources, and deliberately
literal and slow: dense N x N matrices, numpy.array_split / unravel_index / ravel_multi_index,
numpy.linalg.svd. Use it for known answers in tests, never as a fast path.

Use from a test script (tests/<anything>/x.py):

    import os, sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "<up to tests>", "reference"))
    import attnref

    A = attnref.attention_matrix("mhla", Q, K, blocks=4, mixing="exp", mixing_sigma=2.0)
    m = attnref.metrics(A, allowed=attnref.allowed_keys("mhla", Q.shape[0], causal=False),
                        rank_rtol=None, top_k=None, row_entropy=True)
    # m: {"rank", "rank_tol", "relative_rank", "effective_rank", "stable_rank", "singular_values",
    #     "entropy": {"mean","std","min","max","normalized_mean"} or None, "row_entropy", "warnings"}

Option names are the command line's (docs/cli.md) with '-' written '_':
    scale, causal, feature_map (relu|elu1|identity|favor), favor_features, seed,
    blocks | chunk | grid + block_grid (+ token_order raster|blocked),
    mixing (preset name, or None for the default), mixing_sigma, mixing_threshold,
    mixing_matrix (an M x M array, or a path to a .npy file), normalize (row|none|official).
Mechanism "softmax" ignores everything but scale and causal; "linear" ignores the block and mixing options.
Q and K are N x d arrays (rows are tokens); --prefix-tokens is the caller's business (slice Q[P:], K[P:],
and gates[P:]).

The families of ../shared/spec/attention.md 1.8 ("decay", "gated", "cosformer") take feature_map, favor_features,
seed, causal and normalize (row|none) and, each its own:
    decay:     decay (g, 0 < g <= 1; None = RetNet's default 1 - 2^(-5 - head)), head (the query head index h,
               used for nothing but that default), grid (+ block_grid when token_order is "blocked") for the
               Manhattan distance of the non-causal case;
    gated:     gates (N values, one per token, of the selected head: an array or a .npy path), gates_log
               (the values are ln g); causal only.
    cosformer: nothing more.
They ignore blocks, chunk and the mixing options.

The measures of attention.md 2.1 (energy ranks, rank_at_rtol, support-normalised entropy, the content-free
baseline A0, the past block) come from measures(mechanism, Q, K, **options); analyze_result(...) gives one
whole result of the analyze JSON (metrics() and measures() together); aggregate(units) gives the statistics
over units (means, bootstrap intervals, paired differences, sign tests).

From a shell (npy in, npy / JSON out; a ValueError becomes "error: ..." on stderr and exit status 2), e.g.
    python3 attnref.py --q q.npy --k k.npy --mechanism mhla --blocks 4 --out A.npy --metrics-json m.json
    python3 attnref.py --q q.npy --k k.npy --mechanism gated --causal --gates g.npy --gates-log --metrics-json -
"""

import argparse
import json
import math

import numpy as np

MASK64 = (1 << 64) - 1
RELU_EPS = 1e-6          # the MHLA authors' eps in the relu feature map
OFFICIAL_EPS = 1e-6      # and in the official denominator
PRESETS = ("cos", "linear", "exp", "gaussian", "local", "uniform", "identity", "causal-local", "causal")


# ------------------------------------------------------------------------------------------------
# The random generator of core/util/rng.h: splitmix64 + Box-Muller (cosine branch only).
class SplitMix64:
    def __init__(self, seed):
        self.state = int(seed) & MASK64

    def next_u64(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def uniform(self):
        # ((z >> 11) + 0.5) * 2^-53, in (0, 1); (z >> 11) < 2^53 so float() is exact.
        return (float(self.next_u64() >> 11) + 0.5) * 2.0 ** -53

    def normal(self):
        u1 = self.uniform()
        u2 = self.uniform()
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


def favor_projection(m, d, seed):
    """W, m x d, filled row by row (W[i, j], i < m, j < d) with one normal draw per entry."""
    rng = SplitMix64(seed)
    W = np.empty((m, d))
    for i in range(m):
        for j in range(d):
            W[i, j] = rng.normal()
    return W


# ------------------------------------------------------------------------------------------------
# 1.2 Feature maps, row by row.
def apply_feature_map(name, X, favor_features=256, seed=0):
    X = np.asarray(X, dtype=np.float64)
    if name == "relu":
        return np.maximum(X, 0.0) + RELU_EPS
    if name == "elu1":
        elu = np.where(X > 0, X, np.expm1(np.minimum(X, 0.0)))   # elu(x), alpha = 1
        return elu + 1.0
    if name == "identity":
        return X.copy()
    if name == "favor":
        if favor_features < 1:
            raise ValueError("favor_features must be >= 1")
        d = X.shape[1]
        W = favor_projection(favor_features, d, seed)
        Xp = X * d ** -0.25
        out = np.empty((X.shape[0], favor_features))
        for t in range(X.shape[0]):
            x = Xp[t]
            out[t] = np.exp(W @ x - np.dot(x, x) / 2.0) / np.sqrt(favor_features)
        return out
    raise ValueError("unknown feature map " + repr(name))


# ------------------------------------------------------------------------------------------------
# 1.5 Blocks. Returns (blk, centres): blk[t] in 0..M-1, centres M x (1|2|3).
def block_layout(N, blocks=None, chunk=None, grid=None, block_grid=None, token_order="raster"):
    if grid is not None:
        grid = tuple(int(g) for g in grid)
        block_grid = tuple(int(b) for b in block_grid)
        assert len(grid) in (2, 3) and len(block_grid) == len(grid)
        assert int(np.prod(grid)) == N, "grid does not hold N tokens"
        for g, b in zip(grid, block_grid):
            assert g % b == 0
        step = np.array(grid) // np.array(block_grid)
        M = int(np.prod(block_grid))
        if token_order == "raster":
            coords = np.stack(np.unravel_index(np.arange(N), grid), axis=1)       # N x ndim
            bcoords = coords // step
            blk = np.ravel_multi_index(tuple(bcoords.T), block_grid)
        elif token_order == "blocked":
            per_block = N // M
            blk = np.arange(N) // per_block
        else:
            raise ValueError("token_order")
        centres = np.stack(np.unravel_index(np.arange(M), block_grid), axis=1).astype(np.float64) + 0.5
        return np.asarray(blk, dtype=np.int64), centres
    if chunk is not None:
        assert chunk >= 1
        M = -(-N // chunk)
        parts = [np.arange(N)[i * chunk:(i + 1) * chunk] for i in range(M)]
    else:
        M = min(16, N) if blocks in (None, 0) else int(blocks)
        assert 1 <= M <= N
        parts = np.array_split(np.arange(N), M)
    blk = np.empty(N, dtype=np.int64)
    for b, part in enumerate(parts):
        blk[part] = b
    centres = (np.arange(M, dtype=np.float64) + 0.5)[:, None]
    return blk, centres


# ------------------------------------------------------------------------------------------------
# 1.6 Mixing.
def _colnorm(W):
    s = W.sum(axis=0)
    assert np.all(s > 0)
    return W / s[None, :]


def mixing_preset(name, centres, causal=False, sigma=3.0, threshold=1.5):
    # The defaults of docs/maths.md 1.6: causal-local when causal; non-causal, cos on a block grid (centres with
    # two or three coordinates) and exp on 1-D blocks.
    if name is None or name == "":
        name = "causal-local" if causal else ("cos" if centres.shape[1] > 1 else "exp")
    M = centres.shape[0]
    if M == 1:
        return np.ones((1, 1))
    D = np.sqrt(((centres[:, None, :] - centres[None, :, :]) ** 2).sum(axis=-1))
    Dmax = D.max()
    if name == "cos":
        return _colnorm(np.cos(D / Dmax * np.pi / 4))
    if name == "linear":
        return _colnorm(1.0 - D / Dmax)
    if name == "exp":
        return _colnorm(np.exp(-D / sigma))
    if name == "gaussian":
        s = Dmax / 3.0
        return np.exp(-D ** 2 / (2 * s ** 2))
    if name == "local":
        return _colnorm((D <= threshold).astype(np.float64))
    if name == "uniform":
        return np.ones((M, M))
    if name == "identity":
        return np.eye(M)
    if name == "causal-local":
        i, j = np.meshgrid(np.arange(M), np.arange(M), indexing="ij")
        W = np.where(j <= i, np.exp(-(i - j) / sigma), 0.0)
        return W / W.sum(axis=1, keepdims=True)
    if name == "causal":
        W = np.zeros((M, M))
        for i in range(M):
            W[i, :i + 1] = 1.0 / (i + 1)
        return W
    raise ValueError("unknown mixing preset " + repr(name))


# ------------------------------------------------------------------------------------------------
# 1.1, 1.3, 1.4 Mechanisms.
def softmax_attention(Q, K, scale=None, causal=False):
    N, d = Q.shape
    if scale is None:
        scale = 1.0 / np.sqrt(d)
    S = scale * (Q @ K.T)
    if causal:
        S = np.where(np.tril(np.ones((N, N), dtype=bool)), S, -np.inf)
    S = S - S.max(axis=1, keepdims=True)
    E = np.exp(S)
    return E / E.sum(axis=1, keepdims=True)


def kernel_attention(phiQ, phiK, blk, Mc, causal=False, normalize="row"):
    """MHLA of 1.4 given features, block index per token and mixing (linear attention: blk = 0, Mc = [[1]])."""
    N = phiQ.shape[0]
    P = Mc[np.ix_(blk, blk)] * (phiQ @ phiK.T)
    if causal:
        t = np.arange(N)[:, None]
        j = np.arange(N)[None, :]
        bt = blk[:, None]
        bj = blk[None, :]
        allowed = (bj < bt) | ((bj == bt) & (j <= t))
        P = np.where(allowed, P, 0.0)
    if normalize == "row":
        return P / P.sum(axis=1, keepdims=True)
    if normalize == "none":
        return P
    if normalize == "official":
        assert not causal, "official normalisation is non-causal only"
        M = Mc.shape[0]
        members = [np.flatnonzero(blk == b) for b in range(M)]   # ascending token order
        sizes = {len(m) for m in members}
        assert len(sizes) == 1, "official normalisation needs equal blocks"
        z = np.stack([phiK[m].sum(axis=0) for m in members])      # M x r
        den = np.empty(N)
        for i in range(M):
            for p, t in enumerate(members[i]):
                den[t] = OFFICIAL_EPS + sum(Mc[i, b] * np.dot(phiQ[members[b][p]], z[b]) for b in range(M))
        return P / den[:, None]
    raise ValueError("unknown normalize " + repr(normalize))


def load_matrix(ref):
    if isinstance(ref, str):
        return np.load(ref).astype(np.float64)
    return np.asarray(ref, dtype=np.float64)


def mhla_layout(N, causal=False, blocks=None, chunk=None, grid=None, block_grid=None, token_order="raster",
                mixing=None, mixing_sigma=3.0, mixing_threshold=1.5, mixing_matrix=None):
    """(blk, Mc) of MHLA (1.4 - 1.6): the block of each token and the M x M mixing matrix."""
    blk, centres = block_layout(N, blocks, chunk, grid, block_grid, token_order)
    if mixing_matrix is not None:
        Mc = load_matrix(mixing_matrix)
        assert Mc.shape == (centres.shape[0],) * 2
    else:
        Mc = mixing_preset(mixing, centres, causal, mixing_sigma, mixing_threshold)
    return blk, Mc


# ------------------------------------------------------------------------------------------------
# 1.8 Other linear-attention families: decay (RetNet / RMT), gated (Mamba-2 / SSD), cosformer.
# Each is P[t,j] = W[t,j] * phi(q_t) . phi(k_j) with a content-free factor W (0 where j is not allowed);
# family_weights() builds W, family_attention() multiplies and normalises.
NEW_FAMILIES = ("decay", "gated", "cosformer")


def default_decay(head=0):
    """RetNet's schedule: gamma = 1 - 2^(-5 - h) for query head h (h = 0, 1, ...)."""
    return 1.0 - 2.0 ** (-5 - int(head))


def grid_positions(N, grid, block_grid=None, token_order="raster"):
    """N x len(grid) integer coordinates of each token on the grid (1.5).
    raster:  token t sits at numpy.unravel_index(t, grid).
    blocked: block b = t // (N / M) (blocks in raster order over block_grid), in-block index p = t % (N / M) in
             raster order inside the block: position = unravel(b, block_grid) * step + unravel(p, step),
             step = grid / block_grid (the token order block_layout() assumes)."""
    grid = tuple(int(g) for g in grid)
    if len(grid) not in (2, 3):
        raise ValueError("grid must have 2 or 3 axes, got %r" % (grid,))
    if int(np.prod(grid)) != N:
        raise ValueError("grid %r holds %d tokens, not N = %d" % (grid, int(np.prod(grid)), N))
    if token_order == "raster":
        return np.stack(np.unravel_index(np.arange(N), grid), axis=1).astype(np.int64)
    if token_order == "blocked":
        if block_grid is None:
            raise ValueError("token_order 'blocked' needs block_grid")
        block_grid = tuple(int(b) for b in block_grid)
        if len(block_grid) != len(grid) or any(g % b != 0 for g, b in zip(grid, block_grid)):
            raise ValueError("block_grid %r does not divide grid %r" % (block_grid, grid))
        step = tuple(g // b for g, b in zip(grid, block_grid))
        per_block = int(np.prod(step))
        pos = np.empty((N, len(grid)), dtype=np.int64)
        for t in range(N):
            b, p = divmod(t, per_block)
            bc = np.array(np.unravel_index(b, block_grid))
            ic = np.array(np.unravel_index(p, step))
            pos[t] = bc * np.array(step) + ic
        return pos
    raise ValueError("unknown token_order " + repr(token_order))


def load_gates(gates, N, gates_log=False):
    """The N gates g_t in (0, 1] of one head, as given (gates_log=False) or as ln g (gates_log=True).
    Returns (g, log_g): exactly one of them is an array, the other None (products are formed from what was
    given: plain products of g, or exp of sums of ln g). Errors: not N values; g outside (0, 1] (NaN included);
    ln g not finite or > 0."""
    if gates is None:
        raise ValueError("mechanism 'gated' needs gates (one value per token)")
    x = load_matrix(gates)
    if x.ndim != 1 or x.shape[0] != N:
        raise ValueError("gates must hold one value per token: N = %d, got shape %r" % (N, tuple(x.shape)))
    if gates_log:
        bad = ~(np.isfinite(x) & (x <= 0.0))
        if np.any(bad):
            t = int(np.flatnonzero(bad)[0])
            raise ValueError("log gates must be finite and <= 0 (gates in (0, 1]): token %d has ln g = %r"
                             % (t, float(x[t])))
        return None, x
    bad = ~((x > 0.0) & (x <= 1.0))
    if np.any(bad):
        t = int(np.flatnonzero(bad)[0])
        raise ValueError("gates must lie in (0, 1]: token %d has g = %r" % (t, float(x[t])))
    return x, None


def family_weights(mechanism, N, causal=False, decay=None, head=0, grid=None, block_grid=None,
                   token_order="raster", gates=None, gates_log=False):
    """W (N x N, float64) of 1.8: P = W * (phi(Q) phi(K)^T) elementwise, W = 0 where j is not allowed.
    decay:     gamma^dist, dist = t - j (causal, j <= t), |t - j| (non-causal 1-D), Manhattan distance of the
               grid positions (non-causal with grid). Causal with a grid still uses t - j (the spec's rule).
    gated:     prod_{i=j+1..t} g_i for j <= t (1 on the diagonal); causal only.
    cosformer: cos(pi/2 * (t - j) / N) (on j <= t when causal)."""
    t_idx = np.arange(N)[:, None]
    j_idx = np.arange(N)[None, :]
    mask = (j_idx <= t_idx) if causal else np.ones((N, N), dtype=bool)
    if mechanism == "decay":
        g = default_decay(head) if decay is None else float(decay)
        if not (0.0 < g <= 1.0):
            raise ValueError("decay g must lie in (0, 1], got %r" % (g,))
        if causal:
            dist = t_idx - j_idx                      # only used where j <= t
            if grid is not None:
                grid_positions(N, grid, block_grid, token_order)    # validated, not used (dist is t - j)
        elif grid is not None:
            pos = grid_positions(N, grid, block_grid, token_order)
            dist = np.abs(pos[:, None, :] - pos[None, :, :]).sum(axis=-1)
        else:
            dist = np.abs(t_idx - j_idx)
        return np.where(mask, g ** np.where(mask, dist, 0).astype(np.float64), 0.0)
    if mechanism == "gated":
        if not causal:
            raise ValueError("mechanism 'gated' is causal only (set causal=True / --causal)")
        g, log_g = load_gates(gates, N, gates_log)
        W = np.zeros((N, N))
        for t in range(N):
            W[t, t] = 1.0
            if g is not None:
                # W[t, j] = g_t * g_{t-1} * ... * g_{j+1}, multiplied in that order
                for j in range(t - 1, -1, -1):
                    W[t, j] = W[t, j + 1] * g[j + 1]
            else:
                # W[t, j] = exp(ln g_t + ln g_{t-1} + ... + ln g_{j+1}), summed in that order. (An implementation
                # by differences of one cumulative sum, exp(c_t - c_j), loses about |c_t| * 2^-52 relative.)
                acc = 0.0
                for j in range(t - 1, -1, -1):
                    acc += log_g[j + 1]
                    W[t, j] = math.exp(acc)
        return W
    if mechanism == "cosformer":
        return np.where(mask, np.cos(np.pi / 2.0 * (t_idx - j_idx) / N), 0.0)
    raise ValueError("unknown mechanism " + repr(mechanism))


def _normalise(P, normalize, mechanism):
    if normalize == "row":
        return P / P.sum(axis=1, keepdims=True)
    if normalize == "none":
        return P
    raise ValueError("mechanism %r takes normalize row|none, not %r" % (mechanism, normalize))


def family_attention(mechanism, phiQ, phiK, normalize="row", **weight_options):
    """A of 1.8: P = W * (phiQ phiK^T), row-normalised (row) or not (none)."""
    if normalize not in ("row", "none"):
        raise ValueError("mechanism %r takes normalize row|none, not %r" % (mechanism, normalize))
    N = phiQ.shape[0]
    W = family_weights(mechanism, N, **weight_options)
    P = np.where(W != 0.0, W * (phiQ @ phiK.T), 0.0)     # W is 0 off the mask: no -0.0 there
    return _normalise(P, normalize, mechanism)


def cosformer_factors(phiQ, phiK, causal=False):
    """The cos/sin split of cosformer (1.8): cos(a(t - j)) = cos(at)cos(aj) + sin(at)sin(aj), a = pi / (2N), so
    non-causally P = [phiQ cos, phiQ sin] [phiK cos, phiK sin]^T (rank <= 2r). Returns (L, R), N x 2r each;
    causal: P = tril(L R^T). For the identities, not for the answers."""
    N = phiQ.shape[0]
    a = np.pi / (2.0 * N)
    c = np.cos(a * np.arange(N))[:, None]
    sn = np.sin(a * np.arange(N))[:, None]
    return np.hstack([phiQ * c, phiQ * sn]), np.hstack([phiK * c, phiK * sn])


def attention_matrix(mechanism, Q, K, scale=None, causal=False, feature_map="relu",
                     favor_features=256, seed=0, blocks=None, chunk=None, grid=None, block_grid=None,
                     token_order="raster", mixing=None, mixing_sigma=3.0, mixing_threshold=1.5,
                     mixing_matrix=None, normalize="row", decay=None, head=0, gates=None, gates_log=False):
    """The N x N matrix A of docs/maths.md 1 and attention.md 1.8 (float64).
    decay, head (only for decay's default), gates, gates_log: see family_weights() / load_gates()."""
    Q = np.asarray(Q, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    assert Q.shape == K.shape and Q.ndim == 2
    if mechanism == "softmax":
        return softmax_attention(Q, K, scale, causal)
    N = Q.shape[0]
    if mechanism not in ("linear", "mhla") + NEW_FAMILIES:
        raise ValueError("unknown mechanism " + repr(mechanism))
    if mechanism == "gated" and not causal:
        raise ValueError("mechanism 'gated' is causal only (set causal=True / --causal)")
    phiQ = apply_feature_map(feature_map, Q, favor_features, seed)
    phiK = apply_feature_map(feature_map, K, favor_features, seed)
    if mechanism == "linear":
        return kernel_attention(phiQ, phiK, np.zeros(N, dtype=np.int64), np.ones((1, 1)), causal, normalize)
    if mechanism == "mhla":
        blk, Mc = mhla_layout(N, causal, blocks, chunk, grid, block_grid, token_order, mixing, mixing_sigma,
                              mixing_threshold, mixing_matrix)
        return kernel_attention(phiQ, phiK, blk, Mc, causal, normalize)
    return family_attention(mechanism, phiQ, phiK, normalize, causal=causal, decay=decay, head=head, grid=grid,
                            block_grid=block_grid, token_order=token_order, gates=gates, gates_log=gates_log)


def causal_rule(mechanism, N, causal=False, blocks=None, chunk=None, grid=None, block_grid=None,
                token_order="raster", **_ignored):
    """N x N bool: j allowed to t by the causal rule alone (all True when not causal). MHLA: blk(j) < blk(t), or
    the same block and j <= t; every other mechanism: j <= t."""
    if mechanism == "gated" and not causal:
        raise ValueError("mechanism 'gated' is causal only (set causal=True / --causal)")
    if not causal:
        return np.ones((N, N), dtype=bool)
    t = np.arange(N)[:, None]
    j = np.arange(N)[None, :]
    if mechanism == "mhla":
        blk, _ = block_layout(N, blocks, chunk, grid, block_grid, token_order)
        return (blk[None, :] < blk[:, None]) | ((blk[None, :] == blk[:, None]) & (j <= t))
    return j <= t


def allowed_keys(mechanism, N, causal=False, blocks=None, chunk=None, grid=None, block_grid=None,
                 token_order="raster", **_ignored):
    """n_t of docs/maths.md 2: N, or the number of keys the causal rule allows (t+1 for softmax / linear /
    decay / gated / cosformer; MHLA's block rule). gated without causal is an error, as in attention_matrix."""
    if mechanism == "gated" and not causal:
        raise ValueError("mechanism 'gated' is causal only (set causal=True / --causal)")
    if not causal:
        return np.full(N, N, dtype=np.int64)
    if mechanism in ("softmax", "linear") + NEW_FAMILIES:
        return np.arange(1, N + 1, dtype=np.int64)
    blk, _ = block_layout(N, blocks, chunk, grid, block_grid, token_order)
    t = np.arange(N)[:, None]
    j = np.arange(N)[None, :]
    allowed = (blk[None, :] < blk[:, None]) | ((blk[None, :] == blk[:, None]) & (j <= t))
    return allowed.sum(axis=1).astype(np.int64)


# ------------------------------------------------------------------------------------------------
# 2. Metrics.
def spectrum(A, rank_rtol=None):
    A = np.asarray(A, dtype=np.float64)
    s = np.linalg.svd(A, compute_uv=False)
    rows, cols = A.shape
    s1 = s[0] if s.size else 0.0
    tol = rank_rtol * s1 if rank_rtol is not None else s1 * max(rows, cols) * np.finfo(np.float64).eps
    rank = int(np.sum(s > tol))
    if s1 > 0:
        p = s / s.sum()
        p = p[p > 0]
        eff = float(np.exp(-np.sum(p * np.log(p))))
        stable = float(np.sum(s ** 2) / s1 ** 2)
    else:
        eff = 0.0
        stable = 0.0
    return {"singular_values": [float(x) for x in s], "rank_tol": float(tol), "rank": rank,
            "relative_rank": rank / rows, "effective_rank": eff, "stable_rank": stable}


def row_entropies(A):
    A = np.asarray(A, dtype=np.float64)
    safe = np.where(A > 0, A, 1.0)
    return 0.0 - np.sum(np.where(A > 0, A * np.log(safe), 0.0), axis=1)   # 0.0 - x: no -0.0


def entropy_stats(A, allowed):
    H = row_entropies(A)
    allowed = np.asarray(allowed)
    norm = np.where(allowed > 1, H / np.log(np.maximum(allowed, 2)), 0.0)
    return {"mean": float(H.mean()), "std": float(H.std()), "min": float(H.min()), "max": float(H.max()),
            "normalized_mean": float(norm.mean())}, H


def metrics(A, allowed=None, rank_rtol=None, top_k=None, row_entropy=False):
    """A dict shaped like one result of the analyze JSON (docs/cli.md). Every spectral number comes from the full
    spectrum; top_k only shortens the reported singular_values list. entropy is None (with a warning)
    when A has a negative entry."""
    A = np.asarray(A, dtype=np.float64)
    if allowed is None:
        allowed = np.full(A.shape[0], A.shape[1])
    out = spectrum(A, rank_rtol)
    if top_k is not None:
        out["singular_values"] = out["singular_values"][:top_k]
    out["warnings"] = []
    if np.any(A < 0):
        out["entropy"] = None
        out["warnings"].append("the matrix has negative entries: entropy is not defined")
        H = None
    else:
        out["entropy"], H = entropy_stats(A, allowed)
    if row_entropy:
        out["row_entropy"] = None if H is None else [float(h) for h in H]
    return out


# ------------------------------------------------------------------------------------------------
# 2.1 Measures that separate the model from the mask and the defaults.
RTOL_KEYS = (("1e-2", 1e-2), ("1e-3", 1e-3), ("1e-4", 1e-4), ("1e-6", 1e-6), ("1e-8", 1e-8), ("1e-10", 1e-10),
             ("1e-12", 1e-12))


def support_mask(mechanism, N, **options):
    """N x N bool: S_t as rows, the keys that can have a non-zero weight by construction (2.1).

    The causal rule, and for MHLA Mc[blk(t), blk(j)] != 0 (a learned or preset Mc with zeros, e.g. local,
    identity, causal-local used non-causally; a signed Mc's negative entries are non-zero and count).
    Nothing else is structurally zero:
      softmax:   exp(score) > 0 for every finite score;
      linear:    phi(q).phi(k) is data, not construction (it may vanish for identity features, but only by the data);
      decay:     gamma^dist with 0 < gamma <= 1 is > 0 for every finite dist (gamma = 1 gives 1);
      gated:     a product of gates in (0, 1] is > 0;
      cosformer: |t - j| <= N - 1 < N, so pi/2 (t - j)/N lies in (-pi/2, pi/2) and the cos factor is > 0
                 (it would be 0 only at |t - j| = N, which no pair of N tokens reaches).
    Floating-point underflow (gamma^dist or a long gate product below 1e-308, exp of a very negative score)
    can make an entry 0.0 in A; that is not "by construction" and does not shrink S_t."""
    allowed = causal_rule(mechanism, N, **options)
    if mechanism == "mhla":
        keys = ("causal", "blocks", "chunk", "grid", "block_grid", "token_order", "mixing", "mixing_sigma",
                "mixing_threshold", "mixing_matrix")
        blk, Mc = mhla_layout(N, **{k: v for k, v in options.items() if k in keys})
        allowed = allowed & (Mc[np.ix_(blk, blk)] != 0.0)
    return allowed


def support_sizes(mechanism, N, **options):
    """|S_t| for every row t."""
    return support_mask(mechanism, N, **options).sum(axis=1).astype(np.int64)


def energy_rank(s, fraction):
    """The smallest k with s_1^2 + ... + s_k^2 >= fraction * sum_i s_i^2 (s descending). The partial sums are
    accumulated in order (numpy.cumsum) and the total is the last partial sum, so some k <= len(s) always
    qualifies. 0 for an all-zero spectrum (the empty sum already qualifies)."""
    s = np.asarray(s, dtype=np.float64)
    if s.size == 0:
        return 0
    c = np.cumsum(s ** 2)
    target = fraction * c[-1]
    if target <= 0.0:
        return 0
    for k in range(1, s.size + 1):
        if c[k - 1] >= target:
            return k
    raise AssertionError("unreachable")


def ranks_at_rtol(s):
    """rank_at_rtol of 2.1: {"1e-2": #{s_i > 1e-2 s_1}, ..., "1e-12": ...} (keys are strings)."""
    s = np.asarray(s, dtype=np.float64)
    s1 = s[0] if s.size else 0.0
    return {key: int(np.sum(s > r * s1)) for key, r in RTOL_KEYS}


def spectral_measures(s):
    """energy_rank_90, energy_rank_99 and rank_at_rtol of one spectrum."""
    return {"energy_rank_90": energy_rank(s, 0.90), "energy_rank_99": energy_rank(s, 0.99),
            "rank_at_rtol": ranks_at_rtol(s)}


def past_block(A, h=None, rank_rtol=None):
    """past_block of 2.1: the metrics of A[h:N, 0:h] (rows h.., cols ..h-1), h default floor(N/2):
    rows, cols, rank (section 2's rule on the block's own singular values: tol = s_1 * max(rows, cols) * 2^-52,
    or rank_rtol * s_1), effective_rank, energy_rank_90, energy_rank_99. h must be in 1..N-1 (ValueError
    otherwise; with the default h that means N >= 2).
    The spec says every entry of the block is allowed; that holds for the j <= t rule (softmax, linear, the 1.8
    families) and for causal MHLA on 1-D blocks, but not always for causal MHLA on a raster grid (blocks are not
    contiguous in token order: 6x6 grid, 3x3 blocks, h = 18: 12 of 324 entries are forbidden) nor where Mc has
    zeros (identity mixing: the whole block is structurally 0). The block is taken as it is."""
    A = np.asarray(A, dtype=np.float64)
    N = A.shape[0]
    if h is None:
        h = N // 2
    h = int(h)
    if not (1 <= h <= N - 1):
        raise ValueError("past_split h must lie in 1..N-1 (N = %d), got %d" % (N, h))
    B = A[h:N, 0:h]
    sp = spectrum(B, rank_rtol)
    return {"rows": int(B.shape[0]), "cols": int(B.shape[1]), "rank": sp["rank"],
            "effective_rank": sp["effective_rank"],
            "energy_rank_90": energy_rank(sp["singular_values"], 0.90),
            "energy_rank_99": energy_rank(sp["singular_values"], 0.99)}


def default_past_splits(N, count=16, blk=None):
    """The split set H of 2.2 (docs/maths.md): `count` splits evenly spaced, floor(i N / (count + 1)) for
    i = 1..count (count capped at N - 1), plus every block boundary (the first token of each block; blk = the
    block of each token, None for one block), each in 1..N-1, ascending and distinct. count = "all": 1..N-1."""
    if count == "all":
        return list(range(1, N))
    count = max(0, min(int(count), N - 1))
    hs = {(i * N) // (count + 1) for i in range(1, count + 1)}
    if blk is not None:
        blk = np.asarray(blk)
        for b in np.unique(blk):
            hs.add(int(np.flatnonzero(blk == b)[0]))
    return sorted(h for h in hs if 1 <= h <= N - 1)


def past_profile(A, splits, rank_rtol=None):
    """past_profile of 2.2: {h, rows, cols, rank, energy_rank_99} of A[h:N, 0:h] for each h, from the dense SVD
    of each block (the rank rule of section 2 on the block's own values), and semiseparable_rank = the largest."""
    A = np.asarray(A, dtype=np.float64)
    N = A.shape[0]
    out = []
    for h in splits:
        B = A[h:N, 0:h]
        sp = spectrum(B, rank_rtol)
        out.append({"h": int(h), "rows": int(N - h), "cols": int(h), "rank": sp["rank"],
                    "energy_rank_99": energy_rank(sp["singular_values"], 0.99)})
    return out, max((p["rank"] for p in out), default=0)


def logit_norm(mechanism, Q, K, scale=None, causal=False, feature_map="relu", favor_features=256, seed=0, **_ignored):
    """logit_norm of 2.2 (Zhai et al. 2023): the largest singular value of the scores before mask and normalisation,
    scale Q K^T for softmax (scale default 1/sqrt(d)), Phi_Q Phi_K^T for the kernel mechanisms (cosformer: its
    cos/sin-weighted factors, so the scores carry the cos weight; MHLA without mixing; decay / gated without weights).
    Here from the formed N x N scores (numpy.linalg.norm(., 2)), not from factors."""
    Q = np.asarray(Q, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    if mechanism == "softmax":
        sc = 1.0 / np.sqrt(Q.shape[1]) if scale is None else scale
        return float(np.linalg.norm(sc * (Q @ K.T), 2))
    phiQ = apply_feature_map(feature_map, Q, favor_features, seed)
    phiK = apply_feature_map(feature_map, K, favor_features, seed)
    if mechanism == "cosformer":
        phiQ, phiK = cosformer_factors(phiQ, phiK, causal)
    return float(np.linalg.norm(phiQ @ phiK.T, 2))


def token_distances(N, grid=None, block_grid=None, token_order="raster"):
    """N x N token distances of 2.2: |t - j| in 1-D, the Euclidean distance of the grid positions with a grid."""
    if grid is None:
        t = np.arange(N, dtype=np.float64)
        return np.abs(t[:, None] - t[None, :])
    pos = grid_positions(N, grid, block_grid, token_order).astype(np.float64)
    return np.sqrt(((pos[:, None, :] - pos[None, :, :]) ** 2).sum(axis=2))


def locality(A, grid=None, block_grid=None, token_order="raster"):
    """(mean_distance, mass_within) of 2.2: mean over rows of sum_j A[t,j] dist(t,j), and {r: mean over rows of the
    mass at dist <= r} for r = 1, 2, 4, ... below N (keys as strings, as the JSON). (None, None) when an entry is
    negative."""
    A = np.asarray(A, dtype=np.float64)
    N = A.shape[0]
    if np.any(A < 0):
        return None, None
    D = token_distances(N, grid, block_grid, token_order)
    mean = float((A * D).sum(axis=1).mean())
    mass = {}
    r = 1
    while r < N:
        mass[str(r)] = float((A * (D <= r)).sum(axis=1).mean())
        r *= 2
    return mean, mass


def mechanism_distance(Aa, Ab):
    """distance[a][b] of 2.2: tv = mean over rows of 0.5 sum_j |A_a - A_b|, js = mean Jensen-Shannon divergence
    (nats; 0 ln 0 = 0), both None unless every row of both is a distribution (>= 0, sums 1 within 1e-9);
    rel_frobenius = ||A_a - A_b||_F / ||A_b||_F."""
    Aa = np.asarray(Aa, dtype=np.float64)
    Ab = np.asarray(Ab, dtype=np.float64)
    out = {"tv": None, "js": None, "rel_frobenius": float(np.linalg.norm(Aa - Ab) / np.linalg.norm(Ab))}
    dist = (np.all(Aa >= 0) and np.all(Ab >= 0) and np.all(np.abs(Aa.sum(axis=1) - 1) <= 1e-9)
            and np.all(np.abs(Ab.sum(axis=1) - 1) <= 1e-9))
    if dist:
        out["tv"] = float((0.5 * np.abs(Aa - Ab).sum(axis=1)).mean())
        M = 0.5 * (Aa + Ab)
        with np.errstate(divide="ignore", invalid="ignore"):
            ka = np.where(Aa > 0, Aa * np.log(Aa / M), 0.0)
            kb = np.where(Ab > 0, Ab * np.log(Ab / M), 0.0)
        out["js"] = float((0.5 * ka.sum(axis=1) + 0.5 * kb.sum(axis=1)).mean())
    return out


def support_normalized_mean(A, sizes):
    """entropy.support_normalized_mean of 2.1: mean over rows of H_t / ln|S_t|, rows with |S_t| <= 1 count as 0.
    None when A has a negative entry (entropy is undefined, as in metrics())."""
    A = np.asarray(A, dtype=np.float64)
    if np.any(A < 0):
        return None
    H = row_entropies(A)
    sizes = np.asarray(sizes)
    norm = np.where(sizes > 1, H / np.log(np.maximum(sizes, 2)), 0.0)
    return float(norm.mean())


def baseline_matrix(mechanism, N, normalize="row", scale=None, feature_map=None, favor_features=None, seed=None,
                    **options):
    """A0 of 2.1: the mechanism with every phi(q_t).phi(k_j) (softmax: every score) replaced by 1, on the same
    mask, blocks, Mc, decay and gates, normalised like A.
      softmax:   rowsoftmax of a constant score on the causal rule = 1 / n_t on the allowed keys (scale and
                 normalize play no part: softmax has neither a kernel nor a normalize option);
      linear:    P0 = 1 on the causal rule (normalize as for MHLA with one block and Mc = [[1]]: attention_matrix()
                 applies it to linear attention too, although docs/maths.md says linear is always row-normalised);
      mhla:      P0[t,j] = Mc[blk(t), blk(j)] on MHLA's causal rule; official normalisation: den0(t) =
                 1e-6 + sum_b Mc[i, b] * |b| (phi(q_{b,p}) . z_b = sum_{j in b} phi(q_{b,p}).phi(k_j) with each
                 product replaced by 1 gives the block size |b|);
      decay, gated, cosformer: P0 = W of family_weights() (gamma^dist, the gate products, the cos factor);
    then row (P0 / row sum), none (P0) or official (P0 / den0). The feature map plays no part (the
    arguments are accepted so the same options dict fits every function)."""
    if mechanism == "softmax":
        mask = causal_rule("softmax", N, **options)
        S0 = np.where(mask, 1.0, -np.inf)
        S0 = S0 - S0.max(axis=1, keepdims=True)
        E = np.exp(S0)
        return E / E.sum(axis=1, keepdims=True)
    causal = bool(options.get("causal", False))
    if mechanism in ("linear", "mhla"):
        if mechanism == "linear":       # as attention_matrix(): MHLA with one block and Mc = [[1]]
            blk, Mc = np.zeros(N, dtype=np.int64), np.ones((1, 1))
        else:
            keys = ("causal", "blocks", "chunk", "grid", "block_grid", "token_order", "mixing", "mixing_sigma",
                    "mixing_threshold", "mixing_matrix")
            blk, Mc = mhla_layout(N, **{k: v for k, v in options.items() if k in keys})
        P0 = np.where(causal_rule(mechanism, N, **options), Mc[np.ix_(blk, blk)], 0.0)
        if normalize == "official":
            assert not causal, "official normalisation is non-causal only"
            M = Mc.shape[0]
            size = [int(np.sum(blk == b)) for b in range(M)]
            assert len(set(size)) == 1, "official normalisation needs equal blocks"
            den0 = np.array([OFFICIAL_EPS + sum(Mc[blk[t], b] * size[b] for b in range(M)) for t in range(N)])
            return P0 / den0[:, None]
        return _normalise(P0, normalize, mechanism)
    if mechanism in NEW_FAMILIES:
        keys = ("causal", "decay", "head", "grid", "block_grid", "token_order", "gates", "gates_log")
        W = family_weights(mechanism, N, **{k: v for k, v in options.items() if k in keys})
        return _normalise(W, normalize, mechanism)
    raise ValueError("unknown mechanism " + repr(mechanism))


def baseline_measures(A0, allowed, rank_rtol=None):
    """baseline of 2.1: rank, effective_rank, stable_rank, energy_rank_90, energy_rank_99 and
    entropy {mean, normalized_mean} (None when A0 has a negative entry) of A0; None when A0 is not finite
    (a row normaliser <= 0 with a signed Mc: the degenerate-normaliser rule)."""
    A0 = np.asarray(A0, dtype=np.float64)
    if not np.all(np.isfinite(A0)):
        return None
    sp = spectrum(A0, rank_rtol)
    out = {"rank": sp["rank"], "effective_rank": sp["effective_rank"], "stable_rank": sp["stable_rank"],
           "energy_rank_90": energy_rank(sp["singular_values"], 0.90),
           "energy_rank_99": energy_rank(sp["singular_values"], 0.99)}
    if np.any(A0 < 0):
        out["entropy"] = None
    else:
        stats, _ = entropy_stats(A0, allowed)
        out["entropy"] = {"mean": stats["mean"], "normalized_mean": stats["normalized_mean"]}
    return out


def measures(mechanism, Q, K, A=None, rank_rtol=None, past_split=None, past_splits=None, **options):
    """The 2.1 measures of one mechanism on (Q, K), as the analyze JSON names them (cli.md "Added for the next
    round"): energy_rank_90, energy_rank_99, rank_at_rtol, baseline, excess_effective_rank,
    entropy_below_baseline, support_normalized_mean (goes into the result's "entropy"), past_block (present only
    when causal or past_split is given), warnings. options: those of attention_matrix(); A may be given to skip
    recomputing it. The full spectrum is always used (the reference has no top-k path)."""
    Q = np.asarray(Q, dtype=np.float64)
    N = Q.shape[0]
    if A is None:
        A = attention_matrix(mechanism, Q, K, **options)
    A = np.asarray(A, dtype=np.float64)
    warnings = []
    causal = bool(options.get("causal", False))
    out = {}
    if not np.all(np.isfinite(A)):
        warnings.append("the matrix has non-finite entries (a row normaliser is zero): no measure is reported")
        out.update(energy_rank_90=None, energy_rank_99=None, rank_at_rtol=None, baseline=None,
                   excess_effective_rank=None, entropy_below_baseline=None, support_normalized_mean=None)
        if causal or past_split is not None or past_splits is not None:
            out["past_block"] = None
            out["past_profile"] = None
            out["semiseparable_rank"] = None
        out["warnings"] = warnings
        return out
    sp = spectrum(A, rank_rtol)
    out.update(spectral_measures(sp["singular_values"]))
    allowed = allowed_keys(mechanism, N, **options)
    baseline_options = {k: v for k, v in options.items() if k not in ("scale", "feature_map", "favor_features",
                                                                       "seed")}
    if mechanism == "softmax":
        baseline_options.pop("normalize", None)
    A0 = baseline_matrix(mechanism, N, **baseline_options)
    base = baseline_measures(A0, allowed, rank_rtol)
    out["baseline"] = base
    if base is None:
        warnings.append("the content-free baseline has a row normaliser <= 0: no baseline is reported")
        out["excess_effective_rank"] = None
        out["entropy_below_baseline"] = None
    else:
        out["excess_effective_rank"] = sp["effective_rank"] - base["effective_rank"]
        if base["entropy"] is None:
            warnings.append("the content-free baseline has negative entries: its entropy is not defined")
        if base["entropy"] is None or np.any(A < 0):
            out["entropy_below_baseline"] = None
        else:
            out["entropy_below_baseline"] = base["entropy"]["mean"] - float(row_entropies(A).mean())
    out["support_normalized_mean"] = support_normalized_mean(A, support_sizes(mechanism, N, **options))
    if causal or past_split is not None or past_splits is not None:
        out["past_block"] = past_block(A, past_split, rank_rtol)
        blk = None
        if mechanism == "mhla":
            layout_keys = ("blocks", "chunk", "grid", "block_grid", "token_order")
            blk, _ = block_layout(N, **{key: options[key] for key in layout_keys if options.get(key) is not None})
        splits = default_past_splits(N, 16 if past_splits is None else past_splits, blk)
        if past_splits != "all":   # the past block's own split belongs to H
            splits = sorted(set(splits) | {N // 2 if past_split is None else int(past_split)})
        out["past_profile"], out["semiseparable_rank"] = past_profile(A, splits, rank_rtol)
    out["warnings"] = warnings
    return out


def analyze_result(mechanism, Q, K, rank_rtol=None, top_k=None, row_entropy=False, past_split=None, past_splits=None,
                   distance_grid=None, **options):
    """One result of the analyze JSON with the 2.1 measures: metrics() plus energy_rank_90, energy_rank_99,
    rank_at_rtol, baseline, excess_effective_rank, entropy_below_baseline, entropy.support_normalized_mean and
    past_block (when causal or past_split is given)."""
    A = attention_matrix(mechanism, Q, K, **options)
    N = A.shape[0]
    out = metrics(A, allowed_keys(mechanism, N, **options), rank_rtol, top_k, row_entropy)
    m = measures(mechanism, Q, K, A=A, rank_rtol=rank_rtol, past_split=past_split, past_splits=past_splits, **options)
    if out["entropy"] is not None:
        out["entropy"]["support_normalized_mean"] = m["support_normalized_mean"]
    for key in ("energy_rank_90", "energy_rank_99", "rank_at_rtol", "baseline", "excess_effective_rank",
                "entropy_below_baseline", "past_block", "past_profile", "semiseparable_rank"):
        if key in m:
            out[key] = m[key]
    out["warnings"] += m["warnings"]
    # 2.2's logit norm and locality; distance_grid = (grid, block_grid, token_order) of the analysis (every
    # mechanism's token distances), default the mechanism's own options.
    out["logit_norm"] = logit_norm(mechanism, Q, K, **options)
    if distance_grid is None:
        distance_grid = (options.get("grid"), options.get("block_grid"), options.get("token_order", "raster"))
    out["mean_distance"], out["mass_within"] = locality(A, *distance_grid)
    return out


# ------------------------------------------------------------------------------------------------
# 2.1 Aggregation over units (inputs, heads, layers, seeds).
#
# The procedure, fixed here so the C++ can reproduce it number for number:
#   values:    per (mechanism, metric) the finite values, in the order their records appear in `units`
#              (None / NaN / missing = not measured on that unit, left out; n counts what is left).
#   mean:      sum in that order (left to right, plain double additions) / n.
#   std:       SAMPLE standard deviation (ddof = 1): sqrt(sum (x - mean)^2 / (n - 1)), None when n < 2.
#              The spec says only "std"; section 2's row-entropy std is the population one. [flag for the lead]
#   interval:  95% percentile bootstrap, 2000 resamples, a fresh SplitMix64(seed = 0) for EVERY row (each
#              (mechanism, metric) and each (pair, metric)): for b = 0..1999: for i = 0..n-1:
#              idx = floor(uniform() * n) (clamped to n - 1: uniform() returns exactly 1.0 with probability
#              2^-53), total += x[idx] (in draw order, starting from 0.0); mean_b = total / n. Then
#              ci_low, ci_high = numpy.percentile(means, [2.5, 97.5]) with the default linear method, which is
#              (percentile_linear below): sort; v = p/100 * (B - 1); i = floor(v); f = v - i;
#              a = m[i], b = m[i+1]; result = a + (b - a) * f if f < 0.5 else b - (b - a) * (1 - f).
#              Rows with the same n therefore resample the same unit positions (a joint bootstrap over units).
#   pairs:     for mechanisms a before b (order of first appearance) and every metric both have: the units
#              (order of first appearance in `units`) where both values are finite; d_u = x_a(u) - x_b(u);
#              n = number of such units (ties included), mean_diff and its interval as above on d.
#   p_sign:    two-sided exact sign test on d with ties (d = 0) dropped: m = #(d != 0), k = #(d > 0);
#              p = min(1, 2 * P(X <= min(k, m - k))), X ~ Bin(m, 1/2); p = 1 when m = 0.
#   Rows with n = 0 are left out.
def percentile_linear(values, p):
    """numpy.percentile(values, p) (method 'linear', numpy 1.22+), written out."""
    m = np.sort(np.asarray(values, dtype=np.float64))
    v = p / 100.0 * (m.size - 1)
    i = int(math.floor(v))
    f = v - i
    if i >= m.size - 1:
        return float(m[-1])
    a, b = m[i], m[i + 1]
    if f >= 0.5:
        return float(b - (b - a) * (1.0 - f))
    return float(a + (b - a) * f)


_BOOTSTRAP_INDICES = {}


def bootstrap_indices(n, resamples=2000, seed=0):
    """The resampled positions: resamples lists of n indices, idx = min(floor(uniform() * n), n - 1), drawn in order
    from a fresh SplitMix64(seed). They depend on n only, so they are kept (the same numbers, drawn once)."""
    key = (n, resamples, seed)
    if key not in _BOOTSTRAP_INDICES:
        rng = SplitMix64(seed)
        _BOOTSTRAP_INDICES[key] = [[min(int(math.floor(rng.uniform() * n)), n - 1) for _ in range(n)]
                                   for _ in range(resamples)]
    return _BOOTSTRAP_INDICES[key]


def bootstrap_means(x, resamples=2000, seed=0):
    """The resampled means of x (see the procedure above)."""
    x = [float(v) for v in x]
    n = len(x)
    means = np.empty(resamples)
    for b, draw in enumerate(bootstrap_indices(n, resamples, seed)):
        total = 0.0
        for idx in draw:
            total += x[idx]
        means[b] = total / n
    return means


def bootstrap_interval(x, resamples=2000, seed=0, level=0.95):
    """(ci_low, ci_high): the percentile bootstrap interval of the mean of x."""
    means = bootstrap_means(x, resamples, seed)
    lo, hi = np.percentile(means, [50.0 * (1.0 - level), 100.0 - 50.0 * (1.0 - level)])
    return float(lo), float(hi)


def cluster_bootstrap_interval(groups, resamples=2000, seed=0, level=0.95):
    """(ci_low, ci_high): the two-stage (cluster) percentile bootstrap interval of the mean of every value of groups
    (a list of clusters, each a list of values). Per resample, from one SplitMix64(seed) drawn in this order: G
    cluster positions c = min(floor(u G), G - 1), and after each, n_c positions i = min(floor(u n_c), n_c - 1) within
    that cluster; the resample's mean is the left-to-right sum of the drawn values over their count."""
    groups = [[float(v) for v in g] for g in groups]
    G = len(groups)
    rng = SplitMix64(seed)
    means = np.empty(resamples)
    for b in range(resamples):
        total, count = 0.0, 0
        for _ in range(G):
            c = groups[min(int(math.floor(rng.uniform() * G)), G - 1)]
            n = len(c)
            for _ in range(n):
                total += c[min(int(math.floor(rng.uniform() * n)), n - 1)]
            count += n
        means[b] = total / count
    lo, hi = np.percentile(means, [50.0 * (1.0 - level), 100.0 - 50.0 * (1.0 - level)])
    return float(lo), float(hi)


def _clusters_of(values, cluster_names):
    """values grouped by their cluster names, clusters in order of first appearance."""
    order, groups = [], {}
    for v, c in zip(values, cluster_names):
        if c not in groups:
            order.append(c)
            groups[c] = []
        groups[c].append(v)
    return [groups[c] for c in order]


def sign_test_p(diffs):
    """Two-sided exact sign test: ties dropped, p = min(1, 2 P(X <= min(k, m - k))), X ~ Bin(m, 1/2)."""
    from fractions import Fraction
    pos = sum(1 for v in diffs if v > 0)
    neg = sum(1 for v in diffs if v < 0)
    m = pos + neg
    if m == 0:
        return 1.0
    k = min(pos, neg)
    tail = Fraction(sum(math.comb(m, i) for i in range(k + 1)), 2 ** m)
    return float(min(Fraction(1), 2 * tail))


def _mean(x):
    total = 0.0
    for v in x:
        total += v
    return total / len(x)


def _sample_std(x):
    if len(x) < 2:
        return None
    mu = _mean(x)
    total = 0.0
    for v in x:
        total += (v - mu) ** 2
    return math.sqrt(total / (len(x) - 1))


def _finite(v):
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and math.isfinite(v)


def flatten_result(result, prefix=""):
    """An analyze result as {metric: number or None} with dotted names ("entropy.mean", "baseline.rank",
    "rank_at_rtol.1e-3", "past_block.rank"); lists (singular_values, row_entropy, warnings) and strings are
    left out. [the naming of nested metrics in aggregate.csv is not in the spec: this is a proposal]"""
    out = {}
    for key, v in result.items():
        if key in ("singular_values", "row_entropy", "warnings", "mechanism", "params"):
            continue
        name = prefix + str(key)
        if isinstance(v, dict):
            out.update(flatten_result(v, name + "."))
        elif v is None or _finite(v):
            out[name] = v
    return out


FEW_CLUSTERS = 10   # attention.md 2.2: below this many clusters (or units), t intervals over the cluster means


def student_t_sf(t, df):
    """P(T > t) for Student's t with df degrees of freedom, to 40 digits by mpmath: I_{df/(df+t^2)}(df/2, 1/2) / 2
    for t >= 0. (scipy.stats.t is not used: its ppf is off by ~2e-9 relative at some levels.)"""
    import mpmath
    with mpmath.workdps(40):
        t, df = mpmath.mpf(t), mpmath.mpf(df)
        tail = mpmath.betainc(df / 2, mpmath.mpf(1) / 2, 0, df / (df + t * t), regularized=True)
        return tail / 2 if t >= 0 else 1 - tail / 2


def student_t_quantile(q, df):
    """The q-quantile of Student's t by bisection of student_t_sf to far below double precision."""
    import mpmath
    with mpmath.workdps(40):
        q = mpmath.mpf(q)
        if q == mpmath.mpf(1) / 2:
            return 0.0
        if q < mpmath.mpf(1) / 2:
            return -student_t_quantile(1 - q, df)
        lo, hi = mpmath.mpf(0), mpmath.mpf(1)
        while student_t_sf(hi, df) > 1 - q:
            hi *= 2
        for _ in range(120):
            mid = (lo + hi) / 2
            if student_t_sf(mid, df) > 1 - q:
                lo = mid
            else:
                hi = mid
        return float((lo + hi) / 2)


def few_cluster_stats(means, overall, level=0.95):
    """attention.md 2.2, statistics over few clusters (Student's t by mpmath, independent of the C++ incomplete
    beta): (ci_low, ci_high) = the t interval over the G means (None below two), agree = how many means share the
    sign of `overall`, p_t = the two-sided one-sample t test of mean 0 over the means (None below two)."""
    m = [float(v) for v in means]
    sgn = lambda v: (v > 0) - (v < 0)
    agree = int(sum(1 for v in m if sgn(v) == sgn(overall)))
    if len(m) < 2:
        return None, None, agree, None
    mu = _mean(m)
    sd = math.sqrt(sum((v - mu) * (v - mu) for v in m) / (len(m) - 1))
    half = student_t_quantile(0.5 * (1.0 + level), len(m) - 1) * sd / math.sqrt(len(m))
    if sd == 0:
        p = 1.0 if mu == 0 else 0.0
    else:
        p = float(min(1.0, 2.0 * student_t_sf(abs(mu) / (sd / math.sqrt(len(m))), len(m) - 1)))
    return mu - half, mu + half, agree, p


def mean_interval(x, resamples=2000, seed=0):
    """(ci_low, ci_high, ci_method) of the mean of x, its values as independent units, by the rule of aggregate rows
    (attention.md 2.2): the percentile bootstrap from FEW_CLUSTERS values, a t interval from two, none for one."""
    if len(x) >= FEW_CLUSTERS:
        return bootstrap_interval(x, resamples, seed) + ("bootstrap",)
    lo, hi, _, _ = few_cluster_stats(x, _mean(x))
    return lo, hi, ("t" if len(x) >= 2 else "none")


def holm(ps):
    """Holm's step-down adjustment; None entries are left out and stay None."""
    idx = sorted((i for i, p in enumerate(ps) if p is not None), key=lambda i: ps[i])
    out, running, m = [None] * len(ps), 0.0, len(idx)
    for j, i in enumerate(idx):
        running = max(running, min(1.0, (m - j) * ps[i]))
        out[i] = running
    return out


def _interval_row(row, x, groups, overall, resamples, seed):
    """Fills ci_low, ci_high, clusters, ci_method and agree of one row; returns the G means (clusters or values)."""
    means = [_mean(g) for g in groups] if groups is not None else list(x)
    row["clusters"] = len(means)
    if len(means) < FEW_CLUSTERS:
        lo, hi, agree, _ = few_cluster_stats(means, overall)
        row["ci_low"], row["ci_high"] = lo, hi
        row["ci_method"] = "t" if len(means) >= 2 else "none"
    else:
        _, _, agree, _ = few_cluster_stats(means, overall)
        if groups is not None:
            row["ci_low"], row["ci_high"] = cluster_bootstrap_interval(groups, resamples, seed)
            row["ci_method"] = "two-stage bootstrap"
        else:
            row["ci_low"], row["ci_high"] = bootstrap_interval(x, resamples, seed)
            row["ci_method"] = "bootstrap"
    row["agree"] = agree
    return means


def aggregate(units, resamples=2000, seed=0):
    """Statistics over units (attention.md 2.1, last bullet; cli.md aggregate.csv / aggregate.json).

    units: a list of records, one per (unit, mechanism): {"unit": id, "mechanism": name, metric: value, ...}
    (values are numbers, or None when not measured; flatten_result() turns an analyze result into such metrics).
    Returns {"mechanisms": [{"mechanism", "metric", "n", "mean", "std", "ci_low", "ci_high", "clusters",
                             "ci_method", "agree"}, ...],
             "pairs": [{"mechanism_a", "mechanism_b", "metric", "n", "mean_diff", "ci_low", "ci_high",
                        "p_sign", "clusters", "ci_method", "agree", "p_t", "p_holm"}, ...]}
    in order of first appearance (mechanisms, then metrics). The procedure is spelt out above. When the records
    carry "cluster" (a seed, a file), the G clusters are the row's values grouped by their units' clusters (in order
    of first appearance) and a pair's p_sign is the sign test over the clusters' mean differences; otherwise the G
    "clusters" are the values themselves. From FEW_CLUSTERS on the interval is the (two-stage, when clustered)
    percentile bootstrap; below, the t interval over the G means (attention.md 2.2, few_cluster_stats)."""
    mechs, metric_names, unit_ids = [], [], []
    table = {}                                  # (mechanism, unit) -> record
    clustered = bool(units) and "cluster" in units[0]
    cluster_of = {}                             # unit -> its cluster (two-stage bootstrap)
    for rec in units:
        u, mech = rec["unit"], rec["mechanism"]
        if clustered:
            if cluster_of.setdefault(u, rec["cluster"]) != rec["cluster"]:
                raise ValueError("unit %r is in two clusters" % (u,))
        if (mech, u) in table:
            raise ValueError("unit %r appears twice for mechanism %r" % (u, mech))
        table[(mech, u)] = rec
        if mech not in mechs:
            mechs.append(mech)
        if u not in unit_ids:
            unit_ids.append(u)
        for key, v in rec.items():
            if key in ("unit", "mechanism", "cluster") or key in metric_names:
                continue
            if v is None or _finite(v):
                metric_names.append(key)
    rows = []
    for mech in mechs:
        for metric in metric_names:
            sel = [rec for rec in units if rec["mechanism"] == mech and _finite(rec.get(metric))]
            x = [float(rec[metric]) for rec in sel]
            if not x:
                continue
            row = {"mechanism": mech, "metric": metric, "n": len(x), "mean": _mean(x), "std": _sample_std(x)}
            groups = _clusters_of(x, [cluster_of[rec["unit"]] for rec in sel]) if clustered else None
            _interval_row(row, x, groups, row["mean"], resamples, seed)
            rows.append(row)
    pairs = []
    for ia, a in enumerate(mechs):
        for b in mechs[ia + 1:]:
            for metric in metric_names:
                d, du = [], []
                for u in unit_ids:
                    ra, rb = table.get((a, u)), table.get((b, u))
                    if ra is None or rb is None:
                        continue
                    va, vb = ra.get(metric), rb.get(metric)
                    if _finite(va) and _finite(vb):
                        d.append(float(va) - float(vb))
                        du.append(u)
                if not d:
                    continue
                row = {"mechanism_a": a, "mechanism_b": b, "metric": metric, "n": len(d), "mean_diff": _mean(d)}
                groups = _clusters_of(d, [cluster_of[u] for u in du]) if clustered else None
                means = _interval_row(row, d, groups, row["mean_diff"], resamples, seed)
                row["p_sign"] = sign_test_p(means)
                row["p_t"] = few_cluster_stats(means, row["mean_diff"])[3]
                pairs.append(row)
    for row, p in zip(pairs, holm([r["p_t"] for r in pairs])):
        row["p_holm"] = p
    return {"mechanisms": rows, "pairs": pairs}


# ------------------------------------------------------------------------------------------------
def _ints(s):
    return [int(x) for x in s.split(",")] if s else None


def main():
    ap = argparse.ArgumentParser(description="NumPy reference attention matrix and metrics (docs/maths.md, "
                                             "attention.md 1.8 and 2.1)")
    ap.add_argument("--q", required=True)
    ap.add_argument("--k", required=True)
    ap.add_argument("--mechanism", default="mhla", choices=["softmax", "linear", "mhla"] + list(NEW_FAMILIES))
    ap.add_argument("--scale", type=float)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--feature-map", default="relu")
    ap.add_argument("--favor-features", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--blocks", type=int)
    ap.add_argument("--chunk", type=int)
    ap.add_argument("--grid")
    ap.add_argument("--block-grid")
    ap.add_argument("--token-order", default="raster")
    ap.add_argument("--mixing")
    ap.add_argument("--mixing-matrix", help=".npy file holding Mc")
    ap.add_argument("--mixing-sigma", type=float, default=3.0)
    ap.add_argument("--mixing-threshold", type=float, default=1.5)
    ap.add_argument("--normalize", default="row")
    ap.add_argument("--decay", type=float, help="decay's gamma in (0, 1]; default 1 - 2^(-5 - head)")
    ap.add_argument("--head", type=int, default=0, help="query head index (only for decay's default gamma)")
    ap.add_argument("--gates", help=".npy file holding the N gates of the head (gated)")
    ap.add_argument("--gates-log", action="store_true", help="--gates holds ln g")
    ap.add_argument("--past-split", type=int, help="h of past_block (default N // 2; reported when causal)")
    ap.add_argument("--rank-rtol", type=float)
    ap.add_argument("--top-k", type=int)
    ap.add_argument("--out", help="write A here (.npy)")
    ap.add_argument("--metrics-json", help="write metrics and the 2.1 measures here ('-' for stdout)")
    a = ap.parse_args()
    Q = np.load(a.q).astype(np.float64)
    K = np.load(a.k).astype(np.float64)
    opts = dict(scale=a.scale, causal=a.causal, feature_map=a.feature_map, favor_features=a.favor_features,
                seed=a.seed, blocks=a.blocks, chunk=a.chunk, grid=_ints(a.grid), block_grid=_ints(a.block_grid),
                token_order=a.token_order, mixing=a.mixing, mixing_sigma=a.mixing_sigma,
                mixing_threshold=a.mixing_threshold, mixing_matrix=a.mixing_matrix, normalize=a.normalize,
                decay=a.decay, head=a.head, gates=a.gates, gates_log=a.gates_log)
    try:
        A = attention_matrix(a.mechanism, Q, K, **opts)
        if a.out:
            np.save(a.out, A)
        if a.metrics_json:
            m = analyze_result(a.mechanism, Q, K, rank_rtol=a.rank_rtol, top_k=a.top_k, past_split=a.past_split,
                               **opts)
            text = json.dumps(m, indent=1)
            if a.metrics_json == "-":
                print(text)
            else:
                with open(a.metrics_json, "w") as f:
                    f.write(text)
    except ValueError as e:
        import sys
        print("error: " + str(e), file=sys.stderr)
        raise SystemExit(2)


if __name__ == "__main__":
    main()
